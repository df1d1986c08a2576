//! `Room`: the whole control-plane state and the only way it changes,
//! `Room::apply(at, event) -> effects`.
//!
//! Deterministic: the same events in the same order give the same state and
//! the same effects, byte for byte. Every map is ordered, nothing reads a
//! clock or a random source, and bad input becomes an `Effect::Rejected`
//! instead of a panic, leaving the state as it was.
//!
//! Split the way quinn-proto splits its `Connection`:
//!
//! * this file owns the state, in parts each owned by one file (`fleet`,
//!   `cost`, `budget`, `sched`, `journal`, `forecast`, `predict`,
//!   `sources`, `slurm`, `capacity`, `trips`), the getters, and **the lenders**: one
//!   method per concern that lends it exactly the parts it may touch, as a
//!   borrow struct (`pass`, `watch`, `elastic`, `slurm_desk`, `budget_desk`,
//!   `job_ops`, `life`, `tripwires`, `waits`, `idle`, `spend_watch`), listed together;
//! * `apply` is the clock moved (`advance_to`), a `dispatch` with one arm
//!   per kind of event, and `after_event`, the named steps every event is
//!   followed by;
//! * the handlers live one file per kind of event (`on_cluster`, `on_jobs`,
//!   `on_market`, `on_operator`, and `slurm_fleet` for Slurm's snapshots),
//!   as `impl Room` blocks that reach the parts through the lenders;
//! * `view_build` is the read-only projection the console draws.
//!
//! No concern's file reaches into the whole `Room`; only the handler files
//! and `view_build` are `impl Room`.

pub mod budget;
pub mod capacity;
#[cfg(test)]
mod capacity_tests;
pub mod config;
pub mod cost;
pub mod derived;
#[cfg(test)]
mod derived_tests;
pub mod drf_order;
pub mod fleet;
pub mod forecast;
pub mod headroom;
pub mod journal;
mod life;
mod on_cluster;
mod on_jobs;
mod on_market;
mod on_operator;
mod ops;
mod pass_shortcuts;
pub mod predict;
pub mod queue_order;
pub mod queue_shapes;
pub mod retired;
pub mod sched;
pub mod slurm;
pub mod slurm_acts;
mod slurm_fleet;
pub mod slurm_govern;
#[cfg(test)]
mod slurm_govern_tests;
pub mod slurm_notes;
pub mod slurm_saves;
#[cfg(test)]
mod slurm_site_tests;
#[cfg(test)]
mod slurm_tests;
pub mod sources;
pub mod spot;
pub mod trips;
pub mod view;
mod view_build;
pub mod view_slurm;
pub mod wait_index;
pub mod waits;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use config::{AfterInterruption, ForecastConfig, RoomConfig};
pub use journal::{Ack, Alarm, AuditEntry, LogLine, Severity, Stats};
pub use view::View;

use budget::{Budgets, Check};
use capacity::{CapacityState, Elastic};
use cost::Costs;
use fleet::Fleet;
use forecast::{SpendForecast, SpendWatch};
use journal::Journal;
use life::Life;
use ops::JobOps;
use predict::Predictor;
use sched::{Idle, Pass, SchedState};
use slurm::SlurmMirror;
use sources::SourceState;
use spot::Watch;
use trips::{Trips, Tripwires};
use waits::Waits;

use crate::cost::Books;
use crate::cost::budget::{Approval, BudgetLevel};
use crate::cost::ledger::OpenPeriod;
use crate::domain::cluster::Node;
use crate::domain::event::{Effect, Event, TenantSpec};
use crate::domain::ids::{JobId, NodeId, PoolKey, TenantId};
use crate::domain::job::{Job, JobState, StopReason};
use crate::domain::units::{At, Micros};
use crate::market::Market;
use crate::market::hazard::HazardModel;

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
    /// The recent losses, failures and refusals the fleet-level alarms count.
    #[serde(default)]
    pub(crate) trips: Trips,
}

impl Default for Room {
    fn default() -> Self {
        Room::new(RoomConfig::default())
    }
}

/// The lenders: which parts of the room each concern may touch, one answer
/// per concern (quinn-proto's `streams()` / `send_stream()` habit). A
/// concern gets its parts through one of these and nothing else.
impl Room {
    /// The scheduling pass (`sched`).
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

    /// The spot watcher: risk, bids and the jobs to move (`spot`).
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

    /// Elastic capacity: buying and releasing nodes (`capacity`).
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
            trips: &mut self.trips,
            sched: &mut self.sched,
        }
    }

    /// The Slurm mirror, its advice and its acts (`slurm`, `slurm_acts`).
    fn slurm_desk(&mut self) -> slurm::Desk<'_> {
        let ctx = slurm::Ctx { policy: &self.config.slurm, tenants: &self.fleet.tenants, journal: &mut self.journal };
        slurm::Desk { mirror: &mut self.slurm, ctx, levels: &self.budgets.levels }
    }

    /// Budget levels and what a change of level stops (`budget`).
    fn budget_desk(&mut self) -> budget::Desk<'_> {
        let check =
            Check { policy: &self.config.cost.budget, books: &self.costs.books, fleet: &mut self.fleet, now: self.now, checkpoint: &self.config.checkpoint };
        budget::Desk { budgets: &mut self.budgets, check, journal: &mut self.journal }
    }

    /// An operator's job action: preempt, requeue, cancel, migrate (`ops`).
    fn job_ops(&mut self) -> JobOps<'_> {
        JobOps { config: &self.config, now: self.now, fleet: &mut self.fleet, books: &mut self.costs.books, journal: &mut self.journal, sched: &mut self.sched }
    }

    /// The end of a job (`life`).
    fn life(&mut self) -> Life<'_> {
        Life { fleet: &mut self.fleet, books: &mut self.costs.books, journal: &mut self.journal, max_wait: &self.config.sched.max_wait }
    }

    /// Fleet-level alarms: storms, missed saves, bursts of failures (`trips`).
    fn tripwires(&mut self) -> Tripwires<'_> {
        Tripwires { rules: &self.config.alarms, trips: &mut self.trips, journal: &mut self.journal }
    }

    /// Wait alarms and escalation (`waits`).
    fn waits(&mut self) -> Waits<'_> {
        Waits { limits: &self.config.sched.max_wait, fleet: &mut self.fleet, journal: &mut self.journal }
    }

    /// Idle reclaim of GPUs telemetry shows unused (`sched`).
    fn idle(&mut self) -> Idle<'_> {
        Idle { config: &self.config.sched, now: self.now, checkpoint: &self.config.checkpoint, fleet: &mut self.fleet, journal: &mut self.journal }
    }

    /// The spend forecast, fed as hours close (`forecast`).
    fn spend_watch(&mut self) -> SpendWatch<'_> {
        SpendWatch { forecast: &mut self.forecast, config: &self.config.forecast, journal: &mut self.journal }
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
            trips: Trips::default(),
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
            return self.journal.reject(at, format!("{} event at {} is earlier than the last one ({}): time went backwards", event.kind(), at, now));
        }
        let mut effects = Vec::new();
        self.advance_to(at, &mut effects);
        if let Err(reason) = self.dispatch(at, event, &mut effects) {
            effects.extend(self.journal.reject(at, reason));
        }
        self.after_event(at, event, &mut effects);
        effects
    }

    /// The clock moves to `at`: the money up to it accrued (closed hours go
    /// to the ledger and the forecast), finished jobs past their span retired.
    fn advance_to(&mut self, at: At, effects: &mut Vec<Effect>) {
        let closed = self.costs.accrue_until(self.now, at, &mut self.fleet, &self.market, self.config.cost.storage_per_gib_month);
        self.now = Some(at);
        if self.config.retain_finished.0 > 0 {
            self.fleet.retire_finished(at - chrono::TimeDelta::seconds(self.config.retain_finished.0));
        }
        if !closed.is_empty() {
            self.spend_watch().on_periods_closed(at, &closed, effects);
            effects.push(Effect::Ledger { lines: closed });
            if let Some(start) = self.costs.period.start {
                self.capacity.prune(start, &mut self.fleet, &mut self.costs);
            }
        }
    }

    /// One handler per kind of event (`on_cluster`, `on_jobs`, `on_market`,
    /// `on_operator`, `slurm_fleet`, and the concerns' own).
    fn dispatch(&mut self, at: At, event: &Event, effects: &mut Vec<Effect>) -> Result<(), String> {
        match event {
            Event::NodeUp { spec } => self.on_node_up(at, spec),
            Event::NodeLost { node, reason } => self.on_node_lost(at, *node, reason, effects),
            Event::TenantDefined { spec } => self.on_tenant(spec),
            Event::JobSubmitted { spec } => self.on_submit(at, spec),
            Event::JobsSubmitted { specs } => self.on_submit_batch(at, specs, effects),
            Event::JobStarted { job } => self.on_started(at, *job),
            Event::CheckpointDone { job, step, bytes } => self.on_checkpoint_done(at, *job, *step, *bytes, effects),
            Event::JobStopped { job } => self.on_stopped(at, *job),
            Event::JobExited { job, ok, message } => self.on_exited(at, *job, *ok, message, effects),
            Event::Telemetry { gpus, progress } => self.on_telemetry(at, gpus, progress, effects),
            Event::PriceTick { zone, instance_type, price } => self.on_price(at, zone, instance_type, *price, effects),
            Event::InterruptionNotice { node, deadline } => self.on_notice(at, *node, *deadline, effects),
            Event::Operator { actor, action } => self.on_operator_event(at, actor, action, effects),
            Event::SpotLifetimes { instance_type, lifetimes } => spot::on_lifetimes(&mut self.hazard, &mut self.journal, self.now, instance_type, lifetimes),
            Event::JobOutput { job, requests, tokens } => self.on_output(*job, *requests, *tokens),
            Event::GpuHealth { readings } => sources::on_gpu_health(&mut self.fleet, readings),
            Event::SourceStatus { source, ok, detail, stale } => self.on_source_status(at, sources::Status { source, ok: *ok, detail, stale }, effects),
            Event::Slurm { snapshot } => self.on_slurm(at, snapshot, effects),
            Event::SlurmDone { command, ok, message } => self.slurm_desk().on_done(at, *command, *ok, message, effects),
            Event::PoolDefined { pool } => self.on_pool_defined(at, pool),
            Event::Launched { request, spec } => self.elastic(at).on_launched(*request, spec),
            Event::LaunchFailed { request, count, failure, message } => self.elastic(at).on_launch_failed(*request, *count, *failure, message),
            Event::Released { node } => self.elastic(at).on_released(*node),
            Event::ReleaseFailed { node, message } => self.elastic(at).on_release_failed(*node, message),
            // Ticks come when the console wants a view: its money is exact.
            Event::Tick => {
                self.settle_all(at);
                Ok(())
            }
        }
    }

    /// What follows every event, in this order: checkpoints due → money
    /// settled where a budget may move → budget check → Slurm follow-up →
    /// wait alarms → the scheduling pass → elastic capacity's step.
    fn after_event(&mut self, at: At, event: &Event, effects: &mut Vec<Effect>) {
        self.journal.expire(at, effects);
        sched::checkpoints_due(&self.config.checkpoint, &mut self.fleet, at, effects);
        if self.costs.budgets_may_move(at, &self.fleet, &self.budgets.approvals, &self.config.cost.budget) {
            self.settle_all(at);
        }
        let levels_moved = self.budget_desk().check(at, effects);
        if levels_moved {
            self.sched.queue_dirty = true;
        }
        // Slurm hears of a budget level at once (an approval releases now),
        // and a requeue follows its checkpoint signal when due, not at the next poll.
        if !matches!(event, Event::Slurm { .. }) && self.slurm.snapshot.is_some() && (levels_moved || self.slurm.follow_up_due(at)) {
            self.slurm_desk().act(at, effects);
        }
        let mut last_look = self.sched.waits_checked;
        if self.waits().check(&mut last_look, at, effects) {
            self.sched.queue_dirty = true;
        }
        self.sched.waits_checked = last_look;
        if self.sched.queue_dirty {
            let costly =
                if self.config.capacity.mode == crate::capacity::CapacityMode::Off { sched::Costly::default() } else { self.capacity.costly(&self.market, at) };
            self.pass(&costly).schedule(at, effects);
        }
        self.elastic(at).step(effects);
    }

    // ---- steps several handlers share ---------------------------------

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
        self.life().finish(at, id, state)
    }

    /// After a stop in `pool`, where the job may go next.
    fn steer_after_stop(&mut self, id: JobId, pool: Option<PoolKey>, reason: &StopReason) {
        spot::steer_after_stop(self.config.after_interruption, &mut self.fleet, &mut self.journal.stats, id, pool, reason);
    }
}
