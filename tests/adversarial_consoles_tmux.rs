//! The adversarial suite, consoles in a real terminal: what a wall and an
//! attached console show of an old view and of an engine that changed.
//! Issue 22, items 7 and 10.

#[path = "support/tmux.rs"]
mod tmux;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tmux::{Tmux, tmux_available};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

fn engine(db: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["engine", "--seed", "6"]).args(extra).arg("--db").arg(db).stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

fn console(name: &str, db: &Path, extra: &str) -> Tmux {
    let command = format!("{BIN} --db {} {extra}; echo \"gpuroom exited with $?\"; sleep 60", db.display());
    Tmux::start(name, 200, 60, &command)
}

/// Item 7: a view published 70 s before the wall opened showed "2.0 s old"
/// and no STALE banner: the age counted from when the wall read it.
#[test]
fn the_wall_shows_a_views_real_age_from_its_first_frame() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    assert!(engine(&db, &["--speed", "max", "--until-hours", "12"]).status().unwrap().success());
    let seventy_seconds_ago = chrono::Utc::now().timestamp_millis() - 70_000;
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE views SET published_ms = ?1", [seventy_seconds_ago]).unwrap();
    drop(conn);
    let wall = console("old-wall", &db, "--wall");
    let first = wall.wait_for("the wall's first frame", Duration::from_secs(30), |s| s.contains(" old"));
    assert!(first.contains("STALE"), "the first frame does not say the data is stale:\n{first}");
    assert!(first.contains("1m"), "the first frame does not show the view's age (70 s):\n{first}");
    wall.keys(&["q"]);
}

fn pid_on(tmux: &Tmux, pid: u32, what: &str) -> String {
    tmux.wait_for(what, Duration::from_secs(45), |s| s.contains(&format!("pid {pid}")))
}

fn kill_9(mut child: Child) {
    child.kill().unwrap();
    let _ = child.wait();
}

/// Item 10: an attached console kept naming a dead engine's pid after a
/// new engine took the log over.
#[test]
fn an_attached_console_names_the_engine_that_holds_the_log_now() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("takeover.db");
    let first = engine(&db, &["--speed", "600"]).spawn().unwrap();
    let start = std::time::Instant::now();
    while gpuroom::store::Store::open_read_only(&db).ok().and_then(|s| s.latest_view(i64::MIN).ok().flatten()).is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "no view published");
        std::thread::sleep(Duration::from_millis(50));
    }
    let tmux = console("takeover", &db, "");
    let screen = pid_on(&tmux, first.id(), "the first engine's pid");
    assert!(screen.contains("ATTACHED"), "{screen}");
    kill_9(first);
    let second = engine(&db, &["--speed", "600"]).spawn().unwrap();
    let screen = pid_on(&tmux, second.id(), "the new engine's pid");
    assert!(screen.contains("ATTACHED"), "{screen}");
    tmux.keys(&["q"]);
    kill_9(second);
}
