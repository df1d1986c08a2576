//! The queue pane's component: the selected job (followed by id as the
//! table changes) and the table's scroll window, and what the queue's keys
//! do with them — move the selection, and preempt, requeue, cancel or
//! migrate the selected job.
//!
//! Owns this state only. The job table's order and filter are the App's
//! (`JobOrder`: the command bar, the filter mode and Esc from any pane
//! change them) and are handed in. Must not import the App: a key hands
//! back a `Request` (an action to confirm, the pool picker, a hint).

use std::cell::Cell;

use super::keys::{KeyInput, KeyPane};
use crate::domain::event::Action;
use crate::domain::ids::JobId;
use crate::room::View;
use crate::tui::command_bar::Intent;
use crate::tui::commands::Act;
use crate::tui::job_order::JobOrder;
use crate::tui::request::Request;
use crate::tui::selection::{Follow, Window};

#[derive(Clone, Debug, Default)]
pub struct QueueList {
    jobs: Follow<JobId>,
    /// The pane shows the selected job's detail (`Enter`; `Esc` back).
    detail: bool,
    /// The table's rows on screen, written while drawing.
    window: Cell<Window>,
}

fn job_keys(view: &View, rows: &[usize]) -> Vec<JobId> {
    rows.iter().map(|i| view.jobs[*i].id).collect()
}

impl QueueList {
    /// Position among `rows` (indices into `view.jobs`, as shown) of the
    /// selected job.
    pub fn selected_row(&self, view: &View, rows: &[usize]) -> Option<usize> {
        self.jobs.position(&job_keys(view, rows))
    }

    /// The selected job's id, among the rows `order` shows.
    pub fn selected_job(&self, view: &View, order: &JobOrder) -> Option<JobId> {
        let rows = order.rows(view);
        self.selected_row(view, &rows).map(|p| view.jobs[rows[p]].id)
    }

    /// The job the operator selected when it is no longer among the rows
    /// shown (it ended, or the filter hides it).
    pub fn left_job(&self, view: &View, rows: &[usize]) -> Option<JobId> {
        self.jobs.left(&job_keys(view, rows)).copied()
    }

    /// The job the operator picked among `keys` (the rows shown): `Err`
    /// with it when it has left them, `Ok(None)` when there is none.
    fn picked(&self, keys: &[JobId]) -> Result<Option<JobId>, JobId> {
        match self.jobs.left(keys) {
            Some(gone) => Err(*gone),
            None => Ok(self.jobs.position(keys).map(|p| keys[p])),
        }
    }

    /// The job whose detail the pane shows, if it is open: the one the
    /// operator opened, even once it has left the table.
    pub fn detail(&self, view: &View, order: &JobOrder) -> Option<JobId> {
        if !self.detail {
            return None;
        }
        self.picked(&job_keys(view, &order.rows(view))).unwrap_or_else(Some)
    }

    /// The scroll window the pane writes while drawing.
    pub fn window(&self) -> &Cell<Window> {
        &self.window
    }

    /// Rows on screen as last drawn, for PgUp/PgDn.
    pub fn page(&self) -> isize {
        self.window.get().page()
    }
}

impl KeyPane for QueueList {
    /// What a key does while the queue has the focus; `None` when the key
    /// is not the queue's.
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request> {
        let KeyInput { act, order, view, .. } = input;
        match act {
            Act::Close if self.detail => {
                self.detail = false;
                return Some(Request::Nothing);
            }
            Act::Enter | Act::Preempt | Act::Requeue | Act::Cancel | Act::Migrate => {}
            _ if act.step().is_some() => {}
            _ => return None,
        }
        let keys = job_keys(view, &order.rows(view));
        if let Some(step) = act.step() {
            self.jobs.move_by(&keys, step.delta(1, self.page()));
            return Some(Request::Nothing);
        }
        // Never act on a row the operator did not pick: the job they chose is gone.
        let job = match self.picked(&keys) {
            Ok(Some(job)) => job,
            Ok(None) => return Some(Request::hint("no job selected")),
            Err(gone) => {
                return Some(Request::hint(format!("{gone} left the table (it ended, or the filter hides it): move the cursor to pick a job")));
            }
        };
        Some(match act {
            Act::Enter => {
                self.detail = true;
                Request::Nothing
            }
            Act::Preempt => Request::Propose(Action::Preempt { job }),
            Act::Requeue => Request::Propose(Action::Requeue { job }),
            Act::Cancel => Request::Propose(Action::Cancel { job }),
            _ => Request::Run(Intent::PickPool(job)),
        })
    }
}
