//! The what-if's answer as a table: one row per figure, the recorded run
//! first and each policy beside it, as text for a terminal, Markdown or CSV.
//! The console's pane draws the same rows (`Comparison::rows`).
//!
//! Formats only; computes no figure.

use std::fmt::Write;

use super::outcome::Outcome;
use crate::domain::cluster::BillingMode;
use crate::domain::units::{At, Micros, Secs};

/// One column: the recorded run, or the run under one policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub outcome: Outcome,
    /// Wall-clock seconds the column took to compute.
    pub wall_secs: f64,
}

/// The comparison of a recorded run with its re-runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The log, as the user named it.
    pub log: String,
    /// How the re-runs were made, in words.
    pub model: String,
    pub from: Option<At>,
    pub until: Option<At>,
    pub events: u64,
    /// The recorded run first.
    pub columns: Vec<Column>,
    /// What the reader must know (what the model left out, and so on).
    pub notes: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Csv,
}

/// A row: its label, each column's cell, and whether a change is shown
/// beside the cells of the re-runs (for figures where more is worse).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    /// Shown text and the number behind it (CSV and the change).
    pub cells: Vec<(String, Option<f64>)>,
    pub change: bool,
}

/// A cell as shown, and which way its figure moved against the recorded
/// one where more is worse and the change is worth marking (`Less`: better).
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub text: String,
    pub moved: Option<std::cmp::Ordering>,
}

/// The table as shown: the columns' names and each row's label and cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub names: Vec<String>,
    pub rows: Vec<(String, Vec<Cell>)>,
}

impl Grid {
    /// The label column's width and each column's, as `measure` counts text.
    pub fn widths(&self, measure: impl Fn(&str) -> usize) -> (usize, Vec<usize>) {
        let label = self.rows.iter().map(|(l, _)| measure(l)).max().unwrap_or(0);
        let columns = (0..self.names.len())
            .map(|i| self.rows.iter().map(|(_, cells)| measure(&cells[i].text)).chain([measure(&self.names[i])]).max().unwrap_or(0))
            .collect();
        (label, columns)
    }
}

fn money(m: Micros) -> (String, Option<f64>) {
    (m.to_string(), Some(m.as_f64()))
}

fn count(n: u64) -> (String, Option<f64>) {
    (n.to_string(), Some(n as f64))
}

fn secs(s: Option<f64>) -> (String, Option<f64>) {
    match s {
        Some(s) => (Secs(s.round() as i64).to_string(), Some(s)),
        None => ("-".to_string(), None),
    }
}

impl Comparison {
    pub fn rows(&self) -> Vec<Row> {
        let outcomes: Vec<&Outcome> = self.columns.iter().map(|c| &c.outcome).collect();
        let row = |label: &str, change: bool, f: &dyn Fn(&Outcome) -> (String, Option<f64>)| Row {
            label: label.to_string(),
            cells: outcomes.iter().map(|o| f(o)).collect(),
            change,
        };
        let mut rows = vec![row("instance spend", true, &|o| money(o.spend()))];
        for mode in BillingMode::ALL {
            rows.push(row(&format!("  {}", mode.label()), true, &|o| money(o.spend_by_mode[mode.index()])));
        }
        rows.push(row("idle share of it", true, &|o| (format!("{:.1}%", 100.0 * o.idle_share()), Some(100.0 * o.idle_share()))));
        rows.push(row("storage & ckpt I/O", true, &|o| money(o.services)));
        let tenants: std::collections::BTreeSet<&String> = outcomes.iter().flat_map(|o| o.spend_by_tenant.keys()).collect();
        for tenant in tenants {
            rows.push(row(&format!("  tenant {tenant}"), true, &|o| money(o.spend_by_tenant.get(tenant).copied().unwrap_or_default())));
        }
        rows.push(row("GPU-hours paid", true, &|o| (format!("{:.1}", o.gpu_hours), Some(o.gpu_hours))));
        rows.push(row("GPU-hours busy", false, &|o| (format!("{:.1}", o.gpu_hours_busy), Some(o.gpu_hours_busy))));
        rows.push(row("mean queue wait", true, &|o| secs(o.mean_wait_secs())));
        rows.push(row("P95 queue wait", true, &|o| secs(o.p95_wait_secs().map(|s| s as f64))));
        rows.push(row("mean JCT", true, &|o| secs(o.mean_jct_secs())));
        rows.push(row("jobs submitted", false, &|o| count(o.submitted)));
        rows.push(row("jobs finished", false, &|o| count(o.finished)));
        rows.push(row("jobs failed", false, &|o| count(o.failed)));
        rows.push(row("queued at the end", true, &|o| count(o.queued_at_end)));
        rows.push(row("preemptions", true, &|o| count(o.preemptions)));
        rows.push(row("requeues", true, &|o| count(o.requeues)));
        rows.push(row("spot interruptions", true, &|o| count(o.interruptions)));
        rows.push(row("instances lost", true, &|o| count(o.nodes_lost)));
        rows.push(row("steps recomputed", true, &|o| count(o.recomputed_steps)));
        rows.push(row("checkpoint GiB", true, &|o| {
            let gib = o.checkpoint_bytes as f64 / f64::from(1u32 << 30);
            (format!("{gib:.1}"), Some(gib))
        }));
        rows.push(row("budget crossings", true, &|o| count(o.budget_crossings)));
        rows
    }

    /// Why every column is the same, when it is: a table of equal columns
    /// reads as "the policies do not matter" unless it says what made them
    /// unable to differ in this window. `None` when any column differs.
    pub fn why_all_equal(&self) -> Option<String> {
        let (first, rest) = self.columns.split_first()?;
        if rest.is_empty() || rest.iter().any(|c| c.outcome != first.outcome) {
            return None;
        }
        let o = &first.outcome;
        let why = if o.submitted == 0 && o.waits.is_empty() {
            "no job was submitted or placed in this window, so there was nothing to schedule".to_string()
        } else if o.waits.iter().all(|w| *w == 0) && o.queued_at_end == 0 {
            format!(
                "none of the {} placements in this window waited: every job found room on arrival, and the policies differ only in \
                 which waiting job goes first or which node it gets when some must wait",
                o.waits.len()
            )
        } else {
            "the policies made the same decision at every step of this window: whenever jobs waited, each order and each \
             placement rule chose the same job for the same GPUs"
                .to_string()
        };
        Some(format!("every column is the same: {why}; a busier window (--from/--until) or a smaller fleet (--fleet) would tell them apart"))
    }

    /// The relative change of a re-run's figure against the recorded one.
    pub fn change(recorded: Option<f64>, other: Option<f64>) -> Option<String> {
        let (a, b) = (recorded?, other?);
        if a == b {
            return Some("=".to_string());
        }
        if a.abs() < 1e-9 {
            return None;
        }
        let pct = 100.0 * (b - a) / a.abs();
        // Small changes keep a decimal, so +0.4% is not shown as a bare +0%;
        // what would read +0.0% is about the same, and says so.
        Some(match pct.abs() {
            p if p < 0.05 => "≈".to_string(),
            p if p < 9.95 => format!("{pct:+.1}%"),
            _ => format!("{pct:+.0}%"),
        })
    }

    fn span(&self) -> String {
        let day = |a: Option<At>| a.map_or_else(|| "…".to_string(), |a| a.format("%Y-%m-%d %H:%M").to_string());
        format!("{} to {}", day(self.from), day(self.until))
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Csv => self.csv(),
            Format::Markdown => self.markdown(),
            Format::Text => self.text(),
        }
    }

    /// The table as shown: each cell with its change against the recorded
    /// column where that says something, and which way it moved.
    pub fn grid(&self) -> Grid {
        let rows = self
            .rows()
            .into_iter()
            .map(|row| {
                let recorded = row.cells.first().and_then(|c| c.1);
                let cells = row
                    .cells
                    .iter()
                    .enumerate()
                    .map(|(i, (text, value))| {
                        let change = (i > 0 && row.change).then(|| Self::change(recorded, *value)).flatten();
                        let moved = change.as_deref().filter(|c| *c != "=" && *c != "≈").and(recorded.zip(*value)).map(|(a, b)| b.total_cmp(&a));
                        let text = match change {
                            Some(change) => format!("{text} ({change})"),
                            None => text.clone(),
                        };
                        Cell { text, moved }
                    })
                    .collect();
                (row.label, cells)
            })
            .collect();
        Grid { names: self.columns.iter().map(|c| c.name.clone()).collect(), rows }
    }

    fn text(&self) -> String {
        let grid = self.grid();
        let (label_w, widths) = grid.widths(|s| s.chars().count());
        let mut out = String::new();
        let _ = writeln!(out, "what if: {} ({} events, {}), {}", self.log, self.events, self.span(), self.model);
        let _ = write!(out, "{:<label_w$}", "");
        for (name, w) in grid.names.iter().zip(&widths) {
            let _ = write!(out, "  {name:>w$}");
        }
        out.push('\n');
        for (label, cells) in &grid.rows {
            let _ = write!(out, "{label:<label_w$}");
            for (cell, w) in cells.iter().zip(&widths) {
                let _ = write!(out, "  {:>w$}", cell.text);
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let times: Vec<String> = self.columns.iter().map(|c| format!("{} {:.1} s", c.name, c.wall_secs)).collect();
        let _ = writeln!(out, "computed in {}", times.join(", "));
        out
    }

    fn markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        let _ = writeln!(out, "What if: `{}` ({} events, {}), {}.\n", cell(&self.log), self.events, self.span(), self.model);
        let names: Vec<String> = self.columns.iter().map(|c| cell(&c.name)).collect();
        let _ = writeln!(out, "| | {} |", names.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(self.columns.len()));
        for (label, cells) in &self.grid().rows {
            let cells: Vec<String> = cells.iter().map(|c| cell(&c.text)).collect();
            let _ = writeln!(out, "| {} | {} |", cell(label.trim()), cells.join(" | "));
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n*{}*", cell(note));
        }
        out
    }

    fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let header = std::iter::once("figure".to_string()).chain(self.columns.iter().map(|c| c.name.clone()));
        // Writing to memory cannot fail.
        let _ = w.write_record(header);
        for row in self.rows() {
            let values = row.cells.iter().map(|(_, v)| v.map(|v| v.to_string()).unwrap_or_default());
            let _ = w.write_record(std::iter::once(row.label.trim().to_string()).chain(values));
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison(outcomes: Vec<Outcome>) -> Comparison {
        let columns = outcomes.into_iter().enumerate().map(|(i, outcome)| Column { name: format!("c{i}"), outcome, wall_secs: 0.1 }).collect();
        Comparison { log: "x.db".into(), model: "m".into(), from: None, until: None, events: 10, columns, notes: Vec::new() }
    }

    /// Issue 35, item 12: a what-if whose columns are all equal says why.
    #[test]
    fn equal_columns_say_why_and_different_ones_say_nothing() {
        let placed_at_once = Outcome { submitted: 5, waits: vec![0, 0, 0, 0, 0], finished: 5, ..Outcome::default() };
        let why = comparison(vec![placed_at_once.clone(); 3]).why_all_equal().expect("all equal");
        assert!(why.contains("none of the 5 placements in this window waited"), "{why}");
        let idle = comparison(vec![Outcome::default(); 2]).why_all_equal().expect("all equal");
        assert!(idle.contains("no job was submitted"), "{idle}");
        let waited = Outcome { submitted: 2, waits: vec![0, 300], ..Outcome::default() };
        assert!(comparison(vec![waited.clone(); 2]).why_all_equal().unwrap().contains("the same decision at every step"));
        let other = Outcome { waits: vec![0, 200], ..waited.clone() };
        assert_eq!(comparison(vec![waited.clone(), waited, other]).why_all_equal(), None, "one column differs");
        assert_eq!(comparison(vec![placed_at_once]).why_all_equal(), None, "the recorded run alone compares nothing");
    }
}
