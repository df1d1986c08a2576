//! Slurm as the core sees it: what the cluster reported (partitions, nodes
//! with their GRES GPUs, jobs), the verbs gpuroom can ask of it, the commands
//! that carry them, and the policy that says whether gpuroom's own advice is
//! only shown or also issued.
//!
//! Plain data: the `slurm` adapter (sources/slurm) builds snapshots from
//! squeue/sinfo/scontrol output and carries commands out with scontrol and
//! scancel; the `Room` mirrors the snapshot (room::slurm) and decides. Nothing
//! here runs a command or reads a clock.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ids::TenantId;
use super::job::Tags;
use super::units::{At, Secs};

/// The `AdminComment` word of a job held for the room to admit.
pub const ADMIT_MARK: &str = "gpuroom:admit";

/// serde: a count of zero is left out of the log.
pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One reading of the whole cluster: everything squeue and sinfo said at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmSnapshot {
    pub cluster: String,
    /// The Slurm release that answered ("22.05.8").
    pub version: String,
    pub partitions: Vec<SlurmPartition>,
    pub nodes: Vec<SlurmNode>,
    pub jobs: Vec<SlurmJob>,
}

/// A partition as sinfo reports it: its state, its nodes, and whether it is
/// the default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmPartition {
    pub name: String,
    /// UP, DOWN, DRAIN, INACTIVE.
    pub state: String,
    pub nodes: Vec<String>,
    pub default: bool,
}

/// A node as Slurm reports it: its state, CPUs and GRES GPUs, and how many of
/// them are in use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmNode {
    pub name: String,
    /// Lower case, flags joined with '+': "idle", "mixed", "allocated+drain", "down".
    pub state: String,
    pub cpus: u32,
    pub cpus_alloc: u32,
    /// GRES GPUs configured on the node, and their type when one is named.
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    pub gpus_used: u32,
    /// Indices of the GPUs in use, when Slurm says (`gres_used` with IDX).
    #[serde(default)]
    pub gpus_used_idx: Vec<u32>,
    /// GPU shards (`gres/shard`) configured and in use: several jobs on one
    /// GPU. A GPU is taken either whole or in shards, never both.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shards: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shards_used: u32,
    pub partitions: Vec<String>,
    /// Why the node is down or drained, as its admin wrote it.
    #[serde(default)]
    pub reason: String,
    /// The machine's host name when it is not the node's name (on EC2:
    /// `ip-10-0-1-7`, which dcgm-exporter reports); empty when the same.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// The room's node for it, as the live translator matched it by host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<crate::domain::ids::NodeId>,
}

impl SlurmNode {
    /// The machine's host name (its node name unless Slurm says otherwise).
    pub fn host(&self) -> &str {
        if self.hostname.is_empty() { &self.name } else { &self.hostname }
    }

    /// A CLOUD node Slurm has powered down: no machine behind it, nothing billed.
    pub fn powered_down(&self) -> bool {
        super::cluster::slurm_powered_down(&self.state)
    }

    /// Takes no new work: down, drained or draining, failed, not responding,
    /// powering down. Read by whole state words: a CLOUD node Slurm powered
    /// off (`powered_down`) is asleep, not down; a job placed there wakes it.
    pub fn unavailable(&self) -> bool {
        self.state.split('+').map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')).any(|w| {
            matches!(w, "down" | "powering_down" | "not_responding" | "future" | "unknown")
                || ["drain", "fail", "maint", "inval"].iter().any(|p| w.starts_with(p))
        })
    }
}

/// A job as squeue reports it: whose it is, where it waits or runs, and what
/// it asks or holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmJob {
    pub id: u64,
    pub name: String,
    pub user: String,
    /// The Slurm account: gpuroom's tenant.
    pub account: String,
    pub partition: String,
    pub state: SlurmState,
    /// Slurm's reason: why it waits (Resources, Priority, JobHeldUser, …) or "None".
    pub reason: String,
    /// GPUs asked (pending) or held (running), over all its nodes.
    pub gpus: u32,
    /// GPU shards asked or held (`--gres=shard:N`): a share of one GPU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shards: u32,
    /// The GPU its shards sit on, per node, when Slurm says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shard_idx: Vec<(String, Vec<u32>)>,
    /// CPUs asked or held (0: Slurm did not say).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpus: u32,
    /// The nodes it asks (pending: `-N`, at least) or runs on (0: Slurm did not say).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub node_count: u32,
    /// The nodes it must run on (`-w`, `ReqNodeList`), when any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    pub nodes: Vec<String>,
    /// The GPUs it holds on each node, by index, when Slurm says.
    #[serde(default)]
    pub gpu_idx: Vec<(String, Vec<u32>)>,
    #[serde(default)]
    pub submitted: Option<At>,
    #[serde(default)]
    pub started: Option<At>,
    /// None: no limit.
    #[serde(default)]
    pub time_limit: Option<Secs>,
    pub priority: u64,
    /// How many times it was requeued.
    pub restarts: u32,
    #[serde(default)]
    pub excluded: Vec<String>,
    /// The submitter's comment (`--comment`) and workload key (`--wckey`):
    /// where a site's jobs say their project, environment and model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wckey: String,
    /// The GPU type it asked for (`--gres=gpu:l4:1`), when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// Its last checkpoint as the job acknowledged it: `saved=EPOCH` in its
    /// comment, or the time of the marker file the adapter read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<At>,
    /// The site's note on the job (`AdminComment`): `gpuroom:admit` marks a
    /// job held at submission for the room to place (`job_submit.lua`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub admin_comment: String,
    /// Its working directory, where a marker file acknowledges a save; read
    /// by the adapter only, never logged (the time it read is, as `saved_at`).
    #[serde(skip)]
    pub work_dir: String,
}

impl SlurmJob {
    /// Held by its user or an admin (`scontrol hold`): waits until released.
    pub fn held(&self) -> bool {
        self.state == SlurmState::Pending && self.reason.starts_with("JobHeld")
    }

    /// Held at submission until the room places it (the site's
    /// `job_submit.lua` holds every GPU job with `AdminComment=gpuroom:admit`):
    /// the room releases it with its priority and nodes in one update.
    pub fn awaits_admission(&self) -> bool {
        self.state == SlurmState::Pending && self.reason.starts_with("JobHeld") && self.admin_comment.split([',', ';', ' ']).any(|w| w == ADMIT_MARK)
    }

    /// Still to finish: pending, running, suspended or completing.
    pub fn active(&self) -> bool {
        matches!(self.state, SlurmState::Pending | SlurmState::Running | SlurmState::Suspended | SlurmState::Completing)
    }

    /// Holds GPUs now (a suspended job keeps its allocation).
    pub fn holds_gpus(&self) -> bool {
        matches!(self.state, SlurmState::Running | SlurmState::Suspended | SlurmState::Completing)
    }

    /// Who pays and for what: the account is the tenant; `project=`, `env=`
    /// (or `environment=`) and `model=` in the comment (separated by commas,
    /// semicolons or spaces) name the rest. Without them the wckey is the
    /// project and the partition the environment, since sites split
    /// production from development by partition.
    pub fn tags(&self) -> Tags {
        let tenant = TenantId(if self.account.is_empty() { self.user.clone() } else { self.account.clone() });
        let mut tags = Tags { tenant, project: String::new(), env: String::new(), model: String::new() };
        for pair in self.comment.split([',', ';', ' ']).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else { continue };
            let value = value.trim().to_string();
            match key.trim().to_ascii_lowercase().as_str() {
                "project" => tags.project = value,
                "env" | "environment" => tags.env = value,
                "model" => tags.model = value,
                _ => {}
            }
        }
        if tags.project.is_empty() {
            tags.project = self.wckey.trim_start_matches('*').to_string();
        }
        if tags.env.is_empty() {
            tags.env = self.partition.clone();
        }
        tags
    }

    /// The comment's `key=value` words (separated by commas, semicolons or spaces).
    fn comment_value(&self, wanted: &str) -> Option<&str> {
        self.comment.split([',', ';', ' ']).filter_map(|p| p.split_once('=')).find(|(k, _)| k.trim().eq_ignore_ascii_case(wanted)).map(|(_, v)| v.trim())
    }

    /// Whether it may run where it can be taken away: not when its comment
    /// says `ckpt=no` (or `checkpoint=no`), nor in a partition the site
    /// declared for work that cannot be interrupted.
    pub fn interruptible(&self, uninterruptible_partitions: &[String]) -> bool {
        let says_no =
            ["ckpt", "checkpoint"].iter().any(|k| self.comment_value(k).is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "no" | "false" | "0")));
        let partitions = self.partitions();
        let only_there = !partitions.is_empty() && partitions.iter().all(|p| uninterruptible_partitions.iter().any(|u| u == p));
        !says_no && !only_there
    }

    /// The partitions it may run in: Slurm lists a pending job's several as `spot,od`.
    pub fn partitions(&self) -> Vec<String> {
        self.partition.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_string).collect()
    }

    /// Its last acknowledged checkpoint: the marker the adapter read, or
    /// `saved=EPOCH` written into its comment by the job itself.
    pub fn last_saved(&self) -> Option<At> {
        let from_comment = self.comment_value("saved").and_then(|v| v.parse::<i64>().ok()).and_then(|s| chrono::DateTime::from_timestamp(s, 0));
        match (self.saved_at, from_comment) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The GPUs it holds on `node`, by index: Slurm's own list, or else (text
    /// output, which has no indices) its even share of the node's GPUs.
    pub fn gpus_on(&self, node: &str) -> GpusOn {
        if let Some((_, idx)) = self.gpu_idx.iter().find(|(n, _)| n == node) {
            return GpusOn::Indices(idx.clone());
        }
        if !self.nodes.iter().any(|n| n == node) {
            return GpusOn::Count(0);
        }
        GpusOn::Count(self.gpus / (self.nodes.len().max(1) as u32))
    }
}

/// Which GPUs of a node a Slurm job holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpusOn {
    Indices(Vec<u32>),
    /// Only how many: the first free ones are taken as its.
    Count(u32),
}

/// Slurm's job states (the long names squeue prints with `%T`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlurmState {
    #[default]
    Pending,
    Running,
    Suspended,
    Completing,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    OutOfMemory,
    BootFail,
    Deadline,
    /// A state this build does not know by name, kept as Slurm spelled it.
    Other(String),
}

impl SlurmState {
    /// From squeue's long (`RUNNING`) or compact (`R`) spelling, any case.
    pub fn parse(text: &str) -> SlurmState {
        match text.trim().to_ascii_uppercase().as_str() {
            "PENDING" | "PD" => SlurmState::Pending,
            "RUNNING" | "R" => SlurmState::Running,
            "SUSPENDED" | "S" => SlurmState::Suspended,
            "COMPLETING" | "CG" => SlurmState::Completing,
            "COMPLETED" | "CD" => SlurmState::Completed,
            "CANCELLED" | "CA" => SlurmState::Cancelled,
            "FAILED" | "F" => SlurmState::Failed,
            "TIMEOUT" | "TO" => SlurmState::Timeout,
            "NODE_FAIL" | "NF" => SlurmState::NodeFail,
            "PREEMPTED" | "PR" => SlurmState::Preempted,
            "OUT_OF_MEMORY" | "OOM" => SlurmState::OutOfMemory,
            "BOOT_FAIL" | "BF" => SlurmState::BootFail,
            "DEADLINE" | "DL" => SlurmState::Deadline,
            other => SlurmState::Other(other.to_string()),
        }
    }

    /// The state in lower case for display ("node-fail"); one this build does
    /// not know, as Slurm spelled it.
    pub fn label(&self) -> &str {
        match self {
            SlurmState::Pending => "pending",
            SlurmState::Running => "running",
            SlurmState::Suspended => "suspended",
            SlurmState::Completing => "completing",
            SlurmState::Completed => "completed",
            SlurmState::Cancelled => "cancelled",
            SlurmState::Failed => "failed",
            SlurmState::Timeout => "timeout",
            SlurmState::NodeFail => "node-fail",
            SlurmState::Preempted => "preempted",
            SlurmState::OutOfMemory => "out-of-memory",
            SlurmState::BootFail => "boot-fail",
            SlurmState::Deadline => "deadline",
            SlurmState::Other(s) => s,
        }
    }
}

/// What gpuroom can ask Slurm to do with a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlurmVerb {
    /// Free its GPUs and run it later: requeue or suspend, by policy.
    Preempt,
    Requeue,
    Suspend,
    Resume,
    Cancel,
    Hold,
    Release,
    /// Send its batch script a signal (the checkpoint signal, USR1 by
    /// default: `scancel --signal=USR1 --batch`); the job keeps running.
    Signal {
        signal: String,
    },
    /// Run it elsewhere: another partition and/or not on these nodes
    /// (a running job is requeued held, changed, then released).
    Migrate {
        #[serde(default)]
        partition: Option<String>,
        #[serde(default)]
        exclude: Vec<String>,
    },
    /// The room's order and placement for a pending job, in one
    /// `scontrol update`: its priority (its rank in the room's queue), and
    /// where it may run. `None` leaves a field as it is; an empty list clears it.
    Schedule(Box<Schedule>),
}

/// What the room sets on a pending Slurm job (see `SlurmVerb::Schedule`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// `ReqNodeList`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// `ExcNodeList`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// It was held for the room to admit: released once placed (Slurm
    /// refuses a new priority on a held job, so the release comes between).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub release: bool,
    /// `StartTime=now`: Slurm keeps a requeued job back for two minutes
    /// once it has left its node; one the room moved may start at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_now: bool,
}

impl Schedule {
    /// `scontrol update`'s words after `jobid=N` for where it may run.
    pub fn routing(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = &self.partition {
            out.push(format!("partition={p}"));
        }
        if let Some(n) = &self.nodes {
            out.push(format!("reqnodelist={}", n.join(",")));
        }
        if let Some(x) = &self.exclude {
            out.push(format!("excnodelist={}", x.join(",")));
        }
        if self.start_now {
            out.push("starttime=now".to_string());
        }
        out
    }

    /// Everything it sets, as words: the routing, the release, the priority.
    pub fn settings(&self) -> Vec<String> {
        let mut out = self.routing();
        if self.release {
            out.push("release".to_string());
        }
        if let Some(p) = self.priority {
            out.push(format!("priority={p}"));
        }
        out
    }
}

impl SlurmVerb {
    /// The verb's word, as the console types it and the audit log records it.
    pub fn name(&self) -> &'static str {
        match self {
            SlurmVerb::Preempt => "preempt",
            SlurmVerb::Requeue => "requeue",
            SlurmVerb::Suspend => "suspend",
            SlurmVerb::Resume => "resume",
            SlurmVerb::Cancel => "cancel",
            SlurmVerb::Hold => "hold",
            SlurmVerb::Release => "release",
            SlurmVerb::Signal { .. } => "signal",
            SlurmVerb::Migrate { .. } => "migrate",
            SlurmVerb::Schedule(_) => "schedule",
        }
    }

    /// The verbs that take no words, in the order the console lists them.
    const PLAIN: [SlurmVerb; 7] =
        [SlurmVerb::Preempt, SlurmVerb::Requeue, SlurmVerb::Suspend, SlurmVerb::Resume, SlurmVerb::Cancel, SlurmVerb::Hold, SlurmVerb::Release];

    /// Every verb's name as the console types it; signal and migrate last.
    pub fn names() -> impl Iterator<Item = &'static str> {
        SlurmVerb::PLAIN.into_iter().map(|v| v.name()).chain(["signal", "migrate"])
    }

    /// "preempt, requeue, … signal or migrate", for messages.
    fn listed() -> String {
        let plain: Vec<&str> = SlurmVerb::PLAIN.into_iter().map(|v| v.name()).collect();
        format!("{}, signal or migrate", plain.join(", "))
    }

    /// The checkpoint signal: `USR1` by default, a name or number Slurm takes.
    pub fn signal(name: &str) -> Result<SlurmVerb, String> {
        let name = name.trim().trim_start_matches("SIG").trim_start_matches("sig");
        let ok = !name.is_empty() && name.len() <= 8 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '+');
        if ok { Ok(SlurmVerb::Signal { signal: name.to_ascii_uppercase() }) } else { Err(format!("{name:?} is not a signal name (USR1, TERM, 10, …)")) }
    }

    /// From the console's words: `requeue`, `migrate partition=spare exclude=n1,n2`.
    pub fn parse(words: &[&str]) -> Result<SlurmVerb, String> {
        let (first, rest) = words.split_first().ok_or_else(|| format!("a Slurm verb is needed: {}", SlurmVerb::listed()))?;
        let plain = match *first {
            "migrate" => None,
            "signal" => {
                return match rest {
                    [] => SlurmVerb::signal("USR1"),
                    [one] => SlurmVerb::signal(one),
                    extra => Err(format!("signal takes one signal name (got {:?})", extra.join(" "))),
                };
            }
            other => {
                Some(SlurmVerb::PLAIN.into_iter().find(|v| v.name() == other).ok_or_else(|| format!("unknown Slurm verb {other:?}: {}", SlurmVerb::listed()))?)
            }
        };
        if let Some(verb) = plain {
            return match rest {
                [] => Ok(verb),
                extra => Err(format!("{first} takes no arguments (got {:?})", extra.join(" "))),
            };
        }
        let (mut partition, mut exclude) = (None, Vec::new());
        for word in rest {
            match word.split_once('=') {
                Some(("partition" | "p", value)) if !value.is_empty() => partition = Some(value.to_string()),
                Some(("exclude" | "x", value)) if !value.is_empty() => exclude.extend(value.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
                _ => return Err(format!("migrate takes partition=NAME and/or exclude=NODE[,NODE], not {word:?}")),
            }
        }
        if partition.is_none() && exclude.is_empty() {
            return Err("migrate needs partition=NAME or exclude=NODE[,NODE]".to_string());
        }
        Ok(SlurmVerb::Migrate { partition, exclude })
    }
}

impl fmt::Display for SlurmVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlurmVerb::Migrate { partition, exclude } => {
                write!(f, "migrate")?;
                if let Some(p) = partition {
                    write!(f, " → partition {p}")?;
                }
                if !exclude.is_empty() {
                    write!(f, " excluding {}", exclude.join(","))?;
                }
                Ok(())
            }
            SlurmVerb::Signal { signal } => write!(f, "signal {signal}"),
            SlurmVerb::Schedule(s) => write!(f, "schedule {}", s.settings().join(" ")),
            other => f.write_str(other.name()),
        }
    }
}

/// One command for the Slurm executor. Its verb is never `Preempt`: the room
/// resolves that to requeue or suspend by policy before it leaves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmCommand {
    pub id: u64,
    pub job: u64,
    pub verb: SlurmVerb,
    /// Who asked: "alice@console", or "policy" for control mode.
    pub by: String,
}

/// Whether gpuroom's policies only show their advice or also carry it out.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlurmMode {
    #[default]
    Advisory,
    Control,
}

/// What "preempt" means on this cluster.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreemptBy {
    /// Requeue: the GPUs are freed; the job starts again (from its own checkpoint).
    #[default]
    Requeue,
    /// Suspend: the processes stop where they are but keep their memory (and,
    /// in Slurm, their GPUs unless the site's GRES are shared): quick to resume.
    Suspend,
}

impl PreemptBy {
    /// The verb "preempt" stands for on this cluster.
    pub fn verb(self) -> SlurmVerb {
        match self {
            PreemptBy::Requeue => SlurmVerb::Requeue,
            PreemptBy::Suspend => SlurmVerb::Suspend,
        }
    }
}

impl SlurmMode {
    /// The mode's name for the console and the log.
    pub fn label(self) -> &'static str {
        match self {
            SlurmMode::Advisory => "advisory",
            SlurmMode::Control => "control",
        }
    }
}

/// How gpuroom acts on a Slurm cluster: advisory or in control, what preempt
/// means there, the wait alarm, how jobs are told to save, and who may act.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlurmPolicy {
    pub mode: SlurmMode,
    pub preempt_by: PreemptBy,
    /// A GPU job pending longer than this raises the partition's wait alarm.
    pub wait_alarm: Secs,
    /// What a job is sent to save its work before gpuroom requeues it (a
    /// spot notice on its node, or its account past the hard budget limit).
    #[serde(default = "default_signal")]
    pub checkpoint_signal: String,
    /// How long after that signal the requeue follows (shortened to leave
    /// 30 s before a spot deadline).
    #[serde(default = "default_grace")]
    pub checkpoint_grace: Secs,
    /// Who, besides a job's own user and the engine's, may act on a Slurm
    /// job through gpuroom (`[[sources.slurm.operators]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<SlurmOperator>,
    /// The room is Slurm's policy (with control mode): it orders the pending
    /// GPU jobs, chooses their nodes, and asks spot jobs to save at its risk
    /// (`room::slurm_govern`, `room::slurm_saves`). Off in logs from before.
    #[serde(default)]
    pub govern: bool,
    /// Partitions whose jobs must not be interrupted: never routed to spot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uninterruptible_partitions: Vec<String>,
    /// Partitions of spot nodes, for nodes the room does not know by
    /// `[[nodes]]` (those say their billing themselves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spot_partitions: Vec<String>,
}

/// A user who may act on other users' Slurm jobs through gpuroom: gpuroom
/// runs Slurm's commands as the engine's user, so without such a line a
/// console's user acts only on their own jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOperator {
    /// The OS user name.
    pub user: String,
    /// The Slurm accounts whose jobs they may act on; `"*"`: every account.
    pub accounts: Vec<String>,
    /// May send any signal, not only the configured checkpoint signal.
    #[serde(default)]
    pub any_signal: bool,
}

impl SlurmPolicy {
    /// The verb that asks a job to checkpoint: `checkpoint_signal`, or USR1
    /// where that does not name a signal.
    pub fn checkpoint_verb(&self) -> SlurmVerb {
        SlurmVerb::signal(&self.checkpoint_signal).unwrap_or(SlurmVerb::Signal { signal: "USR1".into() })
    }

    /// Whether `account` may use `verb` on `job` through gpuroom. An actor
    /// from before accounts were recorded (`None`) is judged as it was then.
    /// The engine's own user holds the engine's rights anyway; anyone else
    /// acts on their own jobs, or as an operator of the job's account; and
    /// `signal` carries only the checkpoint signal unless an operator with
    /// `any_signal` asks.
    pub fn may_act(&self, account: Option<&super::ids::OsAccount>, job: &SlurmJob, verb: &SlurmVerb) -> Result<(), String> {
        let Some(account) = account else { return Ok(()) };
        if account.engine {
            return Ok(());
        }
        let who = super::text::clean(&account.name);
        let operator = self.operators.iter().find(|o| o.user == account.name && o.accounts.iter().any(|a| a == "*" || *a == job.account));
        let own = job.user == account.name;
        if !own && operator.is_none() {
            return Err(format!(
                "{who} may not {} Slurm job {}: it is {}'s (account {}), and {who} is not an operator of that account \
                 ([[sources.slurm.operators]]); gpuroom runs Slurm's commands with the engine's rights, so it acts for others only on their own jobs",
                verb.name(),
                job.id,
                super::text::clean(&job.user),
                super::text::clean(&job.account)
            ));
        }
        if let SlurmVerb::Signal { signal } = verb {
            let checkpoint = SlurmVerb::signal(&self.checkpoint_signal).ok();
            let is_checkpoint = checkpoint.as_ref().is_some_and(|c| matches!(c, SlurmVerb::Signal { signal: s } if s == signal));
            if !is_checkpoint && !operator.is_some_and(|o| o.any_signal) {
                return Err(format!(
                    "{who} may send Slurm job {} only the checkpoint signal ({}), not {}: other signals need an operator with any_signal = true",
                    job.id,
                    super::text::clean(&self.checkpoint_signal),
                    super::text::clean(signal)
                ));
            }
        }
        Ok(())
    }
}

fn default_signal() -> String {
    "USR1".to_string()
}

fn default_grace() -> Secs {
    Secs(60)
}

impl Default for SlurmPolicy {
    fn default() -> Self {
        SlurmPolicy {
            mode: SlurmMode::Advisory,
            preempt_by: PreemptBy::Requeue,
            wait_alarm: Secs(3600),
            checkpoint_signal: default_signal(),
            checkpoint_grace: default_grace(),
            operators: Vec::new(),
            govern: false,
            uninterruptible_partitions: Vec::new(),
            spot_partitions: Vec::new(),
        }
    }
}

/// "0-1,3" from [0, 1, 3]: Slurm's own way of writing index sets.
pub fn compress_indices(idx: &[u32]) -> String {
    let mut sorted = idx.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// More names or indices than any cluster has: a list this long is garbage,
/// and expanding it would only exhaust memory.
const MAX_EXPANDED: usize = 1 << 20;

/// [0, 1, 3] from "0-1,3"; `None` for anything else (or a range past 4096).
pub fn expand_indices(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 4096 || out.len() > MAX_EXPANDED {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Node names from a Slurm host list: "gpu[01-03,07],cpu1" → gpu01 gpu02
/// gpu03 gpu07 cpu1 (zero padding kept; "rack[1-2]-n[1-2]" gives all four;
/// "" none). `None` when it does not parse, or names a node with a space or a
/// control character (no node is called that: the text is not a host list).
/// `domain::hostlist` is the parser; this is it for Slurm's own outputs.
pub fn expand_hostlist(text: &str) -> Option<Vec<String>> {
    let text = text.trim();
    if text.is_empty() {
        return Some(Vec::new());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    super::hostlist::expand_printed(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_and_index_sets_round_trip_the_way_slurm_writes_them() {
        assert_eq!(expand_hostlist("gpu[01-03,07],cpu1").unwrap(), ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]);
        assert_eq!(expand_hostlist("localhost").unwrap(), ["localhost"]);
        assert_eq!(expand_hostlist("").unwrap(), Vec::<String>::new());
        assert_eq!(expand_hostlist("n[1-2]-ib").unwrap(), ["n1-ib", "n2-ib"]);
        assert_eq!(expand_hostlist("r[1-2]-n[08-09]").unwrap(), ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]);
        assert!(expand_hostlist("n1]").is_none() && expand_hostlist("a b").is_none() && expand_hostlist("n[1-2]\nx").is_none());
        assert!(expand_hostlist("n[3-1]").is_none() && expand_hostlist("n[1-").is_none() && expand_hostlist("n[a]").is_none());
        let flood = (0..40).map(|i| format!("n{i}-[0-60000]")).collect::<Vec<_>>().join(",");
        assert!(expand_hostlist(&flood).is_none(), "2.4 million names is no host list");
        assert!(expand_indices(&vec!["0-4000"; 400].join(",")).is_none());
        assert_eq!(expand_indices("0-1,3"), Some(vec![0, 1, 3]));
        assert_eq!(compress_indices(&[3, 0, 1, 1]), "0-1,3");
        assert!(expand_indices("0-x").is_none() && expand_indices("5-1").is_none());
    }

    #[test]
    fn a_node_takes_no_work_by_its_state_words_and_an_asleep_cloud_node_does() {
        let node = |state: &str| SlurmNode { state: state.into(), ..SlurmNode::default() };
        for down in ["down", "down*", "idle+drain", "mixed+draining", "allocated+drained", "idle+fail", "idle+not_responding", "idle+maint", "unknown"] {
            assert!(node(down).unavailable(), "{down}");
        }
        for up in ["idle", "mixed", "allocated", "idle+cloud+powered_down", "idle~", "idle+cloud+power_down", "allocated+cloud+powering_up"] {
            assert!(!node(up).unavailable(), "{up}");
        }
        assert!(node("idle+cloud+powering_down").unavailable(), "not until it is off");
        assert!(node("idle+cloud+powered_down").powered_down());
    }

    #[test]
    fn verbs_parse_from_the_consoles_words_and_bad_ones_say_why() {
        assert_eq!(SlurmVerb::parse(&["requeue"]), Ok(SlurmVerb::Requeue));
        assert_eq!(
            SlurmVerb::parse(&["migrate", "partition=spare", "exclude=n1,n2"]),
            Ok(SlurmVerb::Migrate { partition: Some("spare".into()), exclude: vec!["n1".into(), "n2".into()] })
        );
        assert!(SlurmVerb::parse(&["migrate"]).unwrap_err().contains("partition=NAME"));
        assert!(SlurmVerb::parse(&["migrate", "to=x"]).unwrap_err().contains("\"to=x\""));
        assert!(SlurmVerb::parse(&["hold", "now"]).unwrap_err().contains("no arguments"));
        assert!(SlurmVerb::parse(&["explode"]).unwrap_err().contains("unknown Slurm verb"));
        assert_eq!(SlurmVerb::parse(&[]).unwrap_err(), "a Slurm verb is needed: preempt, requeue, suspend, resume, cancel, hold, release, signal or migrate");
        assert_eq!(SlurmVerb::parse(&["signal"]), Ok(SlurmVerb::Signal { signal: "USR1".into() }));
        assert_eq!(SlurmVerb::parse(&["signal", "SIGTERM"]), Ok(SlurmVerb::Signal { signal: "TERM".into() }));
        assert!(SlurmVerb::parse(&["signal", "x;rm"]).unwrap_err().contains("not a signal name"));
        for name in SlurmVerb::names().filter(|n| *n != "migrate") {
            assert_eq!(SlurmVerb::parse(&[name]).map(|v| v.name()), Ok(name), "every plain name parses back");
        }
        assert!(SlurmVerb::parse(&[]).is_err());
    }

    #[test]
    fn states_parse_long_and_compact_and_keep_unknown_ones() {
        assert_eq!(SlurmState::parse("RUNNING"), SlurmState::Running);
        assert_eq!(SlurmState::parse("pd"), SlurmState::Pending);
        assert_eq!(SlurmState::parse("NODE_FAIL"), SlurmState::NodeFail);
        assert_eq!(SlurmState::parse("RESV_DEL_HOLD"), SlurmState::Other("RESV_DEL_HOLD".into()));
        let held = SlurmJob { reason: "JobHeldAdmin".into(), ..Default::default() };
        assert!(held.held() && held.active() && !held.holds_gpus());
    }

    #[test]
    fn a_jobs_tags_come_from_its_account_comment_wckey_and_partition() {
        let job = SlurmJob {
            account: "vision".into(),
            partition: "gpu".into(),
            comment: "project=detr; model=vit-h env=prod,junk, x=".into(),
            wckey: "*ignored".into(),
            ..Default::default()
        };
        let t = job.tags();
        assert_eq!((t.tenant.0.as_str(), t.project.as_str(), t.env.as_str(), t.model.as_str()), ("vision", "detr", "prod", "vit-h"));
        let bare = SlurmJob { user: "ann".into(), partition: "dev".into(), wckey: "*speech".into(), ..Default::default() };
        let t = bare.tags();
        assert_eq!((t.tenant.0.as_str(), t.project.as_str(), t.env.as_str(), t.model.as_str()), ("ann", "speech", "dev", ""));
        let two = SlurmJob { nodes: vec!["a".into(), "b".into()], gpus: 8, gpu_idx: vec![("a".into(), vec![0, 2])], ..Default::default() };
        assert_eq!((two.gpus_on("a"), two.gpus_on("b"), two.gpus_on("c")), (GpusOn::Indices(vec![0, 2]), GpusOn::Count(4), GpusOn::Count(0)));
    }
}
