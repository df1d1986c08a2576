//! The adversarial suite, the log as a file (issue 33, second pass): silent
//! damage, a damaged snapshot, outputs over the log, an interrupted
//! migration, two engines upgrading one old log, a newer log, a what-if on
//! a log still being written or whose world was edited.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chrono::TimeDelta;
use gpuroom::engine::Engine;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::{RunMeta, Store, file, replay, replay_checked};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");
const V5_LOG: &str = "fixtures/logs/v5-default-4h-seed7.db";

/// A simulated run recorded through the engine, snapshots every `every` events.
fn record(path: &Path, hours: i64, seed: u64, every: u64) -> Room {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let start = config.start;
    let meta = RunMeta { room_config: RoomConfig::default(), source: format!("test seed={seed}"), created_with: "test".into(), world: None };
    let store = Store::create(path, &meta).unwrap();
    let world = Simulation::new(config, &traces, seed).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, Some(store));
    engine.set_snapshot_every(every);
    for minute in (10..=hours * 60).step_by(10) {
        engine.run_until(start + TimeDelta::minutes(minute)).unwrap();
    }
    engine.into_room()
}

fn sql(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A reproducible stream of numbers for choosing what to damage.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Issue 33, item 4: of 30 single-bit flips in frames, 13 went unnoticed
/// and 2 changed a report. Now each of 40 flips (frames and JSON bodies)
/// stops the replay at the flipped event.
#[test]
fn every_flipped_bit_in_a_frame_or_a_body_is_named_by_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    record(&path, 3, 2, 0);
    let pristine = std::fs::read(&path).unwrap();
    let conn = sql(&path);
    let frames: Vec<i64> =
        conn.prepare("SELECT seq FROM events WHERE packed IS NOT NULL").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let bodies: Vec<i64> =
        conn.prepare("SELECT seq FROM events WHERE packed IS NULL").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    drop(conn);
    let mut rng = Lcg(33);
    for n in 0..40 {
        std::fs::write(&path, &pristine).unwrap();
        let (seq, column) =
            if n % 2 == 0 { (frames[rng.below(frames.len() as u64) as usize], "packed") } else { (bodies[rng.below(bodies.len() as u64) as usize], "body") };
        let conn = sql(&path);
        let mut bytes: Vec<u8> = conn.query_row(&format!("SELECT CAST({column} AS BLOB) FROM events WHERE seq = ?1"), [seq], |r| r.get(0)).unwrap();
        let bit = rng.below(bytes.len() as u64 * 8);
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        match column {
            "packed" => conn.execute("UPDATE events SET packed = ?1 WHERE seq = ?2", rusqlite::params![bytes, seq]).unwrap(),
            _ => conn.execute("UPDATE events SET body = CAST(?1 AS TEXT) WHERE seq = ?2", rusqlite::params![bytes, seq]).unwrap(),
        };
        drop(conn);
        let err = replay(&Store::open_read_only(&path).unwrap(), false).expect_err("a flipped bit replayed silently").to_string();
        // A frame whose base was flipped is named where the flip is, by its checksum.
        assert!(err.contains(&format!("event {seq}:")), "flip {n} ({column} of event {seq}, bit {bit}): {err}");
        assert!(err.contains("checksum") || column == "body", "flip {n} at {seq}: {err}");
    }
}

/// Issue 33, item 4: an edited body (`ok: true` → `false`) changed the
/// replay's summary without a word. With its checksum it is named; with the
/// checksum removed too, the replay's cross-check against the engine's
/// snapshot names the span and the parts of the room that part.
#[test]
fn an_edited_event_is_caught_by_its_checksum_and_without_it_by_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    record(&path, 6, 7, 400);
    let conn = sql(&path);
    let snapshots: Vec<i64> =
        conn.prepare("SELECT seq FROM snapshots ORDER BY seq").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(snapshots.len(), 2);
    let clean = replay_checked(&Store::open_read_only(&path).unwrap(), false).unwrap();
    assert_eq!(clean.checked, snapshots, "an untouched log matches both snapshots");
    let seq: i64 = conn
        .query_row("SELECT seq FROM events WHERE kind = 'exited' AND body LIKE '%\"ok\":true%' AND seq < ?1 ORDER BY seq DESC LIMIT 1", [snapshots[0]], |r| {
            r.get(0)
        })
        .unwrap();
    conn.execute("UPDATE events SET body = replace(body, '\"ok\":true', '\"ok\":false') WHERE seq = ?1", [seq]).unwrap();
    let err = replay(&Store::open_read_only(&path).unwrap(), false).unwrap_err().to_string();
    assert!(err.contains(&format!("event {seq}:")) && err.contains("checksum does not match"), "{err}");

    conn.execute("UPDATE events SET sum = NULL WHERE seq = ?1", [seq]).unwrap();
    drop(conn);
    let err = replay(&Store::open_read_only(&path).unwrap(), false).unwrap_err().to_string();
    assert!(err.contains(&format!("event {}:", snapshots[0])) && err.contains(&format!("events 1 to {}", snapshots[0])), "{err}");
    assert!(err.contains("parts from the snapshot") && err.contains("in: fleet"), "names the parts: {err}");
    let cli = run(&["replay".as_ref(), path.as_os_str()]);
    assert!(!cli.status.success() && text(&cli).contains("parts from the snapshot"), "{}", text(&cli));
}

/// Issue 33, item 5: a damaged snapshot blocked the full replay that does
/// not need it; `--from-snapshot` falls back, with a note.
#[test]
fn a_damaged_snapshot_is_never_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let live = record(&path, 6, 7, 400);
    let conn = sql(&path);
    let snapshots: Vec<i64> =
        conn.prepare("SELECT seq FROM snapshots ORDER BY seq").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    conn.execute("UPDATE snapshots SET room = x'789c0badbeef' WHERE seq = ?1", [snapshots[1]]).unwrap();
    drop(conn);
    let full = replay_checked(&Store::open_read_only(&path).unwrap(), false).unwrap();
    assert_eq!(full.room, live);
    assert_eq!(full.checked, [snapshots[0]]);
    assert!(full.notes.iter().any(|n| n.contains(&format!("after event {}", snapshots[1])) && n.contains("not compared")), "{:?}", full.notes);

    let from = replay_checked(&Store::open_read_only(&path).unwrap(), true).unwrap();
    assert_eq!((from.room, from.started_after), (live.clone(), Some(snapshots[0])), "from the snapshot before");
    assert!(from.notes.iter().any(|n| n.contains("cannot be read") && n.contains("not used")), "{:?}", from.notes);

    sql(&path).execute("UPDATE snapshots SET room = 'null'", []).unwrap();
    let cli = run(&["replay".as_ref(), "--from-snapshot".as_ref(), path.as_os_str()]);
    assert!(cli.status.success(), "{}", text(&cli));
    assert!(text(&cli).contains("no snapshot could be read: replayed from the first event"), "{}", text(&cli));
}

/// Issue 33, item 7: `export --out` naming the log replaced it with CSV.
#[test]
fn an_output_over_the_log_or_any_database_is_refused_and_the_log_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("month.db");
    let out = run(&["sim".as_ref(), "--hours".as_ref(), "30".as_ref(), "--db".as_ref(), path.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    let before = std::fs::read(&path).unwrap();
    let other = dir.path().join("other.db");
    std::fs::copy(V5_LOG, &other).unwrap();
    for target in [path.clone(), other.clone()] {
        let out = run(&["export".as_ref(), "--db".as_ref(), path.as_os_str(), "--month".as_ref(), "2020-01".as_ref(), "--out".as_ref(), target.as_os_str()]);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("refusing to write"), "{}", text(&out));
        let out = run(&["whatif".as_ref(), "--db".as_ref(), path.as_os_str(), "--discipline".as_ref(), "drf".as_ref(), "--out".as_ref(), target.as_os_str()]);
        assert!(!out.status.success() && text(&out).contains("refusing to write"), "{}", text(&out));
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::read(&other).unwrap(), std::fs::read(V5_LOG).unwrap());
    let csv = dir.path().join("month.csv");
    let out = run(&["export".as_ref(), "--db".as_ref(), path.as_os_str(), "--month".as_ref(), "2020-01".as_ref(), "--out".as_ref(), csv.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() > 10);
}

/// Issue 33, item 8: a `-journal` left by a killed upgrade made read-only
/// tools call the log corrupt. They say what happened and how to recover,
/// and the owner's next engine does recover it.
#[test]
fn a_hot_journal_is_explained_and_the_owner_recovers_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    std::fs::copy(V5_LOG, &path).unwrap();
    // A real hot journal: a rollback-mode write in progress when its process dies.
    let child = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3, os\nc = sqlite3.connect({:?}, isolation_level=None)\nc.execute('PRAGMA journal_mode=DELETE')\nc.execute('BEGIN IMMEDIATE')\nc.execute('UPDATE meta SET value = value')\nc.execute('PRAGMA cache_size=1')\nc.execute(\"CREATE TABLE junk AS SELECT * FROM events\")\nos._exit(9)",
            path.display().to_string()
        ))
        .status()
        .unwrap();
    assert_eq!(child.code(), Some(9));
    assert!(file::sibling(&path, "-journal").exists(), "the killed writer left its journal");
    let out = run(&["replay".as_ref(), path.as_os_str()]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("was interrupted") && said.contains("gpuroom engine --db") && !said.contains("corrupt"), "{said}");
    // The owner's engine rolls it back, and the log reads as it was.
    drop(Store::open_for_writing(&path).unwrap());
    assert!(!file::sibling(&path, "-journal").exists());
    let (_, applied) = replay(&Store::open_read_only(&path).unwrap(), false).unwrap();
    assert_eq!(applied, 825);
}

/// Issue 33, item 9: of two engines resuming one version-5 log, the loser
/// died with `duplicate column name: packed`.
#[test]
fn two_engines_upgrading_one_old_log_both_open_it() {
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v5.db");
        std::fs::copy(V5_LOG, &path).unwrap();
        let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
        let openers: Vec<_> = (0..2)
            .map(|_| {
                let (gate, path) = (gate.clone(), path.clone());
                std::thread::spawn(move || {
                    gate.wait();
                    Store::open_for_writing(&path).map(drop).map_err(|e| e.to_string())
                })
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let version: String = sql(&path).query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
        assert_eq!(version, "8");
    }
}

/// Issue 33, item 9: a log of a newer schema was "written by an older gpuroom".
#[test]
fn a_newer_log_is_called_newer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    record(&path, 1, 1, 0);
    sql(&path).execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'", []).unwrap();
    for err in [Store::open_read_only(&path).err().unwrap().to_string(), Store::open_for_writing(&path).err().unwrap().to_string()] {
        assert!(err.contains("written by a newer gpuroom") && err.contains("schema version 99"), "{err}");
    }
}

/// Issue 33, item 6: a what-if on a log an engine is still writing counted
/// events past the re-runs' horizon. Everything it reads is read in one
/// transaction: what is appended meanwhile is not seen.
#[test]
fn one_read_sees_one_log_while_an_engine_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    record(&path, 2, 1, 0);
    let mut writer = Store::open_for_writing(&path).unwrap();
    let reader = Store::open_read_only(&path).unwrap();
    let (first, second) = reader
        .consistently(|| {
            let first = reader.event_count().unwrap();
            writer.begin().unwrap();
            writer.append(chrono::Utc::now(), &gpuroom::domain::event::Event::Tick).unwrap();
            writer.commit().unwrap();
            (first, reader.event_count().unwrap())
        })
        .unwrap();
    assert_eq!(first, second, "the append is not seen inside the read");
    assert_eq!(reader.event_count().unwrap(), first + 1, "and is seen after it");
}

/// Issue 33, item 9: a what-if on a log whose embedded world was edited ran
/// "exactly" a run that never was, without a word.
#[test]
fn a_whatif_on_an_edited_world_says_the_world_does_not_produce_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("day.db");
    let out = run(&["sim".as_ref(), "--hours".as_ref(), "6".as_ref(), "--db".as_ref(), path.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    let whatif = || run(&["whatif".as_ref(), "--db".as_ref(), path.as_os_str(), "--discipline".as_ref(), "drf".as_ref()]);
    let honest = whatif();
    assert!(honest.status.success() && !text(&honest).contains("does not produce"), "{}", text(&honest));
    let conn = sql(&path);
    let run_meta: String = conn.query_row("SELECT value FROM meta WHERE key = 'run'", [], |r| r.get(0)).unwrap();
    let mut meta: serde_json::Value = serde_json::from_str(&run_meta).unwrap();
    let seed = meta["world"]["seed"].as_u64().unwrap();
    meta["world"]["seed"] = serde_json::json!(seed + 1);
    conn.execute("UPDATE meta SET value = ?1 WHERE key = 'run'", [meta.to_string()]).unwrap();
    drop(conn);
    let edited = whatif();
    assert!(edited.status.success(), "{}", text(&edited));
    assert!(text(&edited).contains("does not produce its events"), "{}", text(&edited));
}
