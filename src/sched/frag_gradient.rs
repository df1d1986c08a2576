//! Expected fragmentation of a node for a target workload, and placement by
//! its gradient (Weng et al., "Beware of Fragmentation", ATC'23: FGD).
//!
//! A workload M is the set of typical job shapes with their frequencies p_m
//! (the most common shapes that together cover ≥ 95% of jobs). For one shape
//! m, a node's fragmentation F_n(m) is the free GPU capacity that m cannot
//! use there: if m fits on the node, the free capacity on GPUs too small for
//! its per-GPU ask; if m does not fit at all (CPU, host memory, GPU count,
//! GPU model), all of the node's free GPU capacity. F_n(M) = Σ p_m F_n(m).
//! Placement by gradient puts a job where F_n(M) grows least.
//!
//! Capacity is in "units" that the caller chooses: thousandths of a GPU for
//! the Alibaba trace, MiB of GPU memory in the room. Pure functions over
//! plain data; no IO, no `Room`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::cluster::Node;
use crate::domain::job::JobSpec;

/// The free capacity of one GPU, in units.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuFree {
    /// All free units on the GPU.
    pub free: u32,
    /// The largest contiguous free block (equal to `free` where capacity is
    /// fungible, as with Alibaba's milli-GPUs).
    pub largest: u32,
    pub capacity: u32,
}

impl GpuFree {
    pub fn whole(capacity: u32) -> GpuFree {
        GpuFree { free: capacity, largest: capacity, capacity }
    }

    fn is_untouched(&self) -> bool {
        self.free == self.capacity
    }

    /// Whether one GPU's worth of `shape` fits here.
    pub fn hosts(&self, shape: &Shape) -> bool {
        self.hosting_threshold(shape.whole).is_some_and(|most| most >= shape.per_gpu)
    }

    /// The largest per-GPU ask this GPU hosts, whole or shared (`None`:
    /// none; a whole GPU must be untouched).
    pub fn hosting_threshold(&self, whole: bool) -> Option<u32> {
        if whole { self.is_untouched().then_some(self.capacity) } else { Some(self.largest) }
    }

    /// This GPU after one GPU's worth of `shape` is placed on it.
    fn minus(&self, shape: &Shape) -> GpuFree {
        if shape.whole {
            return GpuFree { free: 0, largest: 0, capacity: self.capacity };
        }
        GpuFree { free: self.free - shape.per_gpu, largest: self.largest - shape.per_gpu, capacity: self.capacity }
    }
}

/// What a node has free: CPUs and host memory (in the caller's units) and
/// each GPU's free capacity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeFree {
    pub model: String,
    pub cpu: u64,
    pub mem: u64,
    pub gpus: Vec<GpuFree>,
}

impl NodeFree {
    pub fn free_units(&self) -> u64 {
        self.gpus.iter().map(|g| u64::from(g.free)).sum()
    }

    pub fn capacity_units(&self) -> u64 {
        self.gpus.iter().map(|g| u64::from(g.capacity)).sum()
    }

    fn takes_host_share(&self, shape: &Shape) -> bool {
        shape.cpu <= self.cpu && shape.mem <= self.mem
    }

    /// Whether `shape` may run on this node's GPU model at all.
    pub fn model_allows(&self, shape: &Shape) -> bool {
        shape.models.is_empty() || shape.models.iter().any(|m| m == &self.model)
    }

    /// Whether `shape` fits on this node now.
    pub fn fits(&self, shape: &Shape) -> bool {
        if !self.model_allows(shape) || !self.takes_host_share(shape) {
            return false;
        }
        shape.gpus == 0 || self.gpus.iter().filter(|g| g.hosts(shape)).count() >= usize::from(shape.gpus)
    }

    /// F_n(m): the free GPU units that `shape` cannot use on this node.
    pub fn fragmentation_for(&self, shape: &Shape) -> u64 {
        if !self.fits(shape) {
            return self.free_units();
        }
        self.gpus.iter().filter(|g| !g.hosts(shape)).map(|g| u64::from(g.free)).sum()
    }

    /// F_n(M) = Σ p_m F_n(m).
    pub fn fragmentation(&self, workload: &Workload) -> f64 {
        workload.shapes.iter().map(|(shape, p)| p * self.fragmentation_for(shape) as f64).sum()
    }

    /// The node after `shape` takes the GPUs `gpus` (and its host share).
    pub fn after(&self, shape: &Shape, gpus: &[usize]) -> NodeFree {
        let mut next = self.clone();
        next.cpu -= shape.cpu;
        next.mem -= shape.mem;
        for &g in gpus {
            next.gpus[g] = next.gpus[g].minus(shape);
        }
        next
    }

    /// Where on this node `shape` grows F_n(M) least, with F_n(M)
    /// computed by `frag` (a memo, say): the growth and the GPUs to use, or
    /// `None` if it does not fit. A one-GPU share tries each distinct GPU
    /// state; a whole-GPU or multi-GPU job takes the tightest GPUs that host
    /// it (those are interchangeable for the measure).
    pub fn least_growth_by(&self, shape: &Shape, mut frag: impl FnMut(&NodeFree) -> f64) -> Option<(f64, Vec<usize>)> {
        if !self.fits(shape) {
            return None;
        }
        let before = frag(self);
        if shape.gpus == 1 && !shape.whole {
            let mut best: Option<(f64, Vec<usize>)> = None;
            let mut tried: Vec<GpuFree> = Vec::new();
            for g in (0..self.gpus.len()).filter(|&g| self.gpus[g].hosts(shape)) {
                if tried.contains(&self.gpus[g]) {
                    continue;
                }
                tried.push(self.gpus[g]);
                let growth = frag(&self.after(shape, &[g])) - before;
                // Equal growth: the tighter GPU (best fit within the node).
                let wins = best.as_ref().is_none_or(|(b, chosen)| {
                    growth < *b - GROWTH_TOLERANCE || (growth <= *b + GROWTH_TOLERANCE && self.gpus[g].free < self.gpus[chosen[0]].free)
                });
                if wins {
                    best = Some((growth, vec![g]));
                }
            }
            return best;
        }
        let gpus = whole_gpus_for(self, shape)?;
        Some((frag(&self.after(shape, &gpus)) - before, gpus))
    }
}

/// Growths closer than this are equal (sums of float products).
pub const GROWTH_TOLERANCE: f64 = 1e-6;

/// The GPUs a whole-GPU or multi-GPU job takes on `node`: the tightest of
/// those that host it, or `None` if too few do.
pub fn whole_gpus_for(node: &NodeFree, shape: &Shape) -> Option<Vec<usize>> {
    let mut hosts: Vec<usize> = (0..node.gpus.len()).filter(|&g| node.gpus[g].hosts(shape)).collect();
    if hosts.len() < usize::from(shape.gpus) {
        return None;
    }
    hosts.sort_by_key(|&g| (node.gpus[g].largest, node.gpus[g].capacity, g));
    hosts.truncate(usize::from(shape.gpus));
    Some(hosts)
}

/// How much a whole-GPU job prefers a fuller node, per free unit left
/// there, against growth of F (both in units, so the weight has none).
/// Measured on the Alibaba trace's `default` and `gpushare40` pods under
/// the reference's protocol (`gpuroom bench placement`): 0.02 and 0.05 tie
/// there (255/341 and 256/342 GPUs unallocated at 130%), 0 is worse
/// (266/347); the smaller one lets the pressure on GPU models speak.
pub const WHOLE_GPU_PACKING: f64 = 0.02;

/// What a unit of GPU the node's CPUs can no longer serve costs a share,
/// in units of expected fragmentation: one (the same stranded unit,
/// counted the same). On `default`/`gpushare40` 0.3 to 3 all give
/// 249–258/336–344 GPUs unallocated at 130%, against 265–276/354–356
/// without it.
pub const CPU_DEFICIT_WEIGHT: f64 = 1.0;

/// What a unit placed on the most pressed GPU model costs, in units of
/// expected fragmentation: one. It is 0 wherever no typical shape is bound
/// to a model (so `default` and `gpushare40` could not tune it).
pub const MODEL_PRESSURE_WEIGHT: f64 = 1.0;

/// The first element of a placement's rank: the growth of F, plus for a
/// whole-GPU job a small price on the free units it leaves on the node. A
/// share leaves a remainder on its GPU and F prices exactly that; a whole
/// GPU leaves none, so among nodes its growth barely tells apart the
/// fuller one wins, and emptier nodes stay whole for multi-GPU jobs.
pub fn rank_key(growth: f64, left: u64, shape: &Shape) -> f64 {
    if shape.whole { growth + WHOLE_GPU_PACKING * left as f64 } else { growth }
}

/// The GPU units a node's CPUs cannot serve at the workload's CPU per unit.
pub fn cpu_deficit(node: &NodeFree, cpu_per_unit: f64) -> f64 {
    if cpu_per_unit <= 0.0 {
        return 0.0;
    }
    (node.free_units() as f64 - node.cpu as f64 / cpu_per_unit).max(0.0)
}

/// A node's place in the policy's order for one job (lower is better):
/// `rank_key` in hundredths of a unit (growths closer than that are
/// equal: they are sums of float products), then the free units left on
/// the node (the fullest first). The room puts its price tier before it
/// and the node's id after; the bench, the node's rank.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    pub cost: i64,
    pub left: u64,
}

/// The policy for one pass over the nodes: the workload M, the CPU its
/// GPU shapes ask per unit, and the pressure its model-bound shapes put on
/// each GPU model. A node's cost for a job is the growth of F_n(M), plus
/// for a share `CPU_DEFICIT_WEIGHT` × the growth of the units its CPUs
/// cannot serve (CPU-rich nodes take CPU-heavy shares, and a node's GPUs
/// are not left without CPUs), plus `MODEL_PRESSURE_WEIGHT` × the units placed × the
/// pressure on its model (work that may run anywhere goes where
/// model-bound work needs it least), plus `rank_key`'s packing price.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weigher {
    pub workload: Workload,
    cpu_per_unit: f64,
    pressure: ModelPressure,
}

impl Weigher {
    /// The policy for `workload` on `nodes` (their GPU models' capacity).
    pub fn new<'n>(workload: Workload, nodes: impl Iterator<Item = &'n NodeFree>) -> Weigher {
        let pressure = ModelPressure::of(&workload, nodes);
        Weigher { cpu_per_unit: workload.cpu_per_unit(), pressure, workload }
    }

    /// Where on `node` the job goes and its rank there (`None` if it does
    /// not fit); `frag` is F_n(M) (a memo, say).
    pub fn rank_on(&self, node: &NodeFree, shape: &Shape, frag: impl FnMut(&NodeFree) -> f64) -> Option<(Rank, Vec<usize>)> {
        let (growth, gpus) = node.least_growth_by(shape, frag)?;
        // A whole GPU leaves no remainder for the CPUs to strand; weighed
        // for it too, CPU balance broke up the empty 8-GPU nodes multi-GPU
        // work needs (`multigpu50`: 1 point less than FGD at 90% demand).
        let stranded = if shape.whole { 0.0 } else { cpu_deficit(&node.after(shape, &gpus), self.cpu_per_unit) - cpu_deficit(node, self.cpu_per_unit) };
        let pressed = shape.units() as f64 * self.pressure.on(&node.model);
        let cost = growth + CPU_DEFICIT_WEIGHT * stranded + MODEL_PRESSURE_WEIGHT * pressed;
        let left = node.free_units() - shape.units();
        Some((Rank { cost: (rank_key(cost, left, shape) * 100.0).round() as i64, left }, gpus))
    }

    /// The policy over plain nodes, each given as (tie rank, index, node):
    /// the least `Rank`, then the least tie rank. Returns the index and the GPUs.
    pub fn choose<'n>(
        &self,
        nodes: impl Iterator<Item = (u32, usize, &'n NodeFree)>,
        shape: &Shape,
        mut frag: impl FnMut(&NodeFree) -> f64,
    ) -> Option<(usize, Vec<usize>)> {
        let mut best: Option<((Rank, u32), usize, Vec<usize>)> = None;
        for (tie, i, node) in nodes {
            let Some((rank, gpus)) = self.rank_on(node, shape, &mut frag) else { continue };
            if best.as_ref().is_none_or(|(b, _, _)| (rank, tie) < *b) {
                best = Some(((rank, tie), i, gpus));
            }
        }
        best.map(|(_, i, gpus)| (i, gpus))
    }
}

/// How hard the typical shapes bound to GPU models press on each model:
/// each such shape's ask spread over the models it may use in proportion
/// to their capacity, over each model's capacity, scaled so that the most
/// pressed model is 1 (a workload without model bounds presses on none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelPressure(Vec<(String, f64)>);

impl ModelPressure {
    pub fn of<'n>(workload: &Workload, nodes: impl Iterator<Item = &'n NodeFree>) -> ModelPressure {
        if !workload.model_bound() {
            return ModelPressure::default();
        }
        let mut capacity: BTreeMap<&str, f64> = BTreeMap::new();
        for node in nodes {
            *capacity.entry(node.model.as_str()).or_default() += node.capacity_units() as f64;
        }
        let mut pressed: BTreeMap<&str, f64> = BTreeMap::new();
        for (shape, p) in workload.shapes.iter().filter(|(s, _)| !s.models.is_empty()) {
            let usable: f64 = capacity.iter().filter(|(m, _)| shape.models.iter().any(|x| x == *m)).map(|(_, c)| c).sum();
            if usable <= 0.0 {
                continue;
            }
            for (model, _) in capacity.iter().filter(|(m, _)| shape.models.iter().any(|x| x == *m)) {
                *pressed.entry(model).or_default() += p * shape.units() as f64 / usable;
            }
        }
        let most = pressed.values().copied().fold(0.0, f64::max);
        if most <= 0.0 {
            return ModelPressure::default();
        }
        ModelPressure(pressed.into_iter().map(|(m, v)| (m.to_string(), v / most)).collect())
    }

    /// The pressure on `model`, 0 to 1.
    pub fn on(&self, model: &str) -> f64 {
        self.0.iter().find(|(m, _)| m == model).map_or(0.0, |(_, v)| *v)
    }
}

/// The typical shapes of a list of shapes as the room keys them (`workload_of`):
/// jobs that ask no GPU left out, host memory left out as the paper
/// leaves it out. (Kept in, the CPU-only pods of the trace's `cpu*` lists
/// made the policy hoard CPUs for them: 0.2–0.5 points below FGD there.)
pub fn typical_of(shapes: &[Shape]) -> Workload {
    let keyed: Vec<Shape> = shapes.iter().filter(|s| s.gpus > 0).map(|s| Shape { mem: 0, ..s.clone() }).collect();
    Workload::typical(keyed.iter())
}

/// A job shape: GPUs on one node, units per GPU, whether each GPU is taken
/// whole, the host share, and the GPU models it may use (empty: any).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shape {
    pub gpus: u8,
    pub per_gpu: u32,
    pub whole: bool,
    pub cpu: u64,
    pub mem: u64,
    pub models: Vec<String>,
}

impl Shape {
    /// Units the shape asks in all.
    pub fn units(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.per_gpu)
    }
}

/// The target workload M: typical shapes with their frequencies (summing to 1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub shapes: Vec<(Shape, f64)>,
}

/// The share of jobs the typical shapes must cover.
pub const TYPICAL_COVERAGE: f64 = 0.95;

impl Workload {
    /// The most frequent shapes of `jobs` that together cover at least
    /// `TYPICAL_COVERAGE` of them, renormalised. Ties in frequency keep the
    /// shape order, so the result never depends on hash order.
    pub fn typical<'a>(jobs: impl IntoIterator<Item = &'a Shape>) -> Workload {
        // Hashed, then ranked by a full sort: the same result as an ordered
        // count, without 100,000 tree descents through whole shapes.
        let mut counts: std::collections::HashMap<&Shape, u64> = std::collections::HashMap::new();
        let mut total = 0u64;
        for shape in jobs {
            *counts.entry(shape).or_default() += 1;
            total += 1;
        }
        if total == 0 {
            return Workload::default();
        }
        let mut ranked: Vec<(&Shape, u64)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let mut kept = Vec::new();
        let mut covered = 0u64;
        for (shape, count) in ranked {
            if covered as f64 >= TYPICAL_COVERAGE * total as f64 {
                break;
            }
            covered += count;
            kept.push((shape.clone(), count));
        }
        Workload { shapes: kept.into_iter().map(|(s, c)| (s, c as f64 / covered as f64)).collect() }
    }

    /// Whether some typical shape may run only on some GPU models.
    pub fn model_bound(&self) -> bool {
        self.shapes.iter().any(|(s, _)| !s.models.is_empty())
    }

    /// The CPU the typical shapes ask per GPU unit they ask (0 if they ask no GPU).
    pub fn cpu_per_unit(&self) -> f64 {
        let (cpu, units) =
            self.shapes.iter().filter(|(s, _)| s.units() > 0).fold((0.0, 0.0), |(c, u), (s, p)| (c + p * s.cpu as f64, u + p * s.units() as f64));
        if units > 0.0 { cpu / units } else { 0.0 }
    }

    /// Shapes that fit on none of `nodes` now.
    pub fn unplaceable<'a>(&'a self, nodes: &[NodeFree]) -> Vec<&'a Shape> {
        self.shapes.iter().map(|(s, _)| s).filter(|s| !nodes.iter().any(|n| n.fits(s))).collect()
    }
}

/// A room node as the measure sees it: GPU memory in MiB (a GPU an
/// exclusive job holds has nothing free unless time-sharing lends its spare).
pub fn node_free(node: &Node, time_sharing: bool) -> NodeFree {
    let gpus = node
        .gpus
        .iter()
        .map(|g| {
            if g.has_exclusive() && !time_sharing {
                return GpuFree { free: 0, largest: 0, capacity: g.memory.0 };
            }
            let free: u32 = g.free_blocks().iter().map(|(_, size)| size.0).sum();
            GpuFree { free, largest: g.largest_free_block().0, capacity: g.memory.0 }
        })
        .collect();
    NodeFree { model: node.spec.gpu_model.clone(), cpu: u64::from(node.cpus_free()), mem: u64::from(node.host_mem_free().0), gpus }
}

/// A room job's shape: MiB per GPU, whole GPUs if exclusive, the GPU models it may use.
pub fn shape_of_spec(spec: &JobSpec) -> Shape {
    Shape {
        gpus: spec.gpus,
        per_gpu: spec.gpu_mem.0,
        whole: spec.exclusive,
        cpu: u64::from(spec.cpus),
        mem: u64::from(spec.host_mem.0),
        models: spec.gpu_models.clone(),
    }
}

/// The room's workload M: the typical shapes of `specs` (host memory left
/// out of the key, as the paper leaves it out).
pub fn workload_of<'a>(specs: impl Iterator<Item = &'a JobSpec>) -> Workload {
    let shapes: Vec<Shape> = specs.filter(|s| s.gpus > 0).map(|s| Shape { mem: 0, ..shape_of_spec(s) }).collect();
    Workload::typical(shapes.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpu: u64, gpus: &[u32]) -> NodeFree {
        NodeFree { model: "V100".into(), cpu, mem: 1 << 20, gpus: gpus.iter().map(|&f| GpuFree { free: f, largest: f, capacity: 1000 }).collect() }
    }

    fn share(per_gpu: u32, cpu: u64) -> Shape {
        Shape { gpus: 1, per_gpu, whole: per_gpu == 1000, cpu, mem: 0, models: Vec::new() }
    }

    fn whole(gpus: u8) -> Shape {
        Shape { gpus, per_gpu: 1000, whole: true, cpu: 4000, mem: 0, models: Vec::new() }
    }

    #[test]
    fn fragmentation_of_hand_computed_nodes() {
        // Free: 1000, 300, 600, 0 milli; 8 CPUs free.
        let n = node(8000, &[1000, 300, 600, 0]);
        // A 500-milli share fits: the 300 on GPU 1 is too small for it.
        assert_eq!(n.fragmentation_for(&share(500, 1000)), 300);
        // A whole GPU fits (GPU 0): GPUs 1 and 2's 900 milli cannot serve it.
        assert_eq!(n.fragmentation_for(&whole(1)), 900);
        // Two whole GPUs do not fit: all 1,900 free milli are fragments.
        assert_eq!(n.fragmentation_for(&whole(2)), 1900);
        // Too many CPUs asked: everything free is a fragment.
        assert_eq!(n.fragmentation_for(&share(100, 9000)), 1900);
        let m = Workload { shapes: vec![(share(500, 1000), 0.5), (whole(1), 0.3), (whole(2), 0.2)] };
        assert!((n.fragmentation(&m) - (0.5 * 300.0 + 0.3 * 900.0 + 0.2 * 1900.0)).abs() < 1e-9);
    }

    #[test]
    fn a_gpu_model_mismatch_makes_all_free_capacity_a_fragment() {
        let n = node(8000, &[1000, 1000]);
        let mut t4_only = share(200, 1000);
        t4_only.models = vec!["T4".into(), "P100".into()];
        assert!(!n.fits(&t4_only));
        assert_eq!(n.fragmentation_for(&t4_only), 2000);
        t4_only.models.push("V100".into());
        assert_eq!(n.fragmentation_for(&t4_only), 0);
    }

    #[test]
    fn a_cpu_only_pod_strands_gpus_only_when_it_cannot_fit() {
        let cpu_only = Shape { gpus: 0, per_gpu: 0, whole: false, cpu: 4000, mem: 0, models: Vec::new() };
        assert_eq!(node(8000, &[700, 1000]).fragmentation_for(&cpu_only), 0, "fits: no GPU is too small for a zero ask");
        assert_eq!(node(2000, &[700, 1000]).fragmentation_for(&cpu_only), 1700, "no CPUs left: the GPUs are stranded");
    }

    #[test]
    fn contiguous_blocks_bound_what_a_gpu_hosts_in_the_room() {
        // 8 GiB free in two 4 GiB holes: a 6 GiB share does not fit there.
        let gpu = GpuFree { free: 8192, largest: 4096, capacity: 16_384 };
        let n = NodeFree { model: "V100".into(), cpu: 8, mem: 1 << 20, gpus: vec![gpu] };
        let six = Shape { gpus: 1, per_gpu: 6144, whole: false, cpu: 1, mem: 0, models: Vec::new() };
        assert_eq!(n.fragmentation_for(&six), 8192);
    }

    #[test]
    fn least_growth_puts_a_share_where_it_leaves_usable_space() {
        // GPU 0 has 500 free, GPU 1 has 1000: workload is half 500-shares, half whole GPUs.
        let n = node(8000, &[500, 1000]);
        let m = Workload { shapes: vec![(share(500, 0), 0.5), (whole(1), 0.5)] };
        let (growth, gpus) = n.least_growth_by(&share(500, 0), |x| x.fragmentation(&m)).unwrap();
        assert_eq!(gpus, vec![0], "filling GPU 0 keeps the whole GPU free");
        // Before: F = 0.5·0 + 0.5·500 = 250; after: F = 0 (GPU 1 whole, serves both).
        assert!((growth + 250.0).abs() < 1e-9);
        assert_eq!(n.least_growth_by(&whole(2), |x| x.fragmentation(&m)), None);
    }

    #[test]
    fn typical_shapes_cover_95_percent_and_sum_to_one() {
        let a = share(500, 1000);
        let b = whole(1);
        let rare = whole(8);
        let jobs: Vec<&Shape> = std::iter::repeat_n(&a, 60).chain(std::iter::repeat_n(&b, 38)).chain(std::iter::repeat_n(&rare, 2)).collect();
        let m = Workload::typical(jobs);
        assert_eq!(m.shapes.len(), 2, "the 2% shape is left out");
        assert!((m.shapes.iter().map(|(_, p)| p).sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(m.shapes[0].0, a);
        assert_eq!(Workload::typical(Vec::<&Shape>::new()), Workload::default());
        let full = node(8000, &[1000]);
        assert_eq!(m.unplaceable(&[full]), Vec::<&Shape>::new());
        assert_eq!(m.unplaceable(&[node(8000, &[400])]).len(), 2);
    }

    #[test]
    fn a_cpu_heavy_share_goes_where_cpus_are_plenty() {
        // Two nodes of four free GPUs: one with 16 CPUs, one with 64. The
        // typical job is a half GPU with 2 CPUs; this one asks 14.
        let lean = node(16_000, &[1000; 4]);
        let rich = node(64_000, &[1000; 4]);
        let m = Workload { shapes: vec![(share(500, 2000), 1.0)] };
        let weigher = Weigher::new(m.clone(), [&lean, &rich].into_iter());
        let heavy = share(500, 14_000);
        let chosen = weigher.choose([(0, 0, &lean), (1, 1, &rich)].into_iter(), &heavy, |n| n.fragmentation(&m));
        assert_eq!(chosen.map(|(i, _)| i), Some(1), "on the lean node 3.5 GPUs would be left with 2 CPUs; F alone ties the two");
        assert_eq!(cpu_deficit(&lean.after(&heavy, &[0]), m.cpu_per_unit()), 3000.0);
        assert_eq!(cpu_deficit(&rich.after(&heavy, &[0]), m.cpu_per_unit()), 0.0);
    }

    #[test]
    fn model_pressure_spreads_each_bound_shape_over_the_capacity_it_may_use() {
        let mut t4 = node(64_000, &[1000; 2]);
        t4.model = "T4".into();
        let v100 = node(64_000, &[1000; 8]);
        let bound = Shape { models: vec!["T4".into()], ..share(500, 1000) };
        let both = Shape { models: vec!["T4".into(), "V100".into()], ..share(500, 1000) };
        let m = Workload { shapes: vec![(bound, 0.25), (both, 0.25), (whole(1), 0.5)] };
        let pressure = ModelPressure::of(&m, [&t4, &v100].into_iter());
        // T4: 0.25·500/2000 + 0.25·500/10000; V100: 0.25·500/10000; scaled to T4 = 1.
        assert_eq!(pressure.on("T4"), 1.0);
        assert!((pressure.on("V100") - 0.0125 / 0.075).abs() < 1e-12);
        assert_eq!(pressure.on("A10"), 0.0);
        assert_eq!(ModelPressure::of(&Workload { shapes: vec![(whole(1), 1.0)] }, [&t4].into_iter()), ModelPressure::default());
    }
}
