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
pub mod table;

use std::time::Instant;

use crate::domain::job::Phase;
use crate::domain::units::At;
use crate::engine::World;
use crate::room::{Room, RoomConfig};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};
use crate::store::{Store, StoreError};
pub use outcome::{Outcome, Window};
pub use table::{Column, Comparison, Format};

/// One policy to try: a name for its column and the room's configuration.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub config: RoomConfig,
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

/// Reads `store`'s run and re-runs it under each scenario, over `window`.
pub fn compare(
    store: &Store,
    log_name: &str,
    scenarios: &[Scenario],
    window: Window,
    model: Model,
    progress: &mut dyn FnMut(Progress),
) -> Result<Comparison, WhatIfError> {
    let stages = scenarios.len() as f64 + 1.0;
    let wall = Instant::now();
    let meta = store.meta()?;
    let recorded = recorded::read(store, window, &mut |share| progress(Progress { stage: "reading the log".into(), done: share / stages }))?;
    let mut columns = vec![Column { name: "recorded".into(), outcome: recorded.actual.clone(), wall_secs: wall.elapsed().as_secs_f64() }];
    let (Some(first_at), Some(last_at), 1..) = (recorded.first_at, recorded.last_at, recorded.in_window) else {
        return Err(WhatIfError::Setup(format!("{log_name}: no events in the window asked")));
    };
    let exact = match (&meta.world, model) {
        (Some(world), Model::Auto) => {
            let config = SimConfig::parse(&world.config_name, &world.config_toml).map_err(|e| WhatIfError::Setup(format!("{log_name}: the recorded simulated world: {e}")))?;
            let traces = Traces::embedded().map_err(|e| WhatIfError::Setup(format!("the embedded traces: {e}")))?;
            Some((config, traces, world.seed))
        }
        _ => None,
    };
    let mut notes = Vec::new();
    let model_text = match &exact {
        Some((_, _, seed)) => format!("the simulated world (seed {seed}) re-run exactly"),
        None => {
            notes.push(live_model_note(&recorded));
            "live model: the log's arrivals, prices and fleet replayed, jobs run at their observed rates (README › What if)".to_string()
        }
    };
    for (i, scenario) in scenarios.iter().enumerate() {
        let wall = Instant::now();
        let mut report = |at: At| {
            let share = (at - first_at).num_seconds() as f64 / (last_at - first_at).num_seconds().max(1) as f64;
            progress(Progress { stage: format!("re-running under {}", scenario.name), done: (i as f64 + 1.0 + share.clamp(0.0, 1.0)) / stages });
        };
        let outcome = match &exact {
            Some((config, traces, seed)) => {
                let sim = Simulation::new(config.clone(), traces, *seed).map_err(|e| WhatIfError::Setup(format!("{log_name}: the recorded simulated world: {e}")))?;
                rerun(sim_world::Rerun::new(sim, recorded.controls.clone()), &scenario.config, last_at, window, &mut report)
            }
            None => {
                let world = live_world::Modeled::new(recorded.exogenous.clone(), recorded.jobs.clone(), recorded.typical_job_secs, first_at);
                rerun(world, &scenario.config, last_at, window, &mut report)
            }
        };
        columns.push(Column { name: scenario.name.clone(), outcome, wall_secs: wall.elapsed().as_secs_f64() });
    }
    progress(Progress { stage: "done".into(), done: 1.0 });
    Ok(Comparison { log: log_name.to_string(), model: model_text, from: window.from.or(Some(first_at)), until: Some(window.until.unwrap_or(last_at)), events: recorded.events, columns, notes })
}

/// The same loop as the engine's (`Engine::run_toward`), with no log and a
/// scorer watching: the world to `horizon`, each event applied and its
/// effects handed back.
fn rerun<W: World>(mut world: W, config: &RoomConfig, horizon: At, window: Window, report: &mut dyn FnMut(At)) -> Outcome {
    let mut room = Room::new(config.clone());
    let mut scorer = outcome::Scorer::new(window);
    let mut applied: u64 = 0;
    while let Some((at, event)) = world.next_event(horizon) {
        let effects = room.apply(at, &event);
        scorer.observe(at, &event, &effects, room.stats());
        world.handle(at, &effects);
        applied += 1;
        if applied % 4096 == 0 {
            report(at);
        }
    }
    let queued = room.jobs().filter(|j| j.phase() == Phase::Queued).count() as u64;
    scorer.finish(queued)
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
        text.push_str(&format!("; the recorded room bought {bought} instances: each re-run buys its own, and meets the capacity refusals and reclaims the log shows in those pools"));
    }
    text
}
