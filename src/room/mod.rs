//! `Room`: the whole control-plane state and the only way it changes,
//! `Room::apply(at, event) -> effects`.
//!
//! Deterministic: the same events in the same order give the same state and
//! the same effects, byte for byte. Every map is ordered, nothing reads a
//! clock or a random source, and bad input becomes an `Effect::Rejected`
//! instead of a panic, leaving the state as it was.


mod budget;
mod cost;
mod ops;
pub mod forecast;
pub mod predict;
pub(crate) mod sched;
pub mod slurm;
#[cfg(test)]
mod slurm_tests;
pub mod sources;
pub mod spot;
pub mod view;
pub mod view_slurm;

pub use view::View;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::domain::cluster::{BillingMode, Node, NodeState};
use crate::domain::event::{Actor, Effect, Event, GpuSample, TenantSpec};
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::{AfterCheckpoint, Job, JobSpec, JobState, Phase, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, Mib, MicrosPerHour, Secs};
use crate::ckpt::CheckpointPolicy;
use crate::cost::{Accrual, Books};
use crate::market::Market;
use crate::predict::ProgressRate;
use crate::sched::SchedConfig;

/// Policy settings. They are part of the state (and of snapshots), so a
/// replay with other settings is a what-if analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoomConfig {
    pub sched: SchedConfig,
    pub checkpoint: CheckpointPolicy,
    /// How much price history each spot pool keeps for the console.
    pub price_history: Secs,
    /// Span of the price-trend window.
    pub trend_window: Secs,
    /// Lines of the recent-events log kept for the console.
    pub log_capacity: usize,
    /// Limits a job spec must respect; larger asks are refused at submission.
    pub max_gpus_per_job: u8,
    /// How far ahead the trend lifts (or lowers) a spot job's max-price base.
    #[serde(default = "default_trend_horizon")]
    pub trend_horizon: Secs,
    #[serde(default)]
    pub hazard: crate::market::hazard::HazardConfig,
    #[serde(default)]
    pub bids: crate::market::bid::BidPolicy,
    /// Force the linear (degraded) max-price curve for every job.
    #[serde(default)]
    pub degraded_bids: bool,
    #[serde(default)]
    pub after_interruption: spot::AfterInterruption,
    #[serde(default)]
    pub cost: crate::cost::CostConfig,
    #[serde(default)]
    pub forecast: forecast::ForecastConfig,
    /// Advisory or control mode for a Slurm cluster, and what preempt means there.
    #[serde(default)]
    pub slurm: crate::domain::slurm::SlurmPolicy,
}

fn default_trend_horizon() -> Secs {
    Secs(600)
}

impl Default for RoomConfig {
    fn default() -> Self {
        RoomConfig {
            sched: SchedConfig::default(),
            checkpoint: CheckpointPolicy::default(),
            price_history: Secs(12 * 3600),
            trend_window: Secs(3600),
            log_capacity: 200,
            max_gpus_per_job: 64,
            trend_horizon: default_trend_horizon(),
            hazard: Default::default(),
            bids: Default::default(),
            degraded_bids: false,
            after_interruption: Default::default(),
            cost: Default::default(),
            forecast: Default::default(),
            slurm: Default::default(),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Info,
    Warn,
    Alarm,
    Action,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub at: At,
    pub severity: Severity,
    pub text: String,
}

/// Who did what, from where, and when (operator actions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at: At,
    pub user: String,
    pub origin: String,
    pub what: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alarm {
    pub raised_at: At,
    pub text: String,
    /// Who acknowledged it, if anyone; kept while the alarm is re-raised.
    #[serde(default)]
    pub acked: Option<Ack>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    pub at: At,
    pub user: String,
}

/// Counters for the summary and the header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub events: u64,
    pub rejected: u64,
    pub submitted: u64,
    pub placements: u64,
    pub done: u64,
    pub failed: u64,
    pub notices: u64,
    pub nodes_lost: u64,
    pub operator_actions: u64,
    pub requeues: u64,
    pub lost_steps: u64,
    pub checkpoints: u64,
    pub checkpoint_bytes: u64,
    /// Interruption saves that finished before the instance went away, and those that did not.
    pub notice_saves_in_time: u64,
    pub notice_saves_missed: u64,
    /// Queue waits of placements (sum and count, seconds).
    pub wait_secs_sum: i64,
    pub wait_count: u64,
    /// Job completion times (submission to done) of finished jobs, seconds.
    #[serde(default)]
    pub jct_secs_sum: i64,
    #[serde(default)]
    pub preemptions_by_scheduler: u64,
    #[serde(default)]
    pub idle_reclaims: u64,
    #[serde(default)]
    pub escalations: u64,
    /// Jobs saved and moved because the market passed their max price.
    #[serde(default)]
    pub price_moves: u64,
    /// Placements that left the pool a job was interrupted in or moved from.
    #[serde(default)]
    pub migrations: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Room {
    pub(crate) config: RoomConfig,
    pub(crate) now: Option<At>,
    pub(crate) nodes: BTreeMap<NodeId, Node>,
    pub(crate) jobs: BTreeMap<JobId, Job>,
    /// Jobs not yet done or failed; of them, those waiting in the queue and
    /// those holding GPUs (indices kept at the few places that move jobs).
    pub(crate) active: BTreeSet<JobId>,
    pub(crate) queued: BTreeSet<JobId>,
    pub(crate) holding: BTreeSet<JobId>,
    pub(crate) tenants: BTreeMap<TenantId, TenantSpec>,
    pub(crate) market: Market,
    #[serde(default)]
    pub(crate) hazard: crate::market::hazard::HazardModel,
    /// Each tenant's budget level as last derived, and standing approvals.
    #[serde(default, with = "crate::domain::serde_pairs")]
    pub(crate) budget_levels: BTreeMap<TenantId, crate::cost::budget::BudgetLevel>,
    #[serde(default, with = "crate::domain::serde_pairs")]
    pub(crate) approvals: BTreeMap<TenantId, crate::cost::budget::Approval>,
    /// Whether any tenant is limited or blocked (asked for every queued job).
    #[serde(default)]
    pub(crate) budget_limiting: bool,
    /// Operator actions, newest last (the event log keeps them all).
    #[serde(default)]
    pub(crate) audit: VecDeque<AuditEntry>,
    pub(crate) books: Books,
    /// The run-time predictor, learning from finished jobs.
    #[serde(default)]
    pub(crate) predictor: predict::Predictor,
    /// Hourly spend, the day-ahead forecast and the anomaly detector.
    #[serde(default)]
    pub(crate) forecast: forecast::SpendForecast,
    /// The ledger's open charge period.
    #[serde(default)]
    pub(crate) period: crate::cost::ledger::OpenPeriod,
    /// One accrual per GPU (by index on its node): each GPU's share of its
    /// instance's price, with its own remainder.
    pub(crate) accruals: BTreeMap<NodeId, Vec<Accrual>>,
    /// Every up node is charged up to here (see `room_cost::accrue_until`)…
    #[serde(default)]
    pub(crate) settled_at: Option<At>,
    /// …or up to here, for the nodes charged since, before they changed.
    #[serde(default)]
    pub(crate) accrued_to: BTreeMap<NodeId, At>,
    /// The fleet's hourly cost bound as of the last settle (budget checks).
    #[serde(default)]
    pub(crate) burn_bound: MicrosPerHour,
    /// The GPUs up since the last settle, counted with `burn_bound`: each may
    /// release one carried micro-unit.
    #[serde(default)]
    pub(crate) bound_gpus: i64,
    pub(crate) rates: BTreeMap<JobId, ProgressRate>,
    pub(crate) alarms: BTreeMap<String, Alarm>,
    pub(crate) log: VecDeque<LogLine>,
    pub(crate) stats: Stats,
    pub(crate) queue_dirty: bool,
    /// When queue waits were last checked against their limits.
    pub(crate) waits_checked: Option<At>,
    /// Free capacity as of the last pass (see `arrival_may_start`).
    #[serde(default)]
    pub(crate) headroom: Option<sched::Headroom>,
    /// Live sources and how each last answered.
    #[serde(default)]
    pub(crate) sources: BTreeMap<String, sources::SourceState>,
    /// The Slurm cluster, when one is attached.
    #[serde(default)]
    pub(crate) slurm: slurm::SlurmMirror,
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
        let hazard = crate::market::hazard::HazardModel::new(config.hazard.clone()).unwrap_or_default();
        Room {
            config,
            now: None,
            nodes: BTreeMap::new(),
            jobs: BTreeMap::new(),
            active: BTreeSet::new(),
            queued: BTreeSet::new(),
            holding: BTreeSet::new(),
            tenants: BTreeMap::new(),
            market,
            hazard,
            budget_levels: BTreeMap::new(),
            approvals: BTreeMap::new(),
            budget_limiting: false,
            audit: VecDeque::new(),
            books: Books::default(),
            period: Default::default(),
            forecast: Default::default(),
            predictor: Default::default(),
            accruals: BTreeMap::new(),
            settled_at: None,
            accrued_to: BTreeMap::new(),
            burn_bound: MicrosPerHour::default(),
            bound_gpus: 0,
            rates: BTreeMap::new(),
            alarms: BTreeMap::new(),
            log: VecDeque::new(),
            stats: Stats::default(),
            queue_dirty: false,
            waits_checked: None,
            headroom: None,
            sources: BTreeMap::new(),
            slurm: Default::default(),
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
        self.audit.back()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn tenant(&self, name: &str) -> Option<&TenantSpec> {
        self.tenants.get(&TenantId(name.to_string()))
    }

    /// Operator actions, oldest first (the last 500; the event log has all).
    pub fn audit(&self) -> impl Iterator<Item = &AuditEntry> {
        self.audit.iter()
    }

    /// The ledger's charge period still open (closed ones leave as `Effect::Ledger`).
    pub fn open_period(&self) -> &crate::cost::ledger::OpenPeriod {
        &self.period
    }

    /// Hourly spend so far and the day-ahead forecast.
    pub fn spend_forecast(&self) -> &forecast::SpendForecast {
        &self.forecast
    }

    /// A tenant's budget level as of the last event.
    pub fn budget_level_of(&self, tenant: &TenantId) -> crate::cost::budget::BudgetLevel {
        self.budget_level(tenant)
    }

    /// A tenant's standing approval of an overrun, if any.
    pub fn approval(&self, tenant: &TenantId) -> Option<&crate::cost::budget::Approval> {
        self.approvals.get(tenant)
    }

    /// The spot watcher's interruption risk per instance type.
    pub fn hazard(&self) -> &crate::market::hazard::HazardModel {
        &self.hazard
    }

    pub fn books(&self) -> &Books {
        &self.books
    }

    /// Applies one event at time `at` and returns what the outside world must do.
    pub fn apply(&mut self, at: At, event: &Event) -> Vec<Effect> {
        self.stats.events += 1;
        if let Some(now) = self.now
            && at < now
        {
            return self.reject(
                at,
                format!("{} event at {} is earlier than the last one ({}): time went backwards", event.kind(), at, now),
            );
        }
        let closed = self.accrue_until(at);
        self.now = Some(at);
        let mut effects = Vec::new();
        if !closed.is_empty() {
            self.on_periods_closed(at, &closed, &mut effects);
            effects.push(Effect::Ledger { lines: closed });
        }
        let outcome = match event {
            Event::NodeUp { spec } => self.on_node_up(at, spec),
            Event::NodeLost { node, reason } => self.on_node_lost(at, *node, reason, &mut effects),
            Event::TenantDefined { spec } => {
                self.tenants.insert(spec.id.clone(), spec.clone());
                Ok(())
            }
            Event::JobSubmitted { spec } => self.on_submit(at, spec),
            Event::JobStarted { job } => self.on_started(at, *job),
            Event::CheckpointDone { job, step, bytes } => self.on_checkpoint_done(at, *job, *step, *bytes, &mut effects),
            Event::JobStopped { job } => self.on_stopped(at, *job),
            Event::JobExited { job, ok, message } => self.on_exited(at, *job, *ok, message),
            Event::Telemetry { gpus, progress } => self.on_telemetry(at, gpus, progress, &mut effects),
            Event::PriceTick { zone, instance_type, price } => self.on_price(at, zone, instance_type, *price, &mut effects),
            Event::InterruptionNotice { node, deadline } => self.on_notice(at, *node, *deadline, &mut effects),
            Event::Operator { actor, action } => {
                // The operator acts on figures as of now.
                self.settle_all(at);
                self.on_operator(at, actor, action, &mut effects)
            }
            Event::SpotLifetimes { instance_type, lifetimes } => self.on_lifetimes(instance_type, lifetimes),
            Event::JobOutput { job, requests, tokens } => self.on_output(*job, *requests, *tokens),
            Event::GpuHealth { readings } => self.on_gpu_health(readings),
            Event::SourceStatus { source, ok, detail, stale } => self.on_source_status(at, source, *ok, detail, stale, &mut effects),
            Event::Slurm { snapshot } => self.on_slurm_snapshot(at, snapshot, &mut effects),
            Event::SlurmDone { command, ok, message } => self.on_slurm_done(at, *command, *ok, message, &mut effects),
            // Ticks come when the console wants a view: its money is exact.
            Event::Tick => {
                self.settle_all(at);
                Ok(())
            }
        };
        if let Err(reason) = outcome {
            effects.extend(self.reject(at, reason));
        }
        self.checkpoints_due(at, &mut effects);
        if self.budgets_may_move(at) {
            self.settle_all(at);
        }
        self.check_budgets(at, &mut effects);
        self.check_waits(at, &mut effects);
        if self.queue_dirty {
            self.schedule(at, &mut effects);
        }
        effects
    }

    fn reject(&mut self, at: At, reason: String) -> Vec<Effect> {
        self.stats.rejected += 1;
        let reason = clean(&reason);
        self.note(at, Severity::Warn, format!("rejected: {reason}"));
        vec![Effect::Rejected { reason }]
    }

    pub(crate) fn note(&mut self, at: At, severity: Severity, text: String) {
        if self.log.len() >= self.config.log_capacity.max(1) {
            self.log.pop_front();
        }
        self.log.push_back(LogLine { at, severity, text });
    }

    pub(crate) fn raise(&mut self, at: At, id: String, text: String, effects: &mut Vec<Effect>) {
        self.note(at, Severity::Alarm, text.clone());
        let acked = self.alarms.get(&id).and_then(|a| a.acked.clone());
        self.alarms.insert(id.clone(), Alarm { raised_at: at, text: text.clone(), acked });
        effects.push(Effect::AlarmRaised { id, text });
    }

    pub(crate) fn audit_action(&mut self, at: At, actor: &Actor, what: &str) {
        if self.audit.len() >= 500 {
            self.audit.pop_front();
        }
        self.audit.push_back(AuditEntry { at, user: clean(&actor.user), origin: clean(&actor.origin), what: what.to_string() });
    }

    pub(crate) fn clear(&mut self, id: &str, effects: &mut Vec<Effect>) {
        if self.alarms.remove(id).is_some() {
            effects.push(Effect::AlarmCleared { id: id.to_string() });
        }
    }

    pub(crate) fn node_name(&self, id: NodeId) -> String {
        self.nodes.get(&id).map(|n| clean(&n.spec.name)).unwrap_or_else(|| format!("node#{}", id.0))
    }

    // ---- cluster -------------------------------------------------------

    fn on_node_up(&mut self, at: At, spec: &crate::domain::cluster::NodeSpec) -> Result<(), String> {
        if let Some(problem) = spec.problem() {
            return Err(format!("node {}: {problem}", clean(&spec.name)));
        }
        if let Some(existing) = self.nodes.get(&spec.id)
            && existing.is_up()
        {
            return Err(format!("node {} is already up", clean(&existing.spec.name)));
        }
        let relaunch = self.nodes.contains_key(&spec.id);
        if spec.billing == BillingMode::Spot {
            self.market.register(spec.pool(), spec.on_demand_price);
        }
        self.nodes.insert(spec.id, Node::new(spec.clone(), at));
        // A new node costs from now; until the next settle, at most this.
        self.accrued_to.insert(spec.id, at);
        self.burn_bound = MicrosPerHour(self.burn_bound.0.saturating_add(self.rate_bound(spec.id)));
        self.bound_gpus += i64::from(spec.gpu_count);
        let verb = if relaunch { "relaunched" } else { "joined" };
        self.note(
            at,
            Severity::Info,
            format!(
                "{} {verb}: {} {} in {} ({} × {})",
                clean(&spec.name),
                spec.billing.label(),
                clean(&spec.instance_type),
                clean(&spec.zone),
                spec.gpu_count,
                clean(&spec.gpu_model)
            ),
        );
        self.queue_dirty = true;
        Ok(())
    }

    fn on_node_lost(&mut self, at: At, node_id: NodeId, reason: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.nodes.get(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !node.is_up() {
            return Err(format!("node {} is already down", clean(&node.spec.name)));
        }
        let victims: BTreeSet<JobId> = node.gpus.iter().flat_map(|g| g.allocations.iter().map(|a| a.job)).collect();
        let name = self.node_name(node_id);
        if node.spec.billing == BillingMode::Spot {
            let (kind, secs, noticed) = (node.spec.instance_type.clone(), (at - node.up_since).num_seconds(), matches!(node.state, NodeState::Draining { .. }));
            if !noticed {
                self.hazard.record_interruption(&kind, at);
            }
            if let Ok(life) = crate::market::hazard::Lifetime::new(Secs(secs), true) {
                let _ = self.hazard.record_lifetime(&kind, life);
            }
        }
        let pool = self.nodes.get(&node_id).map(|n| n.spec.pool());
        for job_id in victims {
            if let Some(job) = self.jobs.get(&job_id)
                && let JobState::Checkpointing { then: AfterCheckpoint::Stop(StopReason::Interruption) } = job.state
            {
                self.stats.notice_saves_missed += 1;
            }
            let cancelled_by = match self.jobs.get(&job_id).map(|j| &j.state) {
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
        self.settle_node(node_id);
        if let Some(node) = self.nodes.get_mut(&node_id) {
            node.state = NodeState::Down { since: at };
        }
        self.stats.nodes_lost += 1;
        self.clear(&format!("notice:{}", node_id.0), effects);
        self.note(at, Severity::Warn, format!("{name} lost: {}", clean(reason)));
        Ok(())
    }

    fn on_notice(&mut self, at: At, node_id: NodeId, deadline: At, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.nodes.get_mut(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !matches!(node.state, NodeState::Up) {
            return Err(format!("interruption notice for {} which is not up", clean(&node.spec.name)));
        }
        node.state = NodeState::Draining { deadline };
        let jobs: BTreeSet<JobId> = node.gpus.iter().flat_map(|g| g.allocations.iter().map(|a| a.job)).collect();
        self.stats.notices += 1;
        let name = self.node_name(node_id);
        let secs = (deadline - at).num_seconds();
        self.raise(
            at,
            format!("notice:{}", node_id.0),
            format!("spot interruption: {name} reclaimed in {secs}s, saving {} job(s)", jobs.len()),
            effects,
        );
        for job in jobs {
            self.stop_job(job, StopReason::Interruption, true, effects);
        }
        if let Some(kind) = self.nodes.get(&node_id).map(|n| n.spec.instance_type.clone()) {
            self.hazard.record_interruption(&kind, at);
            // The rest of the type's fleet just got riskier: shorter intervals.
            let others = self.spot_jobs(None, Some(&kind));
            self.judge(at, others, effects);
        }
        Ok(())
    }

    // ---- jobs ----------------------------------------------------------

    fn validate(&self, spec: &JobSpec) -> Result<(), String> {
        let name = clean(&spec.name);
        if self.jobs.contains_key(&spec.id) {
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
            && !(1..=crate::domain::units::HORIZON_SECS).contains(&est.0)
        {
            return Err(format!("job {} ({name}) has a run-time estimate of {} s", spec.id, est.0));
        }
        if !self.tenants.contains_key(&spec.tags.tenant) {
            return Err(format!("job {} ({name}) names unknown tenant {:?}", spec.id, clean(&spec.tags.tenant.0)));
        }
        Ok(())
    }

    fn on_submit(&mut self, at: At, spec: &JobSpec) -> Result<(), String> {
        self.validate(spec)?;
        self.jobs.insert(spec.id, Job::new(spec.clone(), at));
        self.active.insert(spec.id);
        self.queued.insert(spec.id);
        self.stats.submitted += 1;
        if !self.queue_dirty && self.arrival_may_start(spec, at) {
            self.queue_dirty = true;
        }
        Ok(())
    }

    fn job_mut(&mut self, id: JobId) -> Result<&mut Job, String> {
        self.jobs.get_mut(&id).ok_or_else(|| format!("unknown job {id}"))
    }

    /// Moves a job to `state`, refusing moves the life cycle does not allow.
    fn transition(&mut self, id: JobId, state: JobState) -> Result<(), String> {
        let job = self.job_mut(id)?;
        let (from, to) = (job.phase(), state.phase());
        if !from.can_become(to) {
            return Err(format!("job {id} cannot go from {} to {}", from.label(), to.label()));
        }
        job.state = state;
        Ok(())
    }

    fn on_started(&mut self, at: At, id: JobId) -> Result<(), String> {
        self.transition(id, JobState::Running)?;
        let job = self.job_mut(id)?;
        job.started_at = Some(at);
        self.rates.entry(id).or_default().reset();
        self.refresh_risk(at, id);
        Ok(())
    }

    fn on_checkpoint_done(&mut self, at: At, id: JobId, step: u64, bytes: u64, effects: &mut Vec<Effect>) -> Result<(), String> {
        let job = self.job_mut(id)?;
        let JobState::Checkpointing { then } = job.state.clone() else {
            return Err(format!("job {id} reported a checkpoint while {}", job.phase().label()));
        };
        if step > job.spec.steps_total || step < job.steps_saved {
            return Err(format!("job {id} reported a checkpoint at step {step}, outside {}..={}", job.steps_saved, job.spec.steps_total));
        }
        job.steps_saved = step;
        if let Some(asked) = job.checkpoint_asked_at.take() {
            let secs = (at - asked).num_milliseconds() as f64 / 1000.0;
            job.checkpoint_secs = Some(job.checkpoint_secs.map_or(secs, |old| 0.5 * old + 0.5 * secs));
        }
        // The checkpoint is evidence of progress that telemetry may not have shown yet.
        job.steps_done = job.steps_done.max(step);
        job.last_checkpoint_at = Some(at);
        job.checkpoints += 1;
        job.checkpoint_bytes += bytes;
        self.stats.checkpoints += 1;
        self.stats.checkpoint_bytes += bytes;
        let io = crate::cost::ledger::per_gib(bytes, self.config.cost.checkpoint_io_per_gib);
        self.charge_service(at, id, crate::cost::ledger::LineKind::CheckpointIo, bytes, io);
        match then {
            AfterCheckpoint::Continue => {
                self.transition(id, JobState::Running)?;
                self.refresh_risk(at, id);
                Ok(())
            }
            AfterCheckpoint::Stop(reason) => {
                if reason == StopReason::Interruption {
                    self.stats.notice_saves_in_time += 1;
                }
                self.transition(id, JobState::Preempted { reason })?;
                effects.push(Effect::StopJob { job: id });
                Ok(())
            }
        }
    }

    fn on_stopped(&mut self, at: At, id: JobId) -> Result<(), String> {
        let job = self.jobs.get(&id).ok_or_else(|| format!("unknown job {id}"))?;
        let JobState::Preempted { reason } = job.state.clone() else {
            return Err(format!("job {id} reported stopped while {}", job.phase().label()));
        };
        let pool = self.job_pool(id).map(|(k, _)| k);
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
        let job = self.jobs.get(&id).ok_or_else(|| format!("unknown job {id}"))?;
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
        if ok && let Some(job) = self.jobs.get_mut(&id) {
            job.steps_done = job.spec.steps_total;
        }
        if ok {
            self.learn_runtime(id);
        }
        self.note(at, severity, format!("{id} {name} {verb}"));
        Ok(())
    }

    pub(crate) fn finish(&mut self, at: At, id: JobId, state: JobState) -> Result<(), String> {
        let done = state.phase() == Phase::Done;
        self.transition(id, state)?;
        let job = self.job_mut(id)?;
        job.finished_at = Some(at);
        let job_submitted = job.submitted_at;
        if job.waited_secs == 0 && job.attempts == 0 {
            job.waited_secs = (at - job.queued_since).num_seconds().max(0);
        }
        let (tenant, cost, requests, tokens) = (job.spec.tags.tenant.clone(), job.cost + job.service_cost, job.requests, job.tokens);
        let class = job.spec.class;
        self.books.record_done_output(&tenant, cost, requests, tokens);
        self.active.remove(&id);
        self.queued.remove(&id);
        self.holding.remove(&id);
        self.rates.remove(&id);
        // The effect of a clear is not needed: the alarm list is the state.
        let mut cleared = Vec::new();
        self.wait_group_left(at, &tenant, class, &mut cleared);
        if done {
            self.stats.done += 1;
            self.stats.jct_secs_sum += (at - job_submitted).num_seconds().max(0);
        } else {
            self.stats.failed += 1;
        }
        Ok(())
    }

    /// Frees the job's GPUs (no state change).
    fn release(&mut self, id: JobId) {
        if let Some(node) = self.jobs.get(&id).and_then(|j| j.placement.as_ref()).map(|p| p.node) {
            self.settle_node(node);
        }
        let Some(job) = self.jobs.get_mut(&id) else { return };
        self.holding.remove(&id);
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
        self.queue_dirty = true;
    }

    /// Back to the queue, resuming from the last checkpoint; what was computed
    /// since then is counted as lost (recompute).
    fn requeue_from_checkpoint(&mut self, at: At, id: JobId) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        if job.phase().is_terminal() {
            return;
        }
        let lost = job.steps_done.saturating_sub(job.steps_saved);
        job.lost_steps += lost;
        job.steps_done = job.steps_saved;
        job.state = JobState::Queued;
        job.placement = None;
        job.queued_since = at;
        job.started_at = None;
        job.placed_at = None;
        job.requeues += 1;
        self.queued.insert(id);
        self.stats.lost_steps += lost;
        self.stats.requeues += 1;
        self.rates.remove(&id);
        self.queue_dirty = true;
    }

    /// Asks a running job to stop: with a save first where `save` and possible.
    pub(crate) fn stop_job(&mut self, id: JobId, reason: StopReason, save: bool, effects: &mut Vec<Effect>) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        match (&mut job.state, save) {
            (JobState::Running, true) => {
                job.state = JobState::Checkpointing { then: AfterCheckpoint::Stop(reason) };
                job.checkpoint_asked_at = self.now;
                let kind = self.config.checkpoint.kind(u64::from(job.checkpoints));
                effects.push(Effect::Checkpoint { job: id, kind });
            }
            (JobState::Checkpointing { then }, true) => *then = AfterCheckpoint::Stop(reason),
            (JobState::Running | JobState::Checkpointing { .. } | JobState::Placed, _) => {
                job.state = JobState::Preempted { reason };
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

    fn on_telemetry(&mut self, at: At, gpus: &[GpuSample], progress: &[(JobId, u64)], effects: &mut Vec<Effect>) -> Result<(), String> {
        let mut unknown = 0usize;
        let mut seen = Vec::with_capacity(gpus.len());
        for GpuSample(gpu_ref, util, mem) in gpus {
            let gpu = self.nodes.get_mut(&gpu_ref.node).and_then(|n| n.gpus.get_mut(usize::from(gpu_ref.index)));
            match gpu {
                Some(gpu) if util.is_finite() => {
                    let util = util.clamp(0.0, 100.0);
                    gpu.util = Some(util);
                    gpu.mem_used = Some((*mem).min(gpu.memory));
                    gpu.sampled_at = Some(at);
                    gpu.stale = false;
                    seen.push((*gpu_ref, util));
                }
                _ => unknown += 1,
            }
        }
        for (gpu_ref, util) in seen {
            self.track_idle(at, gpu_ref, util, effects);
        }
        for (id, steps) in progress {
            let Some(job) = self.jobs.get_mut(id) else {
                unknown += 1;
                continue;
            };
            if matches!(job.phase(), Phase::Running | Phase::Checkpointing) {
                let steps = (*steps).min(job.spec.steps_total);
                if steps >= job.steps_done {
                    job.steps_done = steps;
                    self.rates.entry(*id).or_default().observe(at, steps);
                }
            }
        }
        let on_spot: Vec<JobId> = progress
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| self.job_pool(*id).is_some_and(|(_, mode)| mode == BillingMode::Spot))
            .collect();
        self.judge(at, on_spot, effects);
        if unknown > 0 {
            return Err(format!("telemetry named {unknown} unknown GPU(s) or job(s), or carried a non-finite value"));
        }
        Ok(())
    }

    /// Output counters only grow; a smaller one (a restarted exporter) is kept as the floor.
    fn on_output(&mut self, id: JobId, requests: u64, tokens: u64) -> Result<(), String> {
        let job = self.job_mut(id)?;
        job.requests = job.requests.max(requests);
        job.tokens = job.tokens.max(tokens);
        Ok(())
    }

    fn on_price(&mut self, at: At, zone: &str, instance_type: &str, price: MicrosPerHour, effects: &mut Vec<Effect>) -> Result<(), String> {
        let key = crate::domain::ids::PoolKey { zone: zone.to_string(), instance_type: instance_type.to_string() };
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
            self.note(at, Severity::Info, format!("spot {} {before} → {price}", clean(&key.to_string())));
        }
        let jobs = self.spot_jobs(Some(&key), None);
        self.judge(at, jobs, effects);
        Ok(())
    }
}
