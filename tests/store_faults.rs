//! The event log under bad conditions, on real SQLite files: a disk that
//! fills up mid-run, a file that is corrupt, truncated, not a gpuroom log
//! or read-only. Each gives one clear error naming the file, and nothing
//! already written is lost: the file is left as it was, and what was
//! committed replays and reconciles.

mod common;

use std::path::Path;
use std::process::Command;

use chrono::TimeDelta;
use gpuroom::engine::Engine;
use gpuroom::room::Room;
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::{self, RunMeta, SimWorld, Store};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

fn meta() -> RunMeta {
    let (name, text) = gpuroom::sim::data::DEFAULT_CONFIG;
    let world = SimWorld { seed: 4, config_name: name.into(), config_toml: text.into() };
    RunMeta { room_config: Default::default(), source: "fault test".into(), created_with: "test".into(), world: Some(world) }
}

fn sim(traces: &Traces) -> Simulation {
    Simulation::new(SimConfig::default_embedded(), traces, 4).unwrap()
}

/// A real recorded run of a few simulated hours.
fn recorded(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("run.db");
    let out = Command::new(BIN).args(["sim", "--hours", "6", "--seed", "4", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    db
}

fn gpuroom(args: &[&str], db: &Path) -> (bool, String) {
    let out = Command::new(BIN).args(args).arg(db).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_full_disk_stops_the_engine_with_a_clear_error_and_keeps_every_committed_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("full.db");
    let traces = Traces::embedded().unwrap();
    let mut store = Store::create(&db, &meta()).unwrap();
    // Room for a few hours of events, not for a week.
    store.limit_pages(400).unwrap();
    let mut engine = Engine::new(Room::default(), sim(&traces), Some(store));
    let start = engine.world().config().start;
    let mut hours = 0;
    let err = loop {
        hours += 1;
        match engine.run_until(start + TimeDelta::hours(hours)) {
            Ok(_) => assert!(hours < 24 * 30, "the log never filled up"),
            Err(e) => break e,
        }
    };
    let message = err.to_string();
    assert!(message.contains("full.db") && message.contains("the disk is full"), "{message}");
    drop(engine);

    // What was committed is whole: contiguous, replayable, reconciled.
    let store = Store::open_read_only(&db).unwrap();
    let count = store.event_count().unwrap();
    assert!(count > 100, "only {count} events were kept");
    let mut expected = 1;
    store
        .for_each_event(0, |seq, _, _| {
            assert_eq!(seq, expected, "a gap in the log");
            expected += 1;
        })
        .unwrap();
    let (room, _) = store::replay(&store, false).unwrap();
    let all = store.ledger_lines(chrono::DateTime::<chrono::Utc>::MIN_UTC, chrono::DateTime::<chrono::Utc>::MAX_UTC).unwrap();
    common::check_ledger(&room, &all, "the committed part of a log that filled the disk");
    drop(store);

    // With room again, the run resumes from the log and goes on.
    let store = Store::open_for_writing(&db).unwrap();
    let (mut engine, recovery) = Engine::resume(Room::default(), sim(&traces), store).unwrap();
    assert_eq!(recovery.events, count as u64);
    engine.run_until(start + TimeDelta::hours(hours + 2)).unwrap();
    assert!(engine.store().unwrap().event_count().unwrap() > count);
}

#[test]
fn a_corrupt_truncated_or_foreign_file_is_named_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let good = recorded(dir.path());
    let bytes = std::fs::read(&good).unwrap();

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage.db", b"these are not the pages you are looking for\n".repeat(200), "not an SQLite database"),
        ("truncated.db", bytes[..bytes.len() / 3].to_vec(), "corrupt"),
        (
            "scribbled.db",
            {
                let mut b = bytes.clone();
                let middle = b.len() / 2;
                b[middle..middle + 4096].fill(0xA5);
                b
            },
            "corrupt",
        ),
    ];
    for (name, content, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &content).unwrap();
        for args in [&["replay"][..], &["engine", "--speed", "max", "--until-hours", "1", "--db"][..]] {
            let (ok, stderr) = gpuroom(args, &path);
            assert!(!ok, "gpuroom {args:?} accepted {name}");
            assert!(stderr.contains(name), "{name}: the error does not name the file: {stderr}");
            assert!(stderr.contains(expected) || stderr.contains("not a gpuroom event log"), "{name} ({args:?}): {stderr}");
            assert_eq!(std::fs::read(&path).unwrap(), content, "{name} was changed by gpuroom {args:?}");
        }
    }

    // A real SQLite database that is not a gpuroom log.
    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
    let (ok, stderr) = gpuroom(&["replay"], &foreign);
    assert!(!ok && stderr.contains("foreign.db") && stderr.contains("not a gpuroom event log"), "{stderr}");
}

#[test]
fn a_read_only_log_is_refused_for_writing_and_still_replays() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = recorded(dir.path());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let (ok, stderr) = gpuroom(&["engine", "--speed", "max", "--until-hours", "8", "--db"], &db);
    assert!(!ok && stderr.contains("run.db") && stderr.contains("read-only"), "{stderr}");
    assert_eq!(std::fs::read(&db).unwrap(), before, "a read-only log was changed");
    let (ok, stderr) = gpuroom(&["replay"], &db);
    assert!(ok, "replay of a read-only log: {stderr}");
}

#[test]
fn a_log_from_another_seed_is_not_resumed_as_if_it_were_this_world() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("seed.db");
    let traces = Traces::embedded().unwrap();
    let mut engine = Engine::new(Room::default(), sim(&traces), Some(Store::create(&db, &meta()).unwrap()));
    let start = engine.world().config().start;
    engine.run_until(start + TimeDelta::hours(3)).unwrap();
    drop(engine);
    let other = Simulation::new(SimConfig::default_embedded(), &traces, 5).unwrap();
    let Err(err) = Engine::resume(Room::default(), other, Store::open_for_writing(&db).unwrap()) else { panic!("a log of seed 4 resumed on seed 5") };
    let message = err.to_string();
    assert!(message.contains("seed.db") && message.contains("cannot resume"), "{message}");
}
