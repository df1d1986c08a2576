//! `Room`: the whole control-plane state and the only way it changes,
//! `Room::apply(at, event) -> effects`.
//!
//! Deterministic: the same events in the same order give the same state and
//! the same effects, byte for byte. Every map is ordered, nothing reads a
//! clock or a random source, and bad input becomes an `Effect::Rejected`
//! instead of a panic, leaving the state as it was.
//!
//! Split the way quinn-proto splits its `Connection`: this struct owns the
//! state, in parts each owned by one file (`fleet`, `cost`, `budget`,
//! `sched`, `journal`, `forecast`, `predict`, `sources`, `slurm`), and
//! `apply` calls the concerns with the parts they need as arguments; no
//! submodule reaches back into the whole `Room`, except `view_build`, the
//! read-only projection the console draws.

pub mod budget;
pub mod capacity;
pub mod config;
pub mod cost;
pub mod derived;
pub mod fleet;
pub mod forecast;
pub mod journal;
mod life;
mod ops;
pub mod predict;
pub mod retired;
pub mod sched;
pub mod slurm;
pub mod slurm_acts;
mod slurm_fleet;
#[cfg(test)]
mod capacity_tests;
#[cfg(test)]
mod derived_tests;
#[cfg(test)]
mod slurm_tests;
#[cfg(test)]
mod slurm_site_tests;
pub mod sources;
pub mod spot;
pub mod view;
mod view_build;
pub mod view_slurm;
pub mod waits;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use config::{AfterInterruption, ForecastConfig, RoomConfig};
pub use journal::{Ack, Alarm, AuditEntry, LogLine, Severity, Stats};
pub use view::View;

use budget::{Budgets, Check, Overrun};
use capacity::{CapacityState, Elastic};
use cost::Costs;
use fleet::Fleet;
use forecast::SpendForecast;
use journal::Journal;
use predict::Predictor;
use sched::{IdleStop, Pass, SchedState};
use slurm::SlurmMirror;
use sources::SourceState;
use spot::Watch;

use crate::cost::budget::{Approval, BudgetLevel};
use crate::cost::ledger::{per_gib, LineKind, OpenPeriod};
use crate::cost::Books;
use crate::domain::cluster::{BillingMode, Node, NodeSpec, NodeState};
use crate::domain::event::{Action, Actor, Effect, Event, GpuSample, TenantSpec};
use crate::domain::ids::{JobId, NodeId, PoolKey, TenantId};
use crate::domain::job::{AfterCheckpoint, Job, JobSpec, JobState, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, Micros, MicrosPerHour, Secs, HORIZON_SECS};
use crate::market::hazard::{HazardModel, Lifetime};
use crate::market::Market;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Room {
    pub(crate) config: RoomConfig,
    pub(crate) now: Option<At>,
    pub(crate) fleet: Fleet,
    pub(crate) market: Market,
    #[serde(default)]
    pub(crate) hazard: HazardModel,
    pub(crate) budgets: Budgets,
    pub(crate) costs: Costs,
    /// The run-time predictor, learning from finished jobs.
    #[serde(default)]
    pub(crate) predictor: Predictor,
    /// Hourly spend, the day-ahead forecast and the anomaly detector.
    #[serde(default)]
    pub(crate) forecast: SpendForecast,
    pub(crate) journal: Journal,
    pub(crate) sched: SchedState,
    /// Live sources and how each last answered.
    #[serde(default)]
    pub(crate) sources: BTreeMap<String, SourceState>,
    /// The Slurm cluster, when one is attached.
    #[serde(default)]
    pub(crate) slurm: SlurmMirror,
    /// Elastic capacity: pools, nodes bought, launches on their way.
    #[serde(default)]
    pub(crate) capacity: CapacityState,
}

impl Default for Room {
    fn default() -> Self {
        Room::new(RoomConfig::default())
    }
}

impl Room {
    pub fn new(config: RoomConfig) -> Room {
        let market = Market::new(config.price_history).with_trend_window(config.trend_window);
        // A bad hazard config is refused when the config is loaded; here it
        // can only fall back to the defaults.
        let hazard = HazardModel::new(config.hazard.clone()).unwrap_or_default();
        let journal = Journal::new(config.log_capacity);
        Room {
            config,
            now: None,
            fleet: Fleet::default(),
            market,
            hazard,
            budgets: Budgets::default(),
            costs: Costs::default(),
            predictor: Predictor::default(),
            forecast: SpendForecast::default(),
            journal,
            sched: SchedState::default(),
            sources: BTreeMap::new(),
            slurm: SlurmMirror::default(),
            capacity: CapacityState::default(),
        }
    }

    pub fn config(&self) -> &RoomConfig {
        &self.config
    }

    pub fn now(&self) -> Option<At> {
        self.now
    }

    /// The newest operator action carried out (the audit trail's last entry).
    pub fn last_audit(&self) -> Option<&AuditEntry> {
        self.journal.audit.back()
    }

    pub fn stats(&self) -> &Stats {
        &self.journal.stats
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.fleet.jobs.get(&id)
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.fleet.nodes.get(&id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.fleet.nodes.values()
    }

    /// Every unfinished job, and those finished within `retain_finished`.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.fleet.jobs.values()
    }

    /// What is left of the jobs retired from memory (see `retired`).
    pub fn retired(&self) -> &retired::Retired {
        &self.fleet.retired
    }

    pub fn tenant(&self, name: &str) -> Option<&TenantSpec> {
        self.fleet.tenants.get(&TenantId(name.to_string()))
    }

    /// Operator actions, oldest first (the last 500; the event log has all).
    pub fn audit(&self) -> impl Iterator<Item = &journal::AuditEntry> {
        self.journal.audit.iter()
    }

    /// The ledger's charge period still open (closed ones leave as `Effect::Ledger`).
    pub fn open_period(&self) -> &OpenPeriod {
        &self.costs.period
    }

    /// Hourly spend so far and the day-ahead forecast.
    pub fn spend_forecast(&self) -> &SpendForecast {
        &self.forecast
    }

    /// What the rest of the month will cost at the day-ahead forecast.
    pub fn projected_rest_of_month(&self, now: At) -> Option<Micros> {
        self.forecast.projected_rest_of_month(now)
    }

    /// A tenant's budget level as of the last event.
    pub fn budget_level_of(&self, tenant: &TenantId) -> BudgetLevel {
        self.budgets.level(tenant)
    }

    /// A tenant's standing approval of an overrun, if any.
    pub fn approval(&self, tenant: &TenantId) -> Option<&Approval> {
        self.budgets.approvals.get(tenant)
    }

    /// The spot watcher's interruption risk per instance type.
    pub fn hazard(&self) -> &HazardModel {
        &self.hazard
    }

    pub fn books(&self) -> &Books {
        &self.costs.books
    }

    /// Jobs whose GPUs are borrowed beyond their tenant's quota.
    pub fn borrowed(&self) -> std::collections::BTreeSet<JobId> {
        self.fleet.borrowed()
    }

    pub fn slurm(&self) -> &SlurmMirror {
        &self.slurm
    }

    /// Elastic capacity: pools, nodes bought, launches on their way, proposals.
    pub fn capacity(&self) -> &CapacityState {
        &self.capacity
    }

    /// Applies one event at time `at` and returns what the outside world must do.
    pub fn apply(&mut self, at: At, event: &Event) -> Vec<Effect> {
        self.journal.stats.events += 1;
        self.fleet.build_derived(self.now);
        self.fleet.prune_scheduler_stops();
        if let Some(now) = self.now
            && at < now
        {
            return self.journal.reject(
                at,
                format!("{} event at {} is earlier than the last one ({}): time went backwards", event.kind(), at, now),
            );
        }
        let closed = self.costs.accrue_until(self.now, at, &mut self.fleet, &self.market, self.config.cost.storage_per_gib_month);
        self.now = Some(at);
        if self.config.retain_finished.0 > 0 {
            self.fleet.retire_finished(at - chrono::TimeDelta::seconds(self.config.retain_finished.0));
        }
        let mut effects = Vec::new();
        if !closed.is_empty() {
            self.forecast.on_periods_closed(&self.config.forecast, at, &closed, &mut self.journal, &mut effects);
            effects.push(Effect::Ledger { lines: closed });
            if let Some(start) = self.costs.period.start {
                self.capacity.prune(start, &mut self.fleet, &mut self.costs);
            }
        }
        let outcome = match event {
            Event::NodeUp { spec } => self.on_node_up(at, spec),
            Event::NodeLost { node, reason } => self.on_node_lost(at, *node, reason, &mut effects),
            Event::TenantDefined { spec } => {
                self.fleet.tenants.insert(spec.id.clone(), spec.clone());
                Ok(())
            }
            Event::JobSubmitted { spec } => self.on_submit(at, spec),
            Event::JobsSubmitted { specs } => {
                for spec in specs {
                    if let Err(reason) = self.on_submit(at, spec) {
                        effects.extend(self.journal.reject(at, reason));
                    }
                }
                Ok(())
            }
            Event::JobStarted { job } => self.on_started(at, *job),
            Event::CheckpointDone { job, step, bytes } => self.on_checkpoint_done(at, *job, *step, *bytes, &mut effects),
            Event::JobStopped { job } => self.on_stopped(at, *job),
            Event::JobExited { job, ok, message } => self.on_exited(at, *job, *ok, message),
            Event::Telemetry { gpus, progress } => self.on_telemetry(at, gpus, progress, &mut effects),
            Event::PriceTick { zone, instance_type, price } => self.on_price(at, zone, instance_type, *price, &mut effects),
            Event::InterruptionNotice { node, deadline } => self.on_notice(at, *node, *deadline, &mut effects),
            Event::Operator { actor, action } => {
                // The operator acts on figures as of now, and may change the policy.
                self.settle_all(at);
                self.fleet.derived.wake_checkpoints();
                self.on_operator(at, actor, action, &mut effects)
            }
            Event::SpotLifetimes { instance_type, lifetimes } => spot::on_lifetimes(&mut self.hazard, &mut self.journal, self.now, instance_type, lifetimes),
            Event::JobOutput { job, requests, tokens } => self.on_output(*job, *requests, *tokens),
            Event::GpuHealth { readings } => sources::on_gpu_health(&mut self.fleet, readings),
            Event::SourceStatus { source, ok, detail, stale } => {
                let status = sources::Status { source, ok: *ok, detail, stale };
                sources::on_source_status(&mut self.sources, &mut self.fleet, &mut self.journal, at, status, &mut effects).map(|slurm_down| {
                    if let Some(detail) = slurm_down {
                        self.slurm.unreachable(&detail);
                    }
                })
            }
            Event::Slurm { snapshot } => {
                self.on_slurm_fleet(at, snapshot, &mut effects);
                let ctx = slurm::Ctx { policy: &self.config.slurm, tenants: &self.fleet.tenants, journal: &mut self.journal };
                let outcome = self.slurm.on_snapshot(ctx, at, snapshot, &mut effects);
                let mut ctx = slurm::Ctx { policy: &self.config.slurm, tenants: &self.fleet.tenants, journal: &mut self.journal };
                let drained = self.slurm.act(&mut ctx, &self.budgets.levels, at, &mut effects);
                for (node, deadline) in drained {
                    // The room's own notice path: the hazard model, the node draining, the alarm.
                    if self.fleet.nodes.get(&node).is_some_and(|n| matches!(n.state, NodeState::Up)) {
                        self.settle_all(at);
                        let _ = self.on_notice(at, node, deadline, &mut effects);
                    }
                }
                outcome
            }
            Event::SlurmDone { command, ok, message } => self.slurm.on_done(&mut self.journal, at, *command, *ok, message, &mut effects),
            Event::PoolDefined { pool } => {
                if pool.node.billing == BillingMode::Spot && pool.problem().is_none() {
                    self.market.register(pool.node.pool(), pool.node.on_demand_price);
                }
                self.capacity.on_pool_defined(pool, &mut self.journal, at)
            }
            Event::Launched { request, spec } => self.elastic(at).on_launched(*request, spec),
            Event::LaunchFailed { request, count, failure, message } => self.elastic(at).on_launch_failed(*request, *count, *failure, message),
            Event::Released { node } => self.elastic(at).on_released(*node),
            Event::ReleaseFailed { node, message } => self.elastic(at).on_release_failed(*node, message),
            // Ticks come when the console wants a view: its money is exact.
            Event::Tick => {
                self.settle_all(at);
                Ok(())
            }
        };
        if let Err(reason) = outcome {
            effects.extend(self.journal.reject(at, reason));
        }
        sched::checkpoints_due(&self.config.checkpoint, &mut self.fleet, at, &mut effects);
        if self.costs.budgets_may_move(at, &self.fleet, &self.budgets.approvals, &self.config.cost.budget) {
            self.settle_all(at);
        }
        let check = Check { policy: &self.config.cost.budget, books: &self.costs.books, fleet: &mut self.fleet, now: self.now, checkpoint: &self.config.checkpoint };
        let levels_moved = self.budgets.check(at, check, &mut self.journal, &mut effects);
        if levels_moved {
            self.sched.queue_dirty = true;
        }
        // Slurm hears of a budget level at once (an approval releases now),
        // and a requeue follows its checkpoint signal when due, not at the next poll.
        if !matches!(event, Event::Slurm { .. }) && self.slurm.snapshot.is_some() && (levels_moved || self.slurm.follow_up_due(at)) {
            let mut ctx = slurm::Ctx { policy: &self.config.slurm, tenants: &self.fleet.tenants, journal: &mut self.journal };
            self.slurm.act(&mut ctx, &self.budgets.levels, at, &mut effects);
        }
        if waits::check(&mut self.sched.waits_checked, &self.config.sched.max_wait, &mut self.fleet, &mut self.journal, at, &mut effects) {
            self.sched.queue_dirty = true;
        }
        if self.sched.queue_dirty {
            let costly = if self.config.capacity.mode == crate::capacity::CapacityMode::Off {
                sched::Costly::default()
            } else {
                self.capacity.costly(&self.market, at)
            };
            self.pass(&costly).schedule(at, &mut effects);
        }
        self.elastic(at).step(&mut effects);
        effects
    }

    // ---- the parts, lent to the concerns ------------------------------

    fn pass<'a>(&'a mut self, costly: &'a sched::Costly) -> Pass<'a> {
        Pass {
            config: &self.config,
            now: self.now,
            fleet: &mut self.fleet,
            costs: &mut self.costs,
            market: &self.market,
            budgets: &self.budgets,
            journal: &mut self.journal,
            state: &mut self.sched,
            costly,
        }
    }

    fn watch(&mut self) -> Watch<'_> {
        Watch {
            config: &self.config,
            now: self.now,
            fleet: &mut self.fleet,
            market: &self.market,
            hazard: &self.hazard,
            predictor: &self.predictor,
            journal: &mut self.journal,
        }
    }

    fn elastic(&mut self, now: At) -> Elastic<'_> {
        Elastic {
            config: &self.config,
            now,
            state: &mut self.capacity,
            fleet: &mut self.fleet,
            costs: &mut self.costs,
            market: &self.market,
            hazard: &self.hazard,
            budgets: &self.budgets,
            predictor: &self.predictor,
            journal: &mut self.journal,
            sched: &mut self.sched,
        }
    }

    fn settle_all(&mut self, at: At) {
        self.costs.settle_all(at, &mut self.fleet, &self.market);
    }

    fn stop_job(&mut self, id: JobId, reason: StopReason, save: bool, effects: &mut Vec<Effect>) {
        self.fleet.stop_job(self.now, &self.config.checkpoint, id, reason, save, effects);
    }

    /// Frees the job's GPUs (no state change), charging its node up to now first.
    fn release(&mut self, id: JobId) {
        if let Some(node) = self.fleet.placed_node(id) {
            self.costs.settle_node(self.now, &mut self.fleet, &self.market, node);
        }
        if self.fleet.jobs.contains_key(&id) {
            self.fleet.free(self.now, id);
            self.sched.queue_dirty = true;
        }
    }

    /// Back to the queue, resuming from the last checkpoint.
    fn requeue_from_checkpoint(&mut self, at: At, id: JobId) {
        if self.fleet.requeue_from_checkpoint(at, id, &mut self.journal.stats) {
            self.sched.queue_dirty = true;
        }
    }

    fn finish(&mut self, at: At, id: JobId, state: JobState) -> Result<(), String> {
        life::finish(&mut self.fleet, &mut self.costs.books, &mut self.journal, &self.config.sched.max_wait, at, id, state)
    }

    /// After a stop in `pool`, where the job may go next.
    fn steer_after_stop(&mut self, id: JobId, pool: Option<PoolKey>, reason: &StopReason) {
        spot::steer_after_stop(self.config.after_interruption, &mut self.fleet, &mut self.journal.stats, id, pool, reason);
    }

    // ---- cluster -------------------------------------------------------

    fn on_node_up(&mut self, at: At, spec: &NodeSpec) -> Result<(), String> {
        if let Some(problem) = spec.problem() {
            return Err(format!("node {}: {problem}", clean(&spec.name)));
        }
        if let Some(existing) = self.fleet.nodes.get_mut(&spec.id)
            && existing.is_up()
        {
            if !matches!(existing.state, NodeState::Booting { .. }) {
                return Err(format!("node {} is already up", clean(&existing.spec.name)));
            }
            // A node the room bought is ready: billed since its launch, it now takes work.
            existing.state = NodeState::Up;
            let text = format!("{} ready: {} {} in {}", clean(&spec.name), spec.billing.label(), clean(&spec.instance_type), clean(&spec.zone));
            self.journal.note(at, Severity::Info, text);
            self.elastic(at).on_ready(spec.id);
            self.sched.queue_dirty = true;
            return Ok(());
        }
        let relaunch = self.fleet.nodes.contains_key(&spec.id);
        if spec.billing == BillingMode::Spot {
            self.market.register(spec.pool(), spec.on_demand_price);
        }
        self.fleet.nodes.insert(spec.id, Node::new(spec.clone(), at));
        self.costs.node_up(at, &self.fleet, &self.market, spec.id, spec.gpu_count);
        let verb = if relaunch { "relaunched" } else { "joined" };
        let text = format!(
            "{} {verb}: {} {} in {} ({} × {})",
            clean(&spec.name),
            spec.billing.label(),
            clean(&spec.instance_type),
            clean(&spec.zone),
            spec.gpu_count,
            clean(&spec.gpu_model)
        );
        self.journal.note(at, Severity::Info, text);
        self.sched.queue_dirty = true;
        Ok(())
    }

    fn on_node_lost(&mut self, at: At, node_id: NodeId, reason: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.fleet.nodes.get(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !node.is_up() {
            return Err(format!("node {} is already down", clean(&node.spec.name)));
        }
        let victims = life::jobs_on(node);
        let name = self.fleet.node_name(node_id);
        if node.spec.billing == BillingMode::Spot {
            let (kind, secs, noticed) = (node.spec.instance_type.clone(), (at - node.up_since).num_seconds(), matches!(node.state, NodeState::Draining { .. }));
            if !noticed {
                self.hazard.record_interruption(&kind, at);
            }
            if let Ok(life) = Lifetime::new(Secs(secs), true) {
                let _ = self.hazard.record_lifetime(&kind, life);
            }
        }
        let pool = self.fleet.nodes.get(&node_id).map(|n| n.spec.pool());
        for job_id in victims {
            if let Some(job) = self.fleet.jobs.get(&job_id)
                && let JobState::Checkpointing { then: AfterCheckpoint::Stop(StopReason::Interruption) } = job.state
            {
                self.journal.stats.notice_saves_missed += 1;
            }
            let cancelled_by = match self.fleet.jobs.get(&job_id).map(|j| &j.state) {
                Some(JobState::Preempted { reason: StopReason::Operator { actor, requeue: false } }) => Some(clean(actor)),
                _ => None,
            };
            self.release(job_id);
            match cancelled_by {
                // Being cancelled anyway: the loss only makes it final sooner.
                Some(actor) => self.finish(at, job_id, JobState::Failed { reason: format!("cancelled by {actor}") })?,
                None => {
                    self.requeue_from_checkpoint(at, job_id);
                    self.steer_after_stop(job_id, pool.clone(), &StopReason::Interruption);
                }
            }
        }
        self.costs.settle_node(self.now, &mut self.fleet, &self.market, node_id);
        if let Some(node) = self.fleet.nodes.get_mut(&node_id) {
            node.state = NodeState::Down { since: at };
        }
        self.journal.stats.nodes_lost += 1;
        self.capacity.forget(node_id, at);
        self.journal.clear(&format!("notice:{}", node_id.0), effects);
        self.journal.note(at, Severity::Warn, format!("{name} lost: {}", clean(reason)));
        Ok(())
    }

    fn on_notice(&mut self, at: At, node_id: NodeId, deadline: At, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.fleet.nodes.get_mut(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !matches!(node.state, NodeState::Up) {
            return Err(format!("interruption notice for {} which is not up", clean(&node.spec.name)));
        }
        node.state = NodeState::Draining { deadline };
        let jobs = life::jobs_on(node);
        // On a Slurm node the jobs to save are Slurm's (room::slurm_acts signals them).
        let mut slurm_jobs: Vec<u64> = node.gpus.iter().filter_map(|g| g.slurm_job).collect();
        slurm_jobs.sort_unstable();
        slurm_jobs.dedup();
        self.journal.stats.notices += 1;
        let name = self.fleet.node_name(node_id);
        let secs = (deadline - at).num_seconds();
        let text = format!("spot interruption: {name} reclaimed in {secs}s, saving {} job(s)", jobs.len() + slurm_jobs.len());
        self.journal.raise(at, format!("notice:{}", node_id.0), text, effects);
        for job in jobs {
            self.stop_job(job, StopReason::Interruption, true, effects);
        }
        if let Some(kind) = self.fleet.nodes.get(&node_id).map(|n| n.spec.instance_type.clone()) {
            self.hazard.record_interruption(&kind, at);
            // The rest of the type's fleet just got riskier: shorter intervals.
            let others = self.fleet.spot_jobs(None, Some(&kind));
            self.watch().judge(at, others, effects);
        }
        Ok(())
    }

    // ---- jobs ----------------------------------------------------------

    fn validate(&self, spec: &JobSpec) -> Result<(), String> {
        let name = clean(&spec.name);
        if self.fleet.jobs.contains_key(&spec.id) || self.fleet.retired.contains(spec.id) {
            return Err(format!("job {} ({name}) already exists", spec.id));
        }
        if spec.gpus == 0 || spec.gpus > self.config.max_gpus_per_job {
            return Err(format!("job {} ({name}) asks {} GPUs (1..={} allowed)", spec.id, spec.gpus, self.config.max_gpus_per_job));
        }
        if spec.gpu_mem.0 == 0 {
            return Err(format!("job {} ({name}) asks no GPU memory", spec.id));
        }
        if spec.steps_total == 0 {
            return Err(format!("job {} ({name}) has no work (0 steps)", spec.id));
        }
        if let Some(est) = spec.est_runtime
            && !(1..=HORIZON_SECS).contains(&est.0)
        {
            return Err(format!("job {} ({name}) has a run-time estimate of {} s", spec.id, est.0));
        }
        if !self.fleet.tenants.contains_key(&spec.tags.tenant) {
            return Err(format!("job {} ({name}) names unknown tenant {:?}", spec.id, clean(&spec.tags.tenant.0)));
        }
        Ok(())
    }

    fn on_submit(&mut self, at: At, spec: &JobSpec) -> Result<(), String> {
        self.validate(spec)?;
        self.fleet.jobs.insert(spec.id, Job::new(spec.clone(), at));
        self.fleet.active.insert(spec.id);
        self.fleet.queued.insert(spec.id);
        self.journal.stats.submitted += 1;
        if !self.sched.queue_dirty && sched::arrival_may_start(&self.sched, &self.config.sched, &self.fleet.tenants, spec, at) {
            self.sched.queue_dirty = true;
        }
        Ok(())
    }

    fn on_started(&mut self, at: At, id: JobId) -> Result<(), String> {
        self.fleet.transition(at, id, JobState::Running)?;
        let job = self.fleet.job_mut(id)?;
        job.started_at = Some(at);
        self.fleet.rates.entry(id).or_default().reset();
        self.watch().refresh_risk(at, id);
        self.fleet.note_checkpoint_due(&self.config.checkpoint, id);
        Ok(())
    }

    fn on_checkpoint_done(&mut self, at: At, id: JobId, step: u64, bytes: u64, effects: &mut Vec<Effect>) -> Result<(), String> {
        let then = life::record_checkpoint(&mut self.fleet, &mut self.journal.stats, at, id, step, bytes)?;
        let io = per_gib(bytes, self.config.cost.checkpoint_io_per_gib);
        self.costs.charge_service(at, &mut self.fleet, id, LineKind::CheckpointIo, bytes, io);
        match then {
            AfterCheckpoint::Continue => {
                self.fleet.transition(at, id, JobState::Running)?;
                self.watch().refresh_risk(at, id);
                self.fleet.note_checkpoint_due(&self.config.checkpoint, id);
                Ok(())
            }
            AfterCheckpoint::Stop(reason) => {
                if reason == StopReason::Interruption {
                    self.journal.stats.notice_saves_in_time += 1;
                }
                self.fleet.transition(at, id, JobState::Preempted { reason })?;
                effects.push(Effect::StopJob { job: id });
                Ok(())
            }
        }
    }

    fn on_stopped(&mut self, at: At, id: JobId) -> Result<(), String> {
        let job = self.fleet.job(id)?;
        let JobState::Preempted { reason } = job.state.clone() else {
            return Err(format!("job {id} reported stopped while {}", job.phase().label()));
        };
        let pool = self.fleet.job_pool(id).map(|(k, _)| k);
        self.release(id);
        match reason {
            StopReason::Operator { actor, requeue: false } => {
                self.finish(at, id, JobState::Failed { reason: format!("cancelled by {}", clean(&actor)) })?;
            }
            StopReason::Scheduler(SchedStop::Idle) => {
                let window = self.config.sched.idle_window;
                let threshold = self.config.sched.idle_util_pct;
                self.finish(at, id, JobState::Failed { reason: format!("released: GPU below {threshold}% for {window}") })?;
            }
            _ => {
                self.requeue_from_checkpoint(at, id);
                self.steer_after_stop(id, pool, &reason);
            }
        }
        Ok(())
    }

    fn on_exited(&mut self, at: At, id: JobId, ok: bool, message: &str) -> Result<(), String> {
        let job = self.fleet.job(id)?;
        if !job.phase().holds_gpus() {
            return Err(format!("job {id} exited while {}", job.phase().label()));
        }
        let (state, severity, verb) = if ok {
            (JobState::Done, Severity::Info, "finished".to_string())
        } else {
            (JobState::Failed { reason: clean(message) }, Severity::Warn, format!("failed: {}", clean(message)))
        };
        // Check before releasing anything: a refused event changes nothing.
        if !job.phase().can_become(state.phase()) {
            return Err(format!("job {id} cannot go from {} to {}", job.phase().label(), state.phase().label()));
        }
        let name = clean(&job.spec.name);
        self.release(id);
        self.finish(at, id, state)?;
        if ok && let Some(job) = self.fleet.jobs.get_mut(&id) {
            job.steps_done = job.spec.steps_total;
        }
        if ok && let Some(job) = self.fleet.jobs.get(&id) {
            self.predictor.learn(job);
        }
        self.journal.note(at, severity, format!("{id} {name} {verb}"));
        Ok(())
    }

    fn on_telemetry(&mut self, at: At, gpus: &[GpuSample], progress: &[(JobId, u64)], effects: &mut Vec<Effect>) -> Result<(), String> {
        let (seen, mut unknown) = life::record_samples(&mut self.fleet, at, gpus);
        for (gpu_ref, util) in seen {
            let stop = IdleStop { now: self.now, checkpoint: &self.config.checkpoint };
            sched::track_idle(&self.config.sched, stop, &mut self.fleet, &mut self.journal, at, gpu_ref, util, effects);
        }
        unknown += life::record_progress(&mut self.fleet, &self.config.checkpoint, at, progress);
        let on_spot: Vec<JobId> = progress
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| self.fleet.job_node(*id).is_some_and(|n| n.spec.billing == BillingMode::Spot))
            .collect();
        self.watch().judge(at, on_spot, effects);
        if unknown > 0 {
            return Err(format!("telemetry named {unknown} unknown GPU(s) or job(s), or carried a non-finite value"));
        }
        Ok(())
    }

    /// Output counters only grow; a smaller one (a restarted exporter) is kept as the floor.
    fn on_output(&mut self, id: JobId, requests: u64, tokens: u64) -> Result<(), String> {
        let job = self.fleet.job_mut(id)?;
        job.requests = job.requests.max(requests);
        job.tokens = job.tokens.max(tokens);
        Ok(())
    }

    fn on_price(&mut self, at: At, zone: &str, instance_type: &str, price: MicrosPerHour, effects: &mut Vec<Effect>) -> Result<(), String> {
        let key = PoolKey { zone: zone.to_string(), instance_type: instance_type.to_string() };
        let before = self.market.price(&key);
        if before != Some(price) {
            // Spot nodes of this pool were charged at the old price until now.
            self.settle_all(at);
        }
        self.market.observe(key.clone(), at, price)?;
        if let Some(before) = before
            && before.0 > 0
            && (price.0 - before.0).abs() * 10 >= before.0
        {
            self.journal.note(at, Severity::Info, format!("spot {} {before} → {price}", clean(&key.to_string())));
        }
        let jobs = self.fleet.spot_jobs(Some(&key), None);
        self.watch().judge(at, jobs, effects);
        Ok(())
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
                let mut ctx = ops::JobOps {
                    config: &self.config,
                    now: self.now,
                    fleet: &mut self.fleet,
                    books: &mut self.costs.books,
                    journal: &mut self.journal,
                    sched: &mut self.sched,
                };
                ctx.carry_out(at, actor, action, *job, effects)?
            }
            Action::Slurm { job, verb } => self.slurm.on_action(&self.config.slurm, at, actor, *job, verb, effects)?,
            Action::ApproveCapacity { proposal } => format!("approve: {}", self.elastic(at).approve(*proposal, effects)?),
        };
        let (who, origin) = (clean(&actor.user), clean(&actor.origin));
        self.journal.stats.operator_actions += 1;
        self.journal.note(at, Severity::Action, format!("{who}@{origin}: {what}"));
        self.journal.audit_action(at, actor, &what);
        Ok(())
    }
}

