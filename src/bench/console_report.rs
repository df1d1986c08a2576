//! The console's rows of the bench table: building the room, `Room::view()`,
//! frames and memory, at each scale against that scale's targets.
//! Formatting only.

use super::console::ConsoleRun;
use super::table::{Row, ratio, thousands};

/// What the console must meet at one scale.
pub struct ConsoleTargets {
    /// Building the room through `Room::apply`; `None`: no target (reported only).
    pub build_secs: Option<f64>,
    pub view_ms: f64,
    pub frame_ms: f64,
    pub memory_mb: f64,
}

/// 1,000 GPUs / 10,000 jobs: the frame budget of the console's refresh.
pub const SITE: ConsoleTargets = ConsoleTargets { build_secs: Some(2.0), view_ms: 100.0, frame_ms: 100.0, memory_mb: 100.0 };

/// 10,000 GPUs / 100,000 jobs (issue 38): a view inside the refresh, a
/// frame inside a keystroke's echo, and memory a head node does not miss.
/// Building that room is the queue's per-event cost, reported by the queue
/// rows; here it is only shown.
pub const LARGE: ConsoleTargets = ConsoleTargets { build_secs: None, view_ms: 100.0, frame_ms: 20.0, memory_mb: 500.0 };

/// The view at 10,000 GPUs against the view at 1,000: no worse than linear.
pub const VIEW_GROWTH_TARGET: f64 = 10.0;

/// A scrape must render well inside Prometheus's usual 1 s scrape interval
/// at its fastest; a tenth of it leaves the engine its batches.
pub const SCRAPE_TARGET_MS: f64 = 100.0;

pub fn console_rows(run: &ConsoleRun, targets: &ConsoleTargets) -> Vec<Row> {
    let c = &run.figures;
    let size = format!("{} GPUs / {} jobs", thousands(c.gpus as u64), thousands(c.jobs as u64));
    let under = |ms: f64| format!("< {ms:.0} ms");
    let mut rows = vec![
        Row {
            measure: format!("building the console's room, {size}, through `Room::apply`"),
            figure: format!("{:.2} s", c.build_secs),
            target: targets.build_secs.map_or("—".into(), |t| format!("≤ {t:.0} s")),
            ratio: targets.build_secs.map_or("—".into(), |t| ratio(c.build_secs, t)),
        },
        Row {
            measure: format!("`Room::view()`, {size}"),
            figure: format!("median {:.1} ms, p95 {:.1} ms (n={})", c.view.median_ms, c.view.p95_ms, c.view.n),
            target: under(targets.view_ms),
            ratio: ratio(c.view.median_ms, targets.view_ms),
        },
    ];
    for f in &c.frames {
        rows.push(Row {
            measure: format!("frame {}×{} (`draw_buffer`), {size}", f.width, f.height),
            figure: format!("median {:.2} ms, p95 {:.2} ms (n={})", f.time.median_ms, f.time.p95_ms, f.time.n),
            target: under(targets.frame_ms),
            ratio: ratio(f.time.median_ms, targets.frame_ms),
        });
    }
    let target = format!("< {:.0} MB", targets.memory_mb);
    match &c.memory {
        Some(m) => {
            rows.push(Row {
                measure: format!("console memory, VmRSS, {size}"),
                figure: format!("{:.1} MB", m.rss_mb),
                target: target.clone(),
                ratio: ratio(m.rss_mb, targets.memory_mb),
            });
            rows.push(Row {
                measure: format!("console memory, VmHWM (peak), {size}"),
                figure: format!("{:.1} MB", m.hwm_mb),
                target,
                ratio: ratio(m.hwm_mb, targets.memory_mb),
            });
        }
        None => rows.push(Row { measure: format!("console memory, {size}"), figure: "not measured (no /proc)".into(), target, ratio: "—".into() }),
    }
    if let Some(s) = &c.scrape {
        rows.push(Row {
            measure: format!("a `/metrics` scrape (Prometheus text), {size}"),
            figure: format!(
                "{} KB, {} series in {} families, rendered in median {:.1} ms, p95 {:.1} ms (n={})",
                thousands((s.bytes / 1000) as u64),
                thousands(s.series as u64),
                s.families,
                s.render.median_ms,
                s.render.p95_ms,
                s.render.n
            ),
            target: format!("< {SCRAPE_TARGET_MS:.0} ms (a scrape every second)"),
            ratio: ratio(s.render.median_ms, SCRAPE_TARGET_MS),
        });
    }
    rows
}
