//! Budget pane: per tenant the budget step the room enforces (`○ ok`,
//! `● 80%`, `▲ limited`, `■ blocked`, `✓ approved`: a mark and a word, so it
//! reads without colour), the burn rate now, month-to-date against the
//! monthly budget on a gauge marked at the notify/limit/block thresholds
//! (80/100/120%), the share used, the projected month-end spend (flagged when
//! over budget), GPUs held vs quota and, where jobs report output, the cost
//! per 1k requests and per 1M tokens; under an approved tenant, who approved
//! how much and why; then a total line and spend by billing mode.
//!
//! Rows, most wanted first: the header, the tenants, the total, the approval
//! notes, the spend by mode. Columns drop in the order unit costs, GPUs,
//! gauge, budget, burn and projection.
//!
//! Draws from `View::budgets` and `View::totals` only; the sums and shares
//! here are presentation arithmetic. Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::shared::{Col, PaneProps, fit_columns, frame, header_line, table_line_parts, widest};
use crate::cost::budget::BudgetLevel;
use crate::domain::cluster::BillingMode;
use crate::domain::units::{Micros, MicrosPerHour};

use crate::room::View;
use crate::room::view::BudgetRow;
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

/// The thresholds when no tenant has a budget to derive them from.
const DEFAULT_MARKS: [f64; 3] = [0.8, 1.0, 1.2];

/// Column indices (the unit-cost columns last, present only when used).
const TENANT: usize = 0;
const GAUGE: usize = 5;
const UNIT_COLS: usize = 2;

/// The gauge's scale: the notify/limit/block thresholds as shares of the
/// budget (the same for every tenant: one policy), and its right end.
#[derive(Copy, Clone, Debug)]
struct Scale {
    marks: [f64; 3],
    max: f64,
}

impl Scale {
    fn of(rows: &[BudgetRow]) -> Scale {
        let marks = rows
            .iter()
            .find(|r| r.budget.0 > 0 && r.block_at.0 > 0)
            .map(|r| [r.notify_at, r.limit_at, r.block_at].map(|m| m.0 as f64 / r.budget.0 as f64))
            .unwrap_or(DEFAULT_MARKS);
        Scale { marks, max: (marks[2] + 0.05).max(1.25) }
    }

    /// ok below notify, warn below the limit, alarm from there.
    fn grade(&self, ratio: f64, t: &Theme) -> Style {
        t.grade(ratio, self.marks[0], self.marks[1])
    }
}

pub fn render(view: &View, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    render_selected(view, None, props, area, buf);
}

/// The pane with tenant row `selected` (an index into `View::budgets`)
/// highlighted: the one `a` approves an overrun for.
pub fn render_selected(view: &View, selected: Option<usize>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let over = view.budgets.iter().filter(|b| b.budget.0 > 0 && b.month_to_date > b.budget).count();
    let blocked = view.budgets.iter().filter(|b| b.level == BudgetLevel::Blocked).count();
    let mut flags = Vec::new();
    if blocked > 0 {
        flags.push(Span::styled(format!(" ■ {blocked} blocked "), t.alarm_banner));
    }
    if over > 0 {
        flags.push(Span::styled(format!(" ▲ {over} over budget "), t.alarm));
    }
    // The fleet's month-end outlook rides in the title, where it always fits.
    if let Some(rest) = view.totals.forecast_rest_of_month {
        flags.push(Span::styled(" month end +", t.dim));
        flags.push(Span::styled(format!("{} forecast ", crate::tui::fmt::money_whole(rest)), t.figure));
    }
    let extra = (!flags.is_empty()).then(|| Line::from(flags));
    let inner = frame(PaneId::Budget, extra, props, area, buf);
    if inner.is_empty() {
        return;
    }
    let b = &view.budgets;
    if b.is_empty() {
        put(buf, inner, 0, Line::from(Span::styled("no tenants", t.dim)));
        put(buf, inner, 1, modes_line(view, t));
        return;
    }
    let scale = Scale::of(b);
    // Column widths cover the total line too.
    let sum = total_row(b);
    let money_w = |f: &dyn Fn(&BudgetRow) -> String| widest(b.iter().chain([&sum]).map(f).collect::<Vec<_>>().iter().map(String::as_str), 4, 14);
    let unit_w = |f: &dyn Fn(&BudgetRow) -> Option<Micros>| {
        widest(b.iter().map(|r| f(r).map(unit_money).unwrap_or_default()).collect::<Vec<_>>().iter().map(String::as_str), 4, 12)
    };
    let mut cols = vec![
        Col::left("TENANT", widest(b.iter().map(|r| r.tenant.as_str()), 6, 14), 0),
        Col::left("LEVEL", widest(b.iter().map(|r| level_cell(r).0).collect::<Vec<_>>().iter().map(String::as_str), 5, 12), 0),
        Col::right("CHARGED", money_w(&|r| r.burn.to_string()).max(7), 1),
        Col::right("MTD", money_w(&|r| r.month_to_date.to_string()), 0),
        Col::right("BUDGET", money_w(&|r| r.budget.to_string()), 2),
        Col::flex("", 10, 40, 3),
        Col::right("USED", 5, 0),
        Col::right("PROJECTED", money_w(&|r| r.projected.to_string()) + 2, 1),
        Col::right("GPUS", 6, 4),
        Col::right("$/1k req", unit_w(&|r| r.per_1k_requests), 5),
        Col::right("$/1M tok", unit_w(&|r| r.per_1m_tokens), 5),
    ];
    if !b.iter().any(|r| r.per_1k_requests.is_some() || r.per_1m_tokens.is_some()) {
        cols.truncate(cols.len() - UNIT_COLS);
    }
    let widths = fit_columns(&cols, inner.width as usize);
    let h = inner.height as usize;
    let n = b.len();
    let (header, total) = (h > n, h >= n + 2);
    let tenant_rows = h.saturating_sub(usize::from(header) + usize::from(total)).max(1);
    let shown = if n > tenant_rows { tenant_rows - 1 } else { n };
    // Rows left after the header, the tenants (and their "+k more") and the
    // total go to approval notes first, then to the spend by mode.
    let used_rows = usize::from(header) + shown + usize::from(shown < n) + usize::from(total);
    let mut spare = h.saturating_sub(used_rows);
    let mut notes = 0;
    let mut row = 0u16;
    if header {
        let line = match widths[GAUGE] {
            Some(gw) => header_with_scale(&cols, &widths, gw, &scale, t),
            None => header_line(&cols, &widths, t.heading),
        };
        put(buf, inner, row, line);
        row += 1;
    }
    let indent = widths[TENANT].map_or(0, |w| w + 1);
    // Keep the selected tenant on screen when not all fit.
    let skip = selected.map_or(0, |i| (i + 1).saturating_sub(shown));
    for (i, r) in b.iter().enumerate().skip(skip).take(shown) {
        let mut line = tenant_line(r, &cols, &widths, &scale, t);
        if selected == Some(i) {
            // Reverse video in every theme (mono included): visible without colour.
            line = line.patch_style(if props.focused { t.selected } else { t.selected_unfocused });
        }
        put(buf, inner, row, line);
        row += 1;
        if let Some(a) = r.approval.as_ref().filter(|_| spare > 0) {
            let w = (inner.width as usize).saturating_sub(indent);
            let note = Line::from(approval_note(a, w, t));
            put(buf, Rect { x: inner.x + indent as u16, width: w as u16, ..inner }, row, note);
            row += 1;
            spare -= 1;
            notes += 1;
        }
    }
    if shown < n {
        put(buf, inner, row, Line::from(Span::styled(format!("+{} more tenants", n - shown), t.dim)));
        row += 1;
    }
    if total {
        put(buf, inner, row, total_line(&sum, &cols, &widths, t));
        row += 1;
    }
    if h > used_rows + notes {
        put(buf, inner, row, modes_line_within(view, t, inner.width as usize));
    }
}

fn used(r: &BudgetRow) -> Option<f64> {
    (r.budget.0 > 0).then(|| r.month_to_date.0 as f64 / r.budget.0 as f64)
}

/// The step as a mark and a word, and its style. An approval that lets the
/// tenant past its limit reads `✓ approved`; one standing but not yet needed
/// adds `✓` to the step.
fn level_cell(r: &BudgetRow) -> (String, Tone) {
    let in_force = r.approval.as_ref().is_some_and(|a| a.in_force);
    if in_force && r.limit_at.0 > 0 && r.month_to_date >= r.limit_at {
        return ("✓ approved".into(), Tone::Warn);
    }
    let tick = if in_force { " ✓" } else { "" };
    let (text, severity) = match r.level {
        BudgetLevel::Ok => ("○ ok".to_string(), Tone::Ok),
        BudgetLevel::Notify => {
            let pct = if r.budget.0 > 0 { (r.notify_at.0 as f64 * 100.0 / r.budget.0 as f64).round() } else { 80.0 };
            (format!("● {pct:.0}%"), Tone::Warn)
        }
        BudgetLevel::Limited => ("▲ limited".to_string(), Tone::Alarm),
        BudgetLevel::Blocked => ("■ blocked".to_string(), Tone::Blocked),
    };
    (format!("{text}{tick}"), severity)
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Tone {
    Ok,
    Warn,
    Alarm,
    /// Stands out: the alarm banner's style.
    Blocked,
}

impl Tone {
    fn style(self, t: &Theme) -> Style {
        match self {
            Tone::Ok => t.ok,
            Tone::Warn => t.warn,
            Tone::Alarm => t.alarm,
            Tone::Blocked => t.alarm_banner,
        }
    }
}

/// `✓ approved by ana: +$50.00 — paper deadline` in `w` cells: the reason
/// is cut first, then the rest.
fn approval_note<'a>(a: &crate::room::view::ApprovalView, w: usize, t: &Theme) -> Vec<Span<'a>> {
    let how_far = match (a.amount, a.until) {
        (Some(m), Some(u)) => format!("+{m} until {}", u.format("%m-%d %H:%M")),
        (Some(m), None) => format!("+{m}"),
        (None, Some(u)) => format!("until {}", u.format("%m-%d %H:%M")),
        (None, None) => String::new(),
    };
    let (mark, head, style) =
        if a.in_force { ("✓ ", format!("approved by {}: ", a.user), t.warn) } else { ("✗ ", format!("approval by {} ended: ", a.user), t.dim) };
    let fixed = format!("{mark}{head}{how_far}");
    if fmt::width(&fixed) >= w {
        return vec![Span::styled(cut(&fixed, w), style)];
    }
    let mut spans = vec![Span::styled(mark, style), Span::styled(head, t.dim), Span::styled(how_far, if a.in_force { t.figure } else { t.dim })];
    let room = w - fmt::width(&fixed);
    if !a.reason.is_empty() && room > 4 {
        spans.push(Span::styled(cut(&format!(" — {}", a.reason), room), t.text));
    }
    spans
}

/// `fmt::trunc`, without a space left before the `…`.
fn cut(s: &str, w: usize) -> String {
    if fmt::width(s) <= w {
        return s.to_string();
    }
    let cut = fmt::trunc(s, w);
    let kept = cut.strip_suffix('…').unwrap_or(&cut);
    format!("{}…", kept.trim_end())
}

/// Unit costs are often cents or less: three decimals under a dollar.
fn unit_money(m: Micros) -> String {
    let mills = (m.0 + 500) / 1_000;
    if m.0 >= 0 && mills < 1_000 { format!("$0.{mills:03}") } else { m.to_string() }
}

/// The column header, with the thresholds (`80 100 120`) written over the
/// gauge's marks.
fn header_with_scale<'a>(cols: &[Col], widths: &[Option<usize>], gw: usize, scale: &Scale, t: &Theme) -> Line<'a> {
    let mut chars: Vec<char> = vec![' '; gw];
    let m = scale.marks;
    // The limit first: when the marks are close, it is the one to keep.
    for mark in [m[1], m[0], m[2]] {
        let label: Vec<char> = format!("{:.0}", mark * 100.0).chars().collect();
        let at = mark_col(mark, scale, gw);
        let start = (at + 1).saturating_sub(label.len().div_ceil(2)).min(gw.saturating_sub(label.len()));
        let (lo, hi) = (start.saturating_sub(1), (start + label.len() + 1).min(gw));
        if start + label.len() <= gw && chars[lo..hi].iter().all(|c| *c == ' ') {
            chars[start..start + label.len()].copy_from_slice(&label);
        }
    }
    let mut cells: Vec<Vec<Span>> = cols.iter().map(|c| vec![Span::styled(c.head, t.heading)]).collect();
    cells[GAUGE] = vec![Span::styled(chars.into_iter().collect::<String>(), t.dim), Span::raw("")];
    table_line_parts(cols, widths, cells)
}

fn mark_col(mark: f64, scale: &Scale, w: usize) -> usize {
    ((mark / scale.max * w as f64).round() as usize).min(w.saturating_sub(1))
}

/// `███████▌  │   │ │ `: month-to-date filled, graded ok/warn/alarm, the
/// projection to month end `░`, and the threshold marks as `│` (drawn
/// reversed where the bar covers them).
fn gauge<'a>(r: &BudgetRow, w: usize, scale: &Scale, t: &Theme) -> Vec<Span<'a>> {
    let Some(ratio) = used(r) else { return vec![Span::styled(fmt::left("no budget", w), t.dim), Span::raw("")] };
    let projected = r.projected.0 as f64 / r.budget.0 as f64;
    let fill = scale.grade(ratio, t);
    let filled = fmt::bar(ratio / scale.max, w);
    let proj_cells = ((projected / scale.max).min(1.0) * w as f64).round() as usize;
    let marks: Vec<usize> = scale.marks.iter().map(|m| mark_col(*m, scale, w)).collect();
    let mut spans = Vec::new();
    for (i, c) in filled.chars().enumerate() {
        let (glyph, style) = match (c, marks.contains(&i)) {
            ('█', true) => ('│', fill.add_modifier(Modifier::REVERSED)),
            (' ', true) => ('│', t.dim),
            (' ', false) if i < proj_cells => ('░', if projected > 1.0 { t.warn } else { t.dim }),
            (c, _) => (c, fill),
        };
        spans.push(Span::styled(glyph.to_string(), style));
    }
    spans
}

fn tenant_line<'a>(r: &BudgetRow, cols: &[Col], widths: &[Option<usize>], scale: &Scale, t: &Theme) -> Line<'a> {
    let ratio = used(r);
    let proj_over = r.budget.0 > 0 && r.projected > r.budget;
    let over_quota = r.gpus_held > r.quota_gpus;
    let gw = widths[GAUGE].unwrap_or(0);
    let (level, severity) = level_cell(r);
    let name = if severity == Tone::Blocked { t.alarm } else { t.text };
    let unit = |m: Option<Micros>| vec![Span::styled(m.map(unit_money).unwrap_or_else(|| "—".into()), if m.is_some() { t.text } else { t.dim })];
    let one = |s: String, style: Style| vec![Span::styled(s, style)];
    let cells = vec![
        one(r.tenant.clone(), name),
        // Two parts: padded, not cut, and the style covers the word only.
        vec![Span::styled(level, severity.style(t)), Span::raw("")],
        one(r.burn.to_string(), t.text),
        one(r.month_to_date.to_string(), t.figure),
        one(r.budget.to_string(), t.dim),
        gauge(r, gw, scale, t),
        one(ratio.map(fmt::pct).unwrap_or_else(|| "—".into()), ratio.map(|x| scale.grade(x, t)).unwrap_or(t.dim)),
        one(format!("{}{}", r.projected, if proj_over { " ▲" } else { "  " }), if proj_over { t.alarm } else { t.text }),
        one(format!("{}{}/{}", if over_quota { "▲" } else { "" }, r.gpus_held, r.quota_gpus), if over_quota { t.warn } else { t.text }),
        unit(r.per_1k_requests),
        unit(r.per_1m_tokens),
    ];
    table_line_parts(cols, widths, cells)
}

/// The sum over tenants, as a row (quota, GPUs and thresholds summed too).
fn total_row(b: &[BudgetRow]) -> BudgetRow {
    BudgetRow {
        tenant: "total".into(),
        burn: MicrosPerHour(b.iter().map(|r| r.burn.0).sum()),
        month_to_date: b.iter().map(|r| r.month_to_date).sum(),
        budget: b.iter().map(|r| r.budget).sum(),
        projected: b.iter().map(|r| r.projected).sum(),
        gpus_held: b.iter().map(|r| r.gpus_held).sum(),
        quota_gpus: b.iter().map(|r| r.quota_gpus).sum(),
        level: BudgetLevel::Ok,
        notify_at: b.iter().map(|r| r.notify_at).sum(),
        limit_at: b.iter().map(|r| r.limit_at).sum(),
        block_at: b.iter().map(|r| r.block_at).sum(),
        approval: None,
        at_limit: Default::default(),
        per_1k_requests: None,
        per_1m_tokens: None,
        all_time: b.iter().map(|r| r.all_time).sum(),
    }
}

fn total_line<'a>(sum: &BudgetRow, cols: &[Col], widths: &[Option<usize>], t: &Theme) -> Line<'a> {
    let ratio = used(sum);
    let over = sum.budget.0 > 0 && sum.projected > sum.budget;
    let s = t.heading;
    let one = |x: String, style: Style| vec![Span::styled(x, style)];
    let blank = || vec![Span::raw(""), Span::raw("")];
    let cells = vec![
        one(sum.tenant.clone(), s),
        blank(),
        one(sum.burn.to_string(), s),
        one(sum.month_to_date.to_string(), s),
        one(sum.budget.to_string(), t.dim),
        blank(),
        one(ratio.map(fmt::pct).unwrap_or_else(|| "—".into()), s),
        one(format!("{}{}", sum.projected, if over { " ▲" } else { "  " }), if over { t.alarm } else { s }),
        one(format!("{}/{}", sum.gpus_held, sum.quota_gpus), s),
        blank(),
        blank(),
    ];
    table_line_parts(cols, widths, cells)
}

/// Spend so far by billing mode, and how much of it paid for idle GPUs.
fn modes_line<'a>(view: &View, t: &Theme) -> Line<'a> {
    let totals = &view.totals;
    let mut spans = vec![Span::styled("spent ", t.dim)];
    for mode in BillingMode::ALL {
        spans.push(Span::styled(format!("{} ", mode.short()), t.billing(mode)));
        spans.push(Span::styled(format!("{}  ", totals.spend_by_mode[mode.index()]), t.text));
    }
    spans.push(Span::styled("= ", t.dim));
    spans.push(Span::styled(totals.spend.to_string(), t.figure));
    let idle: Micros = totals.idle_by_mode.iter().copied().sum();
    spans.push(Span::styled("  idle ", t.dim));
    spans.push(Span::styled(idle.to_string(), if idle.0 > 0 { t.warn } else { t.text }));
    spans.push(Span::styled(format!(" ({:.0}%)", 100.0 * totals.idle_share()), t.dim));
    Line::from(spans)
}

/// The spend line, with storage & checkpoint I/O appended when it fits.
fn modes_line_within<'a>(view: &View, t: &Theme, width: usize) -> Line<'a> {
    let mut line = modes_line(view, t);
    let services = view.totals.services;
    if services.0 > 0 {
        let extra = [Span::styled("  storage & I/O ", t.dim), Span::styled(services.to_string(), t.text)];
        if line.width() + extra.iter().map(|s| s.width()).sum::<usize>() <= width {
            line.spans.extend(extra);
        }
    }
    // With elastic capacity: what the bought nodes burn now against the fixed ones.
    if let Some(cap) = &view.capacity {
        let extra = [
            Span::styled("  burn elastic ", t.dim),
            Span::styled(cap.elastic_burn.to_string(), t.figure),
            Span::styled(" fixed ", t.dim),
            Span::styled(cap.fixed_burn.to_string(), t.text),
        ];
        if line.width() + extra.iter().map(|s| s.width()).sum::<usize>() <= width {
            line.spans.extend(extra);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn budget_pane_wide() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(110, 8, false, |p, a, b| render(&view, p, a, b)).backend());
    }

    #[test]
    fn levels_read_without_colour_and_approvals_are_cut_at_the_reason() {
        let view = demo_view();
        let nlp = view.budgets.iter().find(|b| b.tenant == "nlp").unwrap();
        assert_eq!(level_cell(nlp).0, "● 80% ✓", "a standing approval not needed yet");
        let mut past = nlp.clone();
        past.month_to_date = past.limit_at;
        assert_eq!(level_cell(&past).0, "✓ approved", "the approval is what lets it run");
        let approval = nlp.approval.clone().unwrap();
        let text = |w: usize| approval_note(&approval, w, &Theme::dark()).iter().map(|s| s.content.to_string()).collect::<String>();
        assert_eq!(text(60), "✓ approved by ana: +$50.00 — paper deadline");
        assert_eq!(text(36), "✓ approved by ana: +$50.00 — paper…");
        assert_eq!(text(20), "✓ approved by ana:…");
        let ended = crate::room::view::ApprovalView { in_force: false, ..approval };
        assert!(text_of(&ended).starts_with("✗ approval by ana ended: +$50.00"));
        assert_eq!(unit_money(Micros(66_987)), "$0.067");
        assert_eq!(unit_money(Micros(999_600)), "$1.00");
    }

    fn text_of(a: &crate::room::view::ApprovalView) -> String {
        approval_note(a, 80, &Theme::dark()).iter().map(|s| s.content.to_string()).collect()
    }

    #[test]
    fn budget_pane_narrow() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(80, 6, true, |p, a, b| render(&view, p, a, b)).backend());
    }
}
