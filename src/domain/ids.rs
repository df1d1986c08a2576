//! Identifiers. Numeric where the core creates many (jobs, nodes), text where
//! operators name them (tenants). All are ordered so that every map in the
//! core iterates deterministically.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A job, by number: the room's own, or Slurm's in the range above
/// `SLURM_JOBS` (see `JobId::slurm`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u64);

/// A node (one instance), by number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// One GPU: a node and the device index on it. Serialized as `[node, index]`
/// because the event log holds one per GPU per telemetry tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "(u32, u8)", into = "(u32, u8)")]
pub struct GpuRef {
    pub node: NodeId,
    pub index: u8,
}

impl From<(u32, u8)> for GpuRef {
    fn from((node, index): (u32, u8)) -> GpuRef {
        GpuRef { node: NodeId(node), index }
    }
}

impl From<GpuRef> for (u32, u8) {
    fn from(gpu: GpuRef) -> (u32, u8) {
        (gpu.node.0, gpu.index)
    }
}

/// A tenant, by the name operators give it (for Slurm's jobs, the account).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TenantId(pub String);

/// A spot market: prices are quoted per availability zone and instance type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolKey {
    pub zone: String,
    pub instance_type: String,
}

/// Slurm's job numbers share the ledger with the room's own jobs: they live
/// above this, where the room's counter never reaches.
const SLURM_JOBS: u64 = 1 << 62;

impl JobId {
    /// The ledger's name for Slurm job `id`.
    pub fn slurm(id: u64) -> JobId {
        JobId(SLURM_JOBS | (id & (SLURM_JOBS - 1)))
    }

    /// Slurm's own number, for a job that is Slurm's.
    pub fn slurm_id(self) -> Option<u64> {
        (self.0 & SLURM_JOBS != 0).then_some(self.0 & (SLURM_JOBS - 1))
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slurm_id() {
            Some(id) => write!(f, "slurm-{id}"),
            None => write!(f, "j{}", self.0),
        }
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.instance_type, self.zone)
    }
}

/// An OS account as the engine established it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsAccount {
    /// The user name (or "uid N" where the system has none).
    pub name: String,
    /// Whether it is the engine's own user: the one whose rights Slurm's
    /// commands run with, who could run them directly anyway.
    pub engine: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_ref_is_a_compact_pair_on_the_wire() {
        let gpu = GpuRef { node: NodeId(7), index: 3 };
        let text = serde_json::to_string(&gpu).unwrap();
        assert_eq!(text, "[7,3]");
        assert_eq!(serde_json::from_str::<GpuRef>(&text).unwrap(), gpu);
    }
}
