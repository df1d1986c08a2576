//! Nodes and GPUs as the core sees them: what was bought (instance type, zone,
//! billing mode, price) and what is on it now (allocations, last samples).

use serde::{Deserialize, Serialize};

use super::ids::{GpuRef, JobId, NodeId, PoolKey};
use super::units::{At, Mib, MicrosPerHour};

/// How an instance is paid for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BillingMode {
    /// Per-second billing at the list price, start and stop at will.
    OnDemand,
    /// Prepaid; the hourly price is the amortized commitment, paid used or not.
    Reserved,
    /// Market price, can be taken back with a 2-minute notice.
    Spot,
}

impl BillingMode {
    /// Every mode, reserved first, in the order reports and the console list them;
    /// `index` is a mode's place here.
    pub const ALL: [BillingMode; 3] = [BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Spot];

    /// The mode's name for the console and reports ("on-demand").
    pub fn label(self) -> &'static str {
        match self {
            BillingMode::OnDemand => "on-demand",
            BillingMode::Reserved => "reserved",
            BillingMode::Spot => "spot",
        }
    }

    /// A short tag for narrow columns and pool names ("OD", "RES", "SPOT").
    pub fn short(self) -> &'static str {
        match self {
            BillingMode::OnDemand => "OD",
            BillingMode::Reserved => "RES",
            BillingMode::Spot => "SPOT",
        }
    }

    /// The mode's place in `ALL`, for figures kept in an array per billing mode.
    pub fn index(self) -> usize {
        match self {
            BillingMode::Reserved => 0,
            BillingMode::OnDemand => 1,
            BillingMode::Spot => 2,
        }
    }
}

/// What was bought: one instance with identical GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub id: NodeId,
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    pub gpu_model: String,
    pub gpu_count: u8,
    pub gpu_memory: Mib,
    pub mig_capable: bool,
    pub cpus: u32,
    pub host_memory: Mib,
    /// List price of this instance type on demand: the ceiling for spot max prices.
    pub on_demand_price: MicrosPerHour,
    /// What this instance costs per hour when it is not spot: the on-demand list
    /// price, or the reserved commitment amortized per hour. Spot pays the market.
    pub contract_price: MicrosPerHour,
    /// Spot only: the max price the instance was requested with.
    pub max_price: Option<MicrosPerHour>,
    /// MIG: the first `mig_gpus` GPUs are split into slices of these sizes,
    /// each a placeable unit of its own.
    #[serde(default)]
    pub mig_slices: Vec<Mib>,
    #[serde(default)]
    pub mig_gpus: u8,
}

/// One placeable unit of a node: a whole GPU, or a MIG slice of one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub memory: Mib,
    /// The physical GPU a slice belongs to.
    pub mig_parent: Option<u8>,
}

impl NodeSpec {
    /// The spot market the node belongs to: its zone and instance type.
    pub fn pool(&self) -> PoolKey {
        PoolKey { zone: self.zone.clone(), instance_type: self.instance_type.clone() }
    }

    fn sliced(&self) -> bool {
        self.mig_capable && self.mig_gpus > 0 && !self.mig_slices.is_empty()
    }

    /// The placeable units in index order: the slices of the first
    /// `mig_gpus` GPUs (when MIG is on), then the whole GPUs.
    pub fn units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        for gpu in 0..self.gpu_count {
            if self.sliced() && gpu < self.mig_gpus {
                units.extend(self.mig_slices.iter().map(|m| Unit { memory: *m, mig_parent: Some(gpu) }));
            } else {
                units.push(Unit { memory: self.gpu_memory, mig_parent: None });
            }
        }
        units
    }

    /// The share of the instance's price a unit carries, as (numerator,
    /// denominator): 1/gpus for a whole GPU, split by memory among slices.
    pub fn unit_share(&self, unit: &Unit) -> (u64, u64) {
        self.share_of(unit.memory, unit.mig_parent)
    }

    /// `unit_share` for a unit known by its memory and MIG parent (a `Gpu`'s
    /// `memory` and `mig`).
    pub fn share_of(&self, memory: Mib, mig_parent: Option<u8>) -> (u64, u64) {
        let unit = Unit { memory, mig_parent };
        let gpus = u64::from(self.gpu_count.max(1));
        match unit.mig_parent {
            None => (1, gpus),
            Some(_) => {
                let total: u64 = self.mig_slices.iter().map(|m| u64::from(m.0)).sum();
                (u64::from(unit.memory.0), gpus * total.max(1))
            }
        }
    }

    /// Why the spec cannot describe a real node, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if self.gpu_count == 0 || self.gpu_memory.0 == 0 {
            return Some("no GPUs or no GPU memory".into());
        }
        if self.sliced() {
            let total: u32 = self.mig_slices.iter().map(|m| m.0).sum();
            if total > self.gpu_memory.0 || self.mig_slices.iter().any(|m| m.0 == 0) || self.mig_gpus > self.gpu_count {
                return Some(format!("MIG slices {:?} do not fit {} GPUs of {}", self.mig_slices, self.mig_gpus, self.gpu_memory));
            }
        }
        if self.units().len() > usize::from(u8::MAX) {
            return Some("more than 255 placeable units".into());
        }
        None
    }
}

/// Where a node is in its life: taking work, draining, down, booting or being
/// given back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeState {
    Up,
    /// An interruption notice arrived: nothing new is placed, work is saved.
    Draining {
        deadline: At,
    },
    Down {
        since: At,
    },
    /// Bought and billed, not yet taking work (instance start, OS, driver, CUDA).
    Booting {
        ready_at: At,
    },
    /// Being given back: nothing new is placed; it goes once its jobs are off.
    Retiring {
        since: At,
    },
}

/// A contiguous range of one GPU's memory held by one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub job: JobId,
    pub offset: Mib,
    pub size: Mib,
    /// An exclusive job owns the whole GPU's compute, whatever its memory.
    pub exclusive: bool,
}

/// A GPU's health beyond utilization and memory, as NVML or dcgm-exporter
/// reports it. `None`: the source does not report that figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuHealth {
    pub gpu: GpuRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<u32>,
    /// Compute processes on it, when the source lists them (NVML does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// MIG instances reported on it (0: MIG off or not reported).
    #[serde(default)]
    pub mig_instances: u32,
}

/// One placeable unit of a node as it is now (a whole GPU or a MIG slice): its
/// memory, what is allocated on it, and its last samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub index: u8,
    pub memory: Mib,
    /// `Some(parent GPU)` for a MIG slice.
    #[serde(default)]
    pub mig: Option<u8>,
    pub allocations: Vec<Allocation>,
    /// Last utilization sample in percent, from the executor or telemetry.
    pub util: Option<f32>,
    /// Last measured memory in use (may be below what is allocated).
    pub mem_used: Option<Mib>,
    pub sampled_at: Option<At>,
    /// Since when every job on it has run below the idle threshold.
    #[serde(default)]
    pub idle_since: Option<At>,
    /// Its source failed after the last sample: the figures are old.
    #[serde(default)]
    pub stale: bool,
    #[serde(default)]
    pub health: Option<GpuHealth>,
    /// The Slurm job holding it, on a node Slurm schedules (the room places nothing there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<u64>,
}

impl Gpu {
    /// A whole GPU (not a slice) of `memory` at `index`, with nothing allocated
    /// and no samples yet.
    pub fn new(index: u8, memory: Mib) -> Gpu {
        Gpu {
            index,
            memory,
            mig: None,
            allocations: Vec::new(),
            util: None,
            mem_used: None,
            sampled_at: None,
            idle_since: None,
            stale: false,
            health: None,
            slurm_job: None,
        }
    }

    /// GPU memory held by its allocations, in all.
    pub fn allocated(&self) -> Mib {
        Mib(self.allocations.iter().map(|a| a.size.0).sum())
    }

    /// Nothing on it: no allocation of the room's and no Slurm job.
    pub fn is_free(&self) -> bool {
        self.allocations.is_empty() && self.slurm_job.is_none()
    }

    /// Held by an exclusive job, which owns its compute whatever the memory left.
    pub fn has_exclusive(&self) -> bool {
        self.allocations.iter().any(|a| a.exclusive)
    }

    /// Free gaps as (offset, size), in address order.
    pub fn free_blocks(&self) -> Vec<(Mib, Mib)> {
        let mut taken: Vec<(u32, u32)> = self.allocations.iter().map(|a| (a.offset.0, a.size.0)).collect();
        taken.sort_unstable();
        let mut blocks = Vec::new();
        let mut cursor = 0u32;
        for (offset, size) in taken {
            if offset > cursor {
                blocks.push((Mib(cursor), Mib(offset - cursor)));
            }
            cursor = cursor.max(offset.saturating_add(size));
        }
        if self.memory.0 > cursor {
            blocks.push((Mib(cursor), Mib(self.memory.0 - cursor)));
        }
        blocks
    }

    /// The largest free gap: the most memory one more allocation could get.
    pub fn largest_free_block(&self) -> Mib {
        // Most GPUs hold zero or one allocation: answer those without sorting.
        match self.allocations.as_slice() {
            [] => self.memory,
            [only] => {
                let after = self.memory.0.saturating_sub(only.offset.0.saturating_add(only.size.0));
                Mib(only.offset.0.min(self.memory.0).max(after))
            }
            _ => self.free_blocks().into_iter().map(|(_, s)| s).max().unwrap_or(Mib(0)),
        }
    }

    /// 1 − largest free block / total free (SPEC §2): 0 when free memory is one
    /// block or there is none.
    pub fn fragmentation(&self) -> f64 {
        let blocks = self.free_blocks();
        let free: u64 = blocks.iter().map(|(_, s)| u64::from(s.0)).sum();
        if free == 0 {
            return 0.0;
        }
        let largest = blocks.iter().map(|(_, s)| u64::from(s.0)).max().unwrap_or(0);
        1.0 - largest as f64 / free as f64
    }
}

/// A node as the core tracks it: what was bought, its state, and what is
/// placed on it now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub spec: NodeSpec,
    pub state: NodeState,
    pub up_since: At,
    /// Placeable units: whole GPUs and MIG slices (see `NodeSpec::units`).
    pub gpus: Vec<Gpu>,
    /// Host CPUs and memory held by the jobs placed here.
    #[serde(default)]
    pub cpus_used: u32,
    #[serde(default)]
    pub host_mem_used: Mib,
    /// Set on a node Slurm schedules: Slurm's state for it and why. The room
    /// places none of its own jobs here; Slurm's jobs hold its GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmNodeState>,
}

/// A Slurm node's state as Slurm last said it ("mixed", "idle+drain") and its reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmNodeState {
    pub state: String,
    #[serde(default)]
    pub reason: String,
    /// Slurm's name for the node, where it is not the machine's (the
    /// console shows Slurm's; the ledger keeps the machine's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl SlurmNodeState {
    /// Slurm powered the node down: no machine behind it.
    pub fn powered_down(&self) -> bool {
        slurm_powered_down(&self.state)
    }
}

/// Whether a Slurm node's state ("idle+cloud+powered_down") says Slurm
/// powered it down (a CLOUD node with no machine behind it, nothing billed).
pub fn slurm_powered_down(state: &str) -> bool {
    state.contains("powered_down") || (state.contains("cloud") && state.contains("power_down") && !state.contains("powering_down"))
}

impl Node {
    /// A node up since `at`, with one empty `Gpu` per placeable unit of `spec`.
    pub fn new(spec: NodeSpec, at: At) -> Node {
        let gpus = spec.units().into_iter().enumerate().map(|(i, unit)| Gpu { mig: unit.mig_parent, ..Gpu::new(i as u8, unit.memory) }).collect();
        Node { spec, state: NodeState::Up, up_since: at, gpus, cpus_used: 0, host_mem_used: Mib(0), slurm: None }
    }

    /// Host CPUs not held by the jobs placed here.
    pub fn cpus_free(&self) -> u32 {
        self.spec.cpus.saturating_sub(self.cpus_used)
    }

    /// Host memory not held by the jobs placed here.
    pub fn host_mem_free(&self) -> Mib {
        Mib(self.spec.host_memory.0.saturating_sub(self.host_mem_used.0))
    }

    /// The room may place jobs here: up, and not a node Slurm schedules.
    pub fn accepts_work(&self) -> bool {
        matches!(self.state, NodeState::Up) && self.slurm.is_none()
    }

    /// The instance is there: any state but down (booting, draining and retiring
    /// count).
    pub fn is_up(&self) -> bool {
        !matches!(self.state, NodeState::Down { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu_with(allocs: &[(u32, u32)]) -> Gpu {
        let mut g = Gpu::new(0, Mib(16_384));
        for (i, (offset, size)) in allocs.iter().enumerate() {
            g.allocations.push(Allocation { job: JobId(i as u64), offset: Mib(*offset), size: Mib(*size), exclusive: false });
        }
        g
    }

    #[test]
    fn free_blocks_are_the_gaps_between_allocations() {
        let g = gpu_with(&[(4096, 4096), (12_288, 2048)]);
        assert_eq!(g.free_blocks(), vec![(Mib(0), Mib(4096)), (Mib(8192), Mib(4096)), (Mib(14_336), Mib(2048))]);
        assert_eq!(g.largest_free_block(), Mib(4096));
        // free 10240, largest 4096 -> 1 - 0.4 = 0.6
        assert!((g.fragmentation() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn the_largest_block_shortcut_agrees_with_the_full_scan() {
        for allocs in [vec![], vec![(0, 4096)], vec![(4096, 4096)], vec![(12_288, 4096)], vec![(0, 16_384)], vec![(1000, 2000), (8000, 100)]] {
            let g = gpu_with(&allocs);
            let scanned = g.free_blocks().into_iter().map(|(_, s)| s).max().unwrap_or(Mib(0));
            assert_eq!(g.largest_free_block(), scanned, "{allocs:?}");
        }
    }

    #[test]
    fn an_empty_or_full_gpu_is_not_fragmented() {
        assert_eq!(gpu_with(&[]).fragmentation(), 0.0);
        assert_eq!(gpu_with(&[(0, 16_384)]).fragmentation(), 0.0);
        assert_eq!(gpu_with(&[(0, 8192)]).fragmentation(), 0.0);
    }
}
