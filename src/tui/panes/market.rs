//! Spot market pane: per pool (instance type, zone) the market price, the
//! max price(s) of our instances in it, on-demand price and the price as a
//! share of it, trend with its change, nodes up, how long the price held, and
//! the price history as a step chart with the max price drawn across it.
//!
//! Each pool also shows its next-minute interruption risk (blended, the
//! interruptions of the last 5 minutes, the long-run rate) and its trend's
//! slope. Below the pools, "max price vs market" lists the jobs on spot, the
//! least headroom (cap / market − 1) first: those closest to being moved.
//!
//! Draws from `View::market`, `View::spot_jobs` (and `View::at` for ages)
//! only. A price above a max price is flagged in words, not just colour: that
//! instance is being interrupted. Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::shared::{Col, PaneProps, fit_columns, frame, header_line, table_line, widest};
use crate::domain::units::{At, Micros, MicrosPerHour, Secs};
use crate::market::Trend;
use crate::market::bid::{BidMode, Verdict};
use crate::room::View;
use crate::room::view::{MarketRow, PoolHazard, SpotJobRow};
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

pub fn render(view: &View, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let over = view.market.iter().filter(|m| above_max(m)).count();
    let extra = (over > 0).then(|| Line::from(Span::styled(format!(" ▲ {over} above max "), t.alarm)));
    let inner = frame(PaneId::Market, extra, props, area, buf);
    if inner.is_empty() {
        return;
    }
    if view.market.is_empty() {
        put(buf, inner, 0, Line::from(Span::styled("no spot pools", t.dim)));
        return;
    }
    let pools = view.market.len();
    // The jobs section comes after the two text lines of every pool with
    // nodes in it (or above a max price), before charts: a pool the room
    // only might buy in yields its place to the jobs running on spot.
    let busy = view.market.iter().filter(|m| m.nodes_up > 0 || above_max(m)).count().max(1);
    let section = section_rows(view.spot_jobs.len(), (inner.height as usize).saturating_sub(2 * busy));
    let rows = inner.height as usize - section;
    if section > 0 {
        let area = Rect { y: inner.y + rows as u16, height: section as u16, ..inner };
        spot_jobs(&view.spot_jobs, t, area, buf);
    }
    // When not all pools fit, those above a max price come first, then those with nodes.
    let (shown, more) = if rows >= pools { (pools, false) } else { (rows.saturating_sub(1).max(1), rows > 1) };
    let mut order: Vec<&MarketRow> = view.market.iter().collect();
    if shown < pools {
        order.sort_by_key(|m| (!above_max(m), m.nodes_up == 0));
    }
    let heights = row_heights(&order[..shown], rows - usize::from(more));
    let mut y = inner.y;
    for (row, h) in order.iter().take(shown).zip(heights) {
        pool(view.at, row, t, Rect { y, height: h as u16, ..inner }, buf);
        y += h as u16;
    }
    if more {
        let line = Line::from(Span::styled(format!("+{} more pools", pools - shown), t.dim));
        put(buf, inner, y - inner.y, line);
    }
}

/// Rows the jobs section gets out of `spare`: a title, a column header and a
/// row per job; none where a title and one row do not fit.
fn section_rows(jobs: usize, spare: usize) -> usize {
    let wanted = if jobs == 0 { 1 } else { 2 + jobs };
    if jobs > 0 && spare < 2 { 0 } else { wanted.min(spare) }
}

/// A probability as a percentage with the digits a small one needs.
fn prob(p: f64) -> String {
    match p * 100.0 {
        x if !x.is_finite() => "—".into(),
        x if x == 0.0 || x >= 10.0 => format!("{x:.0}%"),
        x if x >= 1.0 => format!("{x:.1}%"),
        x => format!("{x:.2}%"),
    }
}

fn hazard_style(p: f64, t: &Theme) -> Style {
    t.grade(p, 0.005, 0.02)
}

/// Headroom: ok from 10%, warn below, alarm once the market is above the cap.
fn headroom_style(headroom: f64, t: &Theme) -> Style {
    if headroom < 0.0 { t.alarm } else { t.grade(-headroom, -0.10, f64::INFINITY) }
}

/// The pool's risk: `risk 1.4%/min  1 in 5m  long-run 0.20%/min` (`long`),
/// or `risk 1.4%/min`: a rate always says its unit.
fn hazard_groups<'a>(h: Option<&PoolHazard>, long: bool, t: &Theme) -> Vec<Vec<Span<'a>>> {
    let Some(h) = h else { return Vec::new() };
    let style = hazard_style(h.p, t);
    if !long {
        return vec![vec![Span::styled(" risk ", t.dim), Span::styled(format!("{}/min", prob(h.p)), style)]];
    }
    let recent = if h.recent_events > 0 { t.warn } else { t.dim };
    vec![
        vec![Span::styled("  risk ", t.dim), Span::styled(format!("{}/min", prob(h.p)), style)],
        vec![Span::styled(format!("  {} in 5m", h.recent_events), recent)],
        vec![Span::styled(format!("  long-run {}", h.long_run.map(|p| format!("{}/min", prob(p))).unwrap_or_else(|| "—".into())), t.dim)],
    ]
}

/// The trend's slope as `+12%/h`, if there is one.
fn slope(m: &MarketRow) -> Option<String> {
    m.trend_per_hour.map(|r| format!("{:+.0}%/h", r * 100.0))
}

/// "max price vs market": the spot jobs, least headroom first (the view's order).
fn spot_jobs(jobs: &[SpotJobRow], t: &Theme, area: Rect, buf: &mut Buffer) {
    let w = area.width as usize;
    let title = Span::styled("max price vs market", t.heading);
    if jobs.is_empty() {
        put(buf, area, 0, fmt::fit_groups(vec![vec![title], vec![Span::styled(": no jobs on spot", t.dim)]], w));
        return;
    }
    // The column header names the figures; the title goes first when rows are short.
    let titled = area.height as usize >= 2 + jobs.len();
    if titled {
        let plural = if jobs.len() == 1 { "" } else { "s" };
        let note = vec![Span::styled(format!("  {} job{plural}, least headroom first", jobs.len()), t.dim)];
        put(buf, area, 0, fmt::fit_groups(vec![vec![title], note], w));
    }
    let body = (area.height as usize).saturating_sub(1 + usize::from(titled));
    let (shown, more) = if body >= jobs.len() { (jobs.len(), 0) } else { (body.saturating_sub(1).max(1), jobs.len() - body.saturating_sub(1).max(1)) };
    let money = |m: Option<MicrosPerHour>| m.map(|m| Micros(m.0).to_string()).unwrap_or_else(|| "—".into());
    let ids: Vec<String> = jobs.iter().map(|j| j.id.to_string()).collect();
    let cols = [
        // Slurm jobs are `slurm-ID`: wide enough for theirs.
        Col::left("ID", widest(ids.iter().map(String::as_str), 2, 11), 0),
        Col::flex("JOB", 10, 20, 0),
        Col::left("POOL", widest(jobs.iter().map(|j| j.zone.as_str()), 4, 14), 7),
        Col::right("MARKET", widest(jobs.iter().map(|j| money(j.market)).collect::<Vec<_>>().iter().map(String::as_str), 6, 10), 2),
        Col::right("MAX", widest(jobs.iter().map(|j| money(j.cap)).collect::<Vec<_>>().iter().map(String::as_str), 5, 10), 1),
        Col::right("HEADROOM", 7, 0),
        Col::right("COEF", 5, 5),
        Col::left("MODE", 4, 6),
        Col::right("CKPT", 7, 4),
        Col::right("RISK/MIN", 8, 3),
    ];
    let widths = fit_columns(&cols, w);
    let mut y = u16::from(titled);
    put(buf, area, y, header_line(&cols, &widths, t.heading));
    y += 1;
    for (j, id) in jobs.iter().zip(&ids).take(shown) {
        let moving = matches!(j.verdict, Some(Verdict::Move | Verdict::OnDemand));
        let room = match j.headroom {
            Some(h) => {
                Span::styled(format!("{}{:+.1}%", if h < 0.0 || moving { "▲" } else { "" }, h * 100.0), if moving { t.alarm } else { headroom_style(h, t) })
            }
            None => Span::styled("—", t.dim),
        };
        let (mode, mode_style) = match j.mode {
            Some(BidMode::Dynamic) => ("dyn", t.text),
            Some(BidMode::Degraded) => ("degr", t.warn),
            None => ("—", t.dim),
        };
        let ckpt = match j.interval {
            Some(i) => Span::styled(format!("{i}{}", if j.shortened { "↓" } else { "" }), if j.shortened { t.warn } else { t.text }),
            None => Span::styled("—", t.dim),
        };
        let cells = vec![
            Span::styled(id.clone(), t.text),
            Span::styled(j.name.clone(), t.text),
            Span::styled(j.zone.clone(), t.dim),
            Span::styled(money(j.market), t.figure),
            Span::styled(money(j.cap), t.text),
            room,
            Span::styled(j.coefficient.map(|c| format!("×{c:.2}")).unwrap_or_else(|| "—".into()), t.text),
            Span::styled(mode, mode_style),
            ckpt,
            j.p_next_minute.map(|p| Span::styled(prob(p), hazard_style(p, t))).unwrap_or_else(|| Span::styled("—", t.dim)),
        ];
        put(buf, area, y, table_line(&cols, &widths, cells));
        y += 1;
    }
    if more > 0 {
        put(buf, area, y, Line::from(Span::styled(format!("+{more} more spot jobs"), t.dim)));
    }
}

/// Rows per shown pool. Where not every pool can have a chart but one can,
/// every pool gets its two text lines and the pool whose price moved most (most history points; the first
/// on a tie) gets the rest for its chart, so the chart shows something. Else
/// rows are shared evenly, the last pool taking the remainder.
fn row_heights(pools: &[&MarketRow], rows: usize) -> Vec<usize> {
    let n = pools.len().max(1);
    // Six rows give every pool its text and a chart of its own.
    if rows / n < 6 && rows >= 2 * n + 3 {
        let busiest = pools.iter().enumerate().max_by_key(|(i, m)| (m.history.len(), std::cmp::Reverse(*i))).map(|(i, _)| i).unwrap_or(0);
        return (0..pools.len()).map(|i| if i == busiest { rows - 2 * (n - 1) } else { 2 }).collect();
    }
    let per = rows / n;
    (0..pools.len()).map(|i| if i + 1 == pools.len() { rows - per * (n - 1) } else { per }).collect()
}

/// The highest max price of an instance in the pool is below the market.
fn above_max(m: &MarketRow) -> bool {
    m.price.is_some_and(|p| m.max_prices.iter().any(|mp| p > *mp))
}

fn trend_parts(m: &MarketRow, t: &Theme) -> (&'static str, &'static str, Style) {
    match m.trend {
        Trend::Rising => ("↑", "rising", t.warn),
        Trend::Falling => ("↓", "falling", t.ok),
        Trend::Flat => ("→", "flat", t.dim),
    }
}

/// The first variant that fits in `w` whole, else the last one fitted group by group.
fn first_fitting<'a>(variants: Vec<Vec<Vec<Span<'a>>>>, w: usize) -> Line<'a> {
    let n = variants.len();
    for (i, groups) in variants.into_iter().enumerate() {
        let width: usize = groups.iter().flatten().map(Span::width).sum();
        if width <= w || i + 1 == n {
            return fmt::fit_groups(groups, w);
        }
    }
    Line::default()
}

fn pool(at: Option<At>, m: &MarketRow, t: &Theme, area: Rect, buf: &mut Buffer) {
    let w = area.width as usize;
    let h = area.height;
    let over = above_max(m);
    let ident = format!("{} {}", m.instance_type, m.zone);
    let price = Span::styled(m.price.map(|p| p.to_string()).unwrap_or_else(|| "no price yet".into()), if over { t.alarm } else { t.figure });
    let (arrow, word, trend_style) = trend_parts(m, t);
    let change = fmt::signed_money(m.change);
    let slope = slope(m).map(|s| format!(" {s}")).unwrap_or_default();
    let share = match m.price {
        Some(p) if m.on_demand.0 > 0 => Some(fmt::pct(p.0 as f64 / m.on_demand.0 as f64)),
        _ => None,
    };
    let nodes = vec![Span::styled(format!(" {}/{} up", m.nodes_up, m.nodes_total), t.text)];
    // Markets publish changes only: a price that held for hours is not stale
    // data, so its age is said plainly, never as a warning.
    let age = m.changed_at.and_then(|u| fmt::since(at, u));
    let age_group = |long: bool| {
        age.map(|a| {
            let text = if long { format!("  unchanged {a}") } else { format!("  held {a}") };
            vec![Span::styled(text, t.dim)]
        })
    };
    let over_span = |long: bool| Span::styled(if long { " ▲ OVER MAX: interrupting" } else { " ▲OVER" }, t.alarm);
    if h == 1 {
        // The arrow says its word ("→ flat") where it fits, else the arrow alone.
        let one_row = |trend: String| {
            let mut groups = vec![vec![Span::styled(fmt::trunc(&ident, w), t.text)], vec![Span::raw(" "), price.clone()]];
            groups.push(vec![Span::styled(trend, trend_style)]);
            if over {
                groups.push(vec![over_span(false)]);
            }
            groups
        };
        put(buf, area, 0, first_fitting(vec![one_row(format!(" {arrow} {word}")), one_row(format!(" {arrow}"))], w));
        return;
    }
    let tall = h >= 5;
    let line1 = vec![vec![Span::styled(fmt::trunc(&ident, w), t.text)], nodes];
    let variants = [true, false].map(|long| line1.iter().cloned().chain(age_group(long)).collect::<Vec<_>>());
    put(buf, area, 0, first_fitting(variants.into_iter().chain([line1]).collect(), w));
    let max_style = if over { t.alarm } else { t.text };
    let max = Span::styled(caps(&m.max_prices, true), max_style);
    let max_short = Span::styled(caps(&m.max_prices, false), max_style);
    let share_group =
        |long: bool| share.clone().map(|s| vec![Span::styled(if long { format!("  {s} of OD") } else { format!(" {s}OD") }, t.dim)]).unwrap_or_default();
    if tall {
        let long = vec![
            vec![price.clone()],
            vec![Span::styled(format!(" {arrow} {word}{slope} {change}"), trend_style)],
            share_group(true),
            vec![Span::styled(format!("  OD {}", m.on_demand), t.dim)],
        ];
        put(buf, area, 1, fmt::fit_groups(long, w));
        let cap = vec![Span::styled("max ", t.dim), max.clone()];
        let mut long = vec![cap.clone()];
        let mut short = vec![cap];
        if over {
            long.push(vec![over_span(true)]);
            short.push(vec![over_span(false)]);
        }
        // The cap and the warning in words come first; the risk fills what is left.
        let head: usize = long.iter().flatten().map(Span::width).sum();
        let line = if head <= w {
            long.extend(hazard_groups(m.hazard.as_ref(), true, t));
            long
        } else {
            short.extend(hazard_groups(m.hazard.as_ref(), false, t));
            short
        };
        put(buf, area, 2, fmt::fit_groups(line, w));
    } else {
        let mut full = vec![vec![price.clone()], vec![Span::styled(format!(" {arrow} {word}{slope} {change}"), trend_style)]];
        // Short: the slope with its unit where there is one, else the word.
        let brief = if slope.is_empty() { format!(" {arrow} {word}") } else { format!(" {arrow}{slope}") };
        let mut short = vec![vec![price.clone()], vec![Span::styled(brief, trend_style)]];
        if over {
            full.push(vec![over_span(false)]);
            short.push(vec![over_span(false)]);
        }
        full.push(vec![Span::styled(" max ", t.dim), max.clone()]);
        short.push(vec![Span::styled(" max ", t.dim), max_short]);
        full.push(share_group(true));
        short.push(share_group(false));
        full.extend(hazard_groups(m.hazard.as_ref(), false, t));
        short.extend(hazard_groups(m.hazard.as_ref(), false, t));
        put(buf, area, 1, first_fitting(vec![full, short], w));
    }
    let top = if tall { 3 } else { 2 };
    if h <= top {
        return;
    }
    let rows = h - top;
    let axis = tall && rows >= 3;
    let chart_area = Rect { y: area.y + top, height: rows - u16::from(axis), ..area };
    let base = chart(at, m, t, chart_area, tall, buf);
    if axis {
        let span = window(at, m).map(|(s, e)| Secs((e - s).num_seconds())).unwrap_or_default();
        let left = format!("-{span}");
        // The bars start at the lowest price drawn, not at $0: say so where it fits.
        let middle = base.filter(|b| b.0 > 0).map(|b| format!("  bars from {b}, not $0  ")).unwrap_or_default();
        let middle = if fmt::width(&left) + fmt::width(&middle) + 3 <= w { middle } else { String::new() };
        let pad = w.saturating_sub(fmt::width(&left) + fmt::width(&middle) + 3);
        let (before, after) = (pad / 2, pad - pad / 2);
        let text =
            if middle.is_empty() { format!("{left}{}now", " ".repeat(pad)) } else { format!("{left}{}{middle}{}now", " ".repeat(before), " ".repeat(after)) };
        put(buf, area, h - 1, Line::from(Span::styled(text, t.dim)));
    }
}

/// The max prices of the pool's instances: `$8.00/h`, or `$8.00–$9.00/h`;
/// `per_hour: false` leaves out the `/h` where space is short.
fn caps(max_prices: &[MicrosPerHour], per_hour: bool) -> String {
    let unit = if per_hour { "/h" } else { "" };
    match (max_prices.iter().min(), max_prices.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => format!("{}{unit}", Micros(lo.0)),
        (Some(lo), Some(hi)) => format!("{}–{}{unit}", Micros(lo.0), Micros(hi.0)),
        _ => "—".into(),
    }
}

/// The time span the chart covers: from the oldest point to now.
fn window(at: Option<At>, m: &MarketRow) -> Option<(At, At)> {
    let first = m.history.first()?.0;
    let end = at.or(m.updated_at).unwrap_or(first).max(m.history.last()?.0);
    let start = if end > first { first } else { end - chrono::TimeDelta::hours(1) };
    Some((start, end))
}

/// The price in force at `when` (history is a step function, oldest first).
fn price_at(m: &MarketRow, when: At) -> Option<MicrosPerHour> {
    m.history.iter().rev().find(|(t, _)| *t <= when).map(|(_, p)| *p)
}

/// A step chart of the history, one column per time slice, eighth blocks,
/// with the lowest max price drawn as `╌` where the bars do not reach it.
/// Draws the price chart; returns the price its bars start from (the
/// lowest drawn, not $0, so that moves of a few cents show).
fn chart(at: Option<At>, m: &MarketRow, t: &Theme, area: Rect, labels: bool, buf: &mut Buffer) -> Option<MicrosPerHour> {
    let (start, end) = window(at, m)?;
    let cap = m.max_prices.iter().min().copied();
    let mut lo = m.history.iter().map(|(_, p)| p.0).min().unwrap_or(0);
    let mut hi = m.history.iter().map(|(_, p)| p.0).max().unwrap_or(0);
    if let Some(c) = cap
        && c.0 * 10 <= hi * 13
        && c.0 * 10 >= lo * 7
    {
        lo = lo.min(c.0);
        hi = hi.max(c.0);
    }
    let h = area.height as usize;
    let label_w =
        if labels && h >= 2 && area.width >= 30 { fmt::width(&MicrosPerHour(hi).to_string()).max(fmt::width(&MicrosPerHour(lo).to_string())) + 1 } else { 0 };
    let cols = (area.width as usize).saturating_sub(label_w);
    if cols == 0 || h == 0 {
        return None;
    }
    let levels = (h * 8) as i64;
    let level = |v: i64| -> i64 { if hi == lo { levels / 2 } else { 1 + ((v - lo) as f64 / (hi - lo) as f64 * (levels - 1) as f64).round() as i64 } };
    let cap_row = cap.filter(|c| c.0 >= lo && c.0 <= hi).map(|c| ((level(c.0) - 1) / 8) as usize);
    let span = (end - start).num_milliseconds().max(1);
    for x in 0..cols {
        // Each column shows the price at its right edge: the last one is now.
        let when = start + chrono::TimeDelta::milliseconds(span * (x as i64 + 1) / cols as i64);
        let value = price_at(m, when);
        let above = matches!((value, cap), (Some(v), Some(c)) if v > c);
        let style: Style = if above { t.chart_over } else { t.chart };
        let lv = value.map(|v| level(v.0)).unwrap_or(0);
        for r in 0..h {
            let fill = (lv - (r as i64) * 8).clamp(0, 8) as usize;
            let (glyph, s) = match (fill, cap_row) {
                (0, Some(cr)) if cr == r => ('╌', t.chart_over),
                (0, _) => (' ', style),
                (f, _) => (fmt::RAMP[f], style),
            };
            let pos = (area.x + (label_w + x) as u16, area.y + (h - 1 - r) as u16);
            if let Some(cell) = buf.cell_mut(pos) {
                cell.set_char(glyph).set_style(s);
            }
        }
    }
    if label_w > 0 {
        let top = Rect { width: label_w as u16, height: 1, ..area };
        put(buf, top, 0, Line::from(Span::styled(MicrosPerHour(hi).to_string(), t.dim)));
        let bottom = Rect { y: area.bottom() - 1, ..top };
        put(buf, bottom, 0, Line::from(Span::styled(MicrosPerHour(lo).to_string(), t.dim)));
    }
    Some(MicrosPerHour(lo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn market_pane_tall() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(50, 14, false, |p, a, b| render(&view, p, a, b)).backend());
    }

    #[test]
    fn market_pane_compact() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(36, 6, true, |p, a, b| render(&view, p, a, b)).backend());
    }

    #[test]
    fn the_pool_that_moved_most_gets_the_chart_when_only_one_can() {
        let view = demo_view();
        let mut rows: Vec<MarketRow> = (0..5).map(|_| view.market[0].clone()).collect();
        for (i, row) in rows.iter_mut().enumerate() {
            row.history.truncate(if i == 3 { row.history.len() } else { 1 });
        }
        let refs: Vec<&MarketRow> = rows.iter().collect();
        assert_eq!(row_heights(&refs, 13), vec![2, 2, 2, 5, 2]);
        // Room for a chart each: shared evenly; too little for any: shared evenly.
        assert_eq!(row_heights(&refs[..2], 12), vec![6, 6]);
        assert_eq!(row_heights(&refs, 11), vec![2, 2, 2, 2, 3]);
    }

    #[test]
    fn market_pane_spot_jobs_wide_and_narrow() {
        let mut view = demo_view();
        // One job past its cap on a degraded bid with a shortened interval.
        let j = &mut view.spot_jobs[0];
        j.cap = Some(MicrosPerHour(8_000_000));
        j.headroom = Some(8.0 / 8.45 - 1.0);
        j.mode = Some(BidMode::Degraded);
        j.verdict = Some(Verdict::Move);
        j.shortened = true;
        insta::assert_snapshot!("spot_jobs_wide", draw_pane(80, 16, false, |p, a, b| render(&view, p, a, b)).backend());
        insta::assert_snapshot!("spot_jobs_narrow", draw_pane(34, 12, false, |p, a, b| render(&view, p, a, b)).backend());
        // Too few rows for every job: the title goes first, then jobs fold into "+N more".
        insta::assert_snapshot!("spot_jobs_short", draw_pane(50, 9, false, |p, a, b| render(&view, p, a, b)).backend());
    }

    #[test]
    fn market_pane_says_when_no_job_runs_on_spot() {
        let mut view = demo_view();
        view.spot_jobs.clear();
        insta::assert_snapshot!(draw_pane(50, 8, false, |p, a, b| render(&view, p, a, b)).backend());
    }

    #[test]
    fn headroom_and_probabilities() {
        assert_eq!(prob(0.0231), "2.3%");
        assert_eq!(prob(0.00136), "0.14%");
        assert_eq!(prob(0.0), "0%");
        assert_eq!(section_rows(4, 20), 6);
        assert_eq!(section_rows(4, 3), 3);
        assert_eq!(section_rows(4, 1), 0);
        assert_eq!(section_rows(0, 1), 1);
        let view = demo_view();
        let rooms: Vec<f64> = view.spot_jobs.iter().filter_map(|j| j.headroom).collect();
        assert!(rooms.windows(2).all(|w| w[0] <= w[1]), "least headroom first: {rooms:?}");
    }

    #[test]
    fn market_pane_one_row() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(40, 3, false, |p, a, b| render(&view, p, a, b)).backend());
    }
}
