//! The room's handler for `Event::Operator`: an operator's action, checked
//! against the actor's role, carried out by the concern it belongs to
//! (budgets, the queue discipline, the journal's alarms, job actions in
//! `ops`, Slurm verbs, elastic capacity's proposals), then logged and
//! audited with who did it and from where.
//!
//! An `impl Room` (one file per kind of event, as pueue keeps one handler
//! per message); the parts come through `Room`'s lenders.

use super::budget::Overrun;
use super::journal::Severity;
use super::{Room, ops};
use crate::domain::event::{Action, Actor, Effect};
use crate::domain::text::clean;
use crate::domain::units::At;

impl Room {
    /// The operator acts on figures as of now, and may change the policy.
    pub(super) fn on_operator_event(&mut self, at: At, actor: &Actor, action: &Action, effects: &mut Vec<Effect>) -> Result<(), String> {
        self.settle_all(at);
        self.fleet.wake_checkpoints();
        self.on_operator(at, actor, action, effects)
    }

    fn on_operator(&mut self, at: At, actor: &Actor, action: &Action, effects: &mut Vec<Effect>) -> Result<(), String> {
        ops::check_role(actor, action)?;
        let what = match action {
            Action::ApproveOverrun { tenant, reason, amount, until } => {
                let ask = Overrun { tenant, reason, amount: *amount, until: *until };
                let text = self.budgets.approve(&self.fleet.tenants, at, actor, ask)?;
                self.sched.queue_dirty = true;
                text
            }
            Action::SetDiscipline { discipline } => {
                self.sched.queue_dirty = true;
                ops::set_discipline(&mut self.config.sched, *discipline)
            }
            Action::AcknowledgeAlarm { id } => ops::acknowledge(&mut self.journal, at, actor, id)?,
            Action::Preempt { job } | Action::Requeue { job } | Action::Cancel { job } | Action::Migrate { job, .. } => {
                self.job_ops().carry_out(at, actor, action, *job, effects)?
            }
            Action::Slurm { job, verb } => self.slurm_desk().on_action(at, actor, *job, verb, effects)?,
            Action::ApproveCapacity { proposal } => format!("approve: {}", self.elastic(at).approve(*proposal, effects)?),
        };
        let (who, origin) = (clean(&actor.user), clean(&actor.origin));
        self.journal.stats.operator_actions += 1;
        self.journal.note(at, Severity::Action, format!("{who}@{origin}: {what}"));
        self.journal.audit_action(at, actor, &what);
        Ok(())
    }
}
