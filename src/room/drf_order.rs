//! The queue kept for DRF across passes (issue 38): each tenant's queued
//! jobs by arrival, so that a walk fills tenants by dominant share lazily,
//! job by job, instead of sorting and filling the whole queue per pass.
//!
//! The order is exactly `sched::discipline::Drf`'s (the same
//! `DrfFilling`), then escalated jobs first (`Fleet::ordered_queue`'s
//! stable partition). The filling gives the earliest job of the tenant of
//! the lowest share (ties to the name that sorts first), and adds that job
//! to what the tenant holds. While
//! escalated jobs are left, the jobs filled before them are held back and
//! given after the last escalated one: a walk costs what it reads, up to
//! the last escalated job.
//!
//! Derived, like `derived`: never serialized, never part of equality, kept
//! through `QueueOrder` by the `Fleet` methods that move jobs in and out of
//! the queue.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;

use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::Job;
use crate::domain::units::At;
use crate::sched::Resources;
use crate::sched::discipline::{DrfFilling, arrival};

/// Each tenant's queued jobs by arrival (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct DrfRuns {
    /// By tenant name: the order ties between equal shares go in.
    tenants: BTreeMap<TenantId, BTreeSet<(At, JobId)>>,
    /// Where each job is, and whether it is escalated.
    of_job: HashMap<JobId, (TenantId, At, bool)>,
    escalated: usize,
}

impl DrfRuns {
    pub fn insert(&mut self, job: &Job) {
        let id = job.spec.id;
        self.remove(id);
        let (tenant, key) = (job.spec.tags.tenant.clone(), arrival(job));
        self.tenants.entry(tenant.clone()).or_default().insert(key);
        self.escalated += usize::from(job.escalated);
        self.of_job.insert(id, (tenant, key.0, job.escalated));
    }

    pub fn remove(&mut self, id: JobId) {
        let Some((tenant, at, escalated)) = self.of_job.remove(&id) else { return };
        self.escalated = self.escalated.saturating_sub(usize::from(escalated));
        if let Some(jobs) = self.tenants.get_mut(&tenant) {
            jobs.remove(&(at, id));
            if jobs.is_empty() {
                self.tenants.remove(&tenant);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.of_job.len()
    }

    pub fn is_empty(&self) -> bool {
        self.of_job.is_empty()
    }

    /// Starts a walk from what each tenant holds now, over `capacity`.
    pub fn walk(&self, held: &BTreeMap<TenantId, Resources>, capacity: Resources) -> DrfWalk {
        let held: Vec<Resources> = self.tenants.keys().map(|t| held.get(t).copied().unwrap_or_default()).collect();
        DrfWalk {
            names: self.tenants.keys().cloned().collect(),
            cursors: vec![None; held.len()],
            filling: DrfFilling::new(held, capacity),
            escalated_left: self.escalated,
            held_back: VecDeque::new(),
        }
    }

    /// The next job of `walk` in order, if any is left.
    pub fn next(&self, walk: &mut DrfWalk, jobs: &BTreeMap<JobId, Job>) -> Option<JobId> {
        loop {
            if walk.escalated_left == 0
                && let Some(id) = walk.held_back.pop_front()
            {
                return Some(id);
            }
            let Some((id, escalated)) = self.fill_one(walk, jobs) else {
                // Every job filled: what was held back follows.
                walk.escalated_left = 0;
                return walk.held_back.pop_front();
            };
            if walk.escalated_left == 0 {
                return Some(id);
            }
            if escalated {
                walk.escalated_left -= 1;
                return Some(id);
            }
            walk.held_back.push_back(id);
        }
    }

    /// One step of the filling: the earliest job of the tenant of the lowest share.
    fn fill_one(&self, walk: &mut DrfWalk, jobs: &BTreeMap<JobId, Job>) -> Option<(JobId, bool)> {
        while let Some(i) = walk.filling.next_tenant() {
            let Some(runs) = walk.names.get(i).and_then(|name| self.tenants.get(name)) else { continue };
            let from = walk.cursors[i].map_or(Bound::Unbounded, Bound::Excluded);
            let mut ahead = runs.range((from, Bound::Unbounded));
            // A job the map no longer holds (never, while the queue and the map agree) is passed over.
            let Some((key, job)) = ahead.by_ref().find_map(|key| Some((*key, jobs.get(&key.1)?))) else { continue };
            walk.cursors[i] = Some(key);
            walk.filling.gave(i, &job.spec, ahead.next().is_some());
            return Some((key.1, job.escalated));
        }
        None
    }
}

/// Where a DRF walk is: each tenant's last job given, the filling, and the
/// jobs held back behind escalated ones.
#[derive(Clone, Debug)]
pub struct DrfWalk {
    names: Vec<TenantId>,
    cursors: Vec<Option<(At, JobId)>>,
    filling: DrfFilling,
    escalated_left: usize,
    held_back: VecDeque<JobId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::{job_spec, t};
    use crate::sched::SchedConfig;
    use crate::sched::discipline::{Discipline, Drf, OrderContext};

    /// Three tenants, jobs of every size, escalated ones scattered through
    /// each tenant's arrivals, one tenant holding GPUs already.
    fn queue() -> Vec<Job> {
        let tenants = ["ada", "bob", "cy"];
        (1..=90u64)
            .map(|id| {
                let mut spec = job_spec(id, tenants[(id * 7 % 3) as usize], 1 + (id % 4) as u8);
                spec.cpus = 2 + (id % 5) as u32 * 6;
                let mut job = Job::new(spec, t((id * 13 % 50) as i64));
                job.escalated = id.is_multiple_of(11) || id.is_multiple_of(17);
                job
            })
            .collect()
    }

    fn walked(runs: &DrfRuns, jobs: &BTreeMap<JobId, Job>, held: &BTreeMap<TenantId, Resources>, capacity: Resources) -> Vec<JobId> {
        let mut walk = runs.walk(held, capacity);
        std::iter::from_fn(|| runs.next(&mut walk, jobs)).collect()
    }

    #[test]
    fn a_lazy_walk_gives_the_filling_order_with_escalated_jobs_first() {
        let queue = queue();
        let jobs: BTreeMap<JobId, Job> = queue.iter().map(|j| (j.spec.id, j.clone())).collect();
        let capacity = Resources { gpus: 64.0, gpu_mem: 64.0 * 16_384.0, cpus: 512.0, host_mem: 4_194_304.0 };
        let held = BTreeMap::from([(TenantId("bob".into()), Resources { gpus: 12.0, gpu_mem: 0.0, cpus: 40.0, host_mem: 0.0 })]);
        let config = SchedConfig::default();
        let mut sorted: Vec<&Job> = jobs.values().collect();
        Drf.order(&mut sorted, &OrderContext { now: t(60), config: &config, held: &held, capacity });
        let (mut expected, rest): (Vec<&Job>, Vec<&Job>) = sorted.into_iter().partition(|j| j.escalated);
        expected.extend(rest);
        let expected: Vec<JobId> = expected.iter().map(|j| j.spec.id).collect();
        let mut runs = DrfRuns::default();
        for job in &queue {
            runs.insert(job);
        }
        assert!(expected.iter().take(5).all(|id| jobs[id].escalated), "escalated jobs lead");
        assert_eq!(walked(&runs, &jobs, &held, capacity), expected);
        // Re-inserting (an escalation) and removing keep the index whole.
        runs.insert(&queue[3]);
        assert_eq!(runs.len(), queue.len());
        for job in &queue {
            runs.remove(job.spec.id);
        }
        assert_eq!((runs.len(), runs.escalated, runs.tenants.len()), (0, 0, 0));
    }
}
