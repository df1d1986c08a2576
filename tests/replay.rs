//! The event log is the truth: a recorded simulated run, replayed into a fresh
//! `Room` from a real SQLite file, gives the identical state and `View` —
//! from the beginning and from the latest snapshot.

use std::path::Path;

use chrono::TimeDelta;
use gpuroom::engine::Engine;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::{RunMeta, Store, replay};

fn record(path: &Path, hours: i64, seed: u64, snapshot_every: u64) -> Room {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let start = config.start;
    let meta = RunMeta { room_config: RoomConfig::default(), source: format!("test seed={seed}"), created_with: "test".into(), world: None };
    let store = Store::create(path, &meta).unwrap();
    let world = Simulation::new(config, &traces, seed).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, Some(store));
    engine.set_snapshot_every(snapshot_every);
    // In steps, as the console does (one batch per tick).
    for minute in (10..=hours * 60).step_by(10) {
        engine.run_until(start + TimeDelta::minutes(minute)).unwrap();
    }
    engine.into_room()
}

#[test]
fn replaying_the_log_rebuilds_the_identical_state_and_view() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let live = record(&path, 12, 7, 500);
    let live_view = live.view();
    assert!(live_view.totals.stats.done > 50, "a busy run: {:?}", live_view.totals.stats);
    assert!(live_view.totals.stats.notices > 0, "interruptions happened");

    let store = Store::open_read_only(&path).unwrap();
    let (from_start, applied) = replay(&store, false).unwrap();
    assert_eq!(applied as i64, store.event_count().unwrap());
    assert_eq!(from_start.view(), live_view);
    assert_eq!(from_start, live);

    // Snapshots were taken every 500 events; only the newest two are kept.
    let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let kept: i64 = conn.query_row("SELECT COUNT(*) FROM snapshots", [], |r| r.get(0)).unwrap();
    assert!(applied > 3 * 500 && kept == 2, "{kept} snapshots kept of {applied} events");
    let (from_snapshot, tail) = replay(&store, true).unwrap();
    assert!(tail < applied, "the snapshot shortened the replay ({tail} of {applied})");
    assert_eq!(from_snapshot.view(), live_view);
    assert_eq!(from_snapshot, live);

    // Snapshots are deflated JSON; one a version-5 log wrote as JSON text reads too.
    let kind: String = conn.query_row("SELECT typeof(room) FROM snapshots ORDER BY seq DESC LIMIT 1", [], |r| r.get(0)).unwrap();
    assert_eq!(kind, "blob");
    drop((conn, store));
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("INSERT INTO snapshots (seq, at, room) VALUES (?1, 'x', ?2)", rusqlite::params![applied as i64, serde_json::to_string(&live).unwrap()])
        .unwrap();
    drop(conn);
    let (from_text, tail) = replay(&Store::open_read_only(&path).unwrap(), true).unwrap();
    assert_eq!((tail, from_text), (0, live));
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let dir = tempfile::tempdir().unwrap();
    let a = record(&dir.path().join("a.db"), 3, 1, 0);
    let b = record(&dir.path().join("b.db"), 3, 1, 0);
    let c = record(&dir.path().join("c.db"), 3, 2, 0);
    assert_eq!(a, b);
    assert_ne!(a.view(), c.view());
}

#[test]
fn a_recorded_run_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    record(&path, 1, 1, 0);
    let meta = RunMeta { room_config: RoomConfig::default(), source: "again".into(), created_with: "test".into(), world: None };
    let err = Store::create(&path, &meta).err().expect("refused");
    assert!(err.to_string().contains("refusing to overwrite"), "{err}");
    assert!(Store::open_read_only(&path).unwrap().event_count().unwrap() > 0, "still intact");
}

#[test]
fn a_damaged_log_is_reported_with_the_event_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    record(&path, 3, 1, 0);
    let pristine = std::fs::read(&path).unwrap();
    // The n-th event of a kind: a JSON body, a telemetry frame coded against
    // the one before it, and the key frame a later frame's chain starts at.
    let nth = |sql: &str| -> i64 { rusqlite::Connection::open(&path).unwrap().query_row(sql, [], |r| r.get(0)).unwrap() };
    let damages: [(&str, &str); 4] = [
        ("SELECT seq FROM events WHERE packed IS NULL LIMIT 1 OFFSET 41", "UPDATE events SET body = '{\"JobStarted\":' WHERE seq = ?1"),
        (
            "SELECT seq FROM events WHERE packed IS NOT NULL LIMIT 1 OFFSET 40",
            "UPDATE events SET packed = substr(packed, 1, length(packed) - 1) WHERE seq = ?1",
        ),
        ("SELECT seq FROM events WHERE packed IS NOT NULL LIMIT 1 OFFSET 40", "UPDATE events SET packed = x'07' WHERE seq = ?1"),
        ("SELECT seq FROM events WHERE packed IS NOT NULL LIMIT 1 OFFSET 60", "UPDATE events SET packed = NULL, body = '\"Tick\"' WHERE seq = ?1"),
    ];
    for (find, damage) in damages {
        std::fs::write(&path, &pristine).unwrap();
        let seq = nth(find);
        rusqlite::Connection::open(&path).unwrap().execute(damage, [seq]).unwrap();
        let store = Store::open_read_only(&path).unwrap();
        let err = replay(&store, false).expect_err("damaged");
        let text = err.to_string();
        // A frame whose base was replaced is reported at the frame that needs it.
        let named = text.contains(&format!("event {seq}:")) || text.contains(&format!("event {}:", seq + 1));
        assert!(text.contains("run.db") && named, "{damage} at {seq}: {text}");
    }
}

#[test]
fn files_that_are_not_event_logs_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a database, just some bytes that go on for a while......").unwrap();
    let err = Store::open_read_only(&junk).err().expect("refused").to_string();
    assert!(err.contains("junk.db"), "{err}");

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    let err = Store::open_read_only(&other).err().expect("refused").to_string();
    assert!(err.contains("not a gpuroom event log"), "{err}");

    let missing = Store::open_read_only(&dir.path().join("missing.db")).err().expect("refused").to_string();
    assert!(missing.contains("no such file"), "{missing}");
}

/// Every event as its JSON, read from the log after event `after`.
fn events_after(store: &Store, after: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    store.for_each_event(after, |seq, at, e| out.push((seq, format!("{} {}", at.to_rfc3339(), serde_json::to_string(&e).unwrap())))).unwrap();
    out
}

#[test]
fn telemetry_is_kept_as_compact_frames_that_read_back_the_same_from_any_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    record(&path, 8, 3, 0);
    let store = Store::open_read_only(&path).unwrap();
    let all = events_after(&store, 0);
    // Reading from the middle of a chain of frames (as a replay from a
    // snapshot does) fetches the chain back to its key frame first.
    for after in (1..all.len() as i64).step_by(37) {
        assert_eq!(events_after(&store, after), all[after as usize..], "read after event {after}");
    }
    let telemetry_json: usize = all.iter().filter(|(_, e)| e.contains("{\"Telemetry\"")).map(|(_, e)| e.len()).sum();
    let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let (frames, frame_bytes, json_bodies): (i64, i64, i64) = conn
        .query_row("SELECT COUNT(*), SUM(LENGTH(packed)), SUM(LENGTH(body)) FROM events WHERE kind = 'telemetry'", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(frames as usize, all.iter().filter(|(_, e)| e.contains("{\"Telemetry\"")).count());
    assert_eq!(json_bodies, 0, "no telemetry kept as JSON");
    assert!((frame_bytes as usize) * 5 < telemetry_json, "{frame_bytes} bytes of frames for {telemetry_json} of JSON");
}

/// A log written by gpuroom 0.x at schema 5 (telemetry as JSON), kept as it was.
const V5_LOG: &str = "fixtures/logs/v5-default-4h-seed7.db";

#[test]
fn a_version_5_log_is_read_as_it_is_and_resumed_as_the_current_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    std::fs::copy(V5_LOG, &path).unwrap();
    let version = |path: &Path| -> String {
        let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        conn.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(version(&path), "5");
    let (before, view_before) = {
        let store = Store::open_read_only(&path).unwrap();
        let (room, applied) = replay(&store, false).unwrap();
        assert_eq!(applied, 825);
        (events_after(&store, 0), room.view())
    };
    let ledger = |path: &Path| {
        let store = Store::open_read_only(path).unwrap();
        let (from, to) = (chrono::DateTime::<chrono::Utc>::MIN_UTC, chrono::DateTime::<chrono::Utc>::MAX_UTC);
        (store.ledger_lines(from, to).unwrap(), store.ledger_total().unwrap(), store.ledger_rollup(gpuroom::store::ledger::Level::Model, from, to).unwrap())
    };
    let ledger_before = ledger(&path);
    assert_eq!(ledger_before.0.len(), 235);
    assert_eq!(version(&path), "5", "reading wrote nothing");
    // A version-5 engine's lease is seen as it is, not hidden by an empty stand-in.
    let leased = dir.path().join("v5-leased.db");
    std::fs::copy(V5_LOG, &leased).unwrap();
    rusqlite::Connection::open(&leased).unwrap().execute("INSERT INTO lease VALUES (1, 4242, 'head-1', 0, 0)", []).unwrap();
    let lease = Store::open_read_only(&leased).unwrap().lease().unwrap().expect("the lease row");
    assert_eq!((lease.holder.pid, lease.holder.host.as_str()), (4242, "head-1"));
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(V5_LOG).unwrap(), "reading changed no byte");

    // Resumed: the column is added, the old events stay as they were, and
    // new telemetry is kept as frames, the first of them a key frame.
    let telemetry: Vec<_> = before.iter().filter(|(_, e)| e.contains("{\"Telemetry\"")).collect();
    assert!(telemetry.len() > 100);
    {
        let mut store = Store::open_for_writing(&path).unwrap();
        assert_eq!(version(&path), "8");
        // The migration ran in WAL mode: a kill inside it leaves no hot journal.
        assert!(!gpuroom::store::file::sibling(&path, "-journal").exists());
        let store_events = {
            let mut out = Vec::new();
            Store::open_read_only(Path::new(V5_LOG)).unwrap().for_each_event(0, |_, at, e| out.push((at, e))).unwrap();
            out
        };
        store.begin().unwrap();
        let later = chrono::TimeDelta::hours(4);
        for (at, e) in store_events.iter().filter(|(_, e)| e.kind() == "telemetry").take(130) {
            store.append(*at + later, e).unwrap();
        }
        // A live source's time, to the nanosecond, is kept as it was.
        let last = store_events.last().unwrap().0;
        let live_time = last + later + chrono::TimeDelta::nanoseconds(123_456_789);
        store.append(live_time, &gpuroom::domain::event::Event::Tick).unwrap();
        store.commit().unwrap();
    }
    let store = Store::open_read_only(&path).unwrap();
    let after = events_after(&store, 0);
    assert_eq!(after[..before.len()], before[..], "the version-5 events read the same");
    assert_eq!(after.len(), before.len() + 131);
    assert!(after.last().unwrap().1.split_once(' ').unwrap().0.ends_with(".123456789+00:00"), "{:?}", after.last());
    assert_eq!(ledger(&path), ledger_before, "the ledger's lines moved into the schema-6 tables as they were");
    for ((_, old), (_, new)) in telemetry.iter().zip(&after[before.len()..before.len() + 130]) {
        assert_eq!(old.split_once(' ').unwrap().1, new.split_once(' ').unwrap().1);
    }
    let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let packed: i64 = conn.query_row("SELECT COUNT(*) FROM events WHERE packed IS NOT NULL", [], |r| r.get(0)).unwrap();
    let keys: i64 = conn.query_row("SELECT COUNT(*) FROM events WHERE substr(packed, 1, 1) = x'01'", [], |r| r.get(0)).unwrap();
    assert_eq!((packed, keys), (130, 2), "a key frame first and one after 120 frames");
    let summed: i64 = conn.query_row("SELECT COUNT(*) FROM events WHERE sum IS NOT NULL", [], |r| r.get(0)).unwrap();
    assert_eq!(summed, 131, "the events written after the upgrade carry a checksum, the version-5 ones are read unchecked");
    let (room, _) = replay(&Store::open_read_only(&path).unwrap(), false).unwrap();
    assert_ne!(room.view(), view_before, "the new telemetry was applied");
}
