//! The `Room`'s scheduling pass and the periodic checks around it: which
//! queued jobs start where (discipline order, quotas with borrowing, EASY
//! backfill behind the head job's reservation), what is preempted to give a
//! tenant its quota back or a higher MLFQ queue its turn, when a job is due a
//! checkpoint, when a wait passes its limit, and when an idle GPU is released.
//! The policies are in `sched/` and `ckpt/`; this file applies them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::domain::cluster::{Allocation, BillingMode, Node};
use crate::domain::event::Effect;
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::{AfterCheckpoint, Avoid, Job, JobClass, JobSpec, JobState, Phase, Placement, PoolPreference, SchedStop, StopReason};
use super::{Room, Severity};
use crate::domain::text::clean;
use crate::domain::units::{At, Secs};
use crate::sched::backfill::{self, Reservation};
use crate::sched::discipline::{DisciplineKind, Mlfq, OrderContext};
use crate::sched::placement::{self, Options, Plan};
use crate::sched::quota::{self, Admission, Held};
use crate::sched::{preempt, Resources};

/// Upper bounds of what could fit anywhere, per pool a job may use, so that a
/// pass over a long queue on a full cluster skips most jobs in O(1), and an
/// arrival that cannot fit does not trigger a pass at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Headroom {
    /// Indexed by `pool_class`: [any, not spot, spot only].
    free_units: [u32; 3],
    largest_block: [u32; 3],
    /// Some tenant runs on borrowed capacity (an owner's arrival may reclaim it).
    any_borrowed: bool,
    /// A scheduler preemption is in flight: its release will trigger a pass.
    stop_pending: bool,
    /// What each tenant held after the pass (quota terms).
    #[serde(with = "crate::domain::serde_pairs")]
    held: BTreeMap<TenantId, Held>,
    /// When the pass ran.
    at: Option<At>,
}

fn pool_class(pool: PoolPreference, escalated: bool) -> usize {
    match (pool, escalated) {
        (PoolPreference::Any, _) | (PoolPreference::SpotOnly, true) => 0,
        (PoolPreference::NoSpot, _) => 1,
        (PoolPreference::SpotOnly, false) => 2,
    }
}

impl Headroom {
    fn measure(nodes: &BTreeMap<NodeId, Node>, time_sharing: bool) -> Headroom {
        let mut h = Headroom::default();
        for node in nodes.values().filter(|n| n.accepts_work()) {
            let free = node.gpus.iter().filter(|g| g.is_free()).count() as u32;
            let block = node
                .gpus
                .iter()
                .filter(|g| time_sharing || !g.has_exclusive())
                .map(|g| g.largest_free_block().0)
                .max()
                .unwrap_or(0);
            let spot = node.spec.billing == BillingMode::Spot;
            for (class, counts) in [(0, true), (1, !spot), (2, spot)] {
                if counts {
                    h.free_units[class] = h.free_units[class].max(free);
                    h.largest_block[class] = h.largest_block[class].max(block);
                }
            }
        }
        h
    }

    /// Nothing at all fits anywhere.
    fn is_empty(&self) -> bool {
        self.free_units.iter().all(|u| *u == 0) && self.largest_block.iter().all(|b| *b == 0)
    }

    fn may_fit(&self, spec: &JobSpec, escalated: bool) -> bool {
        let class = pool_class(spec.pool, escalated);
        if spec.exclusive { u32::from(spec.gpus) <= self.free_units[class] } else { spec.gpu_mem.0 <= self.largest_block[class] }
    }
}

impl Room {
    pub(crate) fn place_options(&self) -> Options {
        Options { fit: self.config.sched.fit, time_sharing: self.config.sched.time_sharing, avoid: None }
    }

    /// What each tenant holds now, in DRF's four dimensions and in quota terms.
    fn holdings(&self) -> (BTreeMap<TenantId, Resources>, BTreeMap<TenantId, Held>) {
        let mut resources: BTreeMap<TenantId, Resources> = BTreeMap::new();
        let mut held: BTreeMap<TenantId, Held> = BTreeMap::new();
        for job in self.holding.iter().filter_map(|id| self.jobs.get(id)) {
            let tenant = &job.spec.tags.tenant;
            // A tenant's name is cloned once, not once per job (every pass runs this).
            match resources.get_mut(tenant) {
                Some(r) => r.add(Resources::of(&job.spec)),
                None => resources.entry(tenant.clone()).or_default().add(Resources::of(&job.spec)),
            }
            match held.get_mut(tenant) {
                Some(h) => h.add(Held::of(&job.spec)),
                None => held.entry(tenant.clone()).or_default().add(Held::of(&job.spec)),
            }
        }
        (resources, held)
    }

    fn capacity(&self) -> Resources {
        let mut cap = Resources::default();
        for node in self.nodes.values().filter(|n| n.accepts_work()) {
            cap.gpus += f64::from(node.spec.gpu_count);
            cap.gpu_mem += node.gpus.iter().map(|g| f64::from(g.memory.0)).sum::<f64>();
            cap.cpus += f64::from(node.spec.cpus);
            cap.host_mem += f64::from(node.spec.host_memory.0);
        }
        cap
    }

    /// The queue in the current discipline's order, escalated jobs first.
    pub(crate) fn ordered_queue(&self, now: At) -> Vec<&Job> {
        let (held, _) = self.holdings();
        let ctx = OrderContext { now, config: &self.config.sched, held: &held, capacity: self.capacity() };
        let mut queued: Vec<&Job> = self.queued.iter().filter_map(|id| self.jobs.get(id)).collect();
        self.config.sched.discipline.discipline().order(&mut queued, &ctx);
        // Escalated first, each part in the discipline's order (a stable partition).
        let (mut first, rest): (Vec<&Job>, Vec<&Job>) = queued.into_iter().partition(|j| j.escalated);
        first.extend(rest);
        first
    }

    /// Jobs whose GPUs are borrowed beyond their tenant's quota.
    pub fn borrowed(&self) -> BTreeSet<JobId> {
        quota::borrowed(self.holding.iter().filter_map(|id| self.jobs.get(id)), &self.tenants)
    }

    /// When each job holding GPUs is predicted to end: from its measured
    /// progress rate, else from its submitter's estimate.
    fn predicted_ends(&self, now: At) -> BTreeMap<JobId, At> {
        self.holding
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter_map(|job| {
                let remaining = job.spec.steps_total.saturating_sub(job.steps_done);
                // A rate near zero (a stalled job) predicts no end at all.
                let secs = match self.rates.get(&job.spec.id).and_then(|r| r.remaining_secs(remaining)) {
                    Some((mean, _)) => Secs::from_f64(mean)?,
                    None => remaining_estimate(job)?,
                };
                Some((job.spec.id, now + secs.delta()))
            })
            .collect()
    }

    fn allocate(&mut self, at: At, id: JobId, plan: Plan, effects: &mut Vec<Effect>) {
        self.settle_node(plan.node);
        let Some(spec) = self.jobs.get(&id).map(|j| j.spec.clone()) else { return };
        let time_sharing = self.config.sched.time_sharing;
        if let Some(node) = self.nodes.get_mut(&plan.node) {
            for (index, offset) in &plan.gpus {
                if let Some(gpu) = node.gpus.get_mut(usize::from(*index)) {
                    // An exclusive job owns the whole GPU, or with time-sharing
                    // only what it asked, leaving the rest to lend.
                    let size = if spec.exclusive && !time_sharing { gpu.memory } else { spec.gpu_mem.min(gpu.memory) };
                    gpu.allocations.push(Allocation { job: id, offset: *offset, size, exclusive: spec.exclusive });
                    gpu.idle_since = None;
                }
            }
            node.cpus_used += spec.cpus;
            node.host_mem_used.0 += spec.host_mem.0;
        }
        let gpus: Vec<u8> = plan.gpus.iter().map(|(i, _)| *i).collect();
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let waited = (at - job.queued_since).num_seconds().max(0);
        job.waited_secs += waited;
        job.attempts += 1;
        job.state = JobState::Placed;
        job.placed_at = Some(at);
        job.escalated = false;
        if let Some(Avoid::Pool(left)) = job.avoid.as_deref() {
            let moved = self.nodes.get(&plan.node).is_some_and(|n| {
                n.spec.billing != crate::domain::cluster::BillingMode::Spot || n.spec.zone != left.zone || n.spec.instance_type != left.instance_type
            });
            self.stats.migrations += u64::from(moved);
            job.avoid = None;
        }
        if job.target.take().is_some() {
            self.stats.migrations += 1;
        }
        job.placement = Some(Placement { node: plan.node, gpus: gpus.clone() });
        let resume_step = job.steps_saved;
        self.queued.remove(&id);
        self.holding.insert(id);
        self.stats.placements += 1;
        self.stats.wait_secs_sum += waited;
        self.stats.wait_count += 1;
        let (tenant, class) = (spec.tags.tenant.clone(), spec.class);
        self.wait_group_left(at, &tenant, class, effects);
        if resume_step > 0 {
            let bytes = u64::from(spec.checkpoint_size.0) << 20;
            let amount = crate::cost::ledger::per_gib(bytes, self.config.cost.network_per_gib);
            self.charge_service(at, id, crate::cost::ledger::LineKind::Network, bytes, amount);
        }
        effects.push(Effect::StartJob { job: id, node: plan.node, gpus, resume_step });
    }

    /// Whether a scheduler preemption is still in flight (one batch at a time,
    /// so a pass never preempts twice for the same need).
    fn scheduler_stop_pending(&self) -> bool {
        self.holding.iter().filter_map(|id| self.jobs.get(id)).any(|j| {
            matches!(
                &j.state,
                JobState::Preempted { reason: StopReason::Scheduler(s) } | JobState::Checkpointing { then: AfterCheckpoint::Stop(StopReason::Scheduler(s)) }
                    if !matches!(s, SchedStop::Idle)
            )
        })
    }

    /// Whether a job arriving now could change anything: it may fit, or may
    /// take borrowed capacity back, or (MLFQ) may outrank running work. If
    /// not, the arrival waits for the next change of capacity.
    pub(crate) fn arrival_may_start(&self, spec: &JobSpec, now: At) -> bool {
        let Some(h) = &self.headroom else { return true };
        if h.may_fit(spec, false) {
            return true;
        }
        if h.stop_pending {
            return false;
        }
        let tenant = &spec.tags.tenant;
        let within = quota::admit(spec, h.held.get(tenant).copied().unwrap_or_default(), self.tenants.get(tenant)) == Admission::WithinQuota;
        // Under MLFQ a new job may outrank running work; arrivals start at
        // most one pass a minute for that, so a burst stays cheap.
        let mlfq_due = self.config.sched.discipline == DisciplineKind::Mlfq && h.at.is_none_or(|last| now - last >= chrono::TimeDelta::seconds(60));
        (within && h.any_borrowed) || mlfq_due
    }

    /// The scheduling pass.
    pub(crate) fn schedule(&mut self, at: At, effects: &mut Vec<Effect>) {
        self.queue_dirty = false;
        self.schedule_queue(at, effects);
        let mut headroom = Headroom::measure(&self.nodes, self.config.sched.time_sharing);
        headroom.any_borrowed = !self.borrowed().is_empty();
        headroom.stop_pending = self.scheduler_stop_pending();
        headroom.held = self.holdings().1;
        headroom.at = Some(at);
        self.headroom = Some(headroom);
    }

    fn schedule_queue(&mut self, at: At, effects: &mut Vec<Effect>) {
        if self.queued.is_empty() {
            return;
        }
        let order: Vec<JobId> = self.ordered_queue(at).iter().map(|j| j.spec.id).collect();
        let (_, mut held) = self.holdings();
        let mut headroom = Headroom::measure(&self.nodes, self.config.sched.time_sharing);
        let mut reservation: Option<Reservation> = None;
        let mut spare_left = 0u32;
        let mut blocked: Option<JobId> = None;
        let mut borrowers = Vec::new();
        let any_over_budget = self.any_budget_limited();
        for id in order {
            let Some(job) = self.jobs.get(&id) else { continue };
            let tenant = &job.spec.tags.tenant;
            // Over budget: it waits without holding up the queue or reserving room.
            if any_over_budget && !self.budget_allows(tenant, true) {
                continue;
            }
            match quota::admit(&job.spec, held.get(tenant).copied().unwrap_or_default(), self.tenants.get(tenant)) {
                Admission::Refused => continue,
                Admission::Borrow => {
                    borrowers.push(id);
                    continue;
                }
                Admission::WithinQuota => {}
            }
            match self.try_place(at, id, &headroom, &reservation, &mut spare_left) {
                Some(plan) => {
                    let spec_held = Held::of(&job.spec);
                    held.entry(tenant.clone()).or_default().add(spec_held);
                    self.allocate(at, id, plan, effects);
                    headroom = Headroom::measure(&self.nodes, self.config.sched.time_sharing);
                }
                None => {
                    if blocked.is_none() {
                        blocked = Some(id);
                        if self.config.sched.backfill {
                            let ends = self.predicted_ends(at);
                            if let Some(job) = self.jobs.get(&id) {
                                reservation = backfill::reserve(&self.nodes, &job.spec, job.escalated, &ends, at);
                                spare_left = reservation.as_ref().map_or(0, |r| r.spare_gpus);
                            }
                        }
                    }
                }
            }
            // The head job and its reservation are known and the cluster is
            // full: nobody further down the queue can start in this pass.
            if blocked.is_some() && headroom.is_empty() {
                break;
            }
        }
        let preempting = match blocked {
            Some(id) if !self.scheduler_stop_pending() => self.make_room(at, id, effects),
            _ => self.scheduler_stop_pending(),
        };
        // Borrowing uses idle capacity only: never while an owner waits for room.
        if preempting {
            return;
        }
        for id in borrowers {
            let Some(job) = self.jobs.get(&id) else { continue };
            let tenant = job.spec.tags.tenant.clone();
            if quota::admit(&job.spec, held.get(&tenant).copied().unwrap_or_default(), self.tenants.get(&tenant)) != Admission::Borrow {
                continue;
            }
            if let Some(plan) = self.try_place(at, id, &headroom, &reservation, &mut spare_left) {
                let spec_held = Held::of(&job.spec);
                held.entry(tenant).or_default().add(spec_held);
                self.allocate(at, id, plan, effects);
                headroom = Headroom::measure(&self.nodes, self.config.sched.time_sharing);
            }
        }
    }

    /// A place for job `id` now that respects the reservation, if any.
    fn try_place(&self, at: At, id: JobId, headroom: &Headroom, reservation: &Option<Reservation>, spare_left: &mut u32) -> Option<Plan> {
        let job = self.jobs.get(&id)?;
        if !headroom.may_fit(&job.spec, job.escalated) {
            return None;
        }
        let opts = self.place_options();
        let tenant = &job.spec.tags.tenant;
        if !self.budget_allows(tenant, true) {
            return None;
        }
        let spot_only = !self.budget_allows(tenant, false);
        let allowed = |node: &crate::domain::cluster::Node| match job.avoid.as_deref() {
            _ if spot_only && node.spec.billing != crate::domain::cluster::BillingMode::Spot => false,
            _ if job.target.as_deref().is_some_and(|to| !to.holds(&node.spec)) => false,
            None => true,
            Some(Avoid::AllSpot) => node.spec.billing != crate::domain::cluster::BillingMode::Spot,
            Some(Avoid::Pool(k)) => {
                node.spec.billing != crate::domain::cluster::BillingMode::Spot || node.spec.zone != k.zone || node.spec.instance_type != k.instance_type
            }
        };
        // A pool to avoid is a preference: with no room elsewhere the job
        // goes back to it rather than wait (its replacement may be up).
        let plan = placement::place_where(&self.nodes, &job.spec, job.escalated, &opts, allowed).or_else(|| {
            let budget_ok = |node: &crate::domain::cluster::Node| !spot_only || node.spec.billing == crate::domain::cluster::BillingMode::Spot;
            matches!(job.avoid.as_deref(), Some(Avoid::Pool(_))).then(|| placement::place_where(&self.nodes, &job.spec, job.escalated, &opts, budget_ok)).flatten()
        })?;
        let Some(r) = reservation else { return Some(plan) };
        if plan.node != r.node {
            return Some(plan);
        }
        let ends_in_time = remaining_estimate(job).is_some_and(|secs| at + secs.delta() <= r.at);
        if ends_in_time {
            return Some(plan);
        }
        if u32::from(job.spec.gpus) <= *spare_left && job.spec.exclusive {
            *spare_left -= u32::from(job.spec.gpus);
            return Some(plan);
        }
        placement::place_where(&self.nodes, &job.spec, job.escalated, &Options { avoid: Some(r.node), ..opts }, allowed)
    }

    /// Preempts what the blocked job may take back: borrowed work of other
    /// tenants (newest first), or under MLFQ running jobs of lower queues that
    /// had their quantum. Returns whether anything is being stopped.
    fn make_room(&mut self, at: At, id: JobId, effects: &mut Vec<Effect>) -> bool {
        let Some(job) = self.jobs.get(&id) else { return false };
        let spec = job.spec.clone();
        let escalated = job.escalated;
        let tenant = spec.tags.tenant.clone();
        let opts = self.place_options();
        let borrowed = self.borrowed();
        let mut lenders: Vec<&Job> = borrowed
            .iter()
            .filter_map(|b| self.jobs.get(b))
            .filter(|b| b.spec.tags.tenant != tenant && b.phase() == Phase::Running)
            .collect();
        lenders.sort_by_key(|b| std::cmp::Reverse((b.placed_at, b.spec.id)));
        let candidates: Vec<JobId> = lenders.iter().map(|b| b.spec.id).collect();
        if let Some(victims) = preempt::victims_for(&self.nodes, &spec, escalated, &candidates, &opts) {
            let reason = SchedStop::Reclaim { for_tenant: tenant.clone() };
            self.preempt_for(at, &victims, reason, &format!("quota reclaim for {} ({})", clean(&tenant.0), id), effects);
            return true;
        }
        if self.config.sched.discipline != DisciplineKind::Mlfq {
            return false;
        }
        let config = &self.config.sched;
        let level = Mlfq::effective_level(job, at, config);
        let mut lower: Vec<(usize, &Job)> = self
            .holding
            .iter()
            .filter_map(|h| self.jobs.get(h))
            .filter(|j| j.phase() == Phase::Running)
            .filter(|j| j.started_at.is_some_and(|s| at - s >= config.mlfq_quantum.delta()))
            .map(|j| (Mlfq::level(j, &config.mlfq_thresholds), j))
            .filter(|(l, _)| *l > level)
            .collect();
        lower.sort_by_key(|(l, j)| std::cmp::Reverse((*l, j.started_at, j.spec.id)));
        let candidates: Vec<JobId> = lower.iter().map(|(_, j)| j.spec.id).collect();
        if let Some(victims) = preempt::victims_for(&self.nodes, &spec, escalated, &candidates, &opts) {
            self.preempt_for(at, &victims, SchedStop::Priority { for_job: id }, &format!("mlfq: {id} outranks"), effects);
            return true;
        }
        false
    }

    fn preempt_for(&mut self, at: At, victims: &[JobId], why: SchedStop, text: &str, effects: &mut Vec<Effect>) {
        let names: Vec<String> = victims.iter().map(|v| v.to_string()).collect();
        for victim in victims {
            self.stop_job(*victim, StopReason::Scheduler(why.clone()), true, effects);
        }
        self.stats.preemptions_by_scheduler += victims.len() as u64;
        self.note(at, Severity::Info, format!("{text}: preempting {}", names.join(", ")));
    }

    /// Running jobs whose checkpoint interval has passed start saving.
    pub(crate) fn checkpoints_due(&mut self, at: At, effects: &mut Vec<Effect>) {
        let policy = &self.config.checkpoint;
        // Every interval a job can have is its risk's, the spot maximum or the
        // stable one; a job not due at the shortest of those is not due, and
        // skips the node lookup (this runs on every event).
        let shortest = policy.max_interval.min(policy.stable_interval);
        let due: Vec<JobId> = self
            .holding
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|job| job.phase() == Phase::Running)
            .filter(|job| policy.is_due(job, job.risk.as_ref().map_or(shortest, |r| r.interval.min(shortest)), at))
            .filter(|job| self.checkpoint_interval(job.spec.id).is_some_and(|interval| policy.is_due(job, interval, at)))
            .map(|job| job.spec.id)
            .collect();
        for id in due {
            let kind = self.jobs.get(&id).map(|j| self.config.checkpoint.kind(u64::from(j.checkpoints)));
            if let (Some(job), Some(kind)) = (self.jobs.get_mut(&id), kind) {
                job.state = JobState::Checkpointing { then: AfterCheckpoint::Continue };
                job.checkpoint_asked_at = Some(at);
                effects.push(Effect::Checkpoint { job: id, kind });
            }
        }
    }

    /// Once a simulated minute: queued jobs past their class's wait limit
    /// raise an alarm and are escalated (ordered first; spot-only ones may use
    /// any capacity). The alarm clears when the job is placed or ends.
    pub(crate) fn check_waits(&mut self, at: At, effects: &mut Vec<Effect>) {
        if self.waits_checked.is_some_and(|last| at - last < chrono::TimeDelta::seconds(60)) {
            return;
        }
        self.waits_checked = Some(at);
        let limits = self.config.sched.max_wait.clone();
        let late: Vec<(JobId, Secs, Secs)> = self
            .queued
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|j| !j.escalated)
            .map(|j| (j.spec.id, Secs(j.wait_secs(at)), limits.of(j.spec.class)))
            .filter(|(_, wait, limit)| wait > limit)
            .collect();
        let mut groups: Vec<(TenantId, JobClass)> = Vec::new();
        for (id, _, _) in late {
            let Some(job) = self.jobs.get_mut(&id) else { continue };
            job.escalated = true;
            self.stats.escalations += 1;
            self.queue_dirty = true;
            let group = (job.spec.tags.tenant.clone(), job.spec.class);
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        for (tenant, class) in groups {
            self.refresh_wait_alarm(at, &tenant, class, effects);
        }
    }

    /// One wait alarm per tenant and job class, not one per job: a backlog
    /// of thousands is one line an operator can act on (and acknowledge
    /// once). It names the oldest job and counts the others; it updates in
    /// place as jobs join or leave it and clears when none is left waiting.
    /// A job of the group was placed or ended: its alarm, if any, follows.
    pub(crate) fn wait_group_left(&mut self, at: At, tenant: &TenantId, class: JobClass, effects: &mut Vec<Effect>) {
        // No alarm, nothing to update (and no scan of a long queue on every placement).
        if self.alarms.contains_key(&wait_alarm_id(tenant, class)) {
            self.refresh_wait_alarm(at, tenant, class, effects);
        }
    }

    pub(crate) fn refresh_wait_alarm(&mut self, at: At, tenant: &TenantId, class: JobClass, effects: &mut Vec<Effect>) {
        let id = wait_alarm_id(tenant, class);
        let late: Vec<&Job> = self
            .queued
            .iter()
            .filter_map(|j| self.jobs.get(j))
            .filter(|j| j.escalated && j.spec.class == class && j.spec.tags.tenant == *tenant)
            .collect();
        let Some(oldest) = late.iter().max_by_key(|j| (j.wait_secs(at), std::cmp::Reverse(j.spec.id))) else {
            self.clear(&id, effects);
            return;
        };
        let limit = self.config.sched.max_wait.of(class);
        let widened = if late.iter().any(|j| j.spec.pool == PoolPreference::SpotOnly) { ", spot-only ones may now use on-demand or reserved capacity" } else { "" };
        let (job_id, name, wait) = (oldest.spec.id, clean(&oldest.spec.name), Secs(oldest.wait_secs(at)));
        let text = match late.len() {
            1 => format!("{job_id} {name} waited {wait} (limit {limit} for {}): escalated{widened}", class.label()),
            n => format!("{}: {n} {} jobs waited past {limit}, oldest {job_id} {name} {wait}: escalated{widened}", clean(&tenant.0), class.label()),
        };
        match self.alarms.get_mut(&id) {
            // Already raised: the count and the oldest change in place, without a log line each time.
            Some(alarm) => alarm.text = text,
            None => self.raise(at, id, text, effects),
        }
    }

    /// After a telemetry sample: a GPU whose jobs all run below the idle
    /// threshold starts (or keeps) an idle streak; any busy sample ends it. A
    /// streak as long as the window releases the GPU: its jobs save and stop
    /// for good.
    pub(crate) fn track_idle(&mut self, at: At, gpu_ref: crate::domain::ids::GpuRef, util: f32, effects: &mut Vec<Effect>) {
        let window = self.config.sched.idle_window;
        if window.0 <= 0 {
            return;
        }
        let threshold = self.config.sched.idle_util_pct;
        let Some(gpu) = self.nodes.get(&gpu_ref.node).and_then(|n| n.gpus.get(usize::from(gpu_ref.index))) else { return };
        let jobs: Vec<JobId> = gpu.allocations.iter().map(|a| a.job).collect();
        let all_running = !jobs.is_empty() && jobs.iter().all(|j| self.jobs.get(j).is_some_and(|j| j.phase() == Phase::Running));
        let idle = all_running && util < threshold;
        let since = match (idle, gpu.idle_since) {
            (false, _) => None,
            (true, Some(since)) => Some(since),
            (true, None) => Some(at),
        };
        let Some(gpu) = self.nodes.get_mut(&gpu_ref.node).and_then(|n| n.gpus.get_mut(usize::from(gpu_ref.index))) else { return };
        gpu.idle_since = since;
        if let Some(since) = since
            && at - since >= window.delta()
        {
            gpu.idle_since = None;
            self.stats.idle_reclaims += jobs.len() as u64;
            let node = self.node_name(gpu_ref.node);
            for job in jobs {
                self.stop_job(job, StopReason::Scheduler(SchedStop::Idle), true, effects);
                let name = self.jobs.get(&job).map(|j| clean(&j.spec.name)).unwrap_or_default();
                self.note(at, Severity::Warn, format!("idle reclaim: {job} {name} on {node} GPU {} below {threshold}% since {}", gpu_ref.index, since.format("%H:%M:%S")));
            }
        }
    }
}

/// The id of a tenant's wait alarm for one job class.
fn wait_alarm_id(tenant: &TenantId, class: JobClass) -> String {
    format!("wait:{}:{}", tenant.0, class.label())
}

/// What is left of a job's own run-time estimate, scaled by its saved progress.
fn remaining_estimate(job: &Job) -> Option<Secs> {
    let est = job.spec.est_runtime?;
    let total = job.spec.steps_total.max(1) as f64;
    let left = 1.0 - job.steps_done.min(job.spec.steps_total) as f64 / total;
    Some(Secs((est.0 as f64 * left).ceil() as i64))
}

#[cfg(test)]
mod timing {
    //! Where a pass spends its time on a big full cluster (run by hand:
    //! `cargo test --release --lib timing -- --ignored --nocapture`).
    use super::*;
    use crate::domain::cluster::BillingMode;
    use crate::domain::event::Event;
    use crate::domain::testkit::{job_spec, node_spec, t, tenant_spec};

    #[test]
    #[ignore]
    fn pass_breakdown() {
        let mut room = Room::new(crate::room::RoomConfig::default());
        for name in ["nlp", "vision", "recsys"] {
            room.apply(t(0), &Event::TenantDefined { spec: tenant_spec(name, 4000) });
        }
        for n in 1..=1250 {
            room.apply(t(0), &Event::NodeUp { spec: node_spec(n, BillingMode::Reserved, 8) });
        }
        let mut started = Vec::new();
        for n in 0..1250u64 {
            for e in room.apply(t(1), &Event::JobSubmitted { spec: job_spec(n + 1, ["nlp", "vision", "recsys"][n as usize % 3], 8) }) {
                if let Effect::StartJob { job, .. } = e {
                    started.push(job);
                }
            }
        }
        for job in started {
            room.apply(t(2), &Event::JobStarted { job });
        }
        for i in 0..100_000u64 {
            let mut spec = job_spec(1_000_000 + i, ["nlp", "vision", "recsys"][i as usize % 3], 1 + (i % 8) as u8);
            spec.priority = (i % 5) as i32;
            room.apply(t(3), &Event::JobSubmitted { spec });
        }
        let clock = std::time::Instant::now;
        for d in DisciplineKind::ALL {
            room.config.sched.discipline = d;
            let s = clock();
            let order = room.ordered_queue(t(60));
            let ordered = s.elapsed();
            drop(order);
            let s = clock();
            let _ = room.holdings();
            let holdings = s.elapsed();
            let s = clock();
            let _ = Headroom::measure(&room.nodes, false);
            let headroom = s.elapsed();
            let s = clock();
            let _ = room.predicted_ends(t(60));
            let ends = s.elapsed();
            let s = clock();
            let _ = room.borrowed();
            let borrowed = s.elapsed();
            let mut r = room.clone();
            let s = clock();
            r.apply(t(60), &Event::JobExited { job: JobId(7), ok: true, message: String::new() });
            let apply = s.elapsed();
            println!("{d:?}: order {ordered:?} holdings {holdings:?} headroom {headroom:?} ends {ends:?} borrowed {borrowed:?} | whole apply {apply:?}");
        }
    }
}
