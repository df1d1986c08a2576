//! Elastic capacity's vocabulary: the pools the room may buy nodes from, a
//! launch it asks for, and why one failed. The decisions are the capacity
//! policy's (`capacity/`); the room keeps the state; the world (the
//! simulator, or EC2) carries launches and releases out.

use serde::{Deserialize, Serialize};

use super::cluster::{BillingMode, NodeSpec};
use super::ids::JobId;
use super::job::PoolTarget;
use super::units::{MicrosPerHour, Secs};

/// From RunInstances to a node that takes work, when a pool does not say:
/// 40 s to a booted OS (measured on current EC2 types, depot.dev 2024),
/// ~45 s more for a GPU image's larger root volume and the NVIDIA driver,
/// 5 s for the CUDA context (SPEC §2).
pub const DEFAULT_BOOT: Secs = Secs(90);

/// A pool the room may buy nodes from: an instance type in a zone, on
/// demand or on spot. Reserved capacity is bought for years, not here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolSpec {
    /// What a node of the pool is. Its id and name are the world's to give
    /// (`Event::Launched`); its max price is set per launch.
    pub node: NodeSpec,
    /// Throughput relative to a V100 (a K80 takes ~3× as long for the same work).
    pub speed: f64,
    /// Never more nodes than this in the pool (the account's limits).
    pub max_nodes: u32,
    /// Nodes kept up even when idle, so that a burst starts at once.
    pub warm_min: u32,
    /// From the launch call to a node that takes work (instance start, OS,
    /// driver, CUDA context).
    pub boot: Secs,
}

impl PoolSpec {
    /// The pool's billing mode, instance type and zone, as a launch or a migration names it.
    pub fn target(&self) -> PoolTarget {
        PoolTarget::of(&self.node)
    }

    /// GPUs on each node of the pool.
    pub fn gpus(&self) -> u32 {
        u32::from(self.node.gpu_count)
    }

    /// Why the pool cannot be bought from, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if let Some(p) = self.node.problem() {
            return Some(p);
        }
        if self.node.billing == BillingMode::Reserved {
            return Some("reserved capacity is not bought on the fly".into());
        }
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Some(format!("speed {} is not a positive number", self.speed));
        }
        if self.warm_min > self.max_nodes {
            return Some(format!("warm minimum {} above the pool's maximum {}", self.warm_min, self.max_nodes));
        }
        if self.boot.0 < 0 {
            return Some(format!("boot time {} s is negative", self.boot.0));
        }
        if self.node.on_demand_price.0 <= 0 || self.node.contract_price.0 < 0 {
            return Some("no price".into());
        }
        None
    }
}

/// A launch the room asks the world for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub id: u64,
    pub pool: PoolTarget,
    pub count: u32,
    /// Spot only: the most the instances may cost an hour.
    pub max_price: Option<MicrosPerHour>,
    /// The waiting jobs it is bought for.
    pub for_jobs: Vec<JobId>,
    /// Why, in words, for the log and the console.
    pub reason: String,
}

/// Why a launch did not happen.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchFailure {
    /// The zone has no such instances now (EC2's InsufficientInstanceCapacity).
    InsufficientCapacity,
    /// The spot market is above the max price asked.
    PriceAboveMax,
    /// An account limit (EC2's instance or vCPU limits).
    Limit,
    /// Anything else the provider answered.
    Other,
}

impl LaunchFailure {
    /// The failure in words, for the log and the console.
    pub fn label(self) -> &'static str {
        match self {
            LaunchFailure::InsufficientCapacity => "insufficient capacity",
            LaunchFailure::PriceAboveMax => "market above the max price",
            LaunchFailure::Limit => "account limit",
            LaunchFailure::Other => "failed",
        }
    }

    /// Whether the pool should be left alone for a while (another zone or
    /// on-demand tried instead).
    pub fn backs_off(self) -> bool {
        !matches!(self, LaunchFailure::Other)
    }
}
