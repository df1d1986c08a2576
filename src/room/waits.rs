//! Wait alarms: a queued job past its class's wait limit is escalated
//! (ordered first; a spot-only one may use any capacity) and raises an alarm,
//! one per tenant and job class, that clears when the last such job is placed
//! or ends.
//!
//! Owns the wording and the grouping of wait alarms; reads the queue from the
//! fleet and writes the journal it is lent (`Waits`).

use super::fleet::Fleet;
use super::journal::Journal;
use crate::domain::event::Effect;
use crate::domain::ids::TenantId;
use crate::domain::job::JobClass;
use crate::domain::text::clean;
use crate::domain::units::{At, Secs};
use crate::sched::MaxWait;

/// The parts the wait alarms touch.
pub struct Waits<'a> {
    pub limits: &'a MaxWait,
    pub fleet: &'a mut Fleet,
    pub journal: &'a mut Journal,
}

impl Waits<'_> {
    /// Once a simulated minute (`last` is when it last looked): queued jobs
    /// past their class's wait limit raise an alarm and are escalated (ordered
    /// first; spot-only ones may use any capacity). The alarm clears when the
    /// job is placed or ends. Returns whether a job was escalated (the queue
    /// must be looked at again).
    pub fn check(&mut self, last: &mut Option<At>, at: At, effects: &mut Vec<Effect>) -> bool {
        if last.is_some_and(|last| at - last < chrono::TimeDelta::seconds(60)) {
            return false;
        }
        *last = Some(at);
        let (limits, fleet) = (self.limits, &mut *self.fleet);
        let late = fleet.wait_index().late(at, limits);
        let mut groups: Vec<(TenantId, JobClass)> = Vec::new();
        let mut escalated = false;
        for id in late {
            fleet.escalate(id);
            let Some(job) = fleet.jobs.get(&id) else { continue };
            self.journal.stats.escalations += 1;
            escalated = true;
            let group = (job.spec.tags.tenant.clone(), job.spec.class);
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        for (tenant, class) in groups {
            self.refresh(at, &tenant, class, effects);
        }
        escalated
    }

    /// One wait alarm per tenant and job class, not one per job: a backlog
    /// of thousands is one line an operator can act on (and acknowledge
    /// once). It names the oldest job and counts the others; it updates in
    /// place as jobs join or leave it and clears when none is left waiting.
    /// A job of the group was placed or ended: its alarm, if any, follows.
    pub fn group_left(&mut self, at: At, tenant: &TenantId, class: JobClass, effects: &mut Vec<Effect>) {
        // No alarm, nothing to update (and no scan of a long queue on every placement).
        if self.journal.is_active(&wait_alarm_id(tenant, class)) {
            self.refresh(at, tenant, class, effects);
        }
    }

    fn refresh(&mut self, at: At, tenant: &TenantId, class: JobClass, effects: &mut Vec<Effect>) {
        let group = self.fleet.wait_index().group(tenant, class, at);
        let (limits, fleet, journal) = (self.limits, &*self.fleet, &mut *self.journal);
        let id = wait_alarm_id(tenant, class);
        let Some((group, oldest)) = group.and_then(|g| fleet.jobs.get(&g.oldest).map(|job| (g, job))) else {
            journal.clear(at, &id, effects);
            return;
        };
        let limit = limits.of(class);
        let widened = if group.any_spot_only { ", spot-only ones may now use on-demand or reserved capacity" } else { "" };
        let (job_id, name, wait) = (oldest.spec.id, clean(&oldest.spec.name), Secs(oldest.wait_secs(at)));
        let text = match group.jobs {
            1 => format!("{job_id} {name} waited {wait} (limit {limit} for {}): escalated{widened}", class.label()),
            n => format!("{}: {n} {} jobs waited past {limit}, oldest {job_id} {name} {wait}: escalated{widened}", clean(&tenant.0), class.label()),
        };
        // Already raised: the count and the oldest change in place, without a log line each time.
        journal.raise_or_update(at, &id, text, None, effects);
    }
}

/// The id of a tenant's wait alarm for one job class.
fn wait_alarm_id(tenant: &TenantId, class: JobClass) -> String {
    format!("wait:{}:{}", tenant.0, class.label())
}
