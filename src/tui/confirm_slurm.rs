//! The confirmation text for a verb on a Slurm job: what Slurm will do to
//! it, which GPUs that frees or keeps, and what is lost. Wording only; the
//! engine checks the job's state again and Slurm may still refuse.
//!
//! Also owns `Confirm`, the dialog's content, which both this file and
//! `confirm` fill: `confirm` calls in here for Slurm's verbs, so the type
//! sits on this side and `confirm` re-exports it. Must not import `confirm`.

use crate::domain::event::Action;
use crate::domain::slurm::{SlurmState, SlurmVerb};
use crate::room::View;
use crate::room::view_slurm::SlurmJobRow;

/// A pending action and what it will do.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirm {
    pub action: Action,
    /// "Preempt j4 llama-7b-sft?"
    pub title: String,
    /// One consequence per line, in the order they happen.
    pub lines: Vec<String>,
    /// Something the operator should know before saying yes.
    pub warning: Option<String>,
    /// The word on the yes button.
    pub yes: &'static str,
}

fn gpus(job: &SlurmJobRow) -> String {
    if job.placement.is_empty() { format!("{} GPU(s)", job.gpus) } else { format!("{} GPU(s) on {}", job.gpus, job.placement) }
}

/// Fills `c` for `verb` on Slurm job `id`.
pub fn describe(id: u64, verb: &SlurmVerb, view: &View, c: &mut Confirm) {
    let slurm = view.slurm.as_ref();
    let job = slurm.and_then(|s| s.jobs.iter().find(|j| j.id == id));
    let preempt_by = slurm.map_or("requeue", |s| s.preempt_by.as_str());
    let verb = match verb {
        SlurmVerb::Preempt if preempt_by == "suspend" => SlurmVerb::Suspend,
        SlurmVerb::Preempt => SlurmVerb::Requeue,
        other => other.clone(),
    };
    let title = |word: &str| match job {
        Some(j) => format!("{word} Slurm job {} {} ({}, {})?", j.id, j.name, j.user, j.account),
        None => format!("{word} Slurm job {id}?"),
    };
    let Some(j) = job else {
        c.title = title(verb.name());
        c.warning = Some("This job is not in the newest Slurm snapshot: the engine will refuse this.".into());
        return;
    };
    let state = j.state.label();
    let refuse = |c: &mut Confirm, needs: &str| c.warning = Some(format!("It is {state}, not {needs}: the engine will refuse this."));
    match &verb {
        SlurmVerb::Requeue | SlurmVerb::Preempt => {
            c.title = title("Requeue");
            c.yes = "requeue";
            c.lines.push(format!("1. scontrol requeue {id}: Slurm kills its processes and frees {}.", gpus(j)));
            c.lines.push(format!("2. It goes back to pending (restart {}) and starts again when Slurm places it.", j.restarts + 1));
            c.warning = Some("Slurm saves nothing: what it computed since its own last checkpoint is lost.".into());
            if !matches!(j.state, SlurmState::Running | SlurmState::Suspended) {
                refuse(c, "running or suspended");
            }
        }
        SlurmVerb::Suspend => {
            c.title = title("Suspend");
            c.yes = "suspend";
            c.lines.push(format!("scontrol suspend {id}: its processes stop where they are and keep their memory."));
            c.lines.push(format!("Slurm keeps {} allocated to it: nothing else starts there until it is resumed or requeued.", gpus(j)));
            if j.state != SlurmState::Running {
                refuse(c, "running");
            }
        }
        SlurmVerb::Signal { signal } => {
            c.title = title(&format!("Send SIG{signal} to"));
            c.yes = "signal";
            c.lines.push(format!("scancel --batch --signal={signal} {id}: its batch script gets the signal and keeps running."));
            c.lines.push("A job that traps it saves a checkpoint; one that does not may stop.".into());
            if !matches!(j.state, SlurmState::Running | SlurmState::Suspended) {
                refuse(c, "running or suspended");
            }
        }
        SlurmVerb::Resume => {
            c.title = title("Resume");
            c.yes = "resume";
            c.lines.push(format!("scontrol resume {id}: its processes carry on from where they stopped."));
            if j.state != SlurmState::Suspended {
                refuse(c, "suspended");
            }
        }
        SlurmVerb::Cancel => {
            c.title = title("Cancel");
            c.yes = "cancel the job";
            c.lines.push(format!("scancel {id}: it ends for good{}.", if j.state == SlurmState::Pending { " and never runs" } else { ", freeing its GPUs" }));
            c.warning = Some("This cannot be undone: only its owner can submit it again.".into());
            if !matches!(j.state, SlurmState::Pending | SlurmState::Running | SlurmState::Suspended | SlurmState::Completing) {
                refuse(c, "active");
            }
        }
        SlurmVerb::Hold => {
            c.title = title("Hold");
            c.yes = "hold";
            c.lines.push(format!("scontrol hold {id}: it stays pending and Slurm will not start it until it is released."));
            if j.state != SlurmState::Pending || j.held {
                refuse(c, "pending and not held");
            }
        }
        SlurmVerb::Release => {
            c.title = title("Release");
            c.yes = "release";
            c.lines.push(format!("scontrol release {id}: it may start again, in Slurm's priority order."));
            if !j.held {
                c.warning = Some(format!("It is {state} and not held: the engine will refuse this."));
            }
        }
        SlurmVerb::Migrate { partition, exclude } => {
            c.title = title("Migrate");
            c.yes = "migrate";
            let mut change = Vec::new();
            if let Some(p) = partition {
                change.push(format!("partition={p}"));
            }
            if !exclude.is_empty() {
                change.push(format!("excnodelist={}", exclude.join(",")));
            }
            let change = change.join(" ");
            if j.state == SlurmState::Pending {
                c.lines.push(format!("scontrol update jobid={id} {change}: it waits there instead."));
            } else {
                c.lines.push(format!("1. scontrol requeuehold {id}: Slurm kills its processes and frees {}.", gpus(j)));
                c.lines.push(format!("2. scontrol update jobid={id} {change}."));
                c.lines.push(format!("3. scontrol release {id}: it starts again there when Slurm places it."));
                c.warning = Some("Slurm saves nothing: what it computed since its own last checkpoint is lost.".into());
            }
        }
        // Only the room's own policy sends it; no key asks for it.
        SlurmVerb::Schedule(s) => {
            c.title = title("Schedule");
            c.yes = "schedule";
            c.lines.push(format!("scontrol update jobid={id} {}.", s.settings().join(" ")));
            if j.state != SlurmState::Pending {
                refuse(c, "pending");
            }
        }
    }
}
