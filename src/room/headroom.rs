//! Free capacity as a pass last measured it: upper bounds of what could fit
//! anywhere, per pool a job may use. Owns the measure and the O(1) tests on
//! it; reads nodes, never changes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::cluster::{BillingMode, Node};
use crate::domain::ids::{NodeId, TenantId};
use crate::domain::job::{JobSpec, PoolPreference};
use crate::domain::units::At;
use crate::sched::quota::Held;

/// Upper bounds of what could fit anywhere, per pool a job may use, so that a
/// pass over a long queue on a full cluster skips most jobs in O(1), and an
/// arrival that cannot fit does not trigger a pass at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// Indexed by `pool_class`: [any, not spot, spot only].
    pub(super) free_units: [u32; 3],
    pub(super) largest_block: [u32; 3],
    /// Some tenant runs on borrowed capacity (an owner's arrival may reclaim it).
    pub any_borrowed: bool,
    /// A scheduler preemption is in flight: its release will trigger a pass.
    pub stop_pending: bool,
    /// What each tenant held after the pass (quota terms).
    #[serde(with = "crate::domain::serde_pairs")]
    pub held: BTreeMap<TenantId, Held>,
    /// When the pass ran.
    pub at: Option<At>,
}

fn pool_class(pool: PoolPreference, escalated: bool) -> usize {
    match (pool, escalated) {
        (PoolPreference::Any, _) | (PoolPreference::SpotOnly, true) => 0,
        (PoolPreference::NoSpot, _) => 1,
        (PoolPreference::SpotOnly, false) => 2,
    }
}

impl Headroom {
    pub fn measure(nodes: &BTreeMap<NodeId, Node>, time_sharing: bool) -> Headroom {
        let mut h = Headroom::default();
        for node in nodes.values().filter(|n| n.accepts_work()) {
            let free = node.gpus.iter().filter(|g| g.is_free()).count() as u32;
            let block = node.gpus.iter().filter(|g| time_sharing || !g.has_exclusive()).map(|g| g.largest_free_block().0).max().unwrap_or(0);
            let spot = node.spec.billing == BillingMode::Spot;
            for (class, counts) in [(0, true), (1, !spot), (2, spot)] {
                if counts {
                    h.free_units[class] = h.free_units[class].max(free);
                    h.largest_block[class] = h.largest_block[class].max(block);
                }
            }
        }
        h
    }

    /// Nothing at all fits anywhere.
    pub fn is_empty(&self) -> bool {
        self.free_units.iter().all(|u| *u == 0) && self.largest_block.iter().all(|b| *b == 0)
    }

    pub fn may_fit(&self, spec: &JobSpec, escalated: bool) -> bool {
        let class = pool_class(spec.pool, escalated);
        if spec.exclusive { u32::from(spec.gpus) <= self.free_units[class] } else { spec.gpu_mem.0 <= self.largest_block[class] }
    }
}
