//! What goes into the core (`Event`) and what comes out (`Effect`).
//!
//! Everything that changes the control plane is an event, including the
//! cluster's definition and operator actions, so that the event log alone
//! rebuilds the state (replay) and the same code serves simulation, tests and
//! live operation.

use serde::{Deserialize, Serialize};

pub use super::cluster::GpuHealth;
use super::cluster::NodeSpec;
use super::ids::{GpuRef, JobId, NodeId, TenantId};
use super::job::JobSpec;
use super::units::{At, Mib, Micros, MicrosPerHour};

/// A tenant's entitlements: its GPU quota, what it may borrow beyond it, and
/// its monthly budget (micro-units).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSpec {
    pub id: TenantId,
    /// GPUs the tenant is entitled to.
    pub quota_gpus: u32,
    pub monthly_budget: Micros,
    /// GPU memory the tenant is entitled to (MiB over all its GPUs); 0: no limit.
    #[serde(default)]
    pub quota_gpu_mem: Mib,
    /// GPUs it may borrow beyond its quota while they are idle; borrowed work
    /// is preempted first when an owner needs its quota back.
    #[serde(default)]
    pub borrow_limit_gpus: u32,
}

/// One GPU sample, kept small because the log holds one per GPU per tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSample(pub GpuRef, pub f32, pub Mib);

/// Who did something, taken from the environment by the adapter that saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Actor {
    pub user: String,
    /// Where the action came from, e.g. the SSH client address or "console".
    pub origin: String,
    pub role: Role,
    /// The OS account the engine established for this actor (the kernel's
    /// word, not the console's): what a Slurm verb is checked against,
    /// since gpuroom runs Slurm's commands with the engine's own rights.
    /// `None` in logs from before it was recorded (and for the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<OsAccount>,
}

pub use super::ids::OsAccount;

/// What an actor may do: act on the room, or only watch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Operator,
    /// Read-only: a wall display or an attached viewer. Its actions are refused.
    Viewer,
}

/// Something an operator asks of the room; it comes in as `Event::Operator`
/// with the actor who asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Save and stop the job, then put it back in the queue.
    Preempt { job: JobId },
    /// Stop at once without saving and queue again from the last checkpoint.
    Requeue { job: JobId },
    /// Stop for good.
    Cancel { job: JobId },
    /// Switch the queue discipline at run time.
    SetDiscipline { discipline: super::discipline::DisciplineKind },
    /// Let a tenant past its hard budget threshold: a reason is required,
    /// and an amount over the threshold or an expiry (or both).
    ApproveOverrun { tenant: TenantId, reason: String, amount: Option<Micros>, until: Option<At> },
    /// Save the job and run it next in the given pool (a running job), or
    /// only there when it is placed (a queued one).
    Migrate { job: JobId, to: crate::domain::job::PoolTarget },
    /// Mark an active alarm as seen and handled by the actor; it stays on
    /// the list (acknowledged) until its condition clears.
    AcknowledgeAlarm { id: String },
    /// Ask Slurm to do something with one of its jobs (by Slurm's job id).
    Slurm { job: u64, verb: super::slurm::SlurmVerb },
    /// Carry out what elastic capacity proposed (advisory mode): a launch
    /// or a release, by the proposal's number.
    ApproveCapacity { proposal: u64 },
}

impl Action {
    /// The verb of the audit log and of refusals.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Preempt { .. } => "preempt",
            Action::Requeue { .. } => "requeue",
            Action::Cancel { .. } => "cancel",
            Action::Migrate { .. } => "migrate",
            Action::SetDiscipline { .. } => "switch the queue discipline",
            Action::ApproveOverrun { .. } => "approve a budget overrun",
            Action::AcknowledgeAlarm { .. } => "acknowledge an alarm",
            Action::Slurm { verb, .. } => verb.name(),
            Action::ApproveCapacity { .. } => "approve a capacity change",
        }
    }

    /// The job the action is about, if it is about one.
    pub fn job(&self) -> Option<JobId> {
        match self {
            Action::Preempt { job } | Action::Requeue { job } | Action::Cancel { job } | Action::Migrate { job, .. } => Some(*job),
            Action::SetDiscipline { .. }
            | Action::ApproveOverrun { .. }
            | Action::AcknowledgeAlarm { .. }
            | Action::Slurm { .. }
            | Action::ApproveCapacity { .. } => None,
        }
    }
}

/// Everything that comes into the core; applied in order, the log of them
/// rebuilds the state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A node joined (or a replacement instance came up under the same id).
    NodeUp {
        spec: NodeSpec,
    },
    /// The instance is gone (reclaimed, failed): unsaved work on it is lost.
    NodeLost {
        node: NodeId,
        reason: String,
    },
    TenantDefined {
        spec: TenantSpec,
    },
    JobSubmitted {
        spec: JobSpec,
    },
    /// Many jobs at once (a jobs file, a sweep, a job array): each is
    /// checked and queued as `JobSubmitted` would be (a bad one is refused
    /// alone), and one scheduling pass follows for all of them.
    JobsSubmitted {
        specs: Vec<JobSpec>,
    },
    /// The executor started the job's process(es).
    JobStarted {
        job: JobId,
    },
    /// The executor finished writing a checkpoint at `step`.
    CheckpointDone {
        job: JobId,
        step: u64,
        bytes: u64,
    },
    /// The executor stopped the job as asked.
    JobStopped {
        job: JobId,
    },
    /// The job's process ended on its own.
    JobExited {
        job: JobId,
        ok: bool,
        message: String,
    },
    /// Utilization and memory per GPU, and progress per running job.
    Telemetry {
        gpus: Vec<GpuSample>,
        progress: Vec<(JobId, u64)>,
    },
    /// The spot market price of a pool changed.
    PriceTick {
        zone: String,
        instance_type: String,
        price: MicrosPerHour,
    },
    /// The cloud will reclaim the instance at `deadline` (2-minute notice).
    InterruptionNotice {
        node: NodeId,
        deadline: At,
    },
    Operator {
        actor: Actor,
        action: Action,
    },
    /// What a serving or batch-inference job has produced so far (running
    /// totals, as its metrics endpoint reports them): for unit costs.
    JobOutput {
        job: JobId,
        requests: u64,
        tokens: u64,
    },
    /// Spot lifetimes of an instance type learned elsewhere (real traces, an
    /// earlier fleet): the long-run prior of the hazard model.
    SpotLifetimes {
        instance_type: String,
        lifetimes: Vec<super::spot::Lifetime>,
    },
    /// Temperature, power, clocks and processes per GPU (live sources).
    GpuHealth {
        readings: Vec<GpuHealth>,
    },
    /// A live source answered (`ok`) or could not be read; the GPUs it
    /// covers are shown as stale until their next sample.
    SourceStatus {
        source: String,
        ok: bool,
        detail: String,
        stale: Vec<GpuRef>,
    },
    /// What Slurm reported: its partitions, nodes and jobs, all at once.
    Slurm {
        snapshot: super::slurm::SlurmSnapshot,
    },
    /// A Slurm command (`Effect::Slurm`) ended; `message` is Slurm's own words.
    SlurmDone {
        command: u64,
        ok: bool,
        message: String,
    },
    /// A pool the room may buy nodes from (elastic capacity).
    PoolDefined {
        pool: super::capacity::PoolSpec,
    },
    /// One instance of a launch the room asked for exists and is booting
    /// (billed from now); `NodeUp` with the same spec follows once it takes work.
    Launched {
        request: u64,
        spec: NodeSpec,
    },
    /// A launch (or `count` of its instances) did not happen.
    LaunchFailed {
        request: u64,
        count: u32,
        failure: super::capacity::LaunchFailure,
        message: String,
    },
    /// The instance the room gave back is terminated: no longer billed.
    Released {
        node: NodeId,
    },
    /// The instance could not be given back (the provider refused): it
    /// stays, billed, and takes work again.
    ReleaseFailed {
        node: NodeId,
        message: String,
    },
    /// Time passed with nothing else to say.
    Tick,
}

impl Event {
    /// The jobs this event submits (none for other events).
    pub fn submitted(&self) -> &[JobSpec] {
        match self {
            Event::JobSubmitted { spec } => std::slice::from_ref(spec),
            Event::JobsSubmitted { specs } => specs,
            _ => &[],
        }
    }

    /// A short stable name, used as the `kind` column of the event log.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::NodeUp { .. } => "node-up",
            Event::NodeLost { .. } => "node-lost",
            Event::TenantDefined { .. } => "tenant",
            Event::JobSubmitted { .. } => "submit",
            Event::JobsSubmitted { .. } => "submit-batch",
            Event::JobStarted { .. } => "started",
            Event::CheckpointDone { .. } => "checkpoint-done",
            Event::JobStopped { .. } => "stopped",
            Event::JobExited { .. } => "exited",
            Event::Telemetry { .. } => "telemetry",
            Event::PriceTick { .. } => "price",
            Event::InterruptionNotice { .. } => "notice",
            Event::Operator { .. } => "operator",
            Event::SpotLifetimes { .. } => "lifetimes",
            Event::JobOutput { .. } => "output",
            Event::GpuHealth { .. } => "gpu-health",
            Event::SourceStatus { .. } => "source",
            Event::Slurm { .. } => "slurm",
            Event::SlurmDone { .. } => "slurm-done",
            Event::PoolDefined { .. } => "pool",
            Event::Launched { .. } => "launched",
            Event::LaunchFailed { .. } => "launch-failed",
            Event::Released { .. } => "released",
            Event::ReleaseFailed { .. } => "release-failed",
            Event::Tick => "tick",
        }
    }
}

/// What the core asks of the world after an event (jobs to start, save or
/// stop, alarms, ledger lines, Slurm commands, launches, releases).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Effect {
    StartJob {
        job: JobId,
        node: NodeId,
        gpus: Vec<u8>,
        resume_step: u64,
    },
    /// Save the job's state: all of it, or what changed since the last save.
    Checkpoint {
        job: JobId,
        kind: super::job::CheckpointKind,
    },
    StopJob {
        job: JobId,
    },
    AlarmRaised {
        id: String,
        text: String,
    },
    AlarmCleared {
        id: String,
    },
    /// The event could not be applied; the state is unchanged by it.
    Rejected {
        reason: String,
    },
    /// Charge periods that closed: append these lines to the ledger.
    Ledger {
        lines: Vec<super::ledger::LedgerLine>,
    },
    /// Run this command against Slurm (scontrol, scancel) and report back.
    Slurm {
        command: super::slurm::SlurmCommand,
    },
    /// Append a row to the audit table: how something done for an actor
    /// ended outside (a Slurm command's outcome).
    Audit {
        actor: Actor,
        action: Action,
        outcome: Result<String, String>,
    },
    /// Buy nodes: answer with `Launched` per instance (then `NodeUp`) or `LaunchFailed`.
    Launch {
        request: super::capacity::LaunchRequest,
    },
    /// Give the node back (terminate it): answer with `Released`.
    Release {
        node: NodeId,
        reason: String,
    },
}
