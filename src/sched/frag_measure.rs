//! The workload's fragmentation measure over a whole fleet at once, for the
//! console: F_n(M) of every node and the typical shapes no node can take.
//!
//! `NodeFree::fragmentation` looks at every typical shape on every GPU: on a
//! 10,000-GPU room whose queue holds thousands of distinct shapes that is
//! tens of millions of checks per view. Shapes that differ only in their
//! per-GPU ask form a group, and within a group whether a GPU hosts a shape
//! is a threshold on that ask: sorted once, a group is measured on a node
//! with a few binary searches per GPU. The figures are the same measure
//! (`the_grouped_measure_is_the_shape_by_shape_measure` checks it), up to
//! floating-point rounding; the scheduler's placement keeps the
//! shape-by-shape form, whose exact sums its tie-breaks depend on.
//!
//! Pure functions over plain data; no IO, no `Room`.

use std::collections::BTreeMap;

use super::frag_gradient::{NodeFree, Shape, Workload};

/// The typical shapes grouped for measuring many nodes.
pub struct FleetMeasure<'w> {
    groups: Vec<Group<'w>>,
    /// Each of the workload's shapes, in its order, with its group's index.
    members: Vec<(&'w Shape, usize)>,
}

/// Shapes alike in all but the per-GPU ask.
struct Group<'w> {
    gpus: u8,
    whole: bool,
    cpu: u64,
    mem: u64,
    models: &'w [String],
    /// Per-GPU asks, ascending, and the probability mass below each index.
    asks: Vec<u32>,
    mass_below: Vec<f64>,
}

impl Group<'_> {
    fn mass(&self) -> f64 {
        self.mass_below.last().copied().unwrap_or(0.0)
    }

    /// The mass of the asks in (low, high]; `None` bounds are open.
    fn mass_between(&self, low: Option<u32>, high: Option<u32>) -> f64 {
        let upto = |bound: Option<u32>, open: usize| bound.map_or(open, |b| self.asks.partition_point(|a| *a <= b));
        let (from, to) = (upto(low, 0), upto(high, self.asks.len()));
        if to <= from { 0.0 } else { self.mass_below[to] - self.mass_below[from] }
    }

    /// Whether the node can take some shape of this group at all, and if
    /// so each GPU's hosting threshold with its free units, highest
    /// threshold first: a GPU hosts one GPU's worth of an ask no larger
    /// than its threshold (`None`: it hosts nothing of this group).
    fn thresholds(&self, node: &NodeFree) -> Option<Vec<(Option<u32>, u32)>> {
        let allowed = self.models.is_empty() || self.models.contains(&node.model);
        if !allowed || self.cpu > node.cpu || self.mem > node.mem {
            return None;
        }
        let mut gpus: Vec<(Option<u32>, u32)> = node.gpus.iter().map(|g| (g.hosting_threshold(self.whole), g.free)).collect();
        gpus.sort_unstable_by_key(|g| std::cmp::Reverse(g.0));
        Some(gpus)
    }
}

impl<'w> FleetMeasure<'w> {
    pub fn new(workload: &'w Workload) -> FleetMeasure<'w> {
        type Key<'w> = (u8, bool, u64, u64, &'w [String]);
        let mut by_key: BTreeMap<Key<'w>, Vec<(u32, f64)>> = BTreeMap::new();
        for (shape, p) in &workload.shapes {
            by_key.entry((shape.gpus, shape.whole, shape.cpu, shape.mem, &shape.models)).or_default().push((shape.per_gpu, *p));
        }
        let index: BTreeMap<Key<'w>, usize> = by_key.keys().enumerate().map(|(i, k)| (*k, i)).collect();
        let groups = by_key
            .into_iter()
            .map(|((gpus, whole, cpu, mem, models), mut asks)| {
                asks.sort_by_key(|(ask, _)| *ask);
                let mut mass_below = Vec::with_capacity(asks.len() + 1);
                let mut sum = 0.0;
                mass_below.push(sum);
                for (_, p) in &asks {
                    sum += p;
                    mass_below.push(sum);
                }
                Group { gpus, whole, cpu, mem, models, asks: asks.into_iter().map(|(a, _)| a).collect(), mass_below }
            })
            .collect();
        let members = workload.shapes.iter().map(|(s, _)| (s, index[&(s.gpus, s.whole, s.cpu, s.mem, s.models.as_slice())])).collect();
        FleetMeasure { groups, members }
    }

    /// F_n(M), as `NodeFree::fragmentation` gives it.
    pub fn fragmentation(&self, node: &NodeFree) -> f64 {
        let free = node.free_units();
        if free == 0 {
            return 0.0;
        }
        let mut sum = 0.0;
        for group in &self.groups {
            let need = usize::from(group.gpus);
            let gpus = match group.thresholds(node) {
                Some(gpus) if need <= gpus.len() => gpus,
                _ => {
                    sum += free as f64 * group.mass();
                    continue;
                }
            };
            // Free units on the GPUs from index j on, in threshold order.
            let mut free_from = vec![0u64; gpus.len() + 1];
            for j in (0..gpus.len()).rev() {
                free_from[j] = free_from[j + 1] + u64::from(gpus[j].1);
            }
            // An ask above the `need`-th threshold fits nowhere on the node.
            if need > 0 {
                sum += free as f64 * group.mass_between(gpus[need - 1].0, None);
            }
            // Asks with exactly j hosting GPUs (j ≥ need): the rest is fragment.
            for j in need..=gpus.len() {
                let high = if j == 0 { None } else { gpus[j - 1].0 };
                let mass = match high {
                    None if j > 0 => 0.0,
                    _ => group.mass_between(gpus.get(j).and_then(|g| g.0), high),
                };
                sum += free_from[j] as f64 * mass;
            }
        }
        sum
    }

    /// The typical shapes no node of `nodes` can take now, in the workload's order.
    pub fn unplaceable(&self, nodes: &[NodeFree]) -> Vec<&'w Shape> {
        // Per group, the largest per-GPU ask some node can take (`Some(None)`: any).
        let mut reach: Vec<Option<Option<u32>>> = vec![None; self.groups.len()];
        for node in nodes {
            for (group, best) in self.groups.iter().zip(reach.iter_mut()) {
                let need = usize::from(group.gpus);
                let Some(gpus) = group.thresholds(node) else { continue };
                let here = match need {
                    0 => Some(None),
                    n if n <= gpus.len() => gpus[n - 1].0.map(Some),
                    _ => None,
                };
                *best = match (*best, here) {
                    (Some(None), _) | (_, Some(None)) => Some(None),
                    (Some(Some(a)), Some(Some(b))) => Some(Some(a.max(b))),
                    (a, b) => a.or(b),
                };
            }
        }
        self.members
            .iter()
            .filter(|(shape, g)| match reach[*g] {
                None => true,
                Some(None) => false,
                Some(Some(most)) => shape.per_gpu > most,
            })
            .map(|(shape, _)| *shape)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sched::frag_gradient::GpuFree;

    fn gpu() -> impl Strategy<Value = GpuFree> {
        (prop_oneof![Just(16_384u32), Just(40_960), Just(81_920)], 0u32..=4, 0u32..=4).prop_map(|(capacity, used, hole)| {
            // Quarters used, and a hole that splits what is left.
            let free = capacity - capacity / 4 * used.min(4);
            let largest = if hole > 0 && free > 0 { free - free / (hole + 1) } else { free };
            GpuFree { free, largest, capacity }
        })
    }

    fn node() -> impl Strategy<Value = NodeFree> {
        (prop_oneof![Just("A100"), Just("H100")], 0u64..=64, prop::collection::vec(gpu(), 1..=8)).prop_map(|(model, cpu, gpus)| NodeFree {
            model: model.into(),
            cpu,
            mem: 1 << 30,
            gpus,
        })
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (
            prop_oneof![Just(0u8), Just(1), Just(2), Just(4), Just(8)],
            0u32..=90_000,
            any::<bool>(),
            prop_oneof![Just(4u64), Just(16), Just(48)],
            prop_oneof![Just(vec![]), Just(vec!["H100".to_string()]), Just(vec!["A100".to_string(), "V100".to_string()])],
        )
            .prop_map(|(gpus, per_gpu, whole, cpu, models)| Shape { gpus, per_gpu, whole, cpu, mem: 0, models })
    }

    fn workload() -> impl Strategy<Value = Workload> {
        prop::collection::vec(shape(), 1..40).prop_map(|shapes| Workload::typical(shapes.iter()))
    }

    proptest! {
        #[test]
        fn the_grouped_measure_is_the_shape_by_shape_measure(w in workload(), nodes in prop::collection::vec(node(), 1..12)) {
            let fleet = FleetMeasure::new(&w);
            for n in &nodes {
                let (fast, slow) = (fleet.fragmentation(n), n.fragmentation(&w));
                prop_assert!((fast - slow).abs() <= 1e-9 * slow.abs().max(1.0), "{fast} vs {slow} on {n:?}");
            }
            prop_assert_eq!(fleet.unplaceable(&nodes), w.unplaceable(&nodes));
        }
    }

    #[test]
    fn a_full_node_and_an_empty_workload_measure_nothing() {
        let full = NodeFree { model: "A100".into(), cpu: 8, mem: 1, gpus: vec![GpuFree { free: 0, largest: 0, capacity: 40_960 }; 8] };
        let w = Workload { shapes: vec![(Shape { gpus: 1, per_gpu: 1000, whole: false, cpu: 1, mem: 0, models: Vec::new() }, 1.0)] };
        assert_eq!(FleetMeasure::new(&w).fragmentation(&full), 0.0);
        let empty = Workload::default();
        let idle = NodeFree { gpus: vec![GpuFree::whole(40_960); 8], ..full };
        assert_eq!(FleetMeasure::new(&empty).fragmentation(&idle), 0.0);
        assert!(FleetMeasure::new(&empty).unplaceable(&[idle]).is_empty());
    }
}
