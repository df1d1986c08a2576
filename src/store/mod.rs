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
//! * `commands`, `views` — actions from attached consoles, which reach the
//!   engine over its socket and never open the log, and the last view the
//!   engine published (see `commands`).
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
mod frames;
pub mod lease;
pub mod ledger;
mod schema;
mod words;

pub use commands::{CommandRow, CommandState, PendingCommand, Published, Queued};
pub use db::{RunMeta, SimWorld, Store, StoreError, WalState};
pub use file::Access;
pub use lease::{Acquired, Lease, LeaseBeat, LeaseHolder, Liveness};

use crate::room::Room;

/// What a replay rebuilt, and what it noticed on the way.
#[derive(Debug)]
pub struct Replayed {
    pub room: Room,
    /// Events applied (after the snapshot it started from, if any).
    pub applied: u64,
    /// The event of the snapshot it started from, if it started from one.
    pub started_after: Option<i64>,
    /// Snapshots the replayed room was compared with, and matched.
    pub checked: Vec<i64>,
    /// What could not be used, and what was done instead (a damaged snapshot).
    pub notes: Vec<String>,
}

/// Rebuilds the state from a log: from the beginning, or from the latest
/// snapshot when `from_snapshot` is set (both must agree; a test checks).
pub fn replay(store: &Store, from_snapshot: bool) -> Result<(Room, u64), StoreError> {
    replay_checked(store, from_snapshot).map(|r| (r.room, r.applied))
}

/// `replay`, cross-checked: every snapshot the replay passes is compared
/// with the room rebuilt up to its event, byte for byte as the engine saved
/// it, and the first that differs stops the replay with an error naming the
/// event and the parts of the room that differ. A snapshot that cannot be
/// read is never in the way: a full replay does not need it, and one asked
/// to start from it starts from the one before, or from the first event,
/// with a note.
pub fn replay_checked(store: &Store, from_snapshot: bool) -> Result<Replayed, StoreError> {
    let seqs = store.snapshot_seqs()?;
    let mut notes = Vec::new();
    let mut start: Option<(i64, Room)> = None;
    if from_snapshot {
        for &seq in seqs.iter().rev() {
            match store.snapshot_json(seq).and_then(|json| decode_room(store, seq, &json)) {
                Ok(room) => {
                    start = Some((seq, room));
                    break;
                }
                Err(e) => notes.push(format!("the snapshot after event {seq} cannot be read ({e}); not used")),
            }
        }
        if start.is_none() && !seqs.is_empty() {
            notes.push("no snapshot could be read: replayed from the first event".to_string());
        }
    }
    let started_after = start.as_ref().map(|(seq, _)| *seq);
    let (mut room, after) = match start {
        Some((seq, room)) => (room, seq),
        None => (Room::new(store.meta()?.room_config), 0),
    };
    let mut to_check = seqs.into_iter().filter(|&s| s > after).peekable();
    let mut checked = Vec::new();
    let mut parted: Option<StoreError> = None;
    let mut last_agreed = started_after;
    let applied = store.for_each_event(after, |seq, at, event| {
        if parted.is_some() {
            return;
        }
        room.apply(at, &event);
        if to_check.peek() != Some(&seq) {
            return;
        }
        to_check.next();
        match store.snapshot_json(seq).map(|saved| compare(&room, &saved)) {
            Ok(Compared::Same) => {
                checked.push(seq);
                last_agreed = Some(seq);
            }
            Ok(Compared::Parts(parts)) => parted = Some(parting(store, seq, last_agreed, &parts)),
            Ok(Compared::Unreadable(why)) => notes.push(format!("the snapshot after event {seq} cannot be read ({why}); not compared")),
            Err(e) => notes.push(format!("the snapshot after event {seq} cannot be read ({e}); not compared")),
        }
    })?;
    if let Some(e) = parted {
        return Err(e);
    }
    Ok(Replayed { room, applied, started_after, checked, notes })
}

fn decode_room(store: &Store, seq: i64, json: &[u8]) -> Result<Room, StoreError> {
    serde_json::from_slice(json).map_err(|e| StoreError::Format { path: store.path().display().to_string(), message: format!("snapshot {seq}: {e}") })
}

/// How a rebuilt room compares with a saved snapshot.
enum Compared {
    /// It serializes to exactly the saved bytes.
    Same,
    /// The room's parts (its JSON's top-level names) that differ.
    Parts(Vec<String>),
    /// The saved bytes are no room at all (damage, not a parting).
    Unreadable(String),
}

fn compare(room: &Room, saved: &[u8]) -> Compared {
    let now = match serde_json::to_vec(room) {
        Ok(now) => now,
        Err(e) => return Compared::Unreadable(format!("the room could not be serialized: {e}")),
    };
    if now == saved {
        return Compared::Same;
    }
    let parse = |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes);
    match (parse(&now), parse(saved)) {
        (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            Compared::Parts(keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).map(|k| k.to_string()).collect())
        }
        (_, Err(e)) => Compared::Unreadable(e.to_string()),
        (_, Ok(_)) => Compared::Unreadable("it is not a room".to_string()),
    }
}

fn parting(store: &Store, seq: i64, last_agreed: Option<i64>, parts: &[String]) -> StoreError {
    let since = match last_agreed {
        Some(agreed) => format!("events {} to {seq}", agreed + 1),
        None => format!("events 1 to {seq}"),
    };
    let parts = if parts.is_empty() { "its layout".to_string() } else { parts.join(", ") };
    StoreError::BadEvent {
        path: store.path().display().to_string(),
        seq,
        message: format!(
            "the replayed room parts from the snapshot the engine saved after this event, in: {parts}. One of {since} is not what the engine \
             applied (edited, or damaged before checksums), or this gpuroom applies it differently from the one that wrote the log"
        ),
    }
}
