//! The one loop that owns an engine, for every way gpuroom runs: the console
//! on the simulated cluster, the console on live sources, and the headless
//! engine. Each wake-up is one batch, and data only flows one way through it:
//!
//! ```text
//! sources (reports) ─▶ events ─▶ engine ─▶ effects ─▶ executors, store
//!                                   └─▶ view ─▶ console(s)
//! ```
//!
//! A `Runner` says what "now" is (the paced simulated clock, or the wall
//! clock) and turns a source's report into events; the loop does the rest:
//! the lease's heartbeat and the attached consoles' commands (`Duty`), the
//! operator's actions from this console, the view for the console and for
//! attached ones. Nothing here knows which world it drives.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use tokio::sync::{mpsc, oneshot, watch};

use super::{Duty, now_ms};
use crate::domain::event::{Action, Actor};
use crate::domain::units::At;
use crate::engine::{Engine, World};
use crate::room::View;
use crate::sim::Simulation;
use crate::sources::report::Report;
use crate::store::StoreError;

/// What a runner did when it caught up.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Caught {
    /// Something was applied: the console should see a new view.
    pub changed: bool,
    /// The run reached its end (a simulated run with an end).
    pub over: bool,
}

/// The world-specific half of the loop.
pub trait Runner {
    type World: World;
    fn engine(&mut self) -> &mut Engine<Self::World>;
    /// Brings the world up to now. `force`: something else changed (an
    /// attached console's command), so move the clock even if quiet.
    fn catch_up(&mut self, force: bool) -> Result<Caught, StoreError>;
    /// A live source's report: translated and applied at once.
    fn report(&mut self, _report: Report) -> Result<(), StoreError> {
        Ok(())
    }
    /// How often the loop wakes.
    fn period(&self) -> Duration {
        Duration::from_millis(250)
    }
    /// The console asks for another simulated speed (a paced simulation
    /// takes it; a live world has none).
    fn set_speed(&mut self, _factor: f64) {}
}

/// The most wall-clock time one batch of the simulated world may take.
const BATCH_WALL: Duration = Duration::from_millis(200);
/// Events between two looks at the clock within a batch.
const BATCH_SLICE: u64 = 2_000;

/// How fast a simulated engine runs.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Pace {
    /// Simulated seconds per wall-clock second.
    Factor(f64),
    /// As fast as it runs: this much simulated time per batch, with a short
    /// gap between batches for attached consoles' commands.
    Max(TimeDelta),
}

/// The simulated world, paced against the wall clock.
pub struct SimRunner {
    pub engine: Engine<Simulation>,
    pace: Pace,
    wall0: Instant,
    sim0: At,
    /// Stop here (simulated time), if anywhere.
    end: Option<At>,
}

impl SimRunner {
    pub fn new(engine: Engine<Simulation>, pace: Pace, end: Option<At>) -> SimRunner {
        let sim0 = engine.room.now().unwrap_or_else(|| engine.world.config().start);
        SimRunner { engine, pace, wall0: Instant::now(), sim0, end }
    }

    fn target(&self) -> At {
        let now = self.engine.room.now().unwrap_or(self.sim0);
        let target = match self.pace {
            Pace::Factor(f) => self.sim0 + TimeDelta::milliseconds((self.wall0.elapsed().as_secs_f64() * f * 1000.0) as i64),
            Pace::Max(step) => {
                // The next point of a grid of steps from the world's start: a
                // batch cut short (or a crash after it) resumes toward the same
                // point, so the log's ticks fall where an uncut run puts them.
                let base = self.engine.world.config().start;
                let step_ms = step.num_milliseconds().max(1);
                let k = (now - base).num_milliseconds().div_euclid(step_ms) + 1;
                base + TimeDelta::milliseconds(k.saturating_mul(step_ms))
            }
        };
        self.end.map_or(target, |end| target.min(end))
    }
}

impl Runner for SimRunner {
    type World = Simulation;

    fn engine(&mut self) -> &mut Engine<Simulation> {
        &mut self.engine
    }

    /// Runs toward the target for at most `BATCH_WALL` (and in slices of
    /// `BATCH_SLICE` events), so a batch stays bounded in time and in size
    /// whatever the speed: the lease's heartbeat, the consoles' commands and
    /// a stop request are all served between batches. A clock that is ahead
    /// of what the engine can simulate is caught up over many batches.
    fn catch_up(&mut self, _force: bool) -> Result<Caught, StoreError> {
        let target = self.target();
        let deadline = Instant::now() + BATCH_WALL;
        let reached = loop {
            let (_, reached) = self.engine.run_toward(target, BATCH_SLICE)?;
            if reached || Instant::now() >= deadline {
                break reached;
            }
        };
        Ok(Caught { changed: true, over: reached && self.end.is_some_and(|end| target >= end) })
    }

    fn period(&self) -> Duration {
        match self.pace {
            Pace::Factor(_) => Duration::from_millis(250),
            Pace::Max(_) => Duration::from_millis(2),
        }
    }

    /// From now on, `factor` simulated seconds per wall-clock second: the
    /// pace restarts from where the engine is, so the clock never jumps.
    fn set_speed(&mut self, factor: f64) {
        if let Pace::Factor(_) = self.pace
            && factor.is_finite()
            && factor > 0.0
        {
            self.sim0 = self.engine.room.now().unwrap_or(self.sim0);
            self.wall0 = Instant::now();
            self.pace = Pace::Factor(factor);
        }
    }
}

/// What the loop shares with the console (if any) and whoever stops it.
pub struct Links {
    /// Where views go; `None` for a headless engine.
    pub views: Option<watch::Sender<Arc<View>>>,
    /// This console's operator actions, and what came of each.
    pub actions: mpsc::Receiver<Action>,
    pub outcomes: mpsc::Sender<Result<String, String>>,
    /// Live sources' reports; `None` for a simulated world.
    pub reports: Option<mpsc::Receiver<Report>>,
    /// The simulated speed the console asks for; `None` where it has no say.
    pub speed: Option<watch::Receiver<f64>>,
    /// Fires when the console closes or the process is told to stop.
    pub stopped: oneshot::Receiver<()>,
}

async fn next_speed(speed: &mut Option<watch::Receiver<f64>>) -> Option<f64> {
    match speed.as_mut() {
        Some(rx) => {
            rx.changed().await.ok()?;
            Some(*rx.borrow_and_update())
        }
        None => std::future::pending().await,
    }
}

async fn next_report(reports: &mut Option<mpsc::Receiver<Report>>) -> Option<Report> {
    match reports.as_mut() {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs until `links.stopped` fires, the console goes away, or the run
/// ends. Returns the runner and the duty; the caller finishes the duty (a
/// clean stop commits, snapshots and releases the lease).
pub async fn drive<R: Runner>(mut runner: R, mut links: Links, actor: Actor, mut duty: Option<Duty>) -> anyhow::Result<(R, Option<Duty>)> {
    let mut tick = tokio::time::interval(runner.period());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if duty.as_ref().is_some_and(Duty::backing_off) {
                    continue;
                }
                let (caught, view) = match batch(&mut runner, duty.as_mut(), links.views.is_some()) {
                    Ok(done) => done,
                    // Someone holds a lock on the log: nothing was begun,
                    // nothing is lost (the world keeps what it would have
                    // written); say who, and try again a little later.
                    Err(e) if e.is_busy() && duty.is_some() => {
                        let view = duty.as_mut().map(|d| d.blocked(runner.engine(), &e));
                        (Caught::default(), view.filter(|_| links.views.is_some()))
                    }
                    Err(e) => return Err(e.into()),
                };
                if let (Some(views), Some(view)) = (&links.views, view)
                    && views.send(Arc::new(view)).is_err()
                {
                    break;
                }
                if caught.over {
                    break;
                }
            }
            Some(factor) = next_speed(&mut links.speed) => runner.set_speed(factor),
            Some(report) = next_report(&mut links.reports) => match runner.report(report) {
                Ok(()) => {}
                // Its events wait in the world for the next batch.
                Err(e) if e.is_busy() => {}
                Err(e) => return Err(e.into()),
            },
            Some(action) = links.actions.recv() => {
                // Applied at once, between batches, and shown on the next view.
                let outcome = match runner.engine().operate(&actor, action) {
                    Ok(outcome) => outcome,
                    Err(e) if e.is_busy() => Err(format!("not done: {e}; nothing was changed, try again")),
                    Err(e) => return Err(e.into()),
                };
                let _ = links.outcomes.send(outcome).await;
                if let Some(views) = &links.views {
                    let mut view = runner.engine().room.view();
                    if let Some(d) = duty.as_ref() {
                        d.decorate(&mut view);
                    }
                    let _ = views.send(Arc::new(view));
                }
            }
            _ = &mut links.stopped => break,
        }
    }
    Ok((runner, duty))
}

/// One wake-up as one batch: the lease's heartbeat and attached consoles'
/// commands (the owner's duty), the world caught up, and the view for
/// attached consoles when due. Returns what the runner did, and the view
/// for this console when it wants one and something changed.
fn batch<R: Runner>(runner: &mut R, mut duty: Option<&mut Duty>, console: bool) -> Result<(Caught, Option<View>), StoreError> {
    let now = now_ms();
    let own_batch = runner.engine().begin_batch()?;
    let commands = match duty.as_deref_mut() {
        Some(d) => d.intake(runner.engine(), now)?,
        None => 0,
    };
    let caught = runner.catch_up(commands > 0)?;
    let changed = caught.changed || commands > 0;
    let engine = runner.engine();
    let has_log = engine.store.is_some();
    let publish = duty.as_deref().is_some_and(|d| d.publishes(has_log) && (d.publish_due(now) || commands > 0));
    let mut view = ((console && changed) || publish).then(|| engine.room.view());
    if let (Some(d), Some(v)) = (duty.as_deref(), view.as_mut()) {
        d.decorate(v);
    }
    if let (true, Some(d), Some(v)) = (publish, duty.as_deref_mut(), view.as_ref()) {
        d.publish(engine, v, now)?;
    }
    if own_batch {
        engine.end_batch()?;
        // Answers leave only once what they say is on disk.
        if let Some(d) = duty {
            d.after_commit(engine);
        }
    }
    Ok((caught, view.filter(|_| console && changed)))
}
