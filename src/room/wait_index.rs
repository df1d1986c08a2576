//! The queue by how long each job has waited, for the wait alarms: the jobs
//! not yet escalated per job class, and the escalated ones per tenant and
//! class (one alarm each), each longest-waiting first. The minute's check
//! reads only the jobs past their limit, and an alarm's refresh only its
//! count and its oldest job, instead of every queued job (issue 38).
//!
//! Derived, like `derived`: not serialized, never part of a room's
//! equality, kept up to date by the `Fleet` methods that move jobs in and
//! out of the queue, and rebuilt from the queue when missing. Every answer
//! is the one a scan of the queue with `Job::wait_secs` would give.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{Job, JobClass, PoolPreference};
use crate::domain::units::{At, Secs};
use crate::sched::MaxWait;

/// When a queued job would have begun waiting had all its waits been one:
/// its current wait began at `queued_since`, after `waited_secs` of earlier
/// ones. In seconds and nanoseconds, so that the whole seconds waited at any
/// moment are exactly `Job::wait_secs`'s, which truncates.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Since {
    secs: i64,
    nanos: u32,
}

impl Since {
    fn of(job: &Job) -> Since {
        Since { secs: job.queued_since.timestamp().saturating_sub(job.waited_secs), nanos: job.queued_since.timestamp_subsec_nanos() }
    }

    /// Whole seconds waited by `now` (never before the job was queued: the
    /// room's clock does not go back). The earlier the `Since`, the longer.
    fn waited_by(self, now: At) -> i64 {
        let secs = now.timestamp().saturating_sub(self.secs);
        if now.timestamp_subsec_nanos() < self.nanos { secs.saturating_sub(1) } else { secs }
    }
}

/// Queued jobs, longest waiting first (ties by id).
type ByWait = BTreeSet<(Since, JobId)>;

/// The escalated queued jobs of one tenant and class: one wait alarm.
#[derive(Clone, Debug, Default, PartialEq)]
struct Group {
    jobs: ByWait,
    spot_only: usize,
}

/// Where an indexed job sits, so it can be taken out whatever changed on it.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    since: Since,
    class: JobClass,
    /// Escalated: its tenant, and whether it may only use spot capacity by its ask.
    escalated: Option<(TenantId, bool)>,
}

/// What a wait alarm says about its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitGroup {
    pub jobs: usize,
    /// Whether any asked for spot only (and may now use any capacity).
    pub any_spot_only: bool,
    /// The job that has waited longest (the smallest id among equals).
    pub oldest: JobId,
}

/// The queued jobs by wait (see the module's doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WaitIndex {
    waiting: BTreeMap<JobClass, ByWait>,
    escalated: BTreeMap<(TenantId, JobClass), Group>,
    entries: HashMap<JobId, Entry>,
}

impl WaitIndex {
    pub fn of<'a>(queued: impl Iterator<Item = &'a Job>) -> WaitIndex {
        let mut index = WaitIndex::default();
        for job in queued {
            index.insert(job);
        }
        index
    }

    /// A job joined the queue or changed (escalated): it is re-indexed.
    pub fn insert(&mut self, job: &Job) {
        let id = job.spec.id;
        self.remove(id);
        let (since, class) = (Since::of(job), job.spec.class);
        let escalated = if job.escalated {
            let tenant = job.spec.tags.tenant.clone();
            let spot_only = job.spec.pool == PoolPreference::SpotOnly;
            let group = self.escalated.entry((tenant.clone(), class)).or_default();
            group.jobs.insert((since, id));
            group.spot_only += usize::from(spot_only);
            Some((tenant, spot_only))
        } else {
            self.waiting.entry(class).or_default().insert((since, id));
            None
        };
        self.entries.insert(id, Entry { since, class, escalated });
    }

    /// A job left the queue.
    pub fn remove(&mut self, id: JobId) {
        let Some(entry) = self.entries.remove(&id) else { return };
        let key = (entry.since, id);
        match entry.escalated {
            Some((tenant, spot_only)) => {
                let group_key = (tenant, entry.class);
                if let Some(group) = self.escalated.get_mut(&group_key) {
                    group.jobs.remove(&key);
                    group.spot_only = group.spot_only.saturating_sub(usize::from(spot_only));
                    if group.jobs.is_empty() {
                        self.escalated.remove(&group_key);
                    }
                }
            }
            None => {
                if let Some(jobs) = self.waiting.get_mut(&entry.class) {
                    jobs.remove(&key);
                    if jobs.is_empty() {
                        self.waiting.remove(&entry.class);
                    }
                }
            }
        }
    }

    /// The jobs not yet escalated that have waited past their class's limit
    /// by `now`, by id (the order a scan of the queue finds them in).
    pub fn late(&self, now: At, limits: &MaxWait) -> Vec<JobId> {
        let mut late: Vec<JobId> = Vec::new();
        for (class, jobs) in &self.waiting {
            let Secs(limit) = limits.of(*class);
            late.extend(jobs.iter().take_while(|(since, _)| since.waited_by(now) > limit).map(|(_, id)| *id));
        }
        late.sort_unstable();
        late
    }

    /// A wait alarm's group: how many, whether any is spot-only, and which
    /// waited longest by `now`; `None` when none is left.
    pub fn group(&self, tenant: &TenantId, class: JobClass, now: At) -> Option<WaitGroup> {
        let group = self.escalated.get(&(tenant.clone(), class))?;
        Some(WaitGroup { jobs: group.jobs.len(), any_spot_only: group.spot_only > 0, oldest: longest_waiting(&group.jobs, now)? })
    }
}

/// The job that has waited longest by `now`, the smallest id among equals.
/// Jobs that began at the same `Since` sort by id, so only the first of
/// each `Since` with the longest wait is read: a sweep of thousands
/// submitted at one instant costs one step, not thousands.
fn longest_waiting(jobs: &ByWait, now: At) -> Option<JobId> {
    let &(first, mut oldest) = jobs.first()?;
    let longest = first.waited_by(now);
    let mut from = first;
    while let Some(&(since, id)) = jobs.range((Bound::Excluded((from, JobId(u64::MAX))), Bound::Unbounded)).next() {
        if since.waited_by(now) < longest {
            break;
        }
        oldest = oldest.min(id);
        from = since;
    }
    Some(oldest)
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::domain::testkit::{job_spec, t};

    fn job(id: u64, class: JobClass, queued_millis: i64, waited: i64, escalated: bool) -> Job {
        let mut spec = job_spec(id, "lab", 1);
        spec.class = class;
        if id.is_multiple_of(3) {
            spec.pool = PoolPreference::SpotOnly;
        }
        let mut job = Job::new(spec, t(0));
        job.queued_since = t(0) + TimeDelta::milliseconds(queued_millis);
        job.waited_secs = waited;
        job.escalated = escalated;
        job
    }

    /// What the alarms computed before the index: a scan with `wait_secs`.
    fn scanned_late(jobs: &[Job], now: At, limits: &MaxWait) -> Vec<JobId> {
        jobs.iter().filter(|j| !j.escalated && Secs(j.wait_secs(now)) > limits.of(j.spec.class)).map(|j| j.spec.id).collect()
    }

    fn scanned_oldest(jobs: &[Job], now: At) -> Option<JobId> {
        jobs.iter().filter(|j| j.escalated).max_by_key(|j| (j.wait_secs(now), std::cmp::Reverse(j.spec.id))).map(|j| j.spec.id)
    }

    fn jobs() -> Vec<Job> {
        let classes = [JobClass::Training, JobClass::Eval, JobClass::FineTune];
        (1..=60)
            .map(|i| {
                // Sub-second arrivals, earlier waits and one instant shared by many.
                let millis = if i % 5 == 0 { 7_000 } else { (i * 37_911) % 4_000_000 };
                job(i as u64, classes[(i % 3) as usize], millis, (i % 4) * 1_000, i % 7 == 0)
            })
            .collect()
    }

    #[test]
    fn late_jobs_and_the_oldest_are_those_a_scan_finds_at_every_moment() {
        let jobs = jobs();
        let index = WaitIndex::of(jobs.iter());
        let limits = MaxWait { training: Secs(3_600), fine_tune: Secs(1_800), eval: Secs(600), batch_inference: Secs(600) };
        let tenant = jobs[0].spec.tags.tenant.clone();
        for step in 0..400 {
            let now = t(0) + TimeDelta::milliseconds(step * 12_345 + 4_000_000);
            assert_eq!(index.late(now, &limits), scanned_late(&jobs, now, &limits), "late at step {step}");
            for class in [JobClass::Training, JobClass::Eval, JobClass::FineTune] {
                let group: Vec<Job> = jobs.iter().filter(|j| j.spec.class == class).cloned().collect();
                assert_eq!(index.group(&tenant, class, now).map(|g| g.oldest), scanned_oldest(&group, now), "oldest at step {step}");
            }
        }
    }

    #[test]
    fn a_job_moved_between_late_and_escalated_is_counted_once_and_leaves_cleanly() {
        let mut jobs = jobs();
        let mut index = WaitIndex::of(jobs.iter());
        let tenant = jobs[0].spec.tags.tenant.clone();
        let before = index.group(&tenant, JobClass::Eval, t(0)).map_or(0, |g| g.jobs);
        let eval = jobs.iter_mut().find(|j| j.spec.class == JobClass::Eval && !j.escalated).unwrap();
        eval.escalated = true;
        index.insert(eval);
        assert_eq!(index.group(&tenant, JobClass::Eval, t(0)).map(|g| g.jobs), Some(before + 1));
        assert_eq!(index, WaitIndex::of(jobs.iter()), "re-indexed as a fresh build would");
        for job in &jobs {
            index.remove(job.spec.id);
        }
        assert_eq!(index, WaitIndex::default(), "nothing left behind");
    }

    #[test]
    fn a_group_tells_whether_any_job_asked_for_spot_only() {
        let spot = job(3, JobClass::Training, 0, 0, true);
        let other = job(4, JobClass::Training, 0, 0, true);
        let mut index = WaitIndex::of([&spot, &other].into_iter());
        let tenant = spot.spec.tags.tenant.clone();
        assert_eq!(index.group(&tenant, JobClass::Training, t(0)), Some(WaitGroup { jobs: 2, any_spot_only: true, oldest: JobId(3) }));
        index.remove(JobId(3));
        assert_eq!(index.group(&tenant, JobClass::Training, t(0)), Some(WaitGroup { jobs: 1, any_spot_only: false, oldest: JobId(4) }));
        index.remove(JobId(4));
        assert_eq!(index.group(&tenant, JobClass::Training, t(0)), None);
    }
}
