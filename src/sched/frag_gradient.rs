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
        if shape.whole { self.is_untouched() && self.capacity >= shape.per_gpu } else { self.largest >= shape.per_gpu }
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

    /// Where on this node `shape` grows F_n(M) least: the GPUs to use and
    /// the growth, or `None` if it does not fit.
    pub fn least_growth(&self, shape: &Shape, workload: &Workload) -> Option<(f64, Vec<usize>)> {
        self.least_growth_by(shape, |n| n.fragmentation(workload))
    }

    /// `least_growth` with F_n(M) computed by `frag` (a memo, say). A
    /// one-GPU share tries each distinct GPU state; a whole-GPU or
    /// multi-GPU job takes the tightest GPUs that host it (those are
    /// interchangeable for the measure).
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
/// Measured on the Alibaba trace's `default` pods (`gpuroom bench
/// placement`, 6 seeds): 0 gives 94.7% allocation at 130% demand, 0.03 to
/// 0.05 give 95.6% (and 94.2% on `gpushare40`, where 0.05 is the better);
/// applied to shares too it helps less (95.1%), and 0.15 over-packs (95.3%).
pub const WHOLE_GPU_PACKING: f64 = 0.05;

/// The first element of a placement's rank: the growth of F, plus for a
/// whole-GPU job a small price on the free units it leaves on the node. A
/// share leaves a remainder on its GPU and F prices exactly that; a whole
/// GPU leaves none, so among nodes its growth barely tells apart the
/// fuller one wins, and emptier nodes stay whole for multi-GPU jobs.
pub fn rank_key(growth: f64, left: u64, shape: &Shape) -> f64 {
    if shape.whole { growth + WHOLE_GPU_PACKING * left as f64 } else { growth }
}

/// Whether placement rank `a` beats `b`: (`rank_key`, free units left on
/// the node, position). The least key wins; among equal keys the node
/// left fullest, then the first.
pub fn better(a: (f64, u64, usize), b: (f64, u64, usize)) -> bool {
    if (a.0 - b.0).abs() > GROWTH_TOLERANCE {
        return a.0 < b.0;
    }
    (a.1, a.2) < (b.1, b.2)
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
        let mut counts: BTreeMap<&Shape, u64> = BTreeMap::new();
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

/// A room job's shape: MiB per GPU, whole GPUs if exclusive.
pub fn shape_of_spec(spec: &JobSpec) -> Shape {
    Shape { gpus: spec.gpus, per_gpu: spec.gpu_mem.0, whole: spec.exclusive, cpu: u64::from(spec.cpus), mem: u64::from(spec.host_mem.0), models: Vec::new() }
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
        let (growth, gpus) = n.least_growth(&share(500, 0), &m).unwrap();
        assert_eq!(gpus, vec![0], "filling GPU 0 keeps the whole GPU free");
        // Before: F = 0.5·0 + 0.5·500 = 250; after: F = 0 (GPU 1 whole, serves both).
        assert!((growth + 250.0).abs() < 1e-9);
        assert_eq!(n.least_growth(&whole(2), &m), None);
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
}
