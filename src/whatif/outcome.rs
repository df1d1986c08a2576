//! What a run came to, as the what-if compares it: one `Scorer` watches a
//! room's events and effects (the recorded run replayed, or a re-run under
//! another policy) and sums the same figures for both, over one window.
//!
//! Owns the figures and how each is counted; knows nothing of where the
//! events come from, and never touches the room but to read its counters
//! and, at the end, its queue.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::domain::event::{Effect, Event};
use crate::domain::ids::JobId;
use crate::domain::job::Phase;
use crate::domain::ledger::LineKind;
use crate::domain::units::{At, Micros};
use crate::room::Room;
use crate::room::journal::Stats;

/// The span the figures count: `[from, until)`; open ends take the run's.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub from: Option<At>,
    pub until: Option<At>,
}

impl Window {
    pub fn holds(&self, at: At) -> bool {
        self.from.is_none_or(|f| at >= f) && self.until.is_none_or(|u| at < u)
    }
}

/// The figures of one column. Money is what the ledger charged for charge
/// periods that start in the window (as `gpuroom export` counts it);
/// waits and completion times are of jobs first placed, or finished, in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Instance spend (compute and idle) by billing mode, `BillingMode::index` order.
    pub spend_by_mode: [Micros; 3],
    /// The part of instance spend no job held.
    pub idle: Micros,
    /// Storage, checkpoint I/O and network on top of instance spend.
    pub services: Micros,
    /// Compute and services charged to each tenant (idle belongs to no one).
    pub spend_by_tenant: BTreeMap<String, Micros>,
    /// GPU-hours paid for, and those a job held.
    pub gpu_hours: f64,
    pub gpu_hours_busy: f64,
    pub submitted: u64,
    pub finished: u64,
    pub failed: u64,
    /// Queue waits, submission to first placement, seconds, sorted.
    pub waits: Vec<i64>,
    /// Completion times, submission to a good exit, seconds: sum and count.
    pub jct_secs_sum: i64,
    pub jct_count: u64,
    /// Running jobs the scheduler stopped for others, and requeues.
    pub preemptions: u64,
    pub requeues: u64,
    /// Spot interruption notices, and instances lost.
    pub interruptions: u64,
    pub nodes_lost: u64,
    /// Steps done again after a stop without a fresh checkpoint.
    pub recomputed_steps: u64,
    pub checkpoint_bytes: u64,
    /// Times a tenant's budget level changed upward to notify, limit or block.
    pub budget_crossings: u64,
    /// Still queued when the window closed.
    pub queued_at_end: u64,
}

impl Outcome {
    pub fn spend(&self) -> Micros {
        self.spend_by_mode.iter().copied().sum()
    }

    pub fn idle_share(&self) -> f64 {
        let spend = self.spend();
        if spend.0 > 0 { self.idle.0 as f64 / spend.0 as f64 } else { 0.0 }
    }

    pub fn mean_wait_secs(&self) -> Option<f64> {
        (!self.waits.is_empty()).then(|| self.waits.iter().sum::<i64>() as f64 / self.waits.len() as f64)
    }

    /// The nearest-rank 95th percentile.
    pub fn p95_wait_secs(&self) -> Option<i64> {
        let n = self.waits.len();
        (n > 0).then(|| self.waits[((n * 95).div_ceil(100)).clamp(1, n) - 1])
    }

    pub fn mean_jct_secs(&self) -> Option<f64> {
        (self.jct_count > 0).then(|| self.jct_secs_sum as f64 / self.jct_count as f64)
    }
}

/// Watches one room's run and sums its `Outcome`.
#[derive(Debug)]
pub struct Scorer {
    window: Window,
    submitted_at: HashMap<JobId, At>,
    placed: HashSet<JobId>,
    /// The room's counters before the window's first event, and after its last.
    stats_before: Option<Stats>,
    stats_in: Stats,
    last_stats: Stats,
    out: Outcome,
}

impl Scorer {
    pub fn new(window: Window) -> Scorer {
        Scorer {
            window,
            submitted_at: HashMap::new(),
            placed: HashSet::new(),
            stats_before: None,
            stats_in: Stats::default(),
            last_stats: Stats::default(),
            out: Outcome::default(),
        }
    }

    /// One event the room applied at `at`, the effects it gave, and the
    /// room's counters after it.
    pub fn observe(&mut self, at: At, event: &Event, effects: &[Effect], stats: &Stats) {
        // Known before the window too: a wait that ends in it counts whole.
        for spec in event.submitted() {
            self.submitted_at.entry(spec.id).or_insert(at);
        }
        let inside = self.window.holds(at);
        if inside {
            if self.stats_before.is_none() {
                self.stats_before = Some(self.last_stats.clone());
            }
            self.count(at, event, effects);
            self.stats_in = stats.clone();
        } else {
            // Placements before the window are first placements all the same.
            for effect in effects {
                if let Effect::StartJob { job, .. } = effect {
                    self.placed.insert(*job);
                }
            }
        }
        self.last_stats = stats.clone();
    }

    fn count(&mut self, at: At, event: &Event, effects: &[Effect]) {
        let out = &mut self.out;
        match event {
            Event::JobSubmitted { .. } | Event::JobsSubmitted { .. } => out.submitted += event.submitted().len() as u64,
            Event::JobExited { job, ok: true, .. } => {
                out.finished += 1;
                if let Some(&submitted) = self.submitted_at.get(job) {
                    out.jct_secs_sum += (at - submitted).num_seconds();
                    out.jct_count += 1;
                }
            }
            Event::JobExited { ok: false, .. } => out.failed += 1,
            Event::CheckpointDone { bytes, .. } => out.checkpoint_bytes += bytes,
            _ => {}
        }
        for effect in effects {
            match effect {
                Effect::StartJob { job, .. } => {
                    if self.placed.insert(*job)
                        && let Some(&submitted) = self.submitted_at.get(job)
                    {
                        out.waits.push((at - submitted).num_seconds());
                    }
                }
                Effect::Ledger { lines } => {
                    for line in lines.iter().filter(|l| self.window.holds(l.start)) {
                        let hours = line.quantity as f64 / 3_600_000.0;
                        if line.kind.is_instance() {
                            out.spend_by_mode[line.billing.index()] += line.amount;
                            out.gpu_hours += hours;
                        } else {
                            out.services += line.amount;
                        }
                        match line.kind {
                            LineKind::Idle => out.idle += line.amount,
                            LineKind::Compute => out.gpu_hours_busy += hours,
                            _ => {}
                        }
                        if let Some(tags) = &line.tags {
                            *out.spend_by_tenant.entry(tags.tenant.0.clone()).or_default() += line.amount;
                        }
                    }
                }
                Effect::AlarmRaised { id, .. } if id.starts_with("budget:") => out.budget_crossings += 1,
                _ => {}
            }
        }
    }

    /// The figures, with the queue as `room` (the room watched, at the
    /// window's end) left it.
    pub fn finish(mut self, room: &Room) -> Outcome {
        let queued_at_end = room.jobs().filter(|j| j.phase() == Phase::Queued).count() as u64;
        let before = self.stats_before.unwrap_or_default();
        let after = &self.stats_in;
        let delta = |f: fn(&Stats) -> u64| f(after).saturating_sub(f(&before));
        self.out.preemptions = delta(|s| s.preemptions_by_scheduler);
        self.out.requeues = delta(|s| s.requeues);
        self.out.interruptions = delta(|s| s.notices);
        self.out.nodes_lost = delta(|s| s.nodes_lost);
        self.out.recomputed_steps = delta(|s| s.lost_steps);
        self.out.queued_at_end = queued_at_end;
        self.out.waits.sort_unstable();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_is_the_nearest_rank() {
        let mut o = Outcome { waits: (1..=20).collect(), ..Outcome::default() };
        assert_eq!(o.p95_wait_secs(), Some(19));
        o.waits = vec![7];
        assert_eq!(o.p95_wait_secs(), Some(7));
        o.waits.clear();
        assert_eq!(o.p95_wait_secs(), None);
        assert_eq!(o.mean_wait_secs(), None);
    }

    #[test]
    fn the_window_is_half_open() {
        let t = |h: i64| chrono::DateTime::from_timestamp(h * 3600, 0).unwrap();
        let w = Window { from: Some(t(1)), until: Some(t(2)) };
        assert!(!w.holds(t(0)) && w.holds(t(1)) && !w.holds(t(2)));
        assert!(Window::default().holds(t(5)));
    }
}
