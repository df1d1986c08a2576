//! UI state of the console — focus, job selection, help, zoom — and what keys
//! do to it (`App::on_key`).
//!
//! Owns only presentation state. It reads the `View` to keep the selection on
//! the same job as the table changes, and must never change the `View` or
//! decide anything about jobs: operator actions go to the engine (later).

use std::cell::Cell;

use ratatui::crossterm::event::{KeyEvent, KeyEventKind};

use super::commands::{self, Act};
use crate::core::ids::JobId;
use crate::core::View;

/// The five panes, in focus (Tab) order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PaneId {
    #[default]
    Fleet,
    Memory,
    Queue,
    Market,
    Budget,
}

impl PaneId {
    pub const ALL: [PaneId; 5] = [PaneId::Fleet, PaneId::Memory, PaneId::Queue, PaneId::Market, PaneId::Budget];

    pub fn title(self) -> &'static str {
        match self {
            PaneId::Fleet => "Fleet",
            PaneId::Memory => "GPU memory",
            PaneId::Queue => "Queue",
            PaneId::Market => "Spot market",
            PaneId::Budget => "Budgets",
        }
    }

    fn position(self) -> usize {
        PaneId::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }

    pub fn next(self) -> PaneId {
        PaneId::ALL[(self.position() + 1) % PaneId::ALL.len()]
    }

    pub fn prev(self) -> PaneId {
        PaneId::ALL[(self.position() + PaneId::ALL.len() - 1) % PaneId::ALL.len()]
    }
}

/// What the run loop does after a key.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Control {
    Continue,
    Quit,
}

/// The rows of the job table on screen, written while drawing so that
/// scrolling is sticky and PgUp/PgDn move by what is visible.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub offset: usize,
    pub rows: usize,
}

#[derive(Clone, Debug, Default)]
pub struct App {
    pub focus: PaneId,
    pub help: bool,
    /// The focused pane fills the body.
    pub zoom: bool,
    /// The selected job, followed by id while the table changes.
    selected: Option<JobId>,
    /// Where the selection was, used when the selected job is gone.
    selected_at: usize,
    pub(crate) queue_window: Cell<Window>,
    /// Fleet pane: selected node and drill-down.
    pub fleet: super::panes::fleet::FleetUi,
}

impl App {
    pub fn new() -> App {
        App::default()
    }

    /// A fresh console with the focus on `pane`.
    pub fn with_focus(pane: PaneId) -> App {
        App { focus: pane, ..App::default() }
    }

    /// Index of the selected row of `view.jobs`: the selected job if it is
    /// still there, else the row at the same place; `None` for no jobs.
    pub fn selected_index(&self, view: &View) -> Option<usize> {
        if view.jobs.is_empty() {
            return None;
        }
        if let Some(id) = self.selected
            && let Some(i) = view.jobs.iter().position(|j| j.id == id)
        {
            return Some(i);
        }
        Some(self.selected_at.min(view.jobs.len() - 1))
    }

    /// The selected job's id, if any.
    pub fn selected_job(&self, view: &View) -> Option<JobId> {
        self.selected_index(view).map(|i| view.jobs[i].id)
    }

    fn select(&mut self, view: &View, index: isize) {
        if view.jobs.is_empty() {
            return;
        }
        let i = index.clamp(0, view.jobs.len() as isize - 1) as usize;
        self.selected = Some(view.jobs[i].id);
        self.selected_at = i;
    }

    fn page(&self) -> isize {
        self.queue_window.get().rows.max(1) as isize
    }

    pub fn on_key(&mut self, key: KeyEvent, view: &View) -> Control {
        if key.kind == KeyEventKind::Release {
            return Control::Continue;
        }
        let Some(command) = commands::lookup(&key) else { return Control::Continue };
        if self.help && !matches!(command.act, Act::Help | Act::Close | Act::Quit) {
            return Control::Continue;
        }
        if !command.enabled(self) {
            return Control::Continue;
        }
        let current = self.selected_index(view).map(|i| i as isize).unwrap_or(-1);
        match command.act {
            Act::Quit => return Control::Quit,
            Act::Help => self.help = !self.help,
            Act::Close => {
                if self.help {
                    self.help = false;
                } else {
                    self.zoom = false;
                }
            }
            Act::FocusNext => self.focus = self.focus.next(),
            Act::FocusPrev => self.focus = self.focus.prev(),
            Act::Zoom => self.zoom = !self.zoom,
            Act::Up => self.select(view, current - 1),
            Act::Down => self.select(view, current + 1),
            Act::PageUp => self.select(view, current - self.page()),
            Act::PageDown => self.select(view, current + self.page()),
            Act::Top => self.select(view, 0),
            Act::Bottom => self.select(view, isize::MAX / 2),
        }
        Control::Continue
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};

    use super::*;
    use crate::tui::fixture::demo_view;

    fn press(app: &mut App, view: &View, code: KeyCode) -> Control {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE), view)
    }

    #[test]
    fn only_q_and_ctrl_c_quit() {
        let view = demo_view();
        let mut app = App::new();
        assert_eq!(press(&mut app, &view, KeyCode::Esc), Control::Continue);
        assert_eq!(press(&mut app, &view, KeyCode::Char('x')), Control::Continue);
        assert_eq!(press(&mut app, &view, KeyCode::Char('q')), Control::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.on_key(ctrl_c, &view), Control::Quit);
    }

    #[test]
    fn tab_cycles_focus_both_ways() {
        let view = demo_view();
        let mut app = App::new();
        let mut seen = vec![app.focus];
        for _ in 0..5 {
            press(&mut app, &view, KeyCode::Tab);
            seen.push(app.focus);
        }
        assert_eq!(seen, [PaneId::Fleet, PaneId::Memory, PaneId::Queue, PaneId::Market, PaneId::Budget, PaneId::Fleet]);
        app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &view);
        assert_eq!(app.focus, PaneId::Budget);
    }

    #[test]
    fn down_moves_the_selection_and_stops_at_the_end() {
        let view = demo_view();
        let n = view.jobs.len();
        assert!(n >= 3);
        let mut app = App { focus: PaneId::Queue, ..App::default() };
        assert_eq!(app.selected_index(&view), Some(0));
        press(&mut app, &view, KeyCode::Down);
        assert_eq!(app.selected_index(&view), Some(1));
        press(&mut app, &view, KeyCode::Char('j'));
        assert_eq!(app.selected_index(&view), Some(2));
        for _ in 0..n + 5 {
            press(&mut app, &view, KeyCode::Down);
        }
        assert_eq!(app.selected_index(&view), Some(n - 1));
        press(&mut app, &view, KeyCode::Home);
        assert_eq!(app.selected_index(&view), Some(0));
        press(&mut app, &view, KeyCode::Up);
        assert_eq!(app.selected_index(&view), Some(0));
        press(&mut app, &view, KeyCode::End);
        assert_eq!(app.selected_job(&view), Some(view.jobs[n - 1].id));
    }

    #[test]
    fn selection_keys_need_the_queue_focus() {
        let view = demo_view();
        let mut app = App::new();
        press(&mut app, &view, KeyCode::Down);
        assert_eq!(app.selected_index(&view), Some(0));
    }

    #[test]
    fn selection_follows_the_job_and_survives_an_empty_view() {
        let view = demo_view();
        let mut app = App { focus: PaneId::Queue, ..App::default() };
        press(&mut app, &view, KeyCode::Down);
        let id = app.selected_job(&view).unwrap();
        let mut moved = view.clone();
        moved.jobs.remove(0);
        assert_eq!(app.selected_job(&moved), Some(id));
        let empty = View::default();
        assert_eq!(app.selected_index(&empty), None);
        press(&mut app, &empty, KeyCode::Down);
        assert_eq!(app.selected_index(&empty), None);
    }

    #[test]
    fn help_and_zoom_close_with_esc() {
        let view = demo_view();
        let mut app = App::new();
        press(&mut app, &view, KeyCode::Char('z'));
        press(&mut app, &view, KeyCode::Char('?'));
        assert!(app.help && app.zoom);
        press(&mut app, &view, KeyCode::Tab);
        assert_eq!(app.focus, PaneId::Fleet, "keys under the help overlay do nothing");
        press(&mut app, &view, KeyCode::Esc);
        assert!(!app.help && app.zoom);
        press(&mut app, &view, KeyCode::Esc);
        assert!(!app.zoom);
        assert_eq!(press(&mut app, &view, KeyCode::Esc), Control::Continue);
        press(&mut app, &view, KeyCode::Char('?'));
        press(&mut app, &view, KeyCode::Char('?'));
        assert!(!app.help);
    }
}
