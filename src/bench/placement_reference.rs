//! The FGD reference simulator's rules, so that `gpuroom bench placement`
//! runs its baselines as their authors ran them: Weng et al., ATC'23,
//! `hkust-adsl/kubernetes-scheduler-simulator` at `REFERENCE_COMMIT`, read
//! (not copied). Each rule names the file and line it follows there.
//!
//! Owns: the reference's fragmentation measure and typical pods, its five
//! scores (FGD, random, dot-product, GPU packing, best fit), the GPU each
//! picks within a node, its node tie-break, its arrival order (the shuffled
//! list plus random copies) and its allocation measure. Plain data over
//! `sched::frag_gradient`'s node model; it must not touch the room.

use rand::{RngExt, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;

use crate::sched::frag_gradient::{NodeFree, Shape, Workload};

/// The reference's repository and commit the rules below were read at.
pub const REFERENCE_REPO: &str = "hkust-adsl/kubernetes-scheduler-simulator";
pub const REFERENCE_COMMIT: &str = "8f3d6417353c5083c6d56617f255fadd8dc306bc";

/// The largest node the reference normalises by (`open-gpu-share/utils/const.go:15,17`).
const MAX_SPEC_CPU: f64 = 128_000.0;
const MAX_SPEC_GPU: f64 = 8_000.0;
/// One GPU in milli (`open-gpu-share/utils/const.go:13`).
const MILLI: u32 = 1000;

/// A node's fragmentation for one typical pod (`pkg/utils/frag.go:147-192`
/// and `GetNodePodFrag`, `:556-582`): only where the pod fits (enough GPUs
/// with that much left, and the CPU) are just the GPUs too small for it
/// fragments; anywhere else, and for a pod that asks no GPU at all (the
/// `XL`/`XR` cases), all of the node's free GPU is. Host memory is not looked at.
pub fn fragmentation_for(node: &NodeFree, typical: &Shape) -> u64 {
    let idle = node.free_units();
    if typical.per_gpu == 0 || typical.gpus == 0 || !node.model_allows(typical) {
        return idle;
    }
    let hosting = node.gpus.iter().filter(|g| g.free >= typical.per_gpu).count();
    if hosting >= usize::from(typical.gpus) && node.cpu >= typical.cpu {
        return node.gpus.iter().filter(|g| g.free < typical.per_gpu).map(|g| u64::from(g.free)).sum();
    }
    idle
}

/// F_n(M) as the reference sums it (`NodeGpuShareFragAmountScore`, `frag.go:179-182`).
pub fn fragmentation(node: &NodeFree, workload: &Workload) -> f64 {
    workload.shapes.iter().map(|(shape, p)| p * fragmentation_for(node, shape) as f64).sum()
}

/// The typical pods of a list (`GetTypicalPods`, `frag.go:381-476`, with the
/// experiments' settings: CPU-only pods included, 95% popularity, step 1,
/// no GPU weight): pods keyed by (CPU, milli per GPU, GPU count, GPU models;
/// not memory), the most frequent first and equal counts by the larger key
/// (`resource.go:22-41`, sorted in reverse), up to the first prefix that
/// covers 95% of the pods, weighted by count within it.
pub fn typical_pods(shapes: &[Shape]) -> Workload {
    // The reference's key: (CPU, milli per GPU, GPU count, GPU models).
    type Key = (u64, u32, u8, String);
    let mut counts: std::collections::HashMap<Key, (Shape, u64)> = std::collections::HashMap::new();
    for shape in shapes {
        let key = (shape.cpu, shape.per_gpu, shape.gpus, shape.models.join("|"));
        counts.entry(key).or_insert_with(|| (Shape { mem: 0, ..shape.clone() }, 0)).1 += 1;
    }
    let total: u64 = counts.values().map(|(_, c)| c).sum();
    let mut ranked: Vec<(Key, (Shape, u64))> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| b.0.cmp(&a.0)));
    let mut kept = Vec::new();
    let mut covered = 0u64;
    for (_, (shape, count)) in ranked {
        if covered as f64 >= 0.95 * total as f64 {
            break;
        }
        covered += count;
        kept.push((shape, count));
    }
    Workload { shapes: kept.into_iter().map(|(s, c)| (s, c as f64 / covered as f64)).collect() }
}

/// The integer FGD score of a move from F `before` to F `after`:
/// `int64(sigmoid((before − after)/1000) · 100)` (`fgd_score.go:72`,
/// `plugin_utils.go:75-77`), truncated toward zero; 50 where F is unchanged.
pub fn fgd_points(before: f64, after: f64) -> i64 {
    let sigmoid = 1.0 / (1.0 + (-((before - after) / 1000.0)).exp());
    (sigmoid * 100.0) as i64
}

/// FGD's score of `node` for `pod` and the GPUs it would take
/// (`calculateGpuShareFragExtendScore`, `fgd_score.go:62-85`): a share is
/// tried on every GPU with room, in index order, and takes the first with
/// the highest *integer* score; anything else takes the first fully free
/// GPUs (`AllocateExclusiveGpuId`, `resource.go:348-368`). The caller has
/// checked that the pod fits (the filter runs before scoring).
pub fn fgd_score(node: &NodeFree, pod: &Shape, mut frag: impl FnMut(&NodeFree) -> f64) -> (i64, Vec<usize>) {
    let before = frag(node);
    if pod.gpus == 1 && pod.per_gpu < MILLI {
        let mut best: Option<(i64, usize)> = None;
        for g in (0..node.gpus.len()).filter(|&g| node.gpus[g].free >= pod.per_gpu) {
            let points = fgd_points(before, frag(&node.after(pod, &[g])));
            if best.is_none_or(|(b, _)| points > b) {
                best = Some((points, g));
            }
        }
        return best.map_or((0, Vec::new()), |(points, g)| (points, vec![g]));
    }
    let gpus = exclusive_gpus(node, pod);
    (fgd_points(before, frag(&node.after(pod, &gpus))), gpus)
}

/// The first `pod.gpus` fully free GPUs by index (`resource.go:348-368`);
/// none for a pod that asks no GPU.
pub fn exclusive_gpus(node: &NodeFree, pod: &Shape) -> Vec<usize> {
    if pod.per_gpu == 0 {
        return Vec::new();
    }
    (0..node.gpus.len()).filter(|&g| node.gpus[g].free >= pod.per_gpu && node.gpus[g].free == node.gpus[g].capacity).take(usize::from(pod.gpus)).collect()
}

/// The GPU the `best` method binds (`allocateGpuIdBasedOnBestFit`,
/// `open_gpu_share.go:268-286`): for a share, the GPU with the least left
/// that holds it, the lowest index among equals; else the exclusive GPUs.
pub fn best_gpus(node: &NodeFree, pod: &Shape) -> Vec<usize> {
    if pod.per_gpu >= MILLI || pod.gpus != 1 {
        return exclusive_gpus(node, pod);
    }
    let mut best: Option<usize> = None;
    for g in (0..node.gpus.len()).filter(|&g| node.gpus[g].free >= pod.per_gpu) {
        if best.is_none_or(|b| node.gpus[g].free < node.gpus[b].free) {
            best = Some(g);
        }
    }
    best.into_iter().collect()
}

/// The GPU the `random` method binds (`open_gpu_share.go:308-326`): one
/// drawn by reservoir among those that hold the share; else the exclusive GPUs.
pub fn random_gpus(node: &NodeFree, pod: &Shape, rng: &mut ChaCha8Rng) -> Vec<usize> {
    if pod.per_gpu >= MILLI || pod.gpus != 1 {
        return exclusive_gpus(node, pod);
    }
    let mut chosen = None;
    for (seen, g) in (1u32..).zip((0..node.gpus.len()).filter(|&g| node.gpus[g].free >= pod.per_gpu)) {
        if rng.random_range(0..seen) == 0 {
            chosen = Some(g);
        }
    }
    chosen.into_iter().collect()
}

/// Dot-product (Tetris) with the experiments' `merge` dimensions and `max`
/// normalisation (`dot_product_score.go:64-100`, `utils.go:1259-1327`): the
/// node's free (CPU, all GPU milli) and the pod's ask, each over the
/// largest node, averaged over the two; the larger the product, the lower
/// the score.
pub fn dot_product_score(node: &NodeFree, pod: &Shape) -> i64 {
    let free = [node.cpu as f64 / MAX_SPEC_CPU, node.free_units() as f64 / MAX_SPEC_GPU];
    let ask = [pod.cpu as f64 / MAX_SPEC_CPU, pod.units() as f64 / MAX_SPEC_GPU];
    let dot = (free[0] * ask[0] + free[1] * ask[1]) / 2.0;
    (100.0 * (1.0 - dot)) as i64
}

/// GPU packing (`getPackingScore`, `gpu_packing_score.go:36-39,71-117`):
/// a pod that asks no GPU scores 0 everywhere; on a node with every GPU
/// free, `max(33 − free GPUs, free GPUs)`; where it must use a fully free
/// GPU of a used node, `max(50 − such GPUs, 33)`; on shared GPUs only,
/// `max(100 − Σ⌊left·100/1000⌋/10, 50)` over the GPUs it takes (the least
/// left first).
pub fn packing_score(node: &NodeFree, pod: &Shape) -> i64 {
    if pod.gpus == 0 || pod.per_gpu == 0 {
        return 0;
    }
    let fully_free = node.gpus.iter().filter(|g| g.free == g.capacity).count() as i64;
    if fully_free == node.gpus.len() as i64 {
        return (100 / 3 - fully_free).max(fully_free);
    }
    let mut order: Vec<usize> = (0..node.gpus.len()).collect();
    order.sort_by_key(|&g| node.gpus[g].free);
    let used: Vec<usize> = order.into_iter().filter(|&g| node.gpus[g].free >= pod.per_gpu).take(usize::from(pod.gpus)).collect();
    let whole_used = used.iter().filter(|&&g| node.gpus[g].free == node.gpus[g].capacity).count() as i64;
    if whole_used > 0 {
        return (50 - whole_used).max(33);
    }
    let left_pct: i64 = used.iter().map(|&g| i64::from(node.gpus[g].free) * 100 / i64::from(MILLI)).sum();
    (100 - left_pct / 10).max(50)
}

/// Best fit (`getBestFitScore`, `best_fit_score.go:66-97`): the least CPU
/// and GPU milli left, each over the largest node, weighted half each. Its
/// min–max normalisation (`plugin_utils.go:47-73`) keeps the order and the
/// ties of these integer scores, so it is left out.
pub fn best_fit_score(node: &NodeFree, pod: &Shape) -> i64 {
    let left = 0.5 * (node.cpu - pod.cpu) as f64 / MAX_SPEC_CPU + 0.5 * (node.free_units() - pod.units()) as f64 / MAX_SPEC_GPU;
    ((1.0 - left) * 100.0) as i64
}

/// The node tie-break: the patched kube-scheduler's `selectHost` keeps the
/// smallest node name among equal scores (`mental2008/kubernetes`
/// v1.20.5-minor, `generic_scheduler.go`), and the simulator prefixes each
/// node's name with its place in a random permutation drawn per run
/// (`simulator.go:478-485`). The rank of each node: the lower wins a tie.
pub fn node_ranks(nodes: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
    let mut ranks: Vec<u32> = (0..nodes as u32).collect();
    ranks.shuffle(rng);
    ranks
}

/// The arrival order (`core.go:96-130`): the list by name, shuffled
/// (`SortClusterPods`, `simulator.go:843-852`), then copies drawn at random
/// from the list appended until the next would pass 130% of the GPUs
/// (`tuneUpPods`, `simulator.go:1121-1139`, which compares the per-GPU ask,
/// not the pod's total: kept); a list already above it loses random pods
/// instead (`tuneDownPods`, `:1105-1119`). Indices into `names`/`shapes`.
pub fn arrivals(names: &[String], shapes: &[Shape], capacity: u64, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut by_name: Vec<usize> = (0..shapes.len()).collect();
    by_name.sort_by(|&a, &b| names[a].cmp(&names[b]));
    let mut order = by_name.clone();
    order.shuffle(rng);
    let target = capacity as f64 * 1.3;
    let mut total: u64 = order.iter().map(|&i| shapes[i].units()).sum();
    if (total as f64) > target {
        while total as f64 > target && !order.is_empty() {
            let gone = order.remove(rng.random_range(0..order.len()));
            total -= shapes[gone].units();
        }
        return order;
    }
    while !by_name.is_empty() {
        let copy = by_name[rng.random_range(0..by_name.len())];
        if (total + u64::from(shapes[copy].per_gpu)) as f64 > target {
            break;
        }
        total += shapes[copy].units();
        order.push(copy);
    }
    order
}

/// The published allocation measure (`merge_alloc_discrete.py:96-120`):
/// after every pod tried, the arrived and the allocated GPU as % of all
/// GPUs; the figure at k% is the mean allocation over the pods whose
/// arrived demand rounds (half to even) to k, or within k ± 1 if none does.
/// (On a cluster so small that no pod lands that near, the last line
/// before it: the reference would print no figure.)
#[derive(Clone, Debug)]
pub struct Columns {
    sums: Vec<f64>,
    counts: Vec<u32>,
    last: Vec<f64>,
}

impl Default for Columns {
    fn default() -> Self {
        Columns { sums: vec![0.0; 132], counts: vec![0; 132], last: vec![0.0; 132] }
    }
}

impl Columns {
    /// One `[Alloc]` line: `arrived` and `allocated` milli of `capacity` milli.
    pub fn record(&mut self, arrived: u64, allocated: u64, capacity: u64) {
        let arrive_pct = (arrived as f64 / capacity as f64 * 100.0).round_ties_even();
        let alloc_pct = (allocated as f64 / capacity as f64 * 100.0 * 100.0).round_ties_even() / 100.0;
        let k = arrive_pct as usize;
        if k < self.sums.len() {
            self.sums[k] += alloc_pct;
            self.counts[k] += 1;
            self.last[k] = alloc_pct;
        }
    }

    /// The allocation at `pct`% arrived, as a fraction (0 if nothing arrived near it).
    pub fn at(&self, pct: usize) -> f64 {
        let mean = |range: std::ops::RangeInclusive<usize>| {
            let (sum, count) = range.filter(|k| *k < self.sums.len()).fold((0.0, 0u32), |(s, c), k| (s + self.sums[k], c + self.counts[k]));
            (count > 0).then(|| sum / f64::from(count))
        };
        let near = mean(pct.saturating_sub(1)..=pct + 1);
        let before = || (0..pct.min(self.sums.len())).rev().find(|k| self.counts[*k] > 0).map(|k| self.last[k]);
        mean(pct..=pct).or(near).or_else(before).map_or(0.0, |p| (p * 100.0).round_ties_even() / 100.0 / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::frag_gradient::GpuFree;
    use rand::SeedableRng;

    fn node(cpu: u64, gpus: &[u32]) -> NodeFree {
        NodeFree { model: "V100M16".into(), cpu, mem: 1 << 20, gpus: gpus.iter().map(|&f| GpuFree { free: f, largest: f, capacity: 1000 }).collect() }
    }

    fn pod(gpus: u8, per_gpu: u32, cpu: u64) -> Shape {
        Shape { gpus, per_gpu, whole: per_gpu == 1000, cpu, mem: 0, models: Vec::new() }
    }

    #[test]
    fn a_pod_that_asks_no_gpu_counts_all_free_gpu_as_fragments() {
        // frag.go:556-563: XL (the CPU fits) and XR both leave every idle milli a fragment.
        let cpu_only = pod(0, 0, 4000);
        assert_eq!(fragmentation_for(&node(64_000, &[1000, 700, 0]), &cpu_only), 1700);
        assert_eq!(fragmentation_for(&node(1_000, &[1000, 700, 0]), &cpu_only), 1700);
        // The room's own measure counts it only where the CPU is lacking.
        assert_eq!(node(64_000, &[1000, 700, 0]).fragmentation_for(&cpu_only), 0);
    }

    #[test]
    fn fragmentation_for_gpu_pods_follows_the_four_quadrants() {
        let n = node(8000, &[1000, 300, 600, 0]);
        assert_eq!(fragmentation_for(&n, &pod(1, 500, 1000)), 300, "Q3: only the GPU too small");
        assert_eq!(fragmentation_for(&n, &pod(1, 1000, 1000)), 900, "Q3 for a whole GPU: every partly used GPU");
        assert_eq!(fragmentation_for(&n, &pod(2, 1000, 1000)), 1900, "Q2: too few GPUs, all idle");
        assert_eq!(fragmentation_for(&n, &pod(1, 500, 9000)), 1900, "Q4: the CPU lacks, all idle");
        let mut t4 = pod(1, 500, 1000);
        t4.models = vec!["T4".into()];
        assert_eq!(fragmentation_for(&n, &t4), 1900, "NoAccess: another GPU model");
    }

    #[test]
    fn a_share_takes_the_first_gpu_with_the_highest_integer_score() {
        // Two GPUs in the same state score the same: the lower index wins.
        let n = node(32_000, &[600, 600, 1000]);
        let m = Workload { shapes: vec![(pod(1, 500, 1000), 0.5), (pod(1, 1000, 1000), 0.5)] };
        let (_, gpus) = fgd_score(&n, &pod(1, 500, 1000), |x| fragmentation(x, &m));
        assert_eq!(gpus, vec![0]);
        // A whole-GPU pod takes the first fully free GPUs by index.
        let n = node(32_000, &[1000, 400, 1000, 1000]);
        assert_eq!(fgd_score(&n, &pod(2, 1000, 1000), |x| fragmentation(x, &m)).1, vec![0, 2]);
        assert_eq!(fgd_points(100.0, 100.0), 50);
        assert_eq!(fgd_points(0.0, 8000.0), 0);
    }

    #[test]
    fn best_and_random_gpu_choice_within_a_node() {
        let n = node(32_000, &[1000, 400, 300, 300]);
        assert_eq!(best_gpus(&n, &pod(1, 250, 1000)), vec![2], "the least left that holds it, the lower index among equals");
        assert_eq!(best_gpus(&n, &pod(1, 350, 1000)), vec![1]);
        assert_eq!(best_gpus(&n, &pod(1, 1000, 1000)), vec![0]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let drawn: std::collections::BTreeSet<usize> = (0..64).flat_map(|_| random_gpus(&n, &pod(1, 250, 1000), &mut rng)).collect();
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_baselines_scores_on_hand_built_nodes() {
        let empty8 = node(96_000, &[1000; 8]);
        assert_eq!(packing_score(&empty8, &pod(1, 1000, 1000)), 25);
        assert_eq!(packing_score(&node(96_000, &[1000, 1000]), &pod(1, 500, 1000)), 31);
        let used = node(96_000, &[1000, 400, 1000]);
        assert_eq!(packing_score(&used, &pod(1, 300, 1000)), 96, "shared GPU with 400 left: 100 − 40/10");
        assert_eq!(packing_score(&used, &pod(1, 500, 1000)), 49, "one fully free GPU of a used node");
        assert_eq!(packing_score(&used, &pod(0, 0, 1000)), 0);
        // Best fit: (1 − ½·(96000−1000)/128000 − ½·(2400−1000)/8000)·100 = 54.14…
        assert_eq!(best_fit_score(&used, &pod(1, 1000, 1000)), 54);
        // Dot-product: (96000·1000/128000² + 2400·1000/8000²)/2 = 0.02168; 100·(1 − that).
        assert_eq!(dot_product_score(&used, &pod(1, 1000, 1000)), 97);
    }

    #[test]
    fn typical_pods_rank_equal_counts_by_the_larger_key_and_stop_at_95_percent() {
        let mut shapes = vec![pod(1, 500, 2000); 50];
        shapes.extend(vec![pod(1, 1000, 4000); 25]);
        shapes.extend(vec![pod(1, 1000, 8000); 19]);
        shapes.extend(vec![pod(0, 0, 2000); 4]);
        shapes.extend(vec![pod(2, 1000, 8000); 2]);
        let m = typical_pods(&shapes);
        // 50+25+19 = 94% < 95%: the CPU-only shape that crosses the line is in, the 2-GPU one is not.
        assert_eq!(m.shapes.len(), 4);
        assert_eq!(m.shapes[3].0.gpus, 0);
        assert!((m.shapes[0].1 - 50.0 / 98.0).abs() < 1e-12, "weights renormalised over what is kept");
        let five: Vec<Shape> = [pod(1, 100, 1000), pod(1, 200, 1000)].into_iter().cycle().take(4).chain([pod(1, 300, 1000)]).collect();
        let m = typical_pods(&five);
        assert_eq!(m.shapes[0].0.per_gpu, 200, "equal counts: the larger key first");
    }

    #[test]
    fn arrivals_shuffle_the_list_then_append_copies_up_to_130_percent() {
        let shapes: Vec<Shape> = (0..100).map(|i| pod(1, if i % 2 == 0 { 1000 } else { 500 }, 1000)).collect();
        let names: Vec<String> = (0..100).map(|i| format!("openb-pod-{i:04}")).collect();
        let capacity = 100 * 1000;
        let order = arrivals(&names, &shapes, capacity, &mut ChaCha8Rng::seed_from_u64(3));
        let mut head = order[..100].to_vec();
        head.sort_unstable();
        assert_eq!(head, (0..100).collect::<Vec<_>>(), "every pod of the list once, first");
        let total: u64 = order.iter().map(|&i| shapes[i].units()).sum();
        assert!(total as f64 <= capacity as f64 * 1.3 && total as f64 > capacity as f64 * 1.3 - 1000.0, "{total}");
        // A list above 130% loses pods instead.
        let big: Vec<Shape> = vec![pod(1, 1000, 1000); 200];
        let order = arrivals(&names.iter().cycle().take(200).cloned().collect::<Vec<_>>(), &big, capacity, &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(order.len(), 130);
    }

    #[test]
    fn columns_average_every_line_whose_arrival_rounds_to_the_column() {
        let mut c = Columns::default();
        c.record(1296, 900, 1000);
        c.record(1300, 910, 1000);
        c.record(1304, 920, 1000);
        c.record(1306, 990, 1000);
        assert!((c.at(130) - 0.91).abs() < 1e-12, "{}", c.at(130));
        assert_eq!(c.at(50), 0.0, "nothing arrived yet");
        assert!((c.at(140) - 0.99).abs() < 1e-12, "past the last line: the last line");
    }
}
