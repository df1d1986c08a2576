//! What if: a recorded run re-run under other policies and compared, figure
//! by figure, with what really happened.
//!
//! The core is deterministic and the log holds everything that came in, so
//! a re-run is the same `Room::apply` loop over another room. A simulated
//! run is re-run exactly (`sim_world`: the seeded world from the log's meta,
//! answering the other room); a live run on a model of what cannot be
//! observed (`live_world`). Both sides are scored by one `Scorer`, so the
//! recorded run under its own policy gives back its own figures.
//!
//! Reads a log; writes nothing. The console runs it on a thread of its own.

mod live_world;
pub mod outcome;
pub mod recorded;
mod sim_world;
mod slurm_site;
pub mod table;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use crate::domain::event::{Effect, Event};
use crate::domain::units::At;
use crate::engine::World;
use crate::room::{Room, RoomConfig};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};
use crate::store::{Store, StoreError};
pub use outcome::{Outcome, Window};
pub use table::{Column, Comparison, Format};

/// One policy to try: a name for its column, the room's configuration,
/// and (a simulated run only) another simulated cluster to run it on, the
/// arrivals staying the same (they draw from a random stream of their own).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub config: RoomConfig,
    pub fleet: Option<Box<SimConfig>>,
}

/// How the re-runs are made.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Model {
    /// A simulated log is re-run exactly; a live one on the model.
    #[default]
    Auto,
    /// The live model even for a simulated log (to see the model's error).
    Live,
}

/// Where the work stands, for a progress bar: the stage in words and the
/// share of the whole done.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub stage: String,
    pub done: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Setup(String),
}

/// How a scenario is re-run: the exact simulated world, or the live model.
enum Rerunner<'a> {
    Exact {
        config: Box<SimConfig>,
        traces: Box<Traces>,
        seed: u64,
        controls: Vec<(At, Event)>,
    },
    Live(&'a recorded::Recorded),
    /// A Slurm site on the live model, each re-run's waits by account kept.
    Site(&'a slurm_site::Site),
}

impl Rerunner<'_> {
    fn run(&self, scenario: &Scenario, first_at: At, horizon: At, window: Window, report: &mut dyn FnMut(f64)) -> Result<Outcome, WhatIfError> {
        let mut at_share = |at: At| report((at - first_at).num_seconds() as f64 / (horizon - first_at).num_seconds().max(1) as f64);
        Ok(match self {
            Rerunner::Exact { config, traces, seed, controls } => {
                let world = scenario.fleet.as_deref().unwrap_or(config);
                let sim =
                    Simulation::new(world.clone(), traces, *seed).map_err(|e| WhatIfError::Setup(format!("the simulated world of {}: {e}", scenario.name)))?;
                rerun(sim_world::Rerun::new(sim, controls.clone()), &scenario.config, horizon, window, &mut at_share)
            }
            Rerunner::Live(_) | Rerunner::Site(_) if scenario.fleet.is_some() => {
                return Err(WhatIfError::Setup(format!(
                    "{}: a live run's fleet is the one it had; another simulated cluster applies to simulated runs",
                    scenario.name
                )));
            }
            Rerunner::Live(recorded) => {
                let world = live_world::Modeled::new(recorded.exogenous.clone(), recorded.jobs.clone(), recorded.typical_job_secs, first_at);
                rerun(world, &scenario.config, horizon, window, &mut at_share)
            }
            Rerunner::Site(site) => {
                let recorded = &site.recorded;
                let world = live_world::Modeled::new(recorded.exogenous.clone(), recorded.jobs.clone(), recorded.typical_job_secs, first_at);
                let mut waits = slurm_site::AccountWaits::new(window);
                let outcome =
                    rerun_watched(world, &scenario.config, horizon, window, &mut at_share, &mut |at, event, effects| waits.observe(at, event, effects));
                site.keep_waits(&scenario.name, waits);
                outcome
            }
        })
    }
}

/// A word from a worker: a scenario's share done, or its outcome.
enum Word {
    Share(usize, f64),
    Done(usize, Box<Result<Column, WhatIfError>>),
}

/// What the caller hears of the work: the log's reading (share 0) and each
/// re-run's share, and the re-runs' columns as they finish.
struct Board<'p> {
    shares: Vec<f64>,
    stage: String,
    done: Vec<Option<Result<Column, WhatIfError>>>,
    progress: &'p mut dyn FnMut(Progress),
}

impl Board<'_> {
    fn hear(&mut self, word: Word, scenarios: &[Scenario]) {
        match word {
            Word::Share(i, share) => {
                self.shares[i + 1] = share.clamp(0.0, 1.0);
                self.stage = format!("re-running under {}", scenarios[i].name);
            }
            Word::Done(i, column) => {
                self.shares[i + 1] = 1.0;
                self.done[i] = Some(*column);
            }
        }
    }

    fn tell(&mut self) {
        let done = self.shares.iter().sum::<f64>() / self.shares.len() as f64;
        (self.progress)(Progress { stage: self.stage.clone(), done });
    }
}

/// Re-runs every scenario, one per core, while `meanwhile` works on this
/// thread (reading the log, for a simulated run); returns what it gave.
fn rerun_all<R>(
    rerunner: &Rerunner<'_>,
    scenarios: &[Scenario],
    span: (At, At),
    window: Window,
    board: &mut Board<'_>,
    meanwhile: impl FnOnce(&mut dyn FnMut(f64)) -> R,
) -> R {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, scenarios.len().max(1));
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Word>();
        for _ in 0..workers {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(scenario) = scenarios.get(i) else { break };
                    let wall = Instant::now();
                    let outcome = rerunner.run(scenario, span.0, span.1, window, &mut |share| {
                        let _ = tx.send(Word::Share(i, share));
                    });
                    let column = outcome.map(|outcome| Column { name: scenario.name.clone(), outcome, wall_secs: wall.elapsed().as_secs_f64() });
                    let _ = tx.send(Word::Done(i, Box::new(column)));
                }
            });
        }
        drop(tx);
        let result = meanwhile(&mut |share| {
            board.shares[0] = share;
            while let Ok(word) = rx.try_recv() {
                board.hear(word, scenarios);
            }
            board.tell();
        });
        while let Ok(word) = rx.recv() {
            board.hear(word, scenarios);
            board.tell();
        }
        result
    })
}

/// How many of a simulated log's first events are checked against the
/// world its meta describes before that world is re-run as the run's own.
const WORLD_CHECK_EVENTS: i64 = 20_000;

/// Reads `store`'s run and re-runs it under each scenario, over `window`.
/// The re-runs run side by side, one per core; a simulated run's start as
/// soon as its ticks and actions are read, while this thread reads and
/// scores the whole log. The log is read in one transaction: on a log an
/// engine is still writing, every figure is of the same span.
pub fn compare(
    store: &Store,
    log_name: &str,
    scenarios: &[Scenario],
    window: Window,
    model: Model,
    progress: &mut dyn FnMut(Progress),
) -> Result<Comparison, WhatIfError> {
    store.consistently(|| compare_now(store, log_name, scenarios, window, model, progress))?
}

fn compare_now(
    store: &Store,
    log_name: &str,
    scenarios: &[Scenario],
    window: Window,
    model: Model,
    progress: &mut dyn FnMut(Progress),
) -> Result<Comparison, WhatIfError> {
    let meta = store.meta()?;
    let mut world_note = None;
    let no_events = || WhatIfError::Setup(format!("{log_name}: no events in the window asked"));
    let horizon = store.last_event_before(window.until)?.ok_or_else(no_events)?;
    let first_at = store.first_event_at()?.ok_or_else(no_events)?;
    if window.from.is_some_and(|from| from > horizon) {
        return Err(no_events());
    }
    let span = (first_at, horizon);
    let mut board =
        Board { shares: vec![0.0; scenarios.len() + 1], stage: "reading the log".into(), done: (0..scenarios.len()).map(|_| None).collect(), progress };
    let wall = Instant::now();
    let (read, exact) = match (&meta.world, model) {
        (Some(world), Model::Auto) => {
            let config = SimConfig::parse(&world.config_name, &world.config_toml)
                .map_err(|e| WhatIfError::Setup(format!("{log_name}: the recorded simulated world: {e}")))?;
            let traces = Traces::embedded().map_err(|e| WhatIfError::Setup(format!("the embedded traces: {e}")))?;
            world_note = world_differs(store, &meta.room_config, &config, &traces, world.seed)?;
            let mut controls = Vec::new();
            store.for_each_event_of_kinds(&[Event::Tick.kind(), "operator"], |_, at, event| {
                if window.until.is_none_or(|u| at < u) {
                    controls.push((at, event));
                }
            })?;
            let exact = Rerunner::Exact { config: Box::new(config), traces: Box::new(traces), seed: world.seed, controls };
            let recorded = rerun_all(&exact, scenarios, span, window, &mut board, |report| recorded::read(store, window, false, report));
            (Read::Room(recorded?), Some(world.seed))
        }
        _ => {
            let mut read_share = |share: f64| {
                board.shares[0] = share;
                board.tell();
            };
            let site = if slurm_site::has_room_jobs(store)? { None } else { slurm_site::read(store, &meta.room_config, window, first_at, &mut read_share)? };
            match site {
                Some(site) => {
                    site.check().map_err(|why| WhatIfError::Setup(format!("{log_name}: {why}")))?;
                    let reference = Scenario { name: slurm_site::REFERENCE.into(), config: slurm_site::reference_config(&meta.room_config), fleet: None };
                    let rerunner = Rerunner::Site(&site);
                    // A column under the reference policy is the measure; else it is
                    // re-run on this thread while the columns run.
                    let shared = scenarios.iter().position(|s| s.config == reference.config && s.fleet.is_none());
                    let measured = rerun_all(&rerunner, scenarios, span, window, &mut board, |_| {
                        shared.is_none().then(|| rerunner.run(&reference, first_at, horizon, window, &mut |_| {}))
                    });
                    (Read::Slurm { site: Box::new(site), reference: measured.transpose()?, shared }, None)
                }
                None => {
                    let recorded = recorded::read(store, window, true, &mut read_share)?;
                    rerun_all(&Rerunner::Live(&recorded), scenarios, span, window, &mut board, |_| ());
                    (Read::Room(recorded), None)
                }
            }
        }
    };
    let read_secs = wall.elapsed().as_secs_f64();
    let recorded = read.recorded();
    if recorded.in_window == 0 {
        return Err(no_events());
    }
    let mut columns = vec![Column { name: "recorded".into(), outcome: recorded.actual.clone(), wall_secs: read_secs }];
    for column in std::mem::take(&mut board.done) {
        columns.push(column.ok_or_else(|| WhatIfError::Setup("a re-run stopped without an answer".into()))??);
    }
    let mut notes: Vec<String> = world_note.into_iter().collect();
    let model_text = match (exact, &read) {
        (Some(seed), _) => format!("the simulated world (seed {seed}) re-run exactly"),
        (None, Read::Slurm { site, reference, shared }) => {
            let model = reference.as_ref().or_else(|| shared.and_then(|i| columns.get(i + 1)).map(|c| &c.outcome));
            notes.extend(model.map(|model| slurm_site::model_error_note(&recorded.actual, model)));
            let names: Vec<String> = columns.iter().skip(1).map(|c| c.name.clone()).collect();
            notes.extend(site.waits_note(&names));
            notes.extend(site.notes.iter().cloned());
            slurm_site::MODEL.to_string()
        }
        (None, Read::Room(recorded)) => {
            notes.push(live_model_note(recorded));
            "live model: the log's arrivals, prices and fleet replayed, jobs run at their observed rates (README › What if)".to_string()
        }
    };
    (board.progress)(Progress { stage: "done".into(), done: 1.0 });
    let mut comparison = Comparison {
        log: log_name.to_string(),
        model: model_text,
        from: window.from.or(Some(first_at)),
        until: Some(window.until.unwrap_or(horizon)),
        events: recorded.events,
        columns,
        notes,
    };
    if let Some(why) = comparison.why_all_equal() {
        comparison.notes.push(why);
    }
    Ok(comparison)
}

/// The log as read: a run of the room's own, or a Slurm site with the
/// re-run that measures the model's error (`None` when a column is it:
/// `shared`, that column's index among the scenarios).
enum Read {
    Room(recorded::Recorded),
    Slurm { site: Box<slurm_site::Site>, reference: Option<Outcome>, shared: Option<usize> },
}

impl Read {
    fn recorded(&self) -> &recorded::Recorded {
        match self {
            Read::Room(recorded) => recorded,
            Read::Slurm { site, .. } => &site.recorded,
        }
    }
}

/// Whether the simulated world the log's meta describes still produces the
/// log's first events (as a resume checks them): a meta edited by hand, or
/// a log of another gpuroom, would otherwise be "re-run exactly" as a run
/// it never was. `Some(why)` when it does not.
fn world_differs(store: &Store, room: &RoomConfig, config: &SimConfig, traces: &Traces, seed: u64) -> Result<Option<String>, WhatIfError> {
    let mut world = Simulation::new(config.clone(), traces, seed).map_err(|e| WhatIfError::Setup(format!("the recorded simulated world: {e}")))?;
    let mut room = Room::new(room.clone());
    let mut differs: Option<String> = None;
    store.for_each_event_through(0, WORLD_CHECK_EVENTS, |seq, at, event| {
        if differs.is_some() {
            return;
        }
        let effects = room.apply(at, &event);
        if let Err(why) = world.recover(at, &event, &effects) {
            differs = Some(format!(
                "the simulated world this log's meta describes does not produce its events (event {seq}: {why}): the exact re-runs are \
                 not of the recorded run, so their differences from it are not the policies' alone (was the meta edited, or the log \
                 written by another gpuroom?); `--model live` re-runs it on the live model instead"
            ));
        }
    })?;
    Ok(differs)
}

/// The same loop as the engine's (`Engine::run_toward`), with no log and a
/// scorer watching: the world to `horizon`, each event applied and its
/// effects handed back.
fn rerun<W: World>(world: W, config: &RoomConfig, horizon: At, window: Window, report: &mut dyn FnMut(At)) -> Outcome {
    rerun_watched(world, config, horizon, window, report, &mut |_, _, _| {})
}

/// `rerun`, with `watch` hearing each event applied and its effects (a
/// Slurm site's waits by account).
fn rerun_watched<W: World>(
    mut world: W,
    config: &RoomConfig,
    horizon: At,
    window: Window,
    report: &mut dyn FnMut(At),
    watch: &mut dyn FnMut(At, &Event, &[Effect]),
) -> Outcome {
    let mut room = Room::new(config.clone());
    let mut scorer = outcome::Scorer::new(window);
    let mut applied: u64 = 0;
    while let Some((at, event)) = world.next_event(horizon) {
        let effects = room.apply(at, &event);
        scorer.observe(at, &event, &effects, room.stats());
        watch(at, &event, &effects);
        world.handle(at, &effects);
        applied += 1;
        if applied.is_multiple_of(4096) {
            report(at);
        }
    }
    scorer.finish(&room)
}

fn live_model_note(recorded: &recorded::Recorded) -> String {
    let rated = recorded.jobs.values().filter(|o| o.rate.is_some()).count();
    let predicted = recorded.jobs.len() - rated;
    let mut text = format!(
        "{} jobs: {rated} run at the rate the log showed, {predicted} at a predicted time (typical job {:.0} V100-minutes)",
        recorded.jobs.len(),
        recorded.typical_job_secs / 60.0
    );
    let bought = recorded.left_out.get("launched").copied().unwrap_or(0);
    if bought > 0 {
        text.push_str(&format!(
            "; the recorded room bought {bought} instances: each re-run buys its own, and meets the capacity refusals and reclaims the log shows in those pools"
        ));
    }
    text
}
