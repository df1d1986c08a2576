//! `gpuroom engine`: the engine with no console, owning its log (new, or
//! resumed after a crash) until SIGTERM or Ctrl-C, or until it reaches the
//! simulated time asked. Consoles attach to it through its socket.
//!
//! Drives the engine with the same loop as the console (`driver::drive`);
//! owns only the signals and the progress lines on standard error.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chrono::TimeDelta;
use tokio::sync::{mpsc, oneshot};

use super::Opened;
use super::driver::{self, Caught, Links, Pace, Runner, SimRunner};
use super::settings::{self, Policy, WorldChoice};
use crate::domain::event::Role;
use crate::domain::text::for_terminal;
use crate::engine::Engine;
use crate::sim::{Simulation, Traces};
use crate::store::StoreError;

/// The simulated runner, with a progress line every 10 s.
struct Reporting {
    inner: SimRunner,
    last: Instant,
}

impl Runner for Reporting {
    type World = Simulation;

    fn engine(&mut self) -> &mut Engine<Simulation> {
        self.inner.engine()
    }

    fn catch_up(&mut self, force: bool) -> Result<Caught, StoreError> {
        let caught = self.inner.catch_up(force)?;
        if self.last.elapsed() >= Duration::from_secs(10) {
            self.last = Instant::now();
            let engine = &self.inner.engine;
            let at = engine.room.now().map(|t| t.format("%Y-%m-%d %H:%M").to_string()).unwrap_or_default();
            eprintln!("engine: at {at} ({} events)", engine.store.as_ref().map_or(0, |s| s.last_seq()));
        }
        Ok(caught)
    }

    fn period(&self) -> Duration {
        self.inner.period()
    }
}

/// How fast the headless engine goes: a factor, or "max" with this many
/// simulated minutes per batch.
pub fn pace(factor: Option<f64>, step_minutes: f64) -> Result<Pace> {
    // Below a simulated second the step rounds to nothing and the clock would never move.
    if !(step_minutes.is_finite() && (1.0 / 60.0..=24.0 * 60.0).contains(&step_minutes)) {
        bail!("--step-minutes must be within [0.0167 (one second), 1440], got {step_minutes}");
    }
    if let Some(f) = factor
        && !(f.is_finite() && f > 0.0)
    {
        bail!("--speed must be a positive factor, got {f}");
    }
    Ok(match factor {
        Some(f) => Pace::Factor(f),
        None => Pace::Max(TimeDelta::milliseconds((step_minutes * 60_000.0) as i64)),
    })
}

pub fn run_engine(world: &WorldChoice, policy: &Policy, db: &Path, pace: Pace, until_hours: Option<f64>, metrics: Option<&str>) -> Result<()> {
    // Every argument is checked before the log (and its lease) exists.
    let until = until_hours.map(settings::hours).transpose()?;
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let (engine, mut duty, resumed) = match super::runs::open_sim_log(world, policy, db, &traces)? {
        Opened::Attach { engine } => bail!("{}: already owned by the engine {engine} (attach a console with gpuroom --db {})", db.display(), db.display()),
        Opened::Owner { engine, duty, resumed } => (*engine, *duty, resumed),
    };
    match &resumed {
        Some(r) => eprintln!("engine: {}", for_terminal(&r.describe(db))),
        None => eprintln!("engine: new run in {}", super::runs::shown(db)),
    }
    eprintln!("engine: owns {} as {}", super::runs::shown(db), for_terminal(&duty.holder.to_string()));
    if let Some(addr) = metrics {
        let at = duty.serve_metrics(addr, "sim").map_err(anyhow::Error::msg)?;
        eprintln!("engine: metrics at http://{at}/metrics");
    }
    match (duty.socket(), &duty.socket_error) {
        (Some(socket), _) => eprintln!("engine: consoles attach through {}", super::runs::shown(socket)),
        (None, Some(why)) => eprintln!("engine: consoles cannot attach: {}", for_terminal(why)),
        (None, None) => {}
    }
    let start = engine.world.config().start;
    let end = until.map(|h| start + h);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let (runner, duty) = runtime.block_on(async move {
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let terminated = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminated => {}
            }
            let _ = stop.send(());
        });
        // No console: no views of its own; actions come over its socket.
        let (_actions_tx, actions) = mpsc::channel(1);
        let (outcomes, _outcomes_rx) = mpsc::channel(1);
        let links = Links { views: None, actions, outcomes, reports: None, speed: None, stopped };
        let runner = Reporting { inner: SimRunner::new(engine, pace, end), last: Instant::now() };
        let actor = crate::operator::actor_from_env(Role::Viewer);
        driver::drive(runner, links, actor, Some(duty)).await
    })?;
    let mut runner = runner;
    let mut duty = duty.context("the engine's duty")?;
    duty.finish(runner.engine())?;
    let engine = &runner.inner.engine;
    let events = engine.store.as_ref().map_or(0, |s| s.last_seq());
    eprintln!("engine: stopped at {} with {events} events; lease released", engine.room.now().unwrap_or(start).format("%Y-%m-%d %H:%M"));
    Ok(())
}
