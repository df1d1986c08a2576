//! The adversarial suite, commands: forged rows, borrowed names and hostile
//! input on the engine's socket, against a real engine process and its
//! real log. Issue 22, item 3: anyone who could write the file could act as
//! anyone.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::job::Phase;
use gpuroom::host::client::Client;
use gpuroom::store::{CommandState, RunMeta, Store, file};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

fn engine(db: &Path) -> Child {
    Command::new(BIN).args(["engine", "--seed", "5", "--speed", "600", "--db"]).arg(db).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

fn stop(mut child: Child) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let _ = child.wait();
}

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "waited a minute for {what}");
        sleep(Duration::from_millis(50));
    }
}

/// Even the log's owner, writing SQL by hand, cannot queue a command as
/// already done or move one other than once, from pending, with its outcome.
#[test]
fn the_log_refuses_rows_born_done_and_moves_the_engine_does_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("forge.db");
    let meta = RunMeta { room_config: Default::default(), source: "test".into(), created_with: "test".into(), world: None };
    drop(Store::create(&db, &meta).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let insert = |sql: &str| conn.execute(sql, []).map_err(|e| e.to_string());
    let born_done =
        insert("INSERT INTO commands (submitted_ms, actor, action, state, outcome, event_seq, done_ms) VALUES (0, '{}', '{}', 'applied', 'done', 7, 1)");
    assert!(born_done.unwrap_err().contains("only the engine decides"));
    let born_refused = insert("INSERT INTO commands (submitted_ms, actor, action, state) VALUES (0, '{}', '{}', 'refused')");
    assert!(born_refused.unwrap_err().contains("only the engine decides"));
    insert("INSERT INTO commands (submitted_ms, actor, action, ticket) VALUES (0, '{\"user\":\"ana\"}', '{}', 't1')").unwrap();
    for (forged, why) in [
        ("UPDATE commands SET state = 'refused'", "refused with no outcome or time"),
        ("UPDATE commands SET state = 'applied', outcome = 'done', done_ms = 1", "applied with no event"),
        ("UPDATE commands SET actor = '{\"user\":\"root\"}'", "another actor"),
        ("UPDATE commands SET action = '{\"Cancel\":{\"job\":1}}'", "another action"),
        ("UPDATE commands SET ticket = 't2'", "another ticket"),
        ("DELETE FROM commands", "deleted"),
    ] {
        assert!(insert(forged).is_err(), "{why}: the log let it through");
    }
    insert("UPDATE commands SET state = 'refused', outcome = 'no', done_ms = 1").unwrap();
    assert!(insert("UPDATE commands SET state = 'pending', outcome = NULL, done_ms = NULL").is_err(), "a done command went back to pending");
}

/// The engine records the OS user the kernel names for the connection, not
/// the name the console claims; a claimed viewer stays a viewer; hostile
/// input (garbage, a frame past the limit, a bad ticket, a client that
/// never says hello or never reads) is refused, audited where it is a
/// command, and the engine goes on.
#[test]
fn the_engine_records_who_sent_each_command_and_refuses_hostile_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let child = engine(&db);
    let mallory = Actor { user: "root-admin\u{1b}[2J".into(), origin: "ssh 6.6.6.6".into(), role: Role::Operator, account: None };
    let attached = wait("the engine", || Client::connect(&db, &mallory, true).ok());
    let view = wait("running jobs", || attached.latest_view(i64::MIN).filter(|p| p.view.jobs.iter().any(|j| j.phase == Phase::Running)));
    let job = view.view.jobs.iter().find(|j| j.phase == Phase::Running).unwrap().id;
    let me = file::user_name(file::nix_uid());
    assert_eq!(attached.actor.user, format!("{me} (says root-admin[2J)"), "the welcome names the recorded actor");

    let ticket = attached.submit(&Action::Preempt { job }).unwrap();
    assert!(matches!(answered(&attached, &ticket), Some(CommandState::Applied { .. })));
    // Sent again under the same ticket (a reconnecting console): answered, not applied twice.
    attached.submit_as(&ticket, &Action::Preempt { job }).unwrap();
    assert!(matches!(answered(&attached, &ticket), Some(CommandState::Applied { .. })));
    let viewer = Actor { user: me.clone(), origin: "wall".into(), role: Role::Viewer, account: None };
    let wall = Client::connect(&db, &viewer, false).unwrap();
    let ticket = wall.submit(&Action::Cancel { job }).unwrap();
    assert!(matches!(answered(&wall, &ticket), Some(CommandState::Refused { .. })));

    // Garbage is filed refused and audited; a bad ticket is refused unfiled.
    attached.send_frame(b"{\"claimed\": 1}").unwrap();
    attached.send_frame(b"{\"Command\": {\"ticket\": \"../../etc\", \"action\": {\"Cancel\": {\"job\": 987654}}}}").unwrap();
    let bad = answered(&attached, "../../etc");
    assert!(matches!(&bad, Some(CommandState::Refused { reason, .. }) if reason.contains("a ticket is")), "{bad:?}");
    // A client that never says hello is dropped; one past the frame limit is told why.
    let silent = std::os::unix::net::UnixStream::connect(gpuroom::host::serve::socket_of(&db)).unwrap();
    let huge = Client::connect(&db, &viewer, false).unwrap();
    huge.send_frame(&vec![b'{'; 1 << 20]).unwrap_or(());
    let why = wait("the goodbye", || huge.closed());
    assert!(why.contains("a command has at most 65536"), "{why}");
    // A client that asks for views and reads none does not hold the engine up.
    let stuck = std::os::unix::net::UnixStream::connect(gpuroom::host::serve::socket_of(&db)).unwrap();
    let hello = gpuroom::host::wire::Ask::Hello { protocol: gpuroom::host::wire::PROTOCOL, claimed: viewer.clone(), views: true };
    std::io::Write::write_all(&mut &stuck, &gpuroom::host::wire::encode(&hello)).unwrap();
    let before = attached.latest_view(i64::MIN).unwrap().seq;
    wait("more events", || attached.latest_view(i64::MIN).filter(|p| p.seq > before + 500));
    let ticket = attached.submit(&Action::Requeue { job }).unwrap();
    assert!(answered(&attached, &ticket).is_some(), "commands are still answered");
    drop((silent, stuck));
    stop(child);

    let store = Store::open_read_only(&db).unwrap();
    let audit = store.audit_records().unwrap();
    let preempt: Vec<_> = audit.iter().filter(|r| r.verb == "preempt").collect();
    assert_eq!(preempt.len(), 1, "applied once: {audit:#?}");
    assert_eq!(preempt[0].user, format!("{me} (says root-admin[2J)"), "the OS user, with the claim beside it, cleaned");
    assert_eq!(preempt[0].outcome, "done");
    let unreadable: Vec<_> = audit.iter().filter(|r| r.verb == "unreadable").collect();
    assert_eq!(unreadable.len(), 1, "{audit:#?}");
    assert!(unreadable.iter().all(|r| r.outcome == "refused" && r.role == Role::Viewer && r.detail.contains("unreadable command")), "{unreadable:#?}");
    // The bad ticket's command was never filed.
    assert!(store.commands().unwrap().iter().all(|c| !c.action.contains("987654")));
    assert!(!audit.iter().any(|r| r.action.contains("987654")));
}

fn answered(client: &Client, ticket: &str) -> Option<CommandState> {
    client.wait_answer(ticket, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{ticket}: {e}"))
}
