//! Elastic capacity as the room runs it: the pools it may buy from, the
//! nodes it bought, launches on their way, pools left alone after a failed
//! spot launch, and (advisory mode) the decisions waiting for an operator.
//! Once a `plan_every` it gathers what the capacity policy (`capacity/`)
//! needs — the work no node can take, each pool's price with spot's risk
//! priced in (`cost::mix`), capacity on its way — and carries the answer
//! out: `Effect::Launch`, `Effect::Release`, and consolidation moves.
//!
//! Owns `CapacityState`; `Elastic` borrows the parts a plan reads and writes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::budget::Budgets;
use super::config::RoomConfig;
use super::cost::Costs;
use super::fleet::Fleet;
use super::journal::{Journal, Severity};
use super::predict::Predictor;
use super::sched::SchedState;
use super::trips::{Trips, Tripwires};
use crate::capacity::CapacityMode;
use crate::capacity::consolidate::{self, MoveCase};
use crate::capacity::plan::{self, Incoming, Offer, Waiting};
use crate::capacity::release::{self, NodeNow};
use crate::cost::budget::AtLimit;
use crate::cost::mix::{SpotRisk, effective_spot};
use crate::domain::capacity::{LaunchFailure, LaunchRequest, PoolSpec};
use crate::domain::cluster::{BillingMode, Node, NodeSpec, NodeState};
use crate::domain::event::Effect;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::{Job, Phase, PoolPreference, PoolTarget, SchedStop, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::market::Market;
use crate::market::bid::{BidInput, Verdict};
use crate::market::hazard::HazardModel;
use crate::sched::backfill;
use crate::sched::placement;
use crate::sched::quota::{self, Admission};

/// A launch the world has not answered in this long is taken as failed (a
/// launcher that died, an answer lost): its capacity stops counting as
/// incoming, so the work it was for is bought elsewhere.
const LAUNCH_ANSWER_TIMEOUT: Secs = Secs(600);

/// The CUDA context a moved job pays again where it lands (SPEC §2: 3–5 s).
const CUDA_INIT_SECS: f64 = 5.0;

/// A launch on its way: asked for, and how many of its instances the world
/// has not answered yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    pub request: LaunchRequest,
    pub asked_at: At,
    pub unanswered: u32,
    /// Nodes of it that exist (booting or up).
    pub nodes: BTreeSet<NodeId>,
}

/// A decision waiting for an operator (advisory mode).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Proposal {
    Launch { request: LaunchRequest },
    Release { node: NodeId, reason: String },
}

/// Counters for the summary and the experiment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityStats {
    pub launch_requests: u64,
    pub nodes_launched: u64,
    pub launch_failures: u64,
    pub releases: u64,
    pub consolidations: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityState {
    #[serde(with = "crate::domain::serde_pairs")]
    pub pools: BTreeMap<PoolTarget, PoolSpec>,
    /// Nodes the room bought: only those are ever given back.
    pub elastic: BTreeSet<NodeId>,
    /// Of them, the on-demand ones.
    #[serde(default)]
    pub on_demand: BTreeSet<NodeId>,
    pub launches: BTreeMap<u64, LaunchRecord>,
    pub next_request: u64,
    /// Pools left alone after a failed launch, until then.
    #[serde(with = "crate::domain::serde_pairs")]
    pub backoff: BTreeMap<PoolTarget, At>,
    /// Since when each elastic node has held no job.
    pub empty_since: BTreeMap<NodeId, At>,
    /// Releases asked for and not yet answered, with why.
    pub releasing: BTreeMap<NodeId, String>,
    /// Nodes emptied by consolidation, released once their jobs are off.
    pub retiring: BTreeMap<NodeId, String>,
    pub planned_at: Option<At>,
    /// Advisory mode: what the last plan proposed, by id.
    pub proposals: BTreeMap<u64, (At, Proposal)>,
    pub next_proposal: u64,
    /// Elastic nodes gone (given back or lost), kept until their last
    /// charge period has closed, then dropped from the fleet.
    pub gone: BTreeMap<NodeId, At>,
    pub stats: CapacityStats,
}

impl CapacityState {
    pub fn on_pool_defined(&mut self, pool: &PoolSpec, journal: &mut Journal, at: At) -> Result<(), String> {
        let target = pool.target();
        if let Some(problem) = pool.problem() {
            return Err(format!("pool {}: {problem}", clean(&target.to_string())));
        }
        let text =
            format!("pool {}: up to {} × {} GPUs, {} warm, boot {}", clean(&target.to_string()), pool.max_nodes, pool.node.gpu_count, pool.warm_min, pool.boot);
        journal.note(at, Severity::Info, text);
        self.pools.insert(target, pool.clone());
        Ok(())
    }

    /// Capacity the room asked for and does not have yet, per pool: nodes
    /// booting and instances not yet answered.
    fn pending_in(&self, pool: &PoolTarget) -> u32 {
        self.launches.values().filter(|r| r.request.pool == *pool).map(|r| r.unanswered).sum()
    }

    /// The launch a job is waiting on, if one was bought for it.
    pub fn launch_for(&self, job: JobId) -> Option<&LaunchRecord> {
        self.launches.values().find(|r| r.request.for_jobs.contains(&job))
    }

    /// An elastic node was lost (a spot interruption): it is no longer the room's to give back.
    pub fn forget(&mut self, node: NodeId, at: At) {
        if self.elastic.remove(&node) {
            self.gone.insert(node, at);
        }
        self.on_demand.remove(&node);
        self.empty_since.remove(&node);
        self.releasing.remove(&node);
        self.retiring.remove(&node);
        for record in self.launches.values_mut() {
            record.nodes.remove(&node);
        }
        self.launches.retain(|_, r| r.unanswered > 0 || !r.nodes.is_empty());
    }

    /// Gone nodes whose every charge closed before `period_start`: drop them
    /// (an elastic fleet would otherwise keep every node it ever had).
    pub fn prune(&mut self, period_start: At, fleet: &mut Fleet, costs: &mut Costs) {
        let old: Vec<NodeId> = self.gone.iter().filter(|(_, at)| **at < period_start).map(|(id, _)| *id).collect();
        for id in old {
            self.gone.remove(&id);
            fleet.nodes.remove(&id);
            costs.accruals.remove(&id);
            costs.accrued_to.remove(&id);
        }
    }

    /// The on-demand nodes the room bought, and the spot pools open now
    /// (not left alone after a failure, priced under on-demand).
    pub fn costly(&self, market: &Market, now: At) -> super::sched::Costly {
        if self.pools.is_empty() {
            return super::sched::Costly::default();
        }
        let open = |target: &PoolTarget| self.backoff.get(target).is_none_or(|until| *until <= now);
        let buyable: Vec<NodeSpec> = self.pools.iter().filter(|(target, _)| open(target)).map(|(_, pool)| pool.node.clone()).collect();
        let open_spot: Vec<NodeSpec> = self
            .pools
            .iter()
            .filter(|(target, _)| target.billing == BillingMode::Spot && self.backoff.get(*target).is_none_or(|until| *until <= now))
            .filter(|(_, pool)| market.price(&pool.node.pool()).is_some_and(|p| p < pool.node.on_demand_price))
            .map(|(_, pool)| pool.node.clone())
            .collect();
        if open_spot.is_empty() {
            return super::sched::Costly { buyable, ..Default::default() };
        }
        let nodes: BTreeSet<NodeId> = self.elastic.iter().copied().filter(|id| self.on_demand.contains(id)).collect();
        super::sched::Costly { nodes, open_spot, buyable }
    }

    /// Whether every spot pool is left alone for now (a spot-only job then waits for capacity).
    pub fn spot_unavailable(&self, now: At) -> bool {
        let spot: Vec<&PoolTarget> = self.pools.keys().filter(|p| p.billing == BillingMode::Spot).collect();
        !spot.is_empty() && spot.iter().all(|p| self.backoff.get(*p).is_some_and(|until| *until > now))
    }
}

/// The parts a capacity step reads and writes.
pub struct Elastic<'a> {
    pub config: &'a RoomConfig,
    pub now: At,
    pub state: &'a mut CapacityState,
    pub fleet: &'a mut Fleet,
    pub costs: &'a mut Costs,
    pub market: &'a Market,
    pub hazard: &'a HazardModel,
    pub budgets: &'a Budgets,
    pub predictor: &'a Predictor,
    pub journal: &'a mut Journal,
    pub trips: &'a mut Trips,
    pub sched: &'a mut SchedState,
}

impl Elastic<'_> {
    fn tripwires(&mut self) -> Tripwires<'_> {
        Tripwires { rules: &self.config.alarms, trips: self.trips, journal: self.journal }
    }

    // ---- outcomes from the world --------------------------------------

    /// One instance of a launch exists: it joins the fleet, booting and billed.
    pub fn on_launched(&mut self, request: u64, spec: &NodeSpec) -> Result<(), String> {
        let at = self.now;
        let record = self.state.launches.get_mut(&request).ok_or_else(|| format!("launched: no launch #{request} is on its way"))?;
        if !record.request.pool.holds(spec) {
            return Err(format!(
                "launch #{request} was for {}, not {} {} {}",
                record.request.pool,
                spec.billing.label(),
                clean(&spec.instance_type),
                clean(&spec.zone)
            ));
        }
        if let Some(problem) = spec.problem() {
            return Err(format!("node {}: {problem}", clean(&spec.name)));
        }
        if self.fleet.nodes.get(&spec.id).is_some_and(Node::is_up) {
            return Err(format!("launched node {} is already in the fleet", clean(&spec.name)));
        }
        record.unanswered = record.unanswered.saturating_sub(1);
        record.nodes.insert(spec.id);
        let pool = record.request.pool.clone();
        let boot = self.state.pools.get(&pool).map_or(Secs(0), |p| p.boot);
        self.tripwires().launch_answered(at, &pool.to_string(), &mut Vec::new());
        let mut node = Node::new(spec.clone(), at);
        node.state = NodeState::Booting { ready_at: at + boot.delta() };
        self.fleet.nodes.insert(spec.id, node);
        self.costs.node_up(at, self.fleet, self.market, spec.id, spec.gpu_count);
        self.state.elastic.insert(spec.id);
        if spec.billing == BillingMode::OnDemand {
            self.state.on_demand.insert(spec.id);
        }
        self.state.stats.nodes_launched += 1;
        let text = format!("{} launched: {} {} in {}, booting", clean(&spec.name), spec.billing.label(), clean(&spec.instance_type), clean(&spec.zone));
        self.journal.note(at, Severity::Info, text);
        Ok(())
    }

    pub fn on_launch_failed(&mut self, request: u64, count: u32, failure: LaunchFailure, message: &str) -> Result<(), String> {
        let at = self.now;
        let record = self.state.launches.get_mut(&request).ok_or_else(|| format!("launch failed: no launch #{request} is on its way"))?;
        record.unanswered = record.unanswered.saturating_sub(count.max(1));
        let pool = record.request.pool.clone();
        self.state.stats.launch_failures += 1;
        if failure.backs_off() {
            let until = at + self.config.capacity.spot_backoff.delta();
            self.state.backoff.insert(pool.clone(), until);
        }
        let text = format!("launch of {count} × {pool} failed: {} ({}); trying elsewhere", failure.label(), clean(message));
        self.journal.note(at, Severity::Warn, text);
        // The alarm list is the state; nobody waits on this effect.
        self.tripwires().launch_refused(at, &pool.to_string(), failure.label(), &mut Vec::new());
        // Plan again at once: another zone, or on-demand.
        self.state.planned_at = None;
        self.drop_answered();
        Ok(())
    }

    /// The instance the room gave back is gone.
    pub fn on_released(&mut self, node_id: NodeId) -> Result<(), String> {
        let at = self.now;
        let node = self.fleet.nodes.get(&node_id).ok_or_else(|| format!("released: unknown node #{}", node_id.0))?;
        if !node.is_up() {
            return Err(format!("released: node {} is already down", clean(&node.spec.name)));
        }
        if !super::life::jobs_on(node).is_empty() {
            return Err(format!("released: node {} still holds jobs", clean(&node.spec.name)));
        }
        let name = self.fleet.node_name(node_id);
        self.costs.settle_node(Some(at), self.fleet, self.market, node_id);
        if let Some(node) = self.fleet.nodes.get_mut(&node_id) {
            node.state = NodeState::Down { since: at };
        }
        let why = self.state.releasing.remove(&node_id).unwrap_or_else(|| "released".into());
        self.state.elastic.remove(&node_id);
        self.state.on_demand.remove(&node_id);
        self.state.empty_since.remove(&node_id);
        self.state.retiring.remove(&node_id);
        self.state.gone.insert(node_id, at);
        self.state.stats.releases += 1;
        self.journal.note(at, Severity::Info, format!("{name} given back ({why})"));
        Ok(())
    }

    /// The world could not give the node back: it takes work again, and is
    /// given back after another idle period if still idle.
    pub fn on_release_failed(&mut self, node_id: NodeId, message: &str) -> Result<(), String> {
        let at = self.now;
        let Some(why) = self.state.releasing.remove(&node_id) else {
            return Err(format!("release failed: node #{} was not being given back", node_id.0));
        };
        if let Some(node) = self.fleet.nodes.get_mut(&node_id)
            && matches!(node.state, NodeState::Retiring { .. })
        {
            node.state = NodeState::Up;
        }
        self.state.retiring.remove(&node_id);
        self.state.empty_since.insert(node_id, at);
        self.sched.queue_dirty = true;
        let name = self.fleet.node_name(node_id);
        self.journal.note(at, Severity::Warn, format!("could not give back {name} ({why}): {}; it stays and takes work", clean(message)));
        Ok(())
    }

    /// A booting node is ready: the launch it came from is done with it.
    pub fn on_ready(&mut self, node: NodeId) {
        for record in self.state.launches.values_mut() {
            record.nodes.remove(&node);
        }
        self.drop_answered();
    }

    fn drop_answered(&mut self) {
        self.state.launches.retain(|_, r| r.unanswered > 0 || !r.nodes.is_empty());
    }

    // ---- the plan -----------------------------------------------------

    /// Runs the plan if it is due; returns the effects.
    pub fn step(&mut self, effects: &mut Vec<Effect>) {
        let config: &RoomConfig = self.config;
        let cfg = &config.capacity;
        if cfg.mode == CapacityMode::Off || self.state.pools.is_empty() {
            return;
        }
        if self.state.planned_at.is_some_and(|last| self.now - last < cfg.plan_every.delta()) {
            return;
        }
        self.state.planned_at = Some(self.now);
        self.state.backoff.retain(|_, until| *until > self.now);
        self.give_up_unanswered();
        self.track_empty();
        let launches = self.scale_up();
        let buying: Vec<PoolTarget> = launches.iter().map(|l| l.pool.clone()).collect();
        let releases = self.scale_down(&buying);
        match cfg.mode {
            CapacityMode::Control => {
                for request in launches {
                    self.launch(request, effects);
                }
                for (node, reason) in releases {
                    self.release(node, reason, effects);
                }
                if cfg.consolidate {
                    self.consolidate(effects);
                }
                self.release_retired(effects);
            }
            CapacityMode::Advisory => self.propose(launches, releases),
            CapacityMode::Off => {}
        }
    }

    fn give_up_unanswered(&mut self) {
        let now = self.now;
        let until = now + self.config.capacity.spot_backoff.delta();
        let mut lost = Vec::new();
        for record in self.state.launches.values_mut() {
            if record.unanswered > 0 && now - record.asked_at > LAUNCH_ANSWER_TIMEOUT.delta() {
                lost.push((record.request.id, record.unanswered, record.request.pool.clone()));
                record.unanswered = 0;
            }
        }
        for (id, count, pool) in lost {
            self.state.stats.launch_failures += 1;
            self.state.backoff.insert(pool.clone(), until);
            let text = format!("launch #{id} of {count} × {pool}: no answer in {LAUNCH_ANSWER_TIMEOUT}; counted as failed, buying elsewhere");
            self.journal.note(now, Severity::Warn, text);
            self.tripwires().launch_refused(now, &pool.to_string(), &format!("no answer in {LAUNCH_ANSWER_TIMEOUT}"), &mut Vec::new());
        }
        self.drop_answered();
    }

    fn track_empty(&mut self) {
        let now = self.now;
        for id in &self.state.elastic {
            let Some(node) = self.fleet.nodes.get(id) else { continue };
            let empty = node.gpus.iter().all(|g| g.allocations.is_empty());
            match (empty && node.accepts_work(), self.state.empty_since.contains_key(id)) {
                (true, false) => {
                    self.state.empty_since.insert(*id, now);
                }
                (false, true) => {
                    self.state.empty_since.remove(id);
                }
                _ => {}
            }
        }
    }

    /// What one node-hour of a pool costs now, spot's risk priced in; `None`
    /// when spot cannot be bought at a price under on-demand.
    fn effective_per_hour(&self, pool: &PoolSpec) -> Option<f64> {
        let node = &pool.node;
        if node.billing != BillingMode::Spot {
            return Some(node.contract_price.0 as f64 / 1e6);
        }
        let market = self.market.price(&node.pool())?;
        if market >= node.on_demand_price {
            return None;
        }
        let at_risk = self.fleet.spot_at_risk(&node.instance_type).max(1);
        let p = self.hazard.p_next_minute(&node.instance_type, self.now, Secs(0), at_risk).clamp(0.0, 0.999_999);
        let per_hour = -60.0 * (1.0 - p).ln();
        let policy = &self.config.checkpoint;
        let interval = policy.spot_interval(p, None, self.journal.stats.notice_miss_share(), None).secs;
        let save_hours = policy.default_cost.0 as f64 / 3600.0;
        let restart_hours = pool.boot.0 as f64 / 3600.0;
        let risk = SpotRisk::from_checkpoints(per_hour, (interval.0.max(1)) as f64 / 3600.0, save_hours, restart_hours).ok()?;
        effective_spot(market.0 as f64 / 1e6, &risk).ok()
    }

    /// Where a queued job may run: its preference, its escalation, its budget.
    fn allowed(&self, job: &Job) -> (bool, bool) {
        let tenant = &job.spec.tags.tenant;
        let at_limit = self.config.cost.budget.at_limit;
        let anywhere = self.budgets.allows(at_limit, tenant, false);
        let spot_budget = self.budgets.allows(at_limit, tenant, true) || (at_limit == AtLimit::Spot && anywhere);
        let (pref_od, pref_spot) = match job.spec.pool {
            PoolPreference::Any => (true, true),
            PoolPreference::NoSpot => (true, false),
            PoolPreference::SpotOnly => (job.escalated, true),
        };
        (pref_od && anywhere, pref_spot && spot_budget)
    }

    fn scale_up(&self) -> Vec<LaunchRequest> {
        let now = self.now;
        let cfg = &self.config.capacity;
        let (_, held) = self.fleet.holdings();
        let ends = self.fleet.predicted_ends(now);
        // Where spot-tolerant work may start: not on the on-demand nodes it keeps off.
        let costly = self.state.costly(self.market, now);
        let cheap_nodes: BTreeMap<NodeId, Node> =
            self.fleet.nodes.iter().filter(|(id, _)| !costly.nodes.contains(id)).map(|(id, n)| (*id, n.clone())).collect();
        let order: Vec<JobId> = self.fleet.ordered_queue(&self.config.sched, now).iter().take(cfg.lookahead_jobs).map(|j| j.spec.id).collect();
        let mut waiting = Vec::new();
        for id in order {
            let Some(job) = self.fleet.jobs.get(&id) else { continue };
            let tenant = &job.spec.tags.tenant;
            // Capacity is bought for work within its tenant's quota and
            // borrowing limit; beyond that the job waits for its tenant's own work to end.
            if quota::admit(&job.spec, held.get(tenant).copied().unwrap_or_default(), self.fleet.tenants.get(tenant)) == Admission::Refused {
                continue;
            }
            let (on_demand, spot) = self.allowed(job);
            if !on_demand && !spot {
                continue;
            }
            let nodes = if costly.keeps_off(job) { &cheap_nodes } else { &self.fleet.nodes };
            let starts_by = backfill::reserve(nodes, &job.spec, job.escalated, &ends, now).map(|r| r.at);
            waiting.push(Waiting {
                job: id,
                gpus: job.spec.gpus,
                gpu_mem: job.spec.gpu_mem,
                cpus: job.spec.cpus,
                host_mem: job.spec.host_mem,
                on_demand,
                spot,
                starts_by,
                only: job.target.as_deref().cloned(),
                models: job.spec.gpu_models.clone(),
            });
        }
        if waiting.is_empty() {
            return Vec::new();
        }
        let mut incoming = Vec::new();
        let mut fleet = plan::FleetGpus::default();
        for node in self.fleet.nodes.values().filter(|n| n.is_up() && !matches!(n.state, NodeState::Retiring { .. })) {
            let gpus = u32::from(node.spec.gpu_count);
            fleet.total += gpus;
            if node.spec.billing != BillingMode::Spot {
                fleet.stable += gpus;
            }
            if self.state.elastic.contains(&node.spec.id) {
                fleet.elastic += gpus;
            }
            if matches!(node.state, NodeState::Booting { .. }) {
                incoming.push(
                    Incoming::new(PoolTarget::of(&node.spec), gpus, node.spec.gpu_memory, node.spec.cpus, node.spec.host_memory).of_model(&node.spec.gpu_model),
                );
            }
        }
        let mut offers = Vec::new();
        for (target, pool) in &self.state.pools {
            let pending = self.state.pending_in(target);
            for _ in 0..pending {
                let n = &pool.node;
                incoming.push(Incoming::new(target.clone(), pool.gpus(), n.gpu_memory, n.cpus, n.host_memory).of_model(&n.gpu_model));
            }
            let gpus = pending * pool.gpus();
            fleet.total += gpus;
            fleet.elastic += gpus;
            if target.billing != BillingMode::Spot {
                fleet.stable += gpus;
            }
            let nodes =
                self.fleet.nodes.values().filter(|n| self.state.elastic.contains(&n.spec.id) && n.is_up() && target.holds(&n.spec)).count() as u32 + pending;
            let price = self.effective_per_hour(pool);
            let open = price.is_some() && !self.state.backoff.contains_key(target);
            offers.push(Offer { pool, nodes, effective_per_hour: price.unwrap_or(f64::INFINITY), open });
        }
        let planned = plan::scale_up(now, cfg, &offers, &waiting, &incoming, fleet);
        // One request per pool: the nodes and the jobs they are for.
        let mut by_pool: BTreeMap<PoolTarget, (u32, Vec<JobId>)> = BTreeMap::new();
        for p in planned {
            let entry = by_pool.entry(p.pool).or_default();
            entry.0 += 1;
            entry.1.extend(p.for_jobs);
        }
        let mut requests = Vec::new();
        for (pool, (count, for_jobs)) in by_pool {
            let max_price = self.max_price(&pool, &for_jobs);
            if pool.billing == BillingMode::Spot && max_price.is_none() {
                continue;
            }
            let reason = self.reason(&for_jobs);
            requests.push(LaunchRequest { id: 0, pool, count, max_price, for_jobs, reason });
        }
        requests
    }

    /// A spot launch carries the max price the bid curve gives the most
    /// advanced of its jobs (their loss costs most); `None` when the curve
    /// says spot is not worth it now.
    fn max_price(&self, pool: &PoolTarget, jobs: &[JobId]) -> Option<MicrosPerHour> {
        if pool.billing != BillingMode::Spot {
            return None;
        }
        let spec = &self.state.pools.get(pool)?.node;
        let market = self.market.price(&spec.pool())?;
        let progress =
            jobs.iter().filter_map(|id| self.fleet.jobs.get(id)).map(|j| j.steps_saved as f64 / j.spec.steps_total.max(1) as f64).fold(0.0, f64::max);
        let remaining = jobs.iter().filter_map(|id| self.predictor.remaining(self.fleet, *id)).next();
        let input = BidInput { base: market, market, on_demand: spec.on_demand_price, progress, remaining };
        let bid = self.config.bids.bid(&input, self.config.degraded_bids);
        (bid.verdict == Verdict::Stay).then_some(bid.cap)
    }

    /// "for j265 (waited 12m)" or "for 3 jobs, oldest j265 waited 12m".
    fn reason(&self, jobs: &[JobId]) -> String {
        let oldest = jobs.iter().filter_map(|id| self.fleet.jobs.get(id)).max_by_key(|j| (j.wait_secs(self.now), std::cmp::Reverse(j.spec.id)));
        match (jobs.len(), oldest) {
            (1, Some(j)) => format!("for {} (waited {})", j.spec.id, Secs(j.wait_secs(self.now))),
            (n, Some(j)) => format!("for {n} jobs, oldest {} waited {}", j.spec.id, Secs(j.wait_secs(self.now))),
            _ => "for waiting work".into(),
        }
    }

    fn scale_down(&self, buying: &[PoolTarget]) -> Vec<(NodeId, String)> {
        let nodes: Vec<NodeNow> = self
            .state
            .elastic
            .iter()
            .filter_map(|id| self.fleet.nodes.get(id))
            .filter(|n| !self.state.releasing.contains_key(&n.spec.id))
            .map(|n| NodeNow {
                id: n.spec.id,
                pool: PoolTarget::of(&n.spec),
                elastic: true,
                takes_work: n.accepts_work(),
                idle_since: self.state.empty_since.get(&n.spec.id).copied(),
            })
            .collect();
        let pools: Vec<PoolSpec> = self.state.pools.values().cloned().collect();
        release::scale_down(self.now, &self.config.capacity, &nodes, &pools, buying).into_iter().map(|(id, idle)| (id, format!("idle {idle}"))).collect()
    }

    fn launch(&mut self, mut request: LaunchRequest, effects: &mut Vec<Effect>) {
        self.state.next_request += 1;
        request.id = self.state.next_request;
        let price = request.max_price.map(|p| format!(", max {p}")).unwrap_or_default();
        let text = format!("launching {} × {}{price} {}", request.count, request.pool, request.reason);
        self.journal.note(self.now, Severity::Action, text);
        self.state.stats.launch_requests += 1;
        let record = LaunchRecord { request: request.clone(), asked_at: self.now, unanswered: request.count, nodes: BTreeSet::new() };
        self.state.launches.insert(request.id, record);
        effects.push(Effect::Launch { request });
    }

    /// Stops placing on the node and asks the world to give it back.
    fn release(&mut self, node_id: NodeId, reason: String, effects: &mut Vec<Effect>) {
        let Some(node) = self.fleet.nodes.get_mut(&node_id) else { return };
        node.state = NodeState::Retiring { since: self.now };
        let name = clean(&node.spec.name);
        self.journal.note(self.now, Severity::Action, format!("giving back {name} ({reason})"));
        self.state.releasing.insert(node_id, reason.clone());
        effects.push(Effect::Release { node: node_id, reason });
    }

    fn propose(&mut self, launches: Vec<LaunchRequest>, releases: Vec<(NodeId, String)>) {
        let mut fresh: Vec<Proposal> = launches.into_iter().map(|request| Proposal::Launch { request }).collect();
        fresh.extend(releases.into_iter().map(|(node, reason)| Proposal::Release { node, reason }));
        // A standing proposal for the same pool or node keeps its number (an
        // operator may be about to approve it); the others are withdrawn.
        let same = |a: &Proposal, b: &Proposal| match (a, b) {
            (Proposal::Launch { request: x }, Proposal::Launch { request: y }) => x.pool == y.pool,
            (Proposal::Release { node: x, .. }, Proposal::Release { node: y, .. }) => x == y,
            _ => false,
        };
        let mut kept = BTreeMap::new();
        for proposal in fresh {
            let old = self.state.proposals.iter().find(|(_, (_, p))| same(p, &proposal)).map(|(id, (since, _))| (*id, *since));
            let (id, since) = match old {
                Some(found) => found,
                None => {
                    self.state.next_proposal += 1;
                    let text = format!("would {}", describe(&proposal, self.fleet));
                    self.journal.note(self.now, Severity::Info, text);
                    (self.state.next_proposal, self.now)
                }
            };
            kept.insert(id, (since, proposal));
        }
        self.state.proposals = kept;
    }

    /// An operator approved proposal `id`: carry it out now.
    pub fn approve(&mut self, id: u64, effects: &mut Vec<Effect>) -> Result<String, String> {
        let (_, proposal) = self.state.proposals.remove(&id).ok_or_else(|| format!("no capacity proposal #{id} stands (the plan changed?)"))?;
        let text = describe(&proposal, self.fleet);
        match proposal {
            Proposal::Launch { request } => self.launch(request, effects),
            Proposal::Release { node, reason } => {
                if !self.fleet.nodes.get(&node).is_some_and(|n| n.accepts_work() && super::life::jobs_on(n).is_empty()) {
                    return Err(format!("{} is no longer idle; not given back", self.fleet.node_name(node)));
                }
                self.release(node, reason, effects);
            }
        }
        Ok(text)
    }

    // ---- consolidation ------------------------------------------------

    /// A mostly idle elastic node whose few jobs fit elsewhere now: when
    /// moving them saves more than it costs, stop placing there, save and
    /// move them; the node goes once it is empty.
    fn consolidate(&mut self, effects: &mut Vec<Effect>) {
        if !self.state.retiring.is_empty() || self.fleet.scheduler_stop_pending() {
            return;
        }
        let opts = super::sched::place_options(&self.config.sched);
        let mut best: Option<(NodeId, Vec<JobId>, f64)> = None;
        for id in &self.state.elastic {
            let Some(node) = self.fleet.nodes.get(id).filter(|n| n.accepts_work()) else { continue };
            let jobs: Vec<JobId> = super::life::jobs_on(node).into_iter().collect();
            let used: u32 = jobs.iter().filter_map(|j| self.fleet.jobs.get(j)).map(|j| u32::from(j.spec.gpus)).sum();
            if jobs.is_empty() || used * 4 > u32::from(node.spec.gpu_count) {
                continue;
            }
            if !jobs.iter().all(|j| self.fleet.jobs.get(j).is_some_and(|j| j.phase() == Phase::Running)) {
                continue;
            }
            let Some(node_per_hour) = super::cost::node_rate(self.market, node).map(|r| r.0 as f64 / 1e6) else { continue };
            let mut saving = 0.0;
            let mut worth = true;
            for job_id in &jobs {
                let Some(job) = self.fleet.jobs.get(job_id) else { continue };
                let elsewhere = |n: &Node| n.spec.id != *id && n.spec.billing == node.spec.billing;
                let Some(plan) = placement::place_where(&self.fleet.nodes, &job.spec, job.escalated, &opts, elsewhere) else {
                    worth = false;
                    break;
                };
                let target_per_hour = self
                    .fleet
                    .nodes
                    .get(&plan.node)
                    .and_then(|n| super::cost::node_rate(self.market, n))
                    .map_or(0.0, |r| r.0 as f64 / 1e6 * f64::from(job.spec.gpus) / f64::from(node.spec.gpu_count.max(1)));
                let save = job.checkpoint_secs.unwrap_or(self.config.checkpoint.default_cost.0 as f64);
                let remaining = self.predictor.remaining(self.fleet, *job_id).map_or(f64::NAN, |(mean, _)| mean / 3600.0);
                let case = MoveCase { node_per_hour, remaining_hours: remaining.min(1.0), move_secs: 2.0 * save + CUDA_INIT_SECS, target_per_hour };
                if !consolidate::worth_moving(&case) {
                    worth = false;
                    break;
                }
                saving += consolidate::saving_and_cost(&case).0;
            }
            if worth && best.as_ref().is_none_or(|(_, _, s)| saving > *s) {
                best = Some((*id, jobs, saving));
            }
        }
        let Some((node_id, jobs, saving)) = best else { return };
        let Some(node) = self.fleet.nodes.get_mut(&node_id) else { return };
        node.state = NodeState::Retiring { since: self.now };
        let name = clean(&node.spec.name);
        let moved: Vec<String> = jobs.iter().map(|j| j.to_string()).collect();
        let reason = format!("consolidated: {} moved off, saving ~${saving:.2}", moved.join(", "));
        self.journal.note(self.now, Severity::Action, format!("consolidating {name}: saving and moving {} (~${saving:.2} saved)", moved.join(", ")));
        for job in jobs {
            let why = StopReason::Scheduler(SchedStop::Consolidate { node: node_id });
            self.fleet.stop_job(Some(self.now), &self.config.checkpoint, job, why, true, effects);
        }
        self.state.stats.consolidations += 1;
        self.state.retiring.insert(node_id, reason);
        self.sched.queue_dirty = true;
    }

    /// Retiring nodes whose jobs are off are given back.
    fn release_retired(&mut self, effects: &mut Vec<Effect>) {
        let done: Vec<(NodeId, String)> = self
            .state
            .retiring
            .iter()
            .filter(|(id, _)| !self.state.releasing.contains_key(id))
            .filter(|(id, _)| self.fleet.nodes.get(id).is_some_and(|n| super::life::jobs_on(n).is_empty()))
            .map(|(id, why)| (*id, why.clone()))
            .collect();
        for (id, why) in done {
            self.state.releasing.insert(id, why.clone());
            effects.push(Effect::Release { node: id, reason: why });
        }
    }
}

/// A proposal in words: "launch 1 × SPOT p3.8xlarge us-west-2b, max $4.10/h, for j265 (waited 12m)".
pub fn describe(proposal: &Proposal, fleet: &Fleet) -> String {
    match proposal {
        Proposal::Launch { request } => {
            let price = request.max_price.map(|p| format!(", max {p}")).unwrap_or_default();
            format!("launch {} × {}{price} {}", request.count, request.pool, request.reason)
        }
        Proposal::Release { node, reason } => format!("give back {} ({reason})", fleet.node_name(*node)),
    }
}
