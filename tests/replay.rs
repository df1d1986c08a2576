//! The event log is the truth: a recorded simulated run, replayed into a fresh
//! `Room` from a real SQLite file, gives the identical state and `View` —
//! from the beginning and from the latest snapshot.

use std::path::Path;

use chrono::TimeDelta;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::engine::Engine;
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::{replay, RunMeta, Store};

fn record(path: &Path, hours: i64, seed: u64, snapshot_every: u64) -> Room {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let start = config.start;
    let meta = RunMeta { room_config: RoomConfig::default(), source: format!("test seed={seed}"), created_with: "test".into(), world: None };
    let store = Store::create(path, &meta).unwrap();
    let world = Simulation::new(config, &traces, seed).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, Some(store));
    engine.snapshot_every = snapshot_every;
    // In steps, as the console does (one batch per tick).
    for minute in (10..=hours * 60).step_by(10) {
        engine.run_until(start + TimeDelta::minutes(minute)).unwrap();
    }
    engine.room
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
    record(&path, 1, 1, 0);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("UPDATE events SET body = '{\"JobStarted\":' WHERE seq = 42", []).unwrap();
    }
    let store = Store::open_read_only(&path).unwrap();
    let err = replay(&store, false).expect_err("damaged");
    let text = err.to_string();
    assert!(text.contains("run.db") && text.contains("event 42"), "{text}");
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
