//! Slurm pane: what the attached Slurm cluster looks like to an on-call
//! engineer. A header (cluster, Slurm release, advisory or control mode,
//! what preempt means, how old the snapshot is, or STALE and why), one line
//! per partition, one per node with a box per GPU naming the job that holds
//! it, the accounts against their quotas, then the job table with a
//! selectable, scrolling row and a NOTE column for gpuroom's advice and the
//! last command sent.
//!
//! Draws from `View::slurm` and the selection it is handed, nothing else: it
//! writes back only the scroll window and must not draw outside its `Rect`,
//! compute business figures or judge what a job should do (the advice comes
//! with the `View`). The node and partition lines are `slurm_nodes`'.

use std::cell::Cell;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::shared::{Col, PaneProps, fit_columns, frame, header_line, table_line, widest};
use super::slurm_nodes::{self, Tags};
use crate::domain::slurm::{SlurmMode, SlurmState};
use crate::domain::units::Secs;
use crate::room::View;
use crate::room::view_slurm::{SlurmJobRow, SlurmView};
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::selection::{Window, scroll};
use crate::tui::theme::Theme;

/// The UI state the Slurm pane needs.
pub struct SlurmUi<'a> {
    /// Position in `SlurmView::jobs` of the selected job.
    pub selected: Option<usize>,
    pub window: &'a Cell<Window>,
}

pub fn render(view: &View, ui: &SlurmUi<'_>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let Some(s) = view.slurm.as_ref() else {
        let inner = frame(PaneId::Slurm, None, props, area, buf);
        put(buf, inner, 0, Line::from(Span::styled("no Slurm cluster is attached", t.dim)));
        return;
    };
    let mut extra = Vec::new();
    if s.stale.is_some() {
        extra.push(Span::styled(" STALE ", t.warn));
    }
    if s.commands_in_flight > 0 {
        extra.push(Span::styled(format!(" {} on its way ", s.commands_in_flight), t.key));
    }
    if let Some(i) = ui.selected {
        extra.push(Span::styled(format!(" {}/{} ", i + 1, s.jobs.len()), t.dim));
    }
    let inner = frame(PaneId::Slurm, (!extra.is_empty()).then(|| Line::from(extra)), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let w = inner.width as usize;
    let selected = ui.selected.and_then(|i| s.jobs.get(i));
    let tags = Tags::new(s, t);
    let cols = job_columns(s, w);
    let widths = fit_columns(&cols, w);
    let detail = selected.map(|j| detail_lines(j, widths[NOTE], t, w)).unwrap_or_default();
    let plan = Plan::new(inner.height as usize, s, detail.len());
    let mut lines = vec![header(view, s, t, w)];
    lines.extend(slurm_nodes::partition_lines(s, plan.partitions, t, w));
    lines.extend(slurm_nodes::node_lines(s, plan.nodes, &tags, selected.map(|j| j.id), t, w));
    if plan.accounts {
        lines.push(slurm_nodes::accounts_line(s, t, w));
    }
    let top = lines.len() as u16;
    for (row, line) in lines.into_iter().enumerate() {
        put(buf, inner, row as u16, line);
    }
    // The table takes what is left; the note goes right under its last row.
    let left = inner.height.saturating_sub(top + plan.detail as u16);
    let table = left.min(1 + s.jobs.len().max(1) as u16);
    if table > 0 {
        let area = Rect { y: inner.y + top, height: table, ..inner };
        job_table(s, ui, &tags, (&cols, &widths), props, area, buf);
    }
    for (row, line) in detail.into_iter().take(plan.detail).enumerate() {
        put(buf, inner, top + table + row as u16, line);
    }
}

/// Which sections fit besides the job table, which keeps its heading and
/// up to three rows first: partitions (or one summary line), the selected
/// job's note in full (when its column cuts it), accounts, nodes (the last
/// line saying how many more when they do not all fit).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    /// Partition lines: all of them, 1 for the summary line, or 0.
    partitions: usize,
    /// Node lines, the "more" line included.
    nodes: usize,
    accounts: bool,
    /// Lines of the selected job's note, under the table.
    detail: usize,
}

impl Plan {
    fn new(height: usize, s: &SlurmView, detail: usize) -> Plan {
        let table = 1 + s.jobs.len().clamp(1, 3);
        let mut left = height.saturating_sub(1 + table);
        let p = s.partitions.len();
        let partitions = if p <= left { p } else { left.min(1) };
        left -= partitions;
        let detail = detail.min(left);
        left -= detail;
        let accounts = !s.accounts.is_empty() && left >= 1;
        left -= usize::from(accounts);
        Plan { partitions, nodes: s.nodes.len().min(left), accounts, detail }
    }
}

/// Groups of spans kept in their order, the least important (highest
/// number) dropped first until the rest fit in `w` cells.
fn fit_ranked<'a>(mut groups: Vec<(u8, Vec<Span<'a>>)>, w: usize) -> Line<'a> {
    let width = |g: &[(u8, Vec<Span<'a>>)]| g.iter().flat_map(|(_, s)| s).map(Span::width).sum::<usize>();
    while width(&groups) > w && groups.len() > 1 {
        let Some(worst) = (0..groups.len()).max_by_key(|i| (groups[*i].0, *i)) else { break };
        groups.remove(worst);
    }
    Line::from(groups.into_iter().flat_map(|(_, s)| s).collect::<Vec<_>>())
}

fn header<'a>(view: &View, s: &SlurmView, t: &Theme, w: usize) -> Line<'a> {
    let mode = match s.mode {
        SlurmMode::Advisory => Span::styled("ADVISORY", t.text),
        // gpuroom acts on its own: say so loudly.
        SlurmMode::Control => Span::styled("CONTROL", t.warn),
    };
    let age = s.seen_at.and_then(|at| fmt::since(view.at, at));
    let cluster = vec![Span::styled("cluster ", t.dim), Span::styled(s.cluster.clone(), t.figure)];
    let used = cluster.iter().map(Span::width).sum::<usize>();
    let mut groups = vec![(0, cluster)];
    if let Some(why) = &s.stale {
        // Right after the name and cut to fit: it is never the part dropped.
        let seen = age.map(|a| format!(" (seen {a} ago)")).unwrap_or_default();
        let room = w.saturating_sub(used + 10);
        let room = if room >= fmt::width(why) + fmt::width(&seen) || room >= 12 + fmt::width(&seen) { room - fmt::width(&seen) } else { room };
        groups.push((0, vec![Span::styled(" · ", t.dim), Span::styled(format!("STALE: {}", fmt::trunc(why, room)), t.warn)]));
        groups.push((2, vec![Span::styled(seen, t.dim)]));
    }
    groups.push((3, vec![Span::styled(" · Slurm ", t.dim), Span::styled(s.version.clone(), t.text)]));
    groups.push((1, vec![Span::styled(" · ", t.dim), mode]));
    if let Some(discipline) = &s.governs {
        // The room is Slurm's policy: which order, and whether Slurm kept it.
        let mut g = vec![Span::styled(" · orders by ", t.dim), Span::styled(discipline.clone(), t.figure)];
        let starts = s.followed + s.out_of_order;
        if starts > 0 {
            let style = if s.out_of_order > 0 { t.warn } else { t.ok };
            g.push(Span::styled(format!(" · followed {}/{starts}", s.followed), style));
        }
        groups.push((1, g));
    }
    groups.push((4, vec![Span::styled(" · preempt = ", t.dim), Span::styled(s.preempt_by.clone(), t.text)]));
    if s.stale.is_none()
        && let Some(age) = age
    {
        groups.push((2, vec![Span::styled(" · seen ", t.dim), Span::styled(format!("{age} ago"), t.text)]));
    }
    fit_ranked(groups, w)
}

/// The NOTE column's place in `job_columns`.
const NOTE: usize = 11;

/// The job table's columns for `w` cells. The NOTE column asks for a
/// quarter of the width, so that on a mid-size pane the restarts and the
/// partition give way to gpuroom's advice.
fn job_columns(s: &SlurmView, w: usize) -> [Col; 12] {
    let jobs = &s.jobs;
    let ids: Vec<String> = jobs.iter().map(|j| j.id.to_string()).collect();
    [
        Col::left(" ", 1, 0),
        Col::left("ID", widest(ids.iter().map(String::as_str), 2, 12), 0),
        Col::flex("NAME", 10, 20, 0),
        Col::left("USER", widest(jobs.iter().map(|j| j.user.as_str()), 4, 10), 3),
        Col::left("ACCOUNT", widest(jobs.iter().map(|j| j.account.as_str()), 7, 10), 2),
        Col::left("PART", widest(jobs.iter().map(|j| j.partition.as_str()), 4, 10), 4),
        Col::left("STATE", widest(jobs.iter().map(state_label), 5, 13), 0),
        Col::right("GPUS", 4, 1),
        Col::left("WHERE", widest(jobs.iter().map(|j| j.placement.as_str()), 5, 18), 2),
        Col::right("TIME", 6, 1),
        Col::right("RESTARTS", 8, 5),
        Col::flex("NOTE", (w / 4).clamp(20, 40), 400, 1),
    ]
}

fn state_label(job: &SlurmJobRow) -> &str {
    if job.held { "held" } else { job.state.label() }
}

fn state_style(job: &SlurmJobRow, t: &Theme) -> Style {
    if job.held {
        return t.warn;
    }
    match job.state {
        SlurmState::Running => t.ok,
        SlurmState::Pending | SlurmState::Completed | SlurmState::Cancelled => t.dim,
        SlurmState::Suspended | SlurmState::Preempted => t.warn,
        SlurmState::Failed | SlurmState::Timeout | SlurmState::NodeFail | SlurmState::OutOfMemory | SlurmState::BootFail | SlurmState::Deadline => t.alarm,
        SlurmState::Completing | SlurmState::Other(_) => t.text,
    }
}

/// The NOTE cell: a command on its way, one that failed, gpuroom's advice,
/// the last command that worked, or why Slurm keeps the job waiting.
fn note<'a>(job: &SlurmJobRow, t: &Theme) -> Span<'a> {
    match (&job.command, &job.advice) {
        (Some(c), _) if job.in_flight => Span::styled(format!("→ {c}"), t.key),
        (Some(c), _) if job.command_failed => Span::styled(format!("✗ {c}"), t.alarm),
        _ if job.plan_alarm => Span::styled(format!("✗ {}", job.plan.clone().unwrap_or_default()), t.alarm),
        (_, Some(a)) => Span::styled(format!("⚑ {a}"), t.warn),
        _ if job.plan.is_some() => Span::styled(job.plan.clone().unwrap_or_default(), t.text),
        (Some(c), None) => Span::styled(format!("✓ {c}"), t.dim),
        (None, None) if !job.reason.is_empty() && job.reason != "None" => Span::styled(job.reason.clone(), t.dim),
        (None, None) => Span::raw(""),
    }
}

/// The selected job's note in full, under the table, when its column cuts
/// it (or is not shown): at most two lines, the second cut with `…`.
fn detail_lines<'a>(job: &SlurmJobRow, note_w: Option<usize>, t: &Theme, w: usize) -> Vec<Line<'a>> {
    let n = note(job, t);
    if n.content.is_empty() || note_w.is_some_and(|cw| fmt::width(&n.content) <= cw) {
        return Vec::new();
    }
    let lead = format!("{} {}: ", job.id, fmt::trunc(&job.name, 20));
    let lead_w = fmt::width(&lead);
    if w < lead_w + 12 {
        return vec![Line::from(Span::styled(fmt::trunc(&n.content, w), n.style))];
    }
    let mut parts = fmt::wrap(&n.content, w - lead_w);
    if parts.len() > 2 {
        parts.truncate(2);
        parts[1] = fmt::trunc(&format!("{} …", parts[1]), w - lead_w);
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let head = if i == 0 { Span::styled(lead.clone(), t.figure) } else { Span::raw(" ".repeat(lead_w)) };
            Line::from(vec![head, Span::styled(part, n.style)])
        })
        .collect()
}

fn wait_style(wait: Secs, t: &Theme) -> Style {
    t.grade(wait.0 as f64, 1800.0, 4.0 * 3600.0)
}

/// The first cell: ▶ on the selected row; where the NOTE column is not
/// shown, the note's mark (⚑ ✗ →) so that nothing needing a look hides.
fn mark<'a>(job: &SlurmJobRow, selected: bool, note_shown: bool, t: &Theme) -> Span<'a> {
    if selected {
        return Span::styled("▶", t.figure);
    }
    let n = note(job, t);
    match n.content.chars().next() {
        Some(c @ ('⚑' | '✗' | '→')) if !note_shown && n.content.chars().nth(1) == Some(' ') => Span::styled(c.to_string(), n.style),
        _ => Span::raw(" "),
    }
}

fn job_cells<'a>(job: &SlurmJobRow, selected: bool, note_shown: bool, tags: &Tags, t: &Theme) -> Vec<Span<'a>> {
    let time = match (job.waited, job.ran) {
        (Some(w), _) if job.state == SlurmState::Pending => Span::styled(w.to_string(), wait_style(w, t)),
        (_, Some(r)) => Span::styled(r.to_string(), t.text),
        _ => Span::styled("—", t.dim),
    };
    let place = if job.placement.is_empty() { Span::styled("—", t.dim) } else { Span::styled(job.placement.clone(), t.text) };
    vec![
        mark(job, selected, note_shown, t),
        // A job holding GPUs has the colour of its boxes on the node lines.
        Span::styled(job.id.to_string(), tags.style(job.id).unwrap_or(t.dim)),
        Span::styled(job.name.clone(), t.text),
        Span::styled(job.user.clone(), t.text),
        Span::styled(job.account.clone(), t.text),
        Span::styled(job.partition.clone(), t.dim),
        Span::styled(state_label(job).to_string(), state_style(job, t)),
        // A sharing job holds shards of one GPU, not GPUs.
        if job.gpus == 0 && job.shards > 0 { Span::styled(format!("{}sh", job.shards), t.text) } else { Span::styled(job.gpus.to_string(), t.text) },
        place,
        time,
        Span::styled(job.restarts.to_string(), if job.restarts > 0 { t.warn } else { t.dim }),
        note(job, t),
    ]
}

fn job_table(s: &SlurmView, ui: &SlurmUi<'_>, tags: &Tags, (cols, widths): (&[Col], &[Option<usize>]), props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    put(buf, area, 0, header_line(cols, widths, t.heading));
    if s.jobs.is_empty() {
        put(buf, area, 1, Line::from(Span::styled("no jobs in Slurm's queue", t.dim)));
        return;
    }
    let rows = area.height.saturating_sub(1) as usize;
    let window = scroll(ui.window.get(), ui.selected, rows, s.jobs.len());
    ui.window.set(window);
    for (i, job) in s.jobs.iter().enumerate().skip(window.offset).take(rows) {
        let selected = ui.selected == Some(i);
        let mut line = table_line(cols, widths, job_cells(job, selected, widths[NOTE].is_some(), tags, t));
        if selected {
            line = line.patch_style(if props.focused { t.selected } else { t.selected_unfocused });
        }
        put(buf, area, 1 + (i - window.offset) as u16, line);
    }
}

#[cfg(test)]
#[path = "slurm_tests.rs"]
mod tests;
