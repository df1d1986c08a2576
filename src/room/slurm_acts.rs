//! What the room's budgets and spot notices ask of a Slurm cluster, on each
//! snapshot:
//!
//! * an account at its budget (100%) has its pending jobs held (`scontrol
//!   hold`); past the hard limit (120%) without an approval its running jobs
//!   are sent the checkpoint signal and requeued after the grace period; when
//!   the account is back under its budget (an approval, a new month) the
//!   jobs gpuroom held are released;
//! * a node drained for a spot interruption (by `gpuroom agent` on it: see
//!   `domain::spot_drain`) has its jobs signalled at once and requeued before
//!   the deadline, and the room records the interruption (returned to the
//!   room, which runs its own notice path: hazard model, node draining).
//!
//! In control mode the commands leave as `Effect::Slurm` under the audit
//! names "budget" and "spot notice"; in advisory mode they are only proposed
//! (shown on the job's row and noted once). A command is sent once per job
//! and condition, as the quota advice is (`SlurmMirror::may_send`).
//!
//! Writes the mirror's `SlurmActs` (kept in `room::slurm`); sends through the mirror.

use std::collections::{BTreeMap, BTreeSet};

use super::journal::Severity;
use super::slurm::{AdviceNote, Ctx, FollowUp, SlurmMirror};
use crate::cost::budget::BudgetLevel;
use crate::domain::event::Effect;
use crate::domain::ids::{NodeId, TenantId};
use crate::domain::slurm::{SlurmJob, SlurmMode, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::spot_drain;
use crate::domain::text::clean;
use crate::domain::units::At;

/// What AWS gives when a notice names no time.
const NOTICE_SECS: i64 = 120;
/// A requeue for a spot notice lands this long before the deadline at the latest.
const BEFORE_DEADLINE_SECS: i64 = 30;

/// One snapshot's pass: when, whether commands leave, and where they go.
struct Pass<'e> {
    at: At,
    control: bool,
    /// Advisory mode: what would be sent, by job.
    proposals: BTreeMap<u64, AdviceNote>,
    effects: &'e mut Vec<Effect>,
}

/// Why a job is acted on.
enum Cause {
    Budget,
    Spot { node: String, deadline: At },
}

impl Cause {
    fn by(&self) -> &'static str {
        match self {
            Cause::Budget => "budget",
            Cause::Spot { .. } => "spot notice",
        }
    }
}

impl SlurmMirror {
    /// Acts on the newest snapshot; returns the room nodes newly drained for
    /// a spot interruption, with their deadlines, for the room to record.
    pub fn act(&mut self, ctx: &mut Ctx<'_>, levels: &BTreeMap<TenantId, BudgetLevel>, at: At, effects: &mut Vec<Effect>) -> Vec<(NodeId, At)> {
        let Some(snapshot) = self.snapshot.clone() else { return Vec::new() };
        let mut pass = Pass { at, control: ctx.policy.mode == SlurmMode::Control, proposals: BTreeMap::new(), effects };
        let drained = self.spot_drains(ctx, &snapshot, &mut pass);
        self.budgets(ctx, &snapshot, levels, &mut pass);
        self.follow_up(ctx, &snapshot, &mut pass);
        let proposals = pass.proposals;
        for (job, note) in &proposals {
            if !self.acts.proposals.contains_key(job) {
                ctx.journal.note(at, Severity::Info, format!("slurm advice: {} job {job}: {}", note.verb, note.why));
            }
        }
        self.acts.proposals = proposals;
        drained
    }

    /// Whether a requeue's grace period is over and nothing for its job is
    /// on its way (asked on every event: it must not fire again while one is).
    pub fn follow_up_due(&self, at: At) -> bool {
        self.acts.follow_ups.iter().any(|(job, f)| f.due <= at && !self.in_flight.values().any(|c| c.job == *job))
    }

    fn spot_drains(&mut self, ctx: &mut Ctx<'_>, snapshot: &SlurmSnapshot, pass: &mut Pass<'_>) -> Vec<(NodeId, At)> {
        let at = pass.at;
        let mut newly = Vec::new();
        let mut still = BTreeSet::new();
        for n in snapshot.nodes.iter().filter(|n| n.state.contains("drain")) {
            let Some(drain) = spot_drain::parse(&n.reason) else { continue };
            still.insert(n.name.clone());
            let deadline = match self.acts.spot_drained.get(&n.name) {
                Some(known) => *known,
                None => {
                    let deadline = drain.deadline.unwrap_or(at + chrono::TimeDelta::seconds(NOTICE_SECS));
                    self.acts.spot_drained.insert(n.name.clone(), deadline);
                    let jobs = snapshot.jobs.iter().filter(|j| runs_on(j, &n.name)).count();
                    let text = format!(
                        "slurm node {}: spot interruption ({}), reclaimed at {}; {jobs} job(s) to save",
                        clean(&n.name),
                        clean(&drain.kind),
                        deadline.format("%H:%M:%SZ")
                    );
                    ctx.journal.note(at, Severity::Action, text);
                    if let Some(id) = n.node {
                        newly.push((id, deadline));
                    }
                    deadline
                }
            };
            for job in snapshot.jobs.iter().filter(|j| runs_on(j, &n.name)) {
                self.save_and_requeue(ctx, job, Cause::Spot { node: n.name.clone(), deadline }, pass);
            }
        }
        self.acts.spot_drained.retain(|name, _| still.contains(name));
        newly
    }

    fn budgets(&mut self, ctx: &mut Ctx<'_>, snapshot: &SlurmSnapshot, levels: &BTreeMap<TenantId, BudgetLevel>, pass: &mut Pass<'_>) {
        let (at, control) = (pass.at, pass.control);
        for job in &snapshot.jobs {
            let tenant = job.tags().tenant;
            let level = levels.get(&tenant).copied().unwrap_or(BudgetLevel::Ok);
            let name = clean(&tenant.0);
            if job.state == SlurmState::Pending && level >= BudgetLevel::Limited && !job.held() {
                let why = format!("account {name} is at its budget ({}): its pending jobs wait", level.label());
                if !control {
                    pass.proposals.insert(job.id, AdviceNote { verb: SlurmVerb::Hold, for_job: 0, why });
                } else if self.may_send(job.id) && self.check_verb(ctx.policy, job.id, &SlurmVerb::Hold).is_ok() {
                    self.send(at, job.id, SlurmVerb::Hold, Cause::Budget.by().to_string(), pass.effects);
                    self.acts.budget_held.insert(job.id);
                }
            } else if job.held() && level < BudgetLevel::Limited && self.acts.budget_held.contains(&job.id) {
                let why = format!("account {name} is back under its budget ({})", level.label());
                if !control {
                    pass.proposals.insert(job.id, AdviceNote { verb: SlurmVerb::Release, for_job: 0, why });
                } else if self.check_verb(ctx.policy, job.id, &SlurmVerb::Release).is_ok() {
                    self.send(at, job.id, SlurmVerb::Release, Cause::Budget.by().to_string(), pass.effects);
                    self.acts.budget_held.remove(&job.id);
                }
            } else if job.holds_gpus() && level == BudgetLevel::Blocked {
                self.save_and_requeue(ctx, job, Cause::Budget, pass);
            }
        }
        // A job gone from Slurm, or run by someone else's release, is no longer ours to release.
        self.acts.budget_held.retain(|id| snapshot.jobs.iter().any(|j| j.id == *id && j.state == SlurmState::Pending));
    }

    /// The checkpoint signal now, the requeue after the grace period.
    fn save_and_requeue(&mut self, ctx: &mut Ctx<'_>, job: &SlurmJob, cause: Cause, pass: &mut Pass<'_>) {
        let at = pass.at;
        if self.acts.follow_ups.contains_key(&job.id) || !matches!(job.state, SlurmState::Running | SlurmState::Suspended) {
            return;
        }
        let grace = chrono::TimeDelta::seconds(ctx.policy.checkpoint_grace.0.max(0));
        let due = match &cause {
            Cause::Spot { deadline, .. } => (at + grace).min(*deadline - chrono::TimeDelta::seconds(BEFORE_DEADLINE_SECS)).max(at),
            Cause::Budget => at + grace,
        };
        let signal = ctx.policy.checkpoint_verb();
        let why = match &cause {
            Cause::Budget => format!("account {} passed its hard budget limit: save, then requeue at {}", clean(&job.tags().tenant.0), due.format("%H:%M:%SZ")),
            Cause::Spot { node, deadline } => {
                format!("node {} is reclaimed at {}: save, then requeue at {}", clean(node), deadline.format("%H:%M:%SZ"), due.format("%H:%M:%SZ"))
            }
        };
        if !pass.control {
            pass.proposals.insert(job.id, AdviceNote { verb: signal, for_job: 0, why });
            return;
        }
        if !self.may_send(job.id) || self.check_verb(ctx.policy, job.id, &signal).is_err() {
            return;
        }
        let by = cause.by().to_string();
        self.send(at, job.id, signal, by.clone(), pass.effects);
        self.acts.follow_ups.insert(job.id, FollowUp { verb: SlurmVerb::Requeue, due, by });
    }

    /// Sends the requeues whose grace period is over; drops those whose job
    /// no longer runs (it ended, or someone else moved it).
    fn follow_up(&mut self, ctx: &mut Ctx<'_>, snapshot: &SlurmSnapshot, pass: &mut Pass<'_>) {
        let at = pass.at;
        let jobs: Vec<u64> = self.acts.follow_ups.keys().copied().collect();
        for id in jobs {
            let running = snapshot.jobs.iter().any(|j| j.id == id && matches!(j.state, SlurmState::Running | SlurmState::Suspended));
            if !running {
                self.acts.follow_ups.remove(&id);
                continue;
            }
            let Some(f) = self.acts.follow_ups.get(&id).cloned() else { continue };
            if f.due > at || self.in_flight.values().any(|c| c.job == id) {
                continue;
            }
            self.acts.follow_ups.remove(&id);
            if self.check_verb(ctx.policy, id, &f.verb).is_ok() {
                self.send(at, id, f.verb, f.by, pass.effects);
            }
        }
    }
}

fn runs_on(job: &SlurmJob, node: &str) -> bool {
    job.holds_gpus() && job.nodes.iter().any(|n| n == node)
}
