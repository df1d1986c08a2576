//! `gpuroom sim --experiment burst`: the spot experiment's bursts — the
//! same jobs, drawn from the same seed — run by the real engine (the `Room`
//! with every policy, the simulated cloud with the real price history,
//! preemption and availability traces) under five fleets side by side:
//!
//! * a reservation sized for the peak (warm, paid whether used or not);
//! * a static fleet like `fixtures/sim/static.toml`: fixed reserved,
//!   on-demand and spot nodes, a third each, sized for twice the mean load;
//! * elastic on-demand only: the room buys on-demand nodes and gives them back;
//! * elastic spot + on-demand with the dynamic max-price curve;
//! * the same with the degraded (linear) curve;
//!
//! and an omniscient bound no engine can reach: every job runs once, at
//! once, at the cheapest spot price in force, never interrupted, no boot,
//! no idle. Where the spot experiment models strategies by hand, this one
//! only configures the world and reads what the room did.

use std::fmt::Write as _;

use super::config::ExperimentConfig;
use super::workload::{self, Job};
use super::world::Zone;
use super::{ExperimentError, peak_concurrency, zones};
use crate::domain::cluster::BillingMode;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{JobClass, JobSpec, Phase, PoolPreference, Tags};
use crate::domain::units::{At, Mib, Micros, MicrosPerHour};
use crate::engine::Engine;
use crate::room::{Room, RoomConfig};
use crate::sim::config::{Arrivals, InstanceType, NodeConfig, PoolConfig, SimConfig, TenantConfig, Workload};
use crate::sim::workload::SimJob;
use crate::sim::{Simulation, Traces};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fleet {
    PeakReservation,
    Static,
    ElasticOnDemand,
    ElasticSpot,
    ElasticDegraded,
}

impl Fleet {
    pub const ALL: [Fleet; 5] = [Fleet::PeakReservation, Fleet::Static, Fleet::ElasticOnDemand, Fleet::ElasticSpot, Fleet::ElasticDegraded];

    pub fn label(self) -> &'static str {
        match self {
            Fleet::PeakReservation => "reservation for the peak",
            Fleet::Static => "static fleet",
            Fleet::ElasticOnDemand => "elastic on-demand",
            Fleet::ElasticSpot => "elastic spot + OD, dynamic",
            Fleet::ElasticDegraded => "elastic spot + OD, degraded",
        }
    }
}

/// What the room did with a fleet.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub spend: Micros,
    pub idle_share: f64,
    pub jobs: usize,
    pub finished: usize,
    pub interrupted_jobs: usize,
    pub interruptions: u64,
    pub lost_layers: u64,
    pub checkpoint_bytes: u64,
    pub latencies: Vec<f64>,
    pub launches: u64,
    pub releases: u64,
    pub spend_by_mode: [Micros; 3],
    /// Instance spend on GPUs no job held (booting, idle before release).
    pub idle_spend: Micros,
    /// Checkpoint storage and I/O.
    pub services: Micros,
    /// Spot instances the traces reclaimed.
    pub reclaims: u64,
}

impl Row {
    pub fn preemption_rate(&self) -> f64 {
        self.interrupted_jobs as f64 / self.finished.max(1) as f64
    }

    pub fn recompute_per_interruption(&self) -> f64 {
        if self.interruptions == 0 { 0.0 } else { self.lost_layers as f64 / self.interruptions as f64 }
    }

    pub fn mean_latency(&self) -> f64 {
        self.latencies.iter().sum::<f64>() / self.latencies.len().max(1) as f64
    }

    pub fn latency(&self, q: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort_by(f64::total_cmp);
        l.get(((l.len().max(1) - 1) as f64 * q).round() as usize).copied().unwrap_or(0.0)
    }
}

pub struct BurstReport {
    pub config: ExperimentConfig,
    pub seed: u64,
    pub zones: Vec<String>,
    pub span_hours: f64,
    pub bursts: usize,
    pub jobs: usize,
    pub peak: usize,
    pub static_nodes: usize,
    pub rows: Vec<(Fleet, Row)>,
    pub bound: Row,
}

/// Runs the five fleets and the bound over the same jobs.
pub fn run(traces: &Traces, config: ExperimentConfig, seed: u64) -> Result<BurstReport, ExperimentError> {
    let zones = zones(traces, &config)?;
    let span = zones.iter().map(Zone::span).fold(f64::INFINITY, f64::min);
    let (starts, jobs) = workload::generate(&config, span, seed);
    let service = |j: &Job| config.launch_secs + config.load_secs + j.work_secs();
    let peak = peak_concurrency(jobs.iter().map(|j| (j.arrival, j.arrival + service(j)))).max(1);
    let mean_load = jobs.iter().map(Job::work_secs).sum::<f64>() / span;
    let static_nodes = 3 * ((2.0 * mean_load / 3.0).ceil() as usize).max(1);
    let spot_zones: Vec<String> = zones.iter().map(|z| z.key.zone.clone()).collect();
    let mut rows = Vec::new();
    for fleet in Fleet::ALL {
        let world = world(&config, fleet, peak, static_nodes, &spot_zones);
        let sim = Simulation::with_jobs(world, traces, seed, sim_jobs(&config, &jobs)).map_err(|e| ExperimentError::World(e.to_string()))?;
        let mut room_config = RoomConfig::default();
        // All of this work may run on spot; no floor of stable capacity is kept.
        room_config.capacity.min_stable_share = 0.0;
        room_config.degraded_bids = fleet == Fleet::ElasticDegraded;
        let mut engine = Engine::new(Room::new(room_config), sim, None);
        engine.run_until(config.start + chrono::TimeDelta::seconds(span as i64)).map_err(|e| ExperimentError::World(e.to_string()))?;
        let mut row = read(&engine.room, jobs.len());
        row.reclaims = engine.world.stats.reclaims_by_trace + engine.world.stats.reclaims_by_price;
        rows.push((fleet, row));
    }
    let bound = omniscient(&zones, &jobs);
    Ok(BurstReport { zones: spot_zones, span_hours: span / 3600.0, bursts: starts.len(), jobs: jobs.len(), peak, static_nodes, rows, bound, seed, config })
}

/// The spot experiment's jobs as the simulated world runs them: a layer is a step.
fn sim_jobs(config: &ExperimentConfig, jobs: &[Job]) -> Vec<(At, SimJob)> {
    jobs.iter()
        .enumerate()
        .map(|(i, j)| {
            let id = JobId(i as u64 + 1);
            let layers = j.layers.len().max(1) as u64;
            let spec = JobSpec {
                id,
                name: format!("burst-{}", id.0),
                tags: Tags { tenant: TenantId("inference".into()), project: "bursts".into(), env: "prod".into(), model: "llm".into() },
                class: JobClass::BatchInference,
                gpus: 1,
                gpu_mem: Mib(12_288),
                exclusive: true,
                steps_total: layers,
                priority: 0,
                pool: PoolPreference::Any,
                checkpoint_size: Mib((j.state_bytes >> 20) as u32),
                cpus: 4,
                host_mem: Mib(16_384),
                est_runtime: None,
                gpu_models: Vec::new(),
            };
            let at = config.start + chrono::TimeDelta::milliseconds((j.arrival * 1000.0) as i64);
            (at, SimJob { spec, step_secs: j.work_secs() / layers as f64, util: 85.0, fails_at_step: None })
        })
        .collect()
}

fn dollars(per_hour: f64) -> String {
    format!("{per_hour:.4}")
}

/// The simulated world of a fleet: one instance type (the experiment's), one tenant.
fn world(config: &ExperimentConfig, fleet: Fleet, peak: usize, static_nodes: usize, spot_zones: &[String]) -> SimConfig {
    let home = spot_zones.first().cloned().unwrap_or_default();
    let node = |i: usize, billing: BillingMode, zone: &str| NodeConfig {
        name: format!("n{i:02}"),
        instance_type: config.instance_type.clone(),
        zone: zone.to_string(),
        billing,
        max_price: None,
        mig_gpus: 0,
    };
    let pool = |billing: BillingMode, zone: &str| PoolConfig {
        instance_type: config.instance_type.clone(),
        zone: zone.to_string(),
        billing,
        max_nodes: 2 * peak as u32,
        warm_min: 0,
        boot_secs: config.launch_secs as i64,
    };
    let (nodes, pools) = match fleet {
        Fleet::PeakReservation => ((0..peak).map(|i| node(i, BillingMode::Reserved, &home)).collect(), Vec::new()),
        Fleet::Static => {
            let third = static_nodes / 3;
            let nodes = (0..static_nodes)
                .map(|i| match i / third.max(1) {
                    0 => node(i, BillingMode::Reserved, &home),
                    1 => node(i, BillingMode::OnDemand, &home),
                    _ => node(i, BillingMode::Spot, &spot_zones[i % spot_zones.len().max(1)]),
                })
                .collect();
            (nodes, Vec::new())
        }
        Fleet::ElasticOnDemand => (Vec::new(), vec![pool(BillingMode::OnDemand, &home)]),
        Fleet::ElasticSpot | Fleet::ElasticDegraded => {
            let mut pools = vec![pool(BillingMode::OnDemand, &home)];
            pools.extend(spot_zones.iter().map(|z| pool(BillingMode::Spot, z)));
            (Vec::new(), pools)
        }
    };
    SimConfig {
        start: config.start,
        telemetry_secs: 30,
        target_load: 1.0,
        instance_types: vec![InstanceType {
            name: config.instance_type.clone(),
            gpu_model: "V100-16GB".into(),
            gpus: 1,
            gpu_memory_mib: 16_384,
            mig_capable: false,
            cpus: 8,
            host_memory_mib: 62_464,
            on_demand: dollars(config.on_demand_per_hour),
            reserved: dollars(config.on_demand_per_hour * config.reserved_share),
            speed: 1.0,
            mig_slices_mib: Vec::new(),
        }],
        nodes,
        pools,
        tenants: vec![TenantConfig {
            name: "inference".into(),
            quota_gpus: 10_000,
            monthly_budget: "100000000".into(),
            share: 1.0,
            quota_gpu_mem_mib: 0,
            borrow_limit_gpus: 0,
            projects: vec!["bursts".into()],
            models: vec!["llm".into()],
            envs: vec!["prod".into()],
        }],
        workload: Workload {
            max_gpus: 8,
            min_duration_secs: 1,
            max_duration_secs: i64::MAX,
            shared_fraction: 0.0,
            no_spot_fraction: 0.0,
            spot_only_fraction: 0.0,
            failure_rate: 0.0,
            hang_rate: 0.0,
            checkpoint_mib_per_sec: (config.write_bytes_per_sec / (1u64 << 20) as f64) as u32,
            incremental_share_per_step: config.changed_share_per_layer,
            arrivals: Arrivals::Trace,
            trace_jobs: 0,
            load_basis_gpus: Some(1.0),
        },
    }
}

/// What the room did, from its own books.
fn read(room: &Room, jobs: usize) -> Row {
    let view = room.view();
    let totals = &view.totals;
    let mut row = Row {
        spend: Micros(totals.spend.0 + totals.services.0),
        idle_share: totals.idle_share(),
        jobs,
        checkpoint_bytes: totals.stats.checkpoint_bytes,
        spend_by_mode: totals.spend_by_mode,
        idle_spend: Micros(totals.idle_by_mode.iter().map(|m| m.0).sum()),
        services: totals.services,
        ..Row::default()
    };
    for job in room.fleet.jobs.values() {
        if job.phase() != Phase::Done {
            continue;
        }
        row.finished += 1;
        if job.requeues > 0 {
            row.interrupted_jobs += 1;
        }
        row.interruptions += u64::from(job.requeues);
        row.lost_layers += job.lost_steps;
        if let Some(end) = job.finished_at {
            row.latencies.push((end - job.submitted_at).num_milliseconds() as f64 / 1000.0);
        }
    }
    if let Some(cap) = &view.capacity {
        row.launches = cap.nodes_launched;
        row.releases = cap.releases;
    }
    row
}

/// Every job straight through from its arrival, each moment at the cheapest
/// spot price any zone quotes then: no boot, no wait, no loss, no idle.
fn omniscient(zones: &[Zone], jobs: &[Job]) -> Row {
    const STEP: f64 = 30.0;
    let mut row = Row { jobs: jobs.len(), ..Row::default() };
    let mut total = 0.0;
    for j in jobs {
        let (mut t, end) = (j.arrival, j.arrival + j.work_secs());
        while t < end {
            let until = (t + STEP).min(end);
            let cheapest = zones.iter().map(|z| z.price_at(t)).min().unwrap_or(MicrosPerHour(0));
            total += cheapest.0 as f64 * (until - t) / 3600.0;
            t = until;
        }
        row.finished += 1;
        row.latencies.push(j.work_secs());
    }
    row.spend = Micros(total.round() as i64);
    row
}

impl BurstReport {
    fn row(&self, fleet: Fleet) -> Option<&Row> {
        self.rows.iter().find(|(f, _)| *f == fleet).map(|(_, r)| r)
    }

    fn reservation(&self) -> f64 {
        self.row(Fleet::PeakReservation).map_or(1.0, |r| r.spend.0.max(1) as f64)
    }

    /// The side-by-side table, as Markdown.
    pub fn table(&self) -> String {
        let base = self.reservation();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "| fleet | spend | vs reservation | idle share | jobs done | preempted jobs | recompute layers / interruption | checkpoint GiB | nodes launched / given back | mean latency | P99 latency |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let line = |s: &mut String, label: &str, r: &Row, bound: bool| {
            let dash = |text: String| if bound { "–".to_string() } else { text };
            let _ = writeln!(
                s,
                "| {label} | {} | {:.1}% | {} | {}/{} | {} | {} | {} | {} | {:.1} min | {:.1} min |",
                r.spend,
                100.0 * r.spend.0 as f64 / base,
                dash(format!("{:.1}%", 100.0 * r.idle_share)),
                r.finished,
                r.jobs,
                dash(format!("{:.1}%", 100.0 * r.preemption_rate())),
                dash(format!("{:.2}", r.recompute_per_interruption())),
                dash(format!("{:.0}", r.checkpoint_bytes as f64 / (1u64 << 30) as f64)),
                dash(format!("{} / {}", r.launches, r.releases)),
                r.mean_latency() / 60.0,
                r.latency(0.99) / 60.0,
            );
        };
        for (fleet, r) in &self.rows {
            line(&mut s, fleet.label(), r, false);
        }
        line(&mut s, "omniscient bound", &self.bound, true);
        s
    }

    /// The targets of issue 18 against the table, computed from it.
    fn reading(&self) -> String {
        let mut s = String::new();
        let (Some(reserved), Some(fixed), Some(od), Some(dynamic), Some(degraded)) = (
            self.row(Fleet::PeakReservation),
            self.row(Fleet::Static),
            self.row(Fleet::ElasticOnDemand),
            self.row(Fleet::ElasticSpot),
            self.row(Fleet::ElasticDegraded),
        ) else {
            return s;
        };
        let base = self.reservation();
        let share = |r: &Row| 100.0 * r.spend.0 as f64 / base;
        let over_bound = |r: &Row| 100.0 * (r.spend.0 as f64 / self.bound.spend.0.max(1) as f64 - 1.0);
        let latency = |r: &Row| 100.0 * (r.mean_latency() / reserved.mean_latency().max(1e-9) - 1.0);
        let _ = writeln!(s, "\n## Against the targets\n");
        let _ = writeln!(s, "| figure | target (reference) | elastic spot + OD, dynamic | degraded |");
        let _ = writeln!(s, "|---|---:|---:|---:|");
        let _ = writeln!(s, "| spend vs the peak reservation | ≤ 50% (58.8%) | {:.1}% | {:.1}% |", share(dynamic), share(degraded));
        let _ =
            writeln!(s, "| preemption rate | ≤ 6.7% (23% → 6.7%) | {:.1}% | {:.1}% |", 100.0 * dynamic.preemption_rate(), 100.0 * degraded.preemption_rate());
        let _ = writeln!(
            s,
            "| recompute layers per interruption | ≤ 2.1 (5.3 → 2.1) | {:.2} | {:.2} |",
            dynamic.recompute_per_interruption(),
            degraded.recompute_per_interruption()
        );
        let _ = writeln!(s, "| mean latency vs the reservation | ≤ +7.8% | {:+.1}% | {:+.1}% |", latency(dynamic), latency(degraded));
        let _ = writeln!(s, "| spend over the omniscient bound | ≤ 10% | {:+.1}% | {:+.1}% |", over_bound(dynamic), over_bound(degraded));
        let _ = writeln!(s, "\nReading it:\n");
        let _ = writeln!(
            s,
            "* The reservation idles {:.0}% of what it costs: it is sized for the {}-instance peak of 7× bursts. The static fleet ({} nodes) costs {:.1}% of it and idles {:.0}%, and its bursts queue: mean latency {:.1} min, P99 {:.1} min against the reservation's {:.1} / {:.1}.",
            100.0 * reserved.idle_share,
            self.peak,
            self.static_nodes,
            share(fixed),
            100.0 * fixed.idle_share,
            fixed.mean_latency() / 60.0,
            fixed.latency(0.99) / 60.0,
            reserved.mean_latency() / 60.0,
            reserved.latency(0.99) / 60.0
        );
        let _ = writeln!(
            s,
            "* Elastic on-demand pays list price only while work runs, boots included: {:.1}% of the reservation, idle {:.0}%, mean latency {:+.1}% (each burst waits for its nodes to boot, {:.0} s).",
            share(od),
            100.0 * od.idle_share,
            latency(od),
            self.config.launch_secs
        );
        let gap = Micros(dynamic.spend.0 - self.bound.spend.0);
        let rest = Micros(gap.0 - dynamic.idle_spend.0 - dynamic.services.0);
        let _ = writeln!(
            s,
            "* Elastic spot + on-demand: {:.1}% of the reservation, {:+.1}% over the bound ({gap} more). The bound runs every job at once on the cheapest zone's price with nothing around it; the room pays for GPUs no job holds — booting ({} launches × {:.0} s) and idle before a node goes back — {} ({:.0}% of spend), for checkpoint storage and I/O {}, and {} for the rest: spot in zones dearer than the cheapest when that one is refused or riskier, {} on demand, and work redone after reclaims.",
            share(dynamic),
            over_bound(dynamic),
            dynamic.launches,
            self.config.launch_secs,
            dynamic.idle_spend,
            100.0 * dynamic.idle_share,
            dynamic.services,
            rest,
            dynamic.spend_by_mode[1]
        );
        let boot_share = 100.0 * self.config.launch_secs / reserved.mean_latency().max(1.0);
        let _ = writeln!(
            s,
            "* Latency: a job that arrives when no node is free waits for one to boot ({:.0} s, {:.1}% of the reservation's mean latency); the warm reservation never does. Keeping nodes warm between bursts would buy latency back with idle spend (`warm_min`, `idle_release`).",
            self.config.launch_secs, boot_share
        );
        let _ = writeln!(
            s,
            "* Preemption: the traces reclaimed {} spot instances; {} of {} jobs were stopped at least once ({} stops), each saved on the 2-minute notice and resumed, so recompute is {:.2} layers per interruption.",
            dynamic.reclaims,
            dynamic.interrupted_jobs,
            dynamic.finished,
            dynamic.interruptions,
            dynamic.recompute_per_interruption()
        );
        if dynamic.spend == degraded.spend && dynamic.interruptions == degraded.interruptions {
            let _ = writeln!(
                s,
                "* The dynamic and degraded curves give the same table: no market price in this window rose past a job's max price (the real p3.2xlarge prices move a few percent a day), so the curve's shape never decided anything."
            );
        }
        s
    }

    pub fn markdown(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let _ = writeln!(s, "# Burst experiment through the room\n");
        let _ = writeln!(s, "Written by `gpuroom sim --experiment burst --seed {} --out docs/burst-experiment.md`; do not edit by hand.\n", self.seed);
        let _ = writeln!(
            s,
            "The spot experiment's {} jobs in {} bursts (peak {}× the baseline of {} jobs/h, {} min each) over {:.0} h from {}, run by the engine itself: the `Room` with its scheduler, capacity, spot, checkpoint and cost policies, on the simulated cloud replaying the real {} price history and the real V100 preemption and availability traces of {}.\n",
            self.jobs,
            self.bursts,
            c.peak_factor,
            c.baseline_jobs_per_hour,
            c.burst_secs / 60.0,
            self.span_hours,
            c.start.format("%Y-%m-%d"),
            c.instance_type,
            self.zones.join(", ")
        );
        s.push_str(&self.table());
        s.push_str(&self.reading());
        let _ = writeln!(s, "\n## The fleets\n");
        let _ = writeln!(
            s,
            "* Reservation: {} reserved {} (the peak concurrency), warm, at {:.0}% of on-demand (${:.2}/h), paid for the whole span.",
            self.peak,
            c.instance_type,
            100.0 * c.reserved_share,
            c.on_demand_per_hour
        );
        let _ = writeln!(
            s,
            "* Static: {} fixed nodes (twice the mean load), a third reserved, a third on-demand, a third spot over the zones, as `fixtures/sim/static.toml` shares them.",
            self.static_nodes
        );
        let _ = writeln!(
            s,
            "* Elastic: pools of up to {} nodes (on-demand in {}, spot in each zone), boot {:.0} s, nodes given back after {} idle; control mode; no floor of stable capacity (all of this work may run on spot).",
            2 * self.peak,
            self.zones.first().map(String::as_str).unwrap_or(""),
            c.launch_secs,
            crate::capacity::CapacityConfig::default().idle_release
        );
        let _ = writeln!(
            s,
            "* Jobs: one GPU each, a layer is a step (progress and recompute count layers), checkpoints of {:.0}–{:.0} GiB at {:.0} MB/s, {:.0}% of the state changed per layer; the room picks when to save. Model load time ({:.0} s in the spot experiment) is not simulated.",
            c.state_gib.0,
            c.state_gib.1,
            c.write_bytes_per_sec / 1e6,
            100.0 * c.changed_share_per_layer,
            c.load_secs
        );
        let _ = writeln!(s, "* Preempted jobs: finished jobs stopped at least once (a reclaim, a notice, a move); an interruption is one such stop.");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_burst_run_through_the_room_finishes_its_jobs_and_elastic_beats_the_reservation() {
        let traces = Traces::embedded().expect("traces");
        let config = ExperimentConfig { bursts: 6, drain_secs: 150.0 * 3600.0, ..ExperimentConfig::default() };
        let report = run(&traces, config, 3).expect("the experiment");
        let table = report.markdown();
        assert!(table.contains("| elastic spot + OD, dynamic |"), "{table}");
        let reserved = report.row(Fleet::PeakReservation).expect("reservation");
        let elastic = report.row(Fleet::ElasticSpot).expect("elastic");
        assert!(report.jobs > 0 && elastic.finished == report.jobs, "every job finishes: {}/{}\n{table}", elastic.finished, report.jobs);
        assert!(elastic.spend < reserved.spend, "{table}");
        assert!(elastic.launches > 0 && elastic.releases > 0, "{table}");
        assert!(report.bound.spend <= elastic.spend, "the bound is a bound: {table}");
        assert!(reserved.launches == 0 && reserved.idle_share > 0.5, "{table}");
    }
}
