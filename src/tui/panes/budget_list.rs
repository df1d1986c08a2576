//! The budgets pane's component: the selected tenant (followed by name as
//! the table changes), and what the pane's keys do — move the selection,
//! and `a` to open the approval form for the selected tenant.
//!
//! Owns this selection only. Must not import the App: `a` hands back a
//! `Request` that opens the form (the App owns the modes).

use super::keys::{KeyInput, KeyPane};
use crate::domain::ids::TenantId;
use crate::room::View;
use crate::tui::command_bar::Intent;
use crate::tui::commands::Act;
use crate::tui::request::Request;
use crate::tui::selection::Follow;

#[derive(Clone, Debug, Default)]
pub struct BudgetList {
    tenants: Follow<String>,
}

fn tenant_keys(view: &View) -> Vec<String> {
    view.budgets.iter().map(|b| b.tenant.clone()).collect()
}

impl BudgetList {
    /// Index into `view.budgets` of the selected tenant.
    pub fn selected(&self, view: &View) -> Option<usize> {
        self.tenants.position(&tenant_keys(view))
    }
}

impl KeyPane for BudgetList {
    /// What a key does while the budgets pane has the focus; `page` is what
    /// PgUp/PgDn move by (the pane keeps no scroll window of its own). `None`
    /// when the key is not the pane's.
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request> {
        let KeyInput { act, page, view, .. } = input;
        if let Some(step) = act.step() {
            self.tenants.move_by(&tenant_keys(view), step.delta(1, page));
            return Some(Request::Nothing);
        }
        match act {
            Act::Approve => Some(match self.selected(view) {
                Some(i) => Request::Run(Intent::ApproveForm(TenantId(view.budgets[i].tenant.clone()))),
                None => Request::hint("no tenant"),
            }),
            _ => None,
        }
    }
}
