//! The engine: the thin loop that wires a source of events (the simulated
//! world, or the live adapters through `live::LiveWorld`) through the event
//! log into the `Room`, and the `Room`'s effects back to the executor. One
//! code path for the console, the batch simulation, the tests, live
//! operation and (with `store::replay`) replays.
//!
//! Owns the order "append, then apply, then carry out the effects", and
//! resuming a run from its log after a crash (`Engine::resume`). Holds no
//! policy and draws nothing.

use crate::domain::event::{Action, Actor, Effect, Event};
use crate::domain::units::At;
use crate::room::Room;
use crate::sim::Simulation;
use crate::store::{Store, StoreError};

/// Where events come from and where effects go: the simulated world, or the
/// live sources and executors.
pub trait World {
    /// The next event at or before `until`, or `None` if there is none yet.
    fn next_event(&mut self, until: At) -> Option<(At, Event)>;
    /// Carry out (or hand on) the room's effects of an event applied at `at`.
    fn handle(&mut self, at: At, effects: &[Effect]);
    /// When the world began: the clock of an action taken before any event.
    fn start(&self) -> At;
    /// Resuming a crashed run: the world catches up with one logged event
    /// and the effects the room gave it. A world that can regenerate its
    /// events checks the log against them (`Err` names the difference); a
    /// live world has nothing to redo (its sources report afresh).
    fn recover(&mut self, _at: At, _event: &Event, _effects: &[Effect]) -> Result<(), String> {
        Ok(())
    }
}

impl World for Simulation {
    fn next_event(&mut self, until: At) -> Option<(At, Event)> {
        Simulation::next_event(self, until)
    }
    fn handle(&mut self, at: At, effects: &[Effect]) {
        Simulation::handle(self, at, effects)
    }
    fn start(&self) -> At {
        self.config().start
    }
    /// Ticks and operator actions came from the engine, not the world; every
    /// other logged event must be the one the seeded world produces next.
    fn recover(&mut self, at: At, event: &Event, effects: &[Effect]) -> Result<(), String> {
        if !matches!(event, Event::Tick | Event::Operator { .. }) {
            let expected = serde_json::to_string(event).unwrap_or_default();
            match Simulation::next_event(self, at) {
                Some((got_at, got)) if got_at == at && serde_json::to_string(&got).unwrap_or_default() == expected => {}
                Some((got_at, got)) => return Err(format!("the log has {} at {at}, the simulation gives {} at {got_at}", event.kind(), got.kind())),
                None => return Err(format!("the log has {} at {at}, the simulation has nothing then", event.kind())),
            }
        }
        Simulation::handle(self, at, effects);
        Ok(())
    }
}

/// A command's id in the commands table and what the room made of it.
pub type CommandOutcome = (i64, Result<String, String>);

/// What resuming a crashed run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Events re-applied from the log.
    pub events: u64,
    /// Commands still pending (the engine applies them next).
    pub pending_commands: usize,
}

/// The room, the world it runs on, and the log: the crate's runners reach
/// the parts directly; outside the crate, through the methods below.
pub struct Engine<W: World = Simulation> {
    pub(crate) room: Room,
    pub(crate) world: W,
    pub(crate) store: Option<Store>,
    /// Snapshot the room every this many events at least (0: never).
    pub(crate) snapshot_every: u64,
    last_seq: i64,
    since_snapshot: u64,
    /// Events until the next snapshot: more than `snapshot_every` when the
    /// room is big, so that writing snapshots stays a small, fixed share of
    /// the work (`SNAPSHOT_BYTES_PER_EVENT`).
    snapshot_gap: u64,
}

/// A snapshot of `n` bytes of JSON waits at least `n / this` events: a
/// month's 27 MB room is saved every ~105,000 events (a few seconds to
/// replay after a crash), the default cluster's every 20,000. Every 20,000
/// events, the 1,000-GPU month spent 12% of its logged run saving rooms.
const SNAPSHOT_BYTES_PER_EVENT: u64 = 256;

impl<W: World> Engine<W> {
    pub fn new(room: Room, world: W, store: Option<Store>) -> Engine<W> {
        Engine { room, world, store, snapshot_every: 20_000, last_seq: 0, since_snapshot: 0, snapshot_gap: 0 }
    }

    pub fn room(&self) -> &Room {
        &self.room
    }

    /// The room, the engine done with.
    pub fn into_room(self) -> Room {
        self.room
    }

    pub fn world(&self) -> &W {
        &self.world
    }

    pub fn world_mut(&mut self) -> &mut W {
        &mut self.world
    }

    /// The log, when the engine records one.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    pub fn store_mut(&mut self) -> Option<&mut Store> {
        self.store.as_mut()
    }

    /// Takes the log away from the engine (it records nothing after).
    pub fn take_store(&mut self) -> Option<Store> {
        self.store.take()
    }

    /// Snapshot the room every `events` events at least (0: never).
    pub fn set_snapshot_every(&mut self, events: u64) {
        self.snapshot_every = events;
    }

    fn feed(&mut self, at: At, event: &Event) -> Result<Vec<Effect>, StoreError> {
        if let Some(store) = self.store.as_mut() {
            self.last_seq = store.append(at, event)?;
        }
        let effects = self.room.apply(at, event);
        if let Some(store) = self.store.as_mut() {
            for effect in &effects {
                match effect {
                    Effect::Ledger { lines } => store.append_ledger(lines)?,
                    Effect::Audit { actor, action, outcome } => store.append_audit(at, actor, action, outcome)?,
                    _ => {}
                }
            }
        }
        self.world.handle(at, &effects);
        self.since_snapshot += 1;
        if self.snapshot_every > 0 && self.since_snapshot >= self.snapshot_every.max(self.snapshot_gap) {
            self.since_snapshot = 0;
            if let Some(store) = self.store.as_mut() {
                let bytes = store.snapshot(self.last_seq, &self.room)?;
                self.snapshot_gap = bytes as u64 / SNAPSHOT_BYTES_PER_EVENT;
            }
        }
        Ok(effects)
    }

    /// Rebuilds the room and the world from `store`'s log (a run whose
    /// engine died) and goes on writing it. Every event is applied again in
    /// order; ledger lines and audit rows are not written again (they were
    /// committed with their events). The world checks the log against what
    /// it regenerates, so a log from another seed or configuration is refused.
    pub fn resume(room: Room, world: W, store: Store) -> Result<(Engine<W>, Recovery), StoreError> {
        let mut engine = Engine::new(room, world, None);
        let mut diverged = None;
        let events = store.for_each_event(0, |seq, at, event| {
            if diverged.is_some() {
                return;
            }
            let effects = engine.room.apply(at, &event);
            if let Err(why) = engine.world.recover(at, &event, &effects) {
                diverged = Some(StoreError::BadEvent { path: store.path().display().to_string(), seq, message: format!("cannot resume: {why}") });
            }
        })?;
        if let Some(e) = diverged {
            return Err(e);
        }
        let pending_commands = store.pending_commands(usize::MAX >> 1)?.len();
        engine.last_seq = store.last_seq();
        engine.store = Some(store);
        Ok((engine, Recovery { events, pending_commands }))
    }

    /// Applies the attached consoles' pending commands, oldest first, each in
    /// the batch that acknowledges it. Returns each command's id and outcome.
    pub fn apply_commands(&mut self, now_ms: i64) -> Result<Vec<CommandOutcome>, StoreError> {
        let Some(store) = self.store.as_ref() else { return Ok(Vec::new()) };
        let pending = store.pending_commands(256)?;
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        // The event, its audit row and the acknowledgement commit together.
        let own_batch = self.begin_batch()?;
        let mut outcomes = Vec::with_capacity(pending.len());
        for command in pending {
            let (outcome, seq) = match (command.actor, command.action) {
                (Ok(actor), Ok(action)) => {
                    let outcome = self.operate_in_batch(&actor, action)?;
                    (outcome, Some(self.last_seq))
                }
                (Err(why), _) | (_, Err(why)) => (Err(why), None),
            };
            if let Some(store) = self.store.as_mut() {
                store.finish_command(command.id, seq, &outcome, now_ms)?;
            }
            outcomes.push((command.id, outcome));
        }
        if own_batch {
            self.end_batch()?;
        }
        Ok(outcomes)
    }

    /// Carries out an operator's action now (at the room's clock): logged,
    /// applied, its effects handed to the executor, and recorded in the
    /// audit table whatever the outcome. Returns what was done, or why the
    /// room refused it (`Err` inside `Ok`); the outer error is the store's.
    /// Event and audit row are one batch (the open one, if any).
    pub fn operate(&mut self, actor: &Actor, action: Action) -> Result<Result<String, String>, StoreError> {
        let own_batch = self.begin_batch()?;
        let outcome = self.operate_in_batch(actor, action)?;
        if own_batch {
            self.end_batch()?;
        }
        Ok(outcome)
    }

    /// Opens a batch unless one is open; says whether it opened one.
    pub fn begin_batch(&mut self) -> Result<bool, StoreError> {
        match self.store.as_mut() {
            Some(store) if !store.in_batch() => store.begin().map(|_| true),
            _ => Ok(false),
        }
    }

    /// Commits the open batch.
    pub fn end_batch(&mut self) -> Result<(), StoreError> {
        match self.store.as_mut() {
            Some(store) => store.commit(),
            None => Ok(()),
        }
    }

    fn operate_in_batch(&mut self, actor: &Actor, action: Action) -> Result<Result<String, String>, StoreError> {
        let at = self.room.now().unwrap_or_else(|| self.world.start());
        let event = Event::Operator { actor: actor.clone(), action: action.clone() };
        let effects = self.feed(at, &event)?;
        let refused = effects.iter().find_map(|e| match e {
            Effect::Rejected { reason } => Some(reason.clone()),
            _ => None,
        });
        // An action the room carried out is always its newest audit entry.
        let outcome = match refused {
            Some(reason) => Err(reason),
            None => Ok(self.room.last_audit().map(|a| a.what.clone()).unwrap_or_default()),
        };
        if let Some(store) = self.store.as_mut() {
            store.append_audit(at, actor, &action, &outcome)?;
        }
        Ok(outcome)
    }

    /// Runs the world up to `until` (inclusive) and leaves the room's clock
    /// there, with one `Tick` if nothing else happened at `until`. Returns the
    /// number of events applied. The batch is one transaction.
    pub fn run_until(&mut self, until: At) -> Result<u64, StoreError> {
        Ok(self.run_toward(until, u64::MAX)?.0)
    }

    /// Like `run_until`, but stops after `max_events` events: a batch stays
    /// bounded however far `until` is (a fast clock, a long step). Returns
    /// the events applied and whether `until` was reached; when it was not,
    /// the room's clock stays at the last event and no `Tick` is added.
    pub fn run_toward(&mut self, until: At, max_events: u64) -> Result<(u64, bool), StoreError> {
        let own_batch = self.begin_batch()?;
        let mut applied = 0;
        while applied < max_events
            && let Some((at, event)) = self.world.next_event(until)
        {
            let _ = self.feed(at, &event)?;
            applied += 1;
        }
        let reached = applied < max_events;
        if reached && self.room.now().is_none_or(|now| now < until) {
            let _ = self.feed(until, &Event::Tick)?;
            applied += 1;
        }
        if own_batch {
            self.end_batch()?;
        }
        Ok((applied, reached))
    }
}
