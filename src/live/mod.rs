//! Live operation: the engine on real sources instead of the simulated world.
//! `LiveWorld` is the `World` the engine pulls events from and hands effects
//! to; `Live` feeds it the adapters' reports (through the `Translator`) at
//! the wall-clock time the driver passes in, and sends the room's job
//! effects to the local executor and its Slurm commands to the Slurm executor.
//!
//! Owns the routing between adapters, the room and executors. Reads no clock
//! itself (the driver passes `now`), so the whole path is tested with real
//! adapters and a chosen time.

pub mod catalogue;
pub mod config;
pub mod doctor;
pub mod run;
pub mod translate;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tokio::sync::mpsc;

use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::slurm::SlurmCommand;
use crate::domain::units::At;
use crate::room::Room;
use crate::engine::{Engine, World};
use crate::sources::local::{ExecutorInput, JobCommand};
use crate::sources::report::Report;
use crate::store::{Store, StoreError};
use translate::Translator;

/// Events waiting to be applied, and where job effects go.
pub struct LiveWorld {
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
        LiveWorld { start, inbox: VecDeque::new(), executor, slurm: None, local_nodes: BTreeSet::new(), job_nodes: BTreeMap::new() }
    }


    pub fn push(&mut self, at: At, event: Event) {
        self.inbox.push_back((at, event));
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
}

impl Live {
    pub fn new(room: Room, store: Option<Store>, catalogue: catalogue::Catalogue, local_host: String, start: At, executor: Option<mpsc::Sender<ExecutorInput>>) -> Live {
        Live { engine: Engine::new(room, LiveWorld::new(start, executor), store), translator: Translator::new(catalogue), local_host, accounts: Vec::new() }
    }

    /// Routes Slurm commands to `slurm` and defines its accounts as tenants at `begin`.
    pub fn with_slurm(mut self, slurm: Option<mpsc::Sender<SlurmCommand>>, accounts: Vec<crate::domain::event::TenantSpec>) -> Live {
        self.engine.world.slurm = slurm;
        self.accounts = accounts;
        self
    }

    /// The room's clock never goes back, even when the wall clock does.
    fn clamp(&self, now: At) -> At {
        self.engine.room.now().map_or(now, |t| t.max(now))
    }

    fn push_all(&mut self, now: At, events: Vec<Event>) {
        for event in events {
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
        if let Some(jobs) = jobs {
            events.extend(jobs.tenants().into_iter().map(|spec| Event::TenantDefined { spec }));
            for (spec, command) in jobs.jobs(1) {
                if let Some(tx) = &self.engine.world.executor {
                    let _ = tx.try_send(ExecutorInput::Register { job: spec.id, command: command.clone() });
                }
                events.push(Event::JobSubmitted { spec });
            }
        }
        self.push_all(now, events);
        self.engine.run_until(now).map(|_| ())
    }

    /// An adapter's report, applied at `now` with whatever else is due.
    pub fn report(&mut self, now: At, report: Report) -> Result<(), StoreError> {
        let now = self.clamp(now);
        let events = self.translator.translate(now, report);
        self.push_all(now, events);
        self.engine.run_until(now).map(|_| ())
    }

    pub fn tick(&mut self, now: At) -> Result<(), StoreError> {
        let now = self.clamp(now);
        self.engine.run_until(now).map(|_| ())
    }

    /// Register a job's command with the executor (jobs submitted later).
    pub fn register(&mut self, job: JobId, command: JobCommand) {
        if let Some(tx) = &self.engine.world.executor {
            let _ = tx.try_send(ExecutorInput::Register { job, command });
        }
    }
}
