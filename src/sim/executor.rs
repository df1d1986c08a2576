//! The simulated executor: runs jobs on simulated GPUs at their true speed,
//! writes checkpoints at a bandwidth, stops on request, crashes now and then,
//! and reports GPU utilization and memory the way NVML would.

use std::collections::{BTreeMap, HashMap};

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::workload::SimJob;
use crate::ckpt::CheckpointKind;
use crate::domain::cluster::NodeSpec;
use crate::domain::event::{Effect, Event, GpuSample};
use crate::domain::ids::{GpuRef, JobId, NodeId};
use crate::domain::job::JobClass;
use crate::domain::units::{At, Mib};

/// A CUDA context takes 3–5 s to initialize (SPEC §2).
const CUDA_INIT_SECS: f64 = 4.0;
const STOP_SECS: f64 = 2.0;

#[derive(Clone, Debug)]
pub enum Step {
    Ready {
        job: JobId,
        run: u64,
    },
    Finish {
        job: JobId,
        run: u64,
        at: At,
    },
    /// The run stops progressing and idles (a hung dataloader, a stuck notebook).
    Hang {
        job: JobId,
        run: u64,
        at: At,
    },
    CheckpointWritten {
        job: JobId,
        run: u64,
        step: u64,
        bytes: u64,
    },
    Stopped {
        job: JobId,
        run: u64,
    },
}

#[derive(Clone, Debug)]
struct Run {
    id: u64,
    node: NodeId,
    gpus: Vec<u8>,
    ready: bool,
    saving: bool,
    base_step: u64,
    base_at: At,
    /// Step of the last save this run knows of (what an incremental save is relative to).
    saved_step: u64,
    /// Steps per second on this node.
    rate: f64,
    /// Step at which this run crashes, if it does.
    crash_at_step: Option<u64>,
    /// Step at which this run hangs, if it does; `hung` once it has.
    hang_at_step: Option<u64>,
    hung: bool,
    finish_at: Option<At>,
    /// Phase of the memory-use wave of a training job (radians).
    wave: f64,
}

pub struct Executor {
    jobs: BTreeMap<JobId, SimJob>,
    runs: BTreeMap<JobId, Run>,
    speeds: BTreeMap<NodeId, f64>,
    failure_rate: f64,
    hang_rate: f64,
    checkpoint_mib_per_sec: u32,
    incremental_share_per_step: f64,
    next_run: u64,
    /// Runs told to stop, until they have: the run and its node.
    stopping: BTreeMap<JobId, (u64, NodeId)>,
    /// Work of the jobs that finished, in V100 GPU-seconds: what a fleet
    /// delivered, whatever GPUs it ran on (the cost figure's denominator).
    pub work_done_secs: f64,
}

impl Executor {
    pub fn new(speeds: BTreeMap<NodeId, f64>, failure_rate: f64, hang_rate: f64, checkpoint_mib_per_sec: u32, incremental_share_per_step: f64) -> Executor {
        Executor {
            jobs: BTreeMap::new(),
            runs: BTreeMap::new(),
            speeds,
            work_done_secs: 0.0,
            stopping: BTreeMap::new(),
            failure_rate,
            hang_rate,
            checkpoint_mib_per_sec,
            incremental_share_per_step: if incremental_share_per_step.is_finite() { incremental_share_per_step.max(0.0) } else { 1.0 },
            next_run: 1,
        }
    }

    pub fn know(&mut self, job: SimJob) {
        self.jobs.insert(job.spec.id, job);
    }

    fn steps_at(&self, job: JobId, at: At) -> u64 {
        let (Some(run), Some(sim)) = (self.runs.get(&job), self.jobs.get(&job)) else { return 0 };
        steps_of(run, sim, at)
    }

    fn schedule_finish(&mut self, job: JobId, out: &mut Vec<(At, Step)>) {
        let (Some(run), Some(sim)) = (self.runs.get_mut(&job), self.jobs.get(&job)) else { return };
        if run.hung {
            return;
        }
        let end = run.crash_at_step.unwrap_or(sim.spec.steps_total).max(run.base_step);
        let hangs_first = run.hang_at_step.filter(|h| *h >= run.base_step && *h < end);
        let target = hangs_first.unwrap_or(end);
        let secs = (target - run.base_step) as f64 / run.rate.max(1e-9);
        let at = after(run.base_at, secs);
        run.finish_at = Some(at);
        let step = if hangs_first.is_some() { Step::Hang { job, run: run.id, at } } else { Step::Finish { job, run: run.id, at } };
        out.push((at, step));
    }

    pub fn handle(&mut self, at: At, effect: &Effect, rng: &mut ChaCha8Rng, out: &mut Vec<(At, Step)>) {
        match effect {
            Effect::StartJob { job, node, gpus, resume_step } => {
                let Some(sim) = self.jobs.get(job) else { return };
                let speed = self.speeds.get(node).copied().unwrap_or(1.0);
                let restore = if *resume_step > 0 { f64::from(sim.spec.checkpoint_size.0) / f64::from(self.checkpoint_mib_per_sec) } else { 0.0 };
                let startup = CUDA_INIT_SECS + restore + rng.random_range(10.0..60.0);
                let remaining = sim.spec.steps_total.saturating_sub(*resume_step);
                let drawn = (rng.random::<f64>() < self.failure_rate && remaining > 1).then(|| resume_step + rng.random_range(1..remaining));
                let crash_at_step = sim.fails_at_step.filter(|s| s > resume_step).or(drawn);
                let hang_at_step = (rng.random::<f64>() < self.hang_rate && remaining > 1).then(|| resume_step + rng.random_range(1..remaining));
                let id = self.next_run;
                self.next_run += 1;
                self.runs.insert(
                    *job,
                    Run {
                        id,
                        node: *node,
                        gpus: gpus.clone(),
                        ready: false,
                        saving: false,
                        base_step: *resume_step,
                        base_at: at,
                        saved_step: *resume_step,
                        rate: speed / sim.step_secs,
                        crash_at_step,
                        hang_at_step,
                        hung: false,
                        finish_at: None,
                        wave: rng.random_range(0.0..std::f64::consts::TAU),
                    },
                );
                out.push((after(at, startup), Step::Ready { job: *job, run: id }));
            }
            Effect::Checkpoint { job, kind } => {
                let step = self.steps_at(*job, at);
                let (Some(run), Some(sim)) = (self.runs.get_mut(job), self.jobs.get(job)) else { return };
                if !run.ready || run.saving {
                    return;
                }
                let full = f64::from(sim.spec.checkpoint_size.0);
                let mib = match kind {
                    CheckpointKind::Full => full,
                    CheckpointKind::Incremental => {
                        let changed = (step.saturating_sub(run.saved_step) as f64 * self.incremental_share_per_step).min(1.0);
                        (full * changed).max(1.0)
                    }
                };
                run.saving = true;
                run.base_step = step;
                run.saved_step = step;
                run.finish_at = None;
                let secs = mib / f64::from(self.checkpoint_mib_per_sec);
                let bytes = (mib * 1_048_576.0) as u64;
                out.push((after(at, secs), Step::CheckpointWritten { job: *job, run: run.id, step, bytes }));
            }
            Effect::StopJob { job } => {
                if let Some(run) = self.runs.remove(job) {
                    self.stopping.insert(*job, (run.id, run.node));
                    out.push((after(at, STOP_SECS), Step::Stopped { job: *job, run: run.id }));
                }
            }
            Effect::AlarmRaised { .. } | Effect::AlarmCleared { .. } | Effect::Rejected { .. } | Effect::Ledger { .. } => {}
            // The simulated world has no Slurm cluster: no snapshot, so no command.
            // Slurm is not simulated; capacity is the world's (`Simulation::handle`), not the executor's.
            Effect::Slurm { .. } | Effect::Audit { .. } | Effect::Launch { .. } | Effect::Release { .. } => {}
        }
    }

    /// Carries out a scheduled step; stale steps (a run that was stopped or
    /// rescheduled since) produce nothing.
    pub fn happen(&mut self, at: At, step: Step, rng: &mut ChaCha8Rng) -> (Option<Event>, Vec<(At, Step)>) {
        let mut more = Vec::new();
        let current = |runs: &BTreeMap<JobId, Run>, job: &JobId, id: u64| runs.get(job).is_some_and(|r| r.id == id);
        let event = match step {
            Step::Ready { job, run } if current(&self.runs, &job, run) => {
                if let Some(r) = self.runs.get_mut(&job) {
                    r.ready = true;
                    r.base_at = at;
                }
                self.schedule_finish(job, &mut more);
                Some(Event::JobStarted { job })
            }
            Step::Finish { job, run, at: when } if current(&self.runs, &job, run) && self.runs[&job].finish_at == Some(when) => {
                let crashed = self.runs.get(&job).and_then(|r| r.crash_at_step).is_some();
                self.runs.remove(&job);
                // A job that exits well never runs again: the world forgets it,
                // as the room retires it (a crashed one may be requeued).
                if !crashed && let Some(sim) = self.jobs.remove(&job) {
                    self.work_done_secs += sim.spec.steps_total as f64 * sim.step_secs * f64::from(sim.spec.gpus);
                }
                let message = if crashed {
                    ["CUDA error: out of memory", "NCCL watchdog timeout", "dataloader worker killed (signal 9)"][rng.random_range(0..3)]
                } else {
                    "exit 0"
                };
                Some(Event::JobExited { job, ok: !crashed, message: message.to_string() })
            }
            Step::Hang { job, run, at: when } if current(&self.runs, &job, run) && self.runs[&job].finish_at == Some(when) => {
                let step = self.steps_at(job, at);
                if let Some(r) = self.runs.get_mut(&job) {
                    r.base_step = step;
                    r.hung = true;
                    r.finish_at = None;
                }
                None
            }
            Step::CheckpointWritten { job, run, step, bytes } if current(&self.runs, &job, run) => {
                if let Some(r) = self.runs.get_mut(&job) {
                    r.saving = false;
                    r.base_at = at;
                }
                self.schedule_finish(job, &mut more);
                Some(Event::CheckpointDone { job, step, bytes })
            }
            // A run whose node was lost while it stopped says nothing: the room
            // took the loss for the stop (and may have placed the job again).
            Step::Stopped { job, run } => (self.stopping.get(&job).map(|(id, _)| *id) == Some(run)).then(|| {
                self.stopping.remove(&job);
                Event::JobStopped { job }
            }),
            _ => None,
        };
        (event, more)
    }

    /// A node the room bought: its GPUs' speed.
    pub fn set_speed(&mut self, node: NodeId, speed: f64) {
        self.speeds.insert(node, speed);
    }

    /// The instance is gone with everything on it, runs stopping included.
    pub fn node_lost(&mut self, node: NodeId) {
        self.runs.retain(|_, r| r.node != node);
        self.stopping.retain(|_, (_, n)| *n != node);
    }

    /// GPU samples for every GPU of the up nodes, and progress of running jobs.
    pub fn telemetry(&self, at: At, nodes: &[&NodeSpec], rng: &mut ChaCha8Rng) -> (Vec<GpuSample>, Vec<(JobId, u64)>) {
        let t = at.timestamp() as f64;
        // One slot per GPU of the up nodes, in the order the samples go out.
        let mut first_slot: HashMap<NodeId, (usize, u8)> = HashMap::with_capacity(nodes.len());
        let mut slots = 0usize;
        for node in nodes {
            first_slot.insert(node.id, (slots, node.gpu_count));
            slots += usize::from(node.gpu_count);
        }
        let mut per_gpu = vec![(0.0f64, 0.0f64); slots];
        // Progress of the runs that are ready, in the runs' order, read in
        // the same pass (a job the executor does not know is at step 0).
        let mut progress = Vec::with_capacity(self.runs.len());
        for (job, run) in &self.runs {
            let sim = self.jobs.get(job);
            if run.ready {
                progress.push((*job, sim.map_or(0, |sim| steps_of(run, sim, at))));
            }
            let Some(sim) = sim else { continue };
            let (util, mem_frac) = if run.hung {
                (rng.random_range(0.0..2.0), 0.6)
            } else if !run.ready {
                (rng.random_range(3.0..15.0), 0.3)
            } else if run.saving {
                (rng.random_range(5.0..20.0), 0.9)
            } else {
                let util = (sim.util + rng.random_range(-6.0..6.0)).clamp(0.0, 100.0);
                let mem = match sim.spec.class {
                    // Training memory swings over iterations (SPEC §2: >30%).
                    JobClass::Training | JobClass::FineTune => 0.78 + 0.2 * (t / 600.0 + run.wave).sin(),
                    JobClass::Eval | JobClass::BatchInference => 0.85 + rng.random_range(-0.05..0.05),
                };
                (util, mem)
            };
            // A run on a node that is not up (or a GPU it does not have) is not sampled.
            let Some(&(first, count)) = first_slot.get(&run.node) else { continue };
            for gpu in run.gpus.iter().filter(|g| **g < count) {
                let e = &mut per_gpu[first + usize::from(*gpu)];
                e.0 += util;
                e.1 += f64::from(sim.spec.gpu_mem.0) * mem_frac;
            }
        }
        let mut samples = Vec::with_capacity(slots);
        for node in nodes {
            let (first, _) = first_slot[&node.id];
            for index in 0..node.gpu_count {
                let gpu = GpuRef { node: node.id, index };
                let (util, mem) = per_gpu[first + usize::from(index)];
                let mem = Mib((mem.round() as u32).min(node.gpu_memory.0));
                samples.push(GpuSample(gpu, (util.min(100.0) * 10.0).round() as f32 / 10.0, mem));
            }
        }
        (samples, progress)
    }

    /// What the batch-inference jobs report having served: each step is a
    /// batch of requests of a few hundred tokens (the simulator's assumption).
    pub fn outputs(&self, at: At) -> Vec<Event> {
        const REQUESTS_PER_STEP: u64 = 32;
        const TOKENS_PER_REQUEST: u64 = 220;
        self.runs
            .iter()
            .filter(|(job, run)| run.ready && self.jobs.get(job).is_some_and(|j| j.spec.class == JobClass::BatchInference))
            .map(|(job, _)| {
                let requests = self.steps_at(*job, at) * REQUESTS_PER_STEP;
                Event::JobOutput { job: *job, requests, tokens: requests * TOKENS_PER_REQUEST }
            })
            .collect()
    }
}
/// The step a run has reached at `at`.
fn steps_of(run: &Run, sim: &SimJob, at: At) -> u64 {
    if !run.ready || run.saving || run.hung {
        return run.base_step;
    }
    let secs = (at - run.base_at).num_milliseconds().max(0) as f64 / 1000.0;
    (run.base_step + (secs * run.rate).floor() as u64).min(sim.spec.steps_total)
}

/// `secs` after `at`, rounded up to the millisecond (never before `at`).
pub(crate) fn after(at: At, secs: f64) -> At {
    at + chrono::TimeDelta::milliseconds((secs.max(0.0) * 1000.0).ceil() as i64)
}
