//! The cluster and its work as the room keeps them: nodes with their GPUs,
//! jobs with their life cycle, tenants, each running job's progress rate, and
//! the indices of which jobs are active, queued or holding GPUs.
//!
//! Owns the bookkeeping every concern shares (a job's legal moves, freeing
//! its GPUs, putting it back in the queue, asking it to stop, where it
//! runs). Decides nothing: which job goes where is `sched`'s, what it costs
//! is `cost`'s; they call these with the pieces they hold.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::derived::{Derived, TenantHolding};
use super::journal::Stats;
use super::queue_order::{QueueOrder, Walk};
use super::wait_index::WaitIndex;
use crate::ckpt::CheckpointPolicy;
use crate::domain::cluster::{BillingMode, Gpu, Node};
use crate::domain::event::{Effect, TenantSpec};
use crate::domain::ids::{GpuRef, JobId, NodeId, PoolKey, TenantId};
use crate::domain::job::{AfterCheckpoint, Job, JobState, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, Mib, Secs};
use crate::predict::ProgressRate;
use crate::sched::quota::{self, Held};
use crate::sched::{OrderContext, Resources, SchedConfig};

/// The nodes, the jobs, the tenants, and which jobs wait or hold GPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    pub nodes: BTreeMap<NodeId, Node>,
    pub jobs: BTreeMap<JobId, Job>,
    /// Jobs not yet done or failed; of them, those waiting in the queue and
    /// those holding GPUs: indices, kept by the methods that move jobs
    /// (`admit`, `dequeue`, `hold`, `unhold`, `requeue_from_checkpoint`,
    /// `forget_finished`) and read through `active_jobs`, `queued_ids`,
    /// `holding_ids`, never written elsewhere.
    active: BTreeSet<JobId>,
    queued: BTreeSet<JobId>,
    holding: BTreeSet<JobId>,
    pub tenants: BTreeMap<TenantId, TenantSpec>,
    pub rates: BTreeMap<JobId, ProgressRate>,
    /// Finished jobs on their way out of memory, and what is left of those gone.
    #[serde(default)]
    pub retired: super::retired::Retired,
    /// Per-tenant holdings, the checkpoint queue and the scheduler's stops,
    /// kept up to date instead of recounted on every event (see `derived`).
    #[serde(skip)]
    derived: Derived,
}

impl Fleet {
    /// A new job: active and queued.
    pub fn admit(&mut self, id: JobId) {
        self.active.insert(id);
        self.queued.insert(id);
        self.reshape(id);
    }

    /// A queued job placed: out of the queue (it holds GPUs next, `hold`).
    pub fn dequeue(&mut self, id: JobId) {
        self.queued.remove(&id);
        if let Some(shapes) = &mut self.derived.queue_shapes {
            shapes.remove(id);
        }
        if let Some(order) = &mut self.derived.queue_order {
            order.remove(id);
        }
        if let Some(waits) = &mut self.derived.waits {
            waits.remove(id);
        }
    }

    /// A job done or failed: no longer active nor queued.
    pub fn forget_finished(&mut self, id: JobId) {
        self.active.remove(&id);
        self.dequeue(id);
    }

    /// A queued job may now use any capacity (its wait passed its limit, or
    /// an operator sent a spot-only job elsewhere).
    pub fn escalate(&mut self, id: JobId) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.escalated = true;
        }
        if self.queued.contains(&id) {
            self.reshape(id);
        }
    }

    /// Job `id` joined the queue or changed how it may be placed.
    fn reshape(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else { return };
        if let Some(shapes) = &mut self.derived.queue_shapes {
            shapes.insert(job);
        }
        if let Some(order) = &mut self.derived.queue_order {
            order.insert(job);
        }
        if let Some(waits) = &mut self.derived.waits {
            waits.insert(job);
        }
    }

    /// The queued jobs by wait (what the wait alarms read instead of the
    /// whole queue), built from the queue on first use.
    pub fn wait_index(&mut self) -> &WaitIndex {
        let (queued, jobs) = (&self.queued, &self.jobs);
        self.derived.waits.get_or_insert_with(|| WaitIndex::of(queued.iter().filter_map(|id| jobs.get(id))))
    }

    /// The queued jobs by shape, built from the queue on first use.
    pub fn queue_shapes(&mut self) -> &super::queue_shapes::QueueShapes {
        let (queued, jobs) = (&self.queued, &self.jobs);
        self.derived.queue_shapes.get_or_insert_with(|| super::queue_shapes::QueueShapes::of(queued.iter().filter_map(|id| jobs.get(id))))
    }

    /// The queued jobs by wait, if the wait alarms have built them.
    pub fn built_wait_index(&self) -> Option<&WaitIndex> {
        self.derived.waits.as_ref()
    }

    /// The queued jobs by shape if a pass has built them.
    pub fn built_queue_shapes(&self) -> Option<&super::queue_shapes::QueueShapes> {
        self.derived.queue_shapes.as_ref()
    }

    /// The jobs not yet done or failed, by id.
    pub fn active_jobs(&self) -> impl Iterator<Item = &Job> {
        self.active.iter().filter_map(|id| self.jobs.get(id))
    }

    /// The jobs waiting in the queue, by id.
    pub fn queued_ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.queued.iter().copied()
    }

    pub fn queue_is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// How many jobs wait in the queue.
    pub fn queue_len(&self) -> usize {
        self.queued.len()
    }

    /// The jobs holding GPUs, by id.
    pub fn holding_ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.holding.iter().copied()
    }

    pub fn is_holding(&self, id: JobId) -> bool {
        self.holding.contains(&id)
    }

    /// What an operator's action wakes: the checkpoint queue is rebuilt on
    /// the next look (the policy may have changed).
    pub fn wake_checkpoints(&mut self) {
        self.derived.wake_checkpoints();
    }

    /// The running jobs whose checkpoint falls due by `at`, in id order; the
    /// queue of due times is kept across events, each entry checked against
    /// the job as it is now.
    pub fn checkpoints_due(&mut self, policy: &CheckpointPolicy, at: At) -> BTreeSet<JobId> {
        // This runs on every event: the due times come off a queue ordered by
        // time instead of from a look at every running job.
        let mut queue = match self.derived.checkpoint_due.take() {
            Some(queue) => queue,
            None => {
                self.holding.iter().filter_map(|id| self.jobs.get(id)).filter_map(|job| Some((self.checkpoint_due_at(policy, job)?, job.spec.id))).collect()
            }
        };
        // In id order, as a look at every running job would find them.
        let mut due = BTreeSet::new();
        while let Some(&(when, id)) = queue.first()
            && when <= at
        {
            queue.pop_first();
            // The entry may be stale: the job as it is now decides.
            let now_due = if self.holding.contains(&id) { self.jobs.get(&id).and_then(|job| self.checkpoint_due_at(policy, job)) } else { None };
            match now_due {
                Some(when) if when <= at => {
                    due.insert(id);
                }
                Some(later) => {
                    queue.insert((later, id));
                }
                None => {}
            }
        }
        self.derived.checkpoint_due = Some(queue);
        due
    }

    /// Retires the finished jobs that finished before `cutoff` (see `retired`).
    pub fn retire_finished(&mut self, cutoff: At) {
        for id in self.retired.due(cutoff) {
            // A job requeued after it ended finished again later: its newer entry retires it.
            let gone = self.jobs.get(&id).is_some_and(|j| j.phase().is_terminal() && j.finished_at.is_some_and(|f| f < cutoff));
            if gone && let Some(job) = self.jobs.remove(&id) {
                self.retired.retire(id, job.cost, job.service_cost);
            }
        }
    }

    pub fn job_mut(&mut self, id: JobId) -> Result<&mut Job, String> {
        let missing = self.missing(id);
        self.jobs.get_mut(&id).ok_or(missing)
    }

    pub fn job(&self, id: JobId) -> Result<&Job, String> {
        self.jobs.get(&id).ok_or_else(|| self.missing(id))
    }

    /// Why a job is not held: retired long after it finished, or never known.
    fn missing(&self, id: JobId) -> String {
        if self.retired.contains(id) {
            format!("job {id} finished long ago and is no longer held (its history is in the event log)")
        } else {
            format!("unknown job {id}")
        }
    }

    /// The job now holds GPUs.
    pub fn hold(&mut self, id: JobId) {
        if self.holding.insert(id)
            && let Some(job) = self.jobs.get(&id)
        {
            self.derived.hold(&job.spec);
        }
    }

    /// The job no longer holds GPUs (nor accrues service) as of `now`.
    pub fn unhold(&mut self, id: JobId, now: Option<At>) {
        if self.holding.remove(&id) {
            match self.jobs.get_mut(&id) {
                Some(job) => {
                    job.close_service(now);
                    self.derived.unhold(&job.spec);
                }
                None => self.derived.holdings = None,
            }
        }
    }

    /// The interval a running job saves at: risk-driven on spot, fixed otherwise.
    pub fn checkpoint_interval(&self, policy: &CheckpointPolicy, job: &Job) -> Option<Secs> {
        let node = self.nodes.get(&job.placement.as_ref()?.node)?;
        match node.spec.billing {
            BillingMode::Spot => Some(job.risk.as_ref().map(|r| r.interval).unwrap_or(policy.max_interval)),
            mode => policy.stable(mode),
        }
    }

    /// When a running job's next save falls due, if it has anything new to
    /// save (one with nothing new since its last save waits for progress,
    /// which then queues its due time: `life::record_progress`).
    pub fn checkpoint_due_at(&self, policy: &CheckpointPolicy, job: &Job) -> Option<At> {
        if job.phase() != crate::domain::job::Phase::Running {
            return None;
        }
        CheckpointPolicy::due_at(job, self.checkpoint_interval(policy, job)?)
    }

    /// Something about job `id` changed that may bring its next save sooner
    /// (it runs again, its interval moved, it made progress past its last
    /// save): its due time goes into the checkpoint queue.
    pub fn note_checkpoint_due(&mut self, policy: &CheckpointPolicy, id: JobId) {
        let due = self.jobs.get(&id).and_then(|job| self.checkpoint_due_at(policy, job));
        if let (Some(due), Some(queue)) = (due, &mut self.derived.checkpoint_due) {
            queue.insert((due, id));
        }
    }

    /// Builds what is derived if a restore (or a test) left it unbuilt.
    pub fn build_derived(&mut self, now: Option<At>) {
        if self.derived.holdings.is_none() {
            self.derived.scheduler_stops = self.holding.iter().copied().filter(|id| self.jobs.get(id).is_some_and(is_scheduler_stop)).collect();
            self.derived.holdings = Some(self.recount_holdings());
            // A room restored from a snapshot taken before service was accrued
            // lazily had its running jobs' service counted up to its clock.
            for id in &self.holding {
                if let Some(job) = self.jobs.get_mut(id)
                    && job.phase() == crate::domain::job::Phase::Running
                    && job.service_from.is_none()
                {
                    job.service_from = now;
                }
            }
        }
    }

    /// Moves a job to `state`, refusing moves the life cycle does not allow.
    pub fn transition(&mut self, at: At, id: JobId, state: JobState) -> Result<(), String> {
        let job = self.job_mut(id)?;
        let (from, to) = (job.phase(), state.phase());
        if !from.can_become(to) {
            return Err(format!("job {id} cannot go from {} to {}", from.label(), to.label()));
        }
        job.set_state(state, Some(at));
        Ok(())
    }

    pub fn node_name(&self, id: NodeId) -> String {
        self.nodes.get(&id).map(|n| clean(&n.spec.name)).unwrap_or_else(|| format!("node#{}", id.0))
    }

    pub fn gpu_mut(&mut self, gpu: GpuRef) -> Option<&mut Gpu> {
        self.nodes.get_mut(&gpu.node).and_then(|n| n.gpus.get_mut(usize::from(gpu.index)))
    }

    /// The node a job holds GPUs on, if it holds any.
    pub fn job_node(&self, id: JobId) -> Option<&Node> {
        self.jobs.get(&id)?.placement.as_ref().and_then(|p| self.nodes.get(&p.node))
    }

    /// The pool a job holds GPUs in, if it holds any.
    pub fn job_pool(&self, id: JobId) -> Option<(PoolKey, BillingMode)> {
        self.job_node(id).map(|node| (node.spec.pool(), node.spec.billing))
    }

    /// The node a job's GPUs are on, whoever asks before freeing them.
    pub fn placed_node(&self, id: JobId) -> Option<NodeId> {
        self.jobs.get(&id).and_then(|j| j.placement.as_ref()).map(|p| p.node)
    }

    /// Frees the job's GPUs, CPUs and host memory (no state change). The
    /// node must be charged up to now first (`Costs::settle_node`).
    pub fn free(&mut self, now: Option<At>, id: JobId) {
        self.unhold(id, now);
        let Some(job) = self.jobs.get_mut(&id) else { return };
        if let Some(placement) = job.placement.take()
            && let Some(node) = self.nodes.get_mut(&placement.node)
        {
            for gpu in node.gpus.iter_mut() {
                gpu.allocations.retain(|a| a.job != id);
                gpu.idle_since = None;
            }
            node.cpus_used = node.cpus_used.saturating_sub(job.spec.cpus);
            node.host_mem_used = Mib(node.host_mem_used.0.saturating_sub(job.spec.host_mem.0));
        }
    }

    /// Back to the queue, resuming from the last checkpoint; what was computed
    /// since then is counted as lost (recompute). Returns whether it went back.
    pub fn requeue_from_checkpoint(&mut self, at: At, id: JobId, stats: &mut Stats) -> bool {
        let Some(job) = self.jobs.get_mut(&id) else { return false };
        if job.phase().is_terminal() {
            return false;
        }
        let lost = job.steps_done.saturating_sub(job.steps_saved);
        job.lost_steps += lost;
        job.steps_done = job.steps_saved;
        job.set_state(JobState::Queued, Some(at));
        job.placement = None;
        job.queued_since = at;
        job.started_at = None;
        job.placed_at = None;
        job.requeues += 1;
        self.queued.insert(id);
        self.reshape(id);
        stats.lost_steps += lost;
        stats.requeues += 1;
        self.rates.remove(&id);
        true
    }

    /// Asks a running job to stop: with a save first where `save` and possible.
    pub fn stop_job(&mut self, now: Option<At>, policy: &CheckpointPolicy, id: JobId, reason: StopReason, save: bool, effects: &mut Vec<Effect>) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        if holds_back_the_scheduler(&reason) {
            self.derived.scheduler_stops.insert(id);
        }
        match (&mut job.state, save) {
            (JobState::Running, true) => {
                job.set_state(JobState::Checkpointing { then: AfterCheckpoint::Stop(reason) }, now);
                job.checkpoint_asked_at = now;
                let kind = policy.kind(u64::from(job.checkpoints));
                effects.push(Effect::Checkpoint { job: id, kind });
            }
            (JobState::Checkpointing { then }, true) => *then = AfterCheckpoint::Stop(reason),
            (JobState::Running | JobState::Checkpointing { .. } | JobState::Placed, _) => {
                job.set_state(JobState::Preempted { reason }, now);
                effects.push(Effect::StopJob { job: id });
            }
            (JobState::Preempted { reason: current }, _) => {
                // Already stopping; a cancel still wins over a requeue.
                if matches!(reason, StopReason::Operator { requeue: false, .. }) {
                    *current = reason;
                }
            }
            _ => {}
        }
    }

    /// Jobs of `tenant` holding GPUs.
    pub fn holding_of(&self, tenant: &TenantId) -> Vec<JobId> {
        self.holding.iter().copied().filter(|id| self.jobs.get(id).is_some_and(|j| j.spec.tags.tenant == *tenant)).collect()
    }

    /// Spot instances up, per type (the hazard's population at risk).
    pub fn at_risk_by_type(&self) -> BTreeMap<&str, u32> {
        let mut counts = BTreeMap::new();
        for n in self.nodes.values().filter(|n| n.is_up() && n.spec.billing == BillingMode::Spot) {
            *counts.entry(n.spec.instance_type.as_str()).or_insert(0) += 1;
        }
        counts
    }

    /// Spot instances of a type that are up.
    pub fn spot_at_risk(&self, instance_type: &str) -> u32 {
        self.at_risk_by_type().get(instance_type).copied().unwrap_or(0)
    }

    /// Jobs running on spot nodes, all or of one pool or one type.
    pub fn spot_jobs(&self, pool: Option<&PoolKey>, instance_type: Option<&str>) -> Vec<JobId> {
        self.holding
            .iter()
            .copied()
            .filter(|id| {
                let Some(node) = self.job_node(*id) else { return false };
                node.spec.billing == BillingMode::Spot
                    && pool.is_none_or(|k| node.spec.zone == k.zone && node.spec.instance_type == k.instance_type)
                    && instance_type.is_none_or(|t| node.spec.instance_type == t)
            })
            .collect()
    }

    /// What each tenant holds now, in DRF's four dimensions and in quota terms.
    pub fn holdings(&self) -> (BTreeMap<TenantId, Resources>, BTreeMap<TenantId, Held>) {
        let recounted;
        let map = match &self.derived.holdings {
            Some(map) => map,
            None => {
                recounted = self.recount_holdings();
                &recounted
            }
        };
        let resources = map.iter().map(|(t, h)| (t.clone(), h.resources)).collect();
        let held = map.iter().map(|(t, h)| (t.clone(), h.held)).collect();
        (resources, held)
    }

    /// What each tenant holds, counted from every job holding GPUs (before
    /// the derived count is built, or where it was dropped).
    fn recount_holdings(&self) -> BTreeMap<TenantId, TenantHolding> {
        let mut map: BTreeMap<TenantId, TenantHolding> = BTreeMap::new();
        for job in self.holding.iter().filter_map(|id| self.jobs.get(id)) {
            map.entry(job.spec.tags.tenant.clone()).or_default().add(&job.spec);
        }
        map
    }

    /// Whether any job runs on borrowed capacity: some tenant holds more
    /// than its quota (its last-placed jobs are then borrowed, see
    /// `quota::borrowed`), or holds GPUs with no quota at all.
    pub fn any_borrowed(&self) -> bool {
        let (_, held) = self.holdings();
        held.iter().any(|(tenant, h)| self.tenants.get(tenant).is_none_or(|spec| !h.within(spec)))
    }

    /// What the nodes that take work offer, in DRF's dimensions.
    pub fn capacity(&self) -> Resources {
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
    pub fn ordered_queue(&self, config: &SchedConfig, now: At) -> Vec<&Job> {
        let (held, _) = self.holdings();
        let ctx = OrderContext { now, config, held: &held, capacity: self.capacity() };
        let mut queued: Vec<&Job> = self.queued.iter().filter_map(|id| self.jobs.get(id)).collect();
        config.discipline.discipline().order(&mut queued, &ctx);
        // Escalated first, each part in the discipline's order (a stable partition).
        let (mut first, rest): (Vec<&Job>, Vec<&Job>) = queued.into_iter().partition(|j| j.escalated);
        first.extend(rest);
        first
    }

    /// Starts a walk of the queue in `ordered_queue`'s order, read lazily
    /// from the ordered index where the discipline keeps one.
    pub fn walk_queue(&mut self, config: &SchedConfig, now: At) -> QueueWalk {
        if self.derived.queue_order.as_ref().is_some_and(|o| !o.fits(config)) {
            self.derived.queue_order = None;
        }
        if self.derived.queue_order.is_none() {
            let (queued, jobs) = (&self.queued, &self.jobs);
            self.derived.queue_order = QueueOrder::build(config, queued.iter().filter_map(|id| jobs.get(id)));
        }
        match &self.derived.queue_order {
            Some(order) => QueueWalk::Indexed(order.walk(&self.jobs, config, now, || (self.holdings().0, self.capacity()))),
            None => QueueWalk::Listed(self.ordered_queue(config, now).iter().rev().map(|j| j.spec.id).collect()),
        }
    }

    /// The next job of a walk, if any is left.
    pub fn walk_next(&self, walk: &mut QueueWalk, config: &SchedConfig) -> Option<JobId> {
        match walk {
            QueueWalk::Indexed(walk) => self.derived.queue_order.as_ref()?.next(walk, &self.jobs, config),
            QueueWalk::Listed(left) => left.pop(),
        }
    }

    /// The ordered index, if built (tests compare it with a fresh sort).
    pub fn built_queue_order(&self) -> Option<&QueueOrder> {
        self.derived.queue_order.as_ref()
    }

    /// Jobs whose GPUs are borrowed beyond their tenant's quota.
    pub fn borrowed(&self) -> BTreeSet<JobId> {
        quota::borrowed(self.holding.iter().filter_map(|id| self.jobs.get(id)), &self.tenants)
    }

    /// When each job holding GPUs is predicted to end: from its measured
    /// progress rate, else from its submitter's estimate.
    pub fn predicted_ends(&self, now: At) -> BTreeMap<JobId, At> {
        self.holding
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter_map(|job| {
                let remaining = job.spec.steps_total.saturating_sub(job.steps_done);
                // A rate near zero (a stalled job) predicts no end at all.
                let secs = match self.rates.get(&job.spec.id).and_then(|r| r.remaining_secs(remaining)) {
                    Some((mean, _)) => Secs::from_f64(mean)?,
                    None => job.remaining_estimate()?,
                };
                Some((job.spec.id, now + secs.delta()))
            })
            .collect()
    }

    /// Whether a scheduler preemption is still in flight (one batch at a time,
    /// so a pass never preempts twice for the same need).
    pub fn scheduler_stop_pending(&self) -> bool {
        self.derived.scheduler_stops.iter().any(|id| self.holding.contains(id) && self.jobs.get(id).is_some_and(is_scheduler_stop))
    }

    /// Forgets the scheduler's stops that are over (called once per event).
    pub fn prune_scheduler_stops(&mut self) {
        if !self.derived.scheduler_stops.is_empty() {
            let (holding, jobs) = (&self.holding, &self.jobs);
            self.derived.scheduler_stops.retain(|id| holding.contains(id) && jobs.get(id).is_some_and(is_scheduler_stop));
        }
    }
}

/// A job stopping because the scheduler asked (not for idleness or consolidation).
fn is_scheduler_stop(job: &Job) -> bool {
    match &job.state {
        JobState::Preempted { reason } | JobState::Checkpointing { then: AfterCheckpoint::Stop(reason) } => holds_back_the_scheduler(reason),
        _ => false,
    }
}

/// A stop the scheduler waits for before it preempts again: one it asked
/// for to make room, not an idle reclaim or a consolidation.
fn holds_back_the_scheduler(reason: &StopReason) -> bool {
    matches!(reason, StopReason::Scheduler(s) if !matches!(s, SchedStop::Idle | SchedStop::Consolidate { .. }))
}

/// A walk of the queue in order: read lazily from the ordered index, or
/// (priority with a negative aging rate, where a later arrival may
/// overtake) the sorted queue, last job first.
pub enum QueueWalk {
    Indexed(Walk),
    Listed(Vec<JobId>),
}
