//! EASY backfilling: the first job that cannot start gets a reservation — the
//! node and time at which running jobs, ending as predicted, free enough GPUs
//! for it. Later jobs may start first only if they do not delay it: they run
//! elsewhere, fit in the GPUs the reserved job leaves spare, or are predicted
//! to end before the reservation.

use std::collections::BTreeMap;

use super::placement::{model_allows, pool_allows};
use crate::domain::cluster::Node;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::JobSpec;
use crate::domain::units::At;

#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    pub job: JobId,
    pub node: NodeId,
    pub at: At,
    /// GPUs free on the node at `at` beyond what the reserved job needs.
    pub spare_gpus: u32,
}

/// Where and when `spec` could start, if running jobs end at `ends` (jobs
/// with no predicted end never free their GPUs). Exclusive jobs wait for whole
/// GPUs; shareable ones for a GPU with room.
pub fn reserve(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec, escalated: bool, ends: &BTreeMap<JobId, At>, now: At) -> Option<Reservation> {
    let wanted = u32::from(spec.gpus);
    let mut best: Option<Reservation> = None;
    // A node of another GPU model never frees up for a model-bound job.
    for node in nodes.values().filter(|n| n.accepts_work() && pool_allows(spec.pool, escalated, n.spec.billing) && model_allows(spec, n)) {
        let eligible: Vec<&crate::domain::cluster::Gpu> =
            node.gpus.iter().filter(|g| g.memory.0 >= spec.gpu_mem.0 && (wanted == 1 || g.mig.is_none())).collect();
        if (eligible.len() as u32) < wanted {
            continue;
        }
        // When each eligible GPU becomes free: now if free, else when its last job ends.
        let mut free_at: Vec<At> = eligible
            .iter()
            .filter_map(|g| g.allocations.iter().map(|a| ends.get(&a.job).copied()).try_fold(now, |latest, end| end.map(|e| latest.max(e))))
            .collect();
        if (free_at.len() as u32) < wanted {
            continue;
        }
        free_at.sort_unstable();
        let at = free_at[wanted as usize - 1].max(now);
        let spare_gpus = free_at.iter().filter(|t| **t <= at).count() as u32 - wanted;
        let candidate = Reservation { job: spec.id, node: node.spec.id, at, spare_gpus };
        if best.as_ref().is_none_or(|b| (candidate.at, candidate.node) < (b.at, b.node)) {
            best = Some(candidate);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::{Allocation, BillingMode};
    use crate::domain::testkit::{job_spec, node_spec, t};
    use crate::domain::units::Mib;

    #[test]
    fn the_reservation_is_the_earliest_node_where_enough_gpus_free_up() {
        let mut a = Node::new(node_spec(1, BillingMode::Reserved, 4), t(0));
        let mut b = Node::new(node_spec(2, BillingMode::Reserved, 4), t(0));
        let hold =
            |n: &mut Node, g: usize, job: u64| n.gpus[g].allocations.push(Allocation { job: JobId(job), offset: Mib(0), size: Mib(16_384), exclusive: true });
        for g in 0..4 {
            hold(&mut a, g, 1); // one 4-GPU job ending at 1000
        }
        hold(&mut b, 0, 2); // ends at 300
        hold(&mut b, 1, 3); // ends at 600
        hold(&mut b, 2, 4); // no prediction
        let nodes: BTreeMap<NodeId, Node> = [(NodeId(1), a), (NodeId(2), b)].into();
        let ends: BTreeMap<JobId, At> = [(JobId(1), t(1000)), (JobId(2), t(300)), (JobId(3), t(600))].into();
        // 3 GPUs: node 2 has one free now, one at 300, one at 600 → 600; node 1 → 1000.
        let r = reserve(&nodes, &job_spec(9, "x", 3), false, &ends, t(0)).unwrap();
        assert_eq!((r.node, r.at, r.spare_gpus), (NodeId(2), t(600), 0));
        // 4 GPUs: node 2 never (job 4 has no end), node 1 at 1000.
        let r = reserve(&nodes, &job_spec(9, "x", 4), false, &ends, t(0)).unwrap();
        assert_eq!((r.node, r.at), (NodeId(1), t(1000)));
        // 1 GPU: node 2 now, with nothing spare... node 2 has one free GPU now.
        let r = reserve(&nodes, &job_spec(9, "x", 1), false, &ends, t(0)).unwrap();
        assert_eq!((r.node, r.at, r.spare_gpus), (NodeId(2), t(0), 0));
    }
}
