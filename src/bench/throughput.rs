//! How fast the core goes: events applied per second by `Room::apply` on a
//! recorded simulated day, and a simulated month end to end through
//! `engine::Engine` on the simulated world, without and with the SQLite
//! event log. Owns the month's cluster (`fixtures/sim/large-1000.toml`,
//! embedded) and the arrival rate that gives the month its job count.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use chrono::TimeDelta;

use super::progress::progress;
use crate::config::EngineConfig;
use crate::domain::Event;
use crate::domain::units::At;
use crate::engine::Engine;
use crate::room::{Room, RoomConfig};
use crate::sim::config::SimConfig;
use crate::sim::workload::Workload;
use crate::sim::{Simulation, Traces};
use crate::store::{RunMeta, SimWorld, Store};

/// The 1,000-GPU cluster of the console measurements (docs/console-bench.md).
const LARGE: (&str, &str) = ("fixtures/sim/large-1000.toml", include_str!("../../fixtures/sim/large-1000.toml"));

/// The simulation's seed for every run here.
const SEED: u64 = 1;

/// `Room::apply` over a recorded stream of events, best of `reps` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyFigures {
    /// What was recorded, e.g. "a simulated day on the default cluster (60 GPUs)".
    pub recorded: String,
    pub events: u64,
    pub reps: u32,
    /// Wall seconds of the fastest run.
    pub best_secs: f64,
    pub events_per_sec: f64,
}

/// What the month's run is asked to do.
#[derive(Clone, Debug)]
pub struct MonthPlan {
    /// e.g. "fixtures/sim/large-1000.toml".
    pub cluster: String,
    pub config: SimConfig,
    /// The configuration as the plan runs it (TOML), kept in the log so
    /// that the what-if can re-run the world exactly.
    pub config_toml: String,
    pub days: i64,
    /// Jobs the arrival rate was set for over `days`.
    pub jobs_wanted: u64,
}

/// A simulated span run end to end through the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct MonthFigures {
    pub cluster: String,
    pub days: i64,
    pub gpus: u32,
    /// The offered load the arrival rate needed (fraction of the fleet's capacity).
    pub target_load: f64,
    pub jobs_wanted: u64,
    pub wall_secs: f64,
    pub events: u64,
    pub jobs_submitted: u64,
    pub jobs_finished: u64,
    pub jobs_failed: u64,
    /// Queued and running when the span ended.
    pub jobs_queued_at_end: u64,
    pub jobs_running_at_end: u64,
    /// Simulated seconds per wall second.
    pub speedup: f64,
    pub events_per_sec: f64,
    /// The event log's size on disk (database and WAL) when a log was kept.
    pub log_bytes: Option<u64>,
    /// The logged span compared under another discipline, when a log was kept.
    pub whatif: Option<WhatIfFigures>,
}

/// `whatif::compare` on the logged span: reading and scoring the log, and
/// the re-run under one other policy.
#[derive(Clone, Debug, PartialEq)]
pub struct WhatIfFigures {
    pub read_secs: f64,
    pub per_policy_secs: f64,
    pub policy: String,
}

fn room_config() -> RoomConfig {
    // What `gpuroom sim` uses when there is no configuration file.
    EngineConfig::default().room_config()
}

/// Records what the simulated world and a room do over `hours` on the
/// default cluster, the way `benches/engine.rs` does.
fn record(traces: &Traces, hours: i64) -> anyhow::Result<Vec<(At, Event)>> {
    let config = SimConfig::default_embedded();
    let end = config.start + TimeDelta::hours(hours);
    let mut world = Simulation::new(config, traces, SEED)?;
    let mut room = Room::new(room_config());
    let mut events = Vec::new();
    while let Some((at, event)) = world.next_event(end) {
        let effects = room.apply(at, &event);
        world.handle(at, &effects);
        events.push((at, event));
    }
    Ok(events)
}

/// Events per second of `Room::apply`: a recorded span applied to a fresh
/// room `reps` times, the fastest run kept.
pub fn apply_rate(traces: &Traces, hours: i64, reps: u32) -> anyhow::Result<ApplyFigures> {
    progress(format_args!("Room::apply: recording {hours} simulated hours on the default cluster"));
    let events = record(traces, hours)?;
    let config = room_config();
    let mut best = f64::INFINITY;
    for rep in 1..=reps.max(1) {
        let fresh = Room::new(config.clone());
        let started = Instant::now();
        let mut room = fresh;
        for (at, event) in &events {
            std::hint::black_box(room.apply(*at, event));
        }
        let secs = started.elapsed().as_secs_f64();
        drop(std::hint::black_box(room));
        best = best.min(secs);
        progress(format_args!("Room::apply: run {rep}/{reps}: {} events in {:.3} s", events.len(), secs));
    }
    let n = events.len() as u64;
    Ok(ApplyFigures {
        recorded: format!("{hours} simulated hours on the default cluster ({} GPUs)", gpus(&SimConfig::default_embedded())),
        events: n,
        reps: reps.max(1),
        best_secs: best,
        events_per_sec: n as f64 / best.max(1e-9),
    })
}

fn gpus(config: &SimConfig) -> u32 {
    config.node_specs().iter().map(|n| u32::from(n.gpu_count)).sum()
}

/// The month's plan: `days` on `config`, with the arrival rate set so that
/// about `jobs` jobs arrive (the offered load scaled, the job mix kept).
pub fn plan(cluster: &str, text: &str, traces: &Traces, days: i64, jobs: u64) -> anyhow::Result<MonthPlan> {
    let mut config = SimConfig::parse(cluster, text).with_context(|| format!("parsing {cluster}"))?;
    let offered = Workload::new(&config, &traces.philly).map_err(anyhow::Error::msg)?.jobs_per_hour;
    let wanted = jobs as f64 / (days as f64 * 24.0);
    config.target_load *= wanted / offered;
    // The same change in the text the log keeps.
    let mut table: toml::Table = text.parse().with_context(|| format!("parsing {cluster}"))?;
    table.insert("target_load".into(), toml::Value::Float(config.target_load));
    let config_toml = toml::to_string(&table).context("writing the plan's configuration")?;
    Ok(MonthPlan { cluster: cluster.into(), config, config_toml, days, jobs_wanted: jobs })
}

/// 30 days, 1,000 GPUs, 100,000 jobs (or, quick, a day on the default cluster).
pub fn month_plan(traces: &Traces, quick: bool) -> anyhow::Result<MonthPlan> {
    if quick { plan("the default cluster", crate::sim::data::DEFAULT_CONFIG.1, traces, 1, 300) } else { plan(LARGE.0, LARGE.1, traces, 30, 100_000) }
}

/// A fresh path for a throwaway event log in the temporary directory.
fn temp_db() -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("gpuroom-bench-{}-{nanos}.db", std::process::id()))
}

/// Removes the log and its WAL and shared-memory files; returns what they took.
fn remove_db(path: &Path) -> u64 {
    let mut bytes = 0;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        bytes += std::fs::metadata(&p).map_or(0, |m| m.len());
        let _ = std::fs::remove_file(&p);
    }
    bytes
}

/// Runs the plan through `Engine`, a simulated day per `run_until` (one
/// transaction each when logging), with a progress line per day.
pub fn run_month(plan: &MonthPlan, traces: &Traces, log: bool) -> anyhow::Result<MonthFigures> {
    let what = if log { "with the SQLite event log" } else { "no event log" };
    progress(format_args!("engine: {} days on {} ({} GPUs), about {} jobs, {what}", plan.days, plan.cluster, gpus(&plan.config), plan.jobs_wanted));
    let config = room_config();
    let db = log.then(temp_db);
    let store = match &db {
        Some(path) => {
            let world = SimWorld { seed: SEED, config_name: plan.cluster.clone(), config_toml: plan.config_toml.clone() };
            let meta = RunMeta {
                room_config: config.clone(),
                source: format!("bench seed={SEED} config={}", plan.cluster),
                created_with: format!("gpuroom {} bench", env!("CARGO_PKG_VERSION")),
                world: Some(world),
            };
            Some(Store::create(path, &meta)?)
        }
        None => None,
    };
    let result = drive(plan, traces, Room::new(config.clone()), store, log);
    let whatif = match (&db, &result) {
        (Some(path), Ok(_)) => Some(compare_month(path, &config)),
        _ => None,
    };
    let log_bytes = db.as_deref().map(remove_db);
    let mut figures = result?;
    figures.log_bytes = log_bytes;
    figures.whatif = whatif.transpose()?;
    Ok(figures)
}

/// The logged month under DRF instead of its own FIFO, as `gpuroom whatif` does it.
fn compare_month(path: &Path, config: &RoomConfig) -> anyhow::Result<WhatIfFigures> {
    progress(format_args!("whatif: the logged span under drf"));
    let store = Store::open_read_only(path)?;
    let mut other = config.clone();
    other.sched.discipline = crate::sched::DisciplineKind::Drf;
    let scenario = crate::whatif::Scenario { name: "drf".into(), config: other, fleet: None };
    let mut shown = -1;
    let c = crate::whatif::compare(&store, "bench", &[scenario], Default::default(), Default::default(), &mut |p| {
        let pct = (p.done * 10.0) as i32;
        if pct != shown {
            shown = pct;
            progress(format_args!("whatif: {:.0}% {}", p.done * 100.0, p.stage));
        }
    })?;
    Ok(WhatIfFigures { read_secs: c.columns[0].wall_secs, per_policy_secs: c.columns[1].wall_secs, policy: "drf".into() })
}

fn drive(plan: &MonthPlan, traces: &Traces, room: Room, store: Option<Store>, log: bool) -> anyhow::Result<MonthFigures> {
    let world = Simulation::new(plan.config.clone(), traces, SEED)?;
    let start = world.config().start;
    let mut engine = Engine::new(room, world, store);
    let started = Instant::now();
    for day in 1..=plan.days {
        engine.run_until(start + TimeDelta::days(day))?;
        let s = engine.room.stats();
        progress(format_args!(
            "engine{}: day {day}/{}: {} events, {} jobs submitted, {} done, {:.1} s",
            if log { " (logged)" } else { "" },
            plan.days,
            s.events,
            s.submitted,
            s.done,
            started.elapsed().as_secs_f64()
        ));
    }
    let wall = started.elapsed().as_secs_f64();
    // Closing the log is part of the run.
    drop(engine.store.take());
    let wall = wall.max(started.elapsed().as_secs_f64());
    let s = engine.room.stats().clone();
    let view = engine.room.view();
    Ok(MonthFigures {
        cluster: plan.cluster.clone(),
        days: plan.days,
        gpus: gpus(&plan.config),
        target_load: plan.config.target_load,
        jobs_wanted: plan.jobs_wanted,
        wall_secs: wall,
        events: s.events,
        jobs_submitted: s.submitted,
        jobs_finished: s.done,
        jobs_failed: s.failed,
        jobs_queued_at_end: u64::from(view.queue.depth),
        jobs_running_at_end: u64::from(view.queue.running),
        speedup: (plan.days * 86_400) as f64 / wall.max(1e-9),
        events_per_sec: s.events as f64 / wall.max(1e-9),
        log_bytes: None,
        whatif: None,
    })
}
