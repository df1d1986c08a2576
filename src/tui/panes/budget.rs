//! Budget pane: per tenant the burn rate now, month-to-date against the
//! monthly budget on a gauge marked at 80/100/120%, the share used, the
//! projected month-end spend (flagged when over budget) and GPUs held vs
//! quota; then a total line and spend by billing mode.
//!
//! Draws from `View::budgets` and `View::totals` only; the sums and shares
//! here are presentation arithmetic. Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{Col, PaneProps, fit_columns, frame, header_line, table_line_parts, widest};
use crate::core::cluster::BillingMode;
use crate::core::units::{Micros, MicrosPerHour};

use crate::core::view::BudgetRow;
use crate::core::View;
use crate::tui::app::PaneId;
use crate::tui::fmt::{self, put};
use crate::tui::theme::Theme;

/// The gauge spans 0..GAUGE_MAX of the budget.
const GAUGE_MAX: f64 = 1.25;
const MARKS: [f64; 3] = [0.8, 1.0, 1.2];

pub fn render(view: &View, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let over = view.budgets.iter().filter(|b| b.budget.0 > 0 && b.month_to_date > b.budget).count();
    let extra = (over > 0).then(|| Line::from(Span::styled(format!(" ▲ {over} over budget "), t.alarm)));
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
    // Column widths cover the total line too.
    let sum = total_row(b);
    let money_w = |f: &dyn Fn(&BudgetRow) -> String| {
        widest(b.iter().chain([&sum]).map(f).collect::<Vec<_>>().iter().map(String::as_str), 4, 14)
    };
    let cols = [
        Col::left("TENANT", widest(b.iter().map(|r| r.tenant.as_str()), 6, 14), 0),
        Col::right("BURN", money_w(&|r| r.burn.to_string()), 1),
        Col::right("MTD", money_w(&|r| r.month_to_date.to_string()), 0),
        Col::right("BUDGET", money_w(&|r| r.budget.to_string()), 2),
        Col::flex("", 10, 40, 3),
        Col::right("USED", 5, 0),
        Col::right("PROJECTED", money_w(&|r| r.projected.to_string()) + 2, 1),
        Col::right("GPUS", 6, 4),
    ];
    let widths = fit_columns(&cols, inner.width as usize);
    let h = inner.height as usize;
    let n = b.len();
    let (header, total, modes) = (h > n, h >= n + 2, h >= n + 3);
    let mut row = 0u16;
    if header {
        let mut line = header_line(&cols, &widths, t.heading);
        if let Some(gw) = widths[4] {
            line = header_with_scale(&cols, &widths, gw, t);
        }
        put(buf, inner, row, line);
        row += 1;
    }
    let tenant_rows = h.saturating_sub(usize::from(header) + usize::from(total) + usize::from(modes)).max(1);
    let shown = if n > tenant_rows { tenant_rows - 1 } else { n };
    for r in b.iter().take(shown) {
        put(buf, inner, row, tenant_line(r, &cols, &widths, t));
        row += 1;
    }
    if shown < n {
        put(buf, inner, row, Line::from(Span::styled(format!("+{} more tenants", n - shown), t.dim)));
        row += 1;
    }
    if total {
        put(buf, inner, row, total_line(&sum, &cols, &widths, t));
        row += 1;
    }
    if modes {
        put(buf, inner, row, modes_line(view, t));
    }
}

fn used(r: &BudgetRow) -> Option<f64> {
    (r.budget.0 > 0).then(|| r.month_to_date.0 as f64 / r.budget.0 as f64)
}

fn grade(ratio: f64, t: &Theme) -> Style {
    t.grade(ratio, 0.8, 1.0)
}

/// The column header, with `80 100 120` written over the gauge's marks.
fn header_with_scale<'a>(cols: &[Col], widths: &[Option<usize>], gw: usize, t: &Theme) -> Line<'a> {
    let mut scale: Vec<char> = vec![' '; gw];
    // 100 first: when the marks are close, it is the one to keep.
    for m in [MARKS[1], MARKS[0], MARKS[2]] {
        let label: Vec<char> = format!("{:.0}", m * 100.0).chars().collect();
        let at = mark_col(m, gw);
        let start = (at + 1).saturating_sub(label.len().div_ceil(2)).min(gw.saturating_sub(label.len()));
        let (lo, hi) = (start.saturating_sub(1), (start + label.len() + 1).min(gw));
        if start + label.len() <= gw && scale[lo..hi].iter().all(|c| *c == ' ') {
            scale[start..start + label.len()].copy_from_slice(&label);
        }
    }
    let mut cells: Vec<Vec<Span>> = cols.iter().map(|c| vec![Span::styled(c.head, t.heading)]).collect();
    cells[4] = vec![Span::styled(scale.into_iter().collect::<String>(), t.dim), Span::raw("")];
    table_line_parts(cols, widths, cells)
}

fn mark_col(mark: f64, w: usize) -> usize {
    ((mark / GAUGE_MAX * w as f64).round() as usize).min(w.saturating_sub(1))
}

/// `███████▌  │   │ │ `: month-to-date filled, graded ok/warn/alarm, the
/// projection to month end `░`, and the 80/100/120% marks as `│` (drawn
/// reversed where the bar covers them).
fn gauge<'a>(r: &BudgetRow, w: usize, t: &Theme) -> Vec<Span<'a>> {
    let Some(ratio) = used(r) else { return vec![Span::styled(fmt::left("no budget", w), t.dim), Span::raw("")] };
    let projected = r.projected.0 as f64 / r.budget.0 as f64;
    let fill = grade(ratio, t);
    let filled = fmt::bar(ratio / GAUGE_MAX, w);
    let proj_cells = ((projected / GAUGE_MAX).min(1.0) * w as f64).round() as usize;
    let marks: Vec<usize> = MARKS.iter().map(|m| mark_col(*m, w)).collect();
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

fn tenant_line<'a>(r: &BudgetRow, cols: &[Col], widths: &[Option<usize>], t: &Theme) -> Line<'a> {
    let ratio = used(r);
    let proj_over = r.budget.0 > 0 && r.projected > r.budget;
    let over_quota = r.gpus_held > r.quota_gpus;
    let gw = widths[4].unwrap_or(0);
    let one = |s: String, style: Style| vec![Span::styled(s, style)];
    let cells = vec![
        one(r.tenant.clone(), t.text),
        one(r.burn.to_string(), t.text),
        one(r.month_to_date.to_string(), t.figure),
        one(r.budget.to_string(), t.dim),
        gauge(r, gw, t),
        one(ratio.map(fmt::pct).unwrap_or_else(|| "—".into()), ratio.map(|x| grade(x, t)).unwrap_or(t.dim)),
        one(format!("{}{}", r.projected, if proj_over { " ▲" } else { "  " }), if proj_over { t.alarm } else { t.text }),
        one(format!("{}{}/{}", if over_quota { "▲" } else { "" }, r.gpus_held, r.quota_gpus), if over_quota { t.warn } else { t.text }),
    ];
    table_line_parts(cols, widths, cells)
}

/// The sum over tenants, as a row (quota and GPUs summed too).
fn total_row(b: &[BudgetRow]) -> BudgetRow {
    BudgetRow {
        tenant: "total".into(),
        burn: MicrosPerHour(b.iter().map(|r| r.burn.0).sum()),
        month_to_date: b.iter().map(|r| r.month_to_date).sum(),
        budget: b.iter().map(|r| r.budget).sum(),
        projected: b.iter().map(|r| r.projected).sum(),
        gpus_held: b.iter().map(|r| r.gpus_held).sum(),
        quota_gpus: b.iter().map(|r| r.quota_gpus).sum(),
    }
}

fn total_line<'a>(sum: &BudgetRow, cols: &[Col], widths: &[Option<usize>], t: &Theme) -> Line<'a> {
    let ratio = used(sum);
    let over = sum.budget.0 > 0 && sum.projected > sum.budget;
    let s = t.heading;
    let one = |x: String, style: Style| vec![Span::styled(x, style)];
    let cells = vec![
        one(sum.tenant.clone(), s),
        one(sum.burn.to_string(), s),
        one(sum.month_to_date.to_string(), s),
        one(sum.budget.to_string(), t.dim),
        vec![Span::raw(""), Span::raw("")],
        one(ratio.map(fmt::pct).unwrap_or_else(|| "—".into()), s),
        one(format!("{}{}", sum.projected, if over { " ▲" } else { "  " }), if over { t.alarm } else { s }),
        one(format!("{}/{}", sum.gpus_held, sum.quota_gpus), s),
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
    Line::from(spans)
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
    fn budget_pane_narrow() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(80, 6, true, |p, a, b| render(&view, p, a, b)).backend());
    }
}
