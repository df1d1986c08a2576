//! `gpuroom`: parses the command line (`cli`) and calls one runner of
//! `gpuroom::host` per subcommand. Nothing else lives here.

mod cli;

use anyhow::Result;
use cli::{Cli, Command, Experiment, Pace};
use gpuroom::host::console::{self, ConsoleOptions, LiveOptions};
use gpuroom::host::screenshot::{self, Shot};
use gpuroom::host::whatif::{self, WhatIfArgs};
use gpuroom::host::{headless, runs};
use gpuroom::live::slurm_power::Power;
use gpuroom::whatif::{Model, Window};

/// Errors end the program with one readable line (the chain of causes), not a
/// debug dump: they name the file and place, and that is what the user needs.
/// They often quote what the user gave (a path, a value), so they are made
/// safe for the terminal: controls shown escaped, length bounded.
fn main() -> std::process::ExitCode {
    let cli = match Cli::parse_checked() {
        Ok(cli) => cli,
        // Usage errors quote the argument given; help and version go out as clap writes them.
        Err(e) if e.use_stderr() => {
            eprint!("{}", gpuroom::domain::text::for_terminal(&e.render().to_string()));
            return std::process::ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpuroom: {}", gpuroom::domain::text::for_terminal(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

fn console_options(cli: &Cli) -> ConsoleOptions {
    ConsoleOptions {
        world: cli.world.choice(),
        policy: cli.policy.policy(),
        speed: cli.speed,
        warmup_hours: cli.warmup,
        db: cli.db.clone(),
        no_log: cli.no_log,
        attach: cli.attach,
        theme: cli.theme.clone(),
        wall: cli.wall,
        stale_after: cli.stale_after,
        metrics: cli.metrics.clone(),
    }
}

/// `slurm-resume` / `slurm-suspend`: the configuration file, then the runner.
fn slurm_power(what: Power, hostlist: &str, config: Option<std::path::PathBuf>) -> Result<()> {
    let config = gpuroom::host::settings::engine_config(&gpuroom::host::settings::Policy { config, ..Default::default() })?;
    gpuroom::live::slurm_power::run(what, hostlist, &config).map_err(anyhow::Error::msg)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Sim { experiment: Some(Experiment::Spot), out, world, from, .. }) => runs::run_spot_experiment(world.seed, from, out.as_deref()),
        Some(Command::Sim { experiment: Some(Experiment::Burst), out, world, from, .. }) => runs::run_burst_experiment(world.seed, from, out.as_deref()),
        Some(Command::Sim { hours, world, policy, db, .. }) => runs::run_sim(&world.choice(), &policy.policy(), hours, db.as_deref()),
        Some(Command::Replay { db, from_snapshot }) => runs::run_replay(&db, from_snapshot),
        Some(Command::Efficiency { db, week }) => runs::run_efficiency(&db, week),
        Some(Command::Mix { args }) => runs::run_mix(&args),
        Some(Command::Whatif { db, configs, disciplines, fleets, from, until, format, out, live_model }) => {
            let model = if live_model { Model::Live } else { Model::Auto };
            let args = WhatIfArgs { db, configs, disciplines, fleets, window: Window { from, until }, model, format: format.map(|f| f.format()), out };
            whatif::run_whatif(&args)
        }
        Some(Command::Export { db, format, month, out }) => runs::run_export(&db, format, &month, out.as_deref()),
        Some(Command::Screenshot { out, width, height, hours, theme, pane, wall, dialog, room, world, policy }) => {
            let shot = Shot { width, height, hours, theme, pane, wall, dialog, room };
            screenshot::run_screenshot(&world.choice(), &policy.policy(), &out, &shot)
        }
        Some(Command::Agent { node, imds, every, slurm_conf, slurm_bin, timeout_secs, once }) => {
            let options = gpuroom::live::agent::AgentOptions { node, imds, every_secs: every, slurm_conf, slurm_bin, timeout_secs, once };
            gpuroom::live::agent::run(&options).map_err(anyhow::Error::msg)
        }
        Some(Command::SlurmResume { hostlist, config }) => slurm_power(Power::Resume, &hostlist, config),
        Some(Command::SlurmSuspend { hostlist, config }) => slurm_power(Power::Suspend, &hostlist, config),
        Some(Command::Act { db, timeout, words }) => gpuroom::host::act::run_act(&db, &words.join(" "), timeout),
        Some(Command::Doctor { policy, dcgm }) => runs::run_doctor(&policy.policy(), dcgm),
        Some(Command::Bench { what: Some(cli::BenchWhat::Placement { seeds, quick, pods, policies, out }), .. }) => {
            runs::run_placement_bench(seeds, quick, pods, &policies, out)
        }
        Some(Command::Bench { what: Some(cli::BenchWhat::Queue { quick }), .. }) => runs::run_queue_bench(quick),
        Some(Command::Bench { what: Some(cli::BenchWhat::Slurm { conf, seed, jobs, quick, work_dir, out }), .. }) => {
            runs::run_slurm_bench(conf, seed, jobs, quick, work_dir, out)
        }
        Some(Command::Bench { what: None, quick, out, no_build, probe_memory, scale }) => {
            let probe = probe_memory.then_some(scale);
            runs::run_bench(quick, out, !no_build, probe)
        }
        Some(Command::Engine { db, world, policy, speed, until_hours, step_minutes, metrics }) => {
            let factor = match speed {
                Pace::Factor(f) => Some(f),
                Pace::Max => None,
            };
            let pace = headless::pace(factor, step_minutes)?;
            headless::run_engine(&world.choice(), &policy.policy(), &db, pace, until_hours, metrics.as_deref())
        }
        None if cli.live => {
            let live = LiveOptions { dcgm: cli.dcgm.clone(), no_nvml: cli.no_nvml, jobs: cli.jobs.clone() };
            console::run_live_console(&console_options(&cli), &live)
        }
        None => console::run_sim_console(&console_options(&cli)),
    }
}
