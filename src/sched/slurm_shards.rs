//! What is free on a Slurm node for the room's placement, GPU by GPU: whole
//! GPUs, shards of GPUs (`gres/shard`, several jobs on one GPU) and CPUs.
//! Slurm gives a GPU either whole or in shards, never both, and gives a job
//! its shards on one GPU (unless the site sets
//! `OPT_MULTIPLE_SHARING_GRES_PJ`), so a node is a list of GPUs, each
//! untouched, taken whole, or carrying some shards.
//!
//! Pure: reads a node and the jobs on it from a snapshot. Used by
//! `sched::slurm_plan`; knows nothing of tiers or order.

use crate::domain::slurm::{SlurmJob, SlurmNode};

/// A node's free capacity as the plan fills it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSpare {
    /// GPUs neither taken whole nor carrying shards.
    pub gpus: u32,
    /// Free shards on each GPU that may take shards (not taken whole); an
    /// untouched GPU has `per_gpu`.
    pub shard_gpus: Vec<u32>,
    pub per_gpu: u32,
    /// CPUs free, when Slurm said how many the node has.
    pub cpus: Option<u32>,
}

/// A job that asks GPU shards and no whole GPU: it shares one GPU.
pub fn shares(job: &SlurmJob) -> bool {
    job.gpus == 0 && job.shards > 0
}

impl NodeSpare {
    /// The node as the snapshot shows it: its GPUs taken whole (by index
    /// when Slurm says, else the first ones), the shards its running jobs
    /// hold on each GPU (by the index in their `gres_detail`; Slurm 22.05's
    /// own count of shards in use is the number of GPUs sharing, not of
    /// shards), and its CPUs.
    pub fn of(node: &SlurmNode, jobs: &[SlurmJob]) -> NodeSpare {
        let per_gpu = node.shards.checked_div(node.gpus).unwrap_or(0);
        let gpus = node.gpus as usize;
        let mut taken = vec![false; gpus];
        if node.gpus_used_idx.is_empty() {
            taken.iter_mut().take(node.gpus_used as usize).for_each(|t| *t = true);
        } else {
            for i in &node.gpus_used_idx {
                if let Some(t) = taken.get_mut(*i as usize) {
                    *t = true;
                }
            }
        }
        let mut used = vec![0_u32; gpus];
        let mut unplaced = 0_u32;
        for job in jobs.iter().filter(|j| j.holds_gpus() && j.shards > 0 && j.nodes.contains(&node.name)) {
            let per_node = job.shards / u32::try_from(job.nodes.len()).unwrap_or(1).max(1);
            match job.shard_idx.iter().find(|(n, _)| *n == node.name).map(|(_, idx)| idx).filter(|idx| !idx.is_empty()) {
                Some(idx) => {
                    let each = per_node / u32::try_from(idx.len()).unwrap_or(1).max(1);
                    for i in idx {
                        if let Some(u) = used.get_mut(*i as usize) {
                            *u += each;
                        }
                    }
                }
                None => unplaced += per_node,
            }
        }
        // Shards whose GPU Slurm did not name: packed onto the GPUs already
        // sharing first, as few as may be.
        let mut order: Vec<usize> = (0..gpus).filter(|i| !taken[*i]).collect();
        order.sort_by_key(|i| std::cmp::Reverse(used[*i]));
        for i in order {
            let room = per_gpu.saturating_sub(used[i]).min(unplaced);
            used[i] += room;
            unplaced -= room;
        }
        let open: Vec<usize> = (0..gpus).filter(|i| !taken[*i]).collect();
        NodeSpare {
            gpus: open.iter().filter(|i| used[**i] == 0).count() as u32,
            shard_gpus: if per_gpu == 0 { Vec::new() } else { open.iter().map(|i| per_gpu.saturating_sub(used[*i])).collect() },
            per_gpu,
            cpus: (node.cpus > 0).then(|| node.cpus.saturating_sub(node.cpus_alloc)),
        }
    }

    /// Whether `job` fits now: its CPUs, and its whole GPUs or its shards on one GPU.
    pub fn fits(&self, job: &SlurmJob) -> bool {
        let cpus = self.cpus.is_none_or(|c| c >= job.cpus);
        cpus && if shares(job) { self.tightest(job.shards).is_some() } else { self.gpus >= job.gpus }
    }

    /// The GPU a sharing job would take: the one with the fewest free
    /// shards that still holds it, keeping untouched GPUs whole.
    fn tightest(&self, shards: u32) -> Option<usize> {
        self.shard_gpus.iter().enumerate().filter(|(_, f)| **f >= shards).min_by_key(|(i, f)| (**f, *i)).map(|(i, _)| i)
    }

    /// What is left of the resource the job uses, once it is placed here:
    /// the smaller, the tighter the fit.
    pub fn left_after(&self, job: &SlurmJob) -> u32 {
        if shares(job) { self.tightest(job.shards).map_or(0, |i| self.shard_gpus[i] - job.shards) } else { self.gpus.saturating_sub(job.gpus) }
    }

    /// Places `job` here.
    pub fn take(&mut self, job: &SlurmJob) {
        if let Some(c) = self.cpus.as_mut() {
            *c = c.saturating_sub(job.cpus);
        }
        if shares(job) {
            if let Some(i) = self.tightest(job.shards) {
                if self.shard_gpus[i] == self.per_gpu {
                    self.gpus = self.gpus.saturating_sub(1);
                }
                self.shard_gpus[i] -= job.shards;
            }
            return;
        }
        self.gpus = self.gpus.saturating_sub(job.gpus);
        // Whole GPUs come out of the untouched ones.
        for _ in 0..job.gpus {
            if let Some(i) = self.shard_gpus.iter().position(|f| *f == self.per_gpu) {
                self.shard_gpus.remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::slurm::SlurmState;

    fn n4(gpus_used_idx: Vec<u32>) -> SlurmNode {
        SlurmNode {
            name: "n4".into(),
            cpus: 4,
            cpus_alloc: 3,
            gpus: 4,
            gpus_used: gpus_used_idx.len() as u32,
            gpus_used_idx,
            shards: 16,
            shards_used: 2,
            ..SlurmNode::default()
        }
    }

    fn sharing(id: u64, shards: u32, idx: Vec<u32>) -> SlurmJob {
        SlurmJob { id, state: SlurmState::Running, shards, nodes: vec!["n4".into()], shard_idx: vec![("n4".into(), idx)], cpus: 1, ..SlurmJob::default() }
    }

    #[test]
    fn a_node_reads_gpu_by_gpu_from_its_jobs() {
        // GPU 3 whole; GPU 0 carries 2 + 1 shards, GPU 1 carries 3.
        let jobs = vec![sharing(1, 2, vec![0]), sharing(2, 3, vec![1]), sharing(3, 1, vec![0])];
        let spare = NodeSpare::of(&n4(vec![3]), &jobs);
        assert_eq!(spare, NodeSpare { gpus: 1, shard_gpus: vec![1, 1, 4], per_gpu: 4, cpus: Some(1) });
        // Without indices (the text fallback): packed onto as few GPUs as may be.
        let blind: Vec<SlurmJob> = jobs.into_iter().map(|j| SlurmJob { shard_idx: Vec::new(), ..j }).collect();
        assert_eq!(NodeSpare::of(&n4(vec![3]), &blind).shard_gpus, vec![0, 2, 4]);
    }

    #[test]
    fn a_sharing_job_takes_the_tightest_gpu_and_whole_jobs_untouched_ones() {
        let mut spare = NodeSpare { gpus: 2, shard_gpus: vec![1, 3, 4, 4], per_gpu: 4, cpus: None };
        let ask = |shards: u32, gpus: u32| SlurmJob { shards, gpus, ..SlurmJob::default() };
        assert_eq!(spare.left_after(&ask(1, 0)), 0, "onto the GPU with one left");
        assert!(!spare.fits(&ask(5, 0)), "more than one GPU's shards");
        spare.take(&ask(2, 0));
        assert_eq!((spare.gpus, spare.shard_gpus.clone()), (2, vec![1, 1, 4, 4]), "GPU 1 had room: the whole ones stay whole");
        spare.take(&ask(4, 0));
        assert_eq!((spare.gpus, spare.shard_gpus.clone()), (1, vec![1, 1, 0, 4]));
        spare.take(&ask(0, 1));
        assert_eq!((spare.gpus, spare.shard_gpus.clone()), (0, vec![1, 1, 0]));
        assert!(!spare.fits(&ask(0, 1)) && spare.fits(&ask(1, 0)));
        let mut busy = NodeSpare { cpus: Some(0), ..spare };
        assert!(!busy.fits(&SlurmJob { cpus: 1, ..ask(1, 0) }), "no CPU left");
        busy.take(&ask(1, 0));
    }
}
