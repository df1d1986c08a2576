//! How a bench `Report` reads: a table of measure | figure | target | ratio,
//! as terminal text and as a markdown page (docs/benchmarks.md) with the
//! machine it ran on and how to rerun it. Formatting only.

use std::fmt::Write;

use super::build::BuildFigures;
use super::console::ConsoleRun;
use super::console_report::{LARGE, SITE, VIEW_GROWTH_TARGET, console_rows};
use super::machine::Machine;
use super::per_event::{PerEventFigures, QueueFigures, RateFigures};
pub use super::table::Row;
use super::table::{ratio, thousands};
use super::throughput::{ApplyFigures, MonthFigures};
use crate::domain::discipline::DisciplineKind;

/// The month's targets (issue 19): wall seconds without and with the log.
pub const MONTH_TARGET_SECS: f64 = 25.0;
pub const MONTH_LOGGED_TARGET_SECS: f64 = 35.0;
/// The logged month's log on disk.
pub const LOG_TARGET_MB: f64 = 300.0;
/// A first `cargo build --release` on this machine.
pub const FIRST_BUILD_TARGET_SECS: f64 = 360.0;
/// The release binary.
pub const BINARY_TARGET_MB: f64 = 60.0;

/// Every figure of a run, and the machine it ran on.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub machine: Machine,
    pub quick: bool,
    pub apply: ApplyFigures,
    pub month: MonthFigures,
    /// The same span with the SQLite event log on a temporary file.
    pub month_logged: MonthFigures,
    pub console: ConsoleRun,
    /// The same at 10,000 GPUs / 100,000 jobs.
    pub console_large: ConsoleRun,
    /// The console on Alibaba's 2023 fleet (`tui::fixture_trace`).
    pub console_trace: ConsoleRun,
    /// `Room::apply` per event at growing queue sizes, and the submission
    /// and start rates at the largest.
    pub queue: QueueFigures,
    /// The first build and the binary.
    pub build: BuildFigures,
    /// Wall seconds of the whole bench.
    pub total_secs: f64,
}

fn month_row(m: &MonthFigures, log: &str, target: f64) -> Row {
    let log_size = m.log_bytes.map(|b| format!(", log {:.0} MB", b as f64 / 1e6)).unwrap_or_default();
    Row {
        measure: format!("{} simulated day{}, {} GPUs, {log}", m.days, if m.days == 1 { "" } else { "s" }, thousands(u64::from(m.gpus))),
        figure: format!(
            "{:.1} s: {} events ({}/s), {} jobs submitted, {} finished, {} sim-s per wall-s{log_size}",
            m.wall_secs,
            thousands(m.events),
            thousands(m.events_per_sec.round() as u64),
            thousands(m.jobs_submitted),
            thousands(m.jobs_finished),
            thousands(m.speedup.round() as u64)
        ),
        target: format!("≤ {target:.0} s"),
        ratio: ratio(m.wall_secs, target),
    }
}

fn log_row(m: &MonthFigures) -> Row {
    let measure = format!("that month's event log on disk ({} events)", thousands(m.events));
    let target = format!("≤ {LOG_TARGET_MB:.0} MB");
    match m.log_bytes {
        Some(bytes) => {
            let mb = bytes as f64 / 1e6;
            Row {
                measure,
                figure: format!("{mb:.0} MB ({:.0} bytes per event)", bytes as f64 / m.events.max(1) as f64),
                target,
                ratio: ratio(mb, LOG_TARGET_MB),
            }
        }
        None => Row { measure, figure: "not measured".into(), target, ratio: "—".into() },
    }
}

/// Per event at ~100,000 queued ÷ at ~1,000, per discipline (issue 38).
pub const PER_EVENT_GROWTH_TARGET: f64 = 3.0;
/// Submissions and starts a busy Slurm controller is documented to sustain.
pub const SUBMIT_TARGET_PER_SEC: f64 = 1_000.0;
pub const START_TARGET_PER_SEC: f64 = 500.0;

fn per_event_row(p: &PerEventFigures) -> Row {
    Row {
        measure: format!(
            "`Room::apply` per event, {} GPUs, {} jobs queued, {}",
            thousands(p.gpus as u64),
            thousands(u64::from(p.queued)),
            p.discipline.discipline().name()
        ),
        figure: format!(
            "{:.1} µs ({} events of telemetry, job ends and prices in {:.3} s; the room built in {:.1} s from {} jobs)",
            p.micros_per_event,
            thousands(p.events),
            p.secs,
            p.build_secs,
            thousands(p.jobs as u64)
        ),
        target: "—".into(),
        ratio: "—".into(),
    }
}

fn growth_row(q: &QueueFigures, discipline: DisciplineKind) -> Option<Row> {
    let (first, last) = q.ends(discipline)?;
    let growth = q.growth(discipline)?;
    Some(Row {
        measure: format!(
            "per event at {} queued ÷ at {} queued, {}",
            thousands(u64::from(last.queued)),
            thousands(u64::from(first.queued)),
            discipline.discipline().name()
        ),
        figure: format!("{growth:.2}× ({:.1} µs ÷ {:.1} µs)", last.micros_per_event, first.micros_per_event),
        target: format!("≤ {PER_EVENT_GROWTH_TARGET:.0}×"),
        ratio: ratio(growth, PER_EVENT_GROWTH_TARGET),
    })
}

/// A rate against a floor: the ratio is floor ÷ rate, so below 1 meets it too.
fn rate_rows(r: &RateFigures) -> [Row; 2] {
    let name = r.discipline.discipline().name();
    [
        Row {
            measure: format!("a sweep of {} submissions into {} queued, {name}", thousands(r.submitted), thousands(u64::from(r.queued))),
            figure: format!("{} jobs/s ({:.3} s in `Room::apply`)", thousands(r.jobs_per_sec().round() as u64), r.submit_secs),
            target: format!("≥ {} jobs/s", thousands(SUBMIT_TARGET_PER_SEC as u64)),
            ratio: ratio(SUBMIT_TARGET_PER_SEC, r.jobs_per_sec()),
        },
        Row {
            measure: format!("jobs started as {} running ones end, that queue, {name}", thousands(r.ended)),
            figure: format!("{} starts/s ({} starts in {:.3} s)", thousands(r.starts_per_sec().round() as u64), thousands(r.starts), r.start_secs),
            target: format!("≥ {} starts/s", thousands(START_TARGET_PER_SEC as u64)),
            ratio: ratio(START_TARGET_PER_SEC, r.starts_per_sec()),
        },
    ]
}

impl QueueFigures {
    /// Every row of the queue's scale: per event by size and discipline,
    /// the growth per discipline, the rates.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self.per_event.iter().map(per_event_row).collect();
        rows.extend(DisciplineKind::ALL.into_iter().filter_map(|d| growth_row(self, d)));
        rows.extend(self.rates.iter().flat_map(rate_rows));
        rows
    }
}

fn build_rows(b: &BuildFigures) -> Vec<Row> {
    let first = match &b.clean_build_secs {
        Ok(secs) => Row {
            measure: "first `cargo build --release` (clean target, crates fetched)".into(),
            figure: format!("{}m{:02.0}s", (secs / 60.0).floor(), secs % 60.0),
            target: format!("≤ {:.0} min", FIRST_BUILD_TARGET_SECS / 60.0),
            ratio: ratio(*secs, FIRST_BUILD_TARGET_SECS),
        },
        Err(why) => Row {
            measure: "first `cargo build --release`".into(),
            figure: why.clone(),
            target: format!("≤ {:.0} min", FIRST_BUILD_TARGET_SECS / 60.0),
            ratio: "—".into(),
        },
    };
    let target = format!("≤ {BINARY_TARGET_MB:.0} MB");
    let size = match &b.binary {
        Ok((which, bytes)) => {
            let mb = *bytes as f64 / 1e6;
            Row { measure: format!("release binary size ({which})"), figure: format!("{mb:.1} MB"), target, ratio: ratio(mb, BINARY_TARGET_MB) }
        }
        Err(why) => Row { measure: "release binary size".into(), figure: why.clone(), target, ratio: "—".into() },
    };
    vec![first, size]
}

/// What-if on the logged span: a target per policy, the log's reading shown beside it.
pub const WHATIF_TARGET_SECS: f64 = 60.0;

fn whatif_row(m: &MonthFigures) -> Row {
    let measure = format!("`gpuroom whatif` on that log, per policy ({} days, {} GPUs)", m.days, thousands(u64::from(m.gpus)));
    match &m.whatif {
        Some(w) => Row {
            measure,
            figure: format!("{:.1} s re-run under {} (+ {:.1} s reading and scoring the log once)", w.per_policy_secs, w.policy, w.read_secs),
            target: format!("< {WHATIF_TARGET_SECS:.0} s"),
            ratio: ratio(w.per_policy_secs, WHATIF_TARGET_SECS),
        },
        None => Row { measure, figure: "not measured".into(), target: format!("< {WHATIF_TARGET_SECS:.0} s"), ratio: "—".into() },
    }
}

/// What one console room was and where its figures were taken.
fn console_note(run: &ConsoleRun) -> String {
    let c = &run.figures;
    format!(
        "The console's room is {}, built through `Room::apply` in {:.1} s: {} GPUs on {} nodes, {} queued, {} running, {} done. Its figures were taken in {}.",
        c.room,
        c.build_secs,
        thousands(u64::from(c.view_gpus)),
        c.view_nodes,
        thousands(u64::from(c.view_queued)),
        thousands(u64::from(c.view_running)),
        thousands(c.view_done),
        run.measured_in
    )
}

impl Report {
    /// The figures table, in order.
    pub fn rows(&self) -> Vec<Row> {
        let a = &self.apply;
        let mut rows = vec![
            Row {
                measure: format!("`Room::apply`, {}", a.recorded),
                figure: format!(
                    "{} events/s ({} events in {:.3} s, best of {})",
                    thousands(a.events_per_sec.round() as u64),
                    thousands(a.events),
                    a.best_secs,
                    a.reps
                ),
                target: "—".into(),
                ratio: "—".into(),
            },
            month_row(&self.month, "no event log", MONTH_TARGET_SECS),
            month_row(&self.month_logged, "SQLite event log", MONTH_LOGGED_TARGET_SECS),
            log_row(&self.month_logged),
            whatif_row(&self.month_logged),
        ];
        rows.extend(console_rows(&self.console, &SITE));
        rows.extend(console_rows(&self.console_large, &LARGE));
        rows.extend(console_rows(&self.console_trace, &LARGE));
        let (site, large) = (&self.console.figures, &self.console_large.figures);
        rows.push(Row {
            measure: format!("`Room::view()` at {} GPUs ÷ at {} GPUs (no worse than linear)", thousands(large.gpus as u64), thousands(site.gpus as u64)),
            figure: format!("{:.1}× ({:.1} ms ÷ {:.1} ms)", large.view.median_ms / site.view.median_ms, large.view.median_ms, site.view.median_ms),
            target: format!("≤ {VIEW_GROWTH_TARGET:.0}×"),
            ratio: ratio(large.view.median_ms / site.view.median_ms, VIEW_GROWTH_TARGET),
        });
        rows.extend(self.queue.rows());
        rows.extend(build_rows(&self.build));
        rows
    }

    fn notes(&self) -> Vec<String> {
        let m = &self.month;
        vec![
            format!(
                "The month runs `{}` ({} GPUs) at seed 1 with the offered load set to {:.2} of the fleet's capacity so that about {} jobs arrive (Philly job mix kept); at the end {} jobs were queued and {} running.",
                m.cluster,
                thousands(u64::from(m.gpus)),
                m.target_load,
                thousands(m.jobs_wanted),
                thousands(m.jobs_queued_at_end),
                thousands(m.jobs_running_at_end)
            ),
            console_note(&self.console),
            console_note(&self.console_large),
            console_note(&self.console_trace),
            "Ratios are figure ÷ target: below 1 meets the target. Wall-clock figures on shared machines vary by tens of percent between runs.".into(),
        ]
    }

    /// The report as a markdown page (docs/benchmarks.md).
    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(s, "# Benchmarks{}\n", if self.quick { " (quick run: tiny sizes)" } else { "" });
        let _ = writeln!(s, "Measured by `gpuroom bench` on {} in {:.0} s.\n", m.date, self.total_secs);
        let _ = writeln!(s, "## Machine\n");
        for (k, v) in [
            ("CPU", m.cpu.clone()),
            ("cores", m.cores.to_string()),
            ("memory", m.memory.clone()),
            ("OS", m.os.clone()),
            ("rustc", m.rustc.clone()),
            ("build profile", m.profile.to_string()),
            ("git revision", m.git.clone()),
            ("date", m.date.clone()),
        ] {
            let _ = writeln!(s, "* {k}: {v}");
        }
        let _ = writeln!(s, "\n## Figures\n");
        let _ = writeln!(s, "| measure | figure | target | ratio |");
        let _ = writeln!(s, "|---|---|---|---|");
        for r in self.rows() {
            let _ = writeln!(s, "| {} | {} | {} | {} |", r.measure, r.figure, r.target, r.ratio);
        }
        let _ = writeln!(s);
        for n in self.notes() {
            let _ = writeln!(s, "{n}\n");
        }
        let _ = writeln!(s, "## How to rerun\n");
        let _ = writeln!(
            s,
            "`cargo run --release -- bench` runs every measurement and prints this table; \
             `cargo run --release -- bench --out docs/benchmarks.md` also writes this page, and \
             `--quick` runs tiny sizes in seconds (a smoke test, not figures), and `--no-build` \
             skips the clean `cargo build --release` (minutes, both cores; it builds this \
             source tree into a temporary folder with the crates already fetched). The \
             console's view, frames and memory are measured in a child process (`gpuroom \
             bench --probe-memory`) so that its memory is the console's alone. Run it on a \
             quiet machine in a release build; the bench asserts nothing about time."
        );
        s
    }

    /// The report for the terminal.
    pub fn text(&self) -> String {
        let m = &self.machine;
        let mut s = String::new();
        let _ =
            writeln!(s, "gpuroom bench{}: {} build, {}, {} cores, {}, {}", if self.quick { " (quick)" } else { "" }, m.profile, m.cpu, m.cores, m.memory, m.os);
        let _ = writeln!(s, "{}, git {}, {}\n", m.rustc, m.git, m.date);
        for r in self.rows() {
            let _ = writeln!(s, "{}\n    {}   target {}   ratio {}", r.measure.replace('`', ""), r.figure, r.target, r.ratio);
        }
        let _ = writeln!(s);
        for n in self.notes() {
            let _ = writeln!(s, "{}", n.replace('`', ""));
        }
        let _ = writeln!(s, "\nall in {:.1} s", self.total_secs);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_and_ratios_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(ratio(15.0, 30.0), "0.50 (met)");
        assert_eq!(ratio(30.0, 30.0), "1.00 (met)");
        assert_eq!(ratio(45.0, 30.0), "1.50 (missed)");
    }
}
