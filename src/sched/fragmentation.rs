//! How fragmented the free GPU memory is, per GPU and across the cluster.
//!
//! Per GPU: 1 − largest free block / total free (SPEC §2). Across the cluster
//! two figures matter: memory fragmentation (free memory that is not in its
//! GPU's largest block, so a job as large as that free memory cannot use it)
//! and GPU fragmentation (free whole GPUs that are not on the node with the
//! most free GPUs, so a multi-GPU job cannot use them together).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::cluster::Node;
use crate::domain::ids::NodeId;
use crate::domain::units::Mib;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterFragmentation {
    pub free_memory: u64,
    pub largest_free_block: Mib,
    /// 1 − Σ largest free block per GPU / Σ free memory.
    pub memory: f64,
    pub free_gpus: u32,
    pub most_free_gpus_on_one_node: u32,
    /// 1 − most free whole GPUs on one node / all free whole GPUs.
    pub gpus: f64,
    /// Share of the free memory that sits on partly used GPUs: scattered
    /// leftovers rather than whole free GPUs (what fractional sharing strands).
    #[serde(default)]
    pub partial_free_share: f64,
    /// Σ F_n(M) ÷ free memory: the share of free GPU memory that the typical
    /// shapes of queued and running jobs cannot use (FGD's measure; filled
    /// by the room, which knows the jobs).
    #[serde(default)]
    pub workload: f64,
    /// How many typical shapes M has.
    #[serde(default)]
    pub typical_shapes: u32,
    /// Typical shapes that fit on no node now.
    #[serde(default)]
    pub unplaceable: Vec<String>,
}

pub fn measure(nodes: &BTreeMap<NodeId, Node>) -> ClusterFragmentation {
    measure_nodes(nodes.values())
}

pub fn measure_nodes<'a>(nodes: impl Iterator<Item = &'a Node>) -> ClusterFragmentation {
    let mut out = ClusterFragmentation::default();
    let mut sum_largest: u64 = 0;
    let mut partial_free: u64 = 0;
    for node in nodes.filter(|n| n.accepts_work()) {
        let mut node_free_gpus = 0;
        for gpu in &node.gpus {
            let blocks = gpu.free_blocks();
            let largest = blocks.iter().map(|(_, s)| *s).max().unwrap_or(Mib(0));
            if !gpu.has_exclusive() {
                let free: u64 = blocks.iter().map(|(_, s)| u64::from(s.0)).sum();
                if !gpu.is_free() {
                    partial_free += free;
                }
                out.free_memory += free;
                sum_largest += u64::from(largest.0);
                out.largest_free_block = out.largest_free_block.max(largest);
            }
            if gpu.is_free() {
                node_free_gpus += 1;
            }
        }
        out.free_gpus += node_free_gpus;
        out.most_free_gpus_on_one_node = out.most_free_gpus_on_one_node.max(node_free_gpus);
    }
    if out.free_memory > 0 {
        out.memory = 1.0 - sum_largest as f64 / out.free_memory as f64;
        out.partial_free_share = partial_free as f64 / out.free_memory as f64;
    }
    if out.free_gpus > 0 {
        out.gpus = 1.0 - f64::from(out.most_free_gpus_on_one_node) / f64::from(out.free_gpus);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::{Allocation, BillingMode};
    use crate::domain::ids::JobId;
    use crate::domain::testkit::{node_spec, t};

    #[test]
    fn measures_memory_and_gpu_fragmentation() {
        let mut nodes: BTreeMap<NodeId, Node> =
            [node_spec(1, BillingMode::Reserved, 2), node_spec(2, BillingMode::Reserved, 2)].into_iter().map(|s| (s.id, Node::new(s, t(0)))).collect();
        // Node 1 GPU 0: a 4 GiB hole, 8 GiB used, a 4 GiB hole (free 8 GiB, largest 4 GiB).
        nodes.get_mut(&NodeId(1)).unwrap().gpus[0].allocations.push(Allocation { job: JobId(1), offset: Mib(4096), size: Mib(8192), exclusive: false });
        // Node 2 GPU 1 is taken whole.
        nodes.get_mut(&NodeId(2)).unwrap().gpus[1].allocations.push(Allocation { job: JobId(2), offset: Mib(0), size: Mib(16_384), exclusive: true });
        let f = measure(&nodes);
        // Free memory: 8 GiB + 16 GiB + 16 GiB = 40 GiB; largest blocks 4 + 16 + 16 = 36 GiB.
        assert_eq!(f.free_memory, 40 * 1024);
        assert!((f.memory - (1.0 - 36.0 / 40.0)).abs() < 1e-9);
        assert_eq!(f.largest_free_block, Mib(16_384));
        // Whole free GPUs: node 1 has one (GPU 1), node 2 has one (GPU 0).
        assert_eq!(f.free_gpus, 2);
        assert_eq!(f.most_free_gpus_on_one_node, 1);
        assert!((f.gpus - 0.5).abs() < 1e-9);
        // Of 40 GiB free, the 8 GiB on node 1 GPU 0 sit on a partly used GPU.
        assert!((f.partial_free_share - 8.0 / 40.0).abs() < 1e-9);
    }
}
