//! The console's runners: on the simulated cluster (this process owns the
//! engine, or attaches to the one that owns the log), on live sources, and
//! as a wall display. Each wires the engine's loop (`driver::drive`) to the
//! terminal (`tui::run_console`) with a view channel one way and operator
//! actions the other, and prints the run's summary on exit.
//!
//! Owns the wiring only: what the engine does is the engine's, what the
//! screen shows is the TUI's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::{mpsc, oneshot, watch};

use super::driver::{self, Links, Pace, SimRunner};
use super::settings::{self, Policy, WorldChoice};
use super::{Duty, Opened, attach};
use crate::domain::event::{Action, Actor, Role};
use crate::domain::text::for_terminal;
use crate::live::Live;
use crate::live::catalogue::Catalogue;
use crate::live::config::JobsFile;
use crate::live::run::{LiveRunner, spawn_sources};
use crate::report;
use crate::room::{Room, View};
use crate::sim::{Traces, WorldStats};
use crate::store::Store;
use crate::tui::DrawContext;
use crate::tui::run::{OperatorLink, Screen};
use crate::tui::theme_file::ThemeError;

/// What the console is asked for on the command line.
#[derive(Clone, Debug)]
pub struct ConsoleOptions {
    pub world: WorldChoice,
    pub policy: Policy,
    pub speed: f64,
    pub warmup_hours: f64,
    /// `None` with `no_log`: record nothing.
    pub db: Option<PathBuf>,
    pub no_log: bool,
    /// Only attach to an engine running on `db`: never start or resume one.
    pub attach: bool,
    pub theme: Option<String>,
    pub wall: bool,
    pub stale_after: u64,
    /// Serve `/metrics` here (`--metrics`), for a console that runs its engine.
    pub metrics: Option<String>,
}

/// Live sources on top of the console's options.
#[derive(Clone, Debug, Default)]
pub struct LiveOptions {
    pub dcgm: Vec<String>,
    pub no_nvml: bool,
    pub jobs: Option<PathBuf>,
}

/// The drawing context, actor and screen from the options; the theme's
/// error, if the theme could not be used, to repeat on exit. `owns_engine`:
/// the console runs the engine, so quitting stops it (asked first).
fn setup(opts: &ConsoleOptions, source: String, owns_engine: bool) -> (DrawContext, Actor, Screen, Option<ThemeError>) {
    let mut ctx = DrawContext::new(source);
    ctx.owns_engine = owns_engine;
    ctx.stale_after = Duration::from_secs(opts.stale_after.max(1));
    let role = if opts.wall { Role::Viewer } else { Role::Operator };
    let actor = crate::operator::actor_from_env(role);
    let screen = if opts.wall { Screen::Wall } else { Screen::Console };
    let depth = crate::tui::theme_depth::ColorDepth::from_env();
    let theme_error = match opts.theme.as_deref().map(crate::tui::theme_file::load) {
        Some(Ok(theme)) => {
            // Down to what the terminal shows (256 or 16 colours, or none).
            ctx.theme = theme.at_depth(depth);
            None
        }
        Some(Err(e)) => Some(e),
        None => None,
    };
    if let Some(e) = &theme_error {
        // On the console's status line (and again on exit): a message on
        // stderr would vanish behind the alternate screen.
        ctx.first_words = Some(crate::tui::Status::refused(format!("theme not used, falling back to {}: {}", ctx.theme.name, for_terminal(&e.to_string()))));
    }
    (ctx, actor, screen, theme_error)
}

/// The console's end: the summary, the theme's error again, the log's path.
fn epilogue(view: &View, stats: Option<&WorldStats>, theme_error: Option<ThemeError>, store: Option<&Store>) -> Result<()> {
    print!("{}", report::summary(view, stats));
    if let Some(e) = theme_error {
        eprintln!("gpuroom: the theme was not used: {}", for_terminal(&e.to_string()));
    }
    if let Some(store) = store {
        super::runs::print_log_footer(store)?;
    }
    Ok(())
}

/// The channels between the engine's loop and the terminal.
struct Wiring {
    links: Links,
    views: watch::Receiver<Arc<View>>,
    operator: OperatorLink,
    stop: oneshot::Sender<()>,
}

/// `speed`: the simulated speed, where this console runs the simulation
/// (then `+` and `-` change it).
fn wire(first: View, reports: Option<mpsc::Receiver<crate::sources::report::Report>>, speed: Option<f64>) -> Wiring {
    let (views_tx, views) = watch::channel(Arc::new(first));
    let (stop, stopped) = oneshot::channel::<()>();
    let (actions_tx, actions) = mpsc::channel::<Action>(16);
    let (outcomes, outcomes_rx) = mpsc::channel(16);
    let (speed_tx, speed_rx) = speed.map(watch::channel).unzip();
    let links = Links { views: Some(views_tx), actions, outcomes, reports, speed: speed_rx, stopped };
    Wiring { links, views, operator: OperatorLink { actions: actions_tx, outcomes: outcomes_rx, speed: speed_tx }, stop }
}

/// `gpuroom`: the console on the simulated cluster.
pub fn run_sim_console(opts: &ConsoleOptions) -> Result<()> {
    if !(opts.speed.is_finite() && opts.speed > 0.0 && opts.speed <= 100_000.0) {
        bail!("--speed must be within (0, 100000], got {}", opts.speed);
    }
    let log_path = if opts.no_log { None } else { opts.db.clone().or_else(|| settings::default_log_path(&format!("sim-seed{}", opts.world.seed))) };
    if opts.wall && opts.metrics.is_some() {
        bail!("--metrics serves a running engine's figures; a wall runs none (give --metrics to the engine)");
    }
    // A wall only ever reads a log, whatever its engine's state; it never starts one.
    if opts.wall {
        return match log_path.as_deref() {
            Some(path) if path.exists() => run_attached(opts, path),
            Some(path) => bail!(
                "{}: no such log; the wall display only reads a log an engine writes (start one with gpuroom engine --db {})",
                path.display(),
                path.display()
            ),
            None => bail!("--wall needs a log to read (--db FILE)"),
        };
    }
    // Asked to attach: an engine must be running there; nothing is started or resumed.
    if opts.attach {
        let Some(path) = log_path.as_deref() else { bail!("--attach needs the log to attach to (--db FILE)") };
        let shown = super::runs::shown(path);
        return match super::live_engine(path) {
            Some(_) => run_attached(opts, path),
            None if !path.exists() => {
                bail!("{shown}: no such log; --attach never starts a run (without --attach, gpuroom --db {shown} starts a new one there)")
            }
            None => bail!("{shown}: no engine runs on this log now; --attach never resumes one (without --attach, gpuroom --db {shown} resumes it here)"),
        };
    }
    let warmup = settings::hours(opts.warmup_hours)?;
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let new_log = log_path.as_deref().is_some_and(|p| !p.exists());
    let (mut engine, mut duty, resumed) = match log_path.as_deref() {
        None => (super::runs::build(&opts.world, &opts.policy, None, &traces)?, Duty::new(super::this_process()), None),
        Some(path) => match super::runs::open_sim_log(&opts.world, &opts.policy, path, &traces)? {
            Opened::Attach { .. } if opts.metrics.is_some() => {
                bail!("{}: its engine runs in another process; --metrics serves only an engine this process runs (give it to that engine)", path.display())
            }
            Opened::Attach { .. } => return run_attached(opts, path),
            Opened::Owner { engine, duty, resumed } => (*engine, *duty, resumed),
        },
    };
    if let Some(addr) = opts.metrics.as_deref() {
        let at = duty.serve_metrics(addr, "sim").map_err(anyhow::Error::msg)?;
        eprintln!("gpuroom: metrics at http://{at}/metrics");
    }
    match (&resumed, log_path.as_deref()) {
        (Some(resumed), Some(path)) => eprintln!("gpuroom: {}", for_terminal(&resumed.describe(path))),
        _ => {
            let start = engine.world.config().start;
            engine.run_until(start + warmup)?;
        }
    }
    // Short: the header gives the source a narrow slot. The log's path is printed on exit.
    let recording = if engine.store.is_some() { " REC" } else { "" };
    let (mut ctx, actor, screen, theme_error) = setup(opts, format!("seed {}{recording}", opts.world.seed), true);
    ctx.simulated = true;
    ctx.speed = Some(opts.speed);
    // A --db that named no file made a new run: said on screen, so that a
    // mistyped path is not taken for the cluster that was meant.
    if let (true, None, Some(path)) = (new_log, &resumed, log_path.as_deref()) {
        ctx.first_words = Some(crate::tui::Status::hint(format!(
            "new log {}: a new simulated run (seed {}) that this console's engine records",
            super::runs::shown(path),
            opts.world.seed
        )));
    }
    ctx.log_path = log_path.as_deref().map(super::runs::shown);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let pace = Pace::Factor(opts.speed);
    let (runner, _) = runtime.block_on(async move {
        let wiring = wire(engine.room.view(), None, Some(opts.speed));
        let runner = SimRunner::new(engine, pace, None);
        let loop_ = tokio::spawn(finishing(driver::drive(runner, wiring.links, actor, Some(duty))));
        let console = crate::tui::run_console(wiring.views, ctx, Some(wiring.operator), super::whatif::console_link(log_path.clone()), screen).await;
        let _ = wiring.stop.send(());
        let done = loop_.await.context("engine task")??;
        console?;
        anyhow::Ok(done)
    })?;
    let engine = &runner.engine;
    epilogue(&engine.room.view(), Some(&engine.world.stats), theme_error, engine.store.as_ref())
}

/// The loop, then the owner's clean stop: the open batch committed, a
/// snapshot, the lease released.
async fn finishing<R: driver::Runner>(run: impl std::future::Future<Output = Result<(R, Option<Duty>)>>) -> Result<(R, Option<Duty>)> {
    let (mut runner, mut duty) = run.await?;
    if let Some(duty) = duty.as_mut() {
        duty.finish(runner.engine())?;
    }
    Ok((runner, duty))
}

/// A console on the log of an engine that runs elsewhere, or a wall
/// display reading it.
pub fn run_attached(opts: &ConsoleOptions, path: &Path) -> Result<()> {
    let (mut ctx, actor, screen, theme_error) = setup(opts, String::new(), false);
    let operator = (!opts.wall).then_some(actor);
    let mut attached = attach::attach(path, operator)?;
    // The engine's pid follows each view (a takeover shows the new one).
    ctx.source = if opts.wall { "WALL".to_string() } else { "ATTACHED".to_string() };
    ctx.log_path = Some(super::runs::shown(path));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let views = attached.views.clone();
    let link = attached.operator.take();
    let whatif = if opts.wall { None } else { super::whatif::console_link(Some(path.to_path_buf())) };
    runtime.block_on(crate::tui::run_console(views, ctx, link, whatif, screen))?;
    let last = attached.views.borrow().clone();
    drop(attached);
    print!("{}", report::summary(&last, None));
    if let Some(e) = theme_error {
        eprintln!("gpuroom: the theme was not used: {}", for_terminal(&e.to_string()));
    }
    println!("detached from {} (the engine goes on)", super::runs::shown(path));
    Ok(())
}

/// `gpuroom --live`: the console on the configured live sources.
pub fn run_live_console(opts: &ConsoleOptions, live_opts: &LiveOptions) -> Result<()> {
    let mut config = settings::engine_config(&opts.policy)?;
    config.sources.dcgm.urls.extend(live_opts.dcgm.iter().cloned());
    if live_opts.no_nvml {
        config.sources.nvml.enabled = false;
    }
    let jobs = match &live_opts.jobs {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(JobsFile::parse(&path.display().to_string(), &text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    if jobs.is_some() && config.sources.local.is_none() {
        config.sources.local = Some(Default::default());
    }
    let host = config.sources.nvml.host.clone().unwrap_or_else(crate::sources::nvml::host_name);
    let mut room_config = config.room_config();
    // Live, the room proposes what to buy and a person approves it, unless configured otherwise.
    room_config.capacity = config.capacity.resolve(crate::capacity::CapacityMode::Advisory);
    let accounts = match &config.sources.slurm {
        Some(slurm) => {
            room_config.slurm = slurm.policy();
            slurm.accounts().map_err(anyhow::Error::msg)?
        }
        None => Vec::new(),
    };
    let log_path = if opts.no_log { None } else { opts.db.clone().or_else(|| settings::default_log_path("live")) };
    // The live engine owns its log like a simulated one: other consoles attach
    // with `gpuroom --db FILE` and act through its socket.
    let (store, duty) = match log_path.as_deref() {
        Some(path) => {
            let me = super::this_process();
            let access = opts.policy.access()?;
            let store = super::runs::create_store(path, &room_config, format!("live host={host}"), None, &access, Some(&me))?;
            let mut duty = Duty::owning(me, path, access.group);
            duty.set_world("live");
            (Some(store), Some(duty))
        }
        None => (None, None),
    };
    // Live with no log: the duty is only the metrics'.
    let duty = match (duty, opts.metrics.as_deref()) {
        (duty, None) => duty,
        (duty, Some(addr)) => {
            let mut duty = duty.unwrap_or_else(|| Duty::new(super::this_process()));
            let at = duty.serve_metrics(addr, "live").map_err(anyhow::Error::msg)?;
            eprintln!("gpuroom: metrics at http://{at}/metrics");
            Some(duty)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (runner, theme_error) = runtime.block_on(async move {
        let adapters = spawn_sources(&config.sources, &host);
        let recording = if store.is_some() { " REC" } else { "" };
        let running = if adapters.running.is_empty() { "no sources".to_string() } else { adapters.running.join("·") };
        let (mut ctx, actor, screen, theme_error) = setup(opts, format!("LIVE {running}{recording}"), true);
        ctx.log_path = log_path.as_deref().map(super::runs::shown);
        let catalogue = Catalogue::new(config.sources.instance_types.clone(), config.sources.nodes.clone());
        let live = Live::new(Room::new(room_config), store, catalogue, host, chrono::Utc::now(), adapters.executor.clone())
            .with_slurm(adapters.slurm.clone(), accounts);
        let pools = config.sources.aws.as_ref().map(|a| a.pools.clone()).unwrap_or_default();
        let mut live = live.with_cloud(adapters.cloud.clone(), &pools).map_err(anyhow::Error::msg)?;
        live.begin(chrono::Utc::now(), jobs.as_ref())?;
        let wiring = wire(live.engine.room.view(), Some(adapters.reports), None);
        let loop_ = tokio::spawn(finishing(driver::drive(LiveRunner::new(live), wiring.links, actor, duty)));
        let console = crate::tui::run_console(wiring.views, ctx, Some(wiring.operator), super::whatif::console_link(log_path.clone()), screen).await;
        let _ = wiring.stop.send(());
        let (runner, _) = loop_.await.context("engine task")??;
        console?;
        anyhow::Ok((runner, theme_error))
    })?;
    // Adapters' threads and tasks end with the runtime.
    runtime.shutdown_timeout(Duration::from_secs(2));
    let engine = &runner.live.engine;
    epilogue(&engine.room.view(), None, theme_error, engine.store.as_ref())
}
