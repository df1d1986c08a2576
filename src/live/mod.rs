//! Live operation: the engine on real sources instead of the simulated world.
//! `LiveWorld` is the `World` the engine pulls events from and hands effects
//! to; `Live` feeds it the adapters' reports (through the `Translator`) at
//! the wall-clock time the driver passes in, and sends the room's job
//! effects to the local executor and its Slurm commands to the Slurm executor.
//!
//! Owns the routing between adapters, the room and executors. Reads no clock
//! itself (the driver passes `now`), so the whole path is tested with real
//! adapters and a chosen time.

pub mod agent;
pub mod catalogue;
pub mod config;
pub mod doctor;
pub mod run;
pub mod slurm_power;
pub mod translate;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tokio::sync::mpsc;

use crate::domain::capacity::{LaunchFailure, LaunchRequest, PoolSpec};
use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::PoolTarget;
use crate::domain::slurm::SlurmCommand;
use crate::domain::units::At;
use crate::domain::units::{MicrosPerHour, Secs};
use crate::engine::{Engine, World};
use crate::room::Room;
use crate::sources::aws::LaunchSpec;
use crate::sources::ec2_capacity::{self, CloudCommand, PoolDecl};
use crate::sources::local::{ExecutorInput, JobCommand};
use crate::sources::report::Report;
use crate::store::{Store, StoreError};
use translate::Translator;

/// Events waiting to be applied, and where job effects go.
pub struct LiveWorld {
    /// Where launches and releases go, when `[sources.aws]` has pools.
    cloud: Option<mpsc::Sender<CloudCommand>>,
    /// The EC2 instance behind each node the room launched.
    instances: BTreeMap<NodeId, String>,
    /// Each pool's on-demand price: a spot launch's backstop max price.
    pool_prices: BTreeMap<PoolTarget, MicrosPerHour>,
    /// Launch requests sent since the translator last heard of them.
    sent_launches: Vec<u64>,
    start: At,
    inbox: VecDeque<(At, Event)>,
    executor: Option<mpsc::Sender<ExecutorInput>>,
    /// Where Slurm commands go, when a Slurm cluster is configured.
    slurm: Option<mpsc::Sender<SlurmCommand>>,
    /// Nodes whose jobs the local executor runs (this machine).
    local_nodes: BTreeSet<NodeId>,
    job_nodes: BTreeMap<JobId, NodeId>,
}

impl LiveWorld {
    pub fn new(start: At, executor: Option<mpsc::Sender<ExecutorInput>>) -> LiveWorld {
        LiveWorld {
            cloud: None,
            instances: BTreeMap::new(),
            pool_prices: BTreeMap::new(),
            sent_launches: Vec::new(),
            start,
            inbox: VecDeque::new(),
            executor,
            slurm: None,
            local_nodes: BTreeSet::new(),
            job_nodes: BTreeMap::new(),
        }
    }

    pub fn push(&mut self, at: At, event: Event) {
        self.inbox.push_back((at, event));
    }

    /// Launches go to EC2; with nowhere to send them they fail at once, said plainly.
    fn launch(&mut self, at: At, request: &LaunchRequest) {
        let pool = &request.pool;
        let spec = LaunchSpec {
            instance_type: pool.instance_type.clone(),
            zone: pool.zone.clone(),
            spot_max_price: self.pool_prices.get(pool).and_then(|od| ec2_capacity::spot_price(pool.billing, request.max_price, *od)),
            count: request.count,
            tags: ec2_capacity::request_tags(request.id, pool.billing),
        };
        let why = match &self.cloud {
            None => Some("no EC2 pools are configured here ([[sources.aws.pools]]); not launched"),
            Some(_) if !self.pool_prices.contains_key(pool) => Some("not a pool of [[sources.aws.pools]]; not launched"),
            Some(tx) => match tx.try_send(CloudCommand::Launch { request: request.id, spec }) {
                Ok(()) => None,
                Err(_) => Some("the EC2 launcher is not taking commands (stopped or overloaded); not launched"),
            },
        };
        match why {
            None => self.sent_launches.push(request.id),
            Some(why) => {
                let event = Event::LaunchFailed { request: request.id, count: request.count, failure: LaunchFailure::Other, message: why.to_string() };
                self.inbox.push_back((at, event));
            }
        }
    }

    /// Releases go to EC2 for instances the room launched; any other node is refused here.
    fn release(&mut self, at: At, node: NodeId) {
        let why = match (&self.cloud, self.instances.get(&node)) {
            (_, None) => "no EC2 instance the room launched is behind this node; not released".to_string(),
            (None, Some(_)) => "no EC2 launcher is configured here; not released".to_string(),
            (Some(tx), Some(instance)) => match tx.try_send(CloudCommand::Release { node, instance: instance.clone() }) {
                Ok(()) => return,
                Err(_) => "the EC2 launcher is not taking commands (stopped or overloaded); not released".to_string(),
            },
        };
        self.inbox.push_back((at, Event::ReleaseFailed { node, message: why }));
    }

    fn send(&mut self, at: At, input: ExecutorInput, job: JobId) {
        let Some(tx) = &self.executor else { return };
        if tx.try_send(input).is_err() {
            // The executor is gone or hopelessly behind: say so, in the room.
            let message = "the local executor is not taking work (stopped or overloaded)".to_string();
            self.inbox.push_back((at, Event::JobExited { job, ok: false, message }));
        }
    }
}

impl World for LiveWorld {
    fn next_event(&mut self, until: At) -> Option<(At, Event)> {
        match self.inbox.front() {
            Some((at, _)) if *at <= until => self.inbox.pop_front(),
            _ => None,
        }
    }

    fn handle(&mut self, at: At, effects: &[Effect]) {
        for effect in effects {
            match effect {
                Effect::StartJob { job, node, .. } => {
                    if self.executor.is_some() && self.local_nodes.contains(node) {
                        self.job_nodes.insert(*job, *node);
                        self.send(at, ExecutorInput::Effect(effect.clone()), *job);
                    } else {
                        // No executor runs work there (Slurm and cloud executors come later):
                        // refuse plainly rather than show a job that never starts.
                        let message = format!("no executor runs jobs on node {}", node.0);
                        self.inbox.push_back((at, Event::JobExited { job: *job, ok: false, message }));
                    }
                }
                Effect::Slurm { command } => {
                    let sent = self.slurm.as_ref().map(|tx| tx.try_send(command.clone()));
                    let why = match sent {
                        Some(Ok(())) => None,
                        Some(Err(_)) => Some("the Slurm executor is not taking commands (stopped or overloaded); not sent"),
                        None => Some("no Slurm executor is configured here ([sources.slurm]); not sent"),
                    };
                    if let Some(why) = why {
                        self.inbox.push_back((at, Event::SlurmDone { command: command.id, ok: false, message: why.to_string() }));
                    }
                }
                Effect::Launch { request } => self.launch(at, request),
                Effect::Release { node, .. } => self.release(at, *node),
                Effect::Checkpoint { job, .. } | Effect::StopJob { job } => {
                    if self.job_nodes.contains_key(job) {
                        self.send(at, ExecutorInput::Effect(effect.clone()), *job);
                    }
                    if matches!(effect, Effect::StopJob { .. }) {
                        self.job_nodes.remove(job);
                    }
                }
                _ => {}
            }
        }
    }

    fn start(&self) -> At {
        self.start
    }
}

/// The engine on live sources.
pub struct Live {
    pub engine: Engine<LiveWorld>,
    translator: Translator,
    /// This machine's name: the node the local executor runs jobs on.
    local_host: String,
    /// Slurm accounts declared as tenants, defined at `begin`.
    accounts: Vec<crate::domain::event::TenantSpec>,
    /// EC2 pools the room may buy from, defined at `begin`.
    pools: Vec<PoolSpec>,
}

impl Live {
    pub fn new(
        room: Room,
        store: Option<Store>,
        catalogue: catalogue::Catalogue,
        local_host: String,
        start: At,
        executor: Option<mpsc::Sender<ExecutorInput>>,
    ) -> Live {
        Live {
            engine: Engine::new(room, LiveWorld::new(start, executor), store),
            translator: Translator::new(catalogue),
            local_host,
            accounts: Vec::new(),
            pools: Vec::new(),
        }
    }

    /// Routes Slurm commands to `slurm` and defines its accounts as tenants at `begin`.
    pub fn with_slurm(mut self, slurm: Option<mpsc::Sender<SlurmCommand>>, accounts: Vec<crate::domain::event::TenantSpec>) -> Live {
        self.engine.world.slurm = slurm;
        self.accounts = accounts;
        self
    }

    /// Sends launches and releases to the EC2 launcher and defines `pools`
    /// at `begin`; a pool of an instance type the catalogue does not know
    /// (its GPUs, its price) is refused with the reason.
    pub fn with_cloud(mut self, cloud: Option<mpsc::Sender<CloudCommand>>, pools: &[PoolDecl]) -> Result<Live, String> {
        for (i, decl) in pools.iter().enumerate() {
            let Some(node) = self.translator.pool_node(&decl.instance_type, &decl.zone, decl.billing) else {
                return Err(format!(
                    "[[sources.aws.pools]] {}: {} is not an instance type gpuroom knows; add it to [[sources.instance_types]]",
                    i + 1,
                    decl.instance_type
                ));
            };
            let pool = PoolSpec { node, speed: decl.speed, max_nodes: decl.max_nodes, warm_min: decl.warm_min, boot: Secs(decl.boot_secs) };
            if let Some(problem) = pool.problem() {
                return Err(format!("[[sources.aws.pools]] {} ({} {}): {problem}", i + 1, decl.instance_type, decl.zone));
            }
            self.engine.world.pool_prices.insert(pool.target(), pool.node.on_demand_price);
            self.pools.push(pool);
        }
        self.engine.world.cloud = cloud;
        Ok(self)
    }

    /// The room's clock never goes back, even when the wall clock does.
    fn clamp(&self, now: At) -> At {
        self.engine.room.now().map_or(now, |t| t.max(now))
    }

    fn push_all(&mut self, now: At, events: Vec<Event>) {
        for event in events {
            if let Event::Launched { spec, .. } = &event
                && let Some(instance) = self.translator.instance_of(spec.id)
            {
                self.engine.world.instances.insert(spec.id, instance.to_string());
            }
            if let Event::Released { node } = &event {
                self.engine.world.instances.remove(node);
            }
            self.engine.world.push(now, event);
        }
        if let Some(node) = self.translator.node_of(&self.local_host) {
            self.engine.world.local_nodes.insert(node);
        }
    }

    /// The declared local node (when its GPUs cannot report themselves),
    /// the jobs file's tenants and jobs, applied at `now`.
    pub fn begin(&mut self, now: At, jobs: Option<&config::JobsFile>) -> Result<(), StoreError> {
        let now = self.clamp(now);
        let mut events: Vec<Event> = self.translator.declare(&self.local_host).into_iter().collect();
        events.extend(self.accounts.drain(..).map(|spec| Event::TenantDefined { spec }));
        events.extend(self.pools.drain(..).map(|pool| Event::PoolDefined { pool }));
        if let Some(jobs) = jobs {
            events.extend(jobs.tenants().into_iter().map(|spec| Event::TenantDefined { spec }));
            // The file's jobs go in together, as a job array does: one
            // scheduling pass for all of them, however many there are.
            let mut specs = Vec::new();
            for (spec, command) in jobs.jobs(1) {
                if let Some(tx) = &self.engine.world.executor {
                    let _ = tx.try_send(ExecutorInput::Register { job: spec.id, command: command.clone() });
                }
                specs.push(spec);
            }
            if !specs.is_empty() {
                events.push(Event::JobsSubmitted { specs });
            }
        }
        self.push_all(now, events);
        self.run_until(now)
    }

    /// Applies what is due; the launches it sent are then awaited by the translator.
    fn run_until(&mut self, now: At) -> Result<(), StoreError> {
        let result = self.engine.run_until(now).map(|_| ());
        for request in self.engine.world.sent_launches.drain(..) {
            self.translator.expect_launch(request);
        }
        result
    }

    /// An adapter's report, applied at `now` with whatever else is due.
    pub fn report(&mut self, now: At, report: Report) -> Result<(), StoreError> {
        let now = self.clamp(now);
        let events = self.translator.translate(now, report);
        self.push_all(now, events);
        self.run_until(now)
    }

    pub fn tick(&mut self, now: At) -> Result<(), StoreError> {
        let now = self.clamp(now);
        self.run_until(now)
    }

    /// Register a job's command with the executor (jobs submitted later).
    pub fn register(&mut self, job: JobId, command: JobCommand) {
        if let Some(tx) = &self.engine.world.executor {
            let _ = tx.try_send(ExecutorInput::Register { job, command });
        }
    }
}
