//! Where everything goes, from 80×24 (or less: never refused) to 300×100.
//!
//! Wide layout (≥ 180 wide, body ≥ 40 rows): two columns, each split on
//! its own — fleet, queue, budget on the left; memory, market, alarms & log
//! on the right — so that the queue takes every row the fleet and the
//! budgets do not need, and the alarms & log pane at least a third of the
//! height instead of the budget band's few rows.
//! Full layout (≥ 100 wide, body ≥ 28 rows): fleet | memory on top, queue |
//! market in the middle, budget | log at the bottom. Compact: the same three
//! bands with budget alone at the bottom (the newest alarm stays in the strip
//! under the header); focusing the alarms pane there gives it the budget's
//! place. With a Slurm cluster attached the Slurm pane takes the queue's
//! place (gpuroom's own queue is usually empty at a Slurm site), and the
//! queue takes it back while it has the focus. Narrow (< 60 wide): the panes
//! stacked. Zoom gives the focused pane the whole body. Band heights follow
//! what the `View` holds (nodes, tenants, Slurm's rows) within bounds, the
//! queue takes the rest.
//!
//! Pure geometry: no drawing, no styles.

use ratatui::layout::{Constraint, Layout, Rect};

use super::app::App;
use super::pane_id::PaneId;
use crate::room::View;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Areas {
    pub header: Rect,
    pub strip: Rect,
    pub footer: Rect,
    pub fleet: Rect,
    pub memory: Rect,
    pub queue: Rect,
    pub market: Rect,
    pub budget: Rect,
    /// The alarms & log pane, in the full layout only.
    pub log: Option<Rect>,
    /// The Slurm pane, when a cluster is attached (or the pane has the focus).
    pub slurm: Option<Rect>,
}

impl Areas {
    pub fn pane(&self, id: PaneId) -> Rect {
        match id {
            PaneId::Fleet => self.fleet,
            PaneId::Memory => self.memory,
            PaneId::Queue => self.queue,
            PaneId::Market => self.market,
            PaneId::Budget => self.budget,
            PaneId::Alarms => self.log.unwrap_or_default(),
            PaneId::Slurm => self.slurm.unwrap_or_default(),
        }
    }

    fn pane_mut(&mut self, id: PaneId) -> &mut Rect {
        match id {
            PaneId::Fleet => &mut self.fleet,
            PaneId::Memory => &mut self.memory,
            PaneId::Queue => &mut self.queue,
            PaneId::Market => &mut self.market,
            PaneId::Budget => &mut self.budget,
            PaneId::Alarms => self.log.get_or_insert_default(),
            PaneId::Slurm => self.slurm.get_or_insert_default(),
        }
    }
}

/// Rows a band wants, kept between `min` and `share` of the body.
fn band(want: usize, min: u16, body: u16, share: f64) -> u16 {
    let cap = ((f64::from(body) * share) as u16).max(min);
    (want.min(u16::MAX as usize) as u16).clamp(min, cap)
}

fn split(area: Rect, left_percent: u16) -> [Rect; 2] {
    area.layout(&Layout::horizontal([Constraint::Percentage(left_percent), Constraint::Fill(1)]))
}

pub fn compute(area: Rect, app: &App, view: &View) -> Areas {
    let mut a = Areas::default();
    let h = area.height;
    // Chrome first: header always, footer from 3 rows, alarm strip from 10.
    let header = u16::from(h >= 1);
    let footer = u16::from(h >= 3);
    let strip = u16::from(h >= 10);
    let [hd, st, body, ft] =
        area.layout(&Layout::vertical([Constraint::Length(header), Constraint::Length(strip), Constraint::Fill(1), Constraint::Length(footer)]));
    (a.header, a.strip, a.footer) = (hd, st, ft);
    if body.is_empty() {
        return a;
    }
    if app.zoom {
        *a.pane_mut(app.focus) = body;
        return a;
    }
    let nodes = view.nodes.len();
    let up = view.nodes.iter().filter(|n| n.up).count();
    let shared = view.nodes.iter().filter(|n| n.up).flat_map(|n| &n.gpus).filter(|g| !g.exclusive && !g.jobs.is_empty()).count();
    let tenants = view.budgets.len();
    let slurm = view.slurm.is_some() || app.focus == PaneId::Slurm;
    if area.width < 60 {
        let stacked: Vec<PaneId> = PaneId::ALL.into_iter().filter(|p| *p != PaneId::Slurm || slurm).collect();
        let parts = body.layout_vec(&Layout::vertical(vec![Constraint::Fill(1); stacked.len()]));
        for (id, r) in stacked.into_iter().zip(parts.iter()) {
            *a.pane_mut(id) = *r;
        }
        return a;
    }
    if area.width >= 180 && body.height >= 40 {
        return wide(a, body, app, view);
    }
    let full = area.width >= 100 && body.height >= 28;
    let (top, bottom) = if full {
        let fleet = nodes + 3;
        let memory = up + shared + 3;
        (band(fleet.max(memory), 5, body.height, 0.4), band(tenants + 5, 5, body.height, 0.3))
    } else {
        (band(nodes + 3, 4, body.height, 0.35), band(tenants + 3, 3, body.height, 0.3))
    };
    // The middle band takes what the queue and the charts want; on a tall
    // screen the rows beyond that are shared with the budget and log band.
    let rest = body.height.saturating_sub(top + bottom);
    let (middle, bottom) = if full {
        let queue = 1 + (view.queue.by_tenant.len() + 1) + 1 + view.jobs.len() + 2;
        let market = view.market.len() * 9 + 2;
        let slurm = view.slurm.as_ref().map_or(0, |s| 1 + s.partitions.len() + s.nodes.len() + 1 + 1 + s.jobs.len() + 2);
        let want = (queue.max(market).max(slurm).min(u16::MAX as usize) as u16).min(rest);
        let middle = want + (rest - want) / 2;
        (middle, body.height - top - middle)
    } else {
        (rest, bottom)
    };
    let [t, m, b] = body.layout(&Layout::vertical([Constraint::Length(top), Constraint::Length(middle), Constraint::Length(bottom)]));
    [a.fleet, a.memory] = split(t, 58);
    [a.queue, a.market] = split(m, if full { 64 } else { 58 });
    if slurm && app.focus != PaneId::Queue {
        a.slurm = Some(std::mem::take(&mut a.queue));
    }
    if full {
        let [budget, log] = split(b, 64);
        a.budget = budget;
        a.log = Some(log);
    } else if app.focus == PaneId::Alarms {
        a.log = Some(b);
    } else {
        a.budget = b;
    }
    a
}

/// Two columns, each split on its own (see the module's doc).
fn wide(mut a: Areas, body: Rect, app: &App, view: &View) -> Areas {
    let up = view.nodes.iter().filter(|n| n.up).count();
    let shared = view.nodes.iter().filter(|n| n.up).flat_map(|n| &n.gpus).filter(|g| !g.exclusive && !g.jobs.is_empty()).count();
    let top = band((view.nodes.len() + 3).max(up + shared + 3), 5, body.height, 0.35);
    let budget = band(view.budgets.len() + 5, 5, body.height, 0.25);
    // The alarms & log pane: a third of the body at least; the market
    // what its pools want, within what is left.
    let log_min = body.height / 3;
    let market_want = (view.market.len() * 9 + 2).min(u16::MAX as usize) as u16;
    let market = market_want.clamp(5, body.height.saturating_sub(top + log_min).max(5));
    let [left, right] = split(body, 62);
    [a.fleet, a.queue, a.budget] = left.layout(&Layout::vertical([Constraint::Length(top), Constraint::Fill(1), Constraint::Length(budget)]));
    let [memory, market, log] = right.layout(&Layout::vertical([Constraint::Length(top), Constraint::Length(market), Constraint::Fill(1)]));
    (a.memory, a.market, a.log) = (memory, market, Some(log));
    if (view.slurm.is_some() || app.focus == PaneId::Slurm) && app.focus != PaneId::Queue {
        a.slurm = Some(std::mem::take(&mut a.queue));
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::{demo_view, slurm_view};

    fn all(a: &Areas) -> Vec<Rect> {
        let mut v = vec![a.header, a.strip, a.footer];
        v.extend([PaneId::Fleet, PaneId::Memory, PaneId::Queue, PaneId::Market, PaneId::Budget].map(|p| a.pane(p)));
        v.extend(a.log);
        v.extend(a.slurm);
        v
    }

    fn no_overlaps(area: Rect, a: &Areas, what: &str) {
        let rects = all(a);
        for (i, x) in rects.iter().enumerate() {
            assert!(area.contains(x.as_position()) || x.is_empty(), "{x:?} outside {area:?} ({what})");
            assert_eq!(x.intersection(area), *x);
            for y in &rects[i + 1..] {
                assert!(!x.intersects(*y), "{x:?} overlaps {y:?} ({what})");
            }
        }
    }

    const SIZES: [(u16, u16); 6] = [(80, 24), (100, 30), (120, 40), (160, 48), (200, 60), (300, 100)];

    #[test]
    fn every_pane_shows_from_80x24_up_and_nothing_overlaps() {
        let view = demo_view();
        let app = App::new();
        for (w, h) in SIZES {
            let area = Rect::new(0, 0, w, h);
            let a = compute(area, &app, &view);
            for id in PaneId::ALL.into_iter().filter(|p| *p != PaneId::Slurm && (*p != PaneId::Alarms || w >= 120)) {
                let r = a.pane(id);
                assert!(r.width >= 20 && r.height >= 3, "{id:?} too small at {w}x{h}: {r:?}");
            }
            let focused = compute(area, &App::with_focus(PaneId::Alarms), &view);
            assert!(focused.pane(PaneId::Alarms).height >= 3, "a focused alarms pane shows at {w}x{h}");
            no_overlaps(area, &a, &format!("{w}x{h}"));
            assert_eq!(a.log.is_some(), w >= 120, "log pane at {w}x{h}");
            assert_eq!(a.slurm, None, "no Slurm pane without a cluster at {w}x{h}");
        }
    }

    #[test]
    fn the_slurm_pane_takes_the_queues_place_until_the_queue_has_the_focus() {
        let view = slurm_view();
        for (w, h) in SIZES {
            let area = Rect::new(0, 0, w, h);
            let plain = compute(area, &App::new(), &demo_view());
            for focus in PaneId::ALL {
                let a = compute(area, &App::with_focus(focus), &view);
                no_overlaps(area, &a, &format!("{w}x{h} focus {focus:?}"));
                let place = if focus == PaneId::Queue { a.queue } else { a.pane(PaneId::Slurm) };
                assert!(place.width >= 20 && place.height >= 3, "{w}x{h} focus {focus:?}: {place:?}");
                assert_eq!(place.width, plain.queue.width, "{w}x{h}: the queue's width");
                if focus == PaneId::Queue {
                    assert_eq!(a.slurm, None, "{w}x{h}: the focused queue takes its place back");
                } else {
                    assert!(a.queue.is_empty(), "{w}x{h} focus {focus:?}: the queue gives way");
                }
            }
        }
        // On a tall screen the middle band grows to show the Slurm jobs.
        let a = compute(Rect::new(0, 0, 160, 48), &App::new(), &view);
        let s = view.slurm.as_ref().unwrap();
        assert!(a.pane(PaneId::Slurm).height as usize >= 2 + 1 + s.partitions.len() + s.nodes.len() + 1 + 1 + s.jobs.len(), "{a:?}");
    }

    #[test]
    fn narrow_screens_stack_the_slurm_pane_too() {
        let view = slurm_view();
        let area = Rect::new(0, 0, 50, 40);
        let a = compute(area, &App::new(), &view);
        no_overlaps(area, &a, "50x40");
        for id in PaneId::ALL {
            assert!(a.pane(id).height >= 3 && a.pane(id).width == 50, "{id:?}: {:?}", a.pane(id));
        }
        assert_eq!(compute(area, &App::new(), &demo_view()).slurm, None);
    }

    /// Issue 35, item 11: at 200×60 the alarms & log pane and the queue get
    /// the rows that the fleet's empty columns and the budget band took.
    #[test]
    fn wide_screens_give_the_log_a_third_and_the_queue_the_rest_of_its_column() {
        let view = demo_view();
        for (w, h) in [(200, 60), (300, 100)] {
            let area = Rect::new(0, 0, w, h);
            let a = compute(area, &App::new(), &view);
            no_overlaps(area, &a, &format!("{w}x{h}"));
            let body = h - 3;
            let log = a.log.unwrap();
            assert!(log.height >= body / 3, "{w}x{h}: the log has {} of {body} rows", log.height);
            assert_eq!(a.queue.height, body - a.fleet.height - a.budget.height, "{w}x{h}: the queue takes the rest of its column");
            assert_eq!((a.queue.x, a.queue.width), (a.fleet.x, a.fleet.width), "one column");
            // Before: the budget and log band had 8 rows at 200x60.
            assert!(log.height > 8 && a.queue.height >= 30, "{w}x{h}: {a:?}");
        }
        let narrower = compute(Rect::new(0, 0, 160, 48), &App::new(), &view);
        assert_eq!(narrower.log.unwrap().y, narrower.budget.y, "below 180 wide, the three bands as before");
    }

    #[test]
    fn zoom_gives_the_focused_pane_the_body() {
        let view = demo_view();
        let mut app = App::with_focus(PaneId::Market);
        app.zoom = true;
        let a = compute(Rect::new(0, 0, 80, 24), &app, &view);
        assert_eq!(a.market, Rect::new(0, 2, 80, 21));
        assert!(a.fleet.is_empty() && a.queue.is_empty());
        let mut app = App::with_focus(PaneId::Slurm);
        app.zoom = true;
        let a = compute(Rect::new(0, 0, 80, 24), &app, &slurm_view());
        assert_eq!(a.slurm, Some(Rect::new(0, 2, 80, 21)));
        assert!(a.queue.is_empty() && a.market.is_empty());
    }
}
