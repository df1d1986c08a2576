//! The ledger's lines: what one GPU (or one job's storage, I/O, network)
//! cost over one charge period, with everything attribution needs (tenant,
//! project, environment, model; node and GPU; billing mode). The cost
//! engine (`cost::ledger`) accrues and closes them; the store keeps them.

use serde::{Deserialize, Serialize};

use super::cluster::BillingMode;
use super::ids::{JobId, NodeId};
use super::job::Tags;
use super::units::{At, Micros};

/// What a ledger line charges for: instance time (compute or idle) or a
/// service on top.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineKind {
    /// A job's share of a GPU.
    Compute,
    /// A GPU (or the part of one) no job held.
    Idle,
    /// Writing checkpoints.
    CheckpointIo,
    /// Keeping a job's checkpoint.
    Storage,
    /// Reading a checkpoint back to resume.
    Network,
}

impl LineKind {
    /// The kind's name as stored and exported ("checkpoint-io"); `parse` reads it back.
    pub fn label(self) -> &'static str {
        match self {
            LineKind::Compute => "compute",
            LineKind::Idle => "idle",
            LineKind::CheckpointIo => "checkpoint-io",
            LineKind::Storage => "storage",
            LineKind::Network => "network",
        }
    }

    /// The kind whose `label` is `text`, if any.
    pub fn parse(text: &str) -> Option<LineKind> {
        [LineKind::Compute, LineKind::Idle, LineKind::CheckpointIo, LineKind::Storage, LineKind::Network].into_iter().find(|k| k.label() == text)
    }

    /// Instance time (compute and idle), as opposed to services on top.
    pub fn is_instance(self) -> bool {
        matches!(self, LineKind::Compute | LineKind::Idle)
    }
}

/// What one GPU (or one job's service) cost from `start` to `end`, and who
/// and what it is charged to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerLine {
    pub start: At,
    pub end: At,
    pub kind: LineKind,
    pub node: NodeId,
    pub node_name: String,
    /// The GPU (or MIG slice) index on the node, for instance lines.
    pub unit: Option<u8>,
    pub job: Option<JobId>,
    pub tags: Option<Tags>,
    pub billing: BillingMode,
    pub instance_type: String,
    pub zone: String,
    /// What was paid (the contract, or the spot price in force).
    pub amount: Micros,
    /// The same usage at the on-demand list price.
    pub list_amount: Micros,
    /// GPU-milliseconds (a slice counting its share of a GPU); bytes for the others.
    pub quantity: i64,
}
