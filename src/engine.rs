//! The engine: the thin loop that wires a source of events (the simulated
//! world, or the live adapters through `live::LiveWorld`) through the event
//! log into the `Room`, and the `Room`'s effects back to the executor. One
//! code path for the console, the batch simulation, the tests, live
//! operation and (with `store::replay`) replays.
//!
//! Owns the order "append, then apply, then carry out the effects". Holds no
//! policy and draws nothing.

use crate::core::event::{Action, Actor, Effect, Event};
use crate::core::room::Room;
use crate::core::units::At;
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
}

pub struct Engine<W: World = Simulation> {
    pub room: Room,
    pub world: W,
    pub store: Option<Store>,
    /// Snapshot the room every this many events (0: never).
    pub snapshot_every: u64,
    last_seq: i64,
    since_snapshot: u64,
}

impl<W: World> Engine<W> {
    pub fn new(room: Room, world: W, store: Option<Store>) -> Engine<W> {
        Engine { room, world, store, snapshot_every: 20_000, last_seq: 0, since_snapshot: 0 }
    }

    fn feed(&mut self, at: At, event: &Event) -> Result<Vec<Effect>, StoreError> {
        if let Some(store) = self.store.as_mut() {
            self.last_seq = store.append(at, event)?;
        }
        let effects = self.room.apply(at, event);
        if let Some(store) = self.store.as_mut() {
            for effect in &effects {
                if let Effect::Ledger { lines } = effect {
                    store.append_ledger(lines)?;
                }
            }
        }
        self.world.handle(at, &effects);
        self.since_snapshot += 1;
        if self.snapshot_every > 0 && self.since_snapshot >= self.snapshot_every {
            self.since_snapshot = 0;
            if let Some(store) = self.store.as_mut() {
                store.snapshot(self.last_seq, &self.room)?;
            }
        }
        Ok(effects)
    }

    /// Carries out an operator's action now (at the room's clock): logged,
    /// applied, its effects handed to the executor, and recorded in the
    /// audit table whatever the outcome. Returns what was done, or why the
    /// room refused it (`Err` inside `Ok`); the outer error is the store's.
    pub fn operate(&mut self, actor: &Actor, action: Action) -> Result<Result<String, String>, StoreError> {
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
        if let Some(store) = self.store.as_mut() {
            store.begin()?;
        }
        let mut applied = 0;
        while let Some((at, event)) = self.world.next_event(until) {
            let _ = self.feed(at, &event)?;
            applied += 1;
        }
        if self.room.now().is_none_or(|now| now < until) {
            let _ = self.feed(until, &Event::Tick)?;
            applied += 1;
        }
        if let Some(store) = self.store.as_mut() {
            store.commit()?;
        }
        Ok(applied)
    }
}
