//! Jobs: what was asked (the spec, with its attribution tags) and where the job
//! is in its life cycle. The legal moves of the state machine live here so that
//! `Room` can refuse an illegal one instead of corrupting its state.
//!
//! ```text
//!  Queued ──▶ Placed ──▶ Running ──▶ Checkpointing ──▶ Running
//!    ▲          │          │  │            │
//!    │          │          │  └────────────┴──▶ Done | Failed
//!    │          ▼          ▼                 ▼
//!    └──(requeue)◀─── Preempted ◀──────── (stop after save)
//! ```
//!
//! A job that is being stopped may still finish on its own (Preempted → Done),
//! and a very short job may end before its start was reported (Placed → Done).

use serde::{Deserialize, Serialize};

use super::ids::{JobId, NodeId, PoolKey, TenantId};
use super::units::{At, Mib, Micros, MicrosPerHour, Secs};

/// The four attribution levels every job carries (SPEC §5).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Tags {
    pub tenant: TenantId,
    pub project: String,
    pub env: String,
    pub model: String,
}

/// What kind of work a job is; each class has its own wait limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobClass {
    Training,
    FineTune,
    Eval,
    BatchInference,
}

impl JobClass {
    /// A short word for the class, for the console's columns ("train", "infer").
    pub fn label(self) -> &'static str {
        match self {
            JobClass::Training => "train",
            JobClass::FineTune => "tune",
            JobClass::Eval => "eval",
            JobClass::BatchInference => "infer",
        }
    }
}

/// Which capacity a job may run on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolPreference {
    /// Anything, spot included (the job checkpoints).
    Any,
    /// Never on spot: latency-critical or not resumable.
    NoSpot,
    /// Interruptible batch or evaluation: spot only, until it has waited too
    /// long; then it falls back to any capacity (SPEC §1 guidance).
    SpotOnly,
}

/// What was asked for a job: its resources, its work in steps, its priority
/// and where it may run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub id: JobId,
    pub name: String,
    pub tags: Tags,
    pub class: JobClass,
    pub gpus: u8,
    /// GPU memory asked on each of its GPUs.
    pub gpu_mem: Mib,
    /// Exclusive jobs own their GPUs; others may share a GPU's memory and time.
    pub exclusive: bool,
    /// Work in steps (layers for layer-wise jobs); progress is steps done / total.
    pub steps_total: u64,
    pub priority: i32,
    pub pool: PoolPreference,
    /// Size of a full checkpoint of the job's state.
    pub checkpoint_size: Mib,
    /// Host CPUs and memory asked (DRF shares them with GPUs).
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub host_mem: Mib,
    /// The submitter's run-time estimate (a time limit), used by backfill.
    #[serde(default)]
    pub est_runtime: Option<Secs>,
    /// The GPU models it may run on (as nodes name theirs); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_models: Vec<String>,
}

/// Whether work bound to `models` (empty: any) may run on GPU model `model`.
pub fn models_allow(models: &[String], model: &str) -> bool {
    models.is_empty() || models.iter().any(|m| m == model)
}

/// Why a job was stopped before it finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StopReason {
    /// A spot interruption notice or the loss of the instance.
    Interruption,
    /// Its tenant passed the hard budget threshold without an approval.
    Budget,
    /// The market went above the job's max price: saved, then moved.
    MaxPrice { market: super::units::MicrosPerHour, cap: super::units::MicrosPerHour },
    /// An operator asked for it.
    Operator { actor: String, requeue: bool },
    /// The scheduler took the GPUs back (quota reclaim, a higher queue, idle).
    Scheduler(SchedStop),
}

/// Why the scheduler stopped a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SchedStop {
    /// Borrowed capacity returned to the tenant that owns it.
    Reclaim { for_tenant: TenantId },
    /// Preempted by a job in a higher feedback queue.
    Priority { for_job: JobId },
    /// The GPU idled below the threshold for the whole window: released for good.
    Idle,
    /// Moved off a mostly idle node so that the node can be given back.
    Consolidate { node: super::ids::NodeId },
}

/// What happens once a checkpoint in progress completes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AfterCheckpoint {
    Continue,
    Stop(StopReason),
}

/// Where a job is in its life cycle (see the module's diagram), with what
/// each state needs to remember.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum JobState {
    Queued,
    /// GPUs are reserved and the executor was told to start it.
    Placed,
    Running,
    Checkpointing {
        then: AfterCheckpoint,
    },
    /// Stop requested; the GPUs are released when the executor confirms.
    Preempted {
        reason: StopReason,
    },
    Done,
    Failed {
        reason: String,
    },
}

/// A coarse name for each state, for legality checks, counters and display.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Queued,
    Placed,
    Running,
    Checkpointing,
    Preempted,
    Done,
    Failed,
}

impl Phase {
    /// A short word for the phase, for the console and counters.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Placed => "placed",
            Phase::Running => "running",
            Phase::Checkpointing => "ckpt",
            Phase::Preempted => "stopping",
            Phase::Done => "done",
            Phase::Failed => "failed",
        }
    }

    /// Done or failed: the job moves no more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed)
    }

    /// Holds GPUs (placed, running, saving or stopping).
    pub fn holds_gpus(self) -> bool {
        matches!(self, Phase::Placed | Phase::Running | Phase::Checkpointing | Phase::Preempted)
    }

    /// The legal moves of the life cycle.
    pub fn can_become(self, next: Phase) -> bool {
        use Phase::*;
        matches!(
            (self, next),
            (Queued, Placed)
                | (Queued, Failed)
                | (Placed, Running)
                | (Placed, Preempted)
                | (Placed, Done)
                | (Placed, Failed)
                | (Running, Checkpointing)
                | (Running, Preempted)
                | (Running, Done)
                | (Running, Failed)
                | (Checkpointing, Running)
                | (Checkpointing, Preempted)
                | (Checkpointing, Done)
                | (Checkpointing, Failed)
                | (Preempted, Queued)
                | (Preempted, Done)
                | (Preempted, Failed)
        )
    }
}

impl JobState {
    /// The state's coarse name.
    pub fn phase(&self) -> Phase {
        match self {
            JobState::Queued => Phase::Queued,
            JobState::Placed => Phase::Placed,
            JobState::Running => Phase::Running,
            JobState::Checkpointing { .. } => Phase::Checkpointing,
            JobState::Preempted { .. } => Phase::Preempted,
            JobState::Done => Phase::Done,
            JobState::Failed { .. } => Phase::Failed,
        }
    }
}

/// Where a placed job runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub node: NodeId,
    pub gpus: Vec<u8>,
}

/// A job: its spec, where it is in its life cycle, and its history and costs
/// so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub spec: JobSpec,
    pub state: JobState,
    pub submitted_at: At,
    /// When it last entered the queue (submission or requeue).
    pub queued_since: At,
    pub placement: Option<Placement>,
    pub steps_done: u64,
    /// Progress in the last completed checkpoint: where a restart resumes.
    pub steps_saved: u64,
    pub started_at: Option<At>,
    /// When its current placement was made (quota order: last placed, first borrowed).
    #[serde(default)]
    pub placed_at: Option<At>,
    pub last_checkpoint_at: Option<At>,
    pub finished_at: Option<At>,
    /// Placements so far (1 for a job that ran straight through).
    pub attempts: u32,
    pub requeues: u32,
    /// Seconds spent queued over all attempts, closed periods only.
    pub waited_secs: i64,
    /// Instance time: its share of the GPUs it held.
    pub cost: Micros,
    /// Storage, checkpoint I/O and network on top.
    #[serde(default)]
    pub service_cost: Micros,
    /// Requests served and tokens produced, where the job reports them.
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub tokens: u64,
    /// Steps computed and then lost to an interruption (recompute).
    pub lost_steps: u64,
    pub checkpoints: u32,
    pub checkpoint_bytes: u64,
    /// Attained service: GPUs × milliseconds run (the MLFQ's measure), up
    /// to `service_from` while it runs (see `attained_gpu_ms`).
    #[serde(default)]
    pub service_gpu_ms: i64,
    /// While it runs on its GPUs: since when service accrues that is not yet
    /// in `service_gpu_ms`. Accrued when it stops or is read, not on every
    /// event, so an event's cost does not grow with the jobs running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_from: Option<At>,
    /// Waited past its class's limit: ordered first, and a spot-only job may
    /// use any capacity.
    #[serde(default)]
    pub escalated: bool,
    /// What the spot watcher and the checkpoint controller last made of the
    /// job on its spot instance (refreshed on prices, notices, saves, telemetry).
    #[serde(default)]
    pub risk: Option<Box<JobRisk>>,
    /// Seconds its last saves took (EWMA): δ of Young/Daly.
    #[serde(default)]
    pub checkpoint_secs: Option<f64>,
    /// When the save in flight was asked for.
    #[serde(default)]
    pub checkpoint_asked_at: Option<At>,
    /// Capacity to stay off after an interruption or a move (see `Avoid`).
    #[serde(default)]
    pub avoid: Option<Box<Avoid>>,
    /// The pool an operator sent it to: its next placement goes there only.
    #[serde(default)]
    pub target: Option<Box<PoolTarget>>,
}

/// A pool an operator sends a job to: a billing mode, instance type and zone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PoolTarget {
    pub billing: crate::domain::cluster::BillingMode,
    pub instance_type: String,
    pub zone: String,
}

impl PoolTarget {
    /// The pool a node of `spec` belongs to.
    pub fn of(spec: &crate::domain::cluster::NodeSpec) -> PoolTarget {
        PoolTarget { billing: spec.billing, instance_type: spec.instance_type.clone(), zone: spec.zone.clone() }
    }

    /// Whether a node of `spec` is in this pool.
    pub fn holds(&self, spec: &crate::domain::cluster::NodeSpec) -> bool {
        spec.billing == self.billing && spec.instance_type == self.instance_type && spec.zone == self.zone
    }
}

impl std::fmt::Display for PoolTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.billing.short(), self.instance_type, self.zone)
    }
}

/// Where a migrated job must not go next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Avoid {
    /// The pool it was interrupted in or left: another spot pool or stable
    /// capacity, for the next placement only.
    Pool(PoolKey),
    /// No spot for the rest of its life (migrated to on-demand).
    AllSpot,
}

/// A spot job's risk and max price, as of `at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRisk {
    pub at: At,
    /// Probability of an interruption in the next minute at the job's age.
    pub p_next_minute: f64,
    /// The checkpoint interval the controller set from it.
    pub interval: Secs,
    pub shortened: bool,
    /// The max-price curve's answer, if the pool's market price is known.
    pub bid: Option<super::spot::Bid>,
    /// The job's reference price (placement price moved by the trend).
    pub base: Option<MicrosPerHour>,
}

impl Job {
    /// What is left of the job's own run-time estimate, scaled by its saved progress.
    pub fn remaining_estimate(&self) -> Option<Secs> {
        let est = self.spec.est_runtime?;
        let total = self.spec.steps_total.max(1) as f64;
        let left = 1.0 - self.steps_done.min(self.spec.steps_total) as f64 / total;
        Some(Secs((est.0 as f64 * left).ceil() as i64))
    }

    /// Total cost per request and per thousand tokens, where it reports them.
    pub fn unit_costs(&self) -> (Option<Micros>, Option<Micros>) {
        let total = self.cost + self.service_cost;
        let per = |n: u64, scale: i128| (n > 0).then(|| Micros((i128::from(total.0) * scale / i128::from(n)) as i64));
        (per(self.requests, 1), per(self.tokens, 1000))
    }

    /// A job submitted at `at`: queued, nothing done or spent yet.
    pub fn new(spec: JobSpec, at: At) -> Job {
        Job {
            spec,
            state: JobState::Queued,
            submitted_at: at,
            queued_since: at,
            placement: None,
            steps_done: 0,
            steps_saved: 0,
            started_at: None,
            placed_at: None,
            last_checkpoint_at: None,
            finished_at: None,
            attempts: 0,
            requeues: 0,
            waited_secs: 0,
            cost: Micros::ZERO,
            lost_steps: 0,
            checkpoints: 0,
            checkpoint_bytes: 0,
            service_gpu_ms: 0,
            service_from: None,
            escalated: false,
            risk: None,
            checkpoint_secs: None,
            checkpoint_asked_at: None,
            avoid: None,
            target: None,
            service_cost: Micros::ZERO,
            requests: 0,
            tokens: 0,
        }
    }

    /// Its state's coarse name.
    pub fn phase(&self) -> Phase {
        self.state.phase()
    }

    /// Attained service as of `now`: GPUs × milliseconds run.
    pub fn attained_gpu_ms(&self, now: At) -> i64 {
        let open = self.service_from.map_or(0, |from| i64::from(self.spec.gpus) * (now - from).num_milliseconds().max(0));
        self.service_gpu_ms + open
    }

    /// Moves to `state` at `now`: a job that starts running starts accruing
    /// service, one that stops running has its span added.
    pub fn set_state(&mut self, state: JobState, now: Option<At>) {
        let (was, will) = (self.phase() == Phase::Running, state.phase() == Phase::Running);
        self.state = state;
        if was && !will {
            self.close_service(now);
        } else if will && !was {
            self.service_from = now;
        }
    }

    /// Adds the service accrued since `service_from` (the job no longer
    /// runs, or no longer holds its GPUs).
    pub fn close_service(&mut self, now: Option<At>) {
        if let (Some(now), Some(_)) = (now, self.service_from) {
            self.service_gpu_ms = self.attained_gpu_ms(now);
        }
        self.service_from = None;
    }

    /// Steps done / total, from 0 to 1 (1 for a job with no steps).
    pub fn progress(&self) -> f64 {
        if self.spec.steps_total == 0 {
            return 1.0;
        }
        (self.steps_done as f64 / self.spec.steps_total as f64).clamp(0.0, 1.0)
    }

    /// Seconds waited in the queue, the current wait included.
    pub fn wait_secs(&self, now: At) -> i64 {
        let current = if self.phase() == Phase::Queued { (now - self.queued_since).num_seconds().max(0) } else { 0 };
        self.waited_secs + current
    }
}

/// A save of all of a job's state, or only of what changed since the last save.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointKind {
    Full,
    Incremental,
}

#[cfg(test)]
mod tests {
    use super::Phase::*;

    #[test]
    fn the_life_cycle_allows_exactly_its_moves() {
        let all = [Queued, Placed, Running, Checkpointing, Preempted, Done, Failed];
        let legal = [
            (Queued, Placed),
            (Queued, Failed),
            (Placed, Running),
            (Placed, Preempted),
            (Placed, Done),
            (Placed, Failed),
            (Running, Checkpointing),
            (Running, Preempted),
            (Running, Done),
            (Running, Failed),
            (Checkpointing, Running),
            (Checkpointing, Preempted),
            (Checkpointing, Done),
            (Checkpointing, Failed),
            (Preempted, Queued),
            (Preempted, Done),
            (Preempted, Failed),
        ];
        for from in all {
            for to in all {
                assert_eq!(from.can_become(to), legal.contains(&(from, to)), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn terminal_states_lead_nowhere() {
        for to in [Queued, Placed, Running, Checkpointing, Preempted, Done, Failed] {
            assert!(!Done.can_become(to));
            assert!(!Failed.can_become(to));
        }
    }
}
