//! What the room keeps about governing Slurm: its order and how Slurm
//! followed it (`Governance`), and each spot job's saves (`SaveNote`).
//! Plain state kept in the mirror; the decisions that fill it live in
//! `room::slurm_govern` and `room::slurm_saves` (which import the room, so
//! the state they fill must not live there: the mirror holds it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::ids::NodeId;
use crate::domain::slurm::Schedule;
use crate::domain::units::{At, MicrosPerHour, Secs};

/// What the room decided for Slurm's pending jobs and how Slurm followed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Governance {
    /// The room's order as of the newest snapshot, by job.
    pub plan: BTreeMap<u64, PlanNote>,
    /// What the room has set on each pending job (so it is neither sent
    /// again nor undone when the room did not set it).
    pub set: BTreeMap<u64, Schedule>,
    /// The partitions each job asked for, where the room narrowed them: it
    /// plans with what the job asked, not with what the room last chose.
    pub asked: BTreeMap<u64, String>,
    /// The node list the room last set as each job's `ReqNodeList`, while
    /// the job lives: Slurm shows it as the job's own, but a node list the
    /// job asked (`-w`) binds the plan and this one does not.
    #[serde(default)]
    pub pinned: BTreeMap<u64, Vec<String>>,
    /// Where and when each job was last seen running: a job requeued off
    /// a node may not start there again until Slurm's credential for its
    /// last run has lapsed.
    #[serde(default)]
    pub ran_on: BTreeMap<u64, (At, Vec<String>)>,
    /// Jobs the room requeued or migrated off their nodes, while they wait:
    /// the room places them itself rather than wait out Slurm's two-minute
    /// hold of a requeued job (the room's later commands to them, its order,
    /// do not end that).
    #[serde(default)]
    pub moved: std::collections::BTreeSet<u64>,
    /// Starts Slurm made while the room governed, newest last.
    pub starts: Vec<StartNote>,
    pub followed: u64,
    pub out_of_order: u64,
}

/// One pending job's place in the room's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanNote {
    pub rank: u32,
    /// The node it goes to now, if it fits now.
    pub node: Option<String>,
    pub why: String,
}

/// A start Slurm made, against the room's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartNote {
    pub at: At,
    pub job: u64,
    pub rank: u32,
    pub node: String,
    /// `None`: in the room's order, on a node the room allowed.
    pub broke: Option<String>,
}

/// A running Slurm job on a spot node, as the room keeps saving it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaveNote {
    pub node: String,
    /// The room's node for it (its pool, price and age).
    pub room_node: Option<NodeId>,
    pub gpus: u32,
    pub started: At,
    /// Next-minute interruption probability for its instance type, and the interval it gives.
    pub p_next_minute: f64,
    pub interval: Secs,
    /// The last checkpoint signal the room sent it.
    pub signalled: Option<At>,
    /// The first signal it has not answered yet.
    pub unanswered: Option<At>,
    /// Its last acknowledged checkpoint.
    pub saved: Option<At>,
    pub next_due: At,
    /// The market when it started (the bid curve's base), now, and its cap.
    pub base: Option<MicrosPerHour>,
    pub market: Option<MicrosPerHour>,
    pub cap: Option<MicrosPerHour>,
    /// It may be interrupted (`ckpt=no` or an uninterruptible partition: not).
    pub interruptible: bool,
    /// Asked to save and move off the pool because the market passed its cap.
    #[serde(default)]
    pub moving: bool,
}

impl SaveNote {
    /// Asked to save at least one grace period ago and never answered.
    pub fn not_checkpointing(&self, at: At, grace: Secs) -> bool {
        self.unanswered.is_some_and(|u| at - u > grace.delta())
    }

    /// GPU-seconds computed since its last good checkpoint (or its start).
    pub fn at_risk(&self, at: At) -> i64 {
        let since = self.saved.unwrap_or(self.started).max(self.started);
        (at - since).num_seconds().max(0) * i64::from(self.gpus)
    }
}
