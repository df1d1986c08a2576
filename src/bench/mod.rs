//! `gpuroom bench`: measures the product at scale and prints figures and
//! their ratio to the targets (issues 8 and 19); it asserts nothing about time.
//!
//! * events applied per second by `Room::apply` on a recorded simulated day
//!   (`throughput::apply_rate`);
//! * 30 simulated days of 1,000 GPUs and about 100,000 jobs end to end
//!   through `engine::Engine`, without and with the SQLite event log
//!   (`throughput::run_month`), against 25 s and 35 s, and that log's size
//!   against 300 MB; the logged month then compared under DRF by
//!   `whatif::compare`, per policy against 60 s;
//! * building the console's 1,000-GPU / 10,000-job room through
//!   `Room::apply` (against 2 s), `Room::view()` and whole-console frames at
//!   that size against the 100 ms frame budget, and the memory the console
//!   process then holds against 100 MB (`console`, in a child process);
//! * what one event costs `Room::apply` with 1,000, 10,000 and 100,000 jobs
//!   queued under each discipline, and how fast a sweep is taken in and
//!   jobs start at the largest queue (`per_event`; alone: `gpuroom bench
//!   queue`);
//! * a clean `cargo build --release` of the source tree against 6 minutes,
//!   and the release binary against 60 MB (`build`).
//!
//! `gpuroom bench slurm` (module `slurm`) is apart: it needs the multi-node
//! Slurm of `.ci/slurm-multi-up` and compares Slurm alone with Slurm governed
//! by the room on real jobs.
//!
//! `run` does it all and returns a [`Report`] (terminal text, and a
//! docs/benchmarks.md page written to `BenchOptions::out`). Progress goes to
//! standard error. Quick mode uses tiny sizes, for tests and CI, and never
//! builds.

mod build;
mod console;
mod console_report;
mod machine;
pub mod per_event;
pub mod placement;
pub mod placement_page;
pub mod placement_policies;
pub mod placement_reference;
pub mod placement_report;
mod progress;
mod report;
pub mod slurm;
mod slurm_measure;
mod slurm_run;
mod slurm_workload;
mod table;
mod throughput;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

pub use build::BuildFigures;
pub use console::{ConsoleFigures, ConsoleRun, FrameFigures, MemoryFigures, PROBE_ARG, Probe, Scale, Spread, console_memory_probe};
pub use machine::Machine;
pub use per_event::{PerEventFigures, QueueFigures, RateFigures};
use progress::progress;
pub use report::{MONTH_LOGGED_TARGET_SECS, MONTH_TARGET_SECS, Report};
pub use throughput::{ApplyFigures, MonthFigures};

use crate::sim::Traces;

#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Tiny sizes (a day on the default cluster, 100 GPUs / 1,000 jobs in the
    /// console) for tests and CI smoke runs.
    pub quick: bool,
    /// Where to write the markdown report (e.g. docs/benchmarks.md).
    pub out: Option<PathBuf>,
    /// Time a clean `cargo build --release` of the source tree (minutes;
    /// never in quick mode).
    pub build: bool,
}

/// Runs every benchmark (the console's in a child `gpuroom bench
/// --probe-memory`) and writes the markdown to `opts.out` if given.
pub fn run(opts: &BenchOptions) -> anyhow::Result<Report> {
    run_with(opts, &Probe::SelfExe)
}

/// `run`, with the way the console's child process is started given.
pub fn run_with(opts: &BenchOptions, probe: &Probe) -> anyhow::Result<Report> {
    let started = Instant::now();
    let machine = Machine::detect();
    let quick = opts.quick;
    progress(format_args!("{} run, {} build, {} cores", if quick { "quick" } else { "full" }, machine.profile, machine.cores));
    // First, so that an in-process fallback's memory is mostly the console's.
    let console = console::measure(probe, quick, Scale::Site);
    let console_large = console::measure(probe, quick, Scale::Large);
    let console_trace = console::measure(probe, quick, Scale::Trace);
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let apply = if quick { throughput::apply_rate(&traces, 3, 2)? } else { throughput::apply_rate(&traces, 24, 5)? };
    let plan = throughput::month_plan(&traces, quick)?;
    let month = throughput::run_month(&plan, &traces, false)?;
    let month_logged = throughput::run_month(&plan, &traces, true)?;
    let queue = per_event::measure(quick);
    // Last, alone: it keeps both cores busy for minutes.
    let build = build::measure(opts.build && !quick);
    let report =
        Report { machine, quick, apply, month, month_logged, console, console_large, console_trace, queue, build, total_secs: started.elapsed().as_secs_f64() };
    if let Some(path) = &opts.out {
        write_page(path, &report.markdown())?;
    }
    progress(format_args!("done in {:.1} s", report.total_secs));
    Ok(report)
}

/// Writes a report page, creating its folder.
pub fn write_page(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::host::output::write_bytes(path, None, text.as_bytes())?;
    progress(format_args!("wrote {}", path.display()));
    Ok(())
}
