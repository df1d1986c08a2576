//! The read-only wall display (`gpuroom --wall`): a large, legible layout for
//! the operations room that cycles through the panes on a timer, with alarms
//! shown prominently, a clock and the data's age.
//!
//! The screen, top to bottom: a top band (the data's clock in big digits,
//! date, source, data age, and the key figures in large type where there is
//! room; two plain lines on small screens), a STALE banner while the data is
//! old, the alarm band (newest first, on every page), the body (this page's
//! pane or panes, drawn by the console's own pane renderers), and a footer
//! with the page dots, the next page and "read-only wall · q quits".
//!
//! Pure drawing, like `draw`: it reads the `View`, the `WallState` (which page)
//! and the `DrawContext`, and never a clock. It draws only inside the `Rect`
//! it is given. It has no keys: the run loop ignores every action key in wall
//! mode and the engine refuses actions from a viewer anyway. It must not
//! change the panes (it calls them unfocused, with no selection) nor compute
//! business figures: every number on it comes from the `View`.

use std::cell::Cell;
use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::context::DrawContext;
use super::fmt::{self, put};
use super::pane_id::PaneId;
use super::panes::fleet_ui::FleetUi;
use super::panes::queue::QueueUi;
use super::panes::{self, PaneProps};
use super::selection::Window;
use super::theme::Theme;
use super::wall_font::{self as font, Scale};
use super::{chrome, log};
use crate::domain::units::Secs;
use crate::room::View;
use crate::room::view::AlarmCounts;

/// How long each page stays on the wall before the next one.
pub const WALL_CYCLE: Duration = Duration::from_secs(15);

/// From this size up the clock and the key figures are drawn in the block
/// font; below it they are plain text, so that the panes keep their rows.
pub const BIG_MIN: (u16, u16) = (100, 30);

/// From this size up each page shows two panes side by side.
pub const PAIRED_MIN: (u16, u16) = (200, 60);

/// Which page the wall shows; the run loop advances it every `WALL_CYCLE`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WallState {
    /// Taken modulo the page count of the screen's size, so the run loop
    /// only ever adds one (see `advance`) and a resize never leaves it
    /// out of range.
    pub page: usize,
    /// Time until the page turns, if the run loop wants it shown
    /// ("next: Queue in 12 s"); `None` shows the next page's name only.
    pub next_in: Option<Duration>,
}

impl WallState {
    /// The next page (wrapping, so it never overflows).
    pub fn advance(&mut self) {
        self.page = self.page.wrapping_add(1);
    }
}

/// One page of the cycle: its panes, and the first one's share of the
/// width in percent when there are two.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub parts: &'static [PaneId],
    pub split: u16,
}

impl Page {
    pub fn title(&self) -> String {
        self.parts.iter().map(|p| p.title()).collect::<Vec<_>>().join(" + ")
    }
}

const SINGLE: [Page; 6] = [
    Page { parts: &[PaneId::Fleet], split: 100 },
    Page { parts: &[PaneId::Memory], split: 100 },
    Page { parts: &[PaneId::Queue], split: 100 },
    Page { parts: &[PaneId::Market], split: 100 },
    Page { parts: &[PaneId::Budget], split: 100 },
    Page { parts: &[PaneId::Alarms], split: 100 },
];

/// On a big screen one pane alone would stretch its columns to their
/// maximum and leave the rest of a 200-column line empty, so two related
/// panes share a page at about the width each gets in the console: the
/// hardware (fleet + memory), the work and where it runs cheaply (queue +
/// spot market), the money and what happened (budgets + log). Three pages
/// also bring every pane back twice as often (45 s instead of 90 s). The
/// queue and budget tables are the wider ones, hence their larger share.
const PAIRED: [Page; 3] = [
    Page { parts: &[PaneId::Fleet, PaneId::Memory], split: 55 },
    Page { parts: &[PaneId::Queue, PaneId::Market], split: 60 },
    Page { parts: &[PaneId::Budget, PaneId::Alarms], split: 60 },
];

fn paired(area: Rect) -> bool {
    area.width >= PAIRED_MIN.0 && area.height >= PAIRED_MIN.1
}

/// The Slurm pane's page: its job table wants the whole width.
const SLURM_PAGE: Page = Page { parts: &[PaneId::Slurm], split: 100 };

/// The pages of the cycle at this screen size, for what the room shows.
/// With a Slurm cluster its pane gets a page of its own, before the queue's.
/// There, panes with nothing to show (no nodes of the room's own, no spot
/// pools: a site that is only a Slurm cluster) leave the cycle, so the wall
/// does not spend a page on "no nodes yet"; a pair that loses one pane
/// shows the other alone.
pub fn pages(area: Rect, view: &View) -> Vec<Page> {
    let base: &[Page] = if paired(area) { &PAIRED } else { &SINGLE };
    if view.slurm.is_none() {
        return base.to_vec();
    }
    let empty = |p: &PaneId| match p {
        PaneId::Fleet | PaneId::Memory => view.nodes.is_empty(),
        PaneId::Market => view.market.is_empty(),
        _ => false,
    };
    let mut out = Vec::new();
    for page in base {
        if page.parts.contains(&PaneId::Queue) {
            out.push(SLURM_PAGE);
        }
        match page.parts.iter().filter(|p| !empty(p)).collect::<Vec<_>>().as_slice() {
            [] => {}
            [one] if page.parts.len() > 1 => out.extend(SINGLE.iter().find(|s| s.parts[0] == **one).copied()),
            _ => out.push(*page),
        }
    }
    out
}

/// How many pages the cycle has at this screen size.
pub fn page_count(area: Rect, view: &View) -> usize {
    pages(area, view).len()
}

/// Draws the wall display into `buf`.
pub fn draw_wall(view: &View, wall: &WallState, ctx: &DrawContext, area: Rect, buf: &mut Buffer) {
    let area = area.intersection(*buf.area());
    if area.is_empty() {
        return;
    }
    let t = &ctx.theme;
    let stale = chrome::is_stale(ctx);
    let big = area.width >= BIG_MIN.0 && area.height >= BIG_MIN.1;
    let all = pages(area, view);
    let index = wall.page % all.len();

    // Rows are handed out by importance (STALE, then the clock line, the
    // alarms, the footer), so a tiny screen keeps what matters; they are
    // drawn in screen order.
    let mut left = area.height;
    let mut take = |want: u16| {
        let got = want.min(left);
        left -= got;
        got
    };
    let stale_h = if stale { take(if big { Scale::Half.height() } else { 1 }) } else { 0 };
    // On the biggest screens a sixth row lets the figures be as tall as the clock.
    let top_h = take(match (paired(area), big) {
        (true, _) => Scale::Full.height() + 1,
        (false, true) => Scale::Full.height(),
        _ if area.height >= 12 => 2,
        _ => 1,
    });
    let alarm_max = (area.height / 10).clamp(1, 5);
    let alarm_h = take((view.alarms.len() as u16).clamp(1, alarm_max));
    // The footer only when a pane keeps some rows under it.
    let foot_h = take(u16::from(area.height.saturating_sub(stale_h + top_h + alarm_h) >= 6));
    let body_h = take(u16::MAX);

    let mut y = area.y;
    let mut band = |h: u16| {
        let r = Rect { y, height: h, ..area };
        y += h;
        r
    };
    let top = band(top_h);
    let banner = band(stale_h);
    let alarms = band(alarm_h);
    let body = band(body_h);
    let foot = band(foot_h);

    if big {
        top_big(view, ctx, stale, top, buf);
    } else {
        top_small(view, ctx, stale, top, buf);
    }
    if !banner.is_empty() {
        stale_banner(view, ctx, big, banner, buf);
    }
    if !alarms.is_empty() {
        alarm_band(view, t, stale, alarms, buf);
    }
    if body.height >= 3 && body.width >= 10 {
        page_body(view, &all[index], ctx, stale, body, buf);
    }
    if !foot.is_empty() {
        footer(&all, index, wall, t, foot, buf);
    }
}

/// How old the data is, for people: `0.4 s`, `42 s`, `3m05s`.
fn age_text(age: Duration) -> String {
    let s = age.as_secs_f64();
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 60.0 {
        format!("{} s", age.as_secs())
    } else {
        Secs(i64::try_from(age.as_secs()).unwrap_or(i64::MAX)).to_string()
    }
}

/// The data-age figure: quiet while fresh, alarm-styled once stale.
fn age_span(ctx: &DrawContext, stale: bool) -> Span<'static> {
    let t = &ctx.theme;
    match ctx.data_age {
        Some(age) if stale => Span::styled(format!("▲ data {} old", age_text(age)), t.alarm),
        Some(age) => Span::styled(format!("data {} old", age_text(age)), t.text),
        None => Span::styled("data age unknown", t.dim),
    }
}

/// Old figures are dimmed, so that even a glance that misses the banner
/// does not read them as live.
fn aged(style: Style, stale: bool) -> Style {
    if stale { style.add_modifier(Modifier::DIM) } else { style }
}

/// A figure drawn in large type, with its label under it.
struct Tile {
    big: String,
    label: String,
    style: Style,
    /// Lower is kept longer when the band is narrow.
    priority: u8,
}

impl Tile {
    fn width(&self, scale: Scale) -> u16 {
        font::width(&self.big, scale).unwrap_or(0).max(fmt::width(&self.label) as u16)
    }
}

fn tiles(view: &View, t: &Theme, stale: bool) -> Vec<Tile> {
    let c = &view.cluster;
    // The unit moves into the label so the big type carries only the number.
    let burn = c.burn.to_string();
    let burn = burn.strip_prefix('$').and_then(|s| s.strip_suffix("/h")).map(str::to_string).unwrap_or(burn);
    let n = AlarmCounts::of(&view.alarms).open;
    let mut tiles = Vec::new();
    let own = chrome::own_gpus_shown(view);
    // With both, the two GPU counts and the burn outrank the two queues.
    let both = own && view.slurm.is_some();
    if own {
        tiles.push(Tile { big: format!("{}/{}", c.gpus_busy, c.gpus_total), label: "GPUs busy".into(), style: t.figure, priority: 1 });
        tiles.push(Tile { big: view.queue.depth.to_string(), label: "queued".into(), style: t.figure, priority: if both { 5 } else { 2 } });
    }
    if let Some(slurm) = &view.slurm {
        let s = slurm.totals();
        tiles.push(Tile { big: format!("{}/{}", s.gpus_used, s.gpus), label: "Slurm GPUs busy".into(), style: t.figure, priority: if both { 2 } else { 1 } });
        tiles.push(Tile { big: s.pending.to_string(), label: "Slurm pending".into(), style: t.figure, priority: if both { 6 } else { 2 } });
    }
    tiles.push(Tile { big: burn, label: "fleet burn $/h".into(), style: t.figure, priority: 3 });
    // A stale screen cannot vouch for "no alarms": what it knew is old.
    let tile = match (n, stale) {
        (0, true) => Tile { big: "-".into(), label: "alarms unknown".into(), style: t.warn, priority: 4 },
        (n, _) => {
            Tile { big: n.to_string(), label: if n == 1 { "alarm".into() } else { "alarms".into() }, style: if n > 0 { t.alarm } else { t.ok }, priority: 4 }
        }
    };
    tiles.push(tile);
    tiles.into_iter().filter(|tile| font::width(&tile.big, Scale::Half).is_some()).collect()
}

/// Five rows: the clock in the block font, a column of date, time, source
/// and data age beside it, and the key figures on the right as room allows.
fn top_big(view: &View, ctx: &DrawContext, stale: bool, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let hhmm = view.at.map(|at| at.format("%H:%M").to_string()).unwrap_or_else(|| "--:--".into());
    let x = area.x + 1;
    let clock_w = font::draw(&hhmm, Scale::Full, Position::new(x, area.y), area, aged(t.figure, stale), buf).unwrap_or(0);

    let info_x = x + clock_w + 3;
    let mut info = vec![
        Line::from(if ctx.shows_simulation(view) {
            vec![Span::styled(" gpuroom ", t.brand), Span::styled(" SIMULATED", t.warn)]
        } else {
            vec![Span::styled(" gpuroom ", t.brand), Span::styled(" wall", t.dim)]
        }),
        Line::from(Span::styled(view.at.map(|at| at.format("%a %Y-%m-%d").to_string()).unwrap_or_else(|| "no data yet".into()), aged(t.text, stale))),
        Line::from(Span::styled(view.at.map(|at| format!("{} UTC", fmt::time_of_day(at))).unwrap_or_default(), t.dim)),
        Line::from(Span::styled(fmt::trunc(&ctx.source, 28), t.text)),
        Line::from(age_span(ctx, stale)),
    ];
    let info_w = info.iter().map(Line::width).max().unwrap_or(0) as u16;
    let info_area = Rect { x: info_x, width: info_w, ..area }.intersection(area);
    for (row, line) in info.drain(..).enumerate() {
        put(buf, info_area, row as u16, line);
    }

    let mut tiles = tiles(view, t, stale);
    // Figures are set apart by several times the gap between their own
    // digits, or "23/32" and "6" would read as one number from afar.
    let gap = |scale| match scale {
        Scale::Full => 8,
        Scale::Half => 4,
    };
    let avail = area.right().saturating_sub(1).saturating_sub(info_x + info_w + 3);
    let total = |tiles: &[Tile], scale| tiles.iter().map(|t| t.width(scale) + gap(scale)).sum::<u16>().saturating_sub(gap(scale));
    // The figures as tall as the clock when all of them fit with a row for
    // their labels under it; else half as tall, dropping the least important.
    let scale = if area.height > Scale::Full.height() && total(&tiles, Scale::Full) <= avail { Scale::Full } else { Scale::Half };
    while total(&tiles, scale) > avail {
        let Some(i) = (0..tiles.len()).max_by_key(|i| tiles[*i].priority) else { break };
        tiles.remove(i);
    }
    // Half-height figures sit on rows 1–3 so their labels line up with the
    // clock's last row; full-height ones on rows 0–4, labels under them.
    let (fig_row, label_row) = match scale {
        Scale::Full => (0, Scale::Full.height()),
        Scale::Half => (1, Scale::Full.height() - 1),
    };
    let mut tx = area.right().saturating_sub(1).saturating_sub(total(&tiles, scale));
    for tile in &tiles {
        let w = tile.width(scale);
        let fw = font::width(&tile.big, scale).unwrap_or(0);
        font::draw(&tile.big, scale, Position::new(tx + (w - fw) / 2, area.y + fig_row), area, aged(tile.style, stale), buf);
        let lw = fmt::width(&tile.label) as u16;
        let label = Rect { x: tx + (w - lw) / 2, width: lw, ..area }.intersection(area);
        put(buf, label, label_row, Line::from(Span::styled(tile.label.clone(), aged(t.dim, stale))));
        tx += w + gap(scale);
    }
}

/// One or two plain lines: clock, data age, source, date; then the figures.
fn top_small(view: &View, ctx: &DrawContext, stale: bool, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let w = area.width as usize;
    let clock = match view.at {
        Some(at) => Span::styled(format!(" {} UTC", fmt::time_of_day(at)), aged(t.figure, stale)),
        None => Span::styled(" no data yet", t.dim),
    };
    let sep = || Span::styled(" · ", t.dim);
    let mut groups = vec![vec![clock]];
    if ctx.shows_simulation(view) {
        groups.push(vec![sep(), Span::styled("SIMULATED", t.warn)]);
    }
    groups.extend([vec![sep(), age_span(ctx, stale)], vec![sep(), Span::styled(ctx.source.clone(), t.text)]]);
    if let Some(at) = view.at {
        groups.push(vec![sep(), Span::styled(at.format("%a %Y-%m-%d").to_string(), aged(t.dim, stale))]);
    }
    put(buf, area, 0, fmt::fit_groups(groups, w));

    let c = &view.cluster;
    let n = AlarmCounts::of(&view.alarms).open;
    let fig = aged(t.figure, stale);
    let label = aged(t.dim, stale);
    let alarms = match (n, stale) {
        (0, true) => vec![sep(), Span::styled("? alarms unknown", t.warn)],
        (0, false) => vec![sep(), Span::styled("✓ no alarms", t.ok)],
        _ => vec![sep(), Span::styled(format!("▲ {n} alarm{}", if n == 1 { "" } else { "s" }), aged(t.alarm, stale))],
    };
    let mut groups = Vec::new();
    if chrome::own_gpus_shown(view) {
        groups.push(vec![Span::styled(" GPUs ", label), Span::styled(format!("{}/{}", c.gpus_busy, c.gpus_total), fig), Span::styled(" busy", label)]);
        groups.push(vec![sep(), Span::styled("queue ", label), Span::styled(view.queue.depth.to_string(), fig)]);
    }
    if let Some(slurm) = &view.slurm {
        let s = slurm.totals();
        let lead = if groups.is_empty() { " " } else { "" };
        let mut group = if groups.is_empty() { Vec::new() } else { vec![sep()] };
        group.extend([
            Span::styled(format!("{lead}Slurm GPUs "), label),
            Span::styled(format!("{}/{}", s.gpus_used, s.gpus), fig),
            Span::styled(" · pending ", label),
            Span::styled(s.pending.to_string(), fig),
        ]);
        groups.push(group);
    }
    groups.push(vec![sep(), Span::styled("burn ", label), Span::styled(c.burn.to_string(), fig)]);
    groups.push(alarms);
    put(buf, area, 1, fmt::fit_groups(groups, w));
}

/// Across the full width in the alarm style: the word STALE (in big letters
/// on a big screen), how long there has been no update, and the time the
/// figures are from.
fn stale_banner(view: &View, ctx: &DrawContext, big: bool, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let style = t.alarm_banner;
    buf.set_style(area, style);
    let age = ctx.data_age.map(age_text).unwrap_or_else(|| "a while".into());
    let head = format!("STALE — no update for {age}");
    let asof = match view.at {
        Some(at) => format!("every figure on this screen is from {} UTC", fmt::time_of_day(at)),
        None => "no data has arrived".into(),
    };
    if big && area.height >= Scale::Half.height() {
        let x = area.x + 2;
        let w = font::draw("STALE", Scale::Half, Position::new(x, area.y), area, style, buf).unwrap_or(0);
        let text = Rect { x: x + w + 3, width: area.right().saturating_sub(x + w + 3), ..area }.intersection(area);
        put(buf, text, 0, Line::from(Span::styled(head, style)));
        put(buf, text, 1, Line::from(Span::styled(asof, style)));
        return;
    }
    let groups = vec![vec![Span::styled(format!(" ▲ {head}"), style)], vec![Span::styled(format!(" · {asof}"), style)]];
    put(buf, area, 0, fmt::fit_groups(groups, area.width as usize));
}

/// The newest alarms, newest first, one a row, the last row saying how many
/// did not fit; or a quiet line when there are none.
fn alarm_band(view: &View, t: &Theme, stale: bool, area: Rect, buf: &mut Buffer) {
    if view.alarms.is_empty() {
        let quiet = if stale {
            Span::styled(" ? alarms unknown: no update is coming in, so an alarm raised since would not show", t.warn)
        } else {
            Span::styled(" ✓ no active alarms", t.ok)
        };
        put(buf, area, 0, Line::from(quiet));
        return;
    }
    let style = t.alarm_banner;
    buf.set_style(area, style);
    let w = area.width as usize;
    let shown = view.alarms.len().min(area.height as usize);
    let hidden = view.alarms.len() - shown;
    for (i, alarm) in view.alarms.iter().take(shown).enumerate() {
        // An acknowledged alarm is still active (until its condition
        // clears), so it stays in the band, saying who has it in hand.
        // A cleared one nobody acknowledged stays until a console does.
        let (lead, text) = match (&alarm.acked_by, alarm.cleared_at) {
            (_, Some(cleared)) => {
                (format!(" ◌ fired {}  ", fmt::time_of_day(alarm.raised_at)), format!("{} — cleared {}, unread", alarm.text, fmt::time_of_day(cleared)))
            }
            (None, None) => (format!(" ▲ ALARM {}  ", fmt::time_of_day(alarm.raised_at)), alarm.text.clone()),
            (Some(user), None) => (format!(" ✓ acked {}  ", fmt::time_of_day(alarm.raised_at)), format!("{} (acked by {user})", alarm.text)),
        };
        let more = if i + 1 == shown && hidden > 0 { format!("  +{hidden} more ") } else { String::new() };
        let room = w.saturating_sub(fmt::width(&lead) + fmt::width(&more));
        let line = Line::from(vec![Span::styled(lead, style), Span::styled(fmt::left(&text, room), style), Span::styled(more, style)]);
        put(buf, area, i as u16, line);
    }
}

/// This page's pane(s), side by side, each drawn by its own renderer.
fn page_body(view: &View, page: &Page, ctx: &DrawContext, stale: bool, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let mut x = area.x;
    for (i, part) in page.parts.iter().enumerate() {
        let width = if i + 1 == page.parts.len() { area.right() - x } else { (u32::from(area.width) * u32::from(page.split) / 100) as u16 };
        let r = Rect { x, width, ..area };
        x += width;
        if r.width < 10 {
            continue;
        }
        let props = PaneProps { theme: t, focused: false };
        match *part {
            PaneId::Fleet => panes::fleet::render(view, &FleetUi::default(), props, r, buf),
            PaneId::Memory => panes::memory::render(view, props, r, buf),
            PaneId::Queue => {
                // The console's default order: the jobs that wait on top.
                let window = Cell::new(Window::default());
                let rows = super::job_order::JobOrder::default().rows(view);
                panes::queue::render(view, &QueueUi { rows: Some(&rows), ..QueueUi::plain(&window) }, props, r, buf)
            }
            PaneId::Market => panes::market::render(view, props, r, buf),
            PaneId::Budget => panes::budget::render(view, props, r, buf),
            PaneId::Alarms => log::render(view, t, r, buf),
            PaneId::Slurm => {
                let window = Cell::new(Window::default());
                panes::slurm::render(view, &panes::slurm::SlurmUi { selected: None, window: &window }, props, r, buf)
            }
        }
        if stale {
            mark_stale(part.title(), ctx, r, buf);
        }
    }
}

/// Dims a pane and tags its border STALE: the figures in it are old.
fn mark_stale(title: &str, ctx: &DrawContext, r: Rect, buf: &mut Buffer) {
    buf.set_style(r, Style::new().add_modifier(Modifier::DIM));
    let tag = match ctx.data_age {
        Some(age) => format!(" STALE {} ", age_text(age)),
        None => " STALE ".into(),
    };
    let style = ctx.theme.alarm_banner.remove_modifier(Modifier::DIM);
    let tag_w = fmt::width(&tag) as u16;
    // Right after the title when the top border is bare there (the pane's
    // own figures sit on the right of it); else on the bottom border.
    let after_title = r.x + 1 + fmt::width(&format!(" {title} ")) as u16;
    let bare = |x0: u16, y: u16, buf: &Buffer| {
        let end = x0 + tag_w + 1;
        end < r.right() && (x0..=end).all(|x| buf[(x, y)].symbol() == buf[(x0, y)].symbol())
    };
    let spot = if bare(after_title, r.y, buf) {
        Some((after_title + 1, r.y))
    } else if r.height >= 2 && r.x + 2 + tag_w < r.right() {
        Some((r.x + 2, r.bottom() - 1))
    } else {
        None
    };
    if let Some((x, y)) = spot {
        put(buf, Rect { x, y, width: tag_w, height: 1 }, 0, Line::from(Span::styled(tag, style)));
    }
}

/// Page dots, this page and the next; "read-only wall · q quits" on the right.
fn footer(all: &[Page], index: usize, wall: &WallState, t: &Theme, area: Rect, buf: &mut Buffer) {
    let dots: Vec<Span> = (0..all.len())
        .flat_map(|i| {
            let dot = if i == index { Span::styled("●", t.figure) } else { Span::styled("○", t.dim) };
            [Span::raw(" "), dot]
        })
        .collect();
    let next = &all[(index + 1) % all.len()];
    let mut next_text = format!("   next: {}", next.title());
    if let Some(d) = wall.next_in {
        next_text.push_str(&format!(" in {} s", d.as_secs_f64().ceil() as u64));
    }
    let groups = vec![
        dots,
        vec![Span::styled(format!("  page {}/{} · ", index + 1, all.len()), t.text), Span::styled(all[index].title(), t.figure)],
        vec![Span::styled(next_text, t.dim)],
    ];
    let quiet = "read-only wall · q quits ";
    let quiet_w = fmt::width(quiet);
    let w = area.width as usize;
    // The page line matters more than the reminder, which goes first when narrow.
    let line = fmt::fit_groups(groups, w);
    if line.width() + 2 + quiet_w <= w {
        let r = Rect { x: area.right() - quiet_w as u16, width: quiet_w as u16, ..area };
        put(buf, r, 0, Line::from(Span::styled(quiet, t.dim)));
    }
    put(buf, area, 0, line);
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;

    use super::*;
    use crate::tui::fixture::{demo_view, slurm_cluster, slurm_view};

    fn ctx() -> DrawContext {
        DrawContext { theme: Theme::dark(), data_age: Some(Duration::from_millis(400)), ..DrawContext::new("SIM seed 1 ×60") }
    }

    fn stale_ctx() -> DrawContext {
        DrawContext { data_age: Some(Duration::from_secs(42)), ..ctx() }
    }

    fn screen(w: u16, h: u16, page: usize, view: &View, ctx: &DrawContext) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        let wall = WallState { page, next_in: None };
        terminal.draw(|f| draw_wall(view, &wall, ctx, f.area(), f.buffer_mut())).unwrap();
        terminal
    }

    fn text(terminal: &Terminal<TestBackend>) -> String {
        let buf = terminal.backend().buffer();
        (0..buf.area.height).map(|y| row(buf, y) + "\n").collect()
    }

    fn row(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect()
    }

    #[test]
    fn wall_120x40_page_0() {
        insta::assert_snapshot!(screen(120, 40, 0, &demo_view(), &ctx()).backend());
    }

    #[test]
    fn wall_120x40_queue_page() {
        insta::assert_snapshot!(screen(120, 40, 2, &demo_view(), &ctx()).backend());
    }

    #[test]
    fn wall_80x24() {
        insta::assert_snapshot!(screen(80, 24, 0, &demo_view(), &ctx()).backend());
    }

    #[test]
    fn wall_200x60_paired() {
        insta::assert_snapshot!(screen(200, 60, 1, &demo_view(), &ctx()).backend());
    }

    #[test]
    fn wall_120x40_stale() {
        insta::assert_snapshot!(screen(120, 40, 0, &demo_view(), &stale_ctx()).backend());
    }

    #[test]
    fn wall_80x24_stale() {
        insta::assert_snapshot!(screen(80, 24, 4, &demo_view(), &stale_ctx()).backend());
    }

    #[test]
    fn every_page_shows_its_pane_title_and_names_the_next() {
        let view = demo_view();
        for (w, h) in [(80, 24), (120, 40), (200, 60), (300, 100)] {
            let all = pages(Rect::new(0, 0, w, h), &view);
            assert_eq!(all.len(), if w >= 200 { 3 } else { 6 });
            for (i, page) in all.iter().enumerate() {
                let shown = text(&screen(w, h, i, &view, &ctx()));
                for part in page.parts {
                    assert!(shown.contains(&format!(" {} ", part.title())), "page {i} at {w}x{h} lacks {:?}", part.title());
                }
                assert!(shown.contains(&format!("page {}/{}", i + 1, all.len())), "page {i} at {w}x{h}: no indicator");
                let next = all[(i + 1) % all.len()].title();
                assert!(shown.contains(&format!("next: {next}")), "page {i} at {w}x{h} does not name {next}");
            }
        }
        // Every pane comes round in both cycles; the Slurm pane where a cluster is attached.
        let slurm = slurm_view();
        for (w, h) in [(120, 40), (200, 60)] {
            let parts = |v: &View| pages(Rect::new(0, 0, w, h), v).iter().flat_map(|p| p.parts.iter().copied()).collect::<Vec<PaneId>>();
            for id in PaneId::ALL {
                assert_eq!(parts(&view).contains(&id), id != PaneId::Slurm, "{id:?} at {w}x{h} without Slurm");
                assert!(parts(&slurm).contains(&id), "{id:?} at {w}x{h} with Slurm");
            }
        }
    }

    #[test]
    fn stale_appears_exactly_when_the_data_is_stale() {
        let view = demo_view();
        let ages = [
            None,
            Some(Duration::from_millis(400)),
            Some(Duration::from_secs(10)),
            Some(Duration::from_millis(10_001)),
            Some(Duration::from_secs(42)),
            Some(Duration::from_secs(4000)),
        ];
        for age in ages {
            let ctx = DrawContext { data_age: age, ..ctx() };
            let stale = chrome::is_stale(&ctx);
            for (w, h) in [(80, 24), (120, 40), (200, 60), (60, 8)] {
                for page in 0..6 {
                    let shown = text(&screen(w, h, page, &view, &ctx));
                    assert_eq!(shown.contains("STALE"), stale, "age {age:?} at {w}x{h} page {page}");
                    if stale && h >= 24 {
                        assert!(shown.contains("no update for"), "age {age:?} at {w}x{h}");
                    }
                    if let Some(age) = age.filter(|_| !stale) {
                        assert!(shown.contains(&format!("data {} old", age_text(age))), "age {age:?} at {w}x{h}");
                    }
                }
            }
        }
        assert!(text(&screen(120, 40, 0, &view, &stale_ctx())).contains("STALE — no update for 42 s"));
    }

    #[test]
    fn stale_panes_are_tagged_and_dimmed() {
        let view = demo_view();
        for (w, h, page) in [(120, 40, 0), (120, 40, 2), (80, 24, 5), (200, 60, 2)] {
            let terminal = screen(w, h, page, &view, &stale_ctx());
            let shown = text(&terminal);
            let parts = pages(Rect::new(0, 0, w, h), &view)[page % page_count(Rect::new(0, 0, w, h), &view)].parts.len();
            assert_eq!(shown.matches(" STALE 42 s ").count(), parts, "{w}x{h} page {page}: one tag per pane\n{shown}");
            // Somewhere in the body a pane's figure is dimmed.
            let buf = terminal.backend().buffer();
            let body_row = h - 3;
            assert!((0..w).all(|x| buf[(x, body_row)].modifier.contains(Modifier::DIM)), "{w}x{h}: the body is not dimmed");
        }
        let fresh = screen(120, 40, 0, &view, &ctx());
        let buf = fresh.backend().buffer();
        assert!(!(0..120).all(|x| buf[(x, 37)].modifier.contains(Modifier::DIM)), "fresh panes are not dimmed");
    }

    #[test]
    fn the_newest_alarm_is_on_every_page_newest_first() {
        let view = demo_view();
        assert!(view.alarms.len() >= 3, "the demo has alarms");
        let newest = &view.alarms[0];
        for (w, h) in [(80, 24), (120, 40), (200, 60)] {
            for page in 0..6 {
                let terminal = screen(w, h, page, &view, &ctx());
                let buf = terminal.backend().buffer();
                let band = (0..h).find(|y| row(buf, *y).contains("▲ ALARM")).expect("an alarm band");
                let first = row(buf, band);
                assert!(first.contains(&newest.text), "{w}x{h} page {page}: {first}");
                assert!(first.contains(&fmt::time_of_day(newest.raised_at)));
                assert!(buf[(0, band)].modifier.contains(Modifier::BOLD), "the band is in the banner style");
            }
        }
        // Only two rows at 80x24: the last says how many did not fit.
        let shown = text(&screen(80, 24, 0, &view, &ctx()));
        assert!(shown.contains(&format!("+{} more", view.alarms.len() - 2)), "{shown}");
        let shown = text(&screen(120, 40, 0, &view, &ctx()));
        assert!(!shown.contains("+1 more") && !shown.contains("+2 more"), "all three fit at 120x40");
        // No alarms: a quiet line.
        let mut calm = view.clone();
        calm.alarms.clear();
        let shown = text(&screen(120, 40, 0, &calm, &ctx()));
        assert!(shown.contains("✓ no active alarms") && !shown.contains("▲ ALARM"));
    }

    #[test]
    fn a_wall_on_a_simulated_engine_says_simulated_at_every_size() {
        let mut view = demo_view();
        view.world = Some("sim".into());
        for (w, h) in [(63, 15), (80, 24), (120, 40), (200, 60)] {
            let shown = text(&screen(w, h, 0, &view, &ctx()));
            assert!(shown.contains("SIMULATED"), "{w}x{h}: {shown}");
        }
        view.world = Some("live".into());
        assert!(!text(&screen(120, 40, 0, &view, &ctx())).contains("SIMULATED"));
    }

    #[test]
    fn a_stale_wall_says_alarms_unknown_and_lists_cleared_alarms_unread() {
        let mut calm = demo_view();
        calm.alarms.clear();
        for (w, h) in [(63, 15), (80, 24), (120, 40), (200, 60)] {
            let shown = text(&screen(w, h, 0, &calm, &stale_ctx()));
            assert!(shown.contains("alarms unknown") && !shown.contains("no active alarms"), "{w}x{h}: {shown}");
            assert!(!shown.contains("✓ no alarms"), "{w}x{h}: a green check under STALE: {shown}");
        }
        let mut missed = demo_view();
        let cleared = missed.alarms[0].raised_at + chrono::TimeDelta::minutes(2);
        missed.alarms[0].cleared_at = Some(cleared);
        crate::room::view::sort_alarms(&mut missed.alarms);
        let shown = text(&screen(120, 40, 0, &missed, &ctx()));
        assert!(shown.contains(&format!("cleared {}, unread", fmt::time_of_day(cleared))), "{shown}");
        let small = text(&screen(80, 24, 0, &missed, &ctx()));
        assert!(small.contains(&format!("▲ {} alarms", missed.alarms.len() - 1)), "only active ones count: {small}");
    }

    #[test]
    fn the_page_wraps_modulo_the_page_count() {
        let view = demo_view();
        for (w, h) in [(120, 40), (200, 60)] {
            let n = page_count(Rect::new(0, 0, w, h), &view);
            for page in 0..n {
                let a = screen(w, h, page, &view, &ctx());
                let b = screen(w, h, page + n, &view, &ctx());
                let c = screen(w, h, page + 7 * n, &view, &ctx());
                assert_eq!(a.backend().buffer(), b.backend().buffer(), "{w}x{h} page {page}");
                assert_eq!(a.backend().buffer(), c.backend().buffer(), "{w}x{h} page {page}");
            }
        }
        let mut wall = WallState { page: usize::MAX, next_in: None };
        wall.advance();
        assert_eq!(wall.page, 0);
        screen(120, 40, usize::MAX, &view, &ctx());
    }

    #[test]
    fn the_monochrome_theme_shows_stale_and_alarms_without_colour() {
        let view = demo_view();
        let ctx = DrawContext { theme: Theme::mono(), ..stale_ctx() };
        for (w, h) in [(80, 24), (120, 40), (200, 60)] {
            let terminal = screen(w, h, 0, &view, &ctx);
            let buf = terminal.backend().buffer();
            for cell in &buf.content {
                assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "colour at {w}x{h}");
            }
            for needle in ["STALE — no update", "▲ ALARM"] {
                let y = (0..h).find(|y| row(buf, *y).contains(needle)).unwrap_or_else(|| panic!("{needle:?} missing at {w}x{h}"));
                for x in 0..w {
                    let m = buf[(x, y)].modifier;
                    assert!(m.contains(Modifier::REVERSED | Modifier::BOLD), "{needle:?} row at {w}x{h}, x {x}: {m:?}");
                }
            }
        }
    }

    #[test]
    fn it_is_read_only_and_says_so() {
        let view = demo_view();
        for (w, h) in [(80, 24), (120, 40)] {
            let shown = text(&screen(w, h, 2, &view, &ctx()));
            assert!(shown.contains("read-only wall · q quits"), "{w}x{h}");
            for hint in ["Tab pane", "? help", "z zoom", "▶ "] {
                assert!(!shown.contains(hint), "{hint:?} on the wall at {w}x{h}");
            }
        }
    }

    #[test]
    fn the_key_figures_are_there_in_words_or_large_type() {
        let view = demo_view();
        let small = text(&screen(80, 24, 0, &view, &ctx()));
        for needle in ["03:00:00 UTC", "data 0.4 s old", "GPUs 23/32 busy", "queue 6", "burn $58.02/h", "▲ 3 alarms"] {
            assert!(small.contains(needle), "{needle:?} missing at 80x24\n{small}");
        }
        let big = text(&screen(120, 40, 0, &view, &ctx()));
        for needle in ["Mon 2020-01-06", "03:00:00 UTC", "SIM seed 1 ×60", "data 0.4 s old", "GPUs busy", "queued", "fleet burn $/h"] {
            assert!(big.contains(needle), "{needle:?} missing at 120x40\n{big}");
        }
        let empty = text(&screen(120, 40, 0, &View::default(), &DrawContext { data_age: None, ..ctx() }));
        assert!(empty.contains("no data yet") && empty.contains("data age unknown"), "{empty}");
    }

    #[test]
    fn no_size_panics_and_nothing_is_drawn_outside_the_area() {
        let demo = demo_view();
        let empty = View::default();
        let widths = [0, 1, 2, 5, 9, 10, 20, 40, 79, 80, 99, 100, 120, 199, 200, 300];
        let heights = [0, 1, 2, 3, 4, 5, 6, 8, 11, 12, 23, 24, 29, 30, 40, 59, 60, 100];
        for ctx in [ctx(), stale_ctx(), DrawContext { data_age: None, ..ctx() }] {
            for view in [&demo, &empty] {
                for &w in &widths {
                    for &h in &heights {
                        let area = Rect::new(3, 2, w, h);
                        let mut buf = Buffer::empty(Rect::new(0, 0, w + 6, h + 4));
                        let wall = WallState { page: (w as usize + h as usize) % 7, next_in: Some(Duration::from_millis(11_500)) };
                        draw_wall(view, &wall, &ctx, area, &mut buf);
                        for (i, cell) in buf.content.iter().enumerate() {
                            let p = Position::new((i % (w as usize + 6)) as u16, (i / (w as usize + 6)) as u16);
                            if !area.contains(p) {
                                assert_eq!(cell, &ratatui::buffer::Cell::default(), "drawn outside at {p:?} for {w}x{h}");
                            }
                        }
                    }
                }
            }
        }
        // An area larger than the buffer is clipped to it.
        let mut buf = Buffer::empty(Rect::new(0, 0, 50, 20));
        draw_wall(&demo, &WallState::default(), &ctx(), Rect::new(10, 5, 300, 100), &mut buf);
    }

    #[test]
    fn the_countdown_shows_when_given() {
        let view = demo_view();
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let wall = WallState { page: 1, next_in: Some(Duration::from_millis(11_200)) };
        terminal.draw(|f| draw_wall(&view, &wall, &ctx(), f.area(), f.buffer_mut())).unwrap();
        assert!(text(&terminal).contains("next: Queue in 12 s"));
    }

    #[test]
    fn ages_read_as_people_say_them() {
        assert_eq!(age_text(Duration::from_millis(400)), "0.4 s");
        assert_eq!(age_text(Duration::from_secs(42)), "42 s");
        assert_eq!(age_text(Duration::from_secs(185)), "3m05s");
    }

    /// A site that is only a Slurm cluster: no nodes of the room's own, no spot pools.
    fn slurm_only() -> View {
        let mut view = View { at: demo_view().at, ..View::default() };
        view.slurm = Some(slurm_cluster(view.at));
        view
    }

    #[test]
    fn a_slurm_site_gets_a_slurm_page_and_its_figures() {
        let view = slurm_view();
        let all = pages(Rect::new(0, 0, 120, 40), &view);
        let titles: Vec<String> = all.iter().map(Page::title).collect();
        assert_eq!(titles, ["Fleet", "GPU memory", "Slurm", "Queue", "Spot market", "Budgets", "Alarms & log"]);
        let slurm_page = titles.iter().position(|t| t == "Slurm").unwrap_or_default();
        let shown = text(&screen(120, 40, slurm_page, &view, &ctx()));
        assert!(shown.contains("gpuroom-ci") && shown.contains("llama-70b-sft"), "the Slurm pane is drawn:\n{shown}");
        assert!(
            shown.contains("Slurm GPUs busy") && shown.contains(" GPUs busy ") && shown.contains("fleet burn $/h"),
            "both GPU counts and the burn in large type:\n{shown}"
        );
        let s = view.slurm.as_ref().map(|s| s.totals()).unwrap_or_default();
        let small = text(&screen(80, 24, slurm_page, &view, &ctx()));
        assert!(small.contains(&format!("Slurm GPUs {}/{}", s.gpus_used, s.gpus)), "{small}");
        assert!(small.contains(&format!("GPUs {}/{} busy", view.cluster.gpus_busy, view.cluster.gpus_total)), "the room's own GPUs stay: {small}");
        let paired: Vec<String> = pages(Rect::new(0, 0, 200, 60), &view).iter().map(Page::title).collect();
        assert_eq!(paired, ["Fleet + GPU memory", "Slurm", "Queue + Spot market", "Budgets + Alarms & log"]);
    }

    #[test]
    fn a_slurm_only_site_spends_no_page_on_empty_panes_and_no_figure_on_zero_gpus() {
        let view = slurm_only();
        let titles: Vec<String> = pages(Rect::new(0, 0, 120, 40), &view).iter().map(Page::title).collect();
        assert_eq!(titles, ["Slurm", "Queue", "Budgets", "Alarms & log"]);
        let paired: Vec<String> = pages(Rect::new(0, 0, 200, 60), &view).iter().map(Page::title).collect();
        assert_eq!(paired, ["Slurm", "Queue", "Budgets + Alarms & log"]);
        let s = view.slurm.as_ref().map(|s| s.totals()).unwrap_or_default();
        for (w, h) in [(120, 40), (200, 60)] {
            let shown = text(&screen(w, h, 0, &view, &ctx()));
            assert!(
                shown.contains("Slurm pending") && shown.matches("GPUs busy").count() == 1 && shown.contains("Slurm GPUs busy"),
                "{w}x{h}: Slurm's figures only:\n{shown}"
            );
        }
        let small = text(&screen(80, 24, 0, &view, &ctx()));
        assert!(small.contains(&format!("Slurm GPUs {}/{} · pending {}", s.gpus_used, s.gpus, s.pending)), "{small}");
        assert!(!small.contains("0/0") && !small.contains("queue 0"), "no 0/0 GPUs on a Slurm site:\n{small}");
    }
}
