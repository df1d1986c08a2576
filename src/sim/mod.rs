//! The simulated world: a seeded discrete-event driver that plays the cluster,
//! the cloud and the executor around the `Room`.
//!
//! It produces the events a real deployment would (nodes joining, jobs
//! arriving, GPU telemetry, spot price ticks, interruption notices) from real
//! traces, and answers the `Room`'s effects the way an executor would (starting
//! jobs after a CUDA/data-loading delay, writing checkpoints at a bandwidth,
//! stopping on request). Same seed, same configuration → same event stream.
//!
//! Owns its own clock-free schedule; never touches the `Room`'s state except
//! through events, and never does IO (data files are embedded, see `data`).

pub mod config;
pub mod data;
mod elastic;
pub mod executor;
pub mod experiment;
pub mod spot;
pub mod workload;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::domain::capacity::PoolSpec;
use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId, PoolKey};
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, MicrosPerHour};
use crate::sources::{ParseError, philly, price_history, spot_trace};
use config::SimConfig;
use executor::{Executor, after};
use spot::{Availability, NOTICE, PriceReplay, SpotLife, Transition};
use workload::{SimJob, Workload};

/// Something the world will do at a time.
#[derive(Clone, Debug)]
enum Pending {
    Emit(Event),
    Arrival,
    Telemetry,
    Price(usize),
    Spot { node: NodeId, epoch: u64, what: SpotStep },
    Executor(executor::Step),
}

#[derive(Copy, Clone, Debug)]
enum SpotStep {
    Notice {
        deadline: At,
    },
    Lost {
        reason: &'static str,
    },
    Relaunch,
    /// A node the room bought has booted.
    Ready,
}

#[derive(Clone, Debug)]
struct Scheduled {
    at: At,
    seq: u64,
    what: Pending,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed so that `BinaryHeap` pops the earliest (then first scheduled).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Clone, Debug)]
struct SpotNode {
    spec: NodeSpec,
    life: Option<SpotLife>,
    up: bool,
    draining: bool,
    /// Bumped at every loss and relaunch; stale spot steps are dropped.
    epoch: u64,
    /// Lost because the market rose above its max price: relaunch waits for it to fall.
    priced_out: bool,
    /// Bought by the room: never relaunched by the world; gone once lost or given back.
    elastic: bool,
}

/// Figures about the simulated world itself (not the `Room`'s view of it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorldStats {
    pub arrivals: u64,
    pub reclaims_by_trace: u64,
    pub reclaims_by_price: u64,
    pub relaunches: u64,
    /// Elastic capacity as the world saw it: instances launched, launches
    /// refused for want of spot capacity or price, instances given back.
    pub launched: u64,
    pub launch_refusals: u64,
    pub released: u64,
    /// Work of the jobs that finished, V100 GPU-hours.
    pub work_done_hours: f64,
}

pub struct Simulation {
    config: SimConfig,
    rng: ChaCha8Rng,
    queue: BinaryHeap<Scheduled>,
    seq: u64,
    workload: Workload,
    executor: Executor,
    next_job: u64,
    nodes: BTreeMap<NodeId, SpotNode>,
    prices: Vec<(PoolKey, PriceReplay)>,
    market: BTreeMap<PoolKey, MicrosPerHour>,
    traces: Vec<spot_trace::SpotTrace>,
    /// Elastic capacity: the pools the room may buy from, spot launchability
    /// per zone, each spot pool's place in its preemption trace, and the next
    /// node id to give.
    pools: BTreeMap<PoolTarget, PoolSpec>,
    availability: BTreeMap<String, Availability>,
    pool_lives: BTreeMap<PoolKey, SpotLife>,
    next_node: u32,
    /// The workload's own random stream, so that a seed offers the same jobs
    /// whatever the fleet does with them.
    arrivals_rng: ChaCha8Rng,
    pub stats: WorldStats,
}

/// Why the simulation could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Data(#[from] ParseError),
    #[error("simulation: {0}")]
    Setup(String),
}

/// The embedded real data, parsed once.
pub struct Traces {
    pub prices: price_history::PriceSeries,
    pub preemption: Vec<(String, spot_trace::SpotTrace)>,
    pub availability: Vec<(String, spot_trace::SpotTrace)>,
    pub philly: Vec<philly::PhillyJob>,
}

impl Traces {
    pub fn embedded() -> Result<Traces, ParseError> {
        let pages = data::PRICE_DUMPS.iter().map(|(name, text)| price_history::parse(name, text)).collect::<Result<Vec<_>, _>>()?;
        let prices = price_history::PriceSeries::merge(pages.iter(), "Linux/UNIX");
        let preemption =
            data::PREEMPTION_TRACES.iter().map(|(name, text)| spot_trace::parse(name, text).map(|t| (name.to_string(), t))).collect::<Result<Vec<_>, _>>()?;
        let availability =
            data::AVAILABILITY_TRACES.iter().map(|(name, text)| spot_trace::parse(name, text).map(|t| (name.to_string(), t))).collect::<Result<Vec<_>, _>>()?;
        let (name, text) = data::PHILLY_JOBS;
        let philly = philly::parse(name, text)?;
        Ok(Traces { prices, preemption, availability, philly })
    }
}

/// The trace of a zone: its own, else one of its region's (a zone that was
/// not probed lives like its neighbours), else the first.
fn trace_for_zone(traces: &[(String, spot_trace::SpotTrace)], zone: &str) -> usize {
    let own = traces.iter().position(|(name, _)| name.contains(&format!("/{zone}_")));
    let region = zone.trim_end_matches(|c: char| c.is_ascii_lowercase());
    own.or_else(|| traces.iter().position(|(name, _)| name.contains(&format!("/{region}")))).unwrap_or(0)
}

impl Simulation {
    pub fn new(config: SimConfig, traces: &Traces, seed: u64) -> Result<Simulation, SimError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut arrivals_rng = ChaCha8Rng::seed_from_u64(seed);
        arrivals_rng.set_stream(1);
        let workload = Workload::new(&config, &traces.philly).map_err(SimError::Setup)?;
        let start = config.start;
        let specs = config.node_specs();
        // One trace offset per pool, so a reclaim hits a pool's nodes together.
        let mut pool_offsets: BTreeMap<PoolKey, SpotLife> = BTreeMap::new();
        let mut nodes = BTreeMap::new();
        for spec in &specs {
            let life = if spec.billing == BillingMode::Spot && !traces.preemption.is_empty() {
                let index = traces
                    .preemption
                    .iter()
                    .position(|(name, _)| name.contains(&format!("/{}_", spec.zone)))
                    .unwrap_or(spec.id.0 as usize % traces.preemption.len());
                let trace = &traces.preemption[index].1;
                let base = pool_offsets.entry(spec.pool()).or_insert_with(|| SpotLife::place(index, trace, &mut rng)).clone();
                Some(base)
            } else {
                None
            };
            nodes.insert(spec.id, SpotNode { spec: spec.clone(), life, up: false, draining: false, epoch: 0, priced_out: false, elastic: false });
        }
        let pool_specs = config.pool_specs();
        for pool in pool_specs.iter().filter(|p| p.node.billing == BillingMode::Spot) {
            let key = pool.node.pool();
            if pool_offsets.contains_key(&key) || traces.preemption.is_empty() {
                continue;
            }
            let index = trace_for_zone(&traces.preemption, &key.zone);
            let life = SpotLife::place(index, &traces.preemption[index].1, &mut rng);
            pool_offsets.insert(key, life);
        }
        let mut availability = BTreeMap::new();
        for zone in pool_specs.iter().filter(|p| p.node.billing == BillingMode::Spot).map(|p| p.node.zone.clone()).collect::<std::collections::BTreeSet<_>>() {
            if let Some((_, trace)) = traces.availability.iter().find(|(name, _)| name.contains(&format!("/{zone}_"))) {
                availability.insert(zone, Availability::place(trace.clone(), &mut rng));
            }
        }
        let next_node = specs.iter().map(|s| s.id.0).max().unwrap_or(0) + 1;
        let mut prices = Vec::new();
        let spot_pools = specs.iter().filter(|s| s.billing == BillingMode::Spot).map(|s| s.pool());
        let elastic_spot = pool_specs.iter().filter(|p| p.node.billing == BillingMode::Spot).map(|p| p.node.pool());
        for key in spot_pools.chain(elastic_spot).collect::<std::collections::BTreeSet<_>>() {
            let replay = PriceReplay::new(&traces.prices, &key, start).ok_or_else(|| SimError::Setup(format!("no embedded spot price history for {key}")))?;
            prices.push((key, replay));
        }
        let speeds = specs.iter().map(|s| (s.id, config.instance_type(&s.instance_type).map(|t| t.speed).unwrap_or(1.0))).collect();
        let executor = Executor::new(
            speeds,
            config.workload.failure_rate,
            config.workload.hang_rate,
            config.workload.checkpoint_mib_per_sec,
            config.workload.incremental_share_per_step,
        );
        let mut sim = Simulation {
            rng,
            queue: BinaryHeap::new(),
            seq: 0,
            workload,
            executor,
            next_job: 1,
            nodes,
            prices,
            market: BTreeMap::new(),
            traces: traces.preemption.iter().map(|(_, t)| t.clone()).collect(),
            pools: pool_specs.iter().map(|p| (p.target(), p.clone())).collect(),
            availability,
            pool_lives: pool_offsets,
            next_node,
            arrivals_rng,
            stats: WorldStats::default(),
            config,
        };
        for spec in sim.config.tenant_specs() {
            sim.schedule(start, Pending::Emit(Event::TenantDefined { spec }));
        }
        for pool in pool_specs {
            sim.schedule(start, Pending::Emit(Event::PoolDefined { pool }));
        }
        // The hazard's long-run prior: the lifetimes in the traces the spot
        // pools of each instance type replay (history the watcher would have).
        let mut lifetimes: BTreeMap<String, BTreeMap<usize, Vec<crate::market::hazard::Lifetime>>> = BTreeMap::new();
        let lives = sim.nodes.values().filter_map(|n| n.life.as_ref().map(|l| (n.spec.instance_type.clone(), l.trace)));
        let pool_lives = sim.pool_lives.iter().map(|(key, l)| (key.instance_type.clone(), l.trace));
        for (instance_type, index) in lives.chain(pool_lives).collect::<Vec<_>>() {
            let trace = &sim.traces[index];
            lifetimes.entry(instance_type).or_default().entry(index).or_insert_with(|| trace.lifetimes());
        }
        for (instance_type, by_trace) in lifetimes {
            let lifetimes = by_trace.into_values().flatten().collect();
            sim.schedule(start, Pending::Emit(Event::SpotLifetimes { instance_type, lifetimes }));
        }
        for i in 0..sim.prices.len() {
            if let Some((at, _)) = sim.prices[i].1.clone().next_change(start) {
                sim.schedule(at, Pending::Price(i));
            }
        }
        for spec in specs {
            sim.schedule(start, Pending::Spot { node: spec.id, epoch: 0, what: SpotStep::Relaunch });
        }
        sim.schedule(after(start, sim.config.telemetry_secs as f64), Pending::Telemetry);
        match sim.config.workload.arrivals {
            config::Arrivals::Poisson => {
                let gap = sim.workload.next_gap(&mut sim.arrivals_rng);
                sim.schedule(after(start, gap), Pending::Arrival);
            }
            config::Arrivals::Trace => {
                let jobs = Workload::from_trace(&sim.config, &traces.philly, &mut sim.arrivals_rng);
                sim.offer(jobs);
            }
        }
        Ok(sim)
    }

    /// A world offered exactly `jobs` (an experiment's), none of its own.
    pub fn with_jobs(mut config: SimConfig, traces: &Traces, seed: u64, jobs: Vec<(At, SimJob)>) -> Result<Simulation, SimError> {
        config.workload.arrivals = config::Arrivals::Trace;
        config.workload.trace_jobs = 0;
        let mut sim = Simulation::new(config, traces, seed)?;
        sim.offer(jobs);
        Ok(sim)
    }

    /// These jobs arrive at their times; the world's own ids continue after theirs.
    fn offer(&mut self, jobs: Vec<(At, SimJob)>) {
        self.next_job = self.next_job.max(jobs.iter().map(|(_, j)| j.spec.id.0).max().unwrap_or(0) + 1);
        for (at, job) in jobs {
            let spec = job.spec.clone();
            self.executor.know(job);
            self.stats.arrivals += 1;
            self.schedule(at, Pending::Emit(Event::JobSubmitted { spec }));
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Offered arrivals per hour (from the target load and the trace's mean size).
    pub fn jobs_per_hour(&self) -> f64 {
        self.workload.jobs_per_hour
    }

    fn schedule(&mut self, at: At, what: Pending) {
        self.seq += 1;
        self.queue.push(Scheduled { at, seq: self.seq, what });
    }

    /// When the world will next do something.
    pub fn peek_at(&self) -> Option<At> {
        self.queue.peek().map(|s| s.at)
    }

    /// The next event at or before `until`, or `None` if the world is quiet until then.
    pub fn next_event(&mut self, until: At) -> Option<(At, Event)> {
        while let Some(top) = self.queue.peek() {
            if top.at > until {
                return None;
            }
            let Scheduled { at, what, .. } = self.queue.pop()?;
            if let Some(event) = self.happen(at, what) {
                return Some((at, event));
            }
        }
        None
    }

    /// The executor's part: react to the `Room`'s effects.
    pub fn handle(&mut self, at: At, effects: &[crate::domain::event::Effect]) {
        let mut steps = Vec::new();
        for effect in effects {
            match effect {
                Effect::Launch { request } => self.launch(at, request),
                Effect::Release { node, .. } => self.release(at, *node),
                _ => self.executor.handle(at, effect, &mut self.rng, &mut steps),
            }
        }
        for (when, step) in steps {
            self.schedule(when, Pending::Executor(step));
        }
    }

    /// A new job the world will run, announced as a submission.
    fn submit(&mut self) -> Event {
        let id = JobId(self.next_job);
        self.next_job += 1;
        let job = self.workload.make_job(&self.config, id, &mut self.arrivals_rng);
        let spec = job.spec.clone();
        self.executor.know(job);
        self.stats.arrivals += 1;
        Event::JobSubmitted { spec }
    }

    fn happen(&mut self, at: At, what: Pending) -> Option<Event> {
        match what {
            Pending::Emit(event) => Some(event),
            Pending::Arrival => {
                let event = self.submit();
                let gap = self.workload.next_gap(&mut self.arrivals_rng);
                self.schedule(after(at, gap), Pending::Arrival);
                Some(event)
            }
            Pending::Telemetry => {
                self.schedule(after(at, self.config.telemetry_secs as f64), Pending::Telemetry);
                let up: Vec<&NodeSpec> = self.nodes.values().filter(|n| n.up).map(|n| &n.spec).collect();
                let (gpus, progress) = self.executor.telemetry(at, &up, &mut self.rng);
                // Serving metrics are scraped less often than GPUs.
                let every = 600 / self.config.telemetry_secs.max(1);
                if (at.timestamp() / self.config.telemetry_secs.max(1)) % every.max(1) == 0 {
                    for output in self.executor.outputs(at) {
                        self.schedule(at, Pending::Emit(output));
                    }
                }
                Some(Event::Telemetry { gpus, progress })
            }
            Pending::Price(i) => self.price_change(at, i),
            Pending::Spot { node, epoch, what } => self.spot_step(at, node, epoch, what),
            Pending::Executor(step) => {
                let (event, more) = self.executor.happen(at, step, &mut self.rng);
                self.stats.work_done_hours = self.executor.work_done_secs / 3600.0;
                for (when, step) in more {
                    self.schedule(when, Pending::Executor(step));
                }
                event
            }
        }
    }

    fn price_change(&mut self, at: At, i: usize) -> Option<Event> {
        let (key, replay) = &mut self.prices[i];
        let key = key.clone();
        let (_, price) = replay.next_change(at)?;
        if let Some((next_at, _)) = replay.clone().next_change(at) {
            self.schedule(next_at.max(after(at, 1.0)), Pending::Price(i));
        }
        self.market.insert(key.clone(), price);
        // AWS semantics: above its max price the instance is reclaimed; once
        // the price is back under it, a persistent request is fulfilled again.
        let pool_nodes: Vec<NodeId> = self.nodes.values().filter(|n| n.spec.pool() == key).map(|n| n.spec.id).collect();
        for id in pool_nodes {
            let node = &self.nodes[&id];
            let max = node.spec.max_price.unwrap_or(node.spec.on_demand_price);
            if node.up && !node.draining && price > max {
                let epoch = node.epoch;
                self.stats.reclaims_by_price += 1;
                self.schedule(at, Pending::Spot { node: id, epoch, what: SpotStep::Notice { deadline: at + NOTICE.delta() } });
                self.schedule(at + NOTICE.delta(), Pending::Spot { node: id, epoch, what: SpotStep::Lost { reason: "spot price above max price" } });
                if let Some(n) = self.nodes.get_mut(&id) {
                    n.priced_out = true;
                }
            } else if !node.up && node.priced_out && price <= max {
                let epoch = node.epoch;
                self.schedule(after(at, 180.0), Pending::Spot { node: id, epoch, what: SpotStep::Relaunch });
            }
        }
        Some(Event::PriceTick { zone: key.zone, instance_type: key.instance_type, price })
    }

    fn spot_step(&mut self, at: At, id: NodeId, epoch: u64, what: SpotStep) -> Option<Event> {
        let node = self.nodes.get(&id)?;
        if node.epoch != epoch {
            return None;
        }
        match what {
            SpotStep::Notice { deadline } => {
                if !node.up || node.draining {
                    return None;
                }
                self.nodes.get_mut(&id)?.draining = true;
                Some(Event::InterruptionNotice { node: id, deadline })
            }
            SpotStep::Lost { reason } => {
                if !node.up {
                    return None;
                }
                if reason.starts_with("spot interruption") {
                    self.stats.reclaims_by_trace += 1;
                }
                let n = self.nodes.get_mut(&id)?;
                n.up = false;
                n.draining = false;
                n.epoch += 1;
                self.executor.node_lost(id);
                if !self.nodes.get(&id)?.elastic {
                    self.plan_relaunch(at, id);
                }
                Some(Event::NodeLost { node: id, reason: reason.to_string() })
            }
            SpotStep::Ready => {
                if node.up {
                    return None;
                }
                let spec = node.spec.clone();
                let n = self.nodes.get_mut(&id)?;
                n.up = true;
                self.plan_reclaim(at, id);
                Some(Event::NodeUp { spec })
            }
            SpotStep::Relaunch => {
                if node.up || node.elastic {
                    return None;
                }
                let spec = node.spec.clone();
                let n = self.nodes.get_mut(&id)?;
                n.up = true;
                n.priced_out = false;
                n.epoch += 1;
                if at > self.config.start {
                    self.stats.relaunches += 1;
                }
                self.plan_reclaim(at, id);
                Some(Event::NodeUp { spec })
            }
        }
    }

    fn plan_reclaim(&mut self, at: At, id: NodeId) {
        let Some(node) = self.nodes.get(&id) else { return };
        let Some(life) = &node.life else { return };
        let trace = &self.traces[life.trace];
        // Skip relaunch transitions: a node that is up waits for its next reclaim.
        let mut after_at = at;
        for _ in 0..4 {
            match life.next_transition(trace, self.config.start, after_at) {
                Some(Transition::Reclaimed(t)) => {
                    let epoch = node.epoch;
                    let notice = (t - NOTICE.delta()).max(at);
                    self.schedule(notice, Pending::Spot { node: id, epoch, what: SpotStep::Notice { deadline: t } });
                    self.schedule(t, Pending::Spot { node: id, epoch, what: SpotStep::Lost { reason: "spot interruption (capacity reclaimed)" } });
                    return;
                }
                Some(Transition::Relaunched(t)) => after_at = t,
                None => return,
            }
        }
    }

    fn plan_relaunch(&mut self, at: At, id: NodeId) {
        let Some(node) = self.nodes.get(&id) else { return };
        if node.priced_out {
            return; // waits for the price to fall (see price_change)
        }
        let epoch = node.epoch;
        let Some(life) = &node.life else {
            self.schedule(after(at, 180.0), Pending::Spot { node: id, epoch, what: SpotStep::Relaunch });
            return;
        };
        let trace = &self.traces[life.trace];
        let boot = 90.0;
        let when = match life.next_transition(trace, self.config.start, at) {
            Some(Transition::Relaunched(t)) => after(t, boot),
            // The trace is alive here (the loss came from elsewhere): relaunch after a boot.
            Some(Transition::Reclaimed(_)) | None => after(at, 180.0),
        };
        self.schedule(when, Pending::Spot { node: id, epoch, what: SpotStep::Relaunch });
    }
}
