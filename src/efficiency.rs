//! The weekly efficiency report (SPEC §5): GPU utilization, output per
//! GPU-hour, mean queue wait, idle and zombie capacity, from a recorded run.
//!
//! Replays the event log (the one code path) and reads the week's ledger;
//! zombie capacity is GPU time held by jobs whose GPUs reported less than
//! the idle threshold. Reads the store; writes nothing.

use std::fmt;

use crate::cost::ledger::LineKind;
use crate::domain::event::{Event, GpuSample};
use crate::domain::units::{At, Micros};
use crate::room::Room;
use crate::store::{Store, StoreError};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Efficiency {
    pub from: At,
    pub to: At,
    /// GPU-hours held by jobs, and left idle, from the ledger.
    pub allocated_gpu_hours: f64,
    pub idle_gpu_hours: f64,
    pub spend: Micros,
    pub idle_spend: Micros,
    /// Mean measured utilization of GPUs that jobs held (time-weighted).
    pub busy_util_pct: f64,
    /// GPU-hours held by jobs while their GPU ran below the idle threshold.
    pub zombie_gpu_hours: f64,
    pub idle_threshold_pct: f32,
    /// Steps, requests and tokens produced in the week, per allocated GPU-hour.
    pub steps: u64,
    pub requests: u64,
    pub tokens: u64,
    pub placements: u64,
    pub mean_wait_secs: f64,
    pub jobs_done: u64,
}

impl Efficiency {
    pub fn utilization(&self) -> f64 {
        let total = self.allocated_gpu_hours + self.idle_gpu_hours;
        if total > 0.0 { self.allocated_gpu_hours / total } else { 0.0 }
    }

    fn per_gpu_hour(&self, n: u64) -> f64 {
        if self.allocated_gpu_hours > 0.0 { n as f64 / self.allocated_gpu_hours } else { 0.0 }
    }
}

/// The week `[from, from + 7 days)` of the run in `store`.
pub fn weekly(store: &Store, from: At) -> Result<Efficiency, StoreError> {
    let to = from + chrono::TimeDelta::days(7);
    let mut report = Efficiency { from, to, ..Efficiency::default() };
    for line in store.ledger_lines(from, to)? {
        let hours = line.quantity as f64 / 3_600_000.0;
        match line.kind {
            LineKind::Compute => report.allocated_gpu_hours += hours,
            LineKind::Idle => {
                report.idle_gpu_hours += hours;
                report.idle_spend += line.amount;
            }
            _ => {}
        }
        report.spend += line.amount;
    }

    let mut room = Room::new(store.meta()?.room_config);
    let threshold = room.config().sched.idle_util_pct;
    report.idle_threshold_pct = threshold;
    let mut at_start: Option<(u64, i64, u64)> = None;
    let mut progress_at_start: std::collections::BTreeMap<u64, (u64, u64, u64)> = Default::default();
    let mut last_telemetry: Option<At> = None;
    let (mut util_weighted, mut busy_secs) = (0.0f64, 0.0f64);
    store.for_each_event(0, |_, at, event| {
        if at >= to {
            return;
        }
        if at >= from && at_start.is_none() {
            let s = room.stats();
            at_start = Some((s.wait_count, s.wait_secs_sum, s.done));
            for job in room.jobs() {
                progress_at_start.insert(job.spec.id.0, (job.steps_done, job.requests, job.tokens));
            }
        }
        if let Event::Telemetry { gpus, .. } = &event
            && at >= from
        {
            let dt = last_telemetry.map_or(0.0, |last| (at - last).num_milliseconds() as f64 / 1000.0);
            for GpuSample(gpu, util, _) in gpus {
                let held = room.node(gpu.node).and_then(|n| n.gpus.get(usize::from(gpu.index))).is_some_and(|g| !g.allocations.is_empty());
                if held && util.is_finite() {
                    util_weighted += f64::from(*util) * dt;
                    busy_secs += dt;
                    if *util < threshold {
                        report.zombie_gpu_hours += dt / 3600.0;
                    }
                }
            }
        }
        if let Event::Telemetry { .. } = &event {
            last_telemetry = Some(at);
        }
        room.apply(at, &event);
    })?;
    report.busy_util_pct = if busy_secs > 0.0 { util_weighted / busy_secs } else { 0.0 };
    let s = room.stats();
    let (count0, wait0, done0) = at_start.unwrap_or((s.wait_count, s.wait_secs_sum, s.done));
    report.placements = s.wait_count - count0;
    report.mean_wait_secs = if report.placements > 0 { (s.wait_secs_sum - wait0) as f64 / report.placements as f64 } else { 0.0 };
    report.jobs_done = s.done - done0;
    for job in room.jobs() {
        let (steps, requests, tokens) = progress_at_start.get(&job.spec.id.0).copied().unwrap_or_default();
        // Finished jobs keep their last counts; a requeue may lower steps (recompute), never below the start.
        report.steps += job.steps_done.saturating_sub(steps);
        report.requests += job.requests.saturating_sub(requests);
        report.tokens += job.tokens.saturating_sub(tokens);
    }
    Ok(report)
}

impl fmt::Display for Efficiency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "efficiency {} to {}", self.from.format("%Y-%m-%d"), self.to.format("%Y-%m-%d"))?;
        writeln!(
            f,
            "  GPU time      {:.1} GPU-h held by jobs, {:.1} idle: {:.1}% allocated",
            self.allocated_gpu_hours,
            self.idle_gpu_hours,
            100.0 * self.utilization()
        )?;
        writeln!(f, "  measured      {:.1}% mean utilization of held GPUs", self.busy_util_pct)?;
        writeln!(
            f,
            "  zombie        {:.1} GPU-h held below {}% utilization ({:.1}% of held time)",
            self.zombie_gpu_hours,
            self.idle_threshold_pct,
            if self.allocated_gpu_hours > 0.0 { 100.0 * self.zombie_gpu_hours / self.allocated_gpu_hours } else { 0.0 }
        )?;
        writeln!(f, "  spend         {} in all, {} of it idle", self.spend, self.idle_spend)?;
        writeln!(
            f,
            "  output        {:.0} steps, {:.0} requests, {:.0} tokens per held GPU-hour",
            self.per_gpu_hour(self.steps),
            self.per_gpu_hour(self.requests),
            self.per_gpu_hour(self.tokens)
        )?;
        writeln!(f, "  queue         {} placements, mean wait {:.0} s; {} jobs done", self.placements, self.mean_wait_secs, self.jobs_done)
    }
}
