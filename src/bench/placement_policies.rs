//! The placement policies `gpuroom bench placement` compares, over the plain
//! node model of `sched::frag_gradient` (GPU capacity in thousandths of a
//! GPU, as in the Alibaba trace). The baselines follow the published
//! simulator's scoring (hkust-adsl/kubernetes-scheduler-simulator, read, not
//! copied): ties among the best score are broken at random, as
//! kube-scheduler does. The room's own policy (`Gradient`) is the one in
//! `sched::frag_gradient`, with its deterministic tie-break.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sched::frag_gradient::{self, GpuFree, NodeFree, Shape, Workload};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BenchPolicy {
    Random,
    FirstFit,
    BestFit,
    DotProduct,
    Packing,
    /// FGD as published: integer score ⌊100·σ(−ΔF/1000)⌋, random ties.
    Fgd,
    /// The room's policy: least exact growth of F, then the tightest node.
    Gradient,
}

impl BenchPolicy {
    pub const ALL: [BenchPolicy; 7] = [
        BenchPolicy::Random,
        BenchPolicy::DotProduct,
        BenchPolicy::Packing,
        BenchPolicy::BestFit,
        BenchPolicy::FirstFit,
        BenchPolicy::Fgd,
        BenchPolicy::Gradient,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BenchPolicy::Random => "random",
            BenchPolicy::FirstFit => "first fit",
            BenchPolicy::BestFit => "best fit",
            BenchPolicy::DotProduct => "dot-product",
            BenchPolicy::Packing => "packing",
            BenchPolicy::Fgd => "FGD scoring (our run)",
            BenchPolicy::Gradient => "gradient (gpuroom)",
        }
    }

    /// The figure the FGD repository publishes for this policy at 130%
    /// arrived demand, per pod list (`default`, `gpushare40`).
    pub fn published(self) -> Option<(f64, f64)> {
        match self {
            BenchPolicy::Random => Some((87.47, 86.00)),
            BenchPolicy::DotProduct => Some((90.85, 89.56)),
            BenchPolicy::Packing => Some((92.00, 90.03)),
            BenchPolicy::BestFit => Some((93.08, 91.69)),
            BenchPolicy::Fgd => Some((95.39, 94.15)),
            BenchPolicy::FirstFit | BenchPolicy::Gradient => None,
        }
    }
}

/// F_n(M) memoised by node state (the measure ignores GPU order and host
/// memory, which the typical shapes never ask).
#[derive(Default)]
pub struct FragMemo {
    seen: HashMap<(String, u64, Vec<GpuFree>), f64>,
}

impl FragMemo {
    pub fn of(&mut self, node: &NodeFree, workload: &Workload) -> f64 {
        let mut gpus = node.gpus.clone();
        gpus.sort_unstable();
        let key = (node.model.clone(), node.cpu, gpus);
        if let Some(f) = self.seen.get(&key) {
            return *f;
        }
        let f = node.fragmentation(workload);
        self.seen.insert(key, f);
        f
    }

    /// `NodeFree::least_growth` through the memo.
    fn least_growth(&mut self, node: &NodeFree, shape: &Shape, workload: &Workload) -> Option<(f64, Vec<usize>)> {
        node.least_growth_by(shape, |n| self.of(n, workload))
    }
}

fn hosting(node: &NodeFree, shape: &Shape) -> Vec<usize> {
    (0..node.gpus.len()).filter(|&g| node.gpus[g].hosts(shape)).collect()
}

/// The `n` hosting GPUs with the least free first (tightest).
fn tightest(node: &NodeFree, shape: &Shape) -> Vec<usize> {
    let mut gpus = hosting(node, shape);
    gpus.sort_by_key(|&g| (node.gpus[g].free, g));
    gpus.truncate(usize::from(shape.gpus));
    gpus
}

/// What the policies share for one run: the workload, the memo, the RNG,
/// and the largest node (best fit normalises by it).
pub struct Placer<'a> {
    pub policy: BenchPolicy,
    pub workload: &'a Workload,
    pub memo: FragMemo,
    pub rng: ChaCha8Rng,
    pub max_cpu: u64,
    pub max_gpus: u64,
}

impl<'a> Placer<'a> {
    /// A placer for `nodes` (sized by their largest), its ties drawn from `tie_seed`.
    pub fn new(policy: BenchPolicy, workload: &'a Workload, nodes: &[NodeFree], tie_seed: u64) -> Placer<'a> {
        Placer {
            policy,
            workload,
            memo: FragMemo::default(),
            rng: ChaCha8Rng::seed_from_u64(tie_seed),
            max_cpu: nodes.iter().map(|n| n.cpu).max().unwrap_or(1).max(1),
            max_gpus: nodes.iter().map(|n| n.gpus.len() as u64).max().unwrap_or(1).max(1),
        }
    }

    /// Where `shape` goes among `nodes`: the node and its GPUs.
    pub fn place(&mut self, nodes: &[NodeFree], shape: &Shape) -> Option<(usize, Vec<usize>)> {
        if self.policy == BenchPolicy::Gradient {
            return self.gradient(nodes, shape);
        }
        if self.policy == BenchPolicy::FirstFit {
            let n = nodes.iter().position(|n| n.fits(shape))?;
            let gpus = hosting(&nodes[n], shape).into_iter().take(usize::from(shape.gpus)).collect();
            return Some((n, gpus));
        }
        // Highest score wins; ties are drawn at random (reservoir).
        let mut best: Option<(i64, usize, Vec<usize>)> = None;
        let mut ties = 0u32;
        for (i, node) in nodes.iter().enumerate() {
            let Some((score, gpus)) = self.score(node, shape) else { continue };
            match &best {
                Some((b, _, _)) if score < *b => {}
                Some((b, _, _)) if score == *b => {
                    ties += 1;
                    if self.rng.random_range(0..ties) == 0 {
                        best = Some((score, i, gpus));
                    }
                }
                _ => {
                    ties = 1;
                    best = Some((score, i, gpus));
                }
            }
        }
        best.map(|(_, i, gpus)| (i, gpus))
    }

    /// The published scores (higher is better), with the GPUs each picks.
    fn score(&mut self, node: &NodeFree, shape: &Shape) -> Option<(i64, Vec<usize>)> {
        if !node.fits(shape) {
            return None;
        }
        let n = usize::from(shape.gpus);
        match self.policy {
            BenchPolicy::Random => {
                let mut gpus = hosting(node, shape);
                for i in 0..n.min(gpus.len()) {
                    let j = self.rng.random_range(i..gpus.len());
                    gpus.swap(i, j);
                }
                gpus.truncate(n);
                Some((0, gpus))
            }
            BenchPolicy::BestFit => {
                let cpu_left = (node.cpu - shape.cpu) as f64 / self.max_cpu as f64;
                let gpu_left = (node.free_units() - shape.units()) as f64 / (self.max_gpus * 1000) as f64;
                let score = (1.0 - 0.5 * cpu_left - 0.5 * gpu_left) * 100.0;
                Some((score as i64, tightest(node, shape)))
            }
            BenchPolicy::DotProduct => {
                // Tetris: the smaller the dot product of what is free and
                // what is asked (both as shares of the node), the better.
                let cpu_cap = node.cpu.max(1) as f64;
                let mut best: Option<(f64, Vec<usize>)> = None;
                let options: Vec<Vec<usize>> = if n == 1 { hosting(node, shape).into_iter().map(|g| vec![g]).collect() } else { vec![tightest(node, shape)] };
                for gpus in options {
                    let gpu_dot: f64 =
                        gpus.iter().map(|&g| f64::from(node.gpus[g].free) / 1000.0 * f64::from(shape.per_gpu) / 1000.0).sum::<f64>() / n.max(1) as f64;
                    let dot = (node.cpu as f64 / cpu_cap) * (shape.cpu as f64 / cpu_cap) + gpu_dot;
                    if best.as_ref().is_none_or(|(b, _)| dot < *b) {
                        best = Some((dot, gpus));
                    }
                }
                let (dot, gpus) = best.unwrap_or((0.0, Vec::new()));
                Some((((1.0 - dot / 2.0) * 100.0) as i64, gpus))
            }
            BenchPolicy::Packing => {
                let untouched = node.gpus.iter().filter(|g| g.free == g.capacity).count() as i64;
                if untouched == node.gpus.len() as i64 {
                    return Some(((100 / 3 - untouched).max(untouched), tightest(node, shape)));
                }
                let gpus = tightest(node, shape);
                let whole_used = gpus.iter().filter(|&&g| node.gpus[g].free == node.gpus[g].capacity).count() as i64;
                if whole_used > 0 {
                    return Some(((50 - whole_used).max(33), gpus));
                }
                let free_pct: i64 = gpus.iter().map(|&g| i64::from(node.gpus[g].free) * 100 / 1000).sum();
                Some(((100 - free_pct / 10).max(50), gpus))
            }
            BenchPolicy::Fgd => {
                let (growth, gpus) = self.memo.least_growth(node, shape, self.workload)?;
                let sigmoid = 1.0 / (1.0 + (growth / 1000.0).exp());
                Some(((sigmoid * 100.0) as i64, gpus))
            }
            BenchPolicy::FirstFit | BenchPolicy::Gradient => None,
        }
    }

    fn gradient(&mut self, nodes: &[NodeFree], shape: &Shape) -> Option<(usize, Vec<usize>)> {
        let mut best: Option<((f64, u64, usize), Vec<usize>)> = None;
        for (i, node) in nodes.iter().enumerate() {
            let Some((growth, gpus)) = self.memo.least_growth(node, shape, self.workload) else { continue };
            let left = node.free_units() - shape.units();
            let rank = (frag_gradient::rank_key(growth, left, shape), left, i);
            if best.as_ref().is_none_or(|(b, _)| frag_gradient::better(rank, *b)) {
                best = Some((rank, gpus));
            }
        }
        best.map(|((_, _, i), gpus)| (i, gpus))
    }
}
