//! One way into every pane that takes keys: the same input (`KeyInput`)
//! and the same answer (`Option<Request>`), so the App routes a key to
//! whichever pane has focus without knowing which one it is.
//!
//! Owns the signature only; what a key does is each pane's.

use crate::room::View;
use crate::tui::commands::Act;
use crate::tui::job_order::JobOrder;
use crate::tui::request::Request;

/// What a pane is given with a key.
#[derive(Copy, Clone)]
pub struct KeyInput<'a> {
    pub act: Act,
    /// The job table's page as drawn last (panes with no scroll window of
    /// their own page by it).
    pub page: isize,
    /// The job table's order and filter (the App's, not a pane's).
    pub order: &'a JobOrder,
    pub view: &'a View,
}

/// A pane that takes keys. `None`: the key is not this pane's.
pub trait KeyPane {
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request>;
}
