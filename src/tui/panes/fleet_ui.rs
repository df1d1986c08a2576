//! The fleet pane's component: `FleetUi`, the cursor and the drill-down the
//! App keeps, what moving them means, and what the fleet's keys do to them.
//!
//! Owns this state only. Both follow the node by id as the view changes;
//! the only thing written while drawing is the drawn shape (`Drawn`), so
//! that paging moves by what is on screen. Must not import the App: it hands
//! back a `Request` instead.

use std::cell::Cell;

use super::keys::{KeyInput, KeyPane};
use crate::domain::event::Action;
use crate::domain::ids::NodeId;
use crate::room::View;
use crate::room::view::NodeView;
use crate::tui::commands::Act;
use crate::tui::request::Request;

/// The fleet pane's UI state, held by `App`: which node is selected (moved
/// while the fleet pane has the focus) and which one is drilled into. Both
/// follow the node by id as the view changes; when the node is gone the
/// cursor falls back to the index it was at, so it lands on a neighbour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetUi {
    pub cursor: Option<NodeId>,
    pub drill: Option<NodeId>,
    /// Index of the cursor when it last moved (for when its node is gone).
    at: usize,
    /// What the last frame showed, for paging by what is on screen.
    drawn: Cell<Drawn>,
}

/// The shape of the last drawn picture.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Drawn {
    /// Nodes on one drawn line (1 in the table, several in the grid).
    pub per_line: usize,
    /// Nodes on screen.
    pub on_screen: usize,
}

impl FleetUi {
    /// Index in `view.nodes` of the cursor: its node while it is there, else
    /// the nearest index; the first node before any move; `None` for no nodes.
    pub fn cursor_index(&self, view: &View) -> Option<usize> {
        let last = view.nodes.len().checked_sub(1)?;
        if let Some(id) = self.cursor
            && let Some(i) = view.nodes.iter().position(|n| n.id == id)
        {
            return Some(i);
        }
        Some(self.at.min(last))
    }

    /// The node under the cursor.
    pub fn selected_node<'a>(&self, view: &'a View) -> Option<&'a NodeView> {
        self.cursor_index(view).map(|i| &view.nodes[i])
    }

    /// Moves the cursor by `delta` nodes in the order drawn (the `View`'s),
    /// stopping at either end. Drilled in, the detail follows the cursor, so
    /// the same keys page through nodes there.
    pub fn move_by(&mut self, view: &View, delta: isize) {
        let Some(i) = self.cursor_index(view) else { return };
        let j = (i as isize).saturating_add(delta).clamp(0, view.nodes.len() as isize - 1) as usize;
        self.cursor = Some(view.nodes[j].id);
        self.at = j;
        if self.drill.is_some() {
            self.drill = self.cursor;
        }
    }

    /// Drills into the cursor's node (nothing without nodes).
    pub fn enter(&mut self, view: &View) {
        if let Some(i) = self.cursor_index(view) {
            self.cursor = Some(view.nodes[i].id);
            self.at = i;
            self.drill = self.cursor;
        }
    }

    /// Leaves the drill-down; false when not drilled in, so that the key
    /// (Esc) can mean something else then.
    pub fn leave(&mut self) -> bool {
        self.drill.take().is_some()
    }

    /// Nodes on one drawn line as last drawn: 1 in the table and the detail,
    /// several in the grid. For ↑↓ to move by a line of the grid.
    pub fn line_len(&self) -> isize {
        self.drawn.get().per_line.max(1) as isize
    }

    /// Nodes on screen as last drawn, for PgUp/PgDn.
    pub fn page_len(&self) -> isize {
        self.drawn.get().on_screen.max(1) as isize
    }

    /// Records what the frame just drawn showed.
    pub(super) fn set_drawn(&self, drawn: Drawn) {
        self.drawn.set(drawn);
    }
}

impl KeyPane for FleetUi {
    /// What a key does while the fleet pane has the focus: ↑↓ move by a
    /// drawn line, PgUp/PgDn by what is on screen, Enter drills in, Esc
    /// backs out of a drill-down. `None` when the key is not the fleet's
    /// (Esc when not drilled in means something else to the App).
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request> {
        let KeyInput { act, view, .. } = input;
        if let Some(step) = act.step() {
            self.move_by(view, step.delta(self.line_len(), self.page_len()));
            return Some(Request::Nothing);
        }
        match act {
            Act::ApproveCapacity => {
                let oldest = view.capacity.as_ref().and_then(|c| c.proposals.first());
                return Some(match oldest {
                    Some(p) => Request::Propose(Action::ApproveCapacity { proposal: p.id }),
                    None => Request::hint("no capacity proposal waits (the room proposes in advisory mode)"),
                });
            }
            Act::Enter => self.enter(view),
            Act::Close if self.leave() => {}
            _ => return None,
        }
        Some(Request::Nothing)
    }
}
