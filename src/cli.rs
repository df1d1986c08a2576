//! The command line: every flag and subcommand, as clap parses them. What
//! each one does is a runner of `gpuroom::host`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use gpuroom::host::settings::{Policy, WorldChoice};
use gpuroom::sched::DisciplineKind;

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
pub struct Cli {
    #[command(flatten)]
    pub world: WorldArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Simulated seconds per wall-clock second in the console.
    #[arg(long, default_value_t = 60.0, value_name = "FACTOR")]
    pub speed: f64,
    /// Hours simulated at full speed before the console opens, so the cluster is busy.
    #[arg(long, default_value_t = 24.0, value_name = "HOURS")]
    pub warmup: f64,
    /// Event log. A new file (in a folder that exists): this console's engine records to it. A log whose
    /// engine runs: attach to it. A log whose engine died: resume it. Default: a
    /// new file under $XDG_STATE_HOME/gpuroom (or ~/.local/state/gpuroom).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not record an event log.
    #[arg(long, conflicts_with = "db")]
    pub no_log: bool,
    /// Only attach to the engine that runs on --db's log: never start a new run nor resume one
    /// (refused, saying why, when no engine runs there).
    #[arg(long, requires = "db", conflicts_with_all = ["no_log", "live"])]
    pub attach: bool,
    /// Colour theme: a built-in name (dark, light, high-contrast, colour-blind, mono) or a
    /// theme file (see themes/). Default: dark, or mono when NO_COLOR is set. A bad file
    /// falls back to the default.
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
    /// Read-only wall display: large layout, pages cycle every 15 s, no key but q does
    /// anything, and the engine refuses actions from it (its actor is a viewer).
    #[arg(long)]
    pub wall: bool,
    /// Seconds without a new view before the data is shown as STALE.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub stale_after: u64,
    /// Run on the live sources of the configuration's [sources] table (NVML, dcgm-exporter,
    /// EC2, IMDS, the local executor) instead of the simulated cluster.
    #[arg(long)]
    pub live: bool,
    /// Live: a dcgm-exporter endpoint to scrape, added to the configuration's (repeatable).
    #[arg(long, value_name = "URL", requires = "live")]
    pub dcgm: Vec<String>,
    /// Live: do not read this machine's GPUs through NVML.
    #[arg(long, requires = "live")]
    pub no_nvml: bool,
    /// Live: a jobs file (tenants, and jobs with their commands) the local executor runs.
    #[arg(long, value_name = "FILE", requires = "live")]
    pub jobs: Option<PathBuf>,
    /// Serve the engine's figures for Prometheus at http://ADDR/metrics (default
    /// 127.0.0.1:9464, loopback): the console that runs its own engine, or `gpuroom
    /// engine` (see README, Paging and dashboards).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = gpuroom::metrics::http::DEFAULT_ADDR)]
    pub metrics: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Engine configuration (scheduler, checkpoint, spot, cost and forecast policy, TOML). Default:
    /// $XDG_CONFIG_HOME/gpuroom/config.toml if it exists.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Queue discipline, overriding the configuration: fifo, priority, drf or mlfq.
    #[arg(long, value_name = "NAME", value_parser = parse_discipline)]
    pub discipline: Option<DisciplineKind>,
    /// Share a new run with this group of operators (name or id): they attach consoles
    /// and act through the engine's socket; the log stays yours alone (see README,
    /// Security). You must be a member of the group. Default: yours alone.
    #[arg(long, value_name = "GROUP")]
    pub log_group: Option<String>,
}

/// A what-if's output format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WhatIfFormat {
    Text,
    Markdown,
    Csv,
}

impl WhatIfFormat {
    pub fn format(self) -> gpuroom::whatif::Format {
        match self {
            WhatIfFormat::Text => gpuroom::whatif::Format::Text,
            WhatIfFormat::Markdown => gpuroom::whatif::Format::Markdown,
            WhatIfFormat::Csv => gpuroom::whatif::Format::Csv,
        }
    }
}

/// A time on the command line, UTC: a day, a day and minute, or RFC 3339.
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    use chrono::{NaiveDate, NaiveDateTime};
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.to_utc());
    }
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
        .map_err(|_| format!("{text:?} is not a time (YYYY-MM-DD, YYYY-MM-DDTHH:MM or RFC 3339, UTC)"))
}

fn parse_discipline(name: &str) -> Result<DisciplineKind, String> {
    DisciplineKind::parse(name).ok_or_else(|| format!("unknown discipline {name:?} (fifo, priority, drf, mlfq)"))
}

#[derive(Args, Debug, Clone)]
pub struct WorldArgs {
    /// Seed of the simulated world: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated cluster description (TOML); default: the embedded fixtures/sim/default.toml.
    #[arg(long, value_name = "FILE")]
    pub sim_config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    /// What if: re-run a recorded run under other policies and print its figures side
    /// by side with what happened (spend by billing mode, idle share, spend per tenant,
    /// GPU-hours, queue waits, JCT, jobs, preemptions, interruptions, recompute,
    /// checkpoints, budget crossings). A simulated run is re-run exactly; a live one on
    /// the model the README describes (What if).
    Whatif {
        /// The recorded run (an SQLite event log written by gpuroom).
        #[arg(long)]
        db: PathBuf,
        /// An engine configuration to try (TOML, as --config): one column each (repeatable).
        #[arg(long = "config", value_name = "FILE")]
        configs: Vec<PathBuf>,
        /// A queue discipline to try, on the recorded policy or on each --config (repeatable).
        #[arg(long = "discipline", value_name = "NAME", value_parser = parse_discipline)]
        disciplines: Vec<DisciplineKind>,
        /// A simulated run only: another simulated cluster (TOML, as gpuroom sim --sim-config)
        /// to re-run it on, the same jobs arriving (repeatable).
        #[arg(long = "sim-config", value_name = "FILE")]
        fleets: Vec<PathBuf>,
        /// Count from this time (YYYY-MM-DD or YYYY-MM-DDTHH:MM, UTC); default: the run's start.
        #[arg(long, value_parser = parse_time)]
        from: Option<chrono::DateTime<chrono::Utc>>,
        /// Count until this time (excluded); default: the run's last event.
        #[arg(long, value_parser = parse_time)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// Output: text, markdown or csv (default: from --out's extension, else text).
        #[arg(long, value_enum)]
        format: Option<WhatIfFormat>,
        /// Write the table here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Re-run a simulated log on the live model too (shows the model's own error).
        #[arg(long)]
        live_model: bool,
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
        /// Serve the engine's figures for Prometheus at http://ADDR/metrics (default
        /// 127.0.0.1:9464, loopback).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = gpuroom::metrics::http::DEFAULT_ADDR)]
        metrics: Option<String>,
    },
    /// Send one operator action to the engine running on a log, as the console's command
    /// bar takes it (`preempt 12`, `approve acme 500 6h over the weekend`, `slurm 4242
    /// requeue`), and print what came of it: the engine records it under this OS user.
    /// Exits 0 when done, 1 when refused.
    Act {
        /// The event log whose engine receives it.
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
        /// Seconds to wait for the engine's answer.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// The command, as typed after ':' in the console.
        #[arg(required = true, num_args = 1.., value_name = "WORDS")]
        words: Vec<String>,
    },
    /// On a Slurm compute node that is an EC2 spot instance: poll the instance metadata
    /// service and, on a spot interruption notice (stop, terminate, hibernate), drain this
    /// node in Slurm (`scontrol update nodename=NODE state=drain reason="spot interruption:
    /// ACTION at TIME (gpuroom agent)"`) so the head node's room requeues its jobs. Prints
    /// what it did; runs until SIGTERM / ctrl-c.
    Agent {
        /// The Slurm node to drain. Default: this machine's short host name (the kernel's,
        /// else $HOSTNAME, else `hostname`).
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// The instance metadata service.
        #[arg(long, value_name = "URL", default_value = "http://169.254.169.254")]
        imds: String,
        /// Seconds between polls (AWS recommends 5).
        #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
        every: u64,
        /// SLURM_CONF for scontrol.
        #[arg(long, value_name = "PATH")]
        slurm_conf: Option<PathBuf>,
        /// Where scontrol lives (default: on the PATH).
        #[arg(long, value_name = "DIR")]
        slurm_bin: Option<PathBuf>,
        /// Time limit of each scontrol run, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
        timeout_secs: u64,
        /// Poll once, act, exit (for cron and tests): non-zero when the metadata service did
        /// not answer or the drain failed.
        #[arg(long)]
        once: bool,
    },
    /// Slurm's ResumeProgram: for each node, launch an EC2 instance (spot or on-demand,
    /// zone and max price chosen by the capacity policy from [[sources.slurm.power.nodes]]),
    /// then `scontrol update nodename=N nodeaddr=IP nodehostname=HOST`; a node that cannot
    /// be launched is set DOWN with the reason. One line per node; non-zero if any failed.
    SlurmResume {
        /// The nodes, as Slurm's hostlist expression (`cloud-[1-3,5],gpu-st-p4d-1`).
        hostlist: String,
        /// The configuration ([sources.aws], [sources.slurm.power], the policy).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Slurm's SuspendProgram: terminate the instances gpuroom launched for these nodes.
    SlurmSuspend {
        /// The nodes, as Slurm's hostlist expression.
        hostlist: String,
        /// The configuration ([sources.aws], optionally [sources.slurm.power] cluster).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Ask each configured live source whether it answers, and say why not.
    Doctor {
        #[command(flatten)]
        policy: PolicyArgs,
        /// A dcgm-exporter endpoint to check too (repeatable).
        #[arg(long, value_name = "URL")]
        dcgm: Vec<String>,
    },
    /// Measure the product at scale (Room::apply events/s and per event as the
    /// queue grows, a simulated month of 1,000 GPUs and 100,000 jobs with and
    /// without its log, view, frame time and console memory at 1,000 GPUs /
    /// 10,000 jobs, at 10,000 GPUs / 100,000 jobs and on Alibaba 2023's fleet,
    /// the first release build and the binary) and print figures with their
    /// ratio to the targets.
    Bench {
        #[command(subcommand)]
        what: Option<BenchWhat>,
        /// Tiny sizes, for a smoke run (seconds instead of minutes).
        #[arg(long)]
        quick: bool,
        /// Where to write the report page (default: docs/benchmarks.md, not written with --quick).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Skip timing a clean `cargo build --release` of the source tree (the
        /// first-build row; it takes minutes and both cores).
        #[arg(long = "no-build")]
        no_build: bool,
        /// The console measurement's child process (started by the bench itself).
        #[arg(long = "probe-memory", hide = true)]
        probe_memory: bool,
        /// With --probe-memory: which room (site: 1,000 GPUs; large: 10,000; trace: Alibaba's fleet).
        #[arg(long, hide = true, requires = "probe_memory", value_enum, default_value = "site")]
        scale: gpuroom::bench::Scale,
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
        /// Open a dialog over the console: preempt, requeue, migrate, approve, command, whatif (the what-if pane with the
        /// warm-up re-run under every discipline), quit, or a job's detail (detail-waiting, detail-spot).
        #[arg(long, value_name = "DIALOG", conflicts_with = "wall")]
        dialog: Option<String>,
        /// Instead of the simulation, a benchmark's room as built through the core: site (1,000 GPUs), large (10,000 GPUs
        /// on 1,985 nodes) or trace (Alibaba 2023's fleet: 1,213 nodes, 6,212 GPUs of seven models, its pods).
        #[arg(long, value_enum, value_name = "ROOM", conflicts_with = "dialog")]
        room: Option<gpuroom::bench::Scale>,
        #[command(flatten)]
        world: WorldArgs,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

#[derive(Copy, Clone, Debug, clap::ValueEnum)]
pub enum Experiment {
    /// Bursts of inference work on spot: six strategies side by side (SPEC §3–§4).
    Spot,
    /// The same bursts run by the engine itself: a peak reservation, a
    /// static fleet and elastic capacity side by side.
    Burst,
}

/// How fast a headless engine runs the simulated world.
#[derive(Copy, Clone, Debug)]
pub enum Pace {
    /// Simulated seconds per wall-clock second.
    Factor(f64),
    /// As fast as it can, a step of simulated time per batch.
    Max,
}

pub fn parse_pace(text: &str) -> Result<Pace, String> {
    if text == "max" {
        return Ok(Pace::Max);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1e7 => Ok(Pace::Factor(f)),
        _ => Err(format!("expected a factor in (0, 10000000] or \"max\", got {text:?}")),
    }
}

impl PolicyArgs {
    pub fn policy(&self) -> Policy {
        Policy { config: self.config.clone(), discipline: self.discipline, log_group: self.log_group.clone() }
    }
}

impl WorldArgs {
    pub fn choice(&self) -> WorldChoice {
        WorldChoice { seed: self.seed, sim_config: self.sim_config.clone() }
    }
}

/// A benchmark other than the default scale figures.
#[derive(Subcommand, Debug)]
pub enum BenchWhat {
    /// Placement policies (random, dot-product, packing, best fit, first fit,
    /// FGD, gpuroom's gradient) on the Alibaba 2023 GPU trace under the FGD
    /// paper's protocol, next to its published figures; then replays with
    /// departures (Alibaba, Philly).
    Placement {
        /// Seeds per policy and pod list.
        #[arg(long, default_value_t = 10)]
        seeds: u64,
        /// A small cluster and one seed (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Another pod list of the 2023 trace to run too (repeatable; any subset of its columns).
        #[arg(long, value_name = "CSV")]
        pods: Vec<PathBuf>,
        /// Run only this policy (repeatable): random, dot-product, packing, best-fit, first-fit, fgd, gradient.
        #[arg(long = "policy", value_name = "NAME")]
        policies: Vec<String>,
        /// Where to write the report page (default: docs/placement.md, not written with --quick).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The queue at scale alone: `Room::apply` per event with 1,000, 10,000
    /// and 100,000 jobs queued under each discipline, a sweep of 10,000
    /// submissions and the starts as running jobs end at the largest queue.
    Queue {
        /// Tiny sizes (a smoke run).
        #[arg(long)]
        quick: bool,
    },
    /// The same real sbatch jobs on the multi-node Slurm of .ci/slurm-multi-up,
    /// run by Slurm alone and then governed by the room (DRF), with a price
    /// rise and a spot interruption: waits, DRF share error, spot use,
    /// recompute, spend and start order, side by side. Needs the cluster to itself.
    Slurm {
        /// The cluster's slurm.conf (default: $SLURM_CONF).
        #[arg(long, value_name = "FILE")]
        conf: Option<PathBuf>,
        /// The seed of the draw from the Philly trace.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// How many jobs.
        #[arg(long, default_value_t = 24)]
        jobs: usize,
        /// Short jobs and events (a smoke run of a few minutes).
        #[arg(long)]
        quick: bool,
        /// Where the jobs work and the runs keep their logs (default: a new directory under the temp dir).
        #[arg(long, value_name = "DIR")]
        work_dir: Option<PathBuf>,
        /// Where to write the report page (default: docs/slurm-bench.md, not written with --quick).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// The options before a subcommand (`gpuroom --config X engine`) are the
/// console's. The world and policy ones apply to a subcommand that takes the
/// same option, as if given after it; any other one is refused, naming where
/// it belongs, so that no option is dropped without a word.
const SHARED_GROUPS: &[&str] = &["config", "discipline", "log_group", "seed", "sim_config"];

impl Cli {
    /// Parses the command line and carries the console's world and policy
    /// options into the subcommand (see `SHARED_GROUPS`), or says why not.
    pub fn parse_checked() -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let mut command = Cli::command();
        let matches = command.try_get_matches_from_mut(std::env::args_os())?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        if let Some((name, sub)) = matches.subcommand() {
            let given =
                |m: &clap::ArgMatches, id: &str| m.try_contains_id(id).unwrap_or(false) && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
            let sub_command = command.find_subcommand(name);
            let takes_id = |id: &str| sub_command.is_some_and(|c| c.get_arguments().any(|a| a.get_id() == id));
            let takes_flag = |long: &str| sub_command.is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some(long)));
            let top_level: Vec<(String, String)> = command
                .get_arguments()
                .filter(|a| given(&matches, a.get_id().as_str()))
                .map(|a| (a.get_id().to_string(), a.get_long().unwrap_or_default().to_string()))
                .collect();
            for (id, long) in top_level {
                let flag = format!("--{long}");
                let message = if !SHARED_GROUPS.contains(&id.as_str()) || !takes_id(&id) {
                    let after = if takes_flag(&long) {
                        format!("; `gpuroom {name}` has a {flag} of its own: give it after the subcommand (gpuroom {name} {flag} …)")
                    } else {
                        format!("; `gpuroom {name}` does not take it")
                    };
                    format!("{flag} before `{name}` is an option of the console (gpuroom without a subcommand){after}")
                } else if given(sub, &id) {
                    format!("{flag} is given both before and after `{name}`: give it once")
                } else {
                    cli.carry_into_command(&id);
                    continue;
                };
                return Err(command.error(clap::error::ErrorKind::ArgumentConflict, message));
            }
        }
        Ok(cli)
    }

    /// Copies one world or policy option of the console's into the subcommand's.
    fn carry_into_command(&mut self, id: &str) {
        let (world, policy) = match &mut self.command {
            Some(Command::Sim { world, policy, .. } | Command::Engine { world, policy, .. } | Command::Screenshot { world, policy, .. }) => {
                (Some(world), Some(policy))
            }
            Some(Command::Doctor { policy, .. }) => (None, Some(policy)),
            _ => (None, None),
        };
        match (id, world, policy) {
            ("seed", Some(world), _) => world.seed = self.world.seed,
            ("sim_config", Some(world), _) => world.sim_config.clone_from(&self.world.sim_config),
            ("config", _, Some(policy)) => policy.config.clone_from(&self.policy.config),
            ("discipline", _, Some(policy)) => policy.discipline = self.policy.discipline,
            ("log_group", _, Some(policy)) => policy.log_group.clone_from(&self.policy.log_group),
            _ => {}
        }
    }
}
