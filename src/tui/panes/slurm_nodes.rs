//! The Slurm pane's lines above its job table: one per partition (or one
//! summary line when they do not all fit), one per node with a box per GPU
//! showing which job holds it (the last digits of its id, in that job's
//! colour, reversed for the selected job), and the accounts against their
//! quotas.
//!
//! Pure drawing helpers for `slurm.rs`: they turn `View::slurm` into lines
//! and decide nothing about jobs; they must not read anything but the
//! `SlurmView` and the theme.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::shared::{Col, fit_columns, table_line_parts, widest};
use crate::room::view_slurm::{SlurmNodeRow, SlurmView};
use crate::tui::fmt;
use crate::tui::theme::Theme;

/// How a job that holds GPUs is tagged in the node boxes and the job table:
/// the shortest tail of its id (two digits at least) that tells it apart
/// from the others on the nodes, and a colour of its own among neighbours.
pub struct Tags {
    width: usize,
    jobs: Vec<(u64, String, Style)>,
}

impl Tags {
    pub fn new(s: &SlurmView, t: &Theme) -> Tags {
        let mut ids: Vec<u64> = Vec::new();
        for id in s.nodes.iter().flat_map(|n| n.gpu_jobs.iter().flatten()) {
            if !ids.contains(id) {
                ids.push(*id);
            }
        }
        let digits: Vec<String> = ids.iter().map(u64::to_string).collect();
        let longest = digits.iter().map(String::len).max().unwrap_or(2).max(2);
        let tail = |d: &str, k: usize| d[d.len().saturating_sub(k)..].to_string();
        let width = (2..=longest)
            .find(|k| {
                let mut tails: Vec<String> = digits.iter().map(|d| tail(d, *k)).collect();
                tails.sort_unstable();
                tails.windows(2).all(|w| w[0] != w[1])
            })
            .unwrap_or(longest);
        let palette = [t.billing[1], t.billing[0], t.chart, t.util[7], t.mem_used, t.billing[2]];
        let jobs = ids.iter().zip(&digits).enumerate().map(|(i, (id, d))| (*id, format!("{:>width$}", tail(d, width)), palette[i % palette.len()])).collect();
        Tags { width, jobs }
    }

    /// The colour of a job that holds GPUs on a node shown.
    pub fn style(&self, id: u64) -> Option<Style> {
        self.jobs.iter().find(|j| j.0 == id).map(|j| j.2)
    }

    fn tag(&self, id: u64) -> Option<(&str, Style)> {
        self.jobs.iter().find(|j| j.0 == id).map(|j| (j.1.as_str(), j.2))
    }
}

/// Width of the name column shared by the partition and node lines.
fn name_width(s: &SlurmView) -> usize {
    let parts = s.partitions.iter().map(|p| fmt::width(&p.name) + usize::from(p.default));
    let nodes = s.nodes.iter().map(|n| fmt::width(&n.name));
    parts.chain(nodes).max().unwrap_or(4).clamp(4, 16)
}

/// `count` partition lines: every partition, or (`count` 1 of several) one summary line.
pub fn partition_lines<'a>(s: &SlurmView, count: usize, t: &Theme, w: usize) -> Vec<Line<'a>> {
    let p = &s.partitions;
    if count == 0 || p.is_empty() {
        return Vec::new();
    }
    if count < p.len() {
        let mut groups = Vec::new();
        for (i, part) in p.iter().enumerate() {
            let mut g = vec![Span::styled(format!("{}{}{} ", if i > 0 { "  " } else { "" }, part.name, if part.default { "*" } else { "" }), t.text)];
            g.push(Span::styled(format!("{}/{}", part.gpus_used, part.gpus), t.figure));
            if part.state != "up" {
                g.push(Span::styled(format!(" {}", part.state), t.warn));
            }
            if part.pending > 0 {
                g.push(Span::styled(format!(" +{} pending", part.pending), t.dim));
            }
            groups.push(g);
        }
        return vec![fmt::fit_groups(groups, w)];
    }
    let states = p.iter().map(|x| x.state.as_str());
    let cols = [
        Col::left("", name_width(s), 0),
        Col::left("", widest(states, 4, 10), 0),
        Col::right("", widest(p.iter().map(|x| format!("{}/{} GPUs", x.gpus_used, x.gpus)).collect::<Vec<_>>().iter().map(String::as_str), 8, 16), 0),
        Col::left("", 8, 3),
        Col::right("", 9, 1),
        Col::left("", 18, 1),
        Col::right("", 8, 4),
    ];
    let widths = fit_columns(&cols, w);
    p.iter()
        .map(|part| {
            let ratio = if part.gpus > 0 { f64::from(part.gpus_used) / f64::from(part.gpus) } else { 0.0 };
            let pending = if part.pending > 0 {
                let gpus = if part.pending_gpus == 1 { "1 GPU".to_string() } else { format!("{} GPUs", part.pending_gpus) };
                vec![Span::styled(format!("{} pending", part.pending), t.figure), Span::styled(format!(" ({gpus})"), t.dim)]
            } else {
                vec![Span::styled("0 pending", t.dim)]
            };
            let cells = vec![
                vec![Span::styled(format!("{}{}", part.name, if part.default { "*" } else { "" }), t.text)],
                vec![Span::styled(part.state.clone(), if part.state == "up" { t.ok } else { t.warn })],
                vec![Span::styled(format!("{}/{}", part.gpus_used, part.gpus), t.figure), Span::styled(" GPUs", t.dim)],
                vec![Span::styled(fmt::bar(ratio, 8), t.chart)],
                vec![Span::styled(format!("{} running", part.running), t.text)],
                pending,
                vec![Span::styled(if part.nodes == 1 { "1 node".to_string() } else { format!("{} nodes", part.nodes) }, t.dim)],
            ];
            table_line_parts(&cols, &widths, cells)
        })
        .collect()
}

/// The GPU boxes of a node: `[13 13 17 ··]`.
fn boxes<'a>(n: &SlurmNodeRow, tags: &Tags, selected: Option<u64>, t: &Theme) -> Vec<Span<'a>> {
    if n.gpu_jobs.is_empty() {
        return vec![Span::styled("no GPUs", t.dim)];
    }
    let mut spans = vec![Span::styled("[", t.dim)];
    for (i, slot) in n.gpu_jobs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw(" "));
        }
        spans.push(match slot.and_then(|id| tags.tag(id).map(|tag| (id, tag))) {
            Some((id, (label, style))) => {
                let style = if selected == Some(id) { style.add_modifier(Modifier::REVERSED) } else { style };
                Span::styled(label.to_string(), style)
            }
            // Free, but the node takes no work: not a place to go.
            None if n.unavailable => Span::styled("✕".repeat(tags.width), t.warn),
            None => Span::styled("·".repeat(tags.width), t.dim),
        });
    }
    spans.push(Span::styled("]", t.dim));
    spans
}

/// `count` node lines; when they do not all fit the last says how many more.
pub fn node_lines<'a>(s: &SlurmView, count: usize, tags: &Tags, selected: Option<u64>, t: &Theme, w: usize) -> Vec<Line<'a>> {
    if count == 0 {
        return Vec::new();
    }
    let nodes = &s.nodes;
    let box_w = nodes.iter().map(|n| if n.gpu_jobs.is_empty() { 7 } else { n.gpu_jobs.len() * (tags.width + 1) + 1 }).max().unwrap_or(2);
    let cpus: Vec<String> = nodes.iter().map(|n| format!("CPU {}/{}", n.cpus_alloc, n.cpus)).collect();
    let cols = [
        Col::left("", name_width(s), 0),
        Col::left("", widest(nodes.iter().map(|n| n.state.as_str()), 4, 16), 0),
        Col::left("", box_w, 0),
        Col::right("", widest(nodes.iter().map(|n| format!("{}/{} GPUs", n.gpus_used, n.gpus)).collect::<Vec<_>>().iter().map(String::as_str), 8, 16), 2),
        Col::right("", widest(cpus.iter().map(String::as_str), 9, 16), 3),
        Col::left("", widest(nodes.iter().filter_map(|n| n.gpu_type.as_deref()), 0, 12), 4),
        Col::flex("", 10, 200, 1),
    ];
    let widths = fit_columns(&cols, w);
    let shown = if count < nodes.len() { count - 1 } else { count };
    let mut lines: Vec<Line<'a>> = nodes[..shown]
        .iter()
        .zip(&cpus)
        .map(|(n, cpu)| {
            let state = if n.unavailable {
                t.warn
            } else if n.state == "idle" {
                t.dim
            } else {
                t.text
            };
            let reason = if n.unavailable && !n.reason.is_empty() { Span::styled(n.reason.clone(), t.warn) } else { Span::raw("") };
            let cells = vec![
                vec![Span::styled(n.name.clone(), t.text)],
                vec![Span::styled(n.state.clone(), state)],
                boxes(n, tags, selected, t),
                vec![Span::styled(format!("{}/{}", n.gpus_used, n.gpus), t.figure), Span::styled(" GPUs", t.dim)],
                vec![Span::styled(cpu.clone(), t.dim)],
                vec![Span::styled(n.gpu_type.clone().unwrap_or_default(), t.dim)],
                vec![reason],
            ];
            table_line_parts(&cols, &widths, cells)
        })
        .collect();
    if shown < nodes.len() {
        let down = nodes[shown..].iter().filter(|n| n.unavailable).count();
        let mut spans = vec![Span::styled(format!("+{} more nodes", nodes.len() - shown), t.dim)];
        if down > 0 {
            spans.push(Span::styled(format!(", {down} drained or down"), t.warn));
        }
        spans.push(Span::styled(" (z zooms)", t.dim));
        lines.push(Line::from(spans));
    }
    lines
}

/// `accounts  vision 4/3 borrowing  nlp 1/8 +5 pending  ext 0 no quota`.
pub fn accounts_line<'a>(s: &SlurmView, t: &Theme, w: usize) -> Line<'a> {
    let mut groups = vec![vec![Span::styled("accounts", t.dim)]];
    // The ones to look at first: borrowing, holding without a quota, waiting.
    let mut accounts: Vec<_> = s.accounts.iter().collect();
    accounts.sort_by_key(|a| match a.quota {
        Some(q) if a.holding > q => 0,
        None if a.holding > 0 => 1,
        _ if a.pending_gpus > 0 => 2,
        _ => 3,
    });
    for a in accounts {
        let mut g = vec![Span::styled(format!("  {} ", a.account), t.text)];
        match a.quota {
            Some(q) if a.holding > q => {
                g.push(Span::styled(format!("{}/{q}", a.holding), t.warn));
                g.push(Span::styled(" ▲borrowing", t.warn));
            }
            Some(q) => g.push(Span::styled(format!("{}/{q}", a.holding), t.figure)),
            None => {
                g.push(Span::styled(a.holding.to_string(), t.figure));
                g.push(Span::styled(" no quota", if a.holding > 0 { t.warn } else { t.dim }));
            }
        }
        if a.pending_gpus > 0 {
            g.push(Span::styled(format!(" +{} pending", a.pending_gpus), t.dim));
        }
        groups.push(g);
    }
    fmt::fit_groups(groups, w)
}
