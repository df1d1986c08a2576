//! The parts of a job's life the room records from what executors and
//! telemetry report: a checkpoint written, GPU samples, step counters, and
//! the end of a job (done, failed or cancelled) with what it leaves behind
//! in the books, the counters and its wait alarm.
//!
//! Decides nothing; every function takes the parts it writes, and the end of
//! a job, which touches four, is `Life`'s.

use std::collections::BTreeSet;

use super::fleet::Fleet;
use super::journal::{Journal, Stats};
use super::waits::Waits;
use crate::ckpt::CheckpointPolicy;
use crate::cost::Books;
use crate::domain::cluster::Node;
use crate::domain::event::GpuSample;
use crate::domain::ids::{GpuRef, JobId};
use crate::domain::job::{AfterCheckpoint, JobState, Phase};
use crate::domain::units::At;
use crate::sched::MaxWait;

/// The jobs with an allocation on any GPU of the node.
pub fn jobs_on(node: &Node) -> BTreeSet<JobId> {
    node.gpus.iter().flat_map(|g| g.allocations.iter().map(|a| a.job)).collect()
}

/// The parts the end of a job touches.
pub struct Life<'a> {
    pub fleet: &'a mut Fleet,
    pub books: &'a mut Books,
    pub journal: &'a mut Journal,
    pub max_wait: &'a MaxWait,
}

impl Life<'_> {
    /// Ends a job: its final state, its output in the tenant's books, its
    /// wait alarm group updated, the counters.
    pub fn finish(&mut self, at: At, id: JobId, state: JobState) -> Result<(), String> {
        let (fleet, books, journal, max_wait) = (&mut *self.fleet, &mut *self.books, &mut *self.journal, self.max_wait);
        let done = state.phase() == Phase::Done;
        fleet.transition(at, id, state)?;
        let job = fleet.job_mut(id)?;
        job.finished_at = Some(at);
        let job_submitted = job.submitted_at;
        if job.waited_secs == 0 && job.attempts == 0 {
            job.waited_secs = (at - job.queued_since).num_seconds().max(0);
        }
        let (tenant, cost, requests, tokens) = (job.spec.tags.tenant.clone(), job.cost + job.service_cost, job.requests, job.tokens);
        let class = job.spec.class;
        books.record_done_output(&tenant, cost, requests, tokens);
        fleet.forget_finished(id);
        fleet.unhold(id, Some(at));
        fleet.rates.remove(&id);
        fleet.retired.finished(at, id);
        // The effect of a clear is not needed: the alarm list is the state.
        let mut cleared = Vec::new();
        Waits { limits: max_wait, fleet, journal }.group_left(at, &tenant, class, &mut cleared);
        if done {
            journal.stats.done += 1;
            journal.stats.jct_secs_sum += (at - job_submitted).num_seconds().max(0);
        } else {
            journal.stats.failed += 1;
        }
        Ok(())
    }
}

/// A checkpoint a job reports: checked against its state and its steps,
/// recorded; returns what the job does next.
pub fn record_checkpoint(fleet: &mut Fleet, stats: &mut Stats, at: At, id: JobId, step: u64, bytes: u64) -> Result<AfterCheckpoint, String> {
    let job = fleet.job_mut(id)?;
    let JobState::Checkpointing { then } = job.state.clone() else {
        return Err(format!("job {id} reported a checkpoint while {}", job.phase().label()));
    };
    if step > job.spec.steps_total || step < job.steps_saved {
        return Err(format!("job {id} reported a checkpoint at step {step}, outside {}..={}", job.steps_saved, job.spec.steps_total));
    }
    job.steps_saved = step;
    if let Some(asked) = job.checkpoint_asked_at.take() {
        let secs = (at - asked).num_milliseconds() as f64 / 1000.0;
        job.checkpoint_secs = Some(job.checkpoint_secs.map_or(secs, |old| 0.5 * old + 0.5 * secs));
    }
    // The checkpoint is evidence of progress that telemetry may not have shown yet.
    job.steps_done = job.steps_done.max(step);
    job.last_checkpoint_at = Some(at);
    job.checkpoints += 1;
    job.checkpoint_bytes += bytes;
    stats.checkpoints += 1;
    stats.checkpoint_bytes += bytes;
    Ok(then)
}

/// GPU samples onto their GPUs: the GPUs seen (with their utilization) and
/// how many samples named no GPU or carried a non-finite figure.
pub fn record_samples(fleet: &mut Fleet, at: At, gpus: &[GpuSample]) -> (Vec<(GpuRef, f32)>, usize) {
    let mut unknown = 0usize;
    let mut seen = Vec::with_capacity(gpus.len());
    for GpuSample(gpu_ref, util, mem) in gpus {
        match fleet.gpu_mut(*gpu_ref) {
            Some(gpu) if util.is_finite() => {
                let util = util.clamp(0.0, 100.0);
                gpu.util = Some(util);
                gpu.mem_used = Some((*mem).min(gpu.memory));
                gpu.sampled_at = Some(at);
                gpu.stale = false;
                seen.push((*gpu_ref, util));
            }
            _ => unknown += 1,
        }
    }
    (seen, unknown)
}

/// Step counters of running jobs (they only grow) and their progress rates;
/// returns how many named no job.
pub fn record_progress(fleet: &mut Fleet, policy: &CheckpointPolicy, at: At, progress: &[(JobId, u64)]) -> usize {
    let mut unknown = 0usize;
    for (id, steps) in progress {
        let Some(job) = fleet.jobs.get_mut(id) else {
            unknown += 1;
            continue;
        };
        if matches!(job.phase(), Phase::Running | Phase::Checkpointing) {
            let steps = (*steps).min(job.spec.steps_total);
            if steps >= job.steps_done {
                // The first work past the last save: a save may now be due.
                let crossed = job.steps_done <= job.steps_saved && steps > job.steps_saved;
                job.steps_done = steps;
                fleet.rates.entry(*id).or_default().observe(at, steps);
                if crossed {
                    fleet.note_checkpoint_due(policy, *id);
                }
            }
        }
    }
    unknown
}
