//! The room's handlers for jobs' events: submitted (alone or a batch, each
//! checked and queued), started, a checkpoint written, stopped as asked,
//! exited on its own, telemetry (GPU samples, step counters, idle reclaim,
//! the spot watcher's look at the jobs it moved), and a serving job's output.
//!
//! An `impl Room`; the parts come through `Room`'s lenders.

use super::journal::Severity;
use super::{Room, life, sched};
use crate::cost::ledger::{LineKind, per_gib};
use crate::domain::cluster::BillingMode;
use crate::domain::event::{Effect, GpuSample};
use crate::domain::ids::JobId;
use crate::domain::job::{AfterCheckpoint, Job, JobSpec, JobState, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, HORIZON_SECS};

impl Room {
    /// Many jobs at once: each checked and queued alone (a bad one is refused
    /// alone), one scheduling pass for all after.
    pub(super) fn on_submit_batch(&mut self, at: At, specs: &[JobSpec], effects: &mut Vec<Effect>) -> Result<(), String> {
        for spec in specs {
            if let Err(reason) = self.on_submit(at, spec) {
                effects.extend(self.journal.reject(at, reason));
            }
        }
        Ok(())
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), String> {
        let name = clean(&spec.name);
        if self.fleet.jobs.contains_key(&spec.id) || self.fleet.retired.contains(spec.id) {
            return Err(format!("job {} ({name}) already exists", spec.id));
        }
        if spec.gpus == 0 || spec.gpus > self.config.max_gpus_per_job {
            return Err(format!("job {} ({name}) asks {} GPUs (1..={} allowed)", spec.id, spec.gpus, self.config.max_gpus_per_job));
        }
        if spec.gpu_mem.0 == 0 {
            return Err(format!("job {} ({name}) asks no GPU memory", spec.id));
        }
        if spec.steps_total == 0 {
            return Err(format!("job {} ({name}) has no work (0 steps)", spec.id));
        }
        if let Some(est) = spec.est_runtime
            && !(1..=HORIZON_SECS).contains(&est.0)
        {
            return Err(format!("job {} ({name}) has a run-time estimate of {} s", spec.id, est.0));
        }
        if !self.fleet.tenants.contains_key(&spec.tags.tenant) {
            return Err(format!("job {} ({name}) names unknown tenant {:?}", spec.id, clean(&spec.tags.tenant.0)));
        }
        Ok(())
    }
    pub(super) fn on_submit(&mut self, at: At, spec: &JobSpec) -> Result<(), String> {
        self.validate(spec)?;
        self.fleet.jobs.insert(spec.id, Job::new(spec.clone(), at));
        self.fleet.admit(spec.id);
        self.journal.stats.submitted += 1;
        if !self.sched.queue_dirty && sched::arrival_may_start(&self.sched, &self.config.sched, &self.fleet.tenants, spec, at) {
            self.sched.queue_dirty = true;
        }
        Ok(())
    }
    pub(super) fn on_started(&mut self, at: At, id: JobId) -> Result<(), String> {
        self.fleet.transition(at, id, JobState::Running)?;
        let job = self.fleet.job_mut(id)?;
        job.started_at = Some(at);
        self.fleet.rates.entry(id).or_default().reset();
        self.watch().refresh_risk(at, id);
        self.fleet.note_checkpoint_due(&self.config.checkpoint, id);
        Ok(())
    }
    pub(super) fn on_checkpoint_done(&mut self, at: At, id: JobId, step: u64, bytes: u64, effects: &mut Vec<Effect>) -> Result<(), String> {
        let then = life::record_checkpoint(&mut self.fleet, &mut self.journal.stats, at, id, step, bytes)?;
        let io = per_gib(bytes, self.config.cost.checkpoint_io_per_gib);
        self.costs.charge_service(at, &mut self.fleet, id, LineKind::CheckpointIo, bytes, io);
        match then {
            AfterCheckpoint::Continue => {
                self.fleet.transition(at, id, JobState::Running)?;
                self.watch().refresh_risk(at, id);
                self.fleet.note_checkpoint_due(&self.config.checkpoint, id);
                Ok(())
            }
            AfterCheckpoint::Stop(reason) => {
                if reason == StopReason::Interruption {
                    self.journal.stats.notice_saves_in_time += 1;
                }
                self.fleet.transition(at, id, JobState::Preempted { reason })?;
                effects.push(Effect::StopJob { job: id });
                Ok(())
            }
        }
    }
    pub(super) fn on_stopped(&mut self, at: At, id: JobId) -> Result<(), String> {
        let job = self.fleet.job(id)?;
        let JobState::Preempted { reason } = job.state.clone() else {
            return Err(format!("job {id} reported stopped while {}", job.phase().label()));
        };
        let pool = self.fleet.job_pool(id).map(|(k, _)| k);
        self.release(id);
        match reason {
            StopReason::Operator { actor, requeue: false } => {
                self.finish(at, id, JobState::Failed { reason: format!("cancelled by {}", clean(&actor)) })?;
            }
            StopReason::Scheduler(SchedStop::Idle) => {
                let window = self.config.sched.idle_window;
                let threshold = self.config.sched.idle_util_pct;
                self.finish(at, id, JobState::Failed { reason: format!("released: GPU below {threshold}% for {window}") })?;
            }
            _ => {
                self.requeue_from_checkpoint(at, id);
                self.steer_after_stop(id, pool, &reason);
            }
        }
        Ok(())
    }
    pub(super) fn on_exited(&mut self, at: At, id: JobId, ok: bool, message: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        let job = self.fleet.job(id)?;
        if !job.phase().holds_gpus() {
            return Err(format!("job {id} exited while {}", job.phase().label()));
        }
        let (state, severity, verb) = if ok {
            (JobState::Done, Severity::Info, "finished".to_string())
        } else {
            (JobState::Failed { reason: clean(message) }, Severity::Warn, format!("failed: {}", clean(message)))
        };
        // Check before releasing anything: a refused event changes nothing.
        if !job.phase().can_become(state.phase()) {
            return Err(format!("job {id} cannot go from {} to {}", job.phase().label(), state.phase().label()));
        }
        let name = clean(&job.spec.name);
        self.release(id);
        self.finish(at, id, state)?;
        if ok && let Some(job) = self.fleet.jobs.get_mut(&id) {
            job.steps_done = job.spec.steps_total;
        }
        if ok && let Some(job) = self.fleet.jobs.get(&id) {
            self.predictor.learn(job);
        }
        self.journal.note(at, severity, format!("{id} {name} {verb}"));
        if !ok {
            self.tripwires().job_failed(at, id, effects);
        }
        Ok(())
    }
    pub(super) fn on_telemetry(&mut self, at: At, gpus: &[GpuSample], progress: &[(JobId, u64)], effects: &mut Vec<Effect>) -> Result<(), String> {
        let (seen, mut unknown) = life::record_samples(&mut self.fleet, at, gpus);
        for (gpu_ref, util) in seen {
            self.idle().track(at, gpu_ref, util, effects);
        }
        unknown += life::record_progress(&mut self.fleet, &self.config.checkpoint, at, progress);
        let on_spot: Vec<JobId> =
            progress.iter().map(|(id, _)| *id).filter(|id| self.fleet.job_node(*id).is_some_and(|n| n.spec.billing == BillingMode::Spot)).collect();
        self.watch().judge(at, on_spot, effects);
        if unknown > 0 {
            return Err(format!("telemetry named {unknown} unknown GPU(s) or job(s), or carried a non-finite value"));
        }
        Ok(())
    }
    /// Output counters only grow; a smaller one (a restarted exporter) is kept as the floor.
    pub(super) fn on_output(&mut self, id: JobId, requests: u64, tokens: u64) -> Result<(), String> {
        let job = self.fleet.job_mut(id)?;
        job.requests = job.requests.max(requests);
        job.tokens = job.tokens.max(tokens);
        Ok(())
    }
}
