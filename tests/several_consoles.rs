//! One engine, several consoles, through real terminals: `gpuroom engine`
//! owns a log; a second engine on it is refused; `gpuroom --db` in one tmux
//! attaches to it and preempts a job with the keys (the command goes over
//! the engine's socket into the `commands` table, the engine applies and
//! answers it); `gpuroom --wall --db` in another draws its views and its
//! keys do nothing. When the engine stops, the wall shows the data as stale.
//!
//! Needs tmux; without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does).

#[path = "support/tmux.rs"]
mod tmux;

use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::domain::event::{Action, Actor, Event, Role};
use gpuroom::host::client::Client;
use gpuroom::store::{CommandState, Store};
use tmux::{Tmux, tmux_available};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        sleep(Duration::from_millis(100));
    }
}

#[test]
fn consoles_attach_to_one_engine_and_only_operators_can_act() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let mut engine =
        Command::new(BIN).args(["engine", "--seed", "2", "--speed", "600", "--db"]).arg(&db).stderr(Stdio::piped()).spawn().expect("start the engine");
    let me = Actor { user: "test".into(), origin: "local".into(), role: Role::Viewer, account: None };
    wait("the engine", Duration::from_secs(60), || Client::connect(&db, &me, false).is_ok());
    let watching = Client::connect(&db, &me, true).unwrap();
    wait("a busy view", Duration::from_secs(60), || watching.latest_view(i64::MIN).is_some_and(|p| p.view.queue.running > 3));

    // A second engine on the same file is refused and changes nothing.
    let second = Command::new(BIN).args(["engine", "--speed", "max", "--until-hours", "1", "--db"]).arg(&db).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && said.contains("already owned by the engine pid"), "{said}");

    // An operator's console attaches (`--attach`: only to a running engine)
    // and preempts through the engine's socket.
    let console = Tmux::start(
        "attached",
        200,
        60,
        &format!("USER=e2e-bob SUDO_USER= SSH_CONNECTION= {BIN} --attach --db {}; echo \"gpuroom exited with $?\"; sleep 60", db.display()),
    );
    console.wait_for("the attached console", Duration::from_secs(30), |s| s.contains("ATTACHED pid") && s.contains("running"));
    // The job furthest from its end first, so that it is still running
    // when the engine takes the command (an elastic cluster runs short jobs too).
    console.keys(&["3", ":"]);
    for c in "sort eta desc".chars() {
        console.keys(&[&c.to_string()]);
    }
    console.keys(&["Enter", "Home"]);
    let screen = console.wait_for("a selected row", Duration::from_secs(5), |s| s.contains('▶'));
    let line = screen.lines().find(|l| l.contains('▶') && l.contains(" j")).unwrap();
    let job = line[line.find('▶').unwrap() + '▶'.len_utf8()..].split_whitespace().next().unwrap().to_string();
    console.keys(&["p"]);
    console.wait_for("the preempt dialog", Duration::from_secs(5), |s| s.contains(&format!("Preempt {job}")));
    console.keys(&["y"]);
    console.wait_for("the engine's answer", Duration::from_secs(15), |s| s.contains(&format!("✓ preempt {job}")));

    // The wall reads the same log and cannot act.
    let wall = Tmux::start("wall", 200, 60, &format!("{BIN} --wall --stale-after 2 --db {}; echo \"gpuroom exited with $?\"; sleep 60", db.display()));
    wall.wait_for("the wall", Duration::from_secs(30), |s| s.contains("WALL pid"));
    wall.keys(&["3", "p", "y", "r", "y", "X", "y"]);
    sleep(Duration::from_millis(500));
    let screen = wall.screen();
    assert!(!screen.contains("Confirm"), "the wall opened a dialog:\n{screen}");

    // A viewer sending a command is refused by the engine.
    let viewer = Actor { user: "mallory".into(), origin: "local".into(), role: Role::Viewer, account: None };
    let attached = Client::connect(&db, &viewer, false).unwrap();
    let id = attached.submit(&Action::Cancel { job: gpuroom::domain::ids::JobId(1) }).unwrap();
    let Some(CommandState::Refused { reason, .. }) = attached.wait_answer(&id, Duration::from_secs(10)).unwrap() else {
        panic!("a viewer's command was applied")
    };
    assert!(reason.contains("read-only"), "{reason}");

    // The engine stops on SIGTERM, cleanly; the wall sees the data go stale.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(engine.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = engine.wait().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(engine.stderr.as_mut().unwrap(), &mut said).unwrap();
    assert!(status.success() && said.contains("lease released"), "{said}");
    wall.wait_for("the stale banner", Duration::from_secs(15), |s| s.contains("STALE"));
    for tmux in [&console, &wall] {
        tmux.keys(&["q"]);
        tmux.wait_for("the exit", Duration::from_secs(15), |s| s.contains("gpuroom exited with 0"));
    }

    // From the log: the preempt was the operator's, once; nothing from the wall.
    let store = Store::open_read_only(&db).unwrap();
    let audit = store.audit_records().unwrap();
    let preempts: Vec<_> = audit.iter().filter(|r| r.verb == "preempt" && r.outcome == "done").collect();
    assert_eq!(preempts.len(), 1, "{audit:#?}");
    // The engine records the console's OS user; the name it claimed stays beside it.
    let me = gpuroom::store::file::user_name(gpuroom::store::file::nix_uid());
    let expected = if me == "e2e-bob" { me } else { format!("{me} (says e2e-bob)") };
    assert_eq!((preempts[0].user.as_str(), preempts[0].role), (expected.as_str(), Role::Operator));
    assert!(audit.iter().all(|r| r.role == Role::Operator || r.outcome == "refused"), "{audit:#?}");
    let mut operator_events = 0;
    store.for_each_event(0, |_, _, e| operator_events += matches!(e, Event::Operator { .. }) as usize).unwrap();
    assert_eq!(operator_events, 2, "the preempt and the refused viewer's cancel, nothing else");
    let commands = store.commands().unwrap();
    assert_eq!(commands.len(), 2, "{commands:?}");
}
