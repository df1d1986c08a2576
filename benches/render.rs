//! The console at 1,000 GPUs and 10,000 jobs (`tui::fixture_large`, built
//! through the real core): what a frame costs and what it writes.
//!
//! * Printed first (not criterion): the bytes the console writes to its
//!   terminal. A `ratatui::Terminal` over a `CrosstermBackend` whose writer
//!   only counts, with a fixed viewport (no tty needed), each frame wrapped in
//!   a synchronized update as `tui::run` does. One full first frame, then a
//!   steady state of views 15 simulated seconds apart (the default ×60 at the
//!   engine's 4 views/s: utilizations, progress, jobs ending and starting),
//!   then the same view drawn again (idle). Also the time of those frames and
//!   of `Room::view()` against the 100 ms frame budget.
//! * Criterion: `draw_buffer` (the whole console into a buffer) at 80×24,
//!   120×40, 200×60 and 300×100, and `Room::view()`.
//!
//! `cargo bench --bench render`. Prints figures; asserts nothing about time.

use std::cell::Cell;
use std::hint::black_box;
use std::io::{self, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use gpuroom::room::{Room, View};
use gpuroom::tui::fixture_large::{STEP_SECS, large_room, telemetry_step};
use gpuroom::tui::{App, DrawContext, Theme};
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

const GPUS: usize = 1_000;
const JOBS: usize = 10_000;
const SEED: u64 = 1;
/// Views the engine publishes per second; the console draws at most 10 frames/s.
const VIEWS_PER_SEC: f64 = 4.0;
const BUDGET: Duration = Duration::from_millis(100);

/// A terminal that only counts what it is sent.
#[derive(Clone, Default)]
struct CountingWriter(Rc<Cell<u64>>);

impl Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.set(self.0.get() + buf.len() as u64);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn ctx() -> DrawContext {
    DrawContext { theme: Theme::dark(), data_age: Some(Duration::from_millis(250)), ..DrawContext::new("SIM ×60 seed 1") }
}

struct Console {
    terminal: Terminal<CrosstermBackend<CountingWriter>>,
    bytes: Rc<Cell<u64>>,
    app: App,
    ctx: DrawContext,
}

impl Console {
    fn new(w: u16, h: u16) -> Console {
        let writer = CountingWriter::default();
        let bytes = writer.0.clone();
        let options = TerminalOptions { viewport: Viewport::Fixed(Rect::new(0, 0, w, h)) };
        let terminal = Terminal::with_options(CrosstermBackend::new(writer), options).expect("a counting terminal");
        Console { terminal, bytes, app: App::new(), ctx: ctx() }
    }

    /// One frame as `tui::run` draws it; returns (bytes written, time taken).
    fn frame(&mut self, view: &View) -> (u64, Duration) {
        let before = self.bytes.get();
        let started = Instant::now();
        execute!(self.terminal.backend_mut(), BeginSynchronizedUpdate).unwrap();
        let (app, ctx) = (&self.app, &self.ctx);
        self.terminal.draw(|f| gpuroom::tui::draw(f, app, view, ctx)).unwrap();
        execute!(self.terminal.backend_mut(), EndSynchronizedUpdate).unwrap();
        (self.bytes.get() - before, started.elapsed())
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

fn p95(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(((s.len() as f64 * 0.95).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Bytes to the terminal and frame times at steady state and idle.
fn bytes_to_terminal(base: &Room, steady: usize, idle: usize) {
    let v = base.view();
    println!(
        "\n== console bytes to the terminal: {} GPUs on {} nodes, {} jobs submitted ({} queued, {} running, {} done), {} alarms, {} log lines; views {STEP_SECS} s of sim apart at {VIEWS_PER_SEC} views/s ==",
        v.cluster.gpus_total,
        v.nodes.len(),
        v.totals.stats.submitted,
        v.queue.depth,
        v.queue.running,
        v.totals.stats.done,
        v.alarms.len(),
        v.log.len()
    );
    for (w, h) in [(120u16, 40u16), (200, 60)] {
        let mut room = base.clone();
        let mut console = Console::new(w, h);
        let view = room.view();
        let (first, first_time) = console.frame(&view);
        let mut sizes = Vec::with_capacity(steady);
        let mut frame_ms = Vec::with_capacity(steady);
        let mut view_ms = Vec::with_capacity(steady);
        let mut last = view;
        let mut step_ms = Vec::with_capacity(steady);
        for k in 1..=steady as u64 {
            let started = Instant::now();
            telemetry_step(&mut room, k);
            step_ms.push(ms(started.elapsed()));
            let started = Instant::now();
            last = room.view();
            view_ms.push(ms(started.elapsed()));
            let (bytes, time) = console.frame(&last);
            sizes.push(bytes as f64);
            frame_ms.push(ms(time));
        }
        let mut idle_sizes = Vec::with_capacity(idle);
        for _ in 0..idle {
            idle_sizes.push(console.frame(&last).0 as f64);
        }
        let cells = f64::from(w) * f64::from(h);
        let m = mean(&sizes);
        println!("{w}×{h} ({cells} cells):");
        println!("  first full frame      {first:>8} B  ({:.1} B/cell), {:.1} ms", first as f64 / cells, ms(first_time));
        println!(
            "  steady frame (n={steady}) mean {m:>8.0} B, p95 {:.0} B, max {:.0} B ({:.0}% of a full frame)",
            p95(&sizes),
            sizes.iter().copied().fold(0.0, f64::max),
            100.0 * m / first.max(1) as f64
        );
        println!(
            "  steady bytes/s at {VIEWS_PER_SEC} frames/s: {:.1} KB/s  (at the 10 frames/s cap: {:.1} KB/s)",
            m * VIEWS_PER_SEC / 1000.0,
            m * 10.0 / 1000.0
        );
        println!(
            "  idle frame (same view, n={idle}) mean {:.0} B, max {:.0} B -> {:.0} B/s at {VIEWS_PER_SEC} frames/s",
            mean(&idle_sizes),
            idle_sizes.iter().copied().fold(0.0, f64::max),
            mean(&idle_sizes) * VIEWS_PER_SEC
        );
        let (fm, fp) = (mean(&frame_ms), p95(&frame_ms));
        let (vm, vp) = (mean(&view_ms), p95(&view_ms));
        let budget = ms(BUDGET);
        println!(
            "  frame (draw + diff + encode) mean {fm:.2} ms, p95 {fp:.2} ms = {:.0}% / {:.0}% of the {budget:.0} ms frame budget",
            100.0 * fm / budget,
            100.0 * fp / budget
        );
        println!(
            "  Room::view()                 mean {vm:.2} ms, p95 {vp:.2} ms = {:.0}% / {:.0}% of the budget (the engine builds 4 views/s)",
            100.0 * vm / budget,
            100.0 * vp / budget
        );
        let (sm, sp) = (mean(&step_ms), p95(&step_ms));
        println!("  engine: {STEP_SECS} s of events (telemetry_step) mean {sm:.2} ms, p95 {sp:.2} ms: exits, passes, 1 telemetry event");
    }
    println!();
}

fn criterion_benches(c: &mut Criterion, room: &Room) {
    let view = room.view();
    let app = App::new();
    let ctx = ctx();
    let mut group = c.benchmark_group("draw_buffer: 1,000 GPUs, 10,000 jobs");
    group.sample_size(30);
    for (w, h) in [(80u16, 24u16), (120, 40), (200, 60), (300, 100)] {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        group.bench_with_input(BenchmarkId::from_parameter(format!("{w}x{h}")), &area, |b, area| {
            b.iter(|| {
                buf.reset();
                gpuroom::tui::draw_buffer(&app, &view, &ctx, *area, &mut buf);
                black_box(&buf);
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("Room::view: 1,000 GPUs, 10,000 jobs");
    group.sample_size(30);
    group.bench_function("view", |b| b.iter(|| black_box(room.view())));
    group.finish();
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: a short run then.
    let bench = std::env::args().any(|a| a == "--bench");
    let started = Instant::now();
    let room = large_room(GPUS, JOBS, SEED);
    println!("built the room through Room::apply in {:.1} s", started.elapsed().as_secs_f64());
    let (steady, idle) = if bench { (160, 40) } else { (8, 4) };
    bytes_to_terminal(&room, steady, idle);
    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c, &room);
    c.final_summary();
}
