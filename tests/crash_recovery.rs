//! Crash recovery, with real processes: `gpuroom engine` runs a busy
//! simulated cluster into a real SQLite log while commands reach it over
//! its socket as an attached console sends them; the test kills it with
//! SIGKILL mid-run, starts it again on the same file, sends the commands
//! that had no answer again under their tickets (as a console does when it
//! reconnects), and then proves from the database alone that nothing was
//! lost or applied twice:
//!
//! * the event log is contiguous, and replaying it gives the state the
//!   resumed engine saved when it stopped;
//! * every job submitted is in that state exactly once, and the scheduler's
//!   invariants hold;
//! * every command was applied or refused exactly once, and the ones done
//!   before the kill kept their event (not applied again after it);
//! * the ledger still reconciles to the micro-unit with the books;
//! * and a run killed and resumed writes the very log of a run never killed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::domain::event::{Action, Actor, Event, Role};
use gpuroom::domain::job::Phase;
use gpuroom::host::client::Client;
use gpuroom::store::{self, CommandState, Store};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

fn engine(db: &Path, until_hours: u32) -> Child {
    Command::new(BIN)
        .args(["engine", "--seed", "3", "--speed", "max", "--step-minutes", "20", "--until-hours", &until_hours.to_string(), "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gpuroom engine")
}

fn finish(child: Child) -> String {
    let out = child.wait_with_output().expect("wait for the engine");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the engine failed: {text}");
    text
}

fn kill(mut child: Child) {
    child.kill().expect("SIGKILL the engine");
    let _ = child.wait();
}

/// Waits until the engine has published a view with running jobs, then returns it.
fn busy_view(attached: &Client, limit: Duration) -> gpuroom::room::View {
    let start = Instant::now();
    loop {
        if let Some(p) = attached.latest_view(i64::MIN)
            && p.view.jobs.iter().filter(|j| j.phase == Phase::Running).count() >= 6
            && p.seq > 2_000
        {
            return p.view;
        }
        assert!(start.elapsed() < limit, "the engine published no busy view in {limit:?}");
        sleep(Duration::from_millis(50));
    }
}

fn operator() -> Actor {
    Actor { user: "crash-test".into(), origin: "local".into(), role: Role::Operator, account: None }
}

/// The log's events, in order: (seq, event).
fn events(store: &Store) -> Vec<(i64, Event)> {
    let mut out = Vec::new();
    store.for_each_event(0, |seq, _, e| out.push((seq, e))).unwrap();
    out
}

fn submitted_actions(store: &Store) -> BTreeMap<String, String> {
    // The command rows as queued, to compare with the events they became.
    store.commands().unwrap().into_iter().map(|row| (row.ticket, row.action)).collect()
}

/// A client's ticket as the log files it: under the sender's uid.
fn filed(ticket: &str) -> String {
    format!("u{}-{ticket}", gpuroom::store::file::nix_uid())
}

fn connect(db: &Path, actor: &Actor) -> Client {
    let start = Instant::now();
    loop {
        match Client::connect(db, actor, true) {
            Ok(client) => return client,
            Err(e) => assert!(start.elapsed() < Duration::from_secs(60), "no engine to connect to: {e}"),
        }
        sleep(Duration::from_millis(20));
    }
}

fn command_states(store: &Store) -> BTreeMap<String, CommandState> {
    store.commands().unwrap().into_iter().map(|row| (row.ticket, row.state)).collect()
}

#[test]
fn an_engine_killed_mid_run_resumes_with_nothing_lost_or_applied_twice() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let first = engine(&db, 100);
    let attached = connect(&db, &operator());
    let view = busy_view(&attached, Duration::from_secs(60));
    let running: Vec<_> = view.jobs.iter().filter(|j| j.phase == Phase::Running).map(|j| j.id).collect();

    // A burst of commands, as consoles would send them, then the kill.
    let mut sent: Vec<(String, Action)> = Vec::new();
    for (i, job) in running.iter().take(6).enumerate() {
        let action = match i % 3 {
            0 => Action::Preempt { job: *job },
            1 => Action::Requeue { job: *job },
            _ => Action::Cancel { job: *job },
        };
        sent.push((attached.submit(&action).unwrap(), action));
    }
    let viewer = Actor { user: "wall".into(), origin: "ops-room".into(), role: Role::Viewer, account: None };
    let wall = connect(&db, &viewer);
    let refused_viewer = filed(&wall.submit(&Action::Cancel { job: running[0] }).unwrap());
    wall.send_frame(b"{\"Command\": {\"ticket\": \"t1\", \"action\": {\"Explode\": {}}}}").unwrap();
    // Wait until some, not necessarily all, are done: the kill lands mid-stream.
    let first_answer = attached.wait_answer(&sent[0].0, Duration::from_secs(30)).expect("the first command answered");
    assert!(matches!(first_answer, Some(CommandState::Applied { .. } | CommandState::Refused { .. })), "{first_answer:?}");
    let mut answered = BTreeSet::from([sent[0].0.clone()]);
    for (i, job) in running.iter().skip(6).take(4).enumerate() {
        let action = if i % 2 == 0 { Action::Preempt { job: *job } } else { Action::Requeue { job: *job } };
        sent.push((attached.submit(&action).unwrap(), action));
    }
    kill(first);
    for (ticket, _) in &sent {
        if attached.take_answer(ticket).is_some() {
            answered.insert(ticket.clone());
        }
    }

    let before = Store::open_read_only(&db).unwrap();
    let events_before = before.event_count().unwrap();
    let done_before: BTreeMap<String, CommandState> = command_states(&before).into_iter().filter(|(_, s)| *s != CommandState::Pending).collect();
    let lease = before.lease().unwrap().expect("a killed engine leaves its lease behind");
    drop(before);
    assert!(events_before > 2_000, "killed after {events_before} events");
    eprintln!(
        "killed holding {} after {events_before} events; {} commands done, {} of {} answered",
        lease.holder,
        done_before.len(),
        answered.len(),
        sent.len()
    );
    for ticket in &answered {
        assert!(done_before.contains_key(&filed(ticket)), "command {ticket} was answered before it was on disk");
    }

    // Start again on the same file: it takes the lease over and goes on to the
    // end; the console sends what had no answer again, under the same tickets.
    let resumed = engine(&db, 150);
    let again = connect(&db, &operator());
    for (ticket, action) in sent.iter().filter(|(t, _)| !answered.contains(t)) {
        again.submit_as(ticket, action).unwrap();
        let answer = again.wait_answer(ticket, Duration::from_secs(60)).unwrap();
        assert!(matches!(answer, Some(CommandState::Applied { .. } | CommandState::Refused { .. })), "{ticket}: {answer:?}");
    }
    let log = finish(resumed);
    assert!(log.contains("resuming") && log.contains("stopped without releasing it"), "{log}");

    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(store.lease().unwrap(), None, "a clean stop releases the lease");
    let log = events(&store);
    assert!(log.len() as i64 > events_before);
    for (i, (seq, _)) in log.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1, "the log has a gap or a repeat at {seq}");
    }

    // Every command exactly once; those done before the kill were not redone.
    let commands = command_states(&store);
    let rows = submitted_actions(&store);
    let mut seqs = BTreeSet::new();
    for (id, state) in &commands {
        if let Some(before) = done_before.get(id) {
            assert_eq!(before, state, "command {id} changed after the restart");
        }
        let seq = match state {
            CommandState::Pending => panic!("command {id} is still pending after the resumed engine ran"),
            CommandState::Applied { event_seq, .. } => Some(*event_seq),
            CommandState::Refused { event_seq, .. } => *event_seq,
        };
        if let Some(seq) = seq {
            assert!(seqs.insert(seq), "two commands share event {seq}");
            let Event::Operator { action, .. } = &log[seq as usize - 1].1 else { panic!("command {id}'s event {seq} is not an operator action") };
            assert_eq!(serde_json::to_string(action).unwrap(), rows[id], "command {id}'s event holds another action");
        }
    }
    let operator_events = log.iter().filter(|(_, e)| matches!(e, Event::Operator { .. })).count();
    assert_eq!(operator_events, seqs.len(), "an operator event with no command, or a command applied twice");
    let unreadable = commands.values().filter(|s| matches!(s, CommandState::Refused { event_seq: None, .. })).count();
    assert_eq!(store.audit_records().unwrap().len(), operator_events + unreadable, "one audit row per operator action and per unreadable command");
    if let Some(state) = commands.get(&refused_viewer) {
        let CommandState::Refused { reason, .. } = state else { panic!("a viewer's command was not refused") };
        assert!(reason.contains("viewer") || reason.contains("read-only") || reason.contains("operator"), "{reason}");
    }
    // Every command the console sent is in the log once, under its ticket.
    for (ticket, _) in &sent {
        assert!(commands.contains_key(&filed(ticket)), "command {ticket} was lost");
    }
    if let Some((_, state)) = commands.iter().find(|(t, _)| t.contains("unreadable")) {
        let CommandState::Refused { reason, event_seq: None } = state else { panic!("an unreadable command was not refused") };
        assert!(reason.contains("unreadable"), "{reason}");
    }
    assert!(sent.iter().any(|(t, _)| matches!(commands[&filed(t)], CommandState::Applied { .. })), "{commands:?}");

    // Every job once; the state the engine saved is the log's; money reconciles.
    let (room, _) = store::replay(&store, false).unwrap();
    let submits: Vec<_> = log.iter().filter_map(|(_, e)| if let Event::JobSubmitted { spec } = e { Some(spec.id) } else { None }).collect();
    let unique: BTreeSet<_> = submits.iter().copied().collect();
    assert_eq!(unique.len(), submits.len(), "a job was submitted twice");
    for id in &unique {
        assert!(room.job(*id).is_some(), "job {id:?} is lost");
    }
    common::check(&room, "after the resumed run");
    let (snapshot_seq, saved) = store.latest_snapshot().unwrap().expect("a final snapshot");
    assert_eq!(snapshot_seq, log.len() as i64);
    assert_eq!(serde_json::to_string(&saved).unwrap(), serde_json::to_string(&room).unwrap(), "the resumed engine's state is not its log's");
    let far = chrono::DateTime::<chrono::Utc>::MAX_UTC;
    common::check_ledger(&room, &store.ledger_lines(chrono::DateTime::<chrono::Utc>::MIN_UTC, far).unwrap(), "after the resumed run");
}

#[test]
fn a_run_killed_and_resumed_writes_the_log_of_a_run_never_killed() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.db");
    let broken = dir.path().join("broken.db");
    let hours = 120;
    let reference = engine(&whole, hours);
    let killed = engine(&broken, hours);
    // Kill the second somewhere in the middle.
    let start = Instant::now();
    loop {
        let count = Store::open_read_only(&broken).and_then(|s| s.event_count()).unwrap_or(0);
        if count > 3_000 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the engine made no progress");
        sleep(Duration::from_millis(20));
    }
    kill(killed);
    finish(reference);
    let log = finish(engine(&broken, hours));
    assert!(log.contains("resuming"), "{log}");

    // Compared as events, not stored bytes: the resumed engine starts its
    // telemetry frames with a key frame where the whole run has a delta.
    let rows = |path: &Path| -> Vec<(i64, String, String)> {
        let mut rows = Vec::new();
        let store = Store::open_read_only(path).unwrap();
        store.for_each_event(0, |seq, at, e| rows.push((seq, at.to_rfc3339(), serde_json::to_string(&e).unwrap()))).unwrap();
        rows
    };
    let (a, b) = (rows(&whole), rows(&broken));
    assert!(a.len() > 3_000);
    assert_eq!(a.len(), b.len(), "the resumed log has a different length");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("the logs differ at event {}: {:?} vs {:?}", i + 1, a[i], b[i]);
    }
    let ledger = |path: &Path| {
        let s = Store::open_read_only(path).unwrap();
        (s.ledger_total().unwrap(), s.ledger_lines(chrono::DateTime::<chrono::Utc>::MIN_UTC, chrono::DateTime::<chrono::Utc>::MAX_UTC).unwrap().len())
    };
    assert_eq!(ledger(&whole), ledger(&broken), "the ledgers differ");
}
