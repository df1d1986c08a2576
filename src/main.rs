//! `gpuroom`: the command line. Parses flags, builds the engine on the
//! embedded simulated cluster (the default source), and hands it to the
//! console, the batch simulation, the replay or the screenshot writer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::TimeDelta;
use clap::{Args, Parser, Subcommand};
use gpuroom::config::EngineConfig;
use gpuroom::domain::event::{Action, Role};
use gpuroom::room::{Room, RoomConfig, View};
use gpuroom::tui::run::{OperatorLink, Screen};
use gpuroom::sched::DisciplineKind;
use gpuroom::engine::Engine;
use gpuroom::report;
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::host;
use gpuroom::store::{self, RunMeta, SimWorld, Store};

#[derive(Parser, Debug)]
#[command(
    name = "gpuroom",
    version,
    about = "A terminal control room for GPU clusters bought by the hour",
    long_about = "A terminal control room for GPU clusters bought by the hour: scheduler, spot \
                  watcher, checkpoint controller and cost engine in one binary.\n\n\
                  Without a subcommand it opens the console on the embedded simulated cluster \
                  (real AWS spot prices, real preemption traces, jobs from the Philly trace), \
                  recording every event to an SQLite log that `gpuroom replay` rebuilds."
)]
struct Cli {
    #[command(flatten)]
    world: WorldArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Simulated seconds per wall-clock second in the console.
    #[arg(long, default_value_t = 60.0, value_name = "FACTOR")]
    speed: f64,
    /// Hours simulated at full speed before the console opens, so the cluster is busy.
    #[arg(long, default_value_t = 24.0, value_name = "HOURS")]
    warmup: f64,
    /// Event log. A new file: this console's engine records to it. A log whose
    /// engine runs: attach to it. A log whose engine died: resume it. Default: a
    /// new file under $XDG_STATE_HOME/gpuroom (or ~/.local/state/gpuroom).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Do not record an event log.
    #[arg(long, conflicts_with = "db")]
    no_log: bool,
    /// Colour theme: a built-in name (dark, light, high-contrast, colour-blind, mono) or a
    /// theme file (see themes/). Default: dark, or mono when NO_COLOR is set. A bad file
    /// falls back to the default.
    #[arg(long, value_name = "NAME|FILE")]
    theme: Option<String>,
    /// Read-only wall display: large layout, pages cycle every 15 s, no key but q does
    /// anything, and the engine refuses actions from it (its actor is a viewer).
    #[arg(long)]
    wall: bool,
    /// Seconds without a new view before the data is shown as STALE.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    stale_after: u64,
    /// Run on the live sources of the configuration's [sources] table (NVML, dcgm-exporter,
    /// EC2, IMDS, the local executor) instead of the simulated cluster.
    #[arg(long)]
    live: bool,
    /// Live: a dcgm-exporter endpoint to scrape, added to the configuration's (repeatable).
    #[arg(long, value_name = "URL", requires = "live")]
    dcgm: Vec<String>,
    /// Live: do not read this machine's GPUs through NVML.
    #[arg(long, requires = "live")]
    no_nvml: bool,
    /// Live: a jobs file (tenants, and jobs with their commands) the local executor runs.
    #[arg(long, value_name = "FILE", requires = "live")]
    jobs: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
struct PolicyArgs {
    /// Engine configuration (scheduler, checkpoint, spot, cost and forecast policy, TOML). Default:
    /// $XDG_CONFIG_HOME/gpuroom/config.toml if it exists.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Queue discipline, overriding the configuration: fifo, priority, drf or mlfq.
    #[arg(long, value_name = "NAME", value_parser = parse_discipline)]
    discipline: Option<DisciplineKind>,
}

fn parse_discipline(name: &str) -> Result<DisciplineKind, String> {
    DisciplineKind::parse(name).ok_or_else(|| format!("unknown discipline {name:?} (fifo, priority, drf, mlfq)"))
}

#[derive(Args, Debug, Clone)]
struct WorldArgs {
    /// Seed of the simulated world: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated cluster description (TOML); default: the embedded fixtures/sim/default.toml.
    #[arg(long, value_name = "FILE")]
    sim_config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the simulated cluster headless, as fast as possible, and print a summary.
    Sim {
        /// Simulated hours to run.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
        #[command(flatten)]
        world: WorldArgs,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Record the event log to this new file.
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
        /// Instead of the cluster, run an experiment and print its table.
        #[arg(long, value_enum)]
        experiment: Option<Experiment>,
        /// Also write the experiment's report (Markdown) to this file.
        #[arg(long, value_name = "FILE", requires = "experiment")]
        out: Option<PathBuf>,
        /// Where the experiment starts in the price history (YYYY-MM-DD).
        #[arg(long, value_name = "DATE", requires = "experiment")]
        from: Option<chrono::NaiveDate>,
    },
    /// Rebuild the state from a recorded event log and print its summary.
    Replay {
        /// The event log (an SQLite file written by gpuroom).
        db: PathBuf,
        /// Start from the latest snapshot instead of the first event.
        #[arg(long)]
        from_snapshot: bool,
    },
    /// Export a recorded run's ledger for one month: FOCUS columns or raw CSV.
    Export {
        /// The event log (an SQLite file written by gpuroom).
        #[arg(long)]
        db: PathBuf,
        #[arg(long, value_enum, default_value = "focus")]
        format: gpuroom::export::Format,
        /// The month, YYYY-MM.
        #[arg(long)]
        month: String,
        /// Write here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The weekly efficiency report of a recorded run: utilization, output
    /// per GPU-hour, queue wait, idle and zombie capacity.
    Efficiency {
        /// The event log (an SQLite file written by gpuroom).
        #[arg(long)]
        db: PathBuf,
        /// First day of the week, YYYY-MM-DD (default: the run's first day).
        #[arg(long)]
        week: Option<chrono::NaiveDate>,
    },
    /// The cheapest on-demand / reserved / spot split, priced with the real
    /// spot prices and hazard, and the reserved effective-price curve.
    Mix {
        #[command(flatten)]
        args: gpuroom::mix_report::MixArgs,
    },
    /// Run the engine with no console, owning its log: other `gpuroom --db` consoles
    /// attach to it. A log whose engine died is resumed where it stopped.
    Engine {
        /// The event log: a new file, or one whose engine died (resumed).
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
        #[command(flatten)]
        world: WorldArgs,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Simulated seconds per wall-clock second, or "max" for as fast as it runs.
        #[arg(long, default_value = "60", value_name = "FACTOR|max", value_parser = parse_pace)]
        speed: Pace,
        /// Stop after this many simulated hours since the world's start (default: run until stopped).
        #[arg(long, value_name = "HOURS")]
        until_hours: Option<f64>,
        /// With --speed max: simulated minutes per batch (commands are taken between batches).
        #[arg(long, default_value_t = 60.0, value_name = "MINUTES")]
        step_minutes: f64,
    },
    /// Ask each configured live source whether it answers, and say why not.
    Doctor {
        #[command(flatten)]
        policy: PolicyArgs,
        /// A dcgm-exporter endpoint to check too (repeatable).
        #[arg(long, value_name = "URL")]
        dcgm: Vec<String>,
    },
    /// Measure the product at scale (Room::apply events/s, a simulated month of
    /// 1,000 GPUs and 100,000 jobs, frame time and console memory at 1,000 GPUs /
    /// 10,000 jobs) and print figures with their ratio to the targets.
    Bench {
        /// Tiny sizes, for a smoke run (seconds instead of minutes).
        #[arg(long)]
        quick: bool,
        /// Where to write the report page (default: docs/benchmarks.md, not written with --quick).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The console measurement's child process (started by the bench itself).
        #[arg(long = "probe-memory", hide = true)]
        probe_memory: bool,
    },
    /// Render the console after a simulated warm-up to an SVG file.
    Screenshot {
        /// Where to write the SVG.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        #[arg(long, default_value_t = 120)]
        width: u16,
        #[arg(long, default_value_t = 40)]
        height: u16,
        /// Simulated hours before the picture is taken.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
        /// Theme: a built-in name (dark, light, high-contrast, colour-blind, mono) or a theme file.
        #[arg(long, value_name = "NAME|FILE", default_value = "dark")]
        theme: String,
        /// Only this pane, zoomed: fleet, memory, queue, market, budget or alarms.
        #[arg(long, value_name = "PANE", conflicts_with = "wall")]
        pane: Option<String>,
        /// The wall display instead of the console, at this page (0-based).
        #[arg(long, value_name = "PAGE")]
        wall: Option<usize>,
        /// Open a dialog over the console: preempt, requeue, migrate, approve or command.
        #[arg(long, value_name = "DIALOG", conflicts_with = "wall")]
        dialog: Option<String>,
        #[command(flatten)]
        world: WorldArgs,
    },
}

/// The simulated cluster's configuration: its parsed form, its name for
/// messages, and its text (kept in the log so a crashed run can be resumed).
fn load_config(path: Option<&Path>) -> Result<(SimConfig, String, String)> {
    match path {
        None => {
            let (_, text) = gpuroom::sim::data::DEFAULT_CONFIG;
            Ok((SimConfig::default_embedded(), "default".to_string(), text.to_string()))
        }
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let config = SimConfig::parse(&path.display().to_string(), &text)?;
            Ok((config, path.display().to_string(), text))
        }
    }
}

fn hours(h: f64) -> Result<TimeDelta> {
    if !(h.is_finite() && (0.0..=24.0 * 3650.0).contains(&h)) {
        bail!("hours must be between 0 and 87600, got {h}");
    }
    Ok(TimeDelta::milliseconds((h * 3_600_000.0).round() as i64))
}

/// The room's policy: the configuration file (given, or the default one if
/// it exists), then `--discipline`.
fn room_config(policy: &PolicyArgs) -> Result<RoomConfig> {
    Ok(engine_config(policy)?.room_config())
}

/// The whole configuration file (policy and live sources), then `--discipline`.
fn engine_config(policy: &PolicyArgs) -> Result<EngineConfig> {
    let default_file = xdg_dir("XDG_CONFIG_HOME", ".config")
        .map(|base| base.join("gpuroom/config.toml"))
        .filter(|p| p.exists());
    let mut config = match policy.config.clone().or(default_file) {
        Some(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            EngineConfig::parse(&path.display().to_string(), &text)?
        }
        None => EngineConfig::default(),
    };
    if let Some(d) = policy.discipline {
        config.sched.discipline = d;
    }
    Ok(config)
}

/// Builds the engine on the simulated world, recording to `db` (a new file) if given.
fn build(world: &WorldArgs, policy: &PolicyArgs, db: Option<&Path>) -> Result<Engine> {
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    build_with(world, policy, db, &traces)
}

/// `build` with the traces already parsed.
fn build_with(world: &WorldArgs, policy: &PolicyArgs, db: Option<&Path>, traces: &Traces) -> Result<Engine> {
    let (config, config_name, config_toml) = load_config(world.sim_config.as_deref())?;
    let sim = Simulation::new(config, traces, world.seed)?;
    let room_config = room_config(policy)?;
    let store = match db {
        Some(path) => {
            let sim_world = SimWorld { seed: world.seed, config_name: config_name.clone(), config_toml };
            Some(create_store(path, &room_config, format!("sim seed={} config={config_name}", world.seed), Some(sim_world))?)
        }
        None => None,
    };
    Ok(Engine::new(Room::new(room_config), sim, store))
}

/// `--db FILE` for an engine on the simulated world: a new run, the run of
/// an engine that died (resumed), or an engine's that lives (to attach to).
fn open_sim_log(world: &WorldArgs, policy: &PolicyArgs, path: &Path, traces: &Traces) -> Result<host::Opened> {
    let (config, config_name, config_toml) = load_config(world.sim_config.as_deref())?;
    let new = host::NewSim { config, config_name, config_toml, seed: world.seed, traces, room: Room::new(room_config(policy)?) };
    host::open_sim(path, new, &format!("gpuroom {}", env!("CARGO_PKG_VERSION")))
}

/// A new event log at `path` (its folder made if needed).
fn create_store(path: &Path, room_config: &RoomConfig, source: String, world: Option<SimWorld>) -> Result<Store> {
    let meta = RunMeta { room_config: room_config.clone(), source, created_with: format!("gpuroom {}", env!("CARGO_PKG_VERSION")), world };
    host::create_log(path, &meta)
}

/// An XDG base directory: `$VAR` if set to an absolute path, else `~/fallback`.
fn xdg_dir(var: &str, home_fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_fallback)))
}

fn default_log_path(kind: &str) -> Option<PathBuf> {
    let base = xdg_dir("XDG_STATE_HOME", ".local/state")?;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    Some(base.join("gpuroom").join(format!("{kind}-{stamp}.db")))
}

/// Errors end the program with one readable line (the chain of causes), not a
/// debug dump: they name the file and place, and that is what the user needs.
fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpuroom: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Sim { experiment: Some(Experiment::Spot), out, world, from, .. }) => run_spot_experiment(world.seed, from, out.as_deref()),
        Some(Command::Sim { hours: h, world, policy, db, .. }) => run_sim(&world, &policy, h, db.as_deref()),
        Some(Command::Replay { db, from_snapshot }) => run_replay(&db, from_snapshot),
        Some(Command::Efficiency { db, week }) => {
            let store = Store::open_read_only(&db)?;
            let from = match week {
                Some(day) => day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc(),
                None => store.first_event_at()?.ok_or_else(|| anyhow::anyhow!("{}: no events", db.display()))?,
            };
            print!("{}", gpuroom::efficiency::weekly(&store, from)?);
            Ok(())
        }
        Some(Command::Mix { args }) => {
            let traces = Traces::embedded().context("the embedded traces")?;
            print!("{}", gpuroom::mix_report::report(&traces, &args).map_err(anyhow::Error::msg)?);
            Ok(())
        }
        Some(Command::Export { db, format, month, out }) => run_export(&db, format, &month, out.as_deref()),
        Some(Command::Screenshot { out, width, height, hours: h, theme, pane, wall, dialog, world }) => {
            let shot = Shot { width, height, hours: h, theme, pane, wall, dialog };
            run_screenshot(&world, &out, &shot)
        }
        Some(Command::Doctor { policy, dcgm }) => run_doctor(&policy, dcgm),
        Some(Command::Bench { probe_memory: true, quick, .. }) => gpuroom::bench::console_memory_probe(quick),
        Some(Command::Bench { quick, out, .. }) => {
            let out = out.or_else(|| (!quick).then(|| PathBuf::from("docs/benchmarks.md")));
            let report = gpuroom::bench::run(&gpuroom::bench::BenchOptions { quick, out })?;
            print!("{}", report.text());
            Ok(())
        }
        Some(Command::Engine { db, world, policy, speed, until_hours, step_minutes }) => run_engine(&world, &policy, &db, speed, until_hours, step_minutes),
        None if cli.live => run_live_console(&cli),
        None => run_console(&cli),
    }
}

fn run_export(db: &Path, format: gpuroom::export::Format, month: &str, out: Option<&Path>) -> Result<()> {
    let (from, to) = gpuroom::export::month_span(month).map_err(anyhow::Error::msg)?;
    let store = Store::open_read_only(db)?;
    let lines = store.ledger_lines(from, to)?;
    if lines.is_empty() {
        bail!("{}: no ledger lines in {month} (the run covers other months, or predates the ledger)", db.display());
    }
    let write = |w: &mut dyn std::io::Write| match format {
        gpuroom::export::Format::Focus => gpuroom::export::write_focus(w, &lines),
        gpuroom::export::Format::Csv => gpuroom::export::write_csv(w, &lines),
    };
    match out {
        Some(path) => {
            let mut file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
            write(&mut file).with_context(|| format!("writing {}", path.display()))?;
            let total: gpuroom::domain::units::Micros = lines.iter().map(|l| l.amount).sum();
            eprintln!("{} lines, {total} in all, written to {}", lines.len(), path.display());
        }
        None => write(&mut std::io::stdout().lock()).context("writing to standard output")?,
    }
    Ok(())
}

#[derive(Copy, Clone, Debug, clap::ValueEnum)]
enum Experiment {
    /// Bursts of inference work on spot: six strategies side by side (SPEC §3–§4).
    Spot,
}

fn run_spot_experiment(seed: u64, from: Option<chrono::NaiveDate>, out: Option<&Path>) -> Result<()> {
    let wall = Instant::now();
    let traces = Traces::embedded().context("the embedded traces")?;
    let mut config = gpuroom::sim::experiment::ExperimentConfig::default();
    if let Some(day) = from {
        config.start = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    }
    let report = gpuroom::sim::experiment::run(&traces, config, seed)?;
    let markdown = report.markdown(seed);
    print!("{markdown}");
    println!("\n(ran in {:.2} s)", wall.elapsed().as_secs_f64());
    if let Some(path) = out {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
        println!("written to {}", path.display());
    }
    Ok(())
}

fn run_sim(world: &WorldArgs, policy: &PolicyArgs, h: f64, db: Option<&Path>) -> Result<()> {
    let mut engine = build(world, policy, db)?;
    let start = engine.world.config().start;
    let end = start + hours(h)?;
    let wall = Instant::now();
    // A simulated day at a time, so long runs show progress.
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
    println!("simulated {h} h in {:.2} s (seed {})", wall.elapsed().as_secs_f64(), world.seed);
    if let Some(store) = &engine.store {
        println!("event log {} ({} events); replay with: gpuroom replay {}", store.path().display(), store.event_count()?, store.path().display());
    }
    Ok(())
}

fn run_replay(db: &Path, from_snapshot: bool) -> Result<()> {
    let store = Store::open_read_only(db)?;
    store.check_integrity()?;
    let meta = store.meta()?;
    let wall = Instant::now();
    let (room, applied) = store::replay(&store, from_snapshot)?;
    print!("{}", report::summary(&room.view(), None));
    println!("replayed {applied} events of {} ({}) in {:.2} s", db.display(), meta.source, wall.elapsed().as_secs_f64());
    Ok(())
}

/// What `gpuroom screenshot` draws.
struct Shot {
    width: u16,
    height: u16,
    hours: f64,
    theme: String,
    pane: Option<String>,
    wall: Option<usize>,
    dialog: Option<String>,
}

/// The console as the keys would leave it: a pane zoomed, a dialog open.
fn screenshot_app(view: &View, shot: &Shot) -> Result<gpuroom::tui::App> {
    use gpuroom::tui::PaneId;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut app = gpuroom::tui::App::new();
    if let Some(name) = &shot.pane {
        app.focus = PaneId::ALL.into_iter().find(|p| p.command_name() == name).ok_or_else(|| anyhow::anyhow!("unknown pane {name:?}"))?;
        app.zoom = true;
    }
    let Some(dialog) = &shot.dialog else { return Ok(app) };
    let press = |app: &mut gpuroom::tui::App, c: KeyCode| {
        let _ = app.on_key(KeyEvent::new(c, KeyModifiers::NONE), view);
    };
    let on_running = |app: &mut gpuroom::tui::App| {
        app.focus = PaneId::Queue;
        app.zoom = false;
    };
    match dialog.as_str() {
        "preempt" | "requeue" | "migrate" => {
            on_running(&mut app);
            let key = dialog.chars().next().unwrap_or('p');
            press(&mut app, KeyCode::Char(key));
        }
        "approve" => {
            app.focus = PaneId::Budget;
            press(&mut app, KeyCode::Char('a'));
            for c in "50".chars() {
                press(&mut app, KeyCode::Char(c));
            }
            press(&mut app, KeyCode::Tab);
            press(&mut app, KeyCode::Tab);
            for c in "paper deadline on Friday".chars() {
                press(&mut app, KeyCode::Char(c));
            }
        }
        "command" => {
            press(&mut app, KeyCode::Char(':'));
            for c in "migrate ".chars() {
                press(&mut app, KeyCode::Char(c));
            }
            press(&mut app, KeyCode::Tab);
        }
        other => bail!("unknown dialog {other:?} (preempt, requeue, migrate, approve, command)"),
    }
    Ok(app)
}

fn run_screenshot(world: &WorldArgs, out: &Path, shot: &Shot) -> Result<()> {
    let no_policy = PolicyArgs { config: None, discipline: None };
    let mut engine = build(world, &no_policy, None)?;
    let start = engine.world.config().start;
    engine.run_until(start + hours(shot.hours)?)?;
    let view = engine.room.view();
    let mut ctx = gpuroom::tui::DrawContext::new(format!("SIM ×60 seed {}", world.seed));
    ctx.data_age = Some(Duration::from_millis(400));
    ctx.theme = gpuroom::tui::theme_file::load(&shot.theme)?;
    let (width, height) = (shot.width, shot.height);
    let buffer = match shot.wall {
        Some(page) => {
            let mut buffer = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, width, height));
            let wall = gpuroom::tui::wall::WallState { page, next_in: Some(Duration::from_secs(12)) };
            gpuroom::tui::wall::draw_wall(&view, &wall, &ctx, buffer.area, &mut buffer);
            buffer
        }
        None => gpuroom::tui::render_to_buffer(&view, &screenshot_app(&view, shot)?, &ctx, width, height),
    };
    // The canvas is the terminal the theme is made for (dark unless it says).
    let svg_ = gpuroom::tui::svg::color_hex;
    let bg = svg_(ctx.theme.background, gpuroom::tui::svg::DEFAULT_BG);
    let fg = svg_(ctx.theme.text.fg.unwrap_or(ratatui::style::Color::Reset), gpuroom::tui::svg::DEFAULT_FG);
    std::fs::write(out, gpuroom::tui::svg::buffer_to_svg_with(&buffer, &fg, &bg)).with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {} ({width}×{height}, after {} simulated hours)", out.display(), shot.hours);
    Ok(())
}

/// The console's drawing context, actor and screen from the flags; the
/// theme's error, if the theme could not be used, to repeat on exit.
fn console_setup(cli: &Cli, source: String) -> (gpuroom::tui::DrawContext, gpuroom::domain::Actor, Screen, Option<gpuroom::tui::theme_file::ThemeError>) {
    let mut ctx = gpuroom::tui::DrawContext::new(source);
    ctx.stale_after = Duration::from_secs(cli.stale_after.max(1));
    let role = if cli.wall { Role::Viewer } else { Role::Operator };
    let actor = gpuroom::operator::actor_from_env(role);
    let screen = if cli.wall { Screen::Wall } else { Screen::Console };
    let depth = gpuroom::tui::theme_depth::ColorDepth::from_env();
    let theme_error = match cli.theme.as_deref().map(gpuroom::tui::theme_file::load) {
        Some(Ok(theme)) => {
            // Down to what the terminal shows (256 or 16 colours, or none).
            ctx.theme = theme.at_depth(depth);
            None
        }
        Some(Err(e)) => Some(e),
        None => None,
    };
    if let Some(e) = &theme_error {
        eprintln!("gpuroom: theme not used, falling back to {}: {e}", ctx.theme.name);
        std::thread::sleep(Duration::from_secs(2));
    }
    (ctx, actor, screen, theme_error)
}

/// The console's end: the summary, the theme's error again, the log's path.
fn console_epilogue(view: &View, stats: Option<&gpuroom::sim::WorldStats>, theme_error: Option<gpuroom::tui::theme_file::ThemeError>, store: Option<&Store>) -> Result<()> {
    print!("{}", report::summary(view, stats));
    if let Some(e) = theme_error {
        eprintln!("gpuroom: the theme was not used: {e}");
    }
    if let Some(store) = store {
        println!("event log {} ({} events); replay with: gpuroom replay {}", store.path().display(), store.event_count()?, store.path().display());
    }
    Ok(())
}

fn run_console(cli: &Cli) -> Result<()> {
    if !(cli.speed.is_finite() && cli.speed > 0.0 && cli.speed <= 100_000.0) {
        bail!("--speed must be within (0, 100000], got {}", cli.speed);
    }
    let log_path = if cli.no_log { None } else { cli.db.clone().or_else(|| default_log_path(&format!("sim-seed{}", cli.world.seed))) };
    // A wall on an existing log only ever reads it, whatever its engine's state.
    if let Some(path) = log_path.as_deref().filter(|p| cli.wall && p.exists()) {
        return run_attached(cli, path, None);
    }
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let (mut engine, duty, resumed) = match log_path.as_deref() {
        None => (build_with(&cli.world, &cli.policy, None, &traces)?, host::Duty::new(host::this_process()), None),
        Some(path) => match open_sim_log(&cli.world, &cli.policy, path, &traces)? {
            host::Opened::Attach { lease } => return run_attached(cli, path, Some(lease)),
            host::Opened::Owner { engine, duty, resumed } => (*engine, duty, resumed),
        },
    };
    match (&resumed, log_path.as_deref()) {
        (Some(resumed), Some(path)) => eprintln!("gpuroom: {}", resumed.describe(path)),
        _ => {
            let start = engine.world.config().start;
            engine.run_until(start + hours(cli.warmup)?)?;
        }
    }
    // Short: the header gives the source a narrow slot. The log's path is printed on exit.
    let recording = if engine.store.is_some() { " REC" } else { "" };
    let (ctx, actor, screen, theme_error) = console_setup(cli, format!("SIM ×{} seed {}{recording}", cli.speed, cli.world.seed));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let speed = cli.speed;
    let engine = runtime.block_on(async move {
        let (views, rx) = tokio::sync::watch::channel(Arc::new(engine.room.view()));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (actions_tx, mut actions) = tokio::sync::mpsc::channel::<Action>(16);
        let (outcomes, outcomes_rx) = tokio::sync::mpsc::channel(16);
        let link = OperatorLink { actions: actions_tx, outcomes: outcomes_rx };
        let mut duty = duty;
        let driver = tokio::spawn(async move {
            let wall0 = Instant::now();
            let sim0 = engine.room.now().unwrap_or_else(|| engine.world.config().start);
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let elapsed = wall0.elapsed().as_secs_f64() * speed;
                        let target = sim0 + TimeDelta::milliseconds((elapsed * 1000.0) as i64);
                        // Attached consoles' commands, the heartbeat and the published view ride in the batch.
                        let view = duty.step(&mut engine, target, true)?.unwrap_or_else(|| engine.room.view());
                        if views.send(Arc::new(view)).is_err() {
                            break;
                        }
                    }
                    Some(action) = actions.recv() => {
                        // Applied at once, between ticks, and shown on the next view.
                        let outcome = engine.operate(&actor, action)?;
                        let _ = outcomes.send(outcome).await;
                        let _ = views.send(Arc::new(engine.room.view()));
                    }
                    _ = &mut stopped => break,
                }
            }
            duty.finish(&mut engine)?;
            anyhow::Ok(engine)
        });
        let console = gpuroom::tui::run_console(rx, ctx, Some(link), screen).await;
        let _ = stop.send(());
        let engine = driver.await.context("engine task")??;
        console?;
        anyhow::Ok(engine)
    })?;
    console_epilogue(&engine.room.view(), Some(&engine.world.stats), theme_error, engine.store.as_ref())
}

/// A console on the log of an engine that runs elsewhere (`lease`), or a
/// wall display reading it (`lease: None` when it was not looked at).
fn run_attached(cli: &Cli, path: &Path, lease: Option<store::Lease>) -> Result<()> {
    let (ctx, actor, screen, theme_error) = console_setup(cli, String::new());
    let operator = (!cli.wall).then_some(actor);
    let attached = host::attach::attach(path, operator)?;
    let mut ctx = ctx;
    let holder = lease.or_else(|| attached.lease.clone()).map_or_else(|| "no engine".to_string(), |l| format!("pid {}", l.holder.pid));
    ctx.source = if cli.wall { format!("WALL {holder}") } else { format!("ATTACHED {holder}") };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let mut attached = attached;
    let views = attached.views.clone();
    let link = attached.operator.take();
    runtime.block_on(gpuroom::tui::run_console(views, ctx, link, screen))?;
    let last = attached.views.borrow().clone();
    drop(attached);
    print!("{}", report::summary(&last, None));
    if let Some(e) = theme_error {
        eprintln!("gpuroom: the theme was not used: {e}");
    }
    println!("detached from {} (the engine goes on)", path.display());
    Ok(())
}

/// How fast a headless engine runs the simulated world.
#[derive(Copy, Clone, Debug)]
enum Pace {
    /// Simulated seconds per wall-clock second.
    Factor(f64),
    /// As fast as it can, a step of simulated time per batch.
    Max,
}

fn parse_pace(text: &str) -> Result<Pace, String> {
    if text == "max" {
        return Ok(Pace::Max);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1e7 => Ok(Pace::Factor(f)),
        _ => Err(format!("expected a factor in (0, 10000000] or \"max\", got {text:?}")),
    }
}

/// `gpuroom engine`: the engine with no console, owning `db` (new, or
/// resumed after a crash) until it is stopped (SIGTERM, Ctrl-C) or reaches
/// `until_hours` of simulated time since the world's start.
fn run_engine(world: &WorldArgs, policy: &PolicyArgs, db: &Path, pace: Pace, until_hours: Option<f64>, step_minutes: f64) -> Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    if !(step_minutes.is_finite() && step_minutes > 0.0 && step_minutes <= 24.0 * 60.0) {
        bail!("--step-minutes must be within (0, 1440], got {step_minutes}");
    }
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let (mut engine, mut duty, resumed) = match open_sim_log(world, policy, db, &traces)? {
        host::Opened::Attach { lease } => bail!("{}: already owned by the engine {} (attach a console with gpuroom --db {})", db.display(), lease.holder, db.display()),
        host::Opened::Owner { engine, duty, resumed } => (*engine, duty, resumed),
    };
    match &resumed {
        Some(r) => eprintln!("engine: {}", r.describe(db)),
        None => eprintln!("engine: new run in {}", db.display()),
    }
    eprintln!("engine: owns {} as {}", db.display(), duty.holder);
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    {
        let stop = stop.clone();
        runtime.spawn(async move {
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
            stop.store(true, Ordering::Relaxed);
        });
    }
    let start = engine.world.config().start;
    let end = until_hours.map(hours).transpose()?.map(|h| start + h);
    let step = TimeDelta::milliseconds((step_minutes * 60_000.0) as i64);
    let wall0 = Instant::now();
    let sim0 = engine.room.now().unwrap_or(start);
    let mut last_report = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = engine.room.now().unwrap_or(start);
        let mut target = match pace {
            Pace::Max => now + step,
            Pace::Factor(f) => {
                std::thread::sleep(Duration::from_millis(250));
                sim0 + TimeDelta::milliseconds((wall0.elapsed().as_secs_f64() * f * 1000.0) as i64)
            }
        };
        if let Some(end) = end {
            target = target.min(end);
        }
        duty.step(&mut engine, target, false)?;
        if matches!(pace, Pace::Max) {
            // A gap between batches, for attached consoles to queue commands.
            std::thread::sleep(Duration::from_millis(2));
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            eprintln!("engine: at {} ({} events)", target.format("%Y-%m-%d %H:%M"), engine.store.as_ref().map_or(0, |s| s.last_seq()));
        }
        if end.is_some_and(|end| target >= end) {
            break;
        }
    }
    duty.finish(&mut engine)?;
    let events = engine.store.as_ref().map_or(0, |s| s.last_seq());
    eprintln!("engine: stopped at {} with {events} events; lease released", engine.room.now().unwrap_or(start).format("%Y-%m-%d %H:%M"));
    Ok(())
}

fn run_live_console(cli: &Cli) -> Result<()> {
    use gpuroom::live::{catalogue::Catalogue, config::JobsFile, run, Live};
    let mut config = engine_config(&cli.policy)?;
    config.sources.dcgm.urls.extend(cli.dcgm.iter().cloned());
    if cli.no_nvml {
        config.sources.nvml.enabled = false;
    }
    let jobs = match &cli.jobs {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(JobsFile::parse(&path.display().to_string(), &text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    if jobs.is_some() && config.sources.local.is_none() {
        config.sources.local = Some(Default::default());
    }
    let host = config.sources.nvml.host.clone().unwrap_or_else(gpuroom::sources::nvml::host_name);
    let mut room_config = config.room_config();
    let accounts = match &config.sources.slurm {
        Some(slurm) => {
            room_config.slurm = slurm.policy();
            slurm.accounts().map_err(anyhow::Error::msg)?
        }
        None => Vec::new(),
    };
    let log_path = if cli.no_log { None } else { cli.db.clone().or_else(|| default_log_path("live")) };
    // The live engine owns its log like a simulated one: other consoles attach
    // with `gpuroom --db FILE` and act through the commands table.
    let (store, duty) = match log_path.as_deref() {
        Some(path) => {
            let mut store = create_store(path, &room_config, format!("live host={host}"), None)?;
            let me = gpuroom::host::this_process();
            store.acquire_lease(&me, gpuroom::host::now_ms(), &gpuroom::host::is_alive)?;
            (Some(store), Some(gpuroom::host::Duty::new(me)))
        }
        None => (None, None),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (live, theme_error) = runtime.block_on(async move {
        let adapters = run::spawn_sources(&config.sources, &host);
        let recording = if store.is_some() { " REC" } else { "" };
        let running = if adapters.running.is_empty() { "no sources".to_string() } else { adapters.running.join("·") };
        let (ctx, actor, screen, theme_error) = console_setup(cli, format!("LIVE {running}{recording}"));
        let catalogue = Catalogue::new(config.sources.instance_types.clone(), config.sources.nodes.clone());
        let mut live = Live::new(Room::new(room_config), store, catalogue, host, chrono::Utc::now(), adapters.executor.clone()).with_slurm(adapters.slurm.clone(), accounts);
        live.begin(chrono::Utc::now(), jobs.as_ref())?;
        let (views, rx) = tokio::sync::watch::channel(Arc::new(live.engine.room.view()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (actions_tx, actions) = tokio::sync::mpsc::channel::<Action>(16);
        let (outcomes, outcomes_rx) = tokio::sync::mpsc::channel(16);
        let links = run::Links { views, actions, outcomes, stopped };
        let driver = tokio::spawn(run::drive(live, adapters.reports, links, actor, duty));
        let link = OperatorLink { actions: actions_tx, outcomes: outcomes_rx };
        let console = gpuroom::tui::run_console(rx, ctx, Some(link), screen).await;
        let _ = stop.send(());
        let (mut live, duty) = driver.await.context("engine task")??;
        if let Some(mut duty) = duty {
            duty.finish(&mut live.engine)?;
        }
        console?;
        anyhow::Ok((live, theme_error))
    })?;
    // Adapters' threads and tasks end with the runtime.
    runtime.shutdown_timeout(Duration::from_secs(2));
    console_epilogue(&live.engine.room.view(), None, theme_error, live.engine.store.as_ref())
}

fn run_doctor(policy: &PolicyArgs, dcgm: Vec<String>) -> Result<()> {
    let mut config = engine_config(policy)?;
    config.sources.dcgm.urls.extend(dcgm);
    let host = config.sources.nvml.host.clone().unwrap_or_else(gpuroom::sources::nvml::host_name);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let checks = runtime.block_on(gpuroom::live::doctor::checks(&config.sources, &host));
    print!("{}", gpuroom::live::doctor::render(&checks));
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed > 0 {
        bail!("{failed} of {} sources did not answer", checks.len());
    }
    Ok(())
}
