//! Alarms that stay, end to end through a real terminal: tmux runs `gpuroom`
//! on the simulated cluster (real spot traces) at ×600, where spot storms
//! and interruption notices come and go within seconds of wall time. A
//! storm's alarm shows; once its condition clears it stays counted in the
//! header as unread (`◌`) for as long as nobody acknowledges it, however
//! fast the simulation runs; `:ack all` marks everything read.
//!
//! Needs tmux. Without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does), where it fails.

#[path = "support/tmux.rs"]
mod tmux;

use std::thread::sleep;
use std::time::Duration;

use tmux::{Tmux, tmux_available};

/// The header's unread count (`◌ N cleared unread`), if any.
fn unread(screen: &str) -> Option<u32> {
    let header = screen.lines().next()?;
    let at = header.find('◌')?;
    header[at + '◌'.len_utf8()..].split_whitespace().next()?.parse().ok()
}

#[test]
fn a_storm_seen_at_x600_stays_listed_until_acknowledged() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!("USER=e2e-ana {bin} --seed 7 --speed 600 --db {}; echo \"gpuroom exited with $?\"; sleep 60", db.display());
    let tmux = Tmux::start("alarms", 200, 60, &command);
    // A --db that named no file made a new run, and the console says so.
    tmux.wait_for("the console and its new log", Duration::from_secs(30), |s| s.contains("Alarms & log") && s.contains("new log") && s.contains("run.db"));

    // A storm (several spot nodes lost within ten minutes) is an alarm, not a log line.
    let screen = tmux.wait_for("a spot storm's alarm", Duration::from_secs(90), |s| s.contains("storm:") && s.contains("nodes lost within"));
    assert!(screen.lines().next().is_some_and(|h| h.contains('▲') || h.contains('◌')), "the header counts it:\n{screen}");

    // Something clears unseen (a notice whose node went, a storm that ended):
    // it stays in the header as unread, simulated hours later.
    let screen = tmux.wait_for("an unread cleared alarm", Duration::from_secs(90), |s| unread(s).is_some());
    let first = unread(&screen).unwrap();
    sleep(Duration::from_secs(5)); // ≈ 50 simulated minutes at ×600
    let later = tmux.screen();
    let still = unread(&later).unwrap_or_else(|| panic!("the unread count left by itself:\n{later}"));
    assert!(still >= first, "unread only grows until someone reads: {first} then {still}\n{later}");
    assert!(later.contains("cleared") && later.contains("unread"), "the pane lists them:\n{later}");

    // Read them all: the unread count goes (new ones may come, but not these).
    tmux.keys(&[":"]);
    tmux.type_text("ack all");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the unread count to drop", Duration::from_secs(10), |s| unread(s).is_none_or(|n| n < still));
    assert!(!screen.contains("refused"), "{screen}");

    tmux.quit_owning_console();
    tmux.wait_for("the exit", Duration::from_secs(20), |s| s.contains("gpuroom exited with 0"));
}
