//! The runners that need no terminal: a headless simulated run with its
//! summary, a replay, the ledger export, the spot experiment and the doctor,
//! and the engine-building steps the consoles share.
//!
//! Reads and writes files, prints reports; the work is the engine's, the
//! store's and the reports'.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use chrono::TimeDelta;

use super::Opened;
use super::settings::{self, Policy, WorldChoice};
use crate::domain::text::for_terminal;
use crate::engine::Engine;
use crate::report;
use crate::room::{Room, RoomConfig};
use crate::sim::{Simulation, Traces};
use crate::store::{self, RunMeta, SimWorld, Store};

/// The engine on the simulated world, recording to `db` (a new file) if given.
pub fn build(world: &WorldChoice, policy: &Policy, db: Option<&Path>, traces: &Traces) -> Result<Engine> {
    let sim = settings::load_sim(world.sim_config.as_deref())?;
    let room_config = settings::room_config(policy)?;
    let name = sim.name.clone();
    let engine_sim = Simulation::new(sim.config, traces, world.seed)?;
    let store = match db {
        Some(path) => {
            let sim_world = SimWorld { seed: world.seed, config_name: name.clone(), config_toml: sim.text };
            Some(create_store(path, &room_config, format!("sim seed={} config={name}", world.seed), Some(sim_world), &policy.access()?, None)?)
        }
        None => None,
    };
    Ok(Engine::new(Room::new(room_config), engine_sim, store))
}

/// `--db FILE` for an engine on the simulated world: a new run, the run of
/// an engine that died (resumed), or an engine's that lives (to attach to).
pub fn open_sim_log(world: &WorldChoice, policy: &Policy, path: &Path, traces: &Traces) -> Result<Opened> {
    let sim = settings::load_sim(world.sim_config.as_deref())?;
    let new = super::NewSim {
        config: sim.config,
        config_name: sim.name,
        config_toml: sim.text,
        seed: world.seed,
        traces,
        room: Room::new(settings::room_config(policy)?),
    };
    super::open_sim(path, new, &format!("gpuroom {}", env!("CARGO_PKG_VERSION")), &policy.access()?)
}

/// A new event log at `path` (its folder made if needed), leased to `owner` if given.
pub fn create_store(
    path: &Path,
    room_config: &RoomConfig,
    source: String,
    world: Option<SimWorld>,
    access: &crate::store::Access,
    owner: Option<&crate::store::LeaseHolder>,
) -> Result<Store> {
    let meta = RunMeta { room_config: room_config.clone(), source, created_with: format!("gpuroom {}", env!("CARGO_PKG_VERSION")), world };
    Ok(super::create_log(path, &meta, access, owner)?)
}

/// `gpuroom sim`: a simulated run as fast as it goes, a day at a time, then its summary.
pub fn run_sim(world: &WorldChoice, policy: &Policy, hours: f64, db: Option<&Path>) -> Result<()> {
    // Checked before the log exists, so a bad argument leaves no file behind.
    let span = settings::hours(hours)?;
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let mut engine = build(world, policy, db, &traces)?;
    let start = engine.world.config().start;
    let end = start + span;
    let wall = Instant::now();
    let mut at = start;
    while at < end {
        at = (at + TimeDelta::days(1)).min(end);
        engine.run_until(at)?;
        if end - start > TimeDelta::days(1) {
            eprintln!("simulated {} of {} h", (at - start).num_hours(), (end - start).num_hours());
        }
    }
    let view = engine.room.view();
    print!("{}", report::summary(&view, Some(&engine.world.stats)));
    println!("simulated {hours} h in {:.2} s (seed {})", wall.elapsed().as_secs_f64(), world.seed);
    if let Some(store) = &engine.store {
        print_log_footer(store)?;
    }
    Ok(())
}

/// `gpuroom replay`: the state rebuilt from a log, and its summary.
pub fn run_replay(db: &Path, from_snapshot: bool) -> Result<()> {
    let store = Store::open_read_only(db)?;
    if let Some(note) = store.note() {
        eprintln!("gpuroom: {note}");
    }
    store.check_integrity()?;
    let meta = store.meta()?;
    let wall = Instant::now();
    let replayed = store::replay_checked(&store, from_snapshot)?;
    for note in &replayed.notes {
        eprintln!("gpuroom: {}", for_terminal(note));
    }
    print!("{}", report::summary(&replayed.room.view(), None));
    let from = replayed.started_after.map_or_else(String::new, |seq| format!(" after the snapshot at event {seq}"));
    println!("replayed {} events{from} of {} ({}) in {:.2} s", replayed.applied, shown(db), for_terminal(&meta.source), wall.elapsed().as_secs_f64());
    if !replayed.checked.is_empty() {
        let seqs: Vec<String> = replayed.checked.iter().map(|s| s.to_string()).collect();
        println!("the rebuilt room matches the engine's snapshot at event {}", seqs.join(" and "));
    }
    Ok(())
}

/// `gpuroom export`: a month of the ledger as FOCUS columns or raw CSV.
pub fn run_export(db: &Path, format: crate::export::Format, month: &str, out: Option<&Path>) -> Result<()> {
    let (from, to) = crate::export::month_span(month).map_err(anyhow::Error::msg)?;
    let store = Store::open_read_only(db)?;
    let lines = store.ledger_lines(from, to)?;
    if lines.is_empty() {
        let covers = match store.ledger_span()? {
            Some((first, last)) => format!("the run's ledger covers {} to {}", first.format("%Y-%m"), last.format("%Y-%m")),
            None => "the run has no ledger lines at all (it predates the ledger, or billed nothing)".to_string(),
        };
        bail!("{}: no ledger lines in {month}: {covers}", db.display());
    }
    // FOCUS's billing account is the run, named by the source its log records.
    let account = crate::export::BillingAccount::of_run(&store.meta()?.source);
    let write = |w: &mut dyn std::io::Write| match format {
        crate::export::Format::Focus => crate::export::write_focus(w, &lines, &account),
        crate::export::Format::Csv => crate::export::write_csv(w, &lines),
    };
    match out {
        Some(path) => {
            super::output::write(path, Some(db), |w| write(w).map_err(std::io::Error::other))?;
            let total: crate::domain::units::Micros = lines.iter().map(|l| l.amount).sum();
            eprintln!("{} lines, {total} in all, written to {}", lines.len(), shown(path));
        }
        None => write(&mut std::io::stdout().lock()).context("writing to standard output")?,
    }
    Ok(())
}

/// `gpuroom efficiency`: the weekly efficiency report of a recorded run.
pub fn run_efficiency(db: &Path, week: Option<chrono::NaiveDate>) -> Result<()> {
    let store = Store::open_read_only(db)?;
    let from = match week {
        Some(day) => day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc(),
        None => store.first_event_at()?.ok_or_else(|| anyhow::anyhow!("{}: no events", db.display()))?,
    };
    print!("{}", crate::efficiency::weekly(&store, from)?);
    Ok(())
}

/// `gpuroom mix`: the cheapest buying mix, priced with the real prices and hazard.
pub fn run_mix(args: &crate::mix_report::MixArgs) -> Result<()> {
    let traces = Traces::embedded().context("the embedded traces")?;
    print!("{}", crate::mix_report::report(&traces, args).map_err(anyhow::Error::msg)?);
    Ok(())
}

/// `gpuroom sim --experiment spot`: the spot experiment's table.
pub fn run_spot_experiment(seed: u64, from: Option<chrono::NaiveDate>, out: Option<&Path>) -> Result<()> {
    experiment(from, out, |traces, config| Ok(crate::sim::experiment::run(traces, config, seed)?.markdown(seed)))
}

/// `gpuroom sim --experiment burst`: the bursts through the room, fleet by fleet.
pub fn run_burst_experiment(seed: u64, from: Option<chrono::NaiveDate>, out: Option<&Path>) -> Result<()> {
    experiment(from, out, |traces, config| Ok(crate::sim::experiment::elastic::run(traces, config, seed)?.markdown()))
}

/// Runs an experiment from `from` (default: its configured start), prints
/// its Markdown report and writes it to `out`.
fn experiment(
    from: Option<chrono::NaiveDate>,
    out: Option<&Path>,
    run: impl FnOnce(&Traces, crate::sim::experiment::ExperimentConfig) -> Result<String>,
) -> Result<()> {
    let wall = Instant::now();
    let traces = Traces::embedded().context("the embedded traces")?;
    let mut config = crate::sim::experiment::ExperimentConfig::default();
    if let Some(day) = from {
        config.start = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    }
    let markdown = run(&traces, config)?;
    print!("{markdown}");
    println!("\n(ran in {:.2} s)", wall.elapsed().as_secs_f64());
    if let Some(path) = out {
        super::output::write_bytes(path, None, markdown.as_bytes())?;
        println!("written to {}", shown(path));
    }
    Ok(())
}

/// `gpuroom doctor`: whether each configured live source answers.
pub fn run_doctor(policy: &Policy, dcgm: Vec<String>) -> Result<()> {
    let mut config = settings::engine_config(policy)?;
    config.sources.dcgm.urls.extend(dcgm);
    let host = config.sources.nvml.host.clone().unwrap_or_else(crate::sources::nvml::host_name);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let checks = runtime.block_on(crate::live::doctor::checks(&config.sources, &host));
    // Details quote what the sources answered: each line bounded, controls shown escaped.
    print!("{}", crate::domain::text::bounded(&crate::live::doctor::render(&checks), crate::domain::text::ECHO_LINE_CHARS, 64_000));
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed > 0 {
        bail!("{failed} of {} sources did not answer", checks.len());
    }
    Ok(())
}

/// `gpuroom bench placement`: placement policies on the Alibaba trace
/// (docs/placement.md unless quick).
pub fn run_placement_bench(seeds: u64, quick: bool, pods: Vec<std::path::PathBuf>, policies: &[String], out: Option<std::path::PathBuf>) -> Result<()> {
    use crate::bench::placement_policies::BenchPolicy;
    let policies = policies
        .iter()
        .map(|name| {
            BenchPolicy::from_key(name)
                .with_context(|| format!("no placement policy {name:?}: one of {}", BenchPolicy::ALL.iter().map(|p| p.key()).collect::<Vec<_>>().join(", ")))
        })
        .collect::<Result<Vec<_>>>()?;
    let out = out.or_else(|| (!quick && policies.is_empty()).then(|| std::path::PathBuf::from("docs/placement.md")));
    let report = crate::bench::placement_report::run(&crate::bench::placement_report::PlacementOptions { seeds, quick, pods, policies })?;
    let text = report.markdown();
    if let Some(path) = &out {
        crate::bench::write_page(path, &text)?;
    }
    print!("{text}");
    Ok(())
}

/// `gpuroom bench slurm`: Slurm alone against Slurm governed by the room,
/// on the multi-node cluster (docs/slurm-bench.md unless quick).
pub fn run_slurm_bench(
    conf: Option<std::path::PathBuf>,
    seed: u64,
    jobs: usize,
    quick: bool,
    work_dir: Option<std::path::PathBuf>,
    out: Option<std::path::PathBuf>,
) -> Result<()> {
    let conf = conf
        .or_else(|| std::env::var_os("SLURM_CONF").map(Into::into))
        .context("which cluster? --conf DIR/slurm.conf (or SLURM_CONF); .ci/slurm-multi-up DIR starts the multi-node one the bench runs on")?;
    anyhow::ensure!(jobs > 0, "--jobs must be at least 1");
    let out = out.or_else(|| (!quick).then(|| std::path::PathBuf::from("docs/slurm-bench.md")));
    let bench = crate::bench::slurm::run(&crate::bench::slurm::SlurmBenchOptions { conf, seed, jobs, quick, work_dir })?;
    let text = bench.markdown();
    if let Some(path) = &out {
        crate::bench::write_page(path, &text)?;
    }
    print!("{text}");
    Ok(())
}

/// `gpuroom bench`: the figures at scale (docs/benchmarks.md unless quick).
pub fn run_bench(quick: bool, out: Option<std::path::PathBuf>, build: bool, probe: Option<crate::bench::Scale>) -> Result<()> {
    if let Some(scale) = probe {
        return crate::bench::console_memory_probe(quick, scale);
    }
    let out = out.or_else(|| (!quick).then(|| std::path::PathBuf::from("docs/benchmarks.md")));
    let report = crate::bench::run(&crate::bench::BenchOptions { quick, out, build })?;
    print!("{}", report.text());
    Ok(())
}

/// `gpuroom bench queue`: the queue-scale rows of `gpuroom bench` alone.
pub fn run_queue_bench(quick: bool) -> Result<()> {
    let rows = crate::bench::per_event::measure(quick).rows();
    for row in rows {
        println!("{} | {} | {} | {}", row.measure, row.figure, row.target, row.ratio);
    }
    Ok(())
}

/// The last line of a recorded run: where its log is and how to replay it.
pub(crate) fn print_log_footer(store: &Store) -> Result<()> {
    let path = shown(store.path());
    println!("event log {path} ({} events); replay with: gpuroom replay {path}", store.event_count()?);
    Ok(())
}

/// A path the user gave, as it may be printed on a terminal.
pub(crate) fn shown(path: &Path) -> String {
    for_terminal(&path.display().to_string())
}
