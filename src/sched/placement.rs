//! Placement: which node and GPUs a job gets, and at which memory offset.
//!
//! Capacity is chosen by price tier first (reserved is already paid for, then
//! spot, then on-demand), then by best fit: the node or GPU whose free space
//! fits the job with the least left over, so that large contiguous space stays
//! free for large jobs. A multi-GPU job always lands on one node.

use std::collections::BTreeMap;

use crate::core::cluster::{BillingMode, Gpu, Node};
use crate::core::ids::NodeId;
use crate::core::job::{JobSpec, PoolPreference};
use crate::core::units::Mib;

/// The chosen GPUs with the memory offset reserved on each.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub node: NodeId,
    pub gpus: Vec<(u8, Mib)>,
}

fn tier(mode: BillingMode) -> u8 {
    match mode {
        BillingMode::Reserved => 0,
        BillingMode::Spot => 1,
        BillingMode::OnDemand => 2,
    }
}

/// The smallest free block of `gpu` that holds `size`, as (offset, leftover).
fn best_block(gpu: &Gpu, size: Mib) -> Option<(Mib, u32)> {
    gpu.free_blocks()
        .into_iter()
        .filter(|(_, block)| block.0 >= size.0)
        .map(|(offset, block)| (offset, block.0 - size.0))
        .min_by_key(|&(offset, leftover)| (leftover, offset.0))
}

/// Ranks one node for the job: `None` if it cannot hold it.
fn fit_on_node(node: &Node, spec: &JobSpec) -> Option<((u8, u64), Vec<(u8, Mib)>)> {
    if !node.accepts_work() || spec.gpus == 0 || node.spec.gpu_memory.0 < spec.gpu_mem.0 {
        return None;
    }
    if spec.pool == PoolPreference::NoSpot && node.spec.billing == BillingMode::Spot {
        return None;
    }
    let wanted = usize::from(spec.gpus);
    if spec.exclusive {
        let free: Vec<&Gpu> = node.gpus.iter().filter(|g| g.is_free()).collect();
        if free.len() < wanted {
            return None;
        }
        // Tightest node: the fewest free GPUs left behind.
        let left_behind = (free.len() - wanted) as u64;
        let gpus = free.iter().take(wanted).map(|g| (g.index, Mib(0))).collect();
        return Some(((tier(node.spec.billing), left_behind), gpus));
    }
    let mut candidates: Vec<(u32, u8, Mib)> = node
        .gpus
        .iter()
        .filter(|g| !g.has_exclusive())
        .filter_map(|g| best_block(g, spec.gpu_mem).map(|(offset, leftover)| (leftover, g.index, offset)))
        .collect();
    if candidates.len() < wanted {
        return None;
    }
    candidates.sort_unstable();
    candidates.truncate(wanted);
    let leftover: u64 = candidates.iter().map(|(l, _, _)| u64::from(*l)).sum();
    let gpus = candidates.into_iter().map(|(_, index, offset)| (index, offset)).collect();
    Some(((tier(node.spec.billing), leftover), gpus))
}

/// Where `spec` fits best now, or `None` if it fits nowhere.
pub fn best_fit(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec) -> Option<Plan> {
    nodes
        .values()
        .filter_map(|node| fit_on_node(node, spec).map(|(score, gpus)| (score, node.spec.id, gpus)))
        .min_by_key(|(score, id, _)| (*score, *id))
        .map(|(_, node, gpus)| Plan { node, gpus })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cluster::Allocation;
    use crate::core::ids::JobId;
    use crate::core::testkit::{job_spec, node_spec, t};

    fn cluster(specs: Vec<crate::core::cluster::NodeSpec>) -> BTreeMap<NodeId, Node> {
        specs.into_iter().map(|s| (s.id, Node::new(s, t(0)))).collect()
    }

    fn hold(nodes: &mut BTreeMap<NodeId, Node>, node: u32, gpu: usize, offset: u32, size: u32, exclusive: bool) {
        nodes.get_mut(&NodeId(node)).unwrap().gpus[gpu].allocations.push(Allocation {
            job: JobId(999),
            offset: Mib(offset),
            size: Mib(size),
            exclusive,
        });
    }

    #[test]
    fn a_small_job_takes_the_tightest_free_block() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 2)]);
        // GPU 0 has 4 GiB free after 12 GiB; GPU 1 is empty (16 GiB free).
        hold(&mut nodes, 1, 0, 0, 12_288, false);
        let mut spec = job_spec(1, "a", 1);
        spec.exclusive = false;
        spec.gpu_mem = Mib(4000);
        let plan = best_fit(&nodes, &spec).unwrap();
        assert_eq!(plan, Plan { node: NodeId(1), gpus: vec![(0, Mib(12_288))] });
    }

    #[test]
    fn an_exclusive_job_needs_untouched_gpus_on_one_node() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 2), node_spec(2, BillingMode::OnDemand, 4)]);
        hold(&mut nodes, 1, 0, 0, 1024, false);
        let mut spec = job_spec(1, "a", 2);
        spec.exclusive = true;
        let plan = best_fit(&nodes, &spec).unwrap();
        assert_eq!(plan.node, NodeId(2), "node 1 has only one untouched GPU");
        assert_eq!(plan.gpus.len(), 2);
        spec.gpus = 5;
        assert_eq!(best_fit(&nodes, &spec), None, "no node has 5 GPUs");
    }

    #[test]
    fn reserved_capacity_is_used_before_spot_and_spot_before_on_demand() {
        let nodes = cluster(vec![
            node_spec(1, BillingMode::OnDemand, 1),
            node_spec(2, BillingMode::Spot, 1),
            node_spec(3, BillingMode::Reserved, 8),
        ]);
        let spec = job_spec(1, "a", 1);
        assert_eq!(best_fit(&nodes, &spec).unwrap().node, NodeId(3));
        let mut no_spot = spec.clone();
        no_spot.pool = PoolPreference::NoSpot;
        let nodes_without_reserved: BTreeMap<_, _> = nodes.into_iter().filter(|(id, _)| id.0 != 3).collect();
        assert_eq!(best_fit(&nodes_without_reserved, &spec).unwrap().node, NodeId(2));
        assert_eq!(best_fit(&nodes_without_reserved, &no_spot).unwrap().node, NodeId(1));
    }

    #[test]
    fn within_a_tier_the_node_left_fullest_wins() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 8), node_spec(2, BillingMode::Reserved, 8)]);
        for gpu in 0..6 {
            hold(&mut nodes, 2, gpu, 0, 16_384, true);
        }
        let mut spec = job_spec(1, "a", 2);
        spec.exclusive = true;
        assert_eq!(best_fit(&nodes, &spec).unwrap().node, NodeId(2), "node 2's last two GPUs fit exactly");
    }

    #[test]
    fn draining_nodes_and_small_gpus_are_skipped() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 8)]);
        let mut big = job_spec(1, "a", 1);
        big.gpu_mem = Mib(40_000);
        assert_eq!(best_fit(&nodes, &big), None);
        nodes.get_mut(&NodeId(1)).unwrap().state = crate::core::cluster::NodeState::Draining { deadline: t(120) };
        assert_eq!(best_fit(&nodes, &job_spec(2, "a", 1)), None);
    }
}
