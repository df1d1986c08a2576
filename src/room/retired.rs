//! Finished jobs leave memory after a while: the room keeps every unfinished
//! job and those finished within `RoomConfig::retain_finished` (8 days by
//! default: a weekly report's span, with a day to spare), then retires them.
//! What stays of a retired job is its id (so the id cannot be submitted
//! again; held as ranges, a few bytes for a run of sequential ids) and its
//! share of the totals that must still add up (instance and service cost).
//! Everything else about it is in the event log and the ledger.
//!
//! Without this, memory grew with every job ever seen (about 1 KB each: a
//! simulated 3,000 hours held 43,000 finished jobs, 254 MB resident).
//! Retirement happens at the same simulated moments in a run and in its
//! replay, so both hold the same jobs.
//!
//! Owns the retired ids and totals; never touches an unfinished job.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::domain::ids::JobId;
use crate::domain::units::{At, Micros};

/// Finished jobs, oldest first, waiting to retire; and what is left of the retired.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Retired {
    /// (finished at, job), in the order they finished.
    waiting: VecDeque<(At, JobId)>,
    /// Retired ids as inclusive ranges: start → end.
    ranges: BTreeMap<u64, u64>,
    pub count: u64,
    pub cost: Micros,
    pub service_cost: Micros,
}

impl Retired {
    /// A job finished at `at`: it retires once it is older than the retention.
    pub fn finished(&mut self, at: At, id: JobId) {
        self.waiting.push_back((at, id));
    }

    /// Whether `id` belonged to a job that was retired.
    pub fn contains(&self, id: JobId) -> bool {
        self.ranges.range(..=id.0).next_back().is_some_and(|(_, end)| id.0 <= *end)
    }

    /// The jobs that finished before `cutoff`, taken off the waiting list.
    pub fn due(&mut self, cutoff: At) -> Vec<JobId> {
        let mut out = Vec::new();
        while let Some(&(at, id)) = self.waiting.front() {
            if at >= cutoff {
                break;
            }
            self.waiting.pop_front();
            out.push(id);
        }
        out
    }

    /// Records a retired job's id and its share of the totals.
    pub fn retire(&mut self, id: JobId, cost: Micros, service_cost: Micros) {
        self.count += 1;
        self.cost += cost;
        self.service_cost += service_cost;
        let n = id.0;
        let below = self.ranges.range(..=n).next_back().map(|(s, e)| (*s, *e));
        if below.is_some_and(|(_, e)| n <= e) {
            return;
        }
        let mut start = n;
        let mut end = n;
        if let Some((s, e)) = below
            && e.checked_add(1) == Some(n)
        {
            start = s;
            self.ranges.remove(&s);
        }
        if let Some(next) = n.checked_add(1)
            && let Some(e) = self.ranges.remove(&next)
        {
            end = e;
        }
        self.ranges.insert(start, end);
    }

    /// How many ranges hold the retired ids (a measure of their memory).
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_merge_into_ranges_and_are_found_again() {
        let mut r = Retired::default();
        for id in [5, 3, 4, 10, 1, 11, 9] {
            r.retire(JobId(id), Micros(1), Micros(0));
        }
        assert_eq!(r.ranges.iter().map(|(s, e)| (*s, *e)).collect::<Vec<_>>(), vec![(1, 1), (3, 5), (9, 11)]);
        assert!([1, 3, 4, 5, 9, 10, 11].iter().all(|&i| r.contains(JobId(i))));
        assert!(![0, 2, 6, 8, 12].iter().any(|&i| r.contains(JobId(i))));
        r.retire(JobId(2), Micros(1), Micros(0));
        assert_eq!(r.ranges(), 2);
        assert_eq!((r.count, r.cost), (8, Micros(8)));
        r.retire(JobId(u64::MAX), Micros(0), Micros(0));
        assert!(r.contains(JobId(u64::MAX)));
    }

    #[test]
    fn only_jobs_older_than_the_cutoff_are_due_in_finishing_order() {
        let mut r = Retired::default();
        let t = |s: i64| chrono::DateTime::from_timestamp(s, 0).unwrap();
        r.finished(t(10), JobId(2));
        r.finished(t(20), JobId(1));
        r.finished(t(30), JobId(3));
        assert_eq!(r.due(t(20)), vec![JobId(2)]);
        assert_eq!(r.due(t(31)), vec![JobId(1), JobId(3)]);
        assert!(r.due(t(99)).is_empty());
    }
}
