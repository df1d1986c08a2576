//! The bench end to end in quick mode (every figure present and positive,
//! the markdown's table and machine section), the parsers, and the ignored
//! full run. No wall-clock thresholds: times are only required to be > 0.

use super::console::{MARKER, ScrapeFigures, parse_probe_output, parse_status};
use super::*;
use crate::domain::discipline::DisciplineKind;

/// Set in the child that `probe_child` runs the console probe in.
const CHILD_ENV: &str = "GPUROOM_BENCH_PROBE_CHILD";

/// The test binary re-invoked on `probe_child` alone: the console's child
/// process when the bench runs under `cargo test`.
fn test_probe(quick: bool) -> Probe {
    Probe::Exe {
        args: ["bench::tests::probe_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"].map(String::from).to_vec(),
        env: vec![(CHILD_ENV.into(), if quick { "quick" } else { "full" }.into())],
    }
}

/// Not a test of its own: the child side of `test_probe`. Does nothing
/// unless the parent set `CHILD_ENV`.
#[test]
#[ignore = "the console probe's child process; run by the bench tests"]
fn probe_child() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        console_memory_probe(mode == "quick", Scale::from_env()).unwrap();
    }
}

fn positive(what: &str, x: f64) {
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
}

fn check_month(m: &MonthFigures) {
    positive("month wall", m.wall_secs);
    positive("month speedup", m.speedup);
    positive("month events/s", m.events_per_sec);
    positive("target load", m.target_load);
    assert!(m.days > 0 && m.gpus > 0);
    assert!(m.events > 0 && m.jobs_submitted > 0 && m.jobs_finished > 0, "{m:?}");
    assert!(m.jobs_finished <= m.jobs_submitted);
}

#[test]
fn quick_bench_reports_every_figure_and_a_markdown_page() {
    let dir = std::env::temp_dir().join(format!("gpuroom-bench-test-{}", std::process::id()));
    let out = dir.join("benchmarks.md");
    let report = run_with(&BenchOptions { quick: true, out: Some(out.clone()), build: true }, &test_probe(true)).unwrap();

    let a = &report.apply;
    assert!(a.events > 0 && a.reps >= 1);
    positive("apply best", a.best_secs);
    positive("apply events/s", a.events_per_sec);
    check_month(&report.month);
    check_month(&report.month_logged);
    assert!(report.month.log_bytes.is_none());
    assert!(report.month_logged.log_bytes.unwrap() > 0, "the log was written");
    // Same seed, same plan: the log changes nothing but the time.
    assert_eq!(report.month.events, report.month_logged.events);
    assert_eq!(report.month.jobs_submitted, report.month_logged.jobs_submitted);
    // The logged span keeps its world, so the what-if re-runs it exactly.
    assert!(report.month.whatif.is_none());
    let w = report.month_logged.whatif.as_ref().expect("the logged span was compared");
    positive("whatif read", w.read_secs);
    positive("whatif per policy", w.per_policy_secs);

    let c = &report.console.figures;
    assert_eq!(report.console.measured_in, "a child process that does nothing else", "the child ran");
    assert!(c.view_gpus > 0 && c.view_nodes > 0 && c.view_queued + c.view_running > 0);
    positive("build", c.build_secs);
    positive("view median", c.view.median_ms);
    positive("view p95", c.view.p95_ms);
    assert_eq!(c.frames.iter().map(|f| (f.width, f.height)).collect::<Vec<_>>(), [(120, 40), (200, 60)]);
    for f in &c.frames {
        assert!(f.time.n > 0);
        positive("frame median", f.time.median_ms);
        positive("frame p95", f.time.p95_ms);
    }
    if std::path::Path::new("/proc/self/status").exists() {
        let m = c.memory.as_ref().expect("memory measured where /proc is");
        positive("rss", m.rss_mb);
        assert!(m.hwm_mb >= m.rss_mb);
    }
    // The larger console room, measured the same way in its own child.
    let large = &report.console_large.figures;
    assert_eq!(report.console_large.measured_in, "a child process that does nothing else");
    assert!(large.gpus > c.gpus && large.jobs > c.jobs && large.view_gpus > c.view_gpus, "{large:?}");
    positive("large view median", large.view.median_ms);
    assert_eq!(large.frames.len(), 2);
    // The room on Alibaba's fleet: several GPU models, the list's pods.
    let trace = &report.console_trace.figures;
    assert_eq!(report.console_trace.measured_in, "a child process that does nothing else");
    assert!(trace.room.contains("trace_room") && trace.view_nodes > 0 && trace.view_queued + trace.view_running > 0, "{trace:?}");
    positive("trace view median", trace.view.median_ms);
    assert_eq!(trace.frames.len(), 2);
    // The per-event cost at two queue sizes under each discipline, the larger queue the longer.
    let q = &report.queue;
    assert_eq!(q.per_event.len(), 2 * DisciplineKind::ALL.len());
    for p in &q.per_event {
        assert!(p.events > 0 && p.queued > 0, "{p:?}");
        positive("per-event µs", p.micros_per_event);
    }
    for d in DisciplineKind::ALL {
        let sizes: Vec<_> = q.per_event.iter().filter(|p| p.discipline == d).collect();
        assert!(sizes[1].queued > sizes[0].queued, "{d:?}");
        positive("growth", q.growth(d).unwrap());
    }
    // The rates at the larger queue: every submission taken, jobs started as others end.
    assert_eq!(q.rates.len(), DisciplineKind::ALL.len());
    for r in &q.rates {
        assert_eq!(r.submitted, 200, "{r:?}");
        assert!(r.ended > 0 && r.starts > 0, "{r:?}");
        positive("jobs/s", r.jobs_per_sec());
    }
    // A quick run never builds, and says so; a debug test binary is not the shipped one.
    assert!(report.build.clean_build_secs.as_ref().is_err_and(|why| why.starts_with("not measured")));
    assert!(report.build.binary.as_ref().is_err_and(|why| why.contains("debug build")));
    positive("total", report.total_secs);

    let md = std::fs::read_to_string(&out).unwrap();
    assert_eq!(md, report.markdown());
    assert!(md.starts_with("# Benchmarks"));
    for needle in ["## Machine", "* CPU: ", "* cores: ", "* memory: ", "* OS: ", "* rustc: ", "* build profile: ", "* git revision: ", "* date: "] {
        assert!(md.contains(needle), "markdown has {needle:?}");
    }
    assert!(md.contains("| measure | figure | target | ratio |\n|---|---|---|---|\n"));
    let rows = report.rows();
    assert_eq!(
        rows.len(),
        49,
        "apply, 2 months, the log, the what-if; at each of 3 console rooms the room's build, view, 2 frame sizes, RSS, HWM, \
         a scrape; the view's growth; first build, binary; 2 queue sizes × 4 disciplines, 4 growths, 2 rates × 4 disciplines"
    );
    assert!(rows.iter().any(|r| r.measure.starts_with("a `/metrics` scrape") && r.figure.contains("series")), "the scrape row");
    for r in &rows {
        assert!(md.contains(&format!("| {} | {} | {} | {} |", r.measure, r.figure, r.target, r.ratio)));
        assert!(!r.figure.is_empty());
    }
    assert!(md.contains("## How to rerun") && md.contains("cargo run --release -- bench"));
    let text = report.text();
    assert!(text.contains("events/s") && text.contains("VmRSS") && text.contains("ratio"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_output_is_found_wherever_the_marker_is() {
    let figures = ConsoleFigures {
        room: "`tui::fixture_large::large_room(1, 2, 1)`".into(),
        gpus: 1,
        jobs: 2,
        view_gpus: 1,
        view_nodes: 1,
        view_queued: 0,
        view_running: 1,
        view_done: 0,
        build_secs: 0.5,
        view: Spread::of(vec![1.0]),
        frames: vec![FrameFigures { width: 120, height: 40, time: Spread::of(vec![2.0, 4.0]) }],
        memory: None,
        scrape: Some(ScrapeFigures { bytes: 1_000, series: 10, families: 3, render: Spread::of(vec![0.5]) }),
    };
    let json = serde_json::to_string(&figures).unwrap();
    // libtest prints "test name ... " on the line the child's output starts.
    let out = format!("running 1 test\ntest bench::tests::probe_child ... \n{MARKER}{json}\nok\n");
    assert_eq!(parse_probe_output(&out), Some(figures.clone()));
    assert_eq!(parse_probe_output(&format!("test x ... {MARKER}{json}")), Some(figures));
    assert_eq!(parse_probe_output("error: unexpected argument '--probe-memory'\n"), None);
}

#[test]
fn spreads_and_proc_status() {
    let s = Spread::of((1..=100).rev().map(f64::from).collect());
    assert_eq!((s.n, s.median_ms, s.p95_ms), (100, 50.5, 95.0));
    assert_eq!(Spread::of(vec![3.0, 1.0, 2.0]).median_ms, 2.0);
    assert_eq!(Spread::of(vec![]).n, 0);
    let m = parse_status("Name:\tgpuroom\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n").unwrap();
    assert!((m.rss_mb - 41.94304).abs() < 1e-9 && (m.hwm_mb - 52.4288).abs() < 1e-9);
    assert_eq!(parse_status("Name: x\n"), None);
}

/// The full bench once, in this process's test binary (release:
/// `cargo test --release --lib bench -- --ignored --nocapture`). Prints
/// the report; writes the page to the temporary directory.
#[test]
#[ignore = "the full bench: minutes; run by hand"]
fn full_bench() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let out = std::env::temp_dir().join("gpuroom-benchmarks.md");
    let report = run_with(&BenchOptions { quick: false, out: Some(out.clone()), build: true }, &test_probe(false)).unwrap();
    println!("{}", report.text());
    println!("markdown written to {}", out.display());
}
