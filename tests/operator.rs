//! Operator actions through the engine onto a real SQLite log: each one is
//! in the event log and the audit table with its outcome; a viewer (the
//! wall display) is refused; bad requests get a clear reason and change
//! nothing; a migration lands the job in the chosen pool; an acknowledged
//! alarm says by whom; and replaying the log rebuilds the same state.

use chrono::TimeDelta;
use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::ids::JobId;
use gpuroom::domain::job::{Phase, PoolTarget};
use gpuroom::engine::Engine;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::{RunMeta, Store, replay};

fn engine(path: &std::path::Path) -> Engine {
    let traces = Traces::embedded().unwrap();
    // The fixed fleet: these tests are about what operators do to jobs on
    // nodes that stay (elastic capacity has its own tests).
    let (name, text) = gpuroom::sim::data::STATIC_CONFIG;
    let config = SimConfig::parse(name, text).unwrap();
    let start = config.start;
    let meta = RunMeta { room_config: RoomConfig::default(), source: "operator test".into(), created_with: "test".into(), world: None };
    let store = Store::create(path, &meta).unwrap();
    let world = Simulation::new(config, &traces, 4).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, Some(store));
    engine.run_until(start + TimeDelta::hours(6)).unwrap();
    engine
}

fn actor(role: Role) -> Actor {
    Actor { user: "ana".into(), origin: "ssh 10.0.0.5".into(), role, account: None }
}

fn running(engine: &Engine) -> Vec<JobId> {
    engine.room().view().jobs.iter().filter(|j| j.phase == Phase::Running).map(|j| j.id).collect()
}

#[test]
fn actions_are_audited_with_their_outcome_and_a_viewer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.db");
    let mut engine = engine(&path);
    let job = running(&engine)[0];

    let refused = engine.operate(&actor(Role::Viewer), Action::Preempt { job }).unwrap();
    assert!(refused.as_ref().unwrap_err().contains("read-only"), "{refused:?}");
    assert_eq!(engine.room().job(job).unwrap().phase(), Phase::Running, "a viewer's action changes nothing");

    let unknown = engine.operate(&actor(Role::Operator), Action::Requeue { job: JobId(999_999) }).unwrap();
    assert!(unknown.unwrap_err().contains("unknown job"));

    let done = engine.operate(&actor(Role::Operator), Action::Preempt { job }).unwrap().unwrap();
    assert!(done.contains(&format!("preempt {job}")), "{done}");
    let again = engine.operate(&actor(Role::Operator), Action::SetDiscipline { discipline: gpuroom::sched::DisciplineKind::Drf }).unwrap();
    assert!(again.unwrap().contains("fifo → drf"));
    let events = engine.store().unwrap().event_count().unwrap();
    drop(engine);

    let store = Store::open_read_only(&path).unwrap();
    let audit = store.audit_records().unwrap();
    let rows: Vec<(&str, &str, Role)> = audit.iter().map(|r| (r.verb.as_str(), r.outcome.as_str(), r.role)).collect();
    assert_eq!(
        rows,
        [
            ("preempt", "refused", Role::Viewer),
            ("requeue", "refused", Role::Operator),
            ("preempt", "done", Role::Operator),
            ("switch the queue discipline", "done", Role::Operator)
        ]
    );
    assert!(audit.iter().all(|r| r.user == "ana" && r.origin == "ssh 10.0.0.5"));
    assert!(audit[1].detail.contains("unknown job j999999"), "{:?}", audit[1]);
    // The log holds the refused actions too, and replays to the same room.
    let (replayed, applied) = replay(&store, false).unwrap();
    assert_eq!(applied as i64, events);
    assert_eq!(replayed.job(job).unwrap().phase(), Phase::Checkpointing);
}

/// Issue 35, item 8: an audit row says when it happened by the wall clock
/// beside the room's (simulated) time; a schema-7 log's rows have none, and
/// its resumed engine writes it from then on.
#[test]
fn audit_rows_carry_the_wall_clock_beside_the_simulated_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.db");
    let before = chrono::Utc::now() - TimeDelta::seconds(1);
    let mut engine = engine(&path);
    let job = running(&engine)[0];
    engine.operate(&actor(Role::Operator), Action::Preempt { job }).unwrap().unwrap();
    let simulated = engine.room().now().unwrap();
    drop(engine);
    let after = chrono::Utc::now() + TimeDelta::seconds(1);
    let audit = Store::open_read_only(&path).unwrap().audit_records().unwrap();
    let row = audit.last().unwrap();
    assert_eq!(row.at, simulated, "the room's time, simulated");
    let wall = row.wall.expect("the wall-clock time");
    assert!(before <= wall && wall <= after, "{wall} not within {before}..{after}");
    assert!((wall - row.at).num_days() > 365, "the two clocks differ by years here: {} vs {wall}", row.at);

    // The same log as schema 7 wrote it: no wall column.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("ALTER TABLE audit DROP COLUMN wall; UPDATE meta SET value = '7' WHERE key = 'schema_version';").unwrap();
    drop(conn);
    let old = Store::open_read_only(&path).unwrap().audit_records().unwrap();
    assert_eq!(old.len(), audit.len());
    assert!(old.iter().all(|r| r.wall.is_none()), "read as it is");
    // Resumed, it is brought to schema 8 and new rows carry the wall clock.
    let mut store = Store::open_for_writing(&path).unwrap();
    let version: String =
        rusqlite::Connection::open(&path).unwrap().query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(version, "8");
    store.append_audit(simulated, &actor(Role::Viewer), &Action::Preempt { job }, &Err("read-only".into())).unwrap();
    let rows = store.audit_records().unwrap();
    assert!(rows[..old.len()].iter().all(|r| r.wall.is_none()) && rows.last().unwrap().wall.is_some(), "{rows:?}");
}

#[test]
fn the_audit_table_refuses_edits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.db");
    let mut engine = engine(&path);
    engine.operate(&actor(Role::Operator), Action::Cancel { job: running(&engine)[0] }).unwrap().unwrap();
    drop(engine);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let err = conn.execute("UPDATE audit SET user = 'mallory'", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = conn.execute("DELETE FROM audit", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[test]
fn a_migrated_job_saves_and_runs_next_in_the_chosen_pool() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir.path().join("ops.db"));
    let view = engine.room().view();
    // A running job and a pool other than its own that could take it.
    let (job, to) = view
        .jobs
        .iter()
        .filter(|j| j.phase == Phase::Running)
        .find_map(|j| {
            let here = view.nodes.iter().find(|n| Some(&n.name) == j.node.as_ref())?;
            let here = here.pool();
            let to = view.pools.iter().find(|p| p.target != here && p.nodes_up > 0 && p.gpus_total / p.nodes_total.max(1) >= u32::from(j.gpus))?;
            Some((j.id, to.target.clone()))
        })
        .expect("a job that can move");
    let done = engine.operate(&actor(Role::Operator), Action::Migrate { job, to: to.clone() }).unwrap().unwrap();
    assert!(done.contains(&to.to_string()), "{done}");
    assert_eq!(engine.room().view().jobs.iter().find(|j| j.id == job).unwrap().target.as_ref(), Some(&to));
    // Step until it has saved, stopped and been placed again; then it is in the chosen pool.
    let mut placed = None;
    for _ in 0..48 {
        let now = engine.room().now().unwrap();
        engine.run_until(now + TimeDelta::minutes(15)).unwrap();
        let j = engine.room().job(job).unwrap();
        if j.attempts >= 2 && j.placement.is_some() {
            placed = j.placement.as_ref().map(|p| p.node);
            break;
        }
    }
    let node = placed.expect("placed again within 12 h");
    let node = engine.room().view().nodes.into_iter().find(|n| n.id == node).unwrap();
    assert_eq!(node.pool(), to, "placed in {node:?}");
    let j = engine.room().job(job).unwrap();
    assert!(j.steps_saved > 0, "it saved before moving");

    // A pool that does not exist, and a finished job, are refused clearly.
    let nowhere = PoolTarget { billing: gpuroom::domain::cluster::BillingMode::Spot, instance_type: "x1.nothing".into(), zone: "mars-1a".into() };
    let refused = engine.operate(&actor(Role::Operator), Action::Migrate { job: running(&engine)[0], to: nowhere }).unwrap();
    assert!(refused.unwrap_err().contains("no node in"));
}

#[test]
fn an_acknowledged_alarm_stays_listed_with_who_acked_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir.path().join("ops.db"));
    let mut hours = 0;
    while !engine.room().view().alarms.iter().any(|a| a.is_active()) && hours < 96 {
        let now = engine.room().now().unwrap();
        engine.run_until(now + TimeDelta::hours(2)).unwrap();
        hours += 2;
    }
    let alarm = engine.room().view().alarms.iter().find(|a| a.is_active()).cloned().expect("the simulated week raises an alarm");
    let done = engine.operate(&actor(Role::Operator), Action::AcknowledgeAlarm { id: alarm.id.clone() }).unwrap().unwrap();
    assert!(done.starts_with("acknowledge alarm"), "{done}");
    let view = engine.room().view();
    let row = view.alarms.iter().find(|a| a.id == alarm.id).expect("still active");
    assert_eq!(row.acked_by.as_deref(), Some("ana"));
    let twice = engine.operate(&actor(Role::Operator), Action::AcknowledgeAlarm { id: alarm.id.clone() }).unwrap();
    assert!(twice.unwrap_err().contains("already acknowledged by ana"));
    let gone = engine.operate(&actor(Role::Operator), Action::AcknowledgeAlarm { id: "no-such-alarm".into() }).unwrap();
    assert!(gone.unwrap_err().contains("not listed"));
}
