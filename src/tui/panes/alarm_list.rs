//! The alarms pane's component: the selected alarm (followed by id), the
//! toggle between the event log and the audit trail, and what the pane's
//! keys do — move the selection, `a` to acknowledge the selected alarm, `l`
//! to toggle the audit trail. Also `AlarmsUi`, what the pane is drawn with.
//!
//! Owns this state only; `log` draws the pane. Must not import the App: `a`
//! hands back a `Request` (acknowledging needs no confirmation, so it is
//! sent as it is).

use super::keys::{KeyInput, KeyPane};
use crate::domain::event::Action;
use crate::room::View;
use crate::tui::commands::Act;
use crate::tui::request::Request;
use crate::tui::selection::Follow;

/// The pane's UI state, as drawn.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AlarmsUi {
    /// Index into `View::alarms`.
    pub selected: Option<usize>,
    /// The audit trail instead of the event log under the alarms.
    pub audit: bool,
}

#[derive(Clone, Debug, Default)]
pub struct AlarmList {
    alarms: Follow<String>,
    /// The alarms pane shows the audit trail instead of the event log.
    pub audit: bool,
}

fn alarm_keys(view: &View) -> Vec<String> {
    view.alarms.iter().map(|a| a.id.clone()).collect()
}

impl AlarmList {
    /// What the pane is drawn with; the selection shows only while it has
    /// the focus.
    pub fn ui(&self, view: &View, focused: bool) -> AlarmsUi {
        AlarmsUi { selected: self.alarms.position(&alarm_keys(view)).filter(|_| focused), audit: self.audit }
    }
}

impl KeyPane for AlarmList {
    /// What a key does while the alarms pane has the focus; `page` is what
    /// PgUp/PgDn move by (the pane keeps no scroll window of its own). `None`
    /// when the key is not the pane's.
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request> {
        let KeyInput { act, page, view, .. } = input;
        if let Some(step) = act.step() {
            self.alarms.move_by(&alarm_keys(view), step.delta(1, page));
            return Some(Request::Nothing);
        }
        match act {
            Act::ToggleAudit => {
                self.audit = !self.audit;
                Some(Request::Nothing)
            }
            Act::Acknowledge => Some(match self.alarms.position(&alarm_keys(view)) {
                Some(i) => Request::Propose(Action::AcknowledgeAlarm { id: view.alarms[i].id.clone() }),
                None => Request::hint("no active alarm"),
            }),
            _ => None,
        }
    }
}
