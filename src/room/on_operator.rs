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
        let done = self.on_operator(at, actor, action, effects);
        if let Err(why) = &done {
            let what = match action.job() {
                Some(job) => format!("{} {job}", action.verb()),
                None => action.verb().to_string(),
            };
            self.journal.audit_refusal(at, actor, &what, why);
        }
        done
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

#[cfg(test)]
mod tests {
    use crate::domain::event::{Action, Actor, Event, Role};
    use crate::domain::ids::JobId;
    use crate::room::{Room, RoomConfig};

    /// Issue 35, item 8: the on-screen audit shows each action's outcome:
    /// refused ones too, with why, beside those carried out.
    #[test]
    fn a_refused_action_is_in_the_audit_with_why_beside_the_done_ones() {
        let mut room = Room::new(RoomConfig::default());
        let at = chrono::DateTime::from_timestamp(1_578_268_800, 0).unwrap();
        let actor = |role| Actor { user: "ana".into(), origin: "ssh 10.0.0.5".into(), role, account: None };
        room.apply(at, &Event::Operator { actor: actor(Role::Operator), action: Action::Preempt { job: JobId(999) } });
        room.apply(at, &Event::Operator { actor: actor(Role::Viewer), action: Action::SetDiscipline { discipline: crate::sched::DisciplineKind::Drf } });
        room.apply(at, &Event::Operator { actor: actor(Role::Operator), action: Action::SetDiscipline { discipline: crate::sched::DisciplineKind::Drf } });
        let audit = room.view().audit;
        assert_eq!(audit.len(), 3, "{audit:?}");
        assert_eq!(audit[0].what, "preempt j999");
        assert!(audit[0].refused.as_deref().is_some_and(|why| why.contains("j999")), "{audit:?}");
        assert!(audit[1].refused.is_some(), "a viewer's action is refused: {audit:?}");
        assert_eq!(audit[2].refused, None);
        assert_eq!(audit[2].user, "ana");
    }
}
