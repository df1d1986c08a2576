//! The placement policies `gpuroom bench placement` compares, over the plain
//! node model of `sched::frag_gradient` (GPU capacity in thousandths of a
//! GPU, as in the Alibaba trace). The published baselines score as the
//! reference simulator does (`placement_reference`, each rule cited there);
//! ties among the best score go, by the protocol, to the node of the
//! lowest rank (the reference's) or to one drawn at random. The room's own
//! policy (`Gradient`) is `sched::frag_gradient::choose`, what
//! `fit = "fragmentation"` runs in the room.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::placement_reference as reference;
use crate::sched::frag_gradient::{self, GpuFree, NodeFree, Shape, Weigher, Workload};

/// How a run breaks ties and orders arrivals.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The reference's: the node of the lowest rank in a permutation drawn
    /// per run wins a tie; the list shuffled, then random copies; the
    /// published allocation measure.
    Reference,
    /// Ours: ties drawn at random; every pod drawn with replacement.
    Draws,
}

impl Protocol {
    pub const BOTH: [Protocol; 2] = [Protocol::Reference, Protocol::Draws];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Reference => "the reference's protocol (ties to the lowest-ranked node, shuffled list + copies)",
            Protocol::Draws => "random draws (random ties, pods drawn with replacement)",
        }
    }
}

/// The two measures of a pod list's typical shapes: the reference's (for
/// the baselines and the published fragmentation figure) and the room's
/// policy over them (what `Gradient` weighs, as the room does).
#[derive(Clone, Debug)]
pub struct Workloads {
    pub reference: Workload,
    pub room: Weigher,
}

impl Workloads {
    /// The workloads of `shapes` on the cluster `nodes` (as they start).
    pub fn of(shapes: &[Shape], nodes: &[NodeFree]) -> Workloads {
        Workloads { reference: reference::typical_pods(shapes), room: Weigher::new(frag_gradient::typical_of(shapes), nodes.iter()) }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BenchPolicy {
    Random,
    FirstFit,
    BestFit,
    DotProduct,
    Packing,
    /// FGD as the reference computes it (`placement_reference::fgd_score`).
    Fgd,
    /// The room's policy (`frag_gradient::choose`).
    Gradient,
}

/// The reference's published allocation % at 130% arrived demand
/// (`experiments/analysis/expected_results/analysis_allo_discrete.csv`,
/// mean of 10 seeds): random, dot-product, GPU packing, best fit, FGD.
const PUBLISHED: [(&str, [f64; 5]); 17] = [
    ("default", [87.47, 90.85, 92.00, 93.08, 95.39]),
    ("cpu050", [91.24, 93.27, 93.72, 93.79, 95.21]),
    ("cpu100", [89.11, 91.95, 92.72, 93.44, 95.35]),
    ("cpu200", [83.77, 87.70, 90.22, 92.40, 95.05]),
    ("cpu250", [80.42, 83.81, 88.28, 91.45, 93.41]),
    ("gpushare40", [86.00, 89.56, 90.03, 91.69, 94.15]),
    ("gpushare60", [83.65, 87.11, 87.45, 89.36, 91.40]),
    ("gpushare80", [81.22, 84.49, 85.00, 87.01, 89.30]),
    ("gpushare100", [79.44, 82.42, 82.57, 85.01, 86.90]),
    ("gpuspec10", [87.43, 90.39, 92.46, 93.30, 94.95]),
    ("gpuspec20", [87.24, 89.97, 92.94, 93.30, 94.84]),
    ("gpuspec25", [86.94, 89.63, 92.98, 93.23, 94.74]),
    ("gpuspec33", [86.46, 89.14, 93.22, 93.09, 94.55]),
    ("multigpu20", [88.69, 92.06, 93.71, 93.93, 95.65]),
    ("multigpu30", [89.27, 93.28, 94.87, 94.72, 96.46]),
    ("multigpu40", [90.09, 94.19, 95.74, 95.23, 96.99]),
    ("multigpu50", [90.27, 94.85, 96.18, 95.74, 97.18]),
];

/// The pod list a file is, by the reference's names (`openb_pod_list_gpushare40.csv`)
/// or the shared data's (`alibaba-2023-pods-gpushare40.csv`).
pub fn list_key(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.strip_suffix(".csv").unwrap_or(file);
    stem.rsplit(['_', '-']).next().unwrap_or(stem).to_string()
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
            BenchPolicy::Fgd => "FGD (faithful)",
            BenchPolicy::Gradient => "gradient (gpuroom)",
        }
    }

    /// The policy's name on the command line.
    pub fn key(self) -> &'static str {
        match self {
            BenchPolicy::Random => "random",
            BenchPolicy::FirstFit => "first-fit",
            BenchPolicy::BestFit => "best-fit",
            BenchPolicy::DotProduct => "dot-product",
            BenchPolicy::Packing => "packing",
            BenchPolicy::Fgd => "fgd",
            BenchPolicy::Gradient => "gradient",
        }
    }

    pub fn from_key(key: &str) -> Option<BenchPolicy> {
        BenchPolicy::ALL.into_iter().find(|p| p.key() == key)
    }

    /// The figure the reference publishes for this policy at 130% arrived
    /// demand on pod list `list` (a `list_key`).
    pub fn published(self, list: &str) -> Option<f64> {
        let column = match self {
            BenchPolicy::Random => 0,
            BenchPolicy::DotProduct => 1,
            BenchPolicy::Packing => 2,
            BenchPolicy::BestFit => 3,
            BenchPolicy::Fgd => 4,
            BenchPolicy::FirstFit | BenchPolicy::Gradient => return None,
        };
        PUBLISHED.iter().find(|(name, _)| *name == list).map(|(_, figures)| figures[column])
    }
}

/// F_n(M) memoised by node state (either measure ignores GPU order and host
/// memory, which the typical shapes never ask).
pub struct FragMemo {
    measure: fn(&NodeFree, &Workload) -> f64,
    seen: HashMap<(String, u64, Vec<GpuFree>), f64>,
}

impl FragMemo {
    /// A memo of the reference's measure.
    pub fn reference() -> FragMemo {
        FragMemo { measure: reference::fragmentation, seen: HashMap::new() }
    }

    /// A memo of the room's measure.
    pub fn room() -> FragMemo {
        FragMemo { measure: |n, w| n.fragmentation(w), seen: HashMap::new() }
    }

    pub fn of(&mut self, node: &NodeFree, workload: &Workload) -> f64 {
        let mut gpus = node.gpus.clone();
        gpus.sort_unstable();
        let key = (node.model.clone(), node.cpu, gpus);
        if let Some(f) = self.seen.get(&key) {
            return *f;
        }
        let f = (self.measure)(node, workload);
        self.seen.insert(key, f);
        f
    }
}

/// What the policies share for one run: the workloads, the memo, the RNG
/// (random draws and random ties), and the node ranks of the reference's tie-break.
pub struct Placer<'a> {
    pub policy: BenchPolicy,
    pub workloads: &'a Workloads,
    pub memo: FragMemo,
    pub rng: ChaCha8Rng,
    /// Under the reference's protocol, each node's rank (the lower wins a tie).
    pub ranks: Option<Vec<u32>>,
}

impl<'a> Placer<'a> {
    /// A placer for `nodes` under `protocol`, its draws from `seed`.
    pub fn new(policy: BenchPolicy, workloads: &'a Workloads, nodes: &[NodeFree], protocol: Protocol, seed: u64) -> Placer<'a> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ranks = (protocol == Protocol::Reference).then(|| reference::node_ranks(nodes.len(), &mut rng));
        let memo = if policy == BenchPolicy::Gradient { FragMemo::room() } else { FragMemo::reference() };
        Placer { policy, workloads, memo, rng, ranks }
    }

    fn rank(&self, node: usize) -> u32 {
        self.ranks.as_ref().map_or(node as u32, |r| r[node])
    }

    /// Where `shape` goes among `nodes`: the node and its GPUs.
    pub fn place(&mut self, nodes: &[NodeFree], shape: &Shape) -> Option<(usize, Vec<usize>)> {
        match self.policy {
            BenchPolicy::Gradient => {
                let (weigher, memo) = (&self.workloads.room, &mut self.memo);
                let ranks = self.ranks.as_deref();
                let nodes = nodes.iter().enumerate().map(|(i, n)| (ranks.map_or(i as u32, |r| r[i]), i, n));
                return weigher.choose(nodes, shape, |n| memo.of(n, &weigher.workload));
            }
            BenchPolicy::FirstFit => {
                let n = nodes.iter().position(|n| n.fits(shape))?;
                return Some((n, reference::best_gpus(&nodes[n], shape)));
            }
            BenchPolicy::Random => {
                // The reference's PreScore gives one feasible node drawn at random 100, the rest 0.
                let feasible: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].fits(shape)).collect();
                let n = *feasible.get(self.rng.random_range(0..feasible.len().max(1)))?;
                return Some((n, reference::random_gpus(&nodes[n], shape, &mut self.rng)));
            }
            _ => {}
        }
        // Highest score wins; a tie goes to the lowest rank, or is drawn (reservoir).
        let mut best: Option<(i64, u32, usize, Vec<usize>)> = None;
        let mut ties = 0u32;
        for (i, node) in nodes.iter().enumerate() {
            if !node.fits(shape) {
                continue;
            }
            let (score, gpus) = self.score(node, shape);
            let rank = self.rank(i);
            match &best {
                Some((b, _, _, _)) if score < *b => {}
                Some((b, r, _, _)) if score == *b => {
                    let wins = if self.ranks.is_some() {
                        rank < *r
                    } else {
                        ties += 1;
                        self.rng.random_range(0..ties) == 0
                    };
                    if wins {
                        best = Some((score, rank, i, gpus));
                    }
                }
                _ => {
                    ties = 1;
                    best = Some((score, rank, i, gpus));
                }
            }
        }
        best.map(|(_, _, i, gpus)| (i, gpus))
    }

    /// The reference's score (higher is better) and the GPUs it binds, for a pod that fits.
    fn score(&mut self, node: &NodeFree, shape: &Shape) -> (i64, Vec<usize>) {
        match self.policy {
            BenchPolicy::BestFit => (reference::best_fit_score(node, shape), reference::best_gpus(node, shape)),
            BenchPolicy::DotProduct => (reference::dot_product_score(node, shape), reference::best_gpus(node, shape)),
            BenchPolicy::Packing => (reference::packing_score(node, shape), reference::best_gpus(node, shape)),
            BenchPolicy::Fgd => {
                let (workload, memo) = (&self.workloads.reference, &mut self.memo);
                reference::fgd_score(node, shape, |n| memo.of(n, workload))
            }
            BenchPolicy::Random | BenchPolicy::FirstFit | BenchPolicy::Gradient => (0, Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<NodeFree> {
        (0..n).map(|_| NodeFree { model: "G2".into(), cpu: 96_000, mem: 1 << 20, gpus: vec![GpuFree::whole(1000); 8] }).collect()
    }

    fn pod(gpus: u8, per_gpu: u32) -> Shape {
        Shape { gpus, per_gpu, whole: per_gpu == 1000, cpu: 4000, mem: 1024, models: Vec::new() }
    }

    #[test]
    fn under_the_references_protocol_a_tie_goes_to_the_lowest_ranked_node() {
        let cluster = nodes(3);
        let shapes = vec![pod(1, 1000), pod(1, 500)];
        let workloads = Workloads::of(&shapes, &cluster);
        for policy in [BenchPolicy::Fgd, BenchPolicy::BestFit, BenchPolicy::Packing, BenchPolicy::DotProduct] {
            let mut placer = Placer::new(policy, &workloads, &cluster, Protocol::Reference, 1);
            // Three empty nodes score the same: the one of rank 0 wins, wherever it sits.
            placer.ranks = Some(vec![2, 0, 1]);
            assert_eq!(placer.place(&cluster, &pod(1, 500)).map(|(n, _)| n), Some(1), "{policy:?}");
            placer.ranks = Some(vec![0, 1, 2]);
            assert_eq!(placer.place(&cluster, &pod(1, 500)).map(|(n, _)| n), Some(0), "{policy:?}");
        }
        // Under random draws the same tie lands on every node in turn.
        let mut placer = Placer::new(BenchPolicy::Fgd, &workloads, &cluster, Protocol::Draws, 1);
        let picked: std::collections::BTreeSet<usize> = (0..32).filter_map(|_| placer.place(&cluster, &pod(1, 500)).map(|(n, _)| n)).collect();
        assert_eq!(picked.len(), 3);
    }

    #[test]
    fn faithful_fgd_binds_a_share_where_its_score_puts_it() {
        // Node 0: GPU 0 has 500 left, GPU 1 is whole. A 500 share fills GPU 0 exactly.
        let mut cluster = nodes(1);
        cluster[0].gpus[0] = GpuFree { free: 500, largest: 500, capacity: 1000 };
        let shapes = vec![pod(1, 1000), pod(1, 500)];
        let workloads = Workloads::of(&shapes, &cluster);
        let mut placer = Placer::new(BenchPolicy::Fgd, &workloads, &cluster, Protocol::Reference, 1);
        assert_eq!(placer.place(&cluster, &pod(1, 500)), Some((0, vec![0])));
        // A whole GPU takes the first fully free one.
        assert_eq!(placer.place(&cluster, &pod(2, 1000)), Some((0, vec![1, 2])));
    }

    #[test]
    fn list_names_and_published_figures() {
        assert_eq!(list_key("/x/openb_pod_list_gpuspec33.csv"), "gpuspec33");
        assert_eq!(list_key("jobs/alibaba-2023-pods-default.csv"), "default");
        assert_eq!(BenchPolicy::Fgd.published("default"), Some(95.39));
        assert_eq!(BenchPolicy::BestFit.published("multigpu50"), Some(95.74));
        assert_eq!(BenchPolicy::Fgd.published("cpu037"), None, "not in the published results");
        assert_eq!(BenchPolicy::Gradient.published("default"), None);
        assert_eq!(BenchPolicy::from_key("best-fit"), Some(BenchPolicy::BestFit));
        assert_eq!(BenchPolicy::from_key("tetris"), None);
    }
}
