//! What if: a recorded run re-run under its own policy gives back exactly
//! what happened; under another discipline, exactly what a fresh run with
//! that discipline gives; a live-style log (no world in its meta, so re-run
//! on the live model) lands within a stated tolerance; and bad asks get a
//! clear error. Real SQLite logs, the real binary for the command line.

use std::path::Path;
use std::process::Command;

use chrono::TimeDelta;
use gpuroom::domain::discipline::DisciplineKind;
use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::host::runs;
use gpuroom::host::settings::{Policy, WorldChoice};
use gpuroom::room::RoomConfig;
use gpuroom::sim::Traces;
use gpuroom::store::{RunMeta, Store};
use gpuroom::whatif::{self, Model, Outcome, Scenario, Window};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gpuroom")
}

/// A simulated run recorded to `db` in ten-minute batches, as the console
/// steps; with an operator's discipline change at `switch_at_hour` if given.
fn record(db: &Path, hours: i64, seed: u64, discipline: Option<DisciplineKind>, switch_at_hour: Option<i64>) {
    record_on(db, None, hours, seed, discipline, switch_at_hour);
}

fn record_on(db: &Path, sim_config: Option<&str>, hours: i64, seed: u64, discipline: Option<DisciplineKind>, switch_at_hour: Option<i64>) {
    let traces = Traces::embedded().unwrap();
    let world = WorldChoice { seed, sim_config: sim_config.map(Into::into) };
    let policy = Policy { discipline, ..Policy::default() };
    let mut engine = runs::build(&world, &policy, Some(db), &traces).unwrap();
    let start = engine.world().config().start;
    for minute in (10..=hours * 60).step_by(10) {
        engine.run_until(start + TimeDelta::minutes(minute)).unwrap();
        if switch_at_hour == Some(minute / 60) && minute % 60 == 0 {
            let actor = Actor { user: "alice".into(), origin: "test".into(), role: Role::Operator, account: None };
            let outcome = engine.operate(&actor, Action::SetDiscipline { discipline: DisciplineKind::Drf }).unwrap();
            assert!(outcome.is_ok(), "{outcome:?}");
        }
    }
}

/// A live-style log: the recorded events of `sim`, and no world to re-run exactly.
fn live_copy(sim: &Path, live: &Path) -> RunMeta {
    let source = Store::open_read_only(sim).unwrap();
    let meta = RunMeta { world: None, source: "live test".into(), ..source.meta().unwrap() };
    let mut copy = Store::create(live, &meta).unwrap();
    copy.begin().unwrap();
    source
        .for_each_event(0, |_, at, event| {
            copy.append(at, &event).unwrap();
        })
        .unwrap();
    copy.commit().unwrap();
    meta
}

fn compare(db: &Path, scenarios: &[Scenario], model: Model) -> whatif::Comparison {
    let store = Store::open_read_only(db).unwrap();
    whatif::compare(&store, "test", scenarios, Window::default(), model, &mut |_| {}).unwrap()
}

fn recorded_config(db: &Path) -> RoomConfig {
    Store::open_read_only(db).unwrap().meta().unwrap().room_config
}

fn with_discipline(db: &Path, d: DisciplineKind) -> Scenario {
    let mut config = recorded_config(db);
    config.sched.discipline = d;
    Scenario { name: d.name().into(), config, fleet: None }
}

#[test]
fn the_recorded_policy_gives_back_exactly_what_happened_operator_actions_included() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    record(&db, 30, 2, None, Some(8));
    let own = Scenario { name: "same".into(), config: recorded_config(&db), fleet: None };
    let c = compare(&db, &[own], Model::Auto);
    let (recorded, rerun) = (&c.columns[0].outcome, &c.columns[1].outcome);
    assert!(recorded.finished > 50 && recorded.spend().0 > 0 && !recorded.waits.is_empty(), "{recorded:?}");
    assert_eq!(recorded, rerun, "the same world and policy must give the same run");
    assert!(c.model.contains("re-run exactly"), "{}", c.model);
}

#[test]
fn another_discipline_gives_what_a_fresh_run_with_it_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, drf, mlfq) = (dir.path().join("fifo.db"), dir.path().join("drf.db"), dir.path().join("mlfq.db"));
    record(&fifo, 36, 4, None, None);
    record(&drf, 36, 4, Some(DisciplineKind::Drf), None);
    record(&mlfq, 36, 4, Some(DisciplineKind::Mlfq), None);
    let c = compare(&fifo, &[with_discipline(&fifo, DisciplineKind::Drf), with_discipline(&fifo, DisciplineKind::Mlfq)], Model::Auto);
    let fresh_drf = compare(&drf, &[], Model::Auto).columns.remove(0).outcome;
    let fresh_mlfq = compare(&mlfq, &[], Model::Auto).columns.remove(0).outcome;
    assert_eq!(c.columns[1].outcome, fresh_drf);
    assert_eq!(c.columns[2].outcome, fresh_mlfq);
    // And the policies did differ, so the equality says something.
    assert_ne!(c.columns[0].outcome, c.columns[2].outcome);
}

#[test]
fn another_simulated_cluster_gives_what_a_fresh_run_on_it_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (elastic, fixed) = (dir.path().join("elastic.db"), dir.path().join("static.db"));
    record(&elastic, 24, 6, None, None);
    record_on(&fixed, Some("fixtures/sim/static.toml"), 24, 6, None, None);
    let static_fleet = gpuroom::sim::config::SimConfig::parse("static.toml", &std::fs::read_to_string("fixtures/sim/static.toml").unwrap()).unwrap();
    let on_static = Scenario { name: "static".into(), config: recorded_config(&elastic), fleet: Some(Box::new(static_fleet)) };
    let c = compare(&elastic, std::slice::from_ref(&on_static), Model::Auto);
    let fresh = compare(&fixed, &[], Model::Auto).columns.remove(0).outcome;
    assert_eq!(c.columns[1].outcome, fresh);
    // The same jobs arrive on either fleet; the fixed one pays for idle GPUs the elastic one gives back.
    assert_eq!(c.columns[0].outcome.submitted, c.columns[1].outcome.submitted);
    assert!(
        c.columns[1].outcome.idle_share() > c.columns[0].outcome.idle_share(),
        "{} vs {}",
        c.columns[1].outcome.idle_share(),
        c.columns[0].outcome.idle_share()
    );
    // A live log's fleet is what it was: another cluster is refused, plainly.
    let live = dir.path().join("live.db");
    live_copy(&elastic, &live);
    let store = Store::open_read_only(&live).unwrap();
    let err = whatif::compare(&store, "live", &[on_static], Window::default(), Model::Auto, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("a live run's fleet is the one it had"), "{err}");
}

/// The live model's error, stated: a live-style log re-run under its own
/// policy lands within these of what really happened.
const SPEND_TOLERANCE: f64 = 0.15;
const JCT_TOLERANCE: f64 = 0.10;
const FINISHED_TOLERANCE: f64 = 0.05;

fn off_by(recorded: f64, rerun: f64) -> f64 {
    (rerun - recorded).abs() / recorded.abs().max(1e-9)
}

#[test]
fn a_live_style_log_re_run_under_its_own_policy_lands_within_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.db");
    record(&sim, 72, 3, None, None);
    let live = dir.path().join("live.db");
    let meta = live_copy(&sim, &live);
    let own = Scenario { name: "same".into(), config: meta.room_config.clone(), fleet: None };
    let c = compare(&live, &[own], Model::Auto);
    assert!(c.model.starts_with("live model"), "{}", c.model);
    let (r, m): (&Outcome, &Outcome) = (&c.columns[0].outcome, &c.columns[1].outcome);
    eprintln!("{}", c.render(whatif::Format::Text));
    assert!(off_by(r.spend().as_f64(), m.spend().as_f64()) <= SPEND_TOLERANCE, "spend {} vs {}", r.spend(), m.spend());
    assert!(off_by(r.mean_jct_secs().unwrap(), m.mean_jct_secs().unwrap()) <= JCT_TOLERANCE, "JCT {:?} vs {:?}", r.mean_jct_secs(), m.mean_jct_secs());
    assert!(off_by(r.finished as f64, m.finished as f64) <= FINISHED_TOLERANCE, "finished {} vs {}", r.finished, m.finished);
    assert_eq!(r.submitted, m.submitted, "every arrival is replayed");
    assert_eq!(r.failed, m.failed, "a recorded failure is replayed at its step");
    // The same log through `--live-model` gives the same columns as the live-style copy.
    let forced = compare(&sim, &[Scenario { name: "same".into(), config: meta.room_config.clone(), fleet: None }], Model::Live);
    assert_eq!(forced.columns[1].outcome, c.columns[1].outcome);
}

#[test]
fn the_command_line_prints_text_markdown_and_csv_over_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    record(&db, 24, 5, None, None);
    let out = Command::new(bin()).args(["whatif", "--db"]).arg(&db).args(["--discipline", "fifo", "--discipline", "drf"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for label in [
        "instance spend",
        "idle share",
        "tenant nlp",
        "GPU-hours paid",
        "mean queue wait",
        "P95 queue wait",
        "mean JCT",
        "jobs finished",
        "preemptions",
        "spot interruptions",
        "steps recomputed",
        "checkpoint GiB",
        "budget crossings",
    ] {
        assert!(text.contains(label), "no {label:?} in\n{text}");
    }
    assert!(text.contains("recorded") && text.contains("fifo") && text.contains("drf"), "{text}");
    // CSV: the fifo column (the recorded policy) equals the recorded one, figure by figure.
    let csv_path = dir.path().join("table.csv");
    let out = Command::new(bin())
        .args(["whatif", "--db"])
        .arg(&db)
        .args(["--discipline", "fifo", "--from", "2020-01-06T06:00", "--until", "2020-01-06T18:00", "--out"])
        .arg(&csv_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("figure,recorded,fifo"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() > 20);
    for row in &rows {
        assert_eq!(row[1], row[2], "{row:?}");
    }
    // The window counts the arrivals logged in it, no more.
    let store = Store::open_read_only(&db).unwrap();
    let (from, until) = (
        chrono::DateTime::parse_from_rfc3339("2020-01-06T06:00:00Z").unwrap().to_utc(),
        chrono::DateTime::parse_from_rfc3339("2020-01-06T18:00:00Z").unwrap().to_utc(),
    );
    let mut arrivals = 0;
    store
        .for_each_event(0, |_, at, e| arrivals += u32::from(matches!(e, gpuroom::domain::event::Event::JobSubmitted { .. }) && at >= from && at < until))
        .unwrap();
    let submitted = rows.iter().find(|r| r[0] == "jobs submitted").unwrap();
    assert_eq!(submitted[1], arrivals.to_string());
    let md = Command::new(bin()).args(["whatif", "--db"]).arg(&db).args(["--discipline", "mlfq", "--format", "markdown"]).output().unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("| | recorded | mlfq |") && md.contains("|---|---:|---:|"), "{md}");
}

#[test]
fn bad_asks_get_a_clear_error_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    record(&db, 2, 1, None, None);
    let before = std::fs::read(&db).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin()).arg("whatif").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let db_s = db.to_str().unwrap();
    assert!(run(&["--db", dir.path().join("missing.db").to_str().unwrap()]).contains("missing.db"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[sched]\ndiscipline = \"lottery\"\n").unwrap();
    let err = run(&["--db", db_s, "--config", bad.to_str().unwrap()]);
    assert!(err.contains("bad.toml") && err.contains("lottery"), "{err}");
    let err = run(&["--db", db_s, "--from", "2020-01-07", "--until", "2020-01-06"]);
    assert!(err.contains("must come before"), "{err}");
    let err = run(&["--db", db_s, "--from", "next tuesday"]);
    assert!(err.contains("is not a time"), "{err}");
    let err = run(&["--db", db_s, "--from", "2030-01-01"]);
    assert!(err.contains("no events in the window"), "{err}");
    let not_a_log = dir.path().join("notes.txt");
    std::fs::write(&not_a_log, "hello").unwrap();
    assert!(!run(&["--db", not_a_log.to_str().unwrap()]).is_empty());
    assert_eq!(std::fs::read(&db).unwrap(), before, "the log is read, never written");
}
