//! The engine's own state as Prometheus metrics, for the on-call stack:
//! Prometheus scrapes `/metrics` (`http`), alert rules page through
//! Alertmanager (`deploy/prometheus/gpuroom-rules.yml`), Grafana draws the
//! dashboard (`deploy/grafana/gpuroom.json`).
//!
//! Every figure comes from the `View` the engine publishes (about once a
//! second) and the engine's own health (`Health`), rendered on each scrape
//! with `prometheus-client`: the Prometheus text format for Prometheus and
//! `promtool`, OpenMetrics when a scraper asks for it. Names follow
//! Prometheus's conventions: base units in the name (`_seconds`, `_bytes`,
//! `_dollars`, `_ratio`), `_total` on counters; labels are bounded (tenant,
//! pool, instance type, zone, billing, node, gpu, source, alarm kind), never
//! a job id. Counters are the room's own counters, which only grow in a run.
//!
//! Owns the mapping from a view to metric families; reads no clock (the
//! scrape's time comes in) and serves nothing (that is `http`'s).

pub mod http;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::domain::cluster::BillingMode;
use crate::domain::units::{Micros, MicrosPerHour};
use crate::room::View;

/// The engine's own figures beside the room's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// "sim" or "live".
    pub world: String,
    /// When the view was published, ms since the epoch (wall clock).
    pub published_ms: i64,
    /// The log's size on disk and its WAL's, when it records one.
    pub log_bytes: Option<u64>,
    pub wal_bytes: Option<u64>,
    /// Consoles attached through the socket, by user.
    pub consoles: BTreeMap<String, usize>,
}

/// What a scrape renders: the newest view and the engine's health.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub view: std::sync::Arc<View>,
    pub health: Health,
}

/// One metric family as a scrape names it (unit and `_total` included).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FamilyDoc {
    pub name: &'static str,
    /// "gauge" or "counter".
    pub kind: &'static str,
    pub labels: &'static str,
    /// Only where it has something to say: live sources, attached consoles,
    /// spot jobs, elastic capacity. A scrape without it says nothing of it.
    pub sometimes: bool,
}

const fn doc(name: &'static str, kind: &'static str, labels: &'static str, sometimes: bool) -> FamilyDoc {
    FamilyDoc { name, kind, labels, sometimes }
}

/// Every family the engine exports, for README's table and the checks that
/// rules and dashboards ask only for these (a test holds it to the code).
pub const FAMILIES: &[FamilyDoc] = &[
    doc("gpuroom_gpus", "gauge", "billing, state", false),
    doc("gpuroom_nodes", "gauge", "billing, state", false),
    doc("gpuroom_gpu_utilization_ratio", "gauge", "node, gpu", false),
    doc("gpuroom_gpu_memory_used_bytes", "gauge", "node, gpu", false),
    doc("gpuroom_gpu_memory_total_bytes", "gauge", "node, gpu", false),
    doc("gpuroom_gpu_utilization_mean_ratio", "gauge", "", false),
    doc("gpuroom_memory_fragmentation_ratio", "gauge", "", false),
    doc("gpuroom_gpu_fragmentation_ratio", "gauge", "", false),
    doc("gpuroom_fleet_cost_dollars_per_hour", "gauge", "", false),
    doc("gpuroom_queue_jobs", "gauge", "tenant", false),
    doc("gpuroom_queue_gpus_requested", "gauge", "tenant", false),
    doc("gpuroom_queue_oldest_wait_seconds", "gauge", "tenant", false),
    doc("gpuroom_running_jobs", "gauge", "tenant", false),
    doc("gpuroom_quota_gpus", "gauge", "tenant", false),
    doc("gpuroom_held_gpus", "gauge", "tenant", false),
    doc("gpuroom_borrowed_gpus", "gauge", "tenant", false),
    doc("gpuroom_wait_alarms", "gauge", "tenant", false),
    doc("gpuroom_budget_dollars", "gauge", "tenant", false),
    doc("gpuroom_budget_spent_dollars", "gauge", "tenant", false),
    doc("gpuroom_budget_used_ratio", "gauge", "tenant", false),
    doc("gpuroom_budget_level", "gauge", "tenant", false),
    doc("gpuroom_budget_projected_dollars", "gauge", "tenant", false),
    doc("gpuroom_tenant_cost_dollars_per_hour", "gauge", "tenant", false),
    doc("gpuroom_tenant_spend_dollars_total", "counter", "tenant", false),
    doc("gpuroom_spend_dollars_total", "counter", "billing", false),
    doc("gpuroom_idle_spend_dollars_total", "counter", "billing", false),
    doc("gpuroom_service_spend_dollars_total", "counter", "", false),
    doc("gpuroom_idle_share_ratio", "gauge", "", false),
    doc("gpuroom_spot_price_dollars_per_hour", "gauge", "zone, instance_type", false),
    doc("gpuroom_spot_lowest_cap_dollars_per_hour", "gauge", "zone, instance_type", true),
    doc("gpuroom_spot_interruption_risk_ratio", "gauge", "zone, instance_type", false),
    doc("gpuroom_jobs_submitted_total", "counter", "", false),
    doc("gpuroom_jobs_finished_total", "counter", "outcome", false),
    doc("gpuroom_placements_total", "counter", "", false),
    doc("gpuroom_preemptions_total", "counter", "", false),
    doc("gpuroom_requeues_total", "counter", "", false),
    doc("gpuroom_escalations_total", "counter", "", false),
    doc("gpuroom_interruption_notices_total", "counter", "", false),
    doc("gpuroom_nodes_lost_total", "counter", "", false),
    doc("gpuroom_checkpoints_total", "counter", "", false),
    doc("gpuroom_checkpoint_written_bytes_total", "counter", "", false),
    doc("gpuroom_checkpoint_saves_missed_total", "counter", "", false),
    doc("gpuroom_recomputed_steps_total", "counter", "", false),
    doc("gpuroom_idle_reclaims_total", "counter", "", false),
    doc("gpuroom_price_moves_total", "counter", "", false),
    doc("gpuroom_launch_requests_total", "counter", "", true),
    doc("gpuroom_nodes_launched_total", "counter", "", true),
    doc("gpuroom_launch_failures_total", "counter", "", true),
    doc("gpuroom_releases_total", "counter", "", true),
    doc("gpuroom_engine_info", "gauge", "version, world", false),
    doc("gpuroom_engine_events_total", "counter", "", false),
    doc("gpuroom_engine_view_age_seconds", "gauge", "", false),
    doc("gpuroom_engine_log_size_bytes", "gauge", "", true),
    doc("gpuroom_engine_wal_size_bytes", "gauge", "", true),
    doc("gpuroom_engine_consoles", "gauge", "user", true),
    doc("gpuroom_source_up", "gauge", "source", true),
    doc("gpuroom_source_failing_seconds", "gauge", "source", true),
    doc("gpuroom_alarms", "gauge", "severity", false),
    doc("gpuroom_alarms_by_kind", "gauge", "kind", true),
    doc("gpuroom_alarms_unread", "gauge", "", false),
];

type Labels = Vec<(String, String)>;

/// Families of one kind being filled, then registered.
struct Families {
    registry: Registry,
}

fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn dollars(m: Micros) -> f64 {
    m.0 as f64 / 1e6
}

fn per_hour(m: MicrosPerHour) -> f64 {
    m.0 as f64 / 1e6
}

const MIB: f64 = 1_048_576.0;

fn billing(mode: BillingMode) -> &'static str {
    match mode {
        BillingMode::Reserved => "reserved",
        BillingMode::OnDemand => "on_demand",
        BillingMode::Spot => "spot",
    }
}

impl Families {
    fn gauge(&mut self, name: &str, help: &str, unit: Option<&str>, samples: impl IntoIterator<Item = (Labels, f64)>) {
        // The encoder ends each help text with its own full stop.
        let help = help.trim_end_matches('.');
        let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (labels, value) in samples {
            family.get_or_create(&labels).set(value);
        }
        match unit {
            Some(unit) => self.registry.register_with_unit(name, help, Unit::Other(unit.into()), family),
            None => self.registry.register(name, help, family),
        }
    }

    fn counter(&mut self, name: &str, help: &str, unit: Option<&str>, samples: impl IntoIterator<Item = (Labels, f64)>) {
        let help = help.trim_end_matches('.');
        let family = Family::<Labels, Counter<f64, AtomicU64>>::default();
        for (labels, value) in samples {
            family.get_or_create(&labels).inc_by(value.max(0.0));
        }
        match unit {
            Some(unit) => self.registry.register_with_unit(name, help, Unit::Other(unit.into()), family),
            None => self.registry.register(name, help, family),
        }
    }

    fn one(&mut self, name: &str, help: &str, unit: Option<&str>, value: f64) {
        self.gauge(name, help, unit, [(Labels::new(), value)]);
    }

    fn total(&mut self, name: &str, help: &str, unit: Option<&str>, value: f64) {
        self.counter(name, help, unit, [(Labels::new(), value)]);
    }
}

/// Every family of `snapshot`, as of `now_ms` (the scrape's wall clock).
pub fn registry(snapshot: &Snapshot, now_ms: i64) -> Registry {
    let mut f = Families { registry: Registry::with_prefix("gpuroom") };
    let view = &*snapshot.view;
    fleet(&mut f, view);
    queue(&mut f, view);
    money(&mut f, view);
    spot(&mut f, view);
    work(&mut f, view);
    engine(&mut f, view, &snapshot.health, now_ms);
    f.registry
}

/// The Prometheus text format (0.0.4), as Prometheus and `promtool` read it.
pub fn render_text(snapshot: &Snapshot, now_ms: i64) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry(snapshot, now_ms));
    out
}

/// OpenMetrics text, for a scraper that asks for it.
pub fn render_openmetrics(snapshot: &Snapshot, now_ms: i64) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry(snapshot, now_ms));
    out
}

fn fleet(f: &mut Families, view: &crate::room::View) {
    let mut gpus: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut nodes: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let (mut util, mut mem_used, mut mem_total) = (Vec::new(), Vec::new(), Vec::new());
    for node in &view.nodes {
        let mode = billing(node.billing);
        *nodes.entry((mode, if node.up { "up" } else { "down" })).or_default() += 1;
        for gpu in &node.gpus {
            let state = match () {
                _ if !node.up => "down",
                _ if gpu.stale => "stale",
                _ if !gpu.jobs.is_empty() => "busy",
                _ => "idle",
            };
            *gpus.entry((mode, state)).or_default() += 1;
            let at = labels([("node", &node.name), ("gpu", &gpu.index.to_string())]);
            if let Some(u) = gpu.util {
                // To a tenth of a percent: the sample's own precision.
                util.push((at.clone(), (f64::from(u) * 10.0).round() / 1000.0));
            }
            if let Some(used) = gpu.mem_used {
                mem_used.push((at.clone(), used.0 as f64 * MIB));
            }
            mem_total.push((at, gpu.mem_total.0 as f64 * MIB));
        }
    }
    f.gauge(
        "gpus",
        "GPUs by billing mode and state (busy: a job holds it; idle; stale: its source failed; down).",
        None,
        gpus.into_iter().map(|((b, s), n)| (labels([("billing", b), ("state", s)]), f64::from(n))),
    );
    f.gauge(
        "nodes",
        "Nodes by billing mode and whether they are up.",
        None,
        nodes.into_iter().map(|((b, s), n)| (labels([("billing", b), ("state", s)]), f64::from(n))),
    );
    f.gauge("gpu_utilization", "Each GPU's utilization, 0 to 1 (its newest sample).", Some("ratio"), util);
    f.gauge("gpu_memory_used", "Each GPU's memory in use (its newest sample).", Some("bytes"), mem_used);
    f.gauge("gpu_memory_total", "Each GPU's memory.", Some("bytes"), mem_total);
    f.one("gpu_utilization_mean", "Mean utilization over the GPUs of up nodes that have a sample, 0 to 1.", Some("ratio"), view.cluster.util_mean / 100.0);
    let frag = &view.cluster.fragmentation;
    f.one(
        "memory_fragmentation",
        "Share of free GPU memory the typical shapes of queued and running jobs cannot use (the memory pane's F(M)), 0 to 1.",
        Some("ratio"),
        frag.workload,
    );
    f.one("gpu_fragmentation", "1 minus the most free whole GPUs on one node over all free whole GPUs, 0 to 1.", Some("ratio"), frag.gpus);
    f.one("fleet_cost_dollars_per_hour", "What the whole fleet costs per hour now, idle GPUs included.", None, per_hour(view.cluster.burn));
}

fn queue(f: &mut Families, view: &crate::room::View) {
    let t = |q: &crate::room::view::TenantQueue| labels([("tenant", &q.tenant)]);
    let rows = &view.queue.by_tenant;
    f.gauge("queue_jobs", "Jobs waiting in the queue, per tenant.", None, rows.iter().map(|q| (t(q), f64::from(q.queued))));
    f.gauge("queue_gpus_requested", "GPUs the waiting jobs ask for, per tenant.", None, rows.iter().map(|q| (t(q), f64::from(q.gpus_asked))));
    f.gauge(
        "queue_oldest_wait",
        "The longest current wait in the queue, per tenant.",
        Some("seconds"),
        rows.iter().map(|q| (t(q), q.oldest_wait.map_or(0.0, |s| s.0 as f64))),
    );
    f.gauge("running_jobs", "Jobs holding GPUs, per tenant.", None, rows.iter().map(|q| (t(q), f64::from(q.running))));
    f.gauge("quota_gpus", "Each tenant's GPU quota.", None, rows.iter().map(|q| (t(q), f64::from(q.quota_gpus))));
    f.gauge("held_gpus", "GPUs each tenant's jobs hold.", None, rows.iter().map(|q| (t(q), f64::from(q.gpus_held))));
    f.gauge(
        "borrowed_gpus",
        "GPUs held beyond the tenant's quota (preempted first when an owner needs them).",
        None,
        rows.iter().map(|q| (t(q), f64::from(q.borrowed_gpus))),
    );
    // Per tenant, 0 when none: "no wait alarm" is a value, not a missing series.
    let mut waits: BTreeMap<&str, u32> = rows.iter().map(|q| (q.tenant.as_str(), 0)).collect();
    for alarm in &view.alarms {
        if !alarm.is_active() {
            continue;
        }
        if let Some((tenant, _class)) = alarm.id.strip_prefix("wait:").and_then(|rest| rest.rsplit_once(':')) {
            *waits.entry(tenant).or_default() += 1;
        }
    }
    f.gauge(
        "wait_alarms",
        "Job classes of each tenant whose jobs wait past their class's limit (the room's wait alarms; 0: none).",
        None,
        waits.into_iter().map(|(t, n)| (labels([("tenant", t)]), f64::from(n))),
    );
}

fn level_number(level: crate::cost::budget::BudgetLevel) -> f64 {
    use crate::cost::budget::BudgetLevel::*;
    match level {
        Ok => 0.0,
        Notify => 1.0,
        Limited => 2.0,
        Blocked => 3.0,
    }
}

fn money(f: &mut Families, view: &crate::room::View) {
    let b = &view.budgets;
    let t = |r: &crate::room::view::BudgetRow| labels([("tenant", &r.tenant)]);
    f.gauge("budget", "Each tenant's monthly budget (0: none set).", Some("dollars"), b.iter().map(|r| (t(r), dollars(r.budget))));
    f.gauge("budget_spent", "What each tenant has been charged this month.", Some("dollars"), b.iter().map(|r| (t(r), dollars(r.month_to_date))));
    let used = b.iter().filter(|r| r.budget.0 > 0).map(|r| (t(r), r.month_to_date.0 as f64 / r.budget.0 as f64));
    f.gauge("budget_used", "This month's spend over the budget, per tenant with a budget (1 = 100%).", Some("ratio"), used);
    f.gauge(
        "budget_level",
        "The step the room enforces: 0 ok, 1 notify (80%), 2 limited (100%), 3 blocked (120%, not approved).",
        None,
        b.iter().map(|r| (t(r), level_number(r.level))),
    );
    f.gauge(
        "budget_projected",
        "This month's spend so far plus the current burn to the month's end, per tenant.",
        Some("dollars"),
        b.iter().map(|r| (t(r), dollars(r.projected))),
    );
    f.gauge(
        "tenant_cost_dollars_per_hour",
        "What each tenant's running work costs per hour now (the charged burn; the fleet's includes idle GPUs).",
        None,
        b.iter().map(|r| (t(r), per_hour(r.burn))),
    );
    f.counter(
        "tenant_spend",
        "Everything charged to each tenant for instance time since the run began.",
        Some("dollars"),
        b.iter().map(|r| (t(r), dollars(r.all_time))),
    );
    let modes = [BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Spot];
    let totals = &view.totals;
    f.counter(
        "spend",
        "Instance spend since the run began, by billing mode (idle GPUs included).",
        Some("dollars"),
        modes.iter().map(|m| (labels([("billing", billing(*m))]), dollars(totals.spend_by_mode[m.index()]))),
    );
    f.counter(
        "idle_spend",
        "Instance spend on GPUs no job held, by billing mode.",
        Some("dollars"),
        modes.iter().map(|m| (labels([("billing", billing(*m))]), dollars(totals.idle_by_mode[m.index()]))),
    );
    f.counter("service_spend", "Storage, checkpoint I/O and network spend since the run began.", Some("dollars"), [(Labels::new(), dollars(totals.services))]);
    f.one("idle_share", "Share of instance spend that paid for GPUs no job held, 0 to 1.", Some("ratio"), totals.idle_share());
}

fn spot(f: &mut Families, view: &crate::room::View) {
    let pool = |zone: &str, kind: &str| labels([("zone", zone), ("instance_type", kind)]);
    let prices = view.market.iter().filter_map(|m| Some((pool(&m.zone, &m.instance_type), per_hour(m.price?))));
    f.gauge("spot_price_dollars_per_hour", "Each spot pool's market price now.", None, prices);
    let mut lowest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for job in &view.spot_jobs {
        if let Some(cap) = job.cap {
            let entry = lowest.entry((job.zone.as_str(), job.instance_type.as_str())).or_insert(cap.0);
            *entry = (*entry).min(cap.0);
        }
    }
    f.gauge(
        "spot_lowest_cap_dollars_per_hour",
        "The lowest max price of the jobs on each spot pool (the first to move when the market passes it).",
        None,
        lowest.into_iter().map(|((z, k), cap)| (pool(z, k), cap as f64 / 1e6)),
    );
    let risk = view.market.iter().filter_map(|m| Some((pool(&m.zone, &m.instance_type), m.hazard.as_ref()?.p)));
    f.gauge("spot_interruption_risk", "Probability that a fresh instance of the pool's type is interrupted in the next minute.", Some("ratio"), risk);
}

fn work(f: &mut Families, view: &crate::room::View) {
    let s = &view.totals.stats;
    f.total("jobs_submitted", "Jobs submitted since the run began.", None, s.submitted as f64);
    f.counter(
        "jobs_finished",
        "Jobs finished, by outcome.",
        None,
        [(labels([("outcome", "done")]), s.done as f64), (labels([("outcome", "failed")]), s.failed as f64)],
    );
    f.total("placements", "Placements of jobs on GPUs (a requeued job is placed again).", None, s.placements as f64);
    f.total("preemptions", "Jobs the scheduler preempted (quota reclaim, MLFQ).", None, s.preemptions_by_scheduler as f64);
    f.total("requeues", "Jobs put back in the queue after a stop.", None, s.requeues as f64);
    f.total("escalations", "Queued jobs escalated past their class's wait limit.", None, s.escalations as f64);
    f.total("interruption_notices", "Spot interruption notices received.", None, s.notices as f64);
    f.total("nodes_lost", "Nodes lost (spot reclaims, failures).", None, s.nodes_lost as f64);
    f.total("checkpoints", "Checkpoints written.", None, s.checkpoints as f64);
    f.counter("checkpoint_written", "Checkpoint data written.", Some("bytes"), [(Labels::new(), s.checkpoint_bytes as f64)]);
    f.total(
        "checkpoint_saves_missed",
        "Saves an interruption notice asked for that did not finish before the instance went.",
        None,
        s.notice_saves_missed as f64,
    );
    f.total("recomputed_steps", "Training steps lost since the last checkpoint and done again.", None, s.lost_steps as f64);
    f.total("idle_reclaims", "Jobs stopped because their GPUs sat idle past the window.", None, s.idle_reclaims as f64);
    f.total("price_moves", "Spot jobs saved and moved because the market passed their max price.", None, s.price_moves as f64);
    if let Some(cap) = &view.capacity {
        f.total("launch_requests", "Launches elastic capacity asked for.", None, cap.launch_requests as f64);
        f.total("nodes_launched", "Nodes elastic capacity brought up.", None, cap.nodes_launched as f64);
        f.total("launch_failures", "Launches the cloud refused or that failed.", None, cap.launch_failures as f64);
        f.total("releases", "Nodes elastic capacity gave back.", None, cap.releases as f64);
    }
}

fn engine(f: &mut Families, view: &crate::room::View, health: &Health, now_ms: i64) {
    f.gauge(
        "engine_info",
        "The engine's version and world (always 1).",
        None,
        [(labels([("version", env!("CARGO_PKG_VERSION")), ("world", &health.world)]), 1.0)],
    );
    f.total("engine_events", "Events the engine has applied since the run began.", None, view.events as f64);
    let age = if health.published_ms > 0 { ((now_ms - health.published_ms).max(0) as f64) / 1000.0 } else { 0.0 };
    f.one(
        "engine_view_age",
        "Seconds since the engine last published its view (it publishes about once a second; a stalled engine's grows).",
        Some("seconds"),
        age,
    );
    if let Some(bytes) = health.log_bytes {
        f.one("engine_log_size", "The event log's size on disk.", Some("bytes"), bytes as f64);
    }
    if let Some(bytes) = health.wal_bytes {
        f.one("engine_wal_size", "The event log's WAL on disk (it stays near 4 MB unless checkpoints are held back).", Some("bytes"), bytes as f64);
    }
    f.gauge(
        "engine_consoles",
        "Consoles attached through the engine's socket, by OS user.",
        None,
        health.consoles.iter().map(|(user, n)| (labels([("user", user)]), *n as f64)),
    );
    let sources = view.sources.iter().map(|s| (labels([("source", &s.name)]), if s.ok { 1.0 } else { 0.0 }));
    f.gauge("source_up", "1 when a live source answered last time, 0 when it failed.", None, sources);
    let failing = view.sources.iter().map(|s| {
        let secs = if s.ok { 0.0 } else { view.at.map_or(0.0, |at| (at - s.since).num_seconds().max(0) as f64) };
        (labels([("source", &s.name)]), secs)
    });
    f.gauge("source_failing", "How long a live source has been failing (0 while it answers).", Some("seconds"), failing);
    // Both severities always, so "no alarm" is a 0 and not a missing series.
    let mut by_severity: BTreeMap<&str, u32> = BTreeMap::from([("critical", 0), ("warning", 0)]);
    let mut by_kind: BTreeMap<&str, u32> = BTreeMap::new();
    for alarm in view.alarms.iter().filter(|a| a.is_active()) {
        *by_severity.entry(alarm.severity.label()).or_default() += 1;
        *by_kind.entry(crate::room::journal::alarm_kind(&alarm.id)).or_default() += 1;
    }
    f.one(
        "alarms_unread",
        "Alarms that fired and cleared before anyone acknowledged them (the console lists them until someone does).",
        None,
        view.alarms.iter().filter(|a| a.is_unread()).count() as f64,
    );
    f.gauge(
        "alarms",
        "Active alarms, by severity (critical: the engine itself, a budget, a spot storm, a missed save).",
        None,
        by_severity.into_iter().map(|(s, n)| (labels([("severity", s)]), f64::from(n))),
    );
    f.gauge(
        "alarms_by_kind",
        "Active alarms, by kind (wait, notice, budget, engine, slurm, …).",
        None,
        by_kind.into_iter().map(|(k, n)| (labels([("kind", k)]), f64::from(n))),
    );
}

#[cfg(test)]
mod tests;
