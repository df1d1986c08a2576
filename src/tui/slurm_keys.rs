//! What the Slurm pane's keys do: each verb on the selected Slurm job becomes
//! `Action::Slurm` and goes through the confirmation dialog
//! (`Request::Propose`); migrate opens the command bar prefilled with
//! `slurm ID migrate partition=` so the operator names the partition or the
//! nodes to avoid.
//!
//! Owns this mapping only: it returns a `Request` and never touches the App
//! (the Slurm pane's component, `panes::slurm_list`, calls it with its
//! selection). It must not draw, change the `View` or judge whether a verb
//! suits the job: the dialog warns and the engine refuses.

use super::request::Request;
use crate::domain::event::Action;
use crate::domain::slurm::SlurmVerb;
use crate::room::View;

/// A verb key of the Slurm pane: one of Slurm's plain verbs as the domain
/// names them, or migrate, which needs words first.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SlurmKey {
    Verb(&'static SlurmVerb),
    Migrate,
}

impl SlurmKey {
    /// The verb it sends; `None` for migrate.
    pub fn verb(self) -> Option<SlurmVerb> {
        match self {
            SlurmKey::Verb(verb) => Some(verb.clone()),
            SlurmKey::Migrate => None,
        }
    }
}

/// The command line the migrate key opens for `job`.
pub fn migrate_line(job: u64) -> String {
    format!("slurm {job} migrate partition=")
}

/// What `key` asks for on the selected Slurm job `job`.
pub fn on_key(key: SlurmKey, job: Option<u64>, view: &View) -> Request {
    let Some(job) = job else {
        return Request::hint(if view.slurm.is_some() { "no Slurm job selected" } else { "no Slurm cluster is attached" });
    };
    match key.verb() {
        Some(verb) => Request::Propose(Action::Slurm { job, verb }),
        None => Request::Command(migrate_line(job)),
    }
}
