//! The scheduler's policies: in which order queued jobs are considered
//! (`Discipline`), where a job goes (`placement`, best fit on GPU memory), and
//! how fragmented the cluster's free memory is (`fragmentation`).
//!
//! Pure functions over the core's data; they never touch IO, the clock, the
//! TUI or the `Room` itself (the `Room` calls them and applies the result).

pub mod fragmentation;
pub mod placement;

use serde::{Deserialize, Serialize};

use crate::core::job::Job;

/// Orders the queue. The `Room` then walks that order and places every job
/// that fits, so a discipline decides priority, never capacity.
pub trait Discipline {
    fn name(&self) -> &'static str;
    fn order(&self, queued: &mut [&Job]);
}

/// First in, first out by submission. A requeued job keeps its place: it was
/// taken off the cluster, it did not arrive late.
#[derive(Copy, Clone, Debug, Default)]
pub struct Fifo;

impl Discipline for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn order(&self, queued: &mut [&Job]) {
        queued.sort_by_key(|job| (job.submitted_at, job.spec.id));
    }
}

/// The disciplines an operator can choose; serializable so a switch is an event.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisciplineKind {
    #[default]
    Fifo,
}

impl DisciplineKind {
    pub fn discipline(self) -> &'static dyn Discipline {
        match self {
            DisciplineKind::Fifo => &Fifo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testkit::{job_spec, t};
    use crate::core::job::Job;

    #[test]
    fn fifo_orders_by_submission_and_keeps_a_requeued_job_in_front() {
        let mut early = Job::new(job_spec(1, "a", 1), t(0));
        early.requeues = 1;
        early.queued_since = t(500);
        let late = Job::new(job_spec(2, "a", 1), t(100));
        let mut queue = vec![&late, &early];
        Fifo.order(&mut queue);
        assert_eq!(queue.iter().map(|j| j.spec.id.0).collect::<Vec<_>>(), vec![1, 2]);
    }
}
