//! The adversarial suite, commands: forged rows, borrowed names and hostile
//! files in the inbox, against a real engine process and its real log.
//! Issue 22, item 3: anyone who could write the file could act as anyone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::job::Phase;
use gpuroom::store::{file, Attached, CommandState, RunMeta, Store};

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

fn answered(attached: &Attached, ticket: &str) -> CommandState {
    wait("the engine's answer", || attached.state(ticket).unwrap().filter(|s| *s != CommandState::Pending))
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
    let born_done = insert("INSERT INTO commands (submitted_ms, actor, action, state, outcome, event_seq, done_ms) VALUES (0, '{}', '{}', 'applied', 'done', 7, 1)");
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

/// The engine records the OS user who made the command file, not the name
/// the console claims; a claimed viewer stays a viewer; hostile files
/// (garbage, huge, a link to a secret, a pipe) are refused with an audit
/// row each, unread, while the engine goes on.
#[test]
fn the_engine_records_who_made_each_command_and_refuses_hostile_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let child = engine(&db);
    let attached = wait("the log", || Attached::open(&db).ok());
    let view = wait("running jobs", || attached.latest_view(i64::MIN).ok().flatten().filter(|p| p.view.jobs.iter().any(|j| j.phase == Phase::Running)));
    let job = view.view.jobs.iter().find(|j| j.phase == Phase::Running).unwrap().id;
    let me = file::user_name(file::nix_uid());

    let mallory = Actor { user: "root-admin\u{1b}[2J".into(), origin: "ssh 6.6.6.6".into(), role: Role::Operator, account: None };
    let ticket = attached.submit(&mallory, &Action::Preempt { job }, 0).unwrap();
    assert!(matches!(answered(&attached, &ticket), CommandState::Applied { .. }));
    let viewer = Actor { user: me.clone(), origin: "wall".into(), role: Role::Viewer, account: None };
    let ticket = attached.submit(&viewer, &Action::Cancel { job }, 0).unwrap();
    assert!(matches!(answered(&attached, &ticket), CommandState::Refused { .. }));

    let inbox = file::inbox_of(&db);
    let garbage = attached.submit_bytes(b"{\"claimed\": 1}", 0).unwrap();
    std::fs::write(inbox.join("9999999999998-huge.cmd"), vec![b'{'; 1 << 20]).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "{\"claimed\":{\"user\":\"x\",\"origin\":\"y\",\"role\":\"operator\"},\"action\":{\"Cancel\":{\"job\":987654}}}").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&secret, inbox.join("9999999999999-link.cmd")).unwrap();
    nix::unistd::mkfifo(&inbox.join("9999999999999-pipe.cmd"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let garbage_state = answered(&attached, &garbage);
    assert!(matches!(&garbage_state, CommandState::Refused { reason, event_seq: None } if reason.contains("unreadable")), "{garbage_state:?}");
    wait("the inbox emptied", || std::fs::read_dir(&inbox).unwrap().next().is_none().then_some(()));
    // The engine went on.
    let before = Store::open_read_only(&db).unwrap().event_count().unwrap();
    wait("more events", || (Store::open_read_only(&db).unwrap().event_count().unwrap() > before).then_some(()));
    stop(child);

    let store = Store::open_read_only(&db).unwrap();
    let audit = store.audit_records().unwrap();
    let preempt = audit.iter().find(|r| r.verb == "preempt").expect("the preempt's audit row");
    assert_eq!(preempt.user, format!("{me} (says root-admin[2J)"), "the OS user, with the claim beside it, cleaned");
    assert_eq!(preempt.outcome, "done");
    let unreadable: Vec<_> = audit.iter().filter(|r| r.verb == "unreadable").collect();
    assert_eq!(unreadable.len(), 4, "{audit:#?}");
    assert!(unreadable.iter().all(|r| r.outcome == "refused" && r.role == Role::Viewer), "{unreadable:#?}");
    let details: String = unreadable.iter().map(|r| r.detail.clone()).collect::<Vec<_>>().join("\n");
    assert!(details.contains("more than the 65536"), "{details}");
    assert!(details.contains("links are never followed"), "{details}");
    assert!(details.contains("not a plain file"), "{details}");
    // The secret behind the link was never queued as a command.
    assert!(store.commands().unwrap().iter().all(|c| !c.action.contains("987654")));
    assert!(!audit.iter().any(|r| r.action.contains("987654")));
}
