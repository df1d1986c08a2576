//! Drawing the modal states (`modes::Mode`): the command bar and the filter
//! in the footer row with the cursor shown, the confirmation dialog, the
//! approval form and the pool picker as centred popups, and the status line
//! with the engine's answer to the last action.
//!
//! Pure drawing from the `App` and the `View`; owns no state. A popup never
//! draws outside the area it is given, whatever its size.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Margin, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Widget};

use super::app::App;
use super::command_bar::pool_token;
use super::fmt::{self, put};
use super::input::LineInput;
use super::modes::{ApproveForm, Mode};
use super::status::{Status, Tone};
use super::theme::Theme;
use crate::domain::job::PoolTarget;
use crate::room::View;

/// Whether the footer row belongs to the mode (command bar, filter) or a status.
pub fn owns_footer(app: &App) -> bool {
    matches!(app.mode, Mode::Command { .. } | Mode::Filter { .. }) || app.status.is_some()
}

/// `text` with the cursor drawn as a reversed cell (so it shows in mono too).
fn input_spans<'a>(input: &LineInput, style: Style, w: usize) -> Vec<Span<'a>> {
    let text: Vec<char> = input.text().chars().collect();
    let cursor = input.cursor().min(text.len());
    // Scroll so that the cursor stays visible in `w` cells.
    let start = (cursor + 1).saturating_sub(w.max(1));
    let before: String = text[start..cursor].iter().collect();
    let at: String = text.get(cursor).map_or(" ".to_string(), |c| c.to_string());
    let after: String = text.iter().skip(cursor + 1).collect();
    vec![Span::styled(before, style), Span::styled(at, style.add_modifier(Modifier::REVERSED)), Span::styled(after, style)]
}

/// The footer row in command, filter or status state.
pub fn footer(app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, t.header);
    let w = area.width as usize;
    let line = match &app.mode {
        Mode::Command { input, options, error } => {
            let mut spans = vec![Span::styled(":", t.key)];
            spans.extend(input_spans(input, t.text, w.saturating_sub(2)));
            if let Some(e) = error {
                spans.push(Span::styled(format!("  ▲ {e}"), t.alarm));
            } else if !options.is_empty() {
                spans.push(Span::styled(format!("  {}", options.join(" ")), t.dim));
            } else {
                spans.push(Span::styled("  Tab completes · Enter runs · Esc closes", t.dim));
            }
            Line::from(spans)
        }
        Mode::Filter { input, .. } => {
            let mut spans = vec![Span::styled("/", t.key)];
            spans.extend(input_spans(input, t.text, w.saturating_sub(2)));
            spans.push(Span::styled("  Enter keeps · Esc restores", t.dim));
            Line::from(spans)
        }
        _ => match &app.status {
            Some(s) => status_line(s, t),
            None => return,
        },
    };
    put(buf, area, 0, line);
}

fn status_line<'a>(s: &Status, t: &Theme) -> Line<'a> {
    let (mark, style) = match s.tone {
        Tone::Done => (" ✓ ", t.ok),
        Tone::Refused => (" ▲ refused: ", t.alarm),
        Tone::Hint => (" · ", t.dim),
    };
    Line::from(vec![Span::styled(mark, style), Span::styled(s.text.clone(), style)])
}

/// A centred, bordered popup for `lines`, `width` wide at most (the help
/// overlay's too).
pub(super) fn popup<'a>(title: &str, lines: Vec<Line<'a>>, bottom: Line<'a>, width: u16, t: &Theme, area: Rect, buf: &mut Buffer) {
    let want_w = (lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 4).max(bottom.width() as u16 + 4).min(width);
    let want_h = lines.len() as u16 + 2;
    let rect = area.centered(Constraint::Length(want_w.min(area.width)), Constraint::Length(want_h.min(area.height)));
    Clear.render(rect, buf);
    let block = Block::bordered()
        .border_type(t.border_type_focused)
        .border_style(t.border_focused)
        .title(Line::from(Span::styled(format!(" {title} "), t.title_focused)))
        .title_bottom(bottom.right_aligned());
    let inner = block.inner(rect).inner(Margin { horizontal: 1, vertical: 0 });
    block.render(rect, buf);
    for (i, line) in lines.into_iter().enumerate() {
        put(buf, inner, i as u16, line);
    }
}

fn wrapped<'a>(text: &str, style: Style, w: usize, out: &mut Vec<Line<'a>>) {
    for part in fmt::wrap(text, w) {
        out.push(Line::from(Span::styled(part, style)));
    }
}

/// Draws the popup of the current mode, if it has one.
pub fn render(app: &App, view: &View, t: &Theme, area: Rect, buf: &mut Buffer) {
    let max_w = area.width.saturating_sub(2).clamp(1, 90);
    let text_w = max_w.saturating_sub(4) as usize;
    match &app.mode {
        Mode::Confirm(c) => {
            let mut lines = Vec::new();
            wrapped(&c.title, t.figure, text_w, &mut lines);
            lines.push(Line::from(""));
            for l in &c.lines {
                wrapped(l, t.text, text_w, &mut lines);
            }
            if let Some(w) = &c.warning {
                lines.push(Line::from(""));
                wrapped(&format!("▲ {w}"), t.warn, text_w, &mut lines);
            }
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled(" y ", t.selected),
                Span::styled(format!(" {}    ", c.yes), t.text),
                Span::styled(" n ", t.selected_unfocused.add_modifier(Modifier::REVERSED)),
                Span::styled(" / Esc  do nothing", t.text),
            ]));
            popup("Confirm", lines, Line::from(Span::styled(" only y sends ", t.dim)), max_w, t, area, buf);
        }
        Mode::Approve(form) => approve_form(form, view, t, max_w, area, buf),
        Mode::PickPool { job, options, cursor } => pool_picker(*job, options, *cursor, view, t, max_w, area, buf),
        Mode::ConfirmQuit => {
            let mut lines = Vec::new();
            wrapped("Quit and stop the engine?", t.figure, text_w, &mut lines);
            lines.push(Line::from(""));
            wrapped(
                "This console runs the engine: while it is stopped nothing is scheduled, billed or held to its budget, and attached consoles and walls go STALE.",
                t.text,
                text_w,
                &mut lines,
            );
            wrapped("The log keeps every event; `gpuroom --db LOG` resumes from it.", t.text, text_w, &mut lines);
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled(" y ", t.selected),
                Span::styled(" or q  stop and quit    ", t.text),
                Span::styled(" n ", t.selected_unfocused.add_modifier(Modifier::REVERSED)),
                Span::styled(" / Esc  keep running", t.text),
            ]));
            popup("Quit", lines, Line::from(Span::styled(" the engine stops with it ", t.dim)), max_w, t, area, buf);
        }
        Mode::Normal | Mode::Command { .. } | Mode::Filter { .. } => {}
    }
}

fn approve_form(form: &ApproveForm, view: &View, t: &Theme, max_w: u16, area: Rect, buf: &mut Buffer) {
    let text_w = max_w.saturating_sub(4) as usize;
    let mut lines = Vec::new();
    wrapped(&format!("Approve a budget overrun for {}", form.tenant), t.figure, text_w, &mut lines);
    if let Some(b) = view.budgets.iter().find(|b| b.tenant == form.tenant) {
        wrapped(&format!("Spent {} of {} this month; hard limit {}.", b.month_to_date, b.budget, b.block_at), t.dim, text_w, &mut lines);
    }
    lines.push(Line::from(""));
    for (i, (label, field)) in ApproveForm::LABELS.iter().zip(&form.fields).enumerate() {
        let focused = i == form.focus;
        lines.push(Line::from(Span::styled(format!("{} {label}", if focused { "▶" } else { " " }), if focused { t.key } else { t.dim })));
        let mut spans = vec![Span::raw("  ")];
        if focused {
            spans.extend(input_spans(field, t.text, text_w.saturating_sub(2)));
        } else {
            spans.push(Span::styled(if field.is_empty() { "—".to_string() } else { field.text() }, t.text));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::from(""));
    match &form.error {
        Some(e) => wrapped(&format!("▲ {e}"), t.alarm, text_w, &mut lines),
        None => wrapped("An amount, an expiry, or both; the reason is required and goes to the audit log.", t.dim, text_w, &mut lines),
    }
    popup("Approve overrun", lines, Line::from(Span::styled(" Tab next field · Enter review · Esc cancel ", t.dim)), max_w, t, area, buf);
}

#[allow(clippy::too_many_arguments)]
fn pool_picker(job: crate::domain::ids::JobId, options: &[PoolTarget], cursor: usize, view: &View, t: &Theme, max_w: u16, area: Rect, buf: &mut Buffer) {
    let text_w = max_w.saturating_sub(4) as usize;
    let mut lines = Vec::new();
    let row = view.jobs.iter().find(|j| j.id == job);
    let title = match row {
        Some(j) => format!("Migrate {} {} ({} GPU(s), now on {}) to:", j.id, j.name, j.gpus, j.node.as_deref().unwrap_or("no node")),
        None => format!("Migrate {job} to:"),
    };
    wrapped(&title, t.figure, text_w, &mut lines);
    let needs = row.map_or(1, |j| u32::from(j.gpus));
    if options.is_empty() {
        lines.push(Line::from(Span::styled("no other pool in the fleet", t.dim)));
    }
    let best = super::modes::best_pool(options, needs, view);
    // Keep the cursor in view on a short screen.
    let room = (area.height as usize).saturating_sub(6).max(1);
    let first = cursor.saturating_sub(room.saturating_sub(1));
    for (i, target) in options.iter().enumerate().skip(first).take(room) {
        let pool = view.pools.iter().find(|p| &p.target == target);
        let fits = pool.is_some_and(|p| p.fits(needs));
        let detail = pool.map_or(String::new(), |p| {
            format!(
                "{}/{} up, {} free (≤{} on a node){}",
                p.nodes_up,
                p.nodes_total,
                p.gpus_free,
                p.gpus_free_one_node,
                p.price.map(|x| format!(", {x}")).unwrap_or_default()
            )
        });
        let mark = if fits { "  " } else { "▲ " };
        let best = if best == Some(i) { " · cheapest that fits now" } else { "" };
        let text = fmt::trunc(&format!("{} {mark}{detail}{best}", fmt::left(&pool_token(target), 30)), text_w.saturating_sub(2));
        let style = if i == cursor {
            t.selected
        } else if fits {
            t.text
        } else {
            t.dim
        };
        lines.push(Line::from(vec![Span::styled(if i == cursor { "▶ " } else { "  " }, t.key), Span::styled(text, style)]));
    }
    lines.push(Line::from(""));
    wrapped("▲: not enough free GPUs on one node now; the job would wait there.", t.dim, text_w, &mut lines);
    popup("Migrate", lines, Line::from(Span::styled(" ↑↓ choose · Enter review · Esc cancel ", t.dim)), max_w, t, area, buf);
}
