//! Choosing what to preempt so that one blocked job fits: the fewest
//! candidates, taken in the caller's order of preference (e.g. borrowed work,
//! newest first), whose GPUs would free a place for it on one node.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{Options, fit_on_node};
use crate::domain::cluster::Node;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::JobSpec;

/// The victims to stop so `spec` fits, or `None` if stopping the candidates
/// cannot make it fit. Candidates are tried in order, node by node; the node
/// needing the fewest victims wins (then the lowest id).
pub fn victims_for(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec, escalated: bool, candidates: &[JobId], opts: &Options) -> Option<Vec<JobId>> {
    let wanted: BTreeSet<JobId> = candidates.iter().copied().collect();
    let mut best: Option<(usize, NodeId, Vec<JobId>)> = None;
    for node in nodes.values().filter(|n| n.accepts_work()) {
        let on_node: BTreeSet<JobId> = node.gpus.iter().flat_map(|g| g.allocations.iter().map(|a| a.job)).filter(|j| wanted.contains(j)).collect();
        if on_node.is_empty() {
            continue;
        }
        let mut trial = node.clone();
        let mut taken = Vec::new();
        for victim in candidates.iter().filter(|c| on_node.contains(c)) {
            if best.as_ref().is_some_and(|(n, _, _)| taken.len() >= *n) {
                break;
            }
            for gpu in trial.gpus.iter_mut() {
                gpu.allocations.retain(|a| a.job != *victim);
            }
            taken.push(*victim);
            // Host resources of the victim are freed too, but the node does
            // not know per-job shares: they are checked again at placement.
            if fit_on_node(&Node { cpus_used: 0, host_mem_used: Default::default(), ..trial.clone() }, spec, escalated, opts).is_some() {
                if best.as_ref().is_none_or(|(n, id, _)| (taken.len(), node.spec.id) < (*n, *id)) {
                    best = Some((taken.len(), node.spec.id, taken.clone()));
                }
                break;
            }
        }
    }
    best.map(|(_, _, victims)| victims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::{Allocation, BillingMode};
    use crate::domain::testkit::{job_spec, node_spec, t};
    use crate::domain::units::Mib;

    fn hold(node: &mut Node, gpu: usize, job: u64) {
        node.gpus[gpu].allocations.push(Allocation { job: JobId(job), offset: Mib(0), size: Mib(16_384), exclusive: true });
    }

    #[test]
    fn the_fewest_victims_on_one_node_in_order_of_preference() {
        let mut a = Node::new(node_spec(1, BillingMode::Reserved, 4), t(0));
        let mut b = Node::new(node_spec(2, BillingMode::Reserved, 4), t(0));
        // Node 1: jobs 1, 2 (one GPU each) and two free GPUs. Node 2: job 3 on all four.
        hold(&mut a, 0, 1);
        hold(&mut a, 1, 2);
        for g in 0..4 {
            hold(&mut b, g, 3);
        }
        let nodes: BTreeMap<NodeId, Node> = [(NodeId(1), a), (NodeId(2), b)].into();
        let spec = job_spec(9, "x", 3);
        let opts = Options::default();
        assert_eq!(victims_for(&nodes, &spec, false, &[JobId(2), JobId(1), JobId(3)], &opts), Some(vec![JobId(2)]));
        // Only job 3 may go: its node frees four GPUs.
        assert_eq!(victims_for(&nodes, &spec, false, &[JobId(3)], &opts), Some(vec![JobId(3)]));
        let mut four = spec.clone();
        four.gpus = 4;
        assert_eq!(victims_for(&nodes, &four, false, &[JobId(1)], &opts), None, "one victim on node 1 is not enough");
    }
}
