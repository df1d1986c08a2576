//! Placement: which node and GPUs a job gets, and at which memory offset.
//!
//! Best fit (the default): capacity is chosen by price tier first (reserved is
//! already paid for, then spot, then on-demand), then by the tightest fit: the
//! node or GPU whose free space holds the job with the least left over, so
//! that large contiguous space stays free for large jobs. First fit (the
//! baseline to compare with) takes the first node and block that fit, in
//! order. A job always lands on one node; MIG slices are placeable units of
//! their own but never part of a multi-GPU job; with time-sharing on, small
//! shareable jobs may use the memory an exclusive job did not ask for.
//! Fragmentation-aware (`frag_gradient`): within a price tier, the node
//! whose expected fragmentation for the current workload grows least, then
//! the node left fullest.

use std::collections::BTreeMap;

use super::config::FitPolicy;
use super::frag_gradient::{self, Weigher};
use crate::domain::cluster::{BillingMode, Gpu, Node};
use crate::domain::ids::NodeId;
use crate::domain::job::{JobSpec, PoolPreference};
use crate::domain::units::Mib;

/// The chosen GPUs with the memory offset reserved on each.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub node: NodeId,
    pub gpus: Vec<(u8, Mib)>,
}

/// How to place: the fit policy, time-sharing, and a node to keep clear.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Options<'a> {
    pub fit: FitPolicy,
    pub time_sharing: bool,
    /// Leave this node alone (it is reserved for a blocked job).
    pub avoid: Option<NodeId>,
    /// The fragmentation policy for this pass (`FitPolicy::Fragmentation`;
    /// without one that policy places as best fit does).
    pub workload: Option<&'a Weigher>,
}

fn tier(mode: BillingMode) -> u8 {
    match mode {
        BillingMode::Reserved => 0,
        BillingMode::Spot => 1,
        BillingMode::OnDemand => 2,
    }
}

/// Whether the job's pool preference lets it run on `mode` (an escalated
/// spot-only job may use anything).
pub fn pool_allows(pool: PoolPreference, escalated: bool, mode: BillingMode) -> bool {
    match pool {
        PoolPreference::Any => true,
        PoolPreference::NoSpot => mode != BillingMode::Spot,
        PoolPreference::SpotOnly => escalated || mode == BillingMode::Spot,
    }
}

/// Whether the job may run on the node's GPU model (a job that names none runs on any).
pub fn model_allows(spec: &JobSpec, node: &Node) -> bool {
    crate::domain::job::models_allow(&spec.gpu_models, &node.spec.gpu_model)
}

/// The free block of `gpu` that holds `size`: the smallest (best fit) or the
/// first (first fit), as (offset, leftover).
fn block(gpu: &Gpu, size: Mib, fit: FitPolicy) -> Option<(Mib, u32)> {
    let mut fitting = gpu.free_blocks().into_iter().filter(|(_, b)| b.0 >= size.0).map(|(o, b)| (o, b.0 - size.0));
    match fit {
        FitPolicy::BestFit | FitPolicy::Fragmentation => fitting.min_by_key(|&(offset, leftover)| (leftover, offset.0)),
        FitPolicy::FirstFit => fitting.next(),
    }
}

/// A node's rank for a job (price tier, then the growth of expected
/// fragmentation in hundredths of a MiB where that is the policy, then what
/// is left over; lower is better) and the GPUs with the offset on each.
pub type Fit = ((u8, i64, u64), Vec<(u8, Mib)>);

/// Ranks one node for the job: `None` if it cannot hold it.
pub fn fit_on_node(node: &Node, spec: &JobSpec, escalated: bool, opts: &Options) -> Option<Fit> {
    let fit = fit_best_or_first(node, spec, escalated, opts)?;
    match (opts.fit, opts.workload) {
        (FitPolicy::Fragmentation, Some(weigher)) => Some(least_fragmenting(node, spec, weigher, fit, opts.time_sharing)),
        _ => Some(fit),
    }
}

/// The node's rank by the fragmentation policy (`Weigher::rank_on`, the
/// code `gpuroom bench placement` measures); `fit` is its best-fit place
/// there, kept for multi-GPU and whole-GPU jobs (MIG slices never join
/// them, and the measure does not tell whole GPUs apart).
fn least_fragmenting(node: &Node, spec: &JobSpec, weigher: &Weigher, fit: Fit, time_sharing: bool) -> Fit {
    let ((tier, _, leftover), best_gpus) = fit;
    let free = frag_gradient::node_free(node, time_sharing);
    let shape = frag_gradient::shape_of_spec(spec);
    let Some((rank, chosen)) = weigher.rank_on(&free, &shape, |n| n.fragmentation(&weigher.workload)) else { return ((tier, i64::MAX, leftover), best_gpus) };
    if spec.gpus != 1 || spec.exclusive {
        return ((tier, rank.cost, rank.left), best_gpus);
    }
    let gpu = &node.gpus[chosen[0]];
    let Some((offset, _)) = block(gpu, spec.gpu_mem, FitPolicy::BestFit) else { return ((tier, i64::MAX, leftover), best_gpus) };
    ((tier, rank.cost, rank.left), vec![(gpu.index, offset)])
}

fn fit_best_or_first(node: &Node, spec: &JobSpec, escalated: bool, opts: &Options) -> Option<Fit> {
    if !node.accepts_work() || spec.gpus == 0 || !pool_allows(spec.pool, escalated, node.spec.billing) || !model_allows(spec, node) {
        return None;
    }
    if spec.cpus > node.cpus_free() || spec.host_mem.0 > node.host_mem_free().0 {
        return None;
    }
    let wanted = usize::from(spec.gpus);
    let usable = |g: &&Gpu| g.memory.0 >= spec.gpu_mem.0 && (wanted == 1 || g.mig.is_none());
    let rank_tier = match opts.fit {
        FitPolicy::BestFit | FitPolicy::Fragmentation => tier(node.spec.billing),
        FitPolicy::FirstFit => 0,
    };
    let best = opts.fit != FitPolicy::FirstFit;
    if spec.exclusive {
        let free: Vec<&Gpu> = node.gpus.iter().filter(usable).filter(|g| g.is_free()).collect();
        if free.len() < wanted {
            return None;
        }
        // Tightest node: the fewest free GPUs left behind, then the least memory over.
        let left_behind = if best {
            (free.len() - wanted) as u64 * 1_000_000 + free.iter().take(wanted).map(|g| u64::from(g.memory.0 - spec.gpu_mem.0)).sum::<u64>()
        } else {
            0
        };
        let mut chosen: Vec<&Gpu> = free;
        if best {
            // Smallest units first (a MIG slice before a whole GPU).
            chosen.sort_by_key(|g| (g.memory.0, g.index));
        }
        let gpus = chosen.iter().take(wanted).map(|g| (g.index, Mib(0))).collect();
        return Some(((rank_tier, 0, left_behind), gpus));
    }
    let mut candidates: Vec<(u32, u8, Mib)> = node
        .gpus
        .iter()
        .filter(usable)
        .filter(|g| !g.has_exclusive() || opts.time_sharing)
        .filter_map(|g| block(g, spec.gpu_mem, opts.fit).map(|(offset, leftover)| (leftover, g.index, offset)))
        .collect();
    if candidates.len() < wanted {
        return None;
    }
    if best {
        candidates.sort_unstable();
    }
    candidates.truncate(wanted);
    let leftover = if best { candidates.iter().map(|(l, _, _)| u64::from(*l)).sum() } else { 0 };
    let gpus = candidates.into_iter().map(|(_, index, offset)| (index, offset)).collect();
    Some(((rank_tier, 0, leftover), gpus))
}

/// Where `spec` fits now under `opts`, or `None` if it fits nowhere.
pub fn place(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec, escalated: bool, opts: &Options) -> Option<Plan> {
    place_where(nodes, spec, escalated, opts, |_| true)
}

/// `place` among the nodes `allowed` keeps (a migrating job avoids a pool).
pub fn place_where(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec, escalated: bool, opts: &Options, allowed: impl Fn(&Node) -> bool) -> Option<Plan> {
    let fits = nodes
        .values()
        .filter(|node| Some(node.spec.id) != opts.avoid && allowed(node))
        .filter_map(|node| fit_on_node(node, spec, escalated, opts).map(|(score, gpus)| (score, node.spec.id, gpus)));
    let best = match opts.fit {
        FitPolicy::BestFit | FitPolicy::Fragmentation => fits.min_by_key(|(score, id, _)| (*score, *id)),
        FitPolicy::FirstFit => fits.min_by_key(|(_, id, _)| *id),
    };
    best.map(|(_, node, gpus)| Plan { node, gpus })
}

/// Best fit without time-sharing: the default placement, for tests and tools.
pub fn best_fit(nodes: &BTreeMap<NodeId, Node>, spec: &JobSpec) -> Option<Plan> {
    place(nodes, spec, false, &Options::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::{Allocation, NodeState};
    use crate::domain::ids::JobId;
    use crate::domain::testkit::{job_spec, node_spec, t};

    fn cluster(specs: Vec<crate::domain::cluster::NodeSpec>) -> BTreeMap<NodeId, Node> {
        specs.into_iter().map(|s| (s.id, Node::new(s, t(0)))).collect()
    }

    fn hold(nodes: &mut BTreeMap<NodeId, Node>, node: u32, gpu: usize, offset: u32, size: u32, exclusive: bool) {
        nodes.get_mut(&NodeId(node)).unwrap().gpus[gpu].allocations.push(Allocation { job: JobId(999), offset: Mib(offset), size: Mib(size), exclusive });
    }

    fn small(id: u64, mem: u32) -> JobSpec {
        let mut spec = job_spec(id, "a", 1);
        spec.exclusive = false;
        spec.gpu_mem = Mib(mem);
        spec
    }

    #[test]
    fn a_small_job_takes_the_tightest_free_block() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 2)]);
        // GPU 0 has 4 GiB free after 12 GiB; GPU 1 is empty (16 GiB free).
        hold(&mut nodes, 1, 0, 0, 12_288, false);
        let plan = best_fit(&nodes, &small(1, 4000)).unwrap();
        assert_eq!(plan, Plan { node: NodeId(1), gpus: vec![(0, Mib(12_288))] });
        // First fit takes GPU 0's first block too here, but with a hole at the start it takes the hole.
        hold(&mut nodes, 1, 1, 8192, 8192, false);
        let first = place(&nodes, &small(2, 4000), false, &Options { fit: FitPolicy::FirstFit, ..Options::default() }).unwrap();
        assert_eq!(first.gpus, vec![(0, Mib(12_288))]);
        let tight = best_fit(&nodes, &small(3, 8000)).unwrap();
        assert_eq!(tight.gpus, vec![(1, Mib(0))], "the 8 GiB hole of GPU 1, not GPU 0's");
    }

    #[test]
    fn fragmentation_aware_placement_keeps_room_for_the_typical_shape() {
        // Node 1's GPU has 8 GiB free, node 2's is empty; every typical job asks 8 GiB.
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 1), node_spec(2, BillingMode::Reserved, 1)]);
        hold(&mut nodes, 1, 0, 0, 8192, false);
        let typical =
            frag_gradient::Weigher::new(frag_gradient::Workload { shapes: vec![(frag_gradient::shape_of_spec(&small(9, 8192)), 1.0)] }, std::iter::empty());
        let four = small(1, 4096);
        assert_eq!(best_fit(&nodes, &four).unwrap().node, NodeId(1), "best fit takes the tightest block");
        let opts = Options { fit: FitPolicy::Fragmentation, workload: Some(&typical), ..Options::default() };
        // On node 1 it would strand 4 GiB no 8 GiB job can use; on node 2, 12 GiB stay usable.
        assert_eq!(place(&nodes, &four, false, &opts).unwrap(), Plan { node: NodeId(2), gpus: vec![(0, Mib(0))] });
        // An 8 GiB job fills node 1's hole exactly: no growth there.
        assert_eq!(place(&nodes, &small(2, 8192), false, &opts).unwrap().node, NodeId(1));
        // Without a workload the policy places as best fit; the price tier still comes first.
        let no_workload = Options { fit: FitPolicy::Fragmentation, ..Options::default() };
        assert_eq!(place(&nodes, &four, false, &no_workload).unwrap().node, NodeId(1));
        let mut tiers = cluster(vec![node_spec(1, BillingMode::OnDemand, 1), node_spec(2, BillingMode::Reserved, 1)]);
        hold(&mut tiers, 2, 0, 0, 8192, false);
        assert_eq!(place(&tiers, &four, false, &opts).unwrap().node, NodeId(2), "reserved before on-demand, whatever the growth");
    }

    #[test]
    fn an_exclusive_job_needs_untouched_gpus_on_one_node() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 2), node_spec(2, BillingMode::OnDemand, 4)]);
        hold(&mut nodes, 1, 0, 0, 1024, false);
        let spec = job_spec(1, "a", 2);
        let plan = best_fit(&nodes, &spec).unwrap();
        assert_eq!(plan.node, NodeId(2), "node 1 has only one untouched GPU");
        assert_eq!(plan.gpus.len(), 2);
        let mut five = spec.clone();
        five.gpus = 5;
        assert_eq!(best_fit(&nodes, &five), None, "no node has 5 GPUs");
    }

    #[test]
    fn reserved_capacity_is_used_before_spot_and_spot_before_on_demand() {
        let nodes = cluster(vec![node_spec(1, BillingMode::OnDemand, 1), node_spec(2, BillingMode::Spot, 1), node_spec(3, BillingMode::Reserved, 8)]);
        let spec = job_spec(1, "a", 1);
        assert_eq!(best_fit(&nodes, &spec).unwrap().node, NodeId(3));
        let mut no_spot = spec.clone();
        no_spot.pool = PoolPreference::NoSpot;
        let without_reserved: BTreeMap<_, _> = nodes.into_iter().filter(|(id, _)| id.0 != 3).collect();
        assert_eq!(best_fit(&without_reserved, &spec).unwrap().node, NodeId(2));
        assert_eq!(best_fit(&without_reserved, &no_spot).unwrap().node, NodeId(1));
        let mut spot_only = spec.clone();
        spot_only.pool = PoolPreference::SpotOnly;
        let only_od: BTreeMap<_, _> = without_reserved.into_iter().filter(|(id, _)| id.0 == 1).collect();
        assert_eq!(place(&only_od, &spot_only, false, &Options::default()), None);
        assert_eq!(place(&only_od, &spot_only, true, &Options::default()).unwrap().node, NodeId(1), "escalated: any pool");
    }

    #[test]
    fn within_a_tier_the_node_left_fullest_wins_and_a_reserved_node_can_be_avoided() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 8), node_spec(2, BillingMode::Reserved, 8)]);
        for gpu in 0..6 {
            hold(&mut nodes, 2, gpu, 0, 16_384, true);
        }
        let spec = job_spec(1, "a", 2);
        assert_eq!(best_fit(&nodes, &spec).unwrap().node, NodeId(2), "node 2's last two GPUs fit exactly");
        let opts = Options { avoid: Some(NodeId(2)), ..Options::default() };
        assert_eq!(place(&nodes, &spec, false, &opts).unwrap().node, NodeId(1));
    }

    #[test]
    fn draining_nodes_small_gpus_and_full_hosts_are_skipped() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 8)]);
        let mut big = job_spec(1, "a", 1);
        big.gpu_mem = Mib(40_000);
        assert_eq!(best_fit(&nodes, &big), None);
        let mut cpu_hungry = job_spec(2, "a", 1);
        cpu_hungry.cpus = 65;
        assert_eq!(best_fit(&nodes, &cpu_hungry), None, "the node has 64 CPUs");
        nodes.get_mut(&NodeId(1)).unwrap().state = NodeState::Draining { deadline: t(120) };
        assert_eq!(best_fit(&nodes, &job_spec(3, "a", 1)), None);
    }

    #[test]
    fn time_sharing_lends_what_an_exclusive_job_did_not_ask_for() {
        let mut nodes = cluster(vec![node_spec(1, BillingMode::Reserved, 1)]);
        hold(&mut nodes, 1, 0, 0, 10_000, true);
        let guest = small(1, 4000);
        assert_eq!(best_fit(&nodes, &guest), None, "no sharing of an owned GPU without time-sharing");
        let opts = Options { time_sharing: true, ..Options::default() };
        assert_eq!(place(&nodes, &guest, false, &opts).unwrap().gpus, vec![(0, Mib(10_000))]);
        assert_eq!(place(&nodes, &small(2, 7000), false, &opts), None, "only 6,384 MiB is spare");
    }

    #[test]
    fn mig_slices_are_units_of_their_own_but_not_for_multi_gpu_jobs() {
        let nodes = cluster(vec![crate::domain::testkit::mig_node_spec(1, BillingMode::Reserved, 2)]);
        let node = &nodes[&NodeId(1)];
        assert_eq!(node.gpus.len(), 5, "4 slices of GPU 0 and the whole GPU 1");
        let mut small_job = job_spec(1, "a", 1);
        small_job.gpu_mem = Mib(5000);
        let plan = best_fit(&nodes, &small_job).unwrap();
        assert_eq!(node.gpus[usize::from(plan.gpus[0].0)].memory, Mib(5120), "the smallest slice that fits");
        let two = job_spec(2, "a", 2);
        assert_eq!(best_fit(&nodes, &two), None, "slices never join a multi-GPU job");
    }

    #[test]
    fn a_job_bound_to_gpu_models_runs_only_on_them_and_unbound_work_leaves_them_room() {
        let mut specs = vec![node_spec(1, BillingMode::Reserved, 1), node_spec(2, BillingMode::Reserved, 1)];
        specs[0].gpu_model = "T4".into();
        specs[1].gpu_model = "G2".into();
        let nodes = cluster(specs);
        let t4_only = JobSpec { gpu_models: vec!["T4".into()], ..small(1, 8192) };
        assert_eq!(best_fit(&nodes, &t4_only).unwrap().node, NodeId(1));
        let a100_only = JobSpec { gpu_models: vec!["A100".into()], ..small(2, 8192) };
        assert_eq!(best_fit(&nodes, &a100_only), None, "no node of its model");
        // Half the typical work may use T4s only: work that may run anywhere goes to the G2.
        let shape = |spec: &JobSpec| frag_gradient::Shape { mem: 0, ..frag_gradient::shape_of_spec(spec) };
        let workload = frag_gradient::Workload { shapes: vec![(shape(&t4_only), 0.5), (shape(&small(3, 8192)), 0.5)] };
        let frees: Vec<frag_gradient::NodeFree> = nodes.values().map(|n| frag_gradient::node_free(n, false)).collect();
        let weigher = frag_gradient::Weigher::new(workload, frees.iter());
        let opts = Options { fit: FitPolicy::Fragmentation, workload: Some(&weigher), ..Options::default() };
        assert_eq!(place(&nodes, &small(4, 8192), false, &opts).unwrap().node, NodeId(2));
        assert_eq!(place(&nodes, &t4_only, false, &opts).unwrap().node, NodeId(1));
    }
}
