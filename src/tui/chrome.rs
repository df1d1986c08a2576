//! The one-line header (product, data source, clock, GPUs, queue, burn,
//! alarms, STALE), the alarm strip under it, and the footer of key hints
//! generated from the command list.
//!
//! Draws from the `View`, the `DrawContext` (source label, data age measured
//! by the caller) and `App`. Reads no clock itself. Items that do not fit are
//! dropped whole, least important first, never cut in the middle of a figure.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::app::App;
use super::commands::{Act, COMMANDS};
use super::context::DrawContext;
use super::fmt::{self, put};
use super::log::severity_style;
use super::theme::Theme;
use crate::domain::units::Secs;
use crate::room::View;
use crate::room::view::{AlarmCounts, AlarmSeverity};

/// An item of the header: full text, short text, style, priority (lower
/// stays longer; 0 is never dropped), and whether it sits on the right.
struct Item {
    full: String,
    short: String,
    style: Style,
    priority: u8,
    right: bool,
}

impl Item {
    fn new(full: String, short: String, style: Style, priority: u8) -> Item {
        Item { full, short, style, priority, right: false }
    }
    fn text(&self, short: bool) -> &str {
        if short { &self.short } else { &self.full }
    }
}

const SEP: &str = " │ ";
const SEP_SHORT: &str = "  ";

/// The data is older than the caller's threshold.
pub fn is_stale(ctx: &DrawContext) -> bool {
    ctx.data_age.is_some_and(|age| age > ctx.stale_after)
}

/// Whether the room's own GPUs and queue are figures worth showing: a site
/// that is only a Slurm cluster has none, its figures are Slurm's, and
/// "GPUs 0/0 busy, queue 0" beside a busy cluster would mislead.
pub fn own_gpus_shown(view: &View) -> bool {
    view.cluster.gpus_total > 0 || view.slurm.is_none()
}

pub fn header(view: &View, ctx: &DrawContext, t: &Theme, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, t.header);
    let c = &view.cluster;
    let clock = view.at.map(fmt::clock).unwrap_or_else(|| "no data yet".into());
    // Acknowledged alarms are still active, but somebody is on them; cleared
    // ones nobody saw are unread until someone acknowledges them.
    let counts = AlarmCounts::of(&view.alarms);
    let mut items = vec![Item::new(" gpuroom".into(), " gpuroom".into(), t.brand, 0)];
    // Never a look-alike cluster by mistake: simulated data says so at every size.
    if ctx.shows_simulation(view) {
        items.push(Item::new("SIMULATED".into(), "SIM".into(), t.header.patch(t.warn), 0));
    }
    items.push(Item::new(ctx.source.clone(), fmt::trunc(&ctx.source, 14), t.header, 6));
    if let Some(speed) = ctx.speed {
        let speed = super::app::speed_text(speed);
        items.push(Item::new(format!("×{speed} (+/-)"), format!("×{speed}"), t.header, 2));
    }
    items.push(Item::new(format!("{clock} UTC"), clock.clone(), t.header, 1));
    if own_gpus_shown(view) {
        items.push(Item::new(format!("GPUs {}/{} busy", c.gpus_busy, c.gpus_total), format!("{}/{} GPU", c.gpus_busy, c.gpus_total), t.header, 3));
        items.push(Item::new(format!("queue {}", view.queue.depth), format!("Q {}", view.queue.depth), t.header, 4));
    }
    if let Some(slurm) = &view.slurm {
        let s = slurm.totals();
        let wait = s.oldest_wait.map(|w| format!(", oldest {w}")).unwrap_or_default();
        let style = if slurm.stale.is_some() { t.header.patch(t.warn) } else { t.header };
        let full = format!("slurm {}/{} GPUs · {} pending{wait}", s.gpus_used, s.gpus, s.pending);
        items.push(Item::new(full, format!("slurm {}/{} Q{}", s.gpus_used, s.gpus, s.pending), style, 3));
    }
    items.push(Item::new(format!("burn {}", c.burn), c.burn.to_string(), t.header, 5));
    // Live: how many sources answer; a failed one is also an alarm, by name.
    if !view.sources.is_empty() {
        let ok = view.sources.iter().filter(|s| s.ok).count();
        let n = view.sources.len();
        let style = if ok < n { t.header.patch(t.warn) } else { t.header };
        items.push(Item::new(format!("sources {ok}/{n} ok"), format!("src {ok}/{n}"), style, 2));
    }
    if ctx.paused {
        items.push(Item { right: true, ..Item::new(" ⏸ PAUSED (Space) ".into(), " PAUSED ".into(), t.alarm_banner, 0) });
    }
    if is_stale(ctx) {
        let age = ctx.data_age.map(|a| Secs(a.as_secs() as i64).to_string()).unwrap_or_default();
        items.push(Item { right: true, ..Item::new(format!(" STALE {age} "), " STALE ".into(), t.alarm_banner, 0) });
    }
    let AlarmCounts { open, acked, unread, .. } = counts;
    if open > 0 {
        let word = if open == 1 { "alarm" } else { "alarms" };
        items.push(Item { right: true, ..Item::new(format!(" ▲ {open} {word} "), format!(" ▲{open} "), t.alarm_banner, 0) });
    }
    if acked > 0 {
        items.push(Item { right: true, ..Item::new(format!(" ✓ {acked} acked "), format!(" ✓{acked} "), t.header.patch(t.warn), 2) });
    }
    if unread > 0 {
        items.push(Item { right: true, ..Item::new(format!(" ◌ {unread} cleared unread "), format!(" ◌{unread} "), t.header.patch(t.warn), 0) });
    }
    // A stale view cannot say there is no alarm: what it shows is old.
    if counts.quiet() && is_stale(ctx) {
        items.push(Item { right: true, ..Item::new(" ? alarms unknown ".into(), " alarms? ".into(), t.header.patch(t.warn), 0) });
    } else if counts.quiet() {
        items.push(Item { right: true, ..Item::new(" ✓ no alarms ".into(), " ✓ ".into(), t.header.patch(t.ok), 7) });
    }
    let (short, keep) = choose(&items, area.width as usize);
    let mut left = Vec::new();
    let mut right = Vec::new();
    for (item, _) in items.iter().zip(&keep).filter(|(_, k)| **k) {
        let side = if item.right { &mut right } else { &mut left };
        if !item.right && !side.is_empty() {
            side.push(Span::styled(if short { SEP_SHORT } else { SEP }, t.header));
        }
        side.push(Span::styled(item.text(short).to_string(), item.style));
    }
    Line::from(left).render(area, buf);
    Line::from(right).right_aligned().render(area, buf);
}

fn width_of(items: &[Item], keep: &[bool], short: bool) -> usize {
    let kept = items.iter().zip(keep).filter(|(_, k)| **k).map(|(i, _)| i);
    let lefts = kept.clone().filter(|i| !i.right).count();
    let sep = fmt::width(if short { SEP_SHORT } else { SEP });
    kept.map(|i| fmt::width(i.text(short))).sum::<usize>() + lefts.saturating_sub(1) * sep + 1
}

/// Full texts if all fit, else short texts, dropping the least important
/// items until the rest fits. Returns (short texts?, kept).
fn choose(items: &[Item], w: usize) -> (bool, Vec<bool>) {
    let mut keep = vec![true; items.len()];
    if width_of(items, &keep, false) <= w {
        return (false, keep);
    }
    let mut order: Vec<usize> = (0..items.len()).filter(|i| items[*i].priority > 0).collect();
    order.sort_by_key(|i| std::cmp::Reverse((items[*i].priority, *i)));
    for i in order {
        if width_of(items, &keep, true) <= w {
            break;
        }
        keep[i] = false;
    }
    (true, keep)
}

/// The newest alarm across the full width; else the alarms that cleared
/// unseen; else a quiet line with the newest log entry (or, on a stale
/// view, that the alarms are unknown).
pub fn alarm_strip(view: &View, stale: bool, t: &Theme, area: Rect, buf: &mut Buffer) {
    let counts = AlarmCounts::of(&view.alarms);
    if let Some(alarm) = view.alarms.iter().find(|a| a.is_open()) {
        buf.set_style(area, t.alarm_banner);
        let more = counts.open - 1;
        let lead = if alarm.severity == AlarmSeverity::Critical { " ▲ CRITICAL " } else { " ▲ ALARM " };
        let mut spans = vec![
            Span::styled(lead, t.alarm_banner),
            Span::styled(format!("{} ", fmt::time_of_day(alarm.raised_at)), t.alarm_banner),
            Span::styled(alarm.text.clone(), t.alarm_banner),
        ];
        if more > 0 {
            spans.push(Span::styled(format!("   (+{more} more)"), t.alarm_banner));
        }
        put(buf, area, 0, Line::from(spans));
        return;
    }
    if let Some(missed) = view.alarms.iter().find(|a| a.is_unread()) {
        let cleared = missed.cleared_at.map(fmt::time_of_day).unwrap_or_default();
        let spans = vec![
            Span::styled(format!(" ◌ {} fired and cleared unseen (:ack all) · ", counts.unread), t.warn),
            Span::styled(format!("{} ", fmt::time_of_day(missed.raised_at)), t.dim),
            Span::styled(missed.text.clone(), t.warn),
            Span::styled(format!(" (cleared {cleared})"), t.dim),
        ];
        put(buf, area, 0, Line::from(spans));
        return;
    }
    let acked = counts.acked;
    let (quiet, style) = match (acked, stale) {
        (0, true) => ("? alarms unknown: the view is stale".to_string(), t.warn),
        (0, false) => ("✓ no active alarms".to_string(), t.ok),
        (n, _) => (format!("✓ {n} acknowledged alarm(s) still active"), t.warn),
    };
    let mut spans = vec![Span::styled(quiet, style)];
    if let Some(last) = view.log.last() {
        spans.push(Span::styled(format!("   {} ", fmt::time_of_day(last.at)), t.dim));
        spans.push(Span::styled(last.text.clone(), severity_style(last.severity, t)));
    }
    put(buf, area, 0, Line::from(spans));
}

/// Key hints for the commands that apply now, then the focus on the right.
/// Approving capacity is hinted only while a proposal stands.
pub fn footer(app: &App, view: &View, t: &Theme, area: Rect, buf: &mut Buffer) {
    let proposals = view.capacity.as_ref().is_some_and(|c| !c.proposals.is_empty());
    let mut spans = Vec::new();
    let mut used = 0usize;
    let focus = format!(" {}{} ", app.focus.title(), if app.zoom { " (zoomed)" } else { "" });
    let room = (area.width as usize).saturating_sub(fmt::width(&focus));
    let keys = app.keys();
    let hints: Vec<(&str, &str, bool)> = COMMANDS
        .iter()
        .filter(|c| c.enabled(keys) && (c.act != Act::ApproveCapacity || proposals))
        .filter_map(|c| c.hint.map(|(k, w)| (k, w, matches!(c.act, Act::Help | Act::Quit))))
        .collect();
    let cost = |(keys, word, _): &(&str, &str, bool)| fmt::width(keys) + 1 + fmt::width(word) + 2;
    // Help and quit always show; the others in list order while they fit.
    let mut budget = room.saturating_sub(hints.iter().filter(|h| h.2).map(cost).sum());
    let mut keep: Vec<bool> = hints.iter().map(|h| h.2).collect();
    for (i, h) in hints.iter().enumerate().filter(|(_, h)| !h.2) {
        if cost(h) > budget {
            break;
        }
        budget -= cost(h);
        keep[i] = true;
    }
    // Still stop at the edge: on a very narrow footer help and quit alone may not fit.
    for (hint, _) in hints.iter().zip(&keep).filter(|(_, k)| **k) {
        let (keys, word, _) = hint;
        let add = cost(hint);
        if used + add > room {
            break;
        }
        used += add;
        spans.push(Span::styled(format!(" {keys}"), t.key));
        spans.push(Span::styled(format!(" {word} "), t.dim));
    }
    put(buf, area, 0, Line::from(spans));
    Line::from(Span::styled(focus, t.title_focused)).right_aligned().render(area, buf);
}

#[cfg(test)]
mod tests {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;

    use super::*;
    use crate::tui::fixture::{demo_view, slurm_cluster};

    fn header_text(view: &View, w: u16) -> String {
        let area = Rect::new(0, 0, w, 1);
        let mut buf = Buffer::empty(area);
        header(view, &DrawContext::new("LIVE slurm"), &Theme::dark(), area, &mut buf);
        (0..w).map(|x| buf[(x, 0)].symbol().to_string()).collect()
    }

    #[test]
    fn a_slurm_only_site_shows_slurms_gpus_and_queue_not_zeros_of_its_own() {
        let mut view = View { at: demo_view().at, ..View::default() };
        view.slurm = Some(slurm_cluster(view.at));
        let wide = header_text(&view, 200);
        assert!(wide.contains("slurm 7/8 GPUs · 2 pending, oldest 47m12s"), "{wide}");
        assert!(!wide.contains("0/0") && !wide.contains("queue 0"), "{wide}");
        let narrow = header_text(&view, 60);
        assert!(narrow.contains("slurm 7/8 Q2"), "{narrow}");
        let at = wide.find("slurm 7/8").map(|i| wide[..i].chars().count() as u16).unwrap_or_default();
        let colour = |view: &View| {
            let area = Rect::new(0, 0, 200, 1);
            let mut buf = Buffer::empty(area);
            header(view, &DrawContext::new("LIVE slurm"), &Theme::dark(), area, &mut buf);
            buf[(at, 0)].fg
        };
        let fresh = colour(&view);
        if let Some(s) = view.slurm.as_mut() {
            s.stale = Some("squeue --json: controller unreachable".into());
        }
        let stale = colour(&view);
        assert_ne!(fresh, stale, "stale Slurm figures are marked");
        assert_eq!(stale, Theme::dark().header.patch(Theme::dark().warn).fg.unwrap_or_default());
    }
}
