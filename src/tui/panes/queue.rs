//! Queue pane: queue depth, GPUs asked and the oldest wait; per-tenant rows
//! (queued, asked, running, held vs quota, oldest wait) when there is room;
//! then the job table with a selectable, scrolling row.
//!
//! Draws from `View::queue`, `View::jobs`, `View::discipline` and the mean
//! wait in `View::totals`, plus the selection it is handed. It writes back
//! only the scroll window (so the next key press knows the page size). Must
//! not draw outside its `Rect`.

use std::cell::Cell;
use std::fmt::Write;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::shared::{Col, PaneProps, fit_columns, frame, header_line, table_line, widest, widest_shown};
use crate::domain::ids::JobId;
use crate::domain::job::Phase;
use crate::domain::units::Secs;
use crate::room::View;
use crate::room::view::JobRow;
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::selection::{Window, scroll};
use crate::tui::theme::Theme;

/// The UI state the queue pane needs.
pub struct QueueUi<'a> {
    /// Position in `rows` of the selected job.
    pub selected: Option<usize>,
    pub window: &'a Cell<Window>,
    /// Indices into `View::jobs` in the order shown (`None`: all, as listed).
    pub rows: Option<&'a [usize]>,
    /// The active filter and sort, for the title (empty / `None` when off).
    pub filter: &'a str,
    pub sort: Option<String>,
    /// The job the operator had selected, when it has left the rows shown.
    pub left: Option<JobId>,
}

impl<'a> QueueUi<'a> {
    /// Every job in the engine's order, nothing selected.
    pub fn plain(window: &'a Cell<Window>) -> QueueUi<'a> {
        QueueUi { selected: None, window, rows: None, filter: "", sort: None, left: None }
    }
}

pub fn render(view: &View, ui: &QueueUi<'_>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let shown = ui.rows.map_or(view.jobs.len(), <[usize]>::len);
    let mut extra = Vec::new();
    if !ui.filter.is_empty() {
        extra.push(Span::styled(format!(" /{} ", fmt::trunc(ui.filter, 16)), t.key));
        extra.push(Span::styled(format!("{shown} of {} ", view.jobs.len()), t.figure));
    }
    if let Some(sort) = &ui.sort {
        extra.push(Span::styled(format!(" {sort} "), t.key));
    }
    if let Some(gone) = ui.left {
        extra.push(Span::styled(format!(" ▷ {gone} left "), t.warn));
    }
    if let Some(i) = ui.selected {
        extra.push(Span::styled(format!(" {}/{shown} ", i + 1), t.dim));
    }
    let inner = frame(PaneId::Queue, (!extra.is_empty()).then(|| Line::from(extra)), props, area, buf);
    if inner.is_empty() {
        return;
    }
    put(buf, inner, 0, summary_line(view, t, inner.width as usize));
    let mut row = 1u16;
    let tenants = view.queue.by_tenant.len() as u16;
    // Tenant rows only when the job table keeps at least three rows.
    if tenants > 0 && inner.height >= 1 + (tenants + 1) + 1 + 3 {
        row = tenant_table(view, t, inner, row, buf);
    }
    if row >= inner.height {
        return;
    }
    job_table(view, ui, props, Rect { y: inner.y + row, height: inner.height - row, ..inner }, buf);
}

fn summary_line<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let q = &view.queue;
    let mut groups = vec![
        vec![Span::styled(q.depth.to_string(), if q.depth > 0 { t.figure } else { t.text }), Span::styled(" queued", t.dim)],
        vec![Span::styled(format!("  {}", q.gpus_asked), t.figure), Span::styled(" GPUs asked", t.dim)],
    ];
    if let Some(wait) = q.oldest_wait {
        groups.push(vec![Span::styled("  oldest ", t.dim), Span::styled(wait.to_string(), wait_style(wait, t))]);
        if let Some(id) = q.oldest_job {
            groups.push(vec![Span::styled(format!(" {id}"), t.text)]);
            if let Some(job) = view.jobs.iter().find(|j| j.id == id) {
                groups.push(vec![Span::styled(format!(" {}", fmt::trunc(&job.name, 20)), t.text)]);
            }
        }
    }
    groups.push(vec![Span::styled(format!("  {}", q.running), t.figure), Span::styled(" running", t.dim)]);
    if let Some(mean) = view.totals.mean_wait {
        groups.push(vec![Span::styled("  mean wait ", t.dim), Span::styled(mean.to_string(), t.text)]);
    }
    if !view.discipline.is_empty() {
        groups.push(vec![Span::styled(format!("  {}", view.discipline), t.dim)]);
    }
    fmt::fit_groups(groups, w)
}

fn wait_style(wait: Secs, t: &Theme) -> Style {
    t.grade(wait.0 as f64, 1800.0, 4.0 * 3600.0)
}

fn tenant_table(view: &View, t: &Theme, inner: Rect, mut row: u16, buf: &mut Buffer) -> u16 {
    let by = &view.queue.by_tenant;
    let cols = [
        Col::left("TENANT", widest(by.iter().map(|r| r.tenant.as_str()), 6, 16), 0),
        Col::right("QUEUED", 6, 0),
        Col::right("ASKED", 5, 1),
        Col::right("RUN", 4, 2),
        Col::right("HELD/QUOTA", 10, 0),
        Col::right("OLDEST", 7, 1),
    ];
    let widths = fit_columns(&cols, inner.width as usize);
    let mut lines = vec![header_line(&cols, &widths, t.heading)];
    for r in by {
        // ▲ marks capacity borrowed beyond the quota (preempted first).
        let over = r.gpus_held > r.quota_gpus || r.borrowed_gpus > 0;
        let held = format!("{}{}/{}", if over { "▲" } else { "" }, r.gpus_held, r.quota_gpus);
        let oldest = r.oldest_wait.map(|w| w.to_string()).unwrap_or_else(|| "—".into());
        lines.push(table_line(
            &cols,
            &widths,
            vec![
                Span::styled(r.tenant.clone(), t.text),
                Span::styled(r.queued.to_string(), if r.queued > 0 { t.figure } else { t.dim }),
                Span::styled(r.gpus_asked.to_string(), t.text),
                Span::styled(r.running.to_string(), t.text),
                Span::styled(held, if over { t.warn } else { t.text }),
                Span::styled(oldest, r.oldest_wait.map(|w| wait_style(w, t)).unwrap_or(t.dim)),
            ],
        ));
    }
    for line in lines {
        put(buf, inner, row, line);
        row += 1;
    }
    row
}

/// Whether any shown job waits with a reason: then the table has a WAITS FOR column.
fn any_reason(jobs: &[JobRow]) -> bool {
    jobs.iter().any(|j| j.phase == Phase::Queued && j.waits_for.is_some())
}

fn job_columns(jobs: &[JobRow]) -> Vec<Col> {
    // A cost's width grows with its size: the largest and the most negative
    // cost set the column, two figures to format instead of one per job.
    let (low, high) = (jobs.iter().map(|j| j.cost).min(), jobs.iter().map(|j| j.cost).max());
    let cost_w = widest_shown(
        low.into_iter().chain(high),
        |text, cost| {
            let _ = write!(text, "{cost}");
        },
        4,
        12,
    );
    // With jobs waiting, how long and for what outrank a running job's
    // progress and ETA: a narrow pane (80×24) keeps WAIT and WAITS FOR.
    let waiting = any_reason(jobs);
    let (wait, running) = if waiting { (1, 3) } else { (3, 1) };
    let mut cols = vec![
        Col::left(" ", 1, 0),
        Col::left(
            "ID",
            widest_shown(
                jobs.iter(),
                |text, j| {
                    let _ = write!(text, "{}", j.id);
                },
                2,
                8,
            ),
            0,
        ),
        Col::flex("NAME", 9, 28, 0),
        Col::left("TENANT", widest(jobs.iter().map(|j| j.tenant.as_str()), 6, 10), 5),
        Col::left("STATE", 10, 1),
        Col::right("GPU", 3, if waiting { 3 } else { 2 }),
        Col::left("NODE", widest(jobs.iter().filter_map(|j| j.node.as_deref()), 4, 8), 4),
        Col::left("PROGRESS", 8, 6),
        Col::right("%", 4, running),
        Col::right("WAIT", 6, wait),
        Col::right("ETA", 6, if waiting { 3 } else { 2 }),
        Col::right("COST", cost_w, 4),
    ];
    if waiting {
        // Why a queued job waits: quota, budget, capacity on its way (with its ETA), no spot capacity.
        cols.insert(7, Col::left("WAITS FOR", 10, 1));
    }
    cols
}

fn state_style(job: &JobRow, t: &Theme) -> Style {
    if job.escalated {
        return t.alarm;
    }
    match job.phase {
        Phase::Queued if job.state == "requeued" => t.warn,
        Phase::Queued => t.dim,
        Phase::Running => t.ok,
        Phase::Checkpointing | Phase::Preempted => t.warn,
        Phase::Failed => t.alarm,
        Phase::Placed | Phase::Done => t.text,
    }
}

fn job_cells<'a>(job: &JobRow, selected: bool, reasons: bool, t: &Theme) -> Vec<Span<'a>> {
    // Marks in words and glyphs, not colour alone: ↻ requeued, escalated
    // past its wait limit (!), ▲ on borrowed capacity.
    let requeued = job.state == "requeued";
    let state = match (requeued, job.escalated, job.borrowed) {
        (_, true, _) => format!("!{}", job.state),
        (true, _, _) => format!("↻ {}", job.state),
        (_, _, true) => format!("▲{}", job.state),
        _ => job.state.clone(),
    };
    let queued = job.phase == Phase::Queued;
    let mut cells = vec![
        Span::styled(if selected { "▶" } else { " " }, t.figure),
        Span::styled(job.id.to_string(), t.dim),
        Span::styled(job.name.clone(), t.text),
        Span::styled(job.tenant.clone(), t.text),
        Span::styled(state, state_style(job, t)),
        Span::styled(job.gpus.to_string(), t.text),
        // A job an operator sent elsewhere shows where it waits to go.
        match (&job.node, &job.target) {
            (Some(node), _) => Span::styled(node.clone(), t.dim),
            (None, Some(to)) => Span::styled(format!("→{}", to.billing.short()), t.key),
            (None, None) => Span::styled("—", t.dim),
        },
        Span::styled(fmt::bar(job.progress, 8), if queued { t.dim } else { t.ok }),
        Span::styled(fmt::pct(job.progress), t.text),
        Span::styled(job.wait.to_string(), if queued { wait_style(job.wait, t) } else { t.dim }),
        match (job.eta, job.predicted_runtime) {
            (Some(eta), _) => Span::styled(eta.to_string(), t.text),
            // Not started: how long it should run once placed, from jobs like it.
            (None, Some(run)) if queued => Span::styled(format!("~{run}"), t.dim),
            _ => Span::styled("—", t.text),
        },
        Span::styled(job.cost.to_string(), t.text),
    ];
    if reasons {
        let why = job.waits_for.as_deref().filter(|_| queued).map(short_reason).unwrap_or_default();
        let style = if why.starts_with("up in") || why == "launching" {
            t.key
        } else if why == "budget" || why == "no spot" {
            t.warn
        } else {
            t.dim
        };
        cells.insert(7, Span::styled(why, style));
    }
    cells
}

/// The reason in ten cells: "quota", "budget", "up in 45s" (capacity
/// booting for it), "launching", "no spot", "no fit".
fn short_reason(why: &str) -> String {
    if let Some(rest) = why.strip_prefix("capacity booting:") {
        return rest.rsplit_once("up in ").map_or("booting".to_string(), |(_, eta)| format!("up in {eta}"));
    }
    let head = why.split(':').next().unwrap_or(why);
    match head {
        "capacity launching" => "launching".to_string(),
        "spot capacity unavailable" => "no spot".to_string(),
        other => other.to_string(),
    }
}

fn job_table(view: &View, ui: &QueueUi<'_>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let cols = job_columns(&view.jobs);
    let reasons = any_reason(&view.jobs);
    let widths = fit_columns(&cols, area.width as usize);
    put(buf, area, 0, header_line(&cols, &widths, t.heading));
    let rows = area.height.saturating_sub(1) as usize;
    let all: Vec<usize>;
    let order = match ui.rows {
        Some(r) => r,
        None => {
            all = (0..view.jobs.len()).collect();
            &all
        }
    };
    if order.is_empty() {
        let why = if view.jobs.is_empty() { "no jobs".to_string() } else { format!("no job matches /{} (Esc clears)", ui.filter) };
        put(buf, area, 1, Line::from(Span::styled(why, t.dim)));
        return;
    }
    let window = scroll(ui.window.get(), ui.selected, rows, order.len());
    ui.window.set(window);
    for (i, job) in order.iter().map(|j| &view.jobs[*j]).enumerate().skip(window.offset).take(rows) {
        let selected = ui.selected == Some(i);
        let mut line = table_line(&cols, &widths, job_cells(job, selected, reasons, t));
        if selected {
            let style = if props.focused { t.selected } else { t.selected_unfocused };
            line = line.patch_style(style);
        }
        put(buf, area, 1 + (i - window.offset) as u16, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    fn draw(view: &View, w: u16, h: u16, selected: Option<usize>) -> ratatui::Terminal<ratatui::backend::TestBackend> {
        let window = Cell::new(Window::default());
        draw_pane(w, h, true, |p, a, b| render(view, &QueueUi { selected, ..QueueUi::plain(&window) }, p, a, b))
    }

    #[test]
    fn queue_pane_wide() {
        let view = demo_view();
        insta::assert_snapshot!(draw(&view, 110, 20, Some(10)).backend());
    }

    #[test]
    fn queue_pane_narrow_scrolls_to_the_selection() {
        let view = demo_view();
        insta::assert_snapshot!(draw(&view, 46, 8, Some(11)).backend());
    }
}
