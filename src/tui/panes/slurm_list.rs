//! The Slurm pane's component: the selected Slurm job (followed by Slurm's
//! job id) and the job table's scroll window, and what the pane's keys do —
//! move the selection, and the verbs on the selected job (`slurm_keys`).
//!
//! Owns this state only. Must not import the App: a verb hands back a
//! `Request` (an action to confirm, the command bar for migrate, a hint).

use std::cell::Cell;

use super::keys::{KeyInput, KeyPane};
use crate::room::View;
use crate::tui::commands::Act;
use crate::tui::request::Request;
use crate::tui::selection::{Follow, Window};
use crate::tui::slurm_keys;

#[derive(Clone, Debug, Default)]
pub struct SlurmList {
    /// By Slurm's job id.
    jobs: Follow<u64>,
    /// The job table's rows on screen, written while drawing.
    window: Cell<Window>,
}

fn job_ids(view: &View) -> Vec<u64> {
    view.slurm.as_ref().map(|s| s.jobs.iter().map(|j| j.id).collect()).unwrap_or_default()
}

impl SlurmList {
    /// Position in `view.slurm.jobs` of the selected Slurm job.
    pub fn selected_row(&self, view: &View) -> Option<usize> {
        self.jobs.position(&job_ids(view))
    }

    /// The selected Slurm job's id, if a cluster is attached and lists jobs.
    pub fn selected_job(&self, view: &View) -> Option<u64> {
        let keys = job_ids(view);
        self.jobs.position(&keys).map(|i| keys[i])
    }

    /// The scroll window the pane writes while drawing.
    pub fn window(&self) -> &Cell<Window> {
        &self.window
    }
}

impl KeyPane for SlurmList {
    /// What a key does while the Slurm pane has the focus; `None` when the
    /// key is not the pane's.
    fn on_key(&mut self, input: KeyInput<'_>) -> Option<Request> {
        let KeyInput { act, view, .. } = input;
        if let Some(step) = act.step() {
            self.jobs.move_by(&job_ids(view), step.delta(1, self.window.get().page()));
            return Some(Request::Nothing);
        }
        match act {
            Act::Slurm(key) => Some(slurm_keys::on_key(key, self.selected_job(view), view)),
            _ => None,
        }
    }
}
