//! Operator actions as the `Room` carries them out: preempt, requeue, cancel,
//! migrate to a chosen pool, switch the queue discipline, approve a budget
//! overrun, acknowledge an alarm. Each one is checked (role, the job's state,
//! the target's existence), then lands in the log and the audit trail with
//! who did it and from where.
//!
//! Owns the refusal rules and wording. A refused action changes nothing; the
//! caller (`Room::apply`) turns the error into `Effect::Rejected`. Budget
//! rules live in `room_budget`, placement in `room_sched`.

use crate::domain::cluster::BillingMode;
use crate::domain::event::{Action, Actor, Effect, Role};
use crate::domain::ids::JobId;
use crate::domain::job::{JobState, Phase, PoolPreference, PoolTarget, StopReason};
use super::{Room, Severity};
use crate::domain::text::clean;
use crate::domain::units::At;

impl Room {
    pub(crate) fn on_operator(&mut self, at: At, actor: &Actor, action: &Action, effects: &mut Vec<Effect>) -> Result<(), String> {
        let who = clean(&actor.user);
        let origin = clean(&actor.origin);
        let verb = action.verb();
        if actor.role != Role::Operator {
            return Err(format!("{who} ({origin}) may not {verb}: read-only"));
        }
        let what = match action {
            Action::ApproveOverrun { tenant, reason, amount, until } => self.on_approve(at, actor, tenant, reason, *amount, *until)?,
            Action::SetDiscipline { discipline } => {
                let before = self.config.sched.discipline.discipline().name();
                self.config.sched.discipline = *discipline;
                self.queue_dirty = true;
                format!("queue discipline {before} → {}", discipline.discipline().name())
            }
            Action::AcknowledgeAlarm { id } => {
                let alarm = self.alarms.get_mut(id).ok_or_else(|| format!("{who} asked to acknowledge alarm {:?}, which is not active", clean(id)))?;
                if let Some(ack) = &alarm.acked {
                    return Err(format!("alarm already acknowledged by {} at {}", clean(&ack.user), ack.at.format("%H:%M:%S")));
                }
                alarm.acked = Some(super::Ack { at, user: actor.user.clone() });
                format!("acknowledge alarm: {}", clean(&alarm.text))
            }
            Action::Preempt { job } | Action::Requeue { job } | Action::Cancel { job } | Action::Migrate { job, .. } => self.on_job_action(at, actor, action, *job, effects)?,
            Action::Slurm { job, verb } => self.on_slurm_action(at, actor, *job, verb, effects)?,
        };
        self.stats.operator_actions += 1;
        self.note(at, Severity::Action, format!("{who}@{origin}: {what}"));
        self.audit_action(at, actor, &what);
        Ok(())
    }

    /// What a job action did, for the log; or why it was refused.
    fn on_job_action(&mut self, at: At, actor: &Actor, action: &Action, id: JobId, effects: &mut Vec<Effect>) -> Result<String, String> {
        let who = clean(&actor.user);
        let verb = action.verb();
        let job = self.jobs.get(&id).ok_or_else(|| format!("{who} asked to {verb} unknown job {id}"))?;
        let phase = job.phase();
        let name = clean(&job.spec.name);
        let by_operator = |requeue: bool| StopReason::Operator { actor: actor.user.clone(), requeue };
        match (action, phase) {
            (_, p) if p.is_terminal() => return Err(format!("{who} asked to {verb} {id}, which is already {}", p.label())),
            (Action::Cancel { .. }, Phase::Queued) => {
                self.finish(at, id, JobState::Failed { reason: format!("cancelled by {who}") })?;
            }
            (Action::Preempt { .. } | Action::Requeue { .. }, Phase::Queued) => {
                return Err(format!("{who} asked to {verb} {id}, which is queued, not running"));
            }
            (Action::Preempt { .. }, _) => self.stop_job(id, by_operator(true), true, effects),
            (Action::Requeue { .. }, _) => self.stop_job(id, by_operator(true), false, effects),
            (Action::Cancel { .. }, _) => self.stop_job(id, by_operator(false), false, effects),
            (Action::Migrate { to, .. }, phase) => {
                self.check_target(id, to)?;
                let here = self.job_node(id).is_some_and(|n| to.holds(&n.spec));
                if here && phase != Phase::Queued {
                    return Err(format!("{id} {name} already runs in {to}"));
                }
                if let Some(job) = self.jobs.get_mut(&id) {
                    if job.spec.pool == PoolPreference::SpotOnly && to.billing != BillingMode::Spot {
                        // The operator's choice widens a spot-only job for this placement.
                        job.escalated = true;
                    }
                    job.target = Some(Box::new(to.clone()));
                    job.avoid = None;
                }
                self.queue_dirty = true;
                if phase != Phase::Queued {
                    self.stop_job(id, by_operator(true), true, effects);
                }
                return Ok(format!("migrate {id} {name} → {to}"));
            }
            (Action::SetDiscipline { .. } | Action::ApproveOverrun { .. } | Action::AcknowledgeAlarm { .. } | Action::Slurm { .. }, _) => {}
        }
        Ok(format!("{verb} {id} {name}"))
    }

    /// A migration target must exist, be up, be large enough for the job and
    /// be allowed by its pool preference (a no-spot job stays off spot).
    fn check_target(&self, id: JobId, to: &PoolTarget) -> Result<(), String> {
        let job = self.jobs.get(&id).ok_or_else(|| format!("unknown job {id}"))?;
        let nodes: Vec<_> = self.nodes.values().filter(|n| to.holds(&n.spec)).collect();
        if nodes.is_empty() {
            return Err(format!("no node in {to}"));
        }
        if job.spec.pool == PoolPreference::NoSpot && to.billing == BillingMode::Spot {
            return Err(format!("{id} may not run on spot (its pool preference is no-spot)"));
        }
        if !nodes.iter().any(|n| n.accepts_work()) {
            return Err(format!("no node in {to} takes work now (down or draining)"));
        }
        let big_enough = nodes.iter().any(|n| n.gpus.len() >= usize::from(job.spec.gpus) && n.gpus.iter().any(|g| g.memory.0 >= job.spec.gpu_mem.0));
        if !big_enough {
            return Err(format!("{id} needs {} GPU(s) of {}; no node in {to} has them", job.spec.gpus, job.spec.gpu_mem));
        }
        Ok(())
    }
}
