//! Persistence: one SQLite file per engine, in WAL mode.
//!
//! * `events` — the append-only event log. Each event is written before it
//!   is applied; replaying the log into a fresh `Room` rebuilds the state.
//!   Telemetry, nearly all of a log's bytes, is kept as compact binary
//!   frames, every other event as JSON (see `events`, `frames`).
//! * `snapshots` — the whole `Room` every so often (the newest two kept), so
//!   a replay can start from the latest one instead of the beginning.
//! * `meta` — the `RoomConfig` the run started with and what produced it.
//! * `ledger` — append-only cost lines (see `ledger`).
//! * `audit` — append-only operator actions with their outcome (see `audit`).
//! * `lease` — which engine process owns the log (see `lease`).
//! * `commands`, `views` — actions from attached consoles and the view
//!   published for them (see `commands`); consoles queue actions through
//!   the inbox folder beside the log (see `inbox`), never by writing it.
//!
//! Who may read and write the file, and how it is created and opened
//! read-only, is `file`'s.
//!
//! Durability: `synchronous=NORMAL` under WAL. A commit survives a crash of
//! the process (it is in the WAL, which the next open replays); an OS crash or
//! power loss may drop the last commits, never corrupt the file. `FULL`
//! would fsync every commit to survive power loss too; the engine commits
//! once per batch (once per wall-clock tick in the console, four times a
//! second), and what a lost batch held is re-derived: the simulated world is
//! re-run from the log on resume, a live source reports again, and an
//! attached console's command stays pending until its batch is on disk.
//! Everything a batch writes — events, ledger lines, audit rows, command
//! acknowledgements, the heartbeat, the published view — is one transaction,
//! so a killed process loses at most the batch it had not committed, and
//! none of that batch's effects were acknowledged by the store.
//!
//! Owns SQL; knows nothing of the TUI or of how events are produced.

pub mod audit;
pub mod commands;
mod db;
mod events;
pub mod file;
pub mod inbox;
pub mod lease;
pub mod ledger;
mod frames;
mod schema;
mod words;

pub use commands::{Attached, CommandRow, CommandState, PendingCommand, Published};
pub use db::{RunMeta, SimWorld, Store, StoreError};
pub use file::Access;
pub use inbox::Inbox;
pub use lease::{Acquired, Lease, LeaseBeat, LeaseHolder, Liveness};

use crate::room::Room;

/// Rebuilds the state from a log: from the beginning, or from the latest
/// snapshot when `from_snapshot` is set (both must agree; a test checks).
pub fn replay(store: &Store, from_snapshot: bool) -> Result<(Room, u64), StoreError> {
    let (mut room, after) = match (from_snapshot, store.latest_snapshot()?) {
        (true, Some((seq, room))) => (room, seq),
        _ => (Room::new(store.meta()?.room_config), 0),
    };
    let applied = store.for_each_event(after, |_, at, event| {
        room.apply(at, &event);
    })?;
    Ok((room, applied))
}
