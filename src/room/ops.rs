//! Operator actions as the `Room` carries them out: preempt, requeue, cancel,
//! migrate to a chosen pool, switch the queue discipline, approve a budget
//! overrun, acknowledge an alarm. Each one is checked (role, the job's state,
//! the target's existence), then lands in the log and the audit trail with
//! who did it and from where.
//!
//! Owns the refusal rules and wording. A refused action changes nothing; the
//! caller (`Room::apply`) turns the error into `Effect::Rejected`. Budget
//! rules live in `budget`, placement in `sched`; `JobOps` borrows the parts a
//! job action touches.

use super::config::RoomConfig;
use super::fleet::Fleet;
use super::journal::{Ack, Journal};
use super::life::Life;
use super::sched::SchedState;
use crate::cost::Books;
use crate::domain::cluster::BillingMode;
use crate::domain::discipline::DisciplineKind;
use crate::domain::event::{Action, Actor, Effect, Role};
use crate::domain::ids::JobId;
use crate::domain::job::{JobState, Phase, PoolPreference, PoolTarget, StopReason};
use crate::domain::text::clean;
use crate::domain::units::At;
use crate::sched::SchedConfig;

/// Only an operator acts; a viewer's action is refused by name.
pub fn check_role(actor: &Actor, action: &Action) -> Result<(), String> {
    if actor.role != Role::Operator {
        return Err(format!("{} ({}) may not {}: read-only", clean(&actor.user), clean(&actor.origin), action.verb()));
    }
    Ok(())
}

/// Switches the queue discipline; returns the audit text.
pub fn set_discipline(config: &mut SchedConfig, discipline: DisciplineKind) -> String {
    let before = config.discipline.discipline().name();
    config.discipline = discipline;
    format!("queue discipline {before} → {}", discipline.discipline().name())
}

/// Acknowledges an active alarm once; returns the audit text.
pub fn acknowledge(journal: &mut Journal, at: At, actor: &Actor, id: &str) -> Result<String, String> {
    let who = clean(&actor.user);
    let alarm = journal.alarms.get_mut(id).ok_or_else(|| format!("{who} asked to acknowledge alarm {:?}, which is not listed", clean(id)))?;
    if let Some(ack) = &alarm.acked {
        return Err(format!("alarm already acknowledged by {} at {}", clean(&ack.user), ack.at.format("%H:%M:%S")));
    }
    // A cleared alarm was only waiting to be seen: seen, it leaves the list.
    if let Some(cleared) = alarm.cleared_at {
        let what = format!("acknowledge alarm (cleared at {}): {}", cleared.format("%H:%M:%S"), clean(&alarm.text));
        journal.alarms.remove(id);
        return Ok(what);
    }
    alarm.acked = Some(Ack { at, user: actor.user.clone() });
    Ok(format!("acknowledge alarm: {}", clean(&alarm.text)))
}

/// The parts a job action (preempt, requeue, cancel, migrate) touches.
pub struct JobOps<'a> {
    pub config: &'a RoomConfig,
    pub now: Option<At>,
    pub fleet: &'a mut Fleet,
    pub books: &'a mut Books,
    pub journal: &'a mut Journal,
    pub sched: &'a mut SchedState,
}

impl JobOps<'_> {
    /// What a job action did, for the log; or why it was refused.
    pub fn carry_out(&mut self, at: At, actor: &Actor, action: &Action, id: JobId, effects: &mut Vec<Effect>) -> Result<String, String> {
        let who = clean(&actor.user);
        let verb = action.verb();
        let job = self.fleet.job(id).map_err(|why| format!("{who} asked to {verb} {why}"))?;
        let phase = job.phase();
        let name = clean(&job.spec.name);
        let by_operator = |requeue: bool| StopReason::Operator { actor: actor.user.clone(), requeue };
        match (action, phase) {
            (_, p) if p.is_terminal() => return Err(format!("{who} asked to {verb} {id}, which is already {}", p.label())),
            (Action::Cancel { .. }, Phase::Queued) => {
                self.life().finish(at, id, JobState::Failed { reason: format!("cancelled by {who}") })?;
            }
            (Action::Preempt { .. } | Action::Requeue { .. }, Phase::Queued) => {
                return Err(format!("{who} asked to {verb} {id}, which is queued, not running"));
            }
            (Action::Preempt { .. }, _) => self.stop_job(id, by_operator(true), true, effects),
            (Action::Requeue { .. }, _) => self.stop_job(id, by_operator(true), false, effects),
            (Action::Cancel { .. }, _) => self.stop_job(id, by_operator(false), false, effects),
            (Action::Migrate { to, .. }, phase) => {
                self.check_target(id, to)?;
                let here = self.fleet.job_node(id).is_some_and(|n| to.holds(&n.spec));
                if here && phase != Phase::Queued {
                    return Err(format!("{id} {name} already runs in {to}"));
                }
                let widens = self.fleet.jobs.get(&id).is_some_and(|job| job.spec.pool == PoolPreference::SpotOnly && to.billing != BillingMode::Spot);
                if widens {
                    // The operator's choice widens a spot-only job for this placement.
                    self.fleet.escalate(id);
                }
                if let Some(job) = self.fleet.jobs.get_mut(&id) {
                    job.target = Some(Box::new(to.clone()));
                    job.avoid = None;
                }
                self.sched.queue_dirty = true;
                if phase != Phase::Queued {
                    self.stop_job(id, by_operator(true), true, effects);
                }
                return Ok(format!("migrate {id} {name} → {to}"));
            }
            (
                Action::SetDiscipline { .. }
                | Action::ApproveOverrun { .. }
                | Action::AcknowledgeAlarm { .. }
                | Action::Slurm { .. }
                | Action::ApproveCapacity { .. },
                _,
            ) => {}
        }
        Ok(format!("{verb} {id} {name}"))
    }

    fn life(&mut self) -> Life<'_> {
        Life { fleet: self.fleet, books: self.books, journal: self.journal, max_wait: &self.config.sched.max_wait }
    }

    fn stop_job(&mut self, id: JobId, reason: StopReason, save: bool, effects: &mut Vec<Effect>) {
        self.fleet.stop_job(self.now, &self.config.checkpoint, id, reason, save, effects);
    }

    /// A migration target must exist, be up, be large enough for the job and
    /// be allowed by its pool preference (a no-spot job stays off spot).
    fn check_target(&self, id: JobId, to: &PoolTarget) -> Result<(), String> {
        let job = self.fleet.job(id)?;
        let nodes: Vec<_> = self.fleet.nodes.values().filter(|n| to.holds(&n.spec)).collect();
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
