//! `View`: an immutable snapshot of everything the console draws, built from
//! the `Room` by `Room::view()` (in `view_build`). The TUI renders a `View`
//! and nothing else.
//!
//! Plain data: every text that came from outside is cleaned when the view is
//! built, so no pane has to remember to; rates derived for display (burn per
//! hour, projections) are computed there too, not in the TUI.

use serde::{Deserialize, Serialize};

pub use super::journal::AlarmSeverity;
use super::journal::{AuditEntry, LogLine, Severity, Stats};
use crate::cost::budget::BudgetLevel;
use crate::domain::cluster::BillingMode;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::{JobClass, Phase};
use crate::domain::units::{At, Mib, Micros, MicrosPerHour, Secs};
use crate::market::Trend;
use crate::market::bid::{BidMode, Verdict};
use crate::sched::fragmentation::ClusterFragmentation;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    pub at: Option<At>,
    /// What the engine runs on, as its host says: "sim" (a simulated
    /// cluster) or "live"; `None` when no host said (a bare room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    pub events: u64,
    pub discipline: String,
    pub cluster: ClusterView,
    pub nodes: Vec<NodeView>,
    pub queue: QueueView,
    /// Jobs not finished: running first (by node), then queued in queue order.
    pub jobs: Vec<JobRow>,
    pub market: Vec<MarketRow>,
    /// Jobs holding GPUs on spot nodes, smallest headroom (closest to being
    /// moved) first; jobs with no known headroom last, then by id.
    #[serde(default)]
    pub spot_jobs: Vec<SpotJobRow>,
    pub budgets: Vec<BudgetRow>,
    pub alarms: Vec<AlarmRow>,
    /// Recent notable events, newest last.
    pub log: Vec<LogLine>,
    /// The last `AUDIT_SHOWN` operator actions (who, from where, what), newest last.
    #[serde(default)]
    pub audit: Vec<AuditEntry>,
    /// Every pool of the fleet (billing mode, instance type, zone) with its
    /// free capacity: where an operator can migrate a job to.
    #[serde(default)]
    pub pools: Vec<PoolRow>,
    /// Live sources (NVML, dcgm-exporter, EC2, IMDS, executors) and how each
    /// last answered; empty in simulation.
    #[serde(default)]
    pub sources: Vec<SourceView>,
    /// The Slurm cluster gpuroom reads (and drives), when one is attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<super::view_slurm::SlurmView>,
    /// Elastic capacity, when the room has pools to buy from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityView>,
    pub totals: Totals,
    /// Where a console reads the view from another process's log: when it
    /// was published, and by which engine. The room never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication: Option<Publication>,
}

/// A published view's origin, for an attached console or a wall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Publication {
    /// Milliseconds since the epoch, by the publishing engine's clock.
    pub at_ms: i64,
    /// "pid N" of the engine holding the log now, or "no engine".
    pub engine: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceView {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub since: At,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolRow {
    pub target: crate::domain::job::PoolTarget,
    pub nodes_up: u32,
    pub nodes_total: u32,
    /// GPUs of up nodes with no allocation, and the largest count on one node.
    pub gpus_free: u32,
    pub gpus_free_one_node: u32,
    pub gpus_total: u32,
    /// Price per node-hour now (market price for spot).
    pub price: Option<MicrosPerHour>,
}

impl PoolRow {
    /// A job of `gpus` GPUs could start here now: one node has that many free.
    pub fn fits(&self, gpus: u32) -> bool {
        self.gpus_free_one_node >= gpus
    }
}

/// How many audit entries the `View` carries.
pub const AUDIT_SHOWN: usize = 20;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    pub nodes_up: u32,
    pub nodes_total: u32,
    pub gpus_total: u32,
    pub gpus_busy: u32,
    /// Mean utilization over GPUs of up nodes that have a sample.
    pub util_mean: f64,
    pub mem_total: u64,
    pub mem_allocated: u64,
    pub fragmentation: ClusterFragmentation,
    /// What the whole fleet costs per hour right now.
    pub burn: MicrosPerHour,
    /// GPUs whose source failed after their last sample.
    #[serde(default)]
    pub gpus_stale: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: NodeId,
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    pub gpu_model: String,
    pub state: String,
    pub up: bool,
    pub price: Option<MicrosPerHour>,
    pub max_price: Option<MicrosPerHour>,
    pub gpus: Vec<GpuView>,
    /// F_n(M): free GPU memory the workload's typical shapes cannot use
    /// here (`sched::frag_gradient`); none while the node takes no work.
    #[serde(default)]
    pub workload_frag: Option<Mib>,
}

impl NodeView {
    /// The pool the node belongs to (names as cleaned for the view).
    pub fn pool(&self) -> crate::domain::job::PoolTarget {
        crate::domain::job::PoolTarget { billing: self.billing, instance_type: self.instance_type.clone(), zone: self.zone.clone() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    pub index: u8,
    pub util: Option<f32>,
    pub mem_total: Mib,
    pub mem_used: Option<Mib>,
    pub mem_allocated: Mib,
    pub largest_free: Mib,
    pub fragmentation: f64,
    pub jobs: Vec<JobId>,
    pub exclusive: bool,
    /// The figures are old: its source failed after the last sample.
    #[serde(default)]
    pub stale: bool,
    #[serde(default)]
    pub health: Option<crate::domain::event::GpuHealth>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub depth: u32,
    pub gpus_asked: u32,
    pub oldest_wait: Option<Secs>,
    pub oldest_job: Option<JobId>,
    pub by_tenant: Vec<TenantQueue>,
    pub running: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantQueue {
    pub tenant: String,
    pub queued: u32,
    pub gpus_asked: u32,
    pub running: u32,
    pub gpus_held: u32,
    /// Of `gpus_held`, those borrowed beyond the quota (preempted first).
    pub borrowed_gpus: u32,
    pub quota_gpus: u32,
    pub oldest_wait: Option<Secs>,
}

fn any_pool() -> crate::domain::job::PoolPreference {
    crate::domain::job::PoolPreference::Any
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: JobId,
    pub name: String,
    pub tenant: String,
    pub project: String,
    pub env: String,
    pub model: String,
    pub class: JobClass,
    pub phase: Phase,
    /// "requeued" for a queued job that ran before, else the phase label.
    pub state: String,
    pub gpus: u8,
    pub gpu_mem: Mib,
    pub node: Option<String>,
    pub billing: Option<BillingMode>,
    pub progress: f64,
    pub wait: Secs,
    pub eta: Option<Secs>,
    /// For a job not yet running: its predicted run time (from jobs like it).
    #[serde(default)]
    pub predicted_runtime: Option<Secs>,
    pub cost: Micros,
    pub attempts: u32,
    /// Runs on capacity borrowed beyond its tenant's quota.
    pub borrowed: bool,
    /// Waited past its class's limit and was escalated.
    pub escalated: bool,
    /// The pool an operator sent it to, until it is placed there.
    #[serde(default)]
    pub target: Option<crate::domain::job::PoolTarget>,
    /// Which capacity it may run on (spot only, never spot, any).
    #[serde(default = "any_pool")]
    pub pool: crate::domain::job::PoolPreference,
    /// Share of the job computed since its last checkpoint: what a stop
    /// without saving would lose.
    #[serde(default)]
    pub unsaved: f64,
    /// When it last saved, and how long its saves take (measured).
    #[serde(default)]
    pub last_save: Option<At>,
    #[serde(default)]
    pub save_secs: Option<f64>,
    /// For a queued job: why it waits (no fit, quota, budget, capacity on
    /// its way with its ETA, no spot capacity).
    #[serde(default)]
    pub waits_for: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MarketRow {
    pub zone: String,
    pub instance_type: String,
    pub price: Option<MicrosPerHour>,
    pub on_demand: MicrosPerHour,
    /// Max prices of the spot instances bought in this pool.
    pub max_prices: Vec<MicrosPerHour>,
    pub nodes_up: u32,
    pub nodes_total: u32,
    /// The last quote seen, and when the price last changed.
    pub updated_at: Option<At>,
    pub changed_at: Option<At>,
    pub change: i64,
    /// The least-squares trend's direction as of the last quote (what the
    /// max prices are rebased on); the change's direction when there is none.
    pub trend: Trend,
    /// That trend's slope as a fraction of the price per hour (+0.12 = +12%/h).
    #[serde(default)]
    pub trend_per_hour: Option<f64>,
    /// Next-minute interruption risk of a fresh instance of the type.
    #[serde(default)]
    pub hazard: Option<PoolHazard>,
    /// Price points over the history window, oldest first.
    pub history: Vec<(At, MicrosPerHour)>,
}

/// `HazardModel::view` for a pool's instance type, as of `View::at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolHazard {
    /// The blended next-minute probability.
    pub p: f64,
    /// Interruptions of the type in the recent (5-minute) window.
    pub recent_events: u32,
    /// The long-run (Kaplan–Meier) next-minute probability, if the type has lifetimes.
    pub long_run: Option<f64>,
}

/// A job on a spot node: its max price against the market.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpotJobRow {
    pub id: JobId,
    pub name: String,
    pub node: String,
    pub zone: String,
    pub instance_type: String,
    pub phase: Phase,
    pub market: Option<MicrosPerHour>,
    /// The job's max price (`Bid::cap`).
    pub cap: Option<MicrosPerHour>,
    /// `cap / market − 1`: negative when the market is above the cap.
    pub headroom: Option<f64>,
    pub coefficient: Option<f64>,
    pub mode: Option<BidMode>,
    pub verdict: Option<Verdict>,
    /// The checkpoint interval set from the risk, and whether it was shortened.
    pub interval: Option<Secs>,
    pub shortened: bool,
    pub p_next_minute: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetRow {
    pub tenant: String,
    /// What the tenant's running work costs per hour now.
    pub burn: MicrosPerHour,
    pub month_to_date: Micros,
    pub budget: Micros,
    /// Month-to-date plus the current burn until the month ends.
    pub projected: Micros,
    pub gpus_held: u32,
    pub quota_gpus: u32,
    /// The step the room enforces (as of the last event).
    #[serde(default = "level_ok")]
    pub level: BudgetLevel,
    /// The notify, limit and block thresholds as amounts (`config.cost.budget`
    /// percentages of `budget`; all zero when no budget is set).
    #[serde(default)]
    pub notify_at: Micros,
    #[serde(default)]
    pub limit_at: Micros,
    #[serde(default)]
    pub block_at: Micros,
    /// The operator's approval of an overrun this month, if any.
    #[serde(default)]
    pub approval: Option<ApprovalView>,
    /// What "limited" means for its queued work: wait, or spot only.
    #[serde(default)]
    pub at_limit: crate::cost::budget::AtLimit,
    /// Total cost (instance time and services) per 1,000 requests and per
    /// 1,000,000 tokens, over the tenant's jobs that reported them.
    #[serde(default)]
    pub per_1k_requests: Option<Micros>,
    #[serde(default)]
    pub per_1m_tokens: Option<Micros>,
    /// Everything charged to the tenant since the run began (instance time),
    /// for a counter that only grows (`gpuroom metrics`).
    #[serde(default)]
    pub all_time: Micros,
}

fn level_ok() -> BudgetLevel {
    BudgetLevel::Ok
}

/// A tenant's approval of an overrun (`cost::budget::Approval`), cleaned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub user: String,
    pub origin: String,
    pub at: At,
    pub reason: String,
    /// Extra spend allowed past the block threshold.
    pub amount: Option<Micros>,
    pub until: Option<At>,
    /// Still lifts the limit and the block now (not used up nor expired).
    pub in_force: bool,
}

/// An alarm as the console lists it: active (raised, maybe acknowledged),
/// or cleared and not yet seen by anyone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlarmRow {
    pub id: String,
    pub raised_at: At,
    pub text: String,
    /// Who acknowledged it and when; still active until its condition clears.
    #[serde(default)]
    pub acked_by: Option<String>,
    #[serde(default)]
    pub acked_at: Option<At>,
    #[serde(default)]
    pub severity: AlarmSeverity,
    /// When its condition cleared: listed, unread, until acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared_at: Option<At>,
}

impl AlarmRow {
    /// An active alarm nobody has acknowledged yet (the engine's own use this).
    pub fn raised(id: String, raised_at: At, text: String) -> AlarmRow {
        let severity = AlarmSeverity::of(&id);
        AlarmRow { id, raised_at, text, acked_by: None, acked_at: None, severity, cleared_at: None }
    }

    /// Its condition still holds.
    pub fn is_active(&self) -> bool {
        self.cleared_at.is_none()
    }

    /// Active and nobody on it: what the header's ▲ counts.
    pub fn is_open(&self) -> bool {
        self.is_active() && self.acked_by.is_none()
    }

    /// Fired and cleared while nobody looked: what the header's unread counts.
    pub fn is_unread(&self) -> bool {
        !self.is_active()
    }
}

/// The alarms of a view, counted the way the header shows them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AlarmCounts {
    /// Active, nobody acknowledged.
    pub open: usize,
    /// Active, acknowledged: somebody is on them.
    pub acked: usize,
    /// Cleared before anyone acknowledged them.
    pub unread: usize,
    /// Open ones that are critical.
    pub critical: usize,
}

impl AlarmCounts {
    pub fn of(alarms: &[AlarmRow]) -> AlarmCounts {
        let mut c = AlarmCounts::default();
        for a in alarms {
            match (a.is_active(), a.acked_by.is_some()) {
                (true, false) => {
                    c.open += 1;
                    c.critical += usize::from(a.severity == AlarmSeverity::Critical);
                }
                (true, true) => c.acked += 1,
                (false, _) => c.unread += 1,
            }
        }
        c
    }

    /// Nothing active and nothing unread.
    pub fn quiet(&self) -> bool {
        self.open + self.acked + self.unread == 0
    }
}

/// Active alarms first (newest first), then the cleared unread ones (latest cleared first).
pub fn sort_alarms(alarms: &mut [AlarmRow]) {
    alarms.sort_by(|a, b| {
        (!a.is_active(), std::cmp::Reverse(a.cleared_at), std::cmp::Reverse(a.raised_at), &a.id).cmp(&(
            !b.is_active(),
            std::cmp::Reverse(b.cleared_at),
            std::cmp::Reverse(b.raised_at),
            &b.id,
        ))
    });
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub stats: Stats,
    pub spend_by_mode: [Micros; 3],
    pub idle_by_mode: [Micros; 3],
    pub gpu_hours_allocated: [f64; 3],
    pub gpu_hours_idle: [f64; 3],
    pub spend: Micros,
    pub mean_wait: Option<Secs>,
    /// Mean job completion time (submission to done) of finished jobs.
    pub mean_jct: Option<Secs>,
    /// Storage, checkpoint I/O and network, on top of `spend`.
    #[serde(default)]
    pub services: Micros,
    /// What the Holt-Winters day-ahead forecast says the rest of the month costs.
    #[serde(default)]
    pub forecast_rest_of_month: Option<Micros>,
}

impl Totals {
    /// Share of instance spend that paid for GPUs no job held.
    pub fn idle_share(&self) -> f64 {
        let idle: i64 = self.idle_by_mode.iter().map(|m| m.0).sum();
        if self.spend.0 > 0 { idle as f64 / self.spend.0 as f64 } else { 0.0 }
    }
}

/// Elastic capacity for the console: the pools, what is on its way or
/// going back, and (advisory mode) what waits for an operator's yes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityView {
    /// "control", "advisory" or "off".
    pub mode: String,
    pub pools: Vec<ElasticPoolRow>,
    pub launches: Vec<LaunchRow>,
    /// Nodes being given back, with why.
    pub releasing: Vec<(String, String)>,
    pub proposals: Vec<ProposalRow>,
    pub launch_requests: u64,
    pub nodes_launched: u64,
    pub launch_failures: u64,
    pub releases: u64,
    pub consolidations: u64,
    /// What the nodes the room bought cost an hour now, and the rest
    /// (reserved and fixed nodes).
    pub elastic_burn: MicrosPerHour,
    pub fixed_burn: MicrosPerHour,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElasticPoolRow {
    pub target: crate::domain::job::PoolTarget,
    pub up: u32,
    pub booting: u32,
    pub max_nodes: u32,
    pub warm_min: u32,
    pub gpus_per_node: u8,
    /// Its hourly price now: the contract, or the spot market.
    pub price: Option<MicrosPerHour>,
    /// Left alone after a failed launch, until then.
    pub backoff_until: Option<At>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRow {
    pub id: u64,
    pub pool: crate::domain::job::PoolTarget,
    pub count: u32,
    /// Instances not yet answered, and nodes booting.
    pub unanswered: u32,
    pub booting: u32,
    /// When the last of its booting nodes takes work.
    pub eta: Option<Secs>,
    pub max_price: Option<MicrosPerHour>,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProposalRow {
    pub id: u64,
    pub since: At,
    /// "launch 1 × SPOT p3.8xlarge us-west-2b, max $4.10/h, for j265 (waited 12m)".
    pub text: String,
}

impl View {
    pub fn severity_count(&self, severity: Severity) -> usize {
        self.log.iter().filter(|l| l.severity == severity).count()
    }
}
