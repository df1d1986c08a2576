//! The console at scale: `Room::view()` and whole-console frames
//! (`tui::draw_buffer`) on `tui::fixture_large::large_room` at two sizes and
//! on `tui::fixture_trace::trace_room` (a real fleet's node list), and what
//! the process then holds in memory (VmRSS, VmHWM of /proc/self/status).
//!
//! Memory is only meaningful in a process that did nothing else, so the
//! whole console measurement runs in a child: `gpuroom bench --probe-memory`
//! calls [`console_memory_probe`], which prints one line, `MARKER` and the
//! figures as JSON, that [`measure`] reads back. If no child can be run,
//! the figures are taken in this process and say so.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use serde::{Deserialize, Serialize};

use super::progress::progress;
use crate::room::Room;
use crate::tui::fixture_large::large_room;
use crate::tui::fixture_trace::trace_room;
use crate::tui::{App, DrawContext, Theme};

/// Starts the probe's line on the child's standard output.
pub const MARKER: &str = "gpuroom-console-probe ";

/// The argument `gpuroom bench` re-invokes itself with.
pub const PROBE_ARG: &str = "--probe-memory";

/// The fixture's seed.
const SEED: u64 = 1;

/// Median and 95th percentile of a set of timings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
}

impl Spread {
    pub fn of(mut ms: Vec<f64>) -> Spread {
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let at = |q: f64| ms.get(((n as f64 * q).ceil() as usize).saturating_sub(1).min(n.saturating_sub(1))).copied().unwrap_or(0.0);
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        Spread { n, median_ms: median, p95_ms: at(0.95) }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameFigures {
    pub width: u16,
    pub height: u16,
    pub time: Spread,
}

/// VmRSS and VmHWM, in MB (10^6 bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub rss_mb: f64,
    pub hwm_mb: f64,
}

/// Everything measured on one console room.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsoleFigures {
    /// The fixture call that built the room, and what it is.
    #[serde(default)]
    pub room: String,
    /// The fleet the fixture built (GPUs), and the jobs it was asked for.
    pub gpus: usize,
    pub jobs: usize,
    /// What its view shows.
    pub view_gpus: u32,
    pub view_nodes: usize,
    pub view_queued: u32,
    pub view_running: u32,
    pub view_done: u64,
    /// Building the room through `Room::apply`.
    pub build_secs: f64,
    pub view: Spread,
    pub frames: Vec<FrameFigures>,
    /// `None`: no /proc/self/status here.
    pub memory: Option<MemoryFigures>,
    /// A `/metrics` scrape of the room's view (Prometheus text).
    #[serde(default)]
    pub scrape: Option<ScrapeFigures>,
}

/// What one scrape of the large room costs and carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScrapeFigures {
    pub bytes: usize,
    pub series: usize,
    pub families: usize,
    pub render: Spread,
}

/// Which room the console is measured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// 1,000 GPUs and 10,000 jobs: the month's site.
    Site,
    /// 10,000 GPUs and 100,000 jobs: the largest public GPU traces' size.
    Large,
    /// Alibaba's 2023 GPU fleet (1,213 nodes, 6,212 GPUs of seven models)
    /// with its pod list cycled to 60,000 jobs: a full fleet of short pods.
    Trace,
}

impl Scale {
    /// The environment variable that tells a test binary's probe child the scale.
    pub const ENV: &'static str = "GPUROOM_BENCH_PROBE_SCALE";

    pub fn name(self) -> &'static str {
        match self {
            Scale::Site => "site",
            Scale::Large => "large",
            Scale::Trace => "trace",
        }
    }

    pub fn from_env() -> Scale {
        match std::env::var(Scale::ENV).as_deref() {
            Ok("large") => Scale::Large,
            Ok("trace") => Scale::Trace,
            _ => Scale::Site,
        }
    }

    /// Sizes of the measurement: (GPUs asked, or for the trace every how
    /// many nodes of its list; jobs; views; frames per size).
    fn sizes(self, quick: bool) -> (usize, usize, usize, usize) {
        match (self, quick) {
            (Scale::Site, true) => (100, 1_000, 5, 10),
            (Scale::Site, false) => (1_000, 10_000, 20, 50),
            (Scale::Large, true) => (400, 4_000, 3, 5),
            (Scale::Large, false) => (10_000, 100_000, 10, 20),
            (Scale::Trace, true) => (10, 2_000, 3, 5),
            (Scale::Trace, false) => (1, 60_000, 10, 20),
        }
    }

    /// The room at this scale for a picture of the console: the bench's
    /// fleet, with the queue of the 10,000-GPU room kept to 20,000 jobs
    /// (the fleet is what its panes show; a longer queue only takes minutes
    /// to build).
    pub fn screenshot_room(self) -> Room {
        match self {
            Scale::Large => large_room(10_000, 20_000, SEED),
            _ => self.room(false).0,
        }
    }

    /// The room, and the call that built it.
    fn room(self, quick: bool) -> (Room, String) {
        let (size, jobs, ..) = self.sizes(quick);
        match self {
            Scale::Site | Scale::Large => (large_room(size, jobs, SEED), format!("`tui::fixture_large::large_room({size}, {jobs}, {SEED})`")),
            Scale::Trace => (
                trace_room(size, jobs),
                format!(
                    "`tui::fixture_trace::trace_room({size}, {jobs})` (Alibaba 2023: every {}node of its list, its `default` pods)",
                    if size == 1 { String::new() } else { format!("{size}th ") }
                ),
            ),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// VmRSS and VmHWM of this process, if /proc says.
pub fn read_memory() -> Option<MemoryFigures> {
    parse_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

pub(crate) fn parse_status(status: &str) -> Option<MemoryFigures> {
    let kb = |key: &str| -> Option<f64> {
        let v = status.lines().find_map(|l| l.strip_prefix(key))?;
        v.trim().strip_suffix("kB")?.trim().parse::<f64>().ok()
    };
    Some(MemoryFigures { rss_mb: kb("VmRSS:")? * 1024.0 / 1e6, hwm_mb: kb("VmHWM:")? * 1024.0 / 1e6 })
}

/// Builds the large room and its view, times views and frames, then reads
/// what the process holds. In this process.
pub fn measure_here(quick: bool, scale: Scale) -> ConsoleFigures {
    let (_, jobs, views, frames) = scale.sizes(quick);
    progress(format_args!("console: building the {} room ({jobs} jobs) through Room::apply", scale.name()));
    let started = Instant::now();
    let (room, made_by) = scale.room(quick);
    let build_secs = started.elapsed().as_secs_f64();
    progress(format_args!("console: built in {build_secs:.1} s; timing {views} views"));
    let mut view_ms = Vec::with_capacity(views);
    let mut view = room.view();
    for _ in 0..views {
        let started = Instant::now();
        view = std::hint::black_box(room.view());
        view_ms.push(ms(started.elapsed()));
    }
    let app = App::new();
    let ctx = DrawContext { theme: Theme::dark(), data_age: Some(Duration::from_millis(250)), ..DrawContext::new("SIM ×60 seed 1") };
    let mut figures = Vec::new();
    for (width, height) in [(120u16, 40u16), (200, 60)] {
        progress(format_args!("console: drawing {frames} frames at {width}×{height}"));
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        let mut times = Vec::with_capacity(frames);
        for _ in 0..frames {
            let started = Instant::now();
            buf.reset();
            crate::tui::draw_buffer(&app, &view, &ctx, area, &mut buf);
            std::hint::black_box(&buf);
            times.push(ms(started.elapsed()));
        }
        figures.push(FrameFigures { width, height, time: Spread::of(times) });
    }
    progress(format_args!("console: rendering {views} /metrics scrapes"));
    let snapshot =
        crate::metrics::Snapshot { view: std::sync::Arc::new(view.clone()), health: crate::metrics::Health { world: "sim".into(), ..Default::default() } };
    let mut scrape_ms = Vec::with_capacity(views);
    let mut text = String::new();
    for _ in 0..views {
        let started = Instant::now();
        text = std::hint::black_box(crate::metrics::render_text(&snapshot, 0));
        scrape_ms.push(ms(started.elapsed()));
    }
    let scrape = ScrapeFigures {
        bytes: text.len(),
        series: text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count(),
        families: text.lines().filter(|l| l.starts_with("# TYPE ")).count(),
        render: Spread::of(scrape_ms),
    };
    drop(snapshot);
    // The room, its view and the frame are all alive here, as in the console.
    let memory = read_memory();
    std::hint::black_box((&room, &view));
    ConsoleFigures {
        room: made_by,
        gpus: room.nodes().map(|n| n.gpus.len()).sum(),
        jobs,
        view_gpus: view.cluster.gpus_total,
        view_nodes: view.nodes.len(),
        view_queued: view.queue.depth,
        view_running: view.queue.running,
        view_done: view.totals.stats.done,
        build_secs,
        view: Spread::of(view_ms),
        frames: figures,
        memory,
        scrape: Some(scrape),
    }
}

/// The child's side (`gpuroom bench --probe-memory [--quick] [--scale large|trace]`):
/// measures the console in this fresh process and prints the figures on one
/// line for the parent. Progress goes to standard error.
pub fn console_memory_probe(quick: bool, scale: Scale) -> anyhow::Result<()> {
    let figures = measure_here(quick, scale);
    println!("\n{MARKER}{}", serde_json::to_string(&figures)?);
    Ok(())
}

/// How the parent gets a child to run the probe.
#[derive(Clone, Debug)]
pub enum Probe {
    /// This executable with `bench --probe-memory` (the `gpuroom` binary).
    SelfExe,
    /// This executable with these arguments and environment (a test binary
    /// running its probe test).
    Exe { args: Vec<String>, env: Vec<(String, String)> },
    /// No child: measure in this process.
    InProcess,
}

/// The figures and where they were taken.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsoleRun {
    pub figures: ConsoleFigures,
    /// "a child process" or why not.
    pub measured_in: String,
}

/// The figures from a line of the child's output, wherever the marker is on it.
pub(crate) fn parse_probe_output(stdout: &str) -> Option<ConsoleFigures> {
    stdout.lines().rev().find_map(|line| {
        let at = line.find(MARKER)?;
        serde_json::from_str(&line[at + MARKER.len()..]).ok()
    })
}

fn run_child(probe: &Probe, quick: bool, scale: Scale) -> Result<ConsoleFigures, String> {
    let exe = std::env::current_exe().map_err(|e| format!("no path to this executable: {e}"))?;
    let mut cmd = Command::new(&exe);
    match probe {
        Probe::SelfExe => {
            cmd.args(["bench", PROBE_ARG]);
            if quick {
                cmd.arg("--quick");
            }
            cmd.args(["--scale", scale.name()]);
        }
        Probe::Exe { args, env } => {
            cmd.args(args);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            cmd.env(Scale::ENV, scale.name());
        }
        Probe::InProcess => return Err("asked to measure in this process".into()),
    }
    let out = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).output().map_err(|e| format!("{}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match parse_probe_output(&stdout) {
        Some(figures) if out.status.success() => Ok(figures),
        _ => Err(format!("{} did not print the probe's figures ({})", exe.display(), out.status)),
    }
}

/// The console's figures, from a child process if `probe` can run one, else
/// from this process (its memory then includes whatever ran before).
pub fn measure(probe: &Probe, quick: bool, scale: Scale) -> ConsoleRun {
    match run_child(probe, quick, scale) {
        Ok(figures) => ConsoleRun { figures, measured_in: "a child process that does nothing else".into() },
        Err(why) => {
            if !matches!(probe, Probe::InProcess) {
                progress(format_args!("console: measuring in this process instead: {why}"));
            }
            ConsoleRun { figures: measure_here(quick, scale), measured_in: format!("this process ({why}); memory includes the benchmarks before it") }
        }
    }
}
