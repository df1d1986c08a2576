//! How a bench `Report` reads: a table of measure | figure | target | ratio,
//! as terminal text and as a markdown page (docs/benchmarks.md) with the
//! machine it ran on and how to rerun it. Formatting only.

use std::fmt::Write;

use super::console::ConsoleRun;
use super::machine::Machine;
use super::throughput::{ApplyFigures, MonthFigures};

/// The month's target: wall seconds.
pub const MONTH_TARGET_SECS: f64 = 30.0;
/// A frame (and a view) against the console's frame budget.
pub const FRAME_BUDGET_MS: f64 = 100.0;
/// The console process's memory target.
pub const MEMORY_TARGET_MB: f64 = 100.0;

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
    /// Wall seconds of the whole bench.
    pub total_secs: f64,
}

/// One line of the figures table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub measure: String,
    pub figure: String,
    pub target: String,
    /// figure ÷ target (below 1 meets it), or "—" where there is no target.
    pub ratio: String,
}

/// 1234567 as "1,234,567".
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio(figure: f64, target: f64) -> String {
    let r = figure / target;
    format!("{r:.2} ({})", if r <= 1.0 { "met" } else { "missed" })
}

fn month_row(m: &MonthFigures, log: &str) -> Row {
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
        target: format!("< {MONTH_TARGET_SECS:.0} s"),
        ratio: ratio(m.wall_secs, MONTH_TARGET_SECS),
    }
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

impl Report {
    /// The figures table, in order.
    pub fn rows(&self) -> Vec<Row> {
        let a = &self.apply;
        let c = &self.console.figures;
        let size = format!("{} GPUs / {} jobs", thousands(c.gpus as u64), thousands(c.jobs as u64));
        let budget = format!("< {FRAME_BUDGET_MS:.0} ms");
        let mut rows = vec![
            Row {
                measure: format!("`Room::apply`, {}", a.recorded),
                figure: format!("{} events/s ({} events in {:.3} s, best of {})", thousands(a.events_per_sec.round() as u64), thousands(a.events), a.best_secs, a.reps),
                target: "—".into(),
                ratio: "—".into(),
            },
            month_row(&self.month, "no event log"),
            month_row(&self.month_logged, "SQLite event log"),
            whatif_row(&self.month_logged),
            Row {
                measure: format!("`Room::view()`, {size}"),
                figure: format!("median {:.1} ms, p95 {:.1} ms (n={})", c.view.median_ms, c.view.p95_ms, c.view.n),
                target: budget.clone(),
                ratio: ratio(c.view.median_ms, FRAME_BUDGET_MS),
            },
        ];
        for f in &c.frames {
            rows.push(Row {
                measure: format!("frame {}×{} (`draw_buffer`), {size}", f.width, f.height),
                figure: format!("median {:.2} ms, p95 {:.2} ms (n={})", f.time.median_ms, f.time.p95_ms, f.time.n),
                target: budget.clone(),
                ratio: ratio(f.time.median_ms, FRAME_BUDGET_MS),
            });
        }
        let target = format!("< {MEMORY_TARGET_MB:.0} MB");
        match &c.memory {
            Some(m) => {
                rows.push(Row { measure: format!("console memory, VmRSS, {size}"), figure: format!("{:.1} MB", m.rss_mb), target: target.clone(), ratio: ratio(m.rss_mb, MEMORY_TARGET_MB) });
                rows.push(Row { measure: format!("console memory, VmHWM (peak), {size}"), figure: format!("{:.1} MB", m.hwm_mb), target, ratio: ratio(m.hwm_mb, MEMORY_TARGET_MB) });
            }
            None => rows.push(Row { measure: format!("console memory, {size}"), figure: "not measured (no /proc)".into(), target, ratio: "—".into() }),
        }
        rows
    }

    fn notes(&self) -> Vec<String> {
        let m = &self.month;
        let c = &self.console.figures;
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
            format!(
                "The console's room is `tui::fixture_large::large_room({}, {}, 1)`, built through `Room::apply` in {:.1} s: {} GPUs on {} nodes, {} queued, {} running, {} done. Its figures were taken in {}.",
                c.gpus,
                c.jobs,
                c.build_secs,
                thousands(u64::from(c.view_gpus)),
                c.view_nodes,
                thousands(u64::from(c.view_queued)),
                thousands(u64::from(c.view_running)),
                thousands(c.view_done),
                self.console.measured_in
            ),
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
             `--quick` runs tiny sizes in seconds (a smoke test, not figures). The console's \
             view, frames and memory are measured in a child process (`gpuroom bench \
             --probe-memory`) so that its memory is the console's alone. Run it on a quiet \
             machine in a release build; the bench asserts nothing about time."
        );
        s
    }

    /// The report for the terminal.
    pub fn text(&self) -> String {
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(s, "gpuroom bench{}: {} build, {}, {} cores, {}, {}", if self.quick { " (quick)" } else { "" }, m.profile, m.cpu, m.cores, m.memory, m.os);
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
        assert_eq!(ratio(45.0, 30.0), "1.50 (missed)");
    }
}
