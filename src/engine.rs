//! The engine: the thin loop that wires a source of events (the simulated
//! world, later real adapters) through the event log into the `Room`, and the
//! `Room`'s effects back to the executor. One code path for the console, the
//! batch simulation, the tests and (with `store::replay`) replays.
//!
//! Owns the order "append, then apply, then carry out the effects". Holds no
//! policy and draws nothing.

use crate::core::event::Event;
use crate::core::room::Room;
use crate::core::units::At;
use crate::sim::Simulation;
use crate::store::{Store, StoreError};

pub struct Engine {
    pub room: Room,
    pub world: Simulation,
    pub store: Option<Store>,
    /// Snapshot the room every this many events (0: never).
    pub snapshot_every: u64,
    last_seq: i64,
    since_snapshot: u64,
}

impl Engine {
    pub fn new(room: Room, world: Simulation, store: Option<Store>) -> Engine {
        Engine { room, world, store, snapshot_every: 20_000, last_seq: 0, since_snapshot: 0 }
    }

    fn feed(&mut self, at: At, event: &Event) -> Result<(), StoreError> {
        if let Some(store) = self.store.as_mut() {
            self.last_seq = store.append(at, event)?;
        }
        let effects = self.room.apply(at, event);
        if let Some(store) = self.store.as_mut() {
            for effect in &effects {
                if let crate::core::event::Effect::Ledger { lines } = effect {
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
        Ok(())
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
            self.feed(at, &event)?;
            applied += 1;
        }
        if self.room.now().is_none_or(|now| now < until) {
            self.feed(until, &Event::Tick)?;
            applied += 1;
        }
        if let Some(store) = self.store.as_mut() {
            store.commit()?;
        }
        Ok(applied)
    }
}
