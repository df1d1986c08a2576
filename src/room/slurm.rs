//! The room's mirror of a Slurm cluster: the newest snapshot, the commands on
//! their way to scontrol/scancel and how each ended, gpuroom's advice (the
//! quota policy of `sched::slurm_advice`), and the partitions' wait alarms.
//!
//! Slurm stays the scheduler of record: the room never places a Slurm job.
//! Operator actions on Slurm jobs are checked against the snapshot and leave
//! as `Effect::Slurm`; in control mode the advice leaves the same way, once
//! per job and condition: a command that failed is not sent again until the
//! job's state changes or an operator asks, and a command that succeeded
//! waits for a snapshot taken after it. Owns the `SlurmMirror` only; the
//! policy, the tenants and the journal come in as `Ctx`, all of it lent
//! together as a `Desk`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::journal::{Journal, Severity};
use crate::domain::event::{Action, Actor, Effect, Role, TenantSpec};
use crate::domain::ids::TenantId;
use crate::domain::slurm::{SlurmCommand, SlurmMode, SlurmPolicy, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::text::clean;
use crate::domain::units::At;
use crate::sched::slurm_advice;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmMirror {
    pub snapshot: Option<SlurmSnapshot>,
    pub seen_at: Option<At>,
    /// Snapshots applied so far.
    pub seq: u64,
    /// Why the last poll failed, while it does.
    pub stale: Option<String>,
    pub next_command: u64,
    pub in_flight: BTreeMap<u64, SlurmCommand>,
    /// The newest command for each job and how it ended.
    pub last: BTreeMap<u64, CommandRecord>,
    /// The policy's advice as of the newest snapshot, by job preempted.
    pub advice: BTreeMap<u64, AdviceNote>,
    /// What budgets and spot notices ask of Slurm jobs (see `room::slurm_acts`).
    #[serde(default)]
    pub acts: SlurmActs,
    /// The room's own order and placement for the pending jobs, and how
    /// Slurm followed it (`room::slurm_govern`).
    #[serde(default)]
    pub govern: super::slurm_notes::Governance,
    /// Running jobs on spot nodes, as the room keeps saving them (`room::slurm_saves`).
    #[serde(default)]
    pub saves: BTreeMap<u64, super::slurm_notes::SaveNote>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub id: u64,
    pub at: At,
    pub verb: SlurmVerb,
    pub by: String,
    /// None while on its way.
    pub outcome: Option<Result<String, String>>,
    /// The job's state when the command was sent, and the snapshot count when it ended.
    pub state: SlurmState,
    pub restarts: u32,
    pub seq_done: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdviceNote {
    pub verb: SlurmVerb,
    pub for_job: u64,
    pub why: String,
}

/// What budgets and spot notices asked of Slurm jobs (`room::slurm_acts`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmActs {
    /// Jobs gpuroom held for their account's budget: only these are released.
    pub budget_held: BTreeSet<u64>,
    /// A requeue waiting for its job's checkpoint signal to be acted on.
    pub follow_ups: BTreeMap<u64, FollowUp>,
    /// Nodes seen drained for a spot interruption, with the deadline.
    pub spot_drained: BTreeMap<String, At>,
    /// Advisory mode: what would be sent, by job.
    pub proposals: BTreeMap<u64, AdviceNote>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FollowUp {
    pub verb: SlurmVerb,
    pub due: At,
    pub by: String,
}

/// The actor policy commands are audited under.
pub fn policy_actor() -> Actor {
    Actor { user: "gpuroom".to_string(), origin: "policy".to_string(), role: Role::Operator, account: None }
}

const COMMAND_ALARM: &str = "slurm:commands";

/// What the mirror is told with: the room's Slurm policy, its tenants (the
/// accounts the advice weighs), and the journal it writes to.
pub struct Ctx<'a> {
    pub policy: &'a SlurmPolicy,
    pub tenants: &'a BTreeMap<TenantId, TenantSpec>,
    pub journal: &'a mut Journal,
}

/// The parts the Slurm concern touches: its mirror, what it is told with,
/// and the budget levels its acts follow. Lent by `Room::slurm_desk`.
pub struct Desk<'a> {
    pub mirror: &'a mut SlurmMirror,
    pub ctx: Ctx<'a>,
    pub levels: &'a BTreeMap<TenantId, crate::cost::budget::BudgetLevel>,
}

impl Desk<'_> {
    /// A new snapshot mirrored, advised on, and acted on; returns the room
    /// nodes newly drained for a spot interruption, with their deadlines.
    /// `spot_nodes`: the Slurm nodes billed as spot (no job that cannot be
    /// interrupted is preempted for there).
    pub fn on_snapshot(
        &mut self,
        at: At,
        snapshot: &SlurmSnapshot,
        spot_nodes: &[String],
        effects: &mut Vec<Effect>,
    ) -> (Result<(), String>, Vec<(crate::domain::ids::NodeId, At)>) {
        let ctx = Ctx { policy: self.ctx.policy, tenants: self.ctx.tenants, journal: &mut *self.ctx.journal };
        let outcome = self.mirror.on_snapshot(ctx, at, snapshot, spot_nodes, effects);
        let drained = self.mirror.act(&mut self.ctx, self.levels, at, effects);
        (outcome, drained)
    }

    /// What budgets and follow-ups ask of Slurm between snapshots.
    pub fn act(&mut self, at: At, effects: &mut Vec<Effect>) {
        self.mirror.act(&mut self.ctx, self.levels, at, effects);
    }

    pub fn on_done(&mut self, at: At, id: u64, ok: bool, message: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        self.mirror.on_done(self.ctx.journal, at, id, ok, message, effects)
    }

    pub fn on_action(&mut self, at: At, actor: &Actor, job: u64, verb: &SlurmVerb, effects: &mut Vec<Effect>) -> Result<String, String> {
        self.mirror.on_action(self.ctx.policy, at, actor, job, verb, effects)
    }
}

impl SlurmMirror {
    pub fn on_snapshot(&mut self, ctx: Ctx<'_>, at: At, snapshot: &SlurmSnapshot, spot_nodes: &[String], effects: &mut Vec<Effect>) -> Result<(), String> {
        let first = self.snapshot.is_none();
        if first || self.stale.is_some() {
            let how = if first { "attached" } else { "answers again" };
            ctx.journal.note(
                at,
                Severity::Info,
                format!("slurm {}: {how} ({} jobs, {} nodes)", clean(&snapshot.cluster), snapshot.jobs.len(), snapshot.nodes.len()),
            );
        }
        self.snapshot = Some(snapshot.clone());
        self.seen_at = Some(at);
        self.stale = None;
        self.seq += 1;
        let mut ctx = ctx;
        self.refresh_advice(&mut ctx, at, spot_nodes, effects);
        self.check_waits(&mut ctx, at, effects);
        Ok(())
    }

    /// The poll failed: the mirror is kept, marked stale.
    pub fn unreachable(&mut self, detail: &str) {
        self.stale = Some(clean(detail));
    }

    pub fn on_done(&mut self, journal: &mut Journal, at: At, id: u64, ok: bool, message: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        let command = self.in_flight.remove(&id).ok_or_else(|| format!("slurm command #{id} ended but none is on its way under that number"))?;
        let message = clean(message);
        let what = format!("slurm {} job {}", command.verb, command.job);
        let outcome = if ok {
            Ok(format!("{what}: done{}", if message.is_empty() { String::new() } else { format!(" ({message})") }))
        } else {
            Err(format!("{what} failed: {message}"))
        };
        match &outcome {
            // A reorder sends one per job moved: the audit keeps them, the log would drown.
            Ok(_) if matches!(command.verb, SlurmVerb::Schedule(_)) => journal.clear(at, COMMAND_ALARM, effects),
            Ok(text) => {
                journal.note(at, Severity::Action, format!("{}: {text}", clean(&command.by)));
                journal.clear(at, COMMAND_ALARM, effects);
            }
            Err(text) => {
                let alarm = format!("{text} (asked by {}; not retried)", clean(&command.by));
                journal.raise(at, COMMAND_ALARM.to_string(), alarm, effects);
            }
        }
        let actor = actor_of(&command.by);
        journal.audit_action(
            at,
            &actor,
            match &outcome {
                Ok(t) | Err(t) => t,
            },
        );
        effects.push(Effect::Audit { actor, action: Action::Slurm { job: command.job, verb: command.verb.clone() }, outcome: outcome.clone() });
        let seq = self.seq;
        if let Some(record) = self.last.get_mut(&command.job)
            && record.id == id
        {
            record.outcome = Some(outcome);
            record.seq_done = seq;
        }
        Ok(())
    }

    /// An operator's verb on a Slurm job: checked, then sent. Returns the audit text.
    pub fn on_action(&mut self, policy: &SlurmPolicy, at: At, actor: &Actor, job: u64, verb: &SlurmVerb, effects: &mut Vec<Effect>) -> Result<String, String> {
        let who = format!("{}@{}", clean(&actor.user), clean(&actor.origin));
        let verb = self.check_verb(policy, job, verb)?;
        if let Some(target) = self.snapshot.as_ref().and_then(|s| s.jobs.iter().find(|j| j.id == job)) {
            policy.may_act(actor.account.as_ref(), target, &verb)?;
        }
        let name = self.job_name(job);
        self.send(at, job, verb.clone(), who, effects);
        Ok(format!("slurm {verb} job {job} {name} (sent)"))
    }

    fn job_name(&self, job: u64) -> String {
        let snapshot = self.snapshot.as_ref();
        snapshot.and_then(|s| s.jobs.iter().find(|j| j.id == job)).map(|j| clean(&j.name)).unwrap_or_default()
    }

    /// Whether `verb` makes sense for the job as last seen; resolves preempt.
    pub(super) fn check_verb(&self, policy: &SlurmPolicy, id: u64, verb: &SlurmVerb) -> Result<SlurmVerb, String> {
        let snapshot = self.snapshot.as_ref().ok_or("no Slurm cluster is attached")?;
        let job = snapshot.jobs.iter().find(|j| j.id == id).ok_or_else(|| format!("Slurm job {id} is not in the newest snapshot"))?;
        if let Some(command) = self.in_flight.values().find(|c| c.job == id) {
            return Err(format!("a command for job {id} is on its way ({} by {})", command.verb, clean(&command.by)));
        }
        let verb = match verb {
            SlurmVerb::Preempt => policy.preempt_by.verb(),
            other => other.clone(),
        };
        let state = &job.state;
        let legal = match &verb {
            SlurmVerb::Requeue => matches!(state, SlurmState::Running | SlurmState::Suspended),
            SlurmVerb::Suspend => *state == SlurmState::Running,
            SlurmVerb::Signal { .. } => matches!(state, SlurmState::Running | SlurmState::Suspended),
            SlurmVerb::Resume => *state == SlurmState::Suspended,
            SlurmVerb::Cancel => job.active(),
            SlurmVerb::Hold => *state == SlurmState::Pending && !job.held(),
            SlurmVerb::Release => job.held(),
            SlurmVerb::Migrate { partition, exclude } => {
                if let Some(p) = partition
                    && !snapshot.partitions.iter().any(|x| &x.name == p)
                {
                    return Err(format!("there is no partition {:?}", clean(p)));
                }
                if let Some(n) = exclude.iter().find(|n| !snapshot.nodes.iter().any(|x| &x.name == *n)) {
                    return Err(format!("there is no node {:?} to exclude", clean(n)));
                }
                if partition.as_deref() == Some(job.partition.as_str()) && exclude.is_empty() {
                    return Err(format!("job {id} is already in partition {}", clean(&job.partition)));
                }
                matches!(state, SlurmState::Pending | SlurmState::Running | SlurmState::Suspended)
            }
            SlurmVerb::Schedule(_) => *state == SlurmState::Pending,
            SlurmVerb::Preempt => false,
        };
        if !legal {
            let held = if job.held() { " (held)" } else { "" };
            return Err(format!("cannot {} job {id}: it is {}{held}", verb.name(), state.label()));
        }
        Ok(verb)
    }

    pub(super) fn send(&mut self, at: At, job: u64, verb: SlurmVerb, by: String, effects: &mut Vec<Effect>) {
        self.next_command += 1;
        let id = self.next_command;
        let (state, restarts) =
            self.snapshot.as_ref().and_then(|s| s.jobs.iter().find(|j| j.id == job)).map(|j| (j.state.clone(), j.restarts)).unwrap_or_default();
        let command = SlurmCommand { id, job, verb: verb.clone(), by: by.clone() };
        self.in_flight.insert(id, command.clone());
        self.last.insert(job, CommandRecord { id, at, verb, by, outcome: None, state, restarts, seq_done: 0 });
        effects.push(Effect::Slurm { command });
    }

    /// Recomputes the advice; in control mode sends what is new and not blocked.
    fn refresh_advice(&mut self, ctx: &mut Ctx<'_>, at: At, spot_nodes: &[String], effects: &mut Vec<Effect>) {
        let Some(snapshot) = self.snapshot.as_ref() else { return };
        let frees = |v: &SlurmVerb| matches!(v, SlurmVerb::Requeue | SlurmVerb::Cancel | SlurmVerb::Migrate { .. });
        // On its way, or done but not yet seen in a snapshot taken after it.
        let seq = self.seq;
        let mut busy: BTreeSet<u64> = self.in_flight.values().filter(|c| frees(&c.verb)).map(|c| c.job).collect();
        busy.extend(self.last.iter().filter(|(_, r)| frees(&r.verb) && matches!(r.outcome, Some(Ok(_))) && seq <= r.seq_done + 1).map(|(job, _)| *job));
        // Saving before its requeue: its GPUs are as good as freed.
        busy.extend(self.acts.follow_ups.iter().filter(|(_, f)| frees(&f.verb)).map(|(job, _)| *job));
        let site = slurm_advice::Site { spot_nodes, uninterruptible_partitions: &ctx.policy.uninterruptible_partitions };
        let advice = slurm_advice::reclaim(snapshot, ctx.tenants, &busy, site);
        let verb = ctx.policy.preempt_by.verb();
        let fresh: BTreeMap<u64, AdviceNote> =
            advice.into_iter().map(|a| (a.job, AdviceNote { verb: verb.clone(), for_job: a.for_job, why: clean(&a.why) })).collect();
        let new: Vec<(u64, AdviceNote)> = fresh.iter().filter(|(job, _)| !self.advice.contains_key(job)).map(|(j, a)| (*j, a.clone())).collect();
        self.advice = fresh;
        let control = ctx.policy.mode == SlurmMode::Control;
        for (job, note) in new {
            let mode = if control { "control" } else { "advice" };
            ctx.journal.note(at, Severity::Info, format!("slurm {mode}: {} job {job}: {}", note.verb, note.why));
        }
        if !control {
            return;
        }
        let due: Vec<(u64, SlurmVerb, bool)> = self
            .advice
            .iter()
            .filter(|(job, _)| self.may_send(**job) && !self.acts.follow_ups.contains_key(job))
            .map(|(j, a)| (*j, a.verb.clone(), snapshot.jobs.iter().any(|x| x.id == *j && saves_on_signal(x, &ctx.policy.uninterruptible_partitions))))
            .collect();
        let signal = ctx.policy.checkpoint_verb();
        for (job, verb, saves) in due {
            if self.check_verb(ctx.policy, job, &verb).is_err() {
                continue;
            }
            // A requeue loses what the job did since it last saved: one known
            // to save is asked to first, and requeued after the grace period.
            if verb == SlurmVerb::Requeue && saves && self.check_verb(ctx.policy, job, &signal).is_ok() {
                self.send(at, job, signal.clone(), "policy".to_string(), effects);
                let due = at + ctx.policy.checkpoint_grace.delta();
                self.acts.follow_ups.insert(job, FollowUp { verb, due, by: "policy".to_string() });
            } else {
                self.send(at, job, verb, "policy".to_string(), effects);
            }
        }
    }

    /// No blind retries: a failed command blocks its job until its state
    /// changes; a successful one until a snapshot taken after it arrived.
    pub(super) fn may_send(&self, job: u64) -> bool {
        let Some(record) = self.last.get(&job) else { return true };
        let current = self.snapshot.as_ref().and_then(|s| s.jobs.iter().find(|j| j.id == job));
        match (&record.outcome, current) {
            (None, _) => false,
            (_, None) => false,
            (Some(Err(_)), Some(j)) => j.state != record.state || j.restarts != record.restarts,
            (Some(Ok(_)), Some(_)) => self.seq > record.seq_done + 1,
        }
    }

    /// One alarm per partition whose GPU jobs have waited past the limit.
    fn check_waits(&mut self, ctx: &mut Ctx<'_>, at: At, effects: &mut Vec<Effect>) {
        let Some(snapshot) = self.snapshot.as_ref() else { return };
        let limit = ctx.policy.wait_alarm.0.max(1);
        let mut late: BTreeMap<String, (usize, i64, u64, String)> = BTreeMap::new();
        for job in snapshot.jobs.iter().filter(|j| j.state == SlurmState::Pending && (j.gpus > 0 || j.shards > 0) && !j.held()) {
            let Some(submitted) = job.submitted else { continue };
            let waited = (at - submitted).num_seconds();
            if waited <= limit {
                continue;
            }
            let entry = late.entry(job.partition.clone()).or_insert((0, 0, job.id, String::new()));
            entry.0 += 1;
            if waited > entry.1 {
                (entry.1, entry.2, entry.3) = (waited, job.id, job.reason.clone());
            }
        }
        let partitions: Vec<String> = snapshot.partitions.iter().map(|p| p.name.clone()).collect();
        for partition in partitions {
            let id = format!("slurm:wait:{partition}");
            match late.get(&partition) {
                Some((count, waited, oldest, reason)) if !ctx.journal.is_active(&id) => {
                    let text = format!(
                        "Slurm partition {}: {count} GPU job(s) pending over {} (oldest {oldest}, {}, {})",
                        clean(&partition),
                        crate::domain::units::Secs(limit),
                        crate::domain::units::Secs(*waited),
                        clean(reason)
                    );
                    ctx.journal.raise(at, id, text, effects);
                }
                Some(_) => {}
                None => ctx.journal.clear(at, &id, effects),
            }
        }
    }
}

/// Back from the `by` text a command carries to who it was.
fn actor_of(by: &str) -> Actor {
    match by.split_once('@') {
        Some((user, origin)) => Actor { user: user.to_string(), origin: origin.to_string(), role: Role::Operator, account: None },
        None => policy_actor(),
    }
}

/// Whether a job saves when sent the checkpoint signal: it may be
/// interrupted and has acknowledged a checkpoint before. The signal's
/// default action ends a process that does not catch it, so a job never
/// seen saving is requeued without it.
fn saves_on_signal(job: &crate::domain::slurm::SlurmJob, uninterruptible_partitions: &[String]) -> bool {
    job.interruptible(uninterruptible_partitions) && job.last_saved().is_some()
}
