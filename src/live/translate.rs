//! Turns adapters' `Report`s (host names, EC2 instance ids, price points)
//! into core `Event`s (node ids, GPU refs): the one place that knows which
//! host is which node. A host seen for the first time becomes a `NodeUp`,
//! described by its EC2 instance if one matches, else by the configuration,
//! else by what its GPUs report.
//!
//! Plain and deterministic: no IO, no clock (the time comes in with each
//! call), so it is unit-tested with recorded reports.

use std::collections::BTreeMap;

use chrono::TimeDelta;

use super::catalogue::{Catalogue, NodeDecl};
use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::{Event, GpuHealth, GpuSample};
use crate::domain::ids::{GpuRef, NodeId, PoolKey};
use crate::domain::units::{At, Mib, MicrosPerHour};
use crate::sources::report::{GpuReading, Instance, NoticeKind, PricePoint, Report};

/// What a spot notice without a time means: AWS gives two minutes.
const NOTICE: TimeDelta = TimeDelta::minutes(2);

struct KnownNode {
    id: NodeId,
    gpus: u8,
    /// The EC2 instance behind it, when known.
    instance: Option<String>,
    lost: bool,
    /// Launched by the room and not yet running: its spec, for the `NodeUp`
    /// that says it takes work.
    booting: Option<NodeSpec>,
}

pub struct Translator {
    catalogue: Catalogue,
    nodes: BTreeMap<String, KnownNode>,
    by_instance: BTreeMap<String, String>,
    next_node: u32,
    prices: BTreeMap<PoolKey, (At, MicrosPerHour)>,
    /// The room's launches sent to EC2 and not answered yet: their
    /// instances come with the answer, not from a fleet poll that sees them first.
    awaiting: std::collections::BTreeSet<u64>,
    /// Slurm nodes not shown for want of their GPUs' size (said once each).
    slurm_unsized: std::collections::BTreeSet<String>,
}

/// The short host name EC2's private DNS gives a machine (`ip-10-0-1-7`),
/// which is also what dcgm-exporter's `Hostname` label says.
pub fn short_host(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

impl Translator {
    pub fn new(catalogue: Catalogue) -> Translator {
        Translator {
            catalogue,
            nodes: BTreeMap::new(),
            by_instance: BTreeMap::new(),
            next_node: 0,
            prices: BTreeMap::new(),
            awaiting: Default::default(),
            slurm_unsized: Default::default(),
        }
    }

    /// The node a host is shown as, if it has appeared.
    pub fn node_of(&self, host: &str) -> Option<NodeId> {
        self.nodes.get(short_host(host)).map(|n| n.id)
    }

    /// A host declared in the configuration with its GPUs, as a node now
    /// (this machine without NVML); `None` if not declared or already known.
    pub fn declare(&mut self, host: &str) -> Option<Event> {
        let host = short_host(host).to_string();
        if self.nodes.contains_key(&host) {
            return None;
        }
        let spec = self.catalogue.declared_spec(NodeId(self.next_node), &host)?;
        self.next_node += 1;
        Some(self.add_node(spec, None))
    }

    pub fn translate(&mut self, now: At, report: Report) -> Vec<Event> {
        match report {
            Report::Gpus { source, readings } => self.gpus(&source, readings),
            Report::Failed { source, hosts, why } => {
                let stale = hosts.iter().flat_map(|h| self.gpu_refs(h)).collect();
                let detail = without_echo(&source, &why).to_string();
                vec![Event::SourceStatus { source, ok: false, detail, stale }]
            }
            Report::Healthy { source, detail } => vec![Event::SourceStatus { source, ok: true, detail, stale: Vec::new() }],
            Report::Prices { points } => self.prices(points),
            Report::Fleet { instances } => self.fleet(instances),
            Report::Notice { host, kind, deadline } => self.notice(now, &host, kind, deadline),
            Report::Slurm { snapshot } => self.slurm(snapshot),
            Report::Launched { request, instances } => {
                self.awaiting.remove(&request);
                self.launched(request, instances)
            }
            Report::LaunchFailed { request, count, failure, message } => {
                self.awaiting.remove(&request);
                vec![Event::LaunchFailed { request, count, failure, message }]
            }
            Report::Released { node, instance } => {
                self.by_instance.remove(&instance);
                if let Some(known) = self.nodes.values_mut().find(|n| n.id == node) {
                    known.lost = true;
                    known.booting = None;
                }
                vec![Event::Released { node }]
            }
            Report::ReleaseFailed { node, message } => vec![Event::ReleaseFailed { node, message }],
            Report::Core(event) => vec![event],
        }
    }

    /// The room asked EC2 for launch `request`.
    pub fn expect_launch(&mut self, request: u64) {
        self.awaiting.insert(request);
    }

    /// The EC2 instance behind a node, when it has one.
    pub fn instance_of(&self, node: NodeId) -> Option<&str> {
        self.nodes.values().find(|n| n.id == node && !n.lost).and_then(|n| n.instance.as_deref())
    }

    /// The spec of a pool's node as the catalogue knows its instance type
    /// (id and name are the launch's to give); `None` for a type it does not know.
    pub fn pool_node(&self, instance_type: &str, zone: &str, billing: BillingMode) -> Option<NodeSpec> {
        let shape = self.catalogue.instance_type(instance_type)?;
        let decl = NodeDecl { billing: Some(billing), instance_type: Some(instance_type.to_string()), zone: Some(zone.to_string()), ..NodeDecl::default() };
        Some(self.catalogue.host_spec(NodeId(0), instance_type, Some(&decl), shape.gpus, Some(shape.gpu_model.clone()), Some(shape.gpu_memory)))
    }

    /// Instances of the room's launch: nodes now, booting (`Launched`);
    /// each takes work once the fleet shows it running.
    fn launched(&mut self, request: u64, instances: Vec<Instance>) -> Vec<Event> {
        let mut events = Vec::new();
        for i in instances {
            let host = i.private_dns.as_deref().map(short_host).filter(|h| !h.is_empty()).unwrap_or(&i.id).to_string();
            let billing = if i.spot { BillingMode::Spot } else { BillingMode::OnDemand };
            let Some(mut spec) = self.pool_node(&i.instance_type, &i.zone, billing) else {
                let message = format!("launched {} is a {}, a type gpuroom does not know", i.id, i.instance_type);
                events.push(Event::SourceStatus { source: "aws ec2".into(), ok: false, detail: message, stale: Vec::new() });
                continue;
            };
            spec.id = self.next_id();
            spec.name = host.clone();
            if billing == BillingMode::Spot {
                spec.max_price = i.max_price.or(Some(spec.on_demand_price));
            }
            self.by_instance.insert(i.id.clone(), host.clone());
            let running = i.state == "running";
            let known = KnownNode { id: spec.id, gpus: spec.gpu_count, instance: Some(i.id.clone()), lost: false, booting: (!running).then(|| spec.clone()) };
            self.nodes.insert(host, known);
            events.push(Event::Launched { request, spec: spec.clone() });
            if running {
                events.push(Event::NodeUp { spec });
            }
        }
        events
    }

    fn gpu_refs(&self, host: &str) -> Vec<GpuRef> {
        match self.nodes.get(short_host(host)) {
            Some(n) if !n.lost => (0..n.gpus).map(|index| GpuRef { node: n.id, index }).collect(),
            _ => Vec::new(),
        }
    }

    fn next_id(&mut self) -> NodeId {
        let id = NodeId(self.next_node);
        self.next_node += 1;
        id
    }

    fn add_node(&mut self, spec: NodeSpec, instance: Option<String>) -> Event {
        let host = spec.name.clone();
        self.add_host(host, spec, instance)
    }

    /// A node known by `host` (what dcgm-exporter and EC2 call the machine),
    /// shown by its spec's name (on a Slurm site, Slurm's name for it).
    fn add_host(&mut self, host: String, spec: NodeSpec, instance: Option<String>) -> Event {
        let id = spec.id;
        if let Some(i) = &instance {
            self.by_instance.insert(i.clone(), host.clone());
        }
        self.nodes.insert(host, KnownNode { id, gpus: spec.gpu_count, instance, lost: false, booting: None });
        Event::NodeUp { spec }
    }

    /// Every Slurm node with GPUs is a node of the room, matched by its
    /// machine's host name to what dcgm-exporter, NVML and EC2 already
    /// showed (an EC2 instance says its type and billing), else described by
    /// the configuration (by name, pattern or partition), else by its GRES.
    /// The snapshot goes on with each node's room id filled in.
    fn slurm(&mut self, mut snapshot: crate::domain::slurm::SlurmSnapshot) -> Vec<Event> {
        let mut events = Vec::new();
        for n in &mut snapshot.nodes {
            let host = short_host(n.host()).to_string();
            if let Some(known) = self.nodes.get(&host).filter(|k| !k.lost) {
                n.node = Some(known.id);
                continue;
            }
            if n.gpus == 0 || host.is_empty() {
                continue;
            }
            let decl = self.catalogue.node_in(&n.name, &n.partitions).or_else(|| self.catalogue.node_in(&host, &n.partitions)).cloned();
            let typed = decl.as_ref().and_then(|d| d.instance_type.as_deref()).and_then(|t| self.catalogue.instance_type(t)).is_some();
            // Slurm's GRES type ("a100", or a site's own word) names the model only when nothing better does.
            let model = if typed || decl.as_ref().is_some_and(|d| d.gpu_model.is_some()) { None } else { n.gpu_type.clone() };
            let spec = self.catalogue.host_spec(NodeId(self.next_node), &n.name, decl.as_ref(), u8::try_from(n.gpus).unwrap_or(u8::MAX), model, None);
            if let Some(problem) = spec.problem() {
                // GRES says how many GPUs, never how big: the node waits for
                // dcgm-exporter or a declaration to say it.
                if self.slurm_unsized.insert(n.name.clone()) {
                    let detail = format!(
                        "Slurm node {}: {problem}; its GPUs' memory comes from dcgm-exporter on it, or declare it ([[sources.nodes]] gpu_memory_mib or instance_type)",
                        n.name
                    );
                    events.push(Event::SourceStatus { source: "slurm nodes".into(), ok: false, detail, stale: Vec::new() });
                }
                continue;
            }
            self.next_node += 1;
            n.node = Some(spec.id);
            events.push(self.add_host(host, spec, None));
        }
        events.push(Event::Slurm { snapshot });
        events
    }

    fn gpus(&mut self, source: &str, readings: Vec<GpuReading>) -> Vec<Event> {
        // NVML lists a GPU's processes; dcgm-exporter does not, so there the count is unknown.
        let lists_processes = source == "nvml";
        let mut by_host: BTreeMap<String, Vec<GpuReading>> = BTreeMap::new();
        for r in readings {
            by_host.entry(short_host(&r.host).to_string()).or_default().push(r);
        }
        let mut events = Vec::new();
        let mut samples = Vec::new();
        let mut health = Vec::new();
        for (host, readings) in by_host {
            if self.nodes.get(&host).is_none_or(|n| n.lost) {
                let decl = self.catalogue.node(&host).cloned();
                let whole: Vec<&GpuReading> = readings.iter().filter(|r| r.mig_instance.is_none()).collect();
                let count = whole.iter().map(|r| r.index).max().map_or(0, |m| m.saturating_add(1));
                if count == 0 {
                    continue;
                }
                let model = whole.iter().find_map(|r| r.model.clone());
                let memory = whole.iter().find_map(|r| r.mem_total());
                let id = self.next_id();
                let spec = self.catalogue.host_spec(id, &host, decl.as_ref(), count, model, memory);
                events.push(self.add_node(spec, None));
            }
            let Some(node) = self.nodes.get(&host) else { continue };
            let (id, gpus) = (node.id, node.gpus);
            for r in readings.iter().filter(|r| r.mig_instance.is_none() && r.index < gpus) {
                let slices: Vec<&GpuReading> = readings.iter().filter(|s| s.index == r.index && s.mig_instance.is_some()).collect();
                let gpu = GpuRef { node: id, index: r.index };
                // In MIG mode the GPU itself reports no utilization: its slices do.
                let util = r.util_pct.or_else(|| mean(slices.iter().filter_map(|s| s.util_pct)));
                let used = r.mem_used.or_else(|| slices.iter().map(|s| s.mem_used.map(|m| m.0)).sum::<Option<u32>>().map(Mib));
                if let Some(util) = util.filter(|u| u.is_finite()) {
                    samples.push(GpuSample(gpu, util, used.unwrap_or(Mib(0))));
                }
                health.push(GpuHealth {
                    gpu,
                    temp_c: r.temp_c,
                    power_w: r.power_w,
                    sm_clock_mhz: r.sm_clock_mhz,
                    mem_clock_mhz: r.mem_clock_mhz,
                    processes: lists_processes.then_some(r.processes.len() as u32),
                    mig_instances: slices.len() as u32,
                });
            }
        }
        if !samples.is_empty() {
            events.push(Event::Telemetry { gpus: samples, progress: Vec::new() });
        }
        if !health.is_empty() {
            events.push(Event::GpuHealth { readings: health });
        }
        events
    }

    /// Only the newest point per pool becomes a `PriceTick` (the room's
    /// clock is the wall clock, so older points cannot be replayed into it).
    fn prices(&mut self, points: Vec<PricePoint>) -> Vec<Event> {
        let mut newest: BTreeMap<PoolKey, (At, MicrosPerHour)> = BTreeMap::new();
        for p in points {
            let key = PoolKey { zone: p.zone, instance_type: p.instance_type };
            if newest.get(&key).is_none_or(|(at, _)| p.at >= *at) {
                newest.insert(key, (p.at, p.price));
            }
        }
        let mut events = Vec::new();
        for (key, (at, price)) in newest {
            let known = self.prices.get(&key).copied();
            if known.is_some_and(|(t, _)| t > at) || known.is_some_and(|(_, p)| p == price) {
                continue;
            }
            self.prices.insert(key.clone(), (at, price));
            events.push(Event::PriceTick { zone: key.zone, instance_type: key.instance_type, price });
        }
        events
    }

    fn fleet(&mut self, instances: Vec<Instance>) -> Vec<Event> {
        let mut events = Vec::new();
        let mut skipped = Vec::new();
        let live: Vec<&Instance> = instances.iter().filter(|i| matches!(i.state.as_str(), "pending" | "running")).collect();
        for i in &live {
            if let Some(host) = self.by_instance.get(&i.id) {
                // One the room launched, booting until EC2 says it runs.
                let booting = self.nodes.get_mut(host).filter(|_| i.state == "running").and_then(|n| n.booting.take());
                events.extend(booting.map(|spec| Event::NodeUp { spec }));
                continue;
            }
            if i.request.is_some_and(|r| self.awaiting.contains(&r)) {
                continue;
            }
            let host = i.private_dns.as_deref().map(short_host).filter(|h| !h.is_empty()).unwrap_or(&i.id).to_string();
            if let Some(node) = self.nodes.get_mut(&host).filter(|n| !n.lost) {
                // Its GPUs were seen first (dcgm, NVML): now we know which instance it is.
                node.instance = Some(i.id.clone());
                self.by_instance.insert(i.id.clone(), host);
                continue;
            }
            let Some(shape) = self.catalogue.instance_type(&i.instance_type).cloned() else {
                skipped.push(i.instance_type.clone());
                continue;
            };
            let billing = if i.spot { BillingMode::Spot } else { BillingMode::OnDemand };
            let decl = NodeDecl { billing: Some(billing), instance_type: Some(i.instance_type.clone()), zone: Some(i.zone.clone()), ..NodeDecl::default() };
            let id = self.next_id();
            let mut spec = self.catalogue.host_spec(id, &host, Some(&decl), shape.gpus, Some(shape.gpu_model.clone()), Some(shape.gpu_memory));
            if spec.billing == BillingMode::Spot {
                spec.max_price = i.max_price.or(Some(spec.on_demand_price));
            }
            events.push(self.add_node(spec, Some(i.id.clone())));
        }
        // Instances we knew that are no longer running (or no longer listed) are lost.
        let gone: Vec<(String, String)> =
            self.by_instance.iter().filter(|(id, _)| !live.iter().any(|i| &&i.id == id)).map(|(id, host)| (id.clone(), host.clone())).collect();
        for (instance, host) in gone {
            self.by_instance.remove(&instance);
            let state = instances.iter().find(|i| i.id == instance).map(|i| i.state.clone()).unwrap_or_else(|| "gone".into());
            if let Some(node) = self.nodes.get_mut(&host).filter(|n| !n.lost) {
                node.lost = true;
                node.booting = None;
                events.push(Event::NodeLost { node: node.id, reason: format!("EC2 instance {instance} is {state}") });
            }
        }
        skipped.sort();
        skipped.dedup();
        let detail = if skipped.is_empty() {
            format!("{} instances", live.len())
        } else {
            format!("{} instances; not GPU types we know: {}", live.len(), skipped.join(", "))
        };
        events.push(Event::SourceStatus { source: "aws ec2".into(), ok: true, detail, stale: Vec::new() });
        events
    }

    fn notice(&mut self, now: At, host: &str, kind: NoticeKind, deadline: Option<At>) -> Vec<Event> {
        let Some(node) = self.node_of(host) else {
            let why = format!("interruption notice for {host}, which is not a node of the cluster");
            return vec![Event::SourceStatus { source: "imds".into(), ok: false, detail: why, stale: Vec::new() }];
        };
        match kind {
            NoticeKind::Rebalance => {
                let detail = format!("{host}: EC2 recommends rebalancing (interruption risk is elevated)");
                vec![Event::SourceStatus { source: format!("imds {host}"), ok: true, detail, stale: Vec::new() }]
            }
            NoticeKind::Stop | NoticeKind::Terminate | NoticeKind::Hibernate => {
                vec![Event::InterruptionNotice { node, deadline: deadline.unwrap_or(now + NOTICE) }]
            }
        }
    }
}

/// The reason without its leading "URL: " when the source's name already
/// says the URL ("dcgm http://a:9400/metrics").
fn without_echo<'a>(source: &str, why: &'a str) -> &'a str {
    match source.split_once(' ') {
        Some((_, place)) => why.strip_prefix(place).and_then(|rest| rest.strip_prefix(": ")).unwrap_or(why),
        None => why,
    }
}

fn mean(values: impl Iterator<Item = f32>) -> Option<f32> {
    let (sum, n) = values.fold((0.0f32, 0u32), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;
    use crate::live::catalogue::NodeDecl;

    fn reading(host: &str, index: u8, util: f32) -> GpuReading {
        GpuReading {
            host: host.into(),
            index,
            model: Some("NVIDIA A100-SXM4-40GB".into()),
            util_pct: Some(util),
            mem_used: Some(Mib(1_000)),
            mem_free: Some(Mib(39_960)),
            temp_c: Some(55.0),
            power_w: Some(250.0),
            sm_clock_mhz: Some(1410),
            ..GpuReading::default()
        }
    }

    fn gpus_report(source: &str, readings: Vec<GpuReading>) -> Report {
        Report::Gpus { source: source.into(), readings }
    }

    #[test]
    fn a_new_host_becomes_a_node_then_samples_and_health() {
        let mut tr = Translator::new(Catalogue::default());
        let events = tr.translate(t(0), gpus_report("dcgm", vec![reading("node-a.cluster.local", 1, 80.0), reading("node-a", 0, 20.0)]));
        let Event::NodeUp { spec } = &events[0] else { panic!("{events:?}") };
        assert_eq!((spec.name.as_str(), spec.gpu_count, spec.gpu_memory), ("node-a", 2, Mib(40_960)));
        assert_eq!((spec.billing, spec.instance_type.as_str()), (BillingMode::Reserved, "on-prem"));
        let Event::Telemetry { gpus, .. } = &events[1] else { panic!("{events:?}") };
        assert_eq!(gpus.len(), 2);
        let Event::GpuHealth { readings } = &events[2] else { panic!("{events:?}") };
        assert_eq!(readings[0].processes, None, "dcgm-exporter does not list processes");
        // The same host again is not a new node.
        let again = tr.translate(t(5), gpus_report("nvml", vec![reading("node-a", 0, 30.0)]));
        assert!(!again.iter().any(|e| matches!(e, Event::NodeUp { .. })));
        let Some(Event::GpuHealth { readings }) = again.last() else { panic!() };
        assert_eq!(readings[0].processes, Some(0), "NVML lists processes: none is a count");
    }

    #[test]
    fn a_failed_source_names_the_stale_gpus_of_its_hosts() {
        let mut tr = Translator::new(Catalogue::default());
        tr.translate(t(0), gpus_report("dcgm", vec![reading("a", 0, 1.0), reading("a", 1, 1.0)]));
        let why = "http://a:9400/metrics: timeout: no complete answer within 500 ms".to_string();
        let events = tr.translate(t(1), Report::Failed { source: "dcgm http://a:9400/metrics".into(), hosts: vec!["a".into(), "never-seen".into()], why });
        let Event::SourceStatus { ok, stale, detail, .. } = &events[0] else { panic!() };
        assert!(!ok);
        assert_eq!(detail, "timeout: no complete answer within 500 ms", "the URL is said once, by the source's name");
        assert_eq!(stale.len(), 2);
    }

    #[test]
    fn mig_slices_report_for_their_gpu_and_a_declared_host_keeps_its_price() {
        let decl = NodeDecl {
            host: "m".into(),
            instance_type: Some("p4d.24xlarge".into()),
            billing: Some(BillingMode::Reserved),
            price: Some(MicrosPerHour(19_220_000)),
            ..NodeDecl::default()
        };
        let mut tr = Translator::new(Catalogue::new(Vec::new(), vec![decl]));
        let mut gpu = reading("m", 0, 0.0);
        gpu.util_pct = None;
        let slice = |i, u| GpuReading { mig_instance: Some(i), util_pct: Some(u), mem_used: Some(Mib(500)), ..reading("m", 0, 0.0) };
        let events = tr.translate(t(0), gpus_report("dcgm", vec![gpu, slice(1, 40.0), slice(2, 60.0)]));
        let Event::NodeUp { spec } = &events[0] else { panic!() };
        assert_eq!((spec.contract_price, spec.on_demand_price), (MicrosPerHour(19_220_000), MicrosPerHour(32_772_600)));
        let Event::Telemetry { gpus, .. } = &events[1] else { panic!() };
        assert_eq!(gpus[0].1, 50.0, "the mean of its slices");
        assert_eq!(gpus[0].2, Mib(1_000), "the parent's own figure when it has one");
        let Event::GpuHealth { readings } = &events[2] else { panic!() };
        assert_eq!(readings[0].mig_instances, 2);
    }

    fn instance(id: &str, dns: &str, state: &str) -> Instance {
        Instance {
            id: id.into(),
            instance_type: "p3.8xlarge".into(),
            zone: "us-east-1a".into(),
            spot: true,
            state: state.into(),
            launched: None,
            max_price: Some(MicrosPerHour(5_000_000)),
            private_dns: Some(dns.into()),
            request: None,
        }
    }

    fn slurm_node(name: &str, hostname: &str, partition: &str, gpus: u32) -> crate::domain::slurm::SlurmNode {
        crate::domain::slurm::SlurmNode {
            name: name.into(),
            hostname: hostname.into(),
            state: "idle".into(),
            gpus,
            gpu_type: Some("a100".into()),
            partitions: vec![partition.into()],
            ..Default::default()
        }
    }

    fn slurm_report(nodes: Vec<crate::domain::slurm::SlurmNode>) -> Report {
        Report::Slurm { snapshot: crate::domain::slurm::SlurmSnapshot { cluster: "pc".into(), nodes, ..Default::default() } }
    }

    #[test]
    fn slurm_nodes_are_matched_to_ec2_by_host_name_else_declared_by_pattern_or_partition_else_waiting_for_their_size() {
        let decls = vec![
            NodeDecl { host: "train-st-p4d-*".into(), instance_type: Some("p4d.24xlarge".into()), billing: Some(BillingMode::Reserved), ..NodeDecl::default() },
            NodeDecl { partition: Some("dev".into()), instance_type: Some("g5.12xlarge".into()), ..NodeDecl::default() },
        ];
        let mut tr = Translator::new(Catalogue::new(Vec::new(), decls));
        // EC2 saw the spot instance first: ParallelCluster's node is that machine.
        let up = tr.translate(t(0), Report::Fleet { instances: vec![instance("i-1", "ip-10-0-1-7.ec2.internal", "running")] });
        let Event::NodeUp { spec: ec2 } = &up[0] else { panic!("{up:?}") };
        let events = tr.translate(
            t(1),
            slurm_report(vec![
                slurm_node("spot-dy-p38x-1", "ip-10-0-1-7", "spot", 4),
                slurm_node("train-st-p4d-1", "", "train", 8),
                slurm_node("dev-st-g5-1", "", "dev", 4),
                slurm_node("cpu-1", "", "dev", 0),
                slurm_node("odd-1", "", "other", 2),
            ]),
        );
        let ups: Vec<&NodeSpec> = events.iter().filter_map(|e| if let Event::NodeUp { spec } = e { Some(spec) } else { None }).collect();
        let shown: Vec<(&str, &str, BillingMode, u8)> = ups.iter().map(|s| (s.name.as_str(), s.instance_type.as_str(), s.billing, s.gpu_count)).collect();
        assert_eq!(shown, [("train-st-p4d-1", "p4d.24xlarge", BillingMode::Reserved, 8), ("dev-st-g5-1", "g5.12xlarge", BillingMode::OnDemand, 4)]);
        let status = events.iter().find_map(|e| if let Event::SourceStatus { detail, .. } = e { Some(detail.clone()) } else { None }).unwrap();
        assert!(status.contains("odd-1") && status.contains("dcgm-exporter"), "a node of unknown size says how to size it: {status}");
        let Some(Event::Slurm { snapshot }) = events.last() else { panic!("the snapshot goes on last") };
        let ids: Vec<Option<NodeId>> = snapshot.nodes.iter().map(|n| n.node).collect();
        assert_eq!(ids, [Some(ec2.id), Some(ups[0].id), Some(ups[1].id), None, None], "the EC2 node is the spot Slurm node: one node, not two");
        // Said once; the next snapshot matches the same nodes and adds none.
        let again = tr.translate(t(2), slurm_report(vec![slurm_node("odd-1", "", "other", 2), slurm_node("train-st-p4d-1", "", "train", 8)]));
        assert_eq!(again.len(), 1, "{again:?}");
        // dcgm-exporter on the Slurm node lands on the same node.
        let samples = tr.translate(t(3), gpus_report("dcgm", vec![reading("train-st-p4d-1", 0, 50.0)]));
        let Event::Telemetry { gpus, .. } = &samples[0] else { panic!("{samples:?}") };
        assert_eq!(gpus[0].0.node, ups[0].id);
    }

    #[test]
    fn the_fleet_brings_nodes_up_and_loses_terminated_ones() {
        let mut tr = Translator::new(Catalogue::default());
        let events = tr.translate(
            t(0),
            Report::Fleet { instances: vec![instance("i-1", "ip-10-0-0-1.ec2.internal", "running"), instance("i-2", "ip-10-0-0-2.ec2.internal", "stopped")] },
        );
        let Event::NodeUp { spec } = &events[0] else { panic!("{events:?}") };
        assert_eq!((spec.name.as_str(), spec.gpu_count, spec.billing), ("ip-10-0-0-1", 4, BillingMode::Spot));
        assert_eq!(spec.max_price, Some(MicrosPerHour(5_000_000)));
        assert!(matches!(events.last(), Some(Event::SourceStatus { ok: true, .. })));
        assert_eq!(events.len(), 2, "the stopped instance is not a node");
        // dcgm's Hostname for that machine is the same node.
        let samples = tr.translate(t(1), gpus_report("dcgm", vec![reading("ip-10-0-0-1", 0, 10.0)]));
        assert!(!samples.iter().any(|e| matches!(e, Event::NodeUp { .. })));
        let events = tr.translate(t(2), Report::Fleet { instances: vec![instance("i-1", "ip-10-0-0-1.ec2.internal", "shutting-down")] });
        assert!(matches!(&events[0], Event::NodeLost { node: NodeId(0), reason } if reason.contains("i-1 is shutting-down")));
        let mut unknown = instance("i-3", "ip-10-0-0-3", "running");
        unknown.instance_type = "m5.large".into();
        let events = tr.translate(t(3), Report::Fleet { instances: vec![unknown] });
        assert!(matches!(&events[..], [Event::SourceStatus { detail, .. }] if detail.contains("m5.large")));
    }

    #[test]
    fn only_the_newest_changed_price_per_pool_ticks() {
        let mut tr = Translator::new(Catalogue::default());
        let p = |at, price| PricePoint { zone: "us-east-1a".into(), instance_type: "p3.8xlarge".into(), at: t(at), price: MicrosPerHour(price) };
        let events = tr.translate(t(10), Report::Prices { points: vec![p(5, 3_900_000), p(1, 3_700_000)] });
        assert!(matches!(&events[..], [Event::PriceTick { price: MicrosPerHour(3_900_000), .. }]));
        assert!(tr.translate(t(20), Report::Prices { points: vec![p(5, 3_900_000)] }).is_empty(), "nothing new");
        assert!(tr.translate(t(20), Report::Prices { points: vec![p(3, 4_000_000)] }).is_empty(), "older than what we have");
        assert_eq!(tr.translate(t(30), Report::Prices { points: vec![p(25, 4_100_000)] }).len(), 1);
    }

    #[test]
    fn a_notice_becomes_an_interruption_two_minutes_ahead_unless_timed() {
        let mut tr = Translator::new(Catalogue::default());
        tr.translate(t(0), gpus_report("nvml", vec![reading("me", 0, 1.0)]));
        let events = tr.translate(t(100), Report::Notice { host: "me".into(), kind: NoticeKind::Terminate, deadline: None });
        assert_eq!(events, vec![Event::InterruptionNotice { node: NodeId(0), deadline: t(220) }]);
        let events = tr.translate(t(100), Report::Notice { host: "me".into(), kind: NoticeKind::Stop, deadline: Some(t(190)) });
        assert_eq!(events, vec![Event::InterruptionNotice { node: NodeId(0), deadline: t(190) }]);
        let events = tr.translate(t(100), Report::Notice { host: "me".into(), kind: NoticeKind::Rebalance, deadline: None });
        assert!(matches!(&events[..], [Event::SourceStatus { ok: true, detail, .. }] if detail.contains("rebalanc")));
        let events = tr.translate(t(100), Report::Notice { host: "elsewhere".into(), kind: NoticeKind::Terminate, deadline: None });
        assert!(matches!(&events[..], [Event::SourceStatus { ok: false, .. }]));
    }
}
