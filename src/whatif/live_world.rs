//! A live run re-run on a model: what the log holds that no policy could
//! change (arrivals with their specs, prices, the fixed fleet coming and
//! going, interruptions of it, ticks and operator actions) is replayed as it
//! was; what the room's decisions caused (starts, checkpoints, exits,
//! launches) is made again by a model executor.
//!
//! The model (README › What if): a job runs at the rate its progress showed
//! in the log, in V100 steps per second, scaled by the speed of the GPU it
//! now gets (`recorded::GPU_SPEEDS`); a job that never showed a rate runs for
//! the predictor's time; a job that failed fails at the step it failed at;
//! checkpoints write at the simulated cluster's bandwidth. A bought node
//! arrives after its pool's boot time, unless the spot market is above the
//! max price asked or the log's last answer from that pool was "no
//! capacity"; a reclaim the log shows in a pool takes the re-run's oldest
//! bought instance there, if it has one. Seeded: the same inputs, the same run.
//! Does no IO.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::recorded::{Cloud, Logged, Observed, gpu_speed};
use crate::domain::capacity::{LaunchFailure, LaunchRequest, PoolSpec};
use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, MicrosPerHour};
use crate::engine::World;
use crate::sim::executor::{Executor, Step, after};
use crate::sim::workload::SimJob;

/// The simulated cluster's checkpoint bandwidth and incremental share (SPEC §5).
const CHECKPOINT_MIB_PER_SEC: u32 = 400;
const INCREMENTAL_SHARE_PER_STEP: f64 = 0.0005;
/// Mean GPU utilization of a computing job (the model does not learn it).
const COMPUTE_UTIL: f64 = 85.0;
/// The cloud API's answer time, as in the simulated cloud.
const API_SECS: f64 = 1.0;
/// Serving metrics are reported every ten minutes.
const OUTPUT_EVERY_SECS: i64 = 600;

#[derive(Clone, Debug)]
enum Made {
    Step(Step),
    /// The cloud answers a launch (as EC2 answers RunInstances).
    Answer(LaunchRequest),
    Emit(Event),
    Up(NodeId),
}

pub struct Modeled {
    log: VecDeque<(At, Logged)>,
    made: BinaryHeap<Reverse<(At, u64)>>,
    pending: BTreeMap<u64, Made>,
    seq: u64,
    executor: Executor,
    rng: ChaCha8Rng,
    jobs: BTreeMap<JobId, Observed>,
    typical_job_secs: f64,
    up: BTreeMap<NodeId, NodeSpec>,
    bought: BTreeMap<NodeId, NodeSpec>,
    pools: BTreeMap<PoolTarget, PoolSpec>,
    next_node: u32,
    last_outputs: Option<At>,
    start: At,
    /// The spot market by (zone, instance type), as the log's price ticks say.
    market: BTreeMap<(String, String), MicrosPerHour>,
    /// Pools whose last recorded launch found no capacity.
    short: std::collections::BTreeSet<PoolTarget>,
    /// Recorded reclaimed instances and the re-run's instance each took.
    reclaimed: BTreeMap<NodeId, NodeId>,
}

impl Modeled {
    pub fn new(exogenous: Vec<(At, Logged)>, jobs: BTreeMap<JobId, Observed>, typical_job_secs: f64, start: At) -> Modeled {
        // Bought nodes take ids after every id the log used.
        let next_node = exogenous
            .iter()
            .filter_map(|(_, e)| match e {
                Logged::Event(Event::NodeUp { spec }) => Some(spec.id.0),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            .saturating_add(1_000_000);
        Modeled {
            log: exogenous.into(),
            made: BinaryHeap::new(),
            pending: BTreeMap::new(),
            seq: 0,
            executor: Executor::new(BTreeMap::new(), 0.0, 0.0, CHECKPOINT_MIB_PER_SEC, INCREMENTAL_SHARE_PER_STEP),
            rng: ChaCha8Rng::seed_from_u64(0x5748_4154_4946),
            jobs,
            typical_job_secs,
            up: BTreeMap::new(),
            bought: BTreeMap::new(),
            pools: BTreeMap::new(),
            next_node,
            last_outputs: None,
            start,
            market: BTreeMap::new(),
            short: Default::default(),
            reclaimed: BTreeMap::new(),
        }
    }

    fn schedule(&mut self, at: At, made: Made) {
        self.seq += 1;
        self.pending.insert(self.seq, made);
        self.made.push(Reverse((at, self.seq)));
    }

    fn speed_of(&self, spec: &NodeSpec) -> f64 {
        self.pools.get(&PoolTarget::of(spec)).map_or_else(|| gpu_speed(&spec.gpu_model), |p| p.speed)
    }

    /// What the model makes at `at`; `None` for a step that came to nothing.
    fn make(&mut self, at: At, made: Made) -> Option<Event> {
        match made {
            Made::Emit(event) => Some(event),
            Made::Answer(request) => {
                self.answer(at, &request);
                None
            }
            Made::Up(node) => {
                let spec = self.bought.get(&node)?.clone();
                self.up.insert(node, spec.clone());
                Some(Event::NodeUp { spec })
            }
            Made::Step(step) => {
                let (event, more) = self.executor.happen(at, step, &mut self.rng);
                for (when, step) in more {
                    self.schedule(when, Made::Step(step));
                }
                event
            }
        }
    }

    /// A logged event, as the model replays it; `None` for one it leaves out.
    fn replay(&mut self, at: At, logged: Logged) -> Option<Event> {
        let event = match logged {
            Logged::Event(event) => event,
            Logged::Cloud(cloud) => return self.cloud(cloud),
            Logged::Telemetry => Event::Telemetry { gpus: Vec::new(), progress: Vec::new() },
        };
        match event {
            Event::Telemetry { .. } => {
                let up: Vec<&NodeSpec> = self.up.values().collect();
                let (gpus, progress) = self.executor.telemetry(at, &up, &mut self.rng);
                if self.last_outputs.is_none_or(|last| (at - last).num_seconds() >= OUTPUT_EVERY_SECS) {
                    self.last_outputs = Some(at);
                    for output in self.executor.outputs(at) {
                        self.schedule(at, Made::Emit(output));
                    }
                }
                Some(Event::Telemetry { gpus, progress })
            }
            Event::JobSubmitted { .. } | Event::JobsSubmitted { .. } => {
                for spec in event.submitted() {
                    if let Some(o) = self.jobs.get(&spec.id) {
                        let step_secs = o.step_secs(self.typical_job_secs);
                        self.executor.know(SimJob { spec: spec.clone(), step_secs, util: COMPUTE_UTIL, fails_at_step: o.failed_at_step });
                    }
                }
                Some(event)
            }
            Event::NodeUp { spec } => {
                self.executor.set_speed(spec.id, self.speed_of(&spec));
                self.up.insert(spec.id, spec.clone());
                Some(Event::NodeUp { spec })
            }
            Event::NodeLost { node, reason } => {
                self.up.remove(&node);
                self.executor.node_lost(node);
                Some(Event::NodeLost { node, reason })
            }
            Event::InterruptionNotice { node, deadline } => self.up.contains_key(&node).then_some(Event::InterruptionNotice { node, deadline }),
            Event::PriceTick { zone, instance_type, price } => {
                self.market.insert((zone.clone(), instance_type.clone()), price);
                Some(Event::PriceTick { zone, instance_type, price })
            }
            Event::PoolDefined { pool } => {
                self.pools.insert(pool.target(), pool.clone());
                Some(Event::PoolDefined { pool })
            }
            other => Some(other),
        }
    }

    /// What the cloud said of a pool the recorded room bought in, played
    /// to the re-run's instances there.
    fn cloud(&mut self, cloud: Cloud) -> Option<Event> {
        match cloud {
            Cloud::Obtainable { pool, yes: true } => {
                self.short.remove(&pool);
                None
            }
            Cloud::Obtainable { pool, yes: false } => {
                self.short.insert(pool);
                None
            }
            Cloud::Notice { pool, node, deadline } => {
                let taken: std::collections::BTreeSet<NodeId> = self.reclaimed.values().copied().collect();
                let ours = self.up.keys().copied().find(|id| self.bought.get(id).is_some_and(|s| pool.holds(s)) && !taken.contains(id))?;
                self.reclaimed.insert(node, ours);
                Some(Event::InterruptionNotice { node: ours, deadline })
            }
            Cloud::Lost { pool, node, reason } => {
                let taken: std::collections::BTreeSet<NodeId> = self.reclaimed.values().copied().collect();
                let ours = match self.reclaimed.remove(&node) {
                    Some(ours) => ours,
                    None => self.up.keys().copied().find(|id| self.bought.get(id).is_some_and(|s| pool.holds(s)) && !taken.contains(id))?,
                };
                self.bought.remove(&ours)?;
                self.up.remove(&ours);
                self.executor.node_lost(ours);
                Some(Event::NodeLost { node: ours, reason })
            }
        }
    }

    /// The cloud's answer to a launch asked `API_SECS` ago: by then the
    /// log's answers to launches asked at the same time have been heard.
    fn answer(&mut self, at: At, request: &LaunchRequest) {
        let refuse = |failure: LaunchFailure, message: String| Made::Emit(Event::LaunchFailed { request: request.id, count: request.count, failure, message });
        let Some(pool) = self.pools.get(&request.pool).cloned() else {
            self.schedule(at, refuse(LaunchFailure::Other, format!("no pool {} in the log", request.pool)));
            return;
        };
        if pool.node.billing == BillingMode::Spot {
            let max = request.max_price.unwrap_or(pool.node.on_demand_price);
            if let Some(market) = self.market.get(&(pool.node.zone.clone(), pool.node.instance_type.clone())).copied()
                && market > max
            {
                self.schedule(at, refuse(LaunchFailure::PriceAboveMax, format!("spot price {market} is above the max price {max}")));
                return;
            }
        }
        if self.short.contains(&request.pool) {
            let text = format!("InsufficientInstanceCapacity: the log's last launch in {} found none", request.pool);
            self.schedule(at, refuse(LaunchFailure::InsufficientCapacity, text));
            return;
        }
        for _ in 0..request.count {
            let id = NodeId(self.next_node);
            self.next_node = self.next_node.saturating_add(1);
            let mut spec = pool.node.clone();
            spec.id = id;
            spec.name = format!("w{}", id.0);
            if spec.billing == BillingMode::Spot {
                spec.max_price = Some(request.max_price.unwrap_or(spec.on_demand_price));
            }
            self.executor.set_speed(id, pool.speed);
            self.bought.insert(id, spec.clone());
            self.schedule(at, Made::Emit(Event::Launched { request: request.id, spec }));
            self.schedule(after(at, pool.boot.0 as f64), Made::Up(id));
        }
    }
}

impl World for Modeled {
    fn next_event(&mut self, until: At) -> Option<(At, Event)> {
        loop {
            let made_at = self.made.peek().map(|Reverse((at, _))| *at).filter(|at| *at <= until);
            let log_at = self.log.front().map(|(at, _)| *at).filter(|at| *at <= until);
            match (made_at, log_at) {
                // What the model makes at a time comes before what the log has then.
                (Some(m), l) if l.is_none_or(|l| m <= l) => {
                    let Reverse((at, seq)) = self.made.pop()?;
                    let made = self.pending.remove(&seq)?;
                    if let Some(event) = self.make(at, made) {
                        return Some((at, event));
                    }
                }
                (_, Some(_)) => {
                    let (at, event) = self.log.pop_front()?;
                    if let Some(event) = self.replay(at, event) {
                        return Some((at, event));
                    }
                }
                _ => return None,
            }
        }
    }

    fn handle(&mut self, at: At, effects: &[Effect]) {
        let mut steps = Vec::new();
        for effect in effects {
            match effect {
                Effect::Launch { request } => self.schedule(after(at, API_SECS), Made::Answer(request.clone())),
                Effect::Release { node, .. } => {
                    if self.bought.remove(node).is_some() {
                        self.up.remove(node);
                        self.executor.node_lost(*node);
                        self.schedule(after(at, API_SECS), Made::Emit(Event::Released { node: *node }));
                    }
                }
                _ => self.executor.handle(at, effect, &mut self.rng, &mut steps),
            }
        }
        for (when, step) in steps {
            self.schedule(when, Made::Step(step));
        }
    }

    fn start(&self) -> At {
        self.start
    }
}
