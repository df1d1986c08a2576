//! The `Room`'s scheduling pass and the periodic checks around it: which
//! queued jobs start where (discipline order, quotas with borrowing, EASY
//! backfill behind the head job's reservation), what is preempted to give a
//! tenant its quota back or a higher MLFQ queue its turn, when a job is due a
//! checkpoint, when a wait passes its limit, and when an idle GPU is released.
//! The policies are in `sched/` and `ckpt/`; this file applies them.
//!
//! Owns the pass's own state (`SchedState`: whether the queue must be looked
//! at, the headroom measured by the last pass); `Pass` borrows the pieces a
//! pass reads and writes (the fleet, the costs, the budgets, the journal).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::budget::Budgets;
use super::config::RoomConfig;
use super::cost::Costs;
use super::fleet::Fleet;
use super::headroom::Headroom;
use super::journal::{Journal, Severity};
use super::pass_shortcuts::{Doors, Open, STOP_CHECK_AFTER, Shortcuts, probe_template};
use super::waits::Waits;
use crate::ckpt::CheckpointPolicy;
use crate::domain::cluster::{Allocation, BillingMode, Node, NodeSpec};
use crate::domain::event::{Effect, TenantSpec};
use crate::domain::ids::{GpuRef, JobId, NodeId, TenantId};
use crate::domain::job::{AfterCheckpoint, Avoid, Job, JobSpec, JobState, Phase, Placement, PoolPreference, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::At;
use crate::market::Market;
use crate::sched::backfill::{self, Reservation};
use crate::sched::discipline::{DisciplineKind, Mlfq};
use crate::sched::frag_gradient::{self, Weigher};
use crate::sched::placement::{self, Options, Plan};
use crate::sched::quota::{self, Admission, Held};
use crate::sched::{FitPolicy, SchedConfig, preempt};

/// What the scheduler keeps between passes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedState {
    /// Something changed that may let a queued job start: a pass is due.
    pub queue_dirty: bool,
    /// When queue waits were last checked against their limits.
    pub waits_checked: Option<At>,
    /// Free capacity as of the last pass (see `arrival_may_start`).
    #[serde(default)]
    pub headroom: Option<Headroom>,
    #[cfg(test)]
    #[serde(skip)]
    pub test: PassKnobs,
}

/// Tests compare a pass that takes its shortcuts (tenants passed over,
/// stops when nothing fits) with one that tries every queued job; never
/// part of a room's state or equality.
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub struct PassKnobs {
    pub full_walk: bool,
    /// Jobs passes did not try thanks to their shortcuts.
    pub not_tried: u64,
}

#[cfg(test)]
impl PartialEq for PassKnobs {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SchedState {
    /// Counts the jobs a shortcut left untried (tests only).
    pub(super) fn skipped(&mut self, _jobs: usize) {
        #[cfg(test)]
        {
            self.test.not_tried += _jobs as u64;
        }
    }

    pub(super) fn shortcuts(&self) -> bool {
        #[cfg(test)]
        return !self.test.full_walk;
        #[cfg(not(test))]
        true
    }
}

/// On-demand nodes the room bought, and the spot pools it could buy from
/// now: work that may run on spot is not started on those nodes while a spot
/// pool could take it, since a new spot node costs a boot's wait while an
/// on-demand GPU costs three times as much for as long as the job runs (and
/// would keep the node from being given back).
#[derive(Clone, Debug, Default)]
pub struct Costly {
    pub nodes: BTreeSet<NodeId>,
    pub open_spot: Vec<NodeSpec>,
    /// Every pool the room could buy a node in now.
    pub buyable: Vec<NodeSpec>,
}

fn fits(s: &JobSpec, n: &NodeSpec) -> bool {
    s.gpus <= n.gpu_count
        && s.gpu_mem <= n.gpu_memory
        && s.cpus <= n.cpus
        && s.host_mem <= n.host_memory
        && crate::domain::job::models_allow(&s.gpu_models, &n.gpu_model)
}

impl Costly {
    /// Whether capacity for `job` can be bought: then a blocked job waits for
    /// it instead of preempting other work (a boot is cheaper than a loss).
    pub fn can_buy_for(&self, job: &Job) -> bool {
        self.buyable.iter().any(|n| fits(&job.spec, n) && placement::pool_allows(job.spec.pool, job.escalated, n.billing))
    }

    /// Whether `job` waits for spot rather than use these nodes.
    pub fn keeps_off(&self, job: &Job) -> bool {
        // An operator's migration target wins over this rule.
        if self.nodes.is_empty()
            || job.escalated
            || job.target.is_some()
            || job.spec.pool == PoolPreference::NoSpot
            || matches!(job.avoid.as_deref(), Some(Avoid::AllSpot))
        {
            return false;
        }
        self.open_spot.iter().any(|n| fits(&job.spec, n))
    }
}

/// The pieces one scheduling pass reads and writes.
pub struct Pass<'a> {
    pub config: &'a RoomConfig,
    pub now: Option<At>,
    pub fleet: &'a mut Fleet,
    pub costs: &'a mut Costs,
    pub market: &'a Market,
    pub budgets: &'a Budgets,
    pub journal: &'a mut Journal,
    pub state: &'a mut SchedState,
    pub costly: &'a Costly,
}

impl Pass<'_> {
    fn allocate(&mut self, at: At, id: JobId, plan: Plan, effects: &mut Vec<Effect>) {
        self.costs.settle_node(self.now, self.fleet, self.market, plan.node);
        let Some(spec) = self.fleet.jobs.get(&id).map(|j| j.spec.clone()) else { return };
        let time_sharing = self.config.sched.time_sharing;
        if let Some(node) = self.fleet.nodes.get_mut(&plan.node) {
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
        let Some(job) = self.fleet.jobs.get_mut(&id) else { return };
        let waited = (at - job.queued_since).num_seconds().max(0);
        job.waited_secs += waited;
        job.attempts += 1;
        job.set_state(JobState::Placed, Some(at));
        job.placed_at = Some(at);
        job.escalated = false;
        if let Some(Avoid::Pool(left)) = job.avoid.as_deref() {
            let moved = self
                .fleet
                .nodes
                .get(&plan.node)
                .is_some_and(|n| n.spec.billing != BillingMode::Spot || n.spec.zone != left.zone || n.spec.instance_type != left.instance_type);
            self.journal.stats.migrations += u64::from(moved);
            job.avoid = None;
        }
        if job.target.take().is_some() {
            self.journal.stats.migrations += 1;
        }
        job.placement = Some(Placement { node: plan.node, gpus: gpus.clone() });
        let resume_step = job.steps_saved;
        self.fleet.dequeue(id);
        self.fleet.hold(id);
        self.journal.stats.placements += 1;
        self.journal.stats.wait_secs_sum += waited;
        self.journal.stats.wait_count += 1;
        let (tenant, class) = (spec.tags.tenant.clone(), spec.class);
        Waits { limits: &self.config.sched.max_wait, fleet: self.fleet, journal: self.journal }.group_left(at, &tenant, class, effects);
        if resume_step > 0 {
            let bytes = u64::from(spec.checkpoint_size.0) << 20;
            let amount = crate::cost::ledger::per_gib(bytes, self.config.cost.network_per_gib);
            self.costs.charge_service(at, self.fleet, id, crate::cost::ledger::LineKind::Network, bytes, amount);
        }
        effects.push(Effect::StartJob { job: id, node: plan.node, gpus, resume_step });
    }

    /// The scheduling pass.
    pub fn schedule(&mut self, at: At, effects: &mut Vec<Effect>) {
        self.state.queue_dirty = false;
        // The queue's pass measures the nodes after its last placement; stops
        // it asks for free nothing yet, so that measure still holds.
        let measured = self.schedule_queue(at, effects);
        let mut headroom = measured.unwrap_or_else(|| Headroom::measure(&self.fleet.nodes, self.config.sched.time_sharing));
        headroom.any_borrowed = self.fleet.any_borrowed();
        headroom.stop_pending = self.fleet.scheduler_stop_pending();
        headroom.held = self.fleet.holdings().1;
        headroom.at = Some(at);
        self.state.headroom = Some(headroom);
    }

    /// The pass over the queue; returns the free capacity it last measured.
    fn schedule_queue(&mut self, at: At, effects: &mut Vec<Effect>) -> Option<Headroom> {
        if self.fleet.queue_is_empty() {
            return None;
        }
        let queued_at_start = self.fleet.queue_len();
        let mut walk = self.fleet.walk_queue(&self.config.sched, at);
        // The shapes fragmentation is measured for: what is queued and running now.
        let workload = (self.config.sched.fit == FitPolicy::Fragmentation).then(|| {
            let workload =
                frag_gradient::workload_of(self.fleet.queued_ids().chain(self.fleet.holding_ids()).filter_map(|id| self.fleet.jobs.get(&id)).map(|j| &j.spec));
            let time_sharing = self.config.sched.time_sharing;
            let up: Vec<frag_gradient::NodeFree> = if workload.model_bound() {
                self.fleet.nodes.values().filter(|n| n.accepts_work()).map(|n| frag_gradient::node_free(n, time_sharing)).collect()
            } else {
                Vec::new()
            };
            frag_gradient::Weigher::new(workload, up.iter())
        });
        let workload = workload.as_ref();
        let (_, mut held) = self.fleet.holdings();
        let mut headroom = Headroom::measure(&self.fleet.nodes, self.config.sched.time_sharing);
        let mut reservation: Option<Reservation> = None;
        let mut spare_left = 0u32;
        let mut blocked: Option<JobId> = None;
        let mut borrowers = Vec::new();
        let mut unplaceable = Unplaceable::default();
        let any_over_budget = self.budgets.any_limited();
        // Jobs tried since the nodes last changed, and whether the queue's
        // shapes were asked since (`anything_may_start`).
        let (mut misses, mut asked) = (0u32, false);
        let template = self.fleet.queued_ids().next().and_then(|id| self.fleet.jobs.get(&id)).map(probe_template)?;
        let mut doors = Doors::default();
        self.fleet.queue_shapes();
        let queued_tenants: Vec<TenantId> = self.fleet.built_queue_shapes().map(|s| s.tenants().into_iter().cloned().collect()).unwrap_or_default();
        for tenant in queued_tenants {
            let open = self.doors(&tenant, held.get(&tenant).copied().unwrap_or_default(), &headroom, &template);
            doors.set(tenant, open);
        }
        // The queue in order, as far as a job may still be admitted within
        // its tenant's quota; past that only borrowers are left, and they
        // are tried after it, read on from the same walk.
        let mut walked = 0;
        loop {
            if doors.none_within() {
                break;
            }
            let Some(id) = self.fleet.walk_next(&mut walk, &self.config.sched) else { break };
            walked += 1;
            // Every job tried without a placement counts, skipped ones too.
            misses += 1;
            let Some(job) = self.fleet.jobs.get(&id) else { continue };
            let tenant = &job.spec.tags.tenant;
            if doors.passed_over(tenant) {
                self.state.skipped(1);
                continue;
            }
            // Over budget: it waits without holding up the queue or reserving room.
            if any_over_budget && !self.budget_allows(tenant, true) {
                continue;
            }
            match quota::admit(&job.spec, held.get(tenant).copied().unwrap_or_default(), self.fleet.tenants.get(tenant)) {
                Admission::Refused => continue,
                Admission::Borrow => {
                    borrowers.push(id);
                    continue;
                }
                Admission::WithinQuota => {}
            }
            match self.try_place(at, id, Space { headroom: &headroom, reservation: &reservation, workload }, &mut spare_left, &mut unplaceable) {
                Some(plan) => {
                    let spec_held = Held::of(&job.spec);
                    held.entry(tenant.clone()).or_default().add(spec_held);
                    let tenant = tenant.clone();
                    self.allocate(at, id, plan, effects);
                    unplaceable.clear();
                    headroom = Headroom::measure(&self.fleet.nodes, self.config.sched.time_sharing);
                    (misses, asked) = (0, false);
                    // Its holdings grew: what its other jobs may do shrank.
                    let open = self.doors(&tenant, held.get(&tenant).copied().unwrap_or_default(), &headroom, &template);
                    doors.set(tenant, open);
                }
                None => {
                    if blocked.is_none() {
                        blocked = Some(id);
                        if self.config.sched.backfill {
                            let ends = self.fleet.predicted_ends(at);
                            if let Some(job) = self.fleet.jobs.get(&id) {
                                reservation = backfill::reserve(&self.fleet.nodes, &job.spec, job.escalated, &ends, at);
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
            // Nor when no job of the queue's shapes fits anywhere it may go:
            // asked once per change of the nodes, after a run of misses, so a
            // pass that keeps placing does not pay for it.
            if blocked.is_some() && misses >= STOP_CHECK_AFTER && !asked {
                asked = true;
                if !self.may_start(at, &held, &headroom, &reservation, spare_left, &template) {
                    self.state.skipped(queued_at_start.saturating_sub(walked));
                    break;
                }
            }
        }
        // With capacity to buy, a blocked job waits for a new node rather than preempt.
        let buyable = blocked.and_then(|id| self.fleet.jobs.get(&id)).is_some_and(|j| self.costly.can_buy_for(j));
        let preempting = match blocked {
            _ if buyable => false,
            Some(id) if !self.fleet.scheduler_stop_pending() => self.make_room(at, id, effects),
            _ => self.fleet.scheduler_stop_pending(),
        };
        // Borrowing uses idle capacity only: never while an owner waits for room.
        if preempting {
            return Some(headroom);
        }
        // The borrowers met in the queue, then the rest of the walk (where
        // the loop above stopped, nothing of it can start within quota: a
        // job of it is a borrower, or fits nowhere).
        (misses, asked) = (0, false);
        let mut borrowers = borrowers.into_iter();
        loop {
            // Nodes only fill during a pass: once nothing queued fits, no borrower will.
            if misses >= STOP_CHECK_AFTER && !asked {
                asked = true;
                if !self.may_start(at, &held, &headroom, &reservation, spare_left, &template) {
                    self.state.skipped(borrowers.len() + queued_at_start.saturating_sub(walked));
                    break;
                }
            }
            let next = borrowers.next().or_else(|| {
                walked += 1;
                self.fleet.walk_next(&mut walk, &self.config.sched)
            });
            let Some(id) = next else { break };
            misses += 1;
            let Some(job) = self.fleet.jobs.get(&id) else { continue };
            let tenant = job.spec.tags.tenant.clone();
            if doors.passed_over(&tenant) {
                self.state.skipped(1);
                continue;
            }
            if quota::admit(&job.spec, held.get(&tenant).copied().unwrap_or_default(), self.fleet.tenants.get(&tenant)) != Admission::Borrow {
                continue;
            }
            if let Some(plan) = self.try_place(at, id, Space { headroom: &headroom, reservation: &reservation, workload }, &mut spare_left, &mut unplaceable) {
                let spec_held = Held::of(&job.spec);
                held.entry(tenant.clone()).or_default().add(spec_held);
                self.allocate(at, id, plan, effects);
                unplaceable.clear();
                headroom = Headroom::measure(&self.fleet.nodes, self.config.sched.time_sharing);
                (misses, asked) = (0, false);
                let open = self.doors(&tenant, held.get(&tenant).copied().unwrap_or_default(), &headroom, &template);
                doors.set(tenant, open);
            }
        }
        Some(headroom)
    }

    /// The pass's shortcuts over the nodes as they are now, if it takes them.
    fn shortcuts<'s>(&'s self, template: &'s JobSpec, budget_allows: &'s dyn Fn(&TenantId) -> bool) -> Option<Shortcuts<'s>> {
        let shapes = self.fleet.built_queue_shapes().filter(|_| self.state.shortcuts())?;
        let opts = place_options(&self.config.sched);
        Some(Shortcuts { nodes: &self.fleet.nodes, shapes, quotas: &self.fleet.tenants, opts, budget_allows, template })
    }

    /// What `tenant`'s queued jobs may do in this pass (`Shortcuts::tenant_doors`).
    fn doors(&self, tenant: &TenantId, held: Held, headroom: &Headroom, template: &JobSpec) -> Open {
        let allows = |t: &TenantId| self.budget_allows(t, true);
        self.shortcuts(template, &allows).map_or(Open::ALL, |s| s.tenant_doors(tenant, held, headroom))
    }

    /// Whether any queued job might still start (`Shortcuts::anything_may_start`).
    fn may_start(
        &self,
        at: At,
        held: &BTreeMap<TenantId, Held>,
        headroom: &Headroom,
        reservation: &Option<Reservation>,
        spare_left: u32,
        template: &JobSpec,
    ) -> bool {
        let allows = |t: &TenantId| self.budget_allows(t, true);
        self.shortcuts(template, &allows).is_none_or(|s| s.anything_may_start(at, held, headroom, reservation, spare_left))
    }

    /// A place for job `id` now that respects the reservation, if any.
    fn try_place(&self, at: At, id: JobId, space: Space<'_>, spare_left: &mut u32, unplaceable: &mut Unplaceable) -> Option<Plan> {
        let Space { headroom, reservation, workload } = space;
        let job = self.fleet.jobs.get(&id)?;
        if !headroom.may_fit(&job.spec, job.escalated) {
            return None;
        }
        let opts = Options { workload, ..place_options(&self.config.sched) };
        let tenant = &job.spec.tags.tenant;
        if !self.budget_allows(tenant, true) {
            return None;
        }
        let spot_only = !self.budget_allows(tenant, false);
        let keep_off = self.costly.keeps_off(job);
        let shape = shape_of(job, keep_off, spot_only);
        if unplaceable.rules_out(&shape) {
            return None;
        }
        let allowed = |node: &Node| match job.avoid.as_deref() {
            _ if keep_off && self.costly.nodes.contains(&node.spec.id) => false,
            _ if spot_only && node.spec.billing != BillingMode::Spot => false,
            _ if job.target.as_deref().is_some_and(|to| !to.holds(&node.spec)) => false,
            None => true,
            Some(Avoid::AllSpot) => node.spec.billing != BillingMode::Spot,
            Some(Avoid::Pool(k)) => node.spec.billing != BillingMode::Spot || node.spec.zone != k.zone || node.spec.instance_type != k.instance_type,
        };
        // A pool to avoid is a preference: with no room elsewhere the job
        // goes back to it rather than wait (its replacement may be up).
        let plan = placement::place_where(&self.fleet.nodes, &job.spec, job.escalated, &opts, allowed).or_else(|| {
            let budget_ok = |node: &Node| (!spot_only || node.spec.billing == BillingMode::Spot) && !(keep_off && self.costly.nodes.contains(&node.spec.id));
            matches!(job.avoid.as_deref(), Some(Avoid::Pool(_)))
                .then(|| placement::place_where(&self.fleet.nodes, &job.spec, job.escalated, &opts, budget_ok))
                .flatten()
        });
        let Some(plan) = plan else {
            unplaceable.record(shape);
            return None;
        };
        let Some(r) = reservation else { return Some(plan) };
        if plan.node != r.node {
            return Some(plan);
        }
        let ends_in_time = job.remaining_estimate().is_some_and(|secs| at + secs.delta() <= r.at);
        if ends_in_time {
            return Some(plan);
        }
        if u32::from(job.spec.gpus) <= *spare_left && job.spec.exclusive {
            *spare_left -= u32::from(job.spec.gpus);
            return Some(plan);
        }
        placement::place_where(&self.fleet.nodes, &job.spec, job.escalated, &Options { avoid: Some(r.node), ..opts }, allowed)
    }

    /// Preempts what the blocked job may take back: borrowed work of other
    /// tenants (newest first), or under MLFQ running jobs of lower queues that
    /// had their quantum. Returns whether anything is being stopped.
    fn make_room(&mut self, at: At, id: JobId, effects: &mut Vec<Effect>) -> bool {
        let Some(job) = self.fleet.jobs.get(&id) else { return false };
        let spec = job.spec.clone();
        let escalated = job.escalated;
        let tenant = spec.tags.tenant.clone();
        let opts = place_options(&self.config.sched);
        let borrowed = self.fleet.borrowed();
        let mut lenders: Vec<&Job> =
            borrowed.iter().filter_map(|b| self.fleet.jobs.get(b)).filter(|b| b.spec.tags.tenant != tenant && b.phase() == Phase::Running).collect();
        lenders.sort_by_key(|b| std::cmp::Reverse((b.placed_at, b.spec.id)));
        let candidates: Vec<JobId> = lenders.iter().map(|b| b.spec.id).collect();
        if let Some(victims) = preempt::victims_for(&self.fleet.nodes, &spec, escalated, &candidates, &opts) {
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
            .fleet
            .holding_ids()
            .filter_map(|h| self.fleet.jobs.get(&h))
            .filter(|j| j.phase() == Phase::Running)
            .filter(|j| j.started_at.is_some_and(|s| at - s >= config.mlfq_quantum.delta()))
            .map(|j| (Mlfq::level(j, &config.mlfq_thresholds, at), j))
            .filter(|(l, _)| *l > level)
            .collect();
        lower.sort_by_key(|(l, j)| std::cmp::Reverse((*l, j.started_at, j.spec.id)));
        let candidates: Vec<JobId> = lower.iter().map(|(_, j)| j.spec.id).collect();
        if let Some(victims) = preempt::victims_for(&self.fleet.nodes, &spec, escalated, &candidates, &opts) {
            self.preempt_for(at, &victims, SchedStop::Priority { for_job: id }, &format!("mlfq: {id} outranks"), effects);
            return true;
        }
        false
    }

    fn preempt_for(&mut self, at: At, victims: &[JobId], why: SchedStop, text: &str, effects: &mut Vec<Effect>) {
        let names: Vec<String> = victims.iter().map(|v| v.to_string()).collect();
        for victim in victims {
            self.fleet.stop_job(self.now, &self.config.checkpoint, *victim, StopReason::Scheduler(why.clone()), true, effects);
        }
        self.journal.stats.preemptions_by_scheduler += victims.len() as u64;
        self.journal.note(at, Severity::Info, format!("{text}: preempting {}", names.join(", ")));
    }

    /// Whether the budget lets this tenant's work be placed (on spot only, or anywhere).
    fn budget_allows(&self, tenant: &TenantId, on_spot: bool) -> bool {
        self.budgets.allows(self.config.cost.budget.at_limit, tenant, on_spot)
    }
}

/// Whether a job fits on some node it may use depends on what it asks
/// (`Ask`) and on where it may run (`Leave`). A job that will go where an
/// operator sent it, or that avoids a pool, is always tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Leave {
    exclusive: bool,
    pool: u8,
    escalated: bool,
    keep_off: bool,
    spot_only: bool,
}

/// What a job asks of one node. Fitting is monotone in each: a job that
/// asks at least as much of everything as one that fits nowhere fits
/// nowhere either (more GPUs also rule MIG slices out, never in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ask {
    gpus: u8,
    gpu_mem: u32,
    cpus: u32,
    host_mem: u32,
}

impl Ask {
    fn covers(&self, other: &Ask) -> bool {
        self.gpus >= other.gpus && self.gpu_mem >= other.gpu_mem && self.cpus >= other.cpus && self.host_mem >= other.host_mem
    }
}

fn shape_of(job: &Job, keep_off: bool, spot_only: bool) -> Option<(Leave, Ask)> {
    let s = &job.spec;
    // A job of no GPUs fits nowhere, which says nothing of the others; nor
    // does one bound to GPU models, which other jobs of its size are not.
    if job.target.is_some() || job.avoid.is_some() || s.gpus == 0 || !s.gpu_models.is_empty() {
        return None;
    }
    let pool = match s.pool {
        PoolPreference::Any => 0,
        PoolPreference::NoSpot => 1,
        PoolPreference::SpotOnly => 2,
    };
    let leave = Leave { exclusive: s.exclusive, pool, escalated: job.escalated, keep_off, spot_only };
    Some((leave, Ask { gpus: s.gpus, gpu_mem: s.gpu_mem.0, cpus: s.cpus, host_mem: s.host_mem.0 }))
}

/// The smallest asks found to fit nowhere in this pass since its last
/// placement: the nodes have not changed, so a queued job that asks as
/// much or more is not tried on every node again. This keeps a pass over
/// 10,000 queued jobs on a full cluster from costing the queue times the
/// fleet (EASY backfill looks at every job while any GPU is free).
#[derive(Default)]
struct Unplaceable(std::collections::HashMap<Leave, Vec<Ask>>);

impl Unplaceable {
    fn rules_out(&self, shape: &Option<(Leave, Ask)>) -> bool {
        shape.as_ref().is_some_and(|(leave, ask)| self.0.get(leave).is_some_and(|failed| failed.iter().any(|f| ask.covers(f))))
    }

    fn record(&mut self, shape: Option<(Leave, Ask)>) {
        if let Some((leave, ask)) = shape {
            let failed = self.0.entry(leave).or_default();
            // Only the smallest asks are kept: one this one is below says nothing more.
            failed.retain(|f| !f.covers(&ask));
            failed.push(ask);
        }
    }

    /// Something was placed: the nodes changed, so every job is tried again.
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// Placement options from the scheduler's settings.
pub fn place_options(config: &SchedConfig) -> Options<'static> {
    Options { fit: config.fit, time_sharing: config.time_sharing, avoid: None, workload: None }
}

/// Whether a job arriving now could change anything: it may fit, or may
/// take borrowed capacity back, or (MLFQ) may outrank running work. If
/// not, the arrival waits for the next change of capacity.
pub fn arrival_may_start(state: &SchedState, config: &SchedConfig, tenants: &BTreeMap<TenantId, TenantSpec>, spec: &JobSpec, now: At) -> bool {
    let Some(h) = &state.headroom else { return true };
    if h.may_fit(spec, false) {
        return true;
    }
    if h.stop_pending {
        return false;
    }
    let tenant = &spec.tags.tenant;
    let within = quota::admit(spec, h.held.get(tenant).copied().unwrap_or_default(), tenants.get(tenant)) == Admission::WithinQuota;
    // Under MLFQ a new job may outrank running work; arrivals start at
    // most one pass a minute for that, so a burst stays cheap.
    let mlfq_due = config.discipline == DisciplineKind::Mlfq && h.at.is_none_or(|last| now - last >= chrono::TimeDelta::seconds(60));
    (within && h.any_borrowed) || mlfq_due
}

/// Running jobs whose checkpoint interval has passed start saving.
pub fn checkpoints_due(policy: &CheckpointPolicy, fleet: &mut Fleet, at: At, effects: &mut Vec<Effect>) {
    for id in fleet.checkpoints_due(policy, at) {
        let kind = fleet.jobs.get(&id).map(|j| policy.kind(u64::from(j.checkpoints)));
        if let (Some(job), Some(kind)) = (fleet.jobs.get_mut(&id), kind) {
            job.set_state(JobState::Checkpointing { then: AfterCheckpoint::Continue }, Some(at));
            job.checkpoint_asked_at = Some(at);
            effects.push(Effect::Checkpoint { job: id, kind });
        }
    }
}

/// What a pass may place into this round: the headroom measured, the
/// backfill reservation, the workload the fragmentation policy weighs.
#[derive(Copy, Clone)]
struct Space<'r> {
    headroom: &'r Headroom,
    reservation: &'r Option<Reservation>,
    workload: Option<&'r Weigher>,
}

/// The parts idle reclaim touches: the scheduler's policy, the room's
/// clock and checkpoint policy (for the stops an idle GPU causes), the
/// fleet and the journal.
pub struct Idle<'a> {
    pub config: &'a SchedConfig,
    pub now: Option<At>,
    pub checkpoint: &'a CheckpointPolicy,
    pub fleet: &'a mut Fleet,
    pub journal: &'a mut Journal,
}

impl Idle<'_> {
    /// After a telemetry sample: a GPU whose jobs all run below the idle
    /// threshold starts (or keeps) an idle streak; any busy sample ends it. A
    /// streak as long as the window releases the GPU: its jobs save and stop
    /// for good.
    pub fn track(&mut self, at: At, gpu_ref: GpuRef, util: f32, effects: &mut Vec<Effect>) {
        let (config, fleet, journal) = (self.config, &mut *self.fleet, &mut *self.journal);
        let window = config.idle_window;
        if window.0 <= 0 {
            return;
        }
        let threshold = config.idle_util_pct;
        let Some(gpu) = fleet.nodes.get(&gpu_ref.node).and_then(|n| n.gpus.get(usize::from(gpu_ref.index))) else { return };
        // Busy or empty GPUs (most samples) are told apart without looking up their jobs.
        let idle = util < threshold
            && !gpu.allocations.is_empty()
            && gpu.allocations.iter().all(|a| fleet.jobs.get(&a.job).is_some_and(|j| j.phase() == Phase::Running));
        let since = match (idle, gpu.idle_since) {
            (false, _) => None,
            (true, Some(since)) => Some(since),
            (true, None) => Some(at),
        };
        // Most samples change nothing here: a busy GPU stays without a streak.
        let reclaim = since.is_some_and(|since| at - since >= window.delta());
        if since == gpu.idle_since && !reclaim {
            return;
        }
        let Some(gpu) = fleet.nodes.get_mut(&gpu_ref.node).and_then(|n| n.gpus.get_mut(usize::from(gpu_ref.index))) else { return };
        gpu.idle_since = since;
        if let Some(since) = since
            && reclaim
        {
            gpu.idle_since = None;
            let jobs: Vec<JobId> = gpu.allocations.iter().map(|a| a.job).collect();
            journal.stats.idle_reclaims += jobs.len() as u64;
            let node = fleet.node_name(gpu_ref.node);
            for job in jobs {
                fleet.stop_job(self.now, self.checkpoint, job, StopReason::Scheduler(SchedStop::Idle), true, effects);
                let name = fleet.jobs.get(&job).map(|j| clean(&j.spec.name)).unwrap_or_default();
                journal.note(
                    at,
                    Severity::Warn,
                    format!("idle reclaim: {job} {name} on {node} GPU {} below {threshold}% since {}", gpu_ref.index, since.format("%H:%M:%S")),
                );
            }
        }
    }
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
        let mut room = crate::room::Room::new(RoomConfig::default());
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
            let order = room.fleet.ordered_queue(&room.config.sched, t(60));
            let ordered = s.elapsed();
            drop(order);
            let s = clock();
            let _ = room.fleet.holdings();
            let holdings = s.elapsed();
            let s = clock();
            let _ = Headroom::measure(&room.fleet.nodes, false);
            let headroom = s.elapsed();
            let s = clock();
            let _ = room.fleet.predicted_ends(t(60));
            let ends = s.elapsed();
            let s = clock();
            let _ = room.fleet.borrowed();
            let borrowed = s.elapsed();
            let mut r = room.clone();
            let s = clock();
            r.apply(t(60), &Event::JobExited { job: JobId(7), ok: true, message: String::new() });
            let apply = s.elapsed();
            println!("{d:?}: order {ordered:?} holdings {holdings:?} headroom {headroom:?} ends {ends:?} borrowed {borrowed:?} | whole apply {apply:?}");
        }
    }
}
