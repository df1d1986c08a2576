//! The queue kept in discipline order across passes (issue 38): a pass
//! reads the queue's head lazily instead of sorting every queued job.
//!
//! The order is the one `Fleet::ordered_queue` sorts (escalated jobs first,
//! each part by `discipline::sort_key`). Jobs whose place among each other
//! never changes while they wait are kept in runs sorted by arrival: under
//! FIFO every job; under priority with aging the jobs never requeued, one
//! run per priority (waits grow alike, so within a run the earlier arrival
//! is never behind); under MLFQ the jobs never requeued that attained no
//! service (queue 0, never lifted or lowered). The other jobs (requeued
//! ones, a handful) are sorted at the start of each walk. A walk merges the
//! runs' heads by the discipline's key at that moment, so it yields exactly
//! the sorted order. DRF orders by what is ordered before it: its jobs
//! are kept per tenant by arrival and filled lazily (`drf_order`).
//!
//! Derived, like `derived`: never serialized, never part of equality, kept
//! by the `Fleet` methods that move jobs in and out of the queue, rebuilt
//! when missing or when the discipline's settings change.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::drf_order::{DrfRuns, DrfWalk};
use crate::domain::discipline::DisciplineKind;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::Job;
use crate::domain::units::At;
use crate::sched::discipline::{Mlfq, sort_key};
use crate::sched::{Resources, SchedConfig};

/// Where a job goes in a walk: escalated first (`false` sorts first), then
/// the discipline's key.
type Place = (bool, (i64, At, JobId));

/// A run of jobs kept by arrival: escalated runs come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Run {
    not_escalated: bool,
    /// The priority of a run under priority with aging, else 0.
    priority: i32,
}

/// What the index was built for: a change of any rebuilds it.
#[derive(Clone, Debug, PartialEq)]
struct Settings {
    kind: DisciplineKind,
    mlfq_thresholds: Vec<i64>,
}

impl Settings {
    fn of(config: &SchedConfig) -> Option<Settings> {
        // A negative or unknown aging rate would let a later arrival overtake: no runs then.
        let kept = match config.discipline {
            DisciplineKind::Drf | DisciplineKind::Fifo | DisciplineKind::Mlfq => true,
            DisciplineKind::Priority => config.aging_per_hour >= 0.0,
        };
        kept.then(|| Settings { kind: config.discipline, mlfq_thresholds: config.mlfq_thresholds.clone() })
    }

    /// The run a queued job belongs to, or `None` if its place must be
    /// computed at each walk.
    fn run_of(&self, job: &Job) -> Option<Run> {
        let not_escalated = !job.escalated;
        let fresh = job.waited_secs == 0 && job.queued_since == job.submitted_at;
        match self.kind {
            DisciplineKind::Fifo => Some(Run { not_escalated, priority: 0 }),
            DisciplineKind::Priority if fresh => Some(Run { not_escalated, priority: job.spec.priority }),
            // Queue 0 (no service past the first threshold) is never lifted nor lowered while waiting.
            DisciplineKind::Mlfq if fresh && Mlfq::level(job, &self.mlfq_thresholds, job.queued_since) == 0 => Some(Run { not_escalated, priority: 0 }),
            _ => None,
        }
    }
}

/// The queue's runs (see the module's doc).
#[derive(Clone, Debug)]
pub struct QueueOrder {
    settings: Settings,
    runs: BTreeMap<Run, BTreeSet<(At, JobId)>>,
    /// Queued jobs in no run, and the run each other queued job is in.
    loose: BTreeSet<JobId>,
    run_of: BTreeMap<JobId, (Run, At)>,
    /// Under DRF, every job is here instead (no runs, nothing loose).
    drf: Option<DrfRuns>,
}

impl QueueOrder {
    /// The index for `config`'s discipline, if it keeps one.
    pub fn build<'a>(config: &SchedConfig, queued: impl Iterator<Item = &'a Job>) -> Option<QueueOrder> {
        let settings = Settings::of(config)?;
        let drf = (settings.kind == DisciplineKind::Drf).then(DrfRuns::default);
        let mut order = QueueOrder { settings, runs: BTreeMap::new(), loose: BTreeSet::new(), run_of: BTreeMap::new(), drf };
        for job in queued {
            order.insert(job);
        }
        Some(order)
    }

    /// Whether it was built for these settings.
    pub fn fits(&self, config: &SchedConfig) -> bool {
        Settings::of(config).as_ref() == Some(&self.settings)
    }

    /// A job joined the queue or changed (escalated): it is re-indexed.
    pub fn insert(&mut self, job: &Job) {
        if let Some(drf) = &mut self.drf {
            return drf.insert(job);
        }
        let id = job.spec.id;
        self.remove(id);
        match self.settings.run_of(job) {
            Some(run) => {
                self.runs.entry(run).or_default().insert((job.submitted_at, id));
                self.run_of.insert(id, (run, job.submitted_at));
            }
            None => {
                self.loose.insert(id);
            }
        }
    }

    pub fn remove(&mut self, id: JobId) {
        if let Some(drf) = &mut self.drf {
            return drf.remove(id);
        }
        if let Some((run, at)) = self.run_of.remove(&id)
            && let Some(set) = self.runs.get_mut(&run)
        {
            set.remove(&(at, id));
        }
        self.loose.remove(&id);
    }

    /// Starts a walk at `now`: the loose jobs are sorted here, once. Under
    /// DRF the filling starts from `drf_start`: what each tenant holds, and
    /// the capacity shares are of.
    pub fn walk(
        &self,
        jobs: &BTreeMap<JobId, Job>,
        config: &SchedConfig,
        now: At,
        drf_start: impl FnOnce() -> (BTreeMap<TenantId, Resources>, Resources),
    ) -> Walk {
        if let Some(drf) = &self.drf {
            let (held, capacity) = drf_start();
            return Walk { now, cursors: Vec::new(), loose: Vec::new(), next_loose: 0, drf: Some(Box::new(drf.walk(&held, capacity))) };
        }
        let kind = self.settings.kind;
        let mut loose: Vec<Place> =
            self.loose.iter().filter_map(|id| jobs.get(id)).filter_map(|j| Some((!j.escalated, sort_key(kind, j, now, config)?))).collect();
        loose.sort_unstable();
        Walk { now, cursors: self.runs.keys().map(|run| (*run, None)).collect(), loose, next_loose: 0, drf: None }
    }

    /// The next job of `walk` in order, if any is left.
    pub fn next(&self, walk: &mut Walk, jobs: &BTreeMap<JobId, Job>, config: &SchedConfig) -> Option<JobId> {
        if let (Some(drf), Some(drf_walk)) = (&self.drf, &mut walk.drf) {
            return drf.next(drf_walk, jobs);
        }
        let kind = self.settings.kind;
        // Each run's head is its first job after the last one it gave.
        let mut best: Option<(Place, Option<usize>)> = walk.loose.get(walk.next_loose).map(|k| (*k, None));
        for (i, (run, last)) in walk.cursors.iter().enumerate() {
            let Some(set) = self.runs.get(run) else { continue };
            let from = last.map_or(Bound::Unbounded, Bound::Excluded);
            let Some(&(_, id)) = set.range((from, Bound::Unbounded)).next() else { continue };
            let Some(key) = jobs.get(&id).and_then(|j| sort_key(kind, j, walk.now, config)) else { continue };
            let candidate = (run.not_escalated, key);
            if best.as_ref().is_none_or(|(b, _)| candidate < *b) {
                best = Some((candidate, Some(i)));
            }
        }
        let ((_, (_, at, id)), from) = best?;
        match from {
            Some(i) => walk.cursors[i].1 = Some((at, id)),
            None => walk.next_loose += 1,
        }
        Some(id)
    }

    /// How many jobs it holds (runs and loose).
    pub fn len(&self) -> usize {
        self.run_of.len() + self.loose.len() + self.drf.as_ref().map_or(0, DrfRuns::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a walk of the queue is: the last job each run gave, and the loose
/// jobs sorted at its start. Jobs the walk gave may leave the queue while it
/// goes on (they are placed); none joins during a pass.
#[derive(Clone, Debug)]
pub struct Walk {
    now: At,
    cursors: Vec<(Run, Option<(At, JobId)>)>,
    loose: Vec<Place>,
    next_loose: usize,
    drf: Option<Box<DrfWalk>>,
}
