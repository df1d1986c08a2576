//! The recorded run, read once: replayed under its own policy to score what
//! really happened and, for the live model, taken apart into what it
//! replays: the world's exogenous events, what the cloud said of the pools
//! the room bought in, and what each job showed of its speed.
//!
//! Reads the log through `Store::for_each_event` and applies it to a `Room`;
//! writes nothing and decides no policy.

use std::collections::{BTreeMap, BTreeSet};

use super::outcome::{Outcome, Scorer, Window};
use crate::domain::capacity::LaunchFailure;
use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::{JobSpec, PoolTarget};
use crate::domain::units::At;
use crate::room::Room;
use crate::store::{Store, StoreError};

/// Relative throughput of a GPU model, a V100 being 1.0: what the live
/// model scales a job's observed rate by when it runs on other hardware.
/// Matched by family name in the model string; unknown models count as 1.0.
/// The figures are the usual training-throughput ratios (mixed precision,
/// large models); the simulated cluster's instance types use the same.
pub const GPU_SPEEDS: &[(&str, f64)] =
    &[("K80", 0.35), ("T4", 0.55), ("P100", 0.7), ("L4", 0.8), ("V100", 1.0), ("A10", 1.1), ("L40", 2.0), ("A100", 2.2), ("H100", 4.0), ("H200", 4.4)];

pub fn gpu_speed(model: &str) -> f64 {
    let upper = model.to_ascii_uppercase();
    // Longest family first, so "A100" is not taken for "A10".
    let mut best: Option<(&str, f64)> = None;
    for (family, speed) in GPU_SPEEDS {
        if upper.contains(family) && best.is_none_or(|(b, _)| family.len() > b.len()) {
            best = Some((family, *speed));
        }
    }
    best.map_or(1.0, |(_, s)| s)
}

/// What the log showed of one job.
#[derive(Clone, Debug)]
pub struct Observed {
    pub spec: JobSpec,
    /// Steps per second on a V100, from its progress while it ran; `None`
    /// when it never ran long enough to show one.
    pub rate: Option<f64>,
    /// The step it failed at, if it failed.
    pub failed_at_step: Option<u64>,
    /// Predicted run time (V100 seconds) for a job with no rate.
    pub predicted_secs: Option<f64>,
}

impl Observed {
    /// Seconds per step on a V100, observed or predicted.
    pub fn step_secs(&self, fallback_job_secs: f64) -> f64 {
        let steps = self.spec.steps_total.max(1) as f64;
        match (self.rate, self.predicted_secs) {
            (Some(rate), _) if rate > 0.0 => 1.0 / rate,
            (_, Some(secs)) if secs > 0.0 => secs / steps,
            _ => fallback_job_secs / steps,
        }
    }
}

/// A job's run in progress, as the log shows it.
#[derive(Clone, Debug)]
struct Running {
    node: NodeId,
    speed: f64,
    step: u64,
    /// When progress began (the run's JobStarted), then the last sample.
    since: Option<At>,
}

#[derive(Clone, Debug, Default)]
struct Progress {
    steps: u64,
    v100_secs: f64,
}

/// What the cloud showed of the pools the room bought in: the live model
/// plays it to whatever instances the re-run's room bought there.
#[derive(Clone, Debug)]
pub enum Cloud {
    /// A launch in the pool got instances (`true`) or was refused for want
    /// of capacity (`false`); the pool stays so until the next answer.
    Obtainable { pool: PoolTarget, yes: bool },
    /// A bought instance of the pool (its recorded id) is to be reclaimed.
    Notice { pool: PoolTarget, node: NodeId, deadline: At },
    /// A bought instance of the pool was lost.
    Lost { pool: PoolTarget, node: NodeId, reason: String },
}

/// A logged event as the live model replays it.
#[derive(Clone, Debug)]
pub enum Logged {
    /// Replayed as it was.
    Event(Event),
    /// The model samples its own GPUs and progress now.
    Telemetry,
    Cloud(Cloud),
}

/// Everything a re-run takes from the log.
#[derive(Debug)]
pub struct Recorded {
    pub actual: Outcome,
    pub events: u64,
    /// Events inside the window.
    pub in_window: u64,
    /// What the live model replays: everything but what the room's
    /// decisions caused, and what the cloud said about the pools it bought in.
    pub exogenous: Vec<(At, Logged)>,
    pub jobs: BTreeMap<JobId, Observed>,
    /// The run time the model gives a job with neither rate nor prediction.
    pub typical_job_secs: f64,
    /// Logged events the live model leaves out, by kind (for its notes).
    pub left_out: BTreeMap<&'static str, u64>,
}

/// Events the room's own decisions cause: a re-run makes its own.
fn caused_by_the_room(event: &Event, launched: &BTreeSet<NodeId>) -> bool {
    match event {
        Event::JobStarted { .. }
        | Event::CheckpointDone { .. }
        | Event::JobStopped { .. }
        | Event::JobExited { .. }
        | Event::JobOutput { .. }
        | Event::Launched { .. }
        | Event::LaunchFailed { .. }
        | Event::Released { .. }
        | Event::ReleaseFailed { .. }
        | Event::SlurmDone { .. } => true,
        Event::NodeUp { spec } => launched.contains(&spec.id),
        Event::NodeLost { node, .. } | Event::InterruptionNotice { node, .. } => launched.contains(node),
        _ => false,
    }
}

/// What a logged event at `at` says about a pool the room bought in, if
/// anything, and when: a launch's answer tells how the pool stood when the
/// launch was asked (`requests`: each launch's pool and time), so a re-run
/// asking then meets the same answer.
fn cloud_signal(at: At, event: &Event, bought: &mut BTreeMap<NodeId, PoolTarget>, requests: &BTreeMap<u64, (PoolTarget, At)>) -> Option<(At, Cloud)> {
    match event {
        Event::Launched { spec, request } => {
            let pool = PoolTarget::of(spec);
            bought.insert(spec.id, pool.clone());
            let asked = requests.get(request).map_or(at, |(_, asked)| *asked);
            Some((asked, Cloud::Obtainable { pool, yes: true }))
        }
        Event::LaunchFailed { request, failure: LaunchFailure::InsufficientCapacity, .. } => {
            requests.get(request).map(|(pool, asked)| (*asked, Cloud::Obtainable { pool: pool.clone(), yes: false }))
        }
        Event::InterruptionNotice { node, deadline } => {
            bought.get(node).map(|pool| (at, Cloud::Notice { pool: pool.clone(), node: *node, deadline: *deadline }))
        }
        Event::NodeLost { node, reason } => bought.get(node).map(|pool| (at, Cloud::Lost { pool: pool.clone(), node: *node, reason: reason.clone() })),
        _ => None,
    }
}

/// What the live model needs of the log, gathered as it is read: each
/// job's runs and speed, the nodes the room bought and its launches, and
/// the events it replays.
#[derive(Default)]
struct Gathering {
    launched: BTreeSet<NodeId>,
    speeds: BTreeMap<NodeId, f64>,
    running: BTreeMap<JobId, Running>,
    seen: BTreeMap<JobId, Progress>,
    bought_pools: BTreeMap<NodeId, PoolTarget>,
    request_pools: BTreeMap<u64, (PoolTarget, At)>,
}

impl Gathering {
    fn gather(&mut self, at: At, event: Event, effects: &[Effect], rec: &mut Recorded) {
        self.watch_progress(at, &event, effects, rec);
        for effect in effects {
            if let Effect::Launch { request } = effect {
                self.request_pools.insert(request.id, (request.pool.clone(), at));
            }
        }
        if let Some((when, cloud)) = cloud_signal(at, &event, &mut self.bought_pools, &self.request_pools) {
            rec.exogenous.push((when, Logged::Cloud(cloud)));
        }
        match &event {
            Event::Telemetry { .. } => rec.exogenous.push((at, Logged::Telemetry)),
            e if caused_by_the_room(e, &self.launched) => *rec.left_out.entry(e.kind()).or_default() += 1,
            _ => rec.exogenous.push((at, Logged::Event(event))),
        }
    }

    /// Follows each job's runs to learn its speed: steps gained between
    /// progress samples over the V100-seconds they took.
    fn watch_progress(&mut self, at: At, event: &Event, effects: &[Effect], rec: &mut Recorded) {
        let seen = &mut self.seen;
        let mut advance = |job: JobId, run: &mut Running, step: u64, at: At| {
            if let Some(since) = run.since
                && step >= run.step
            {
                let p = seen.entry(job).or_default();
                p.steps += step - run.step;
                p.v100_secs += (at - since).num_milliseconds() as f64 / 1000.0 * run.speed;
            }
            run.step = run.step.max(step);
            run.since = Some(at);
        };
        match event {
            Event::NodeUp { spec } => {
                self.speeds.insert(spec.id, gpu_speed(&spec.gpu_model));
            }
            Event::Launched { spec, .. } => {
                self.launched.insert(spec.id);
                self.speeds.insert(spec.id, gpu_speed(&spec.gpu_model));
            }
            Event::JobSubmitted { .. } | Event::JobsSubmitted { .. } => {
                for spec in event.submitted() {
                    rec.jobs.entry(spec.id).or_insert_with(|| Observed { spec: spec.clone(), rate: None, failed_at_step: None, predicted_secs: None });
                }
            }
            Event::JobStarted { job } => {
                if let Some(run) = self.running.get_mut(job) {
                    run.since = Some(at);
                }
            }
            Event::Telemetry { progress, .. } => {
                for (job, step) in progress {
                    if let Some(run) = self.running.get_mut(job) {
                        advance(*job, run, *step, at);
                    }
                }
            }
            Event::JobExited { job, ok, .. } => {
                if let Some(mut run) = self.running.remove(job) {
                    let total = rec.jobs.get(job).map_or(run.step, |o| o.spec.steps_total);
                    if *ok {
                        advance(*job, &mut run, total, at);
                    } else if let Some(o) = rec.jobs.get_mut(job) {
                        o.failed_at_step = Some(run.step.max(1));
                    }
                }
            }
            Event::JobStopped { job } => {
                self.running.remove(job);
            }
            Event::NodeLost { node, .. } | Event::Released { node } => {
                self.running.retain(|_, r| r.node != *node);
            }
            _ => {}
        }
        for effect in effects {
            if let Effect::StartJob { job, node, resume_step, .. } = effect {
                let speed = self.speeds.get(node).copied().unwrap_or(1.0);
                self.running.insert(*job, Running { node: *node, speed, step: *resume_step, since: None });
            }
        }
    }

    /// Each job's rate, and a prediction for those that showed none; the
    /// replayed events in time order.
    fn finish(self, room: &Room, rec: &mut Recorded) {
        // Launch answers went back to their launches' times: in time order
        // again (stable, so what happened at one time keeps its order).
        rec.exogenous.sort_by_key(|(at, _)| *at);
        let mut job_secs = Vec::new();
        for (id, o) in rec.jobs.iter_mut() {
            if let Some(p) = self.seen.get(id).filter(|p| p.steps > 0 && p.v100_secs > 0.0) {
                o.rate = Some(p.steps as f64 / p.v100_secs);
                job_secs.push(o.spec.steps_total as f64 * p.v100_secs / p.steps as f64);
            } else if let Some(job) = room.job(*id) {
                o.predicted_secs = room.predictor.predict(job).map(|p| p.mean_secs).filter(|s| s.is_finite() && *s > 0.0);
            }
            if o.predicted_secs.is_none() {
                o.predicted_secs = o.spec.est_runtime.map(|s| s.0 as f64).filter(|s| *s > 0.0);
            }
        }
        if !job_secs.is_empty() {
            job_secs.sort_by(f64::total_cmp);
            rec.typical_job_secs = job_secs[job_secs.len() / 2];
        }
    }
}

/// Reads the whole log, scoring it over `window`; with `for_the_model`,
/// also gathers what the live model replays (an exact re-run needs none of
/// it). `progress` hears the share read.
pub fn read(store: &Store, window: Window, for_the_model: bool, progress: &mut dyn FnMut(f64)) -> Result<Recorded, StoreError> {
    let total = store.event_count()?.max(1) as f64;
    let mut room = Room::new(store.meta()?.room_config);
    let mut scorer = Scorer::new(window);
    let mut rec = Recorded {
        actual: Outcome::default(),
        events: 0,
        in_window: 0,
        exogenous: Vec::new(),
        jobs: BTreeMap::new(),
        typical_job_secs: 3600.0,
        left_out: BTreeMap::new(),
    };
    let mut gathering = for_the_model.then(Gathering::default);
    let until = window.until;
    store.for_each_event(0, |_, at, event| {
        if until.is_some_and(|u| at >= u) {
            return;
        }
        rec.events += 1;
        rec.in_window += u64::from(window.holds(at));
        if rec.events.is_multiple_of(4096) {
            progress(rec.events as f64 / total);
        }
        let effects = room.apply(at, &event);
        scorer.observe(at, &event, &effects, room.stats());
        if let Some(gathering) = gathering.as_mut() {
            gathering.gather(at, event, &effects, &mut rec);
        }
    })?;
    if let Some(gathering) = gathering {
        gathering.finish(&room, &mut rec);
    }
    rec.actual = scorer.finish(&room);
    progress(1.0);
    Ok(rec)
}
