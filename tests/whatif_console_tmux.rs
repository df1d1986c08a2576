//! The what-if pane end to end through a real terminal: tmux runs `gpuroom`
//! recording to a real log; `W` re-runs the log under every discipline and
//! the table comes over the panes, its recorded policy's column equal to
//! the recorded one, while the engine goes on; Esc closes it; `:whatif`
//! with a configuration file that does not exist says why, and the console
//! goes on.
//!
//! Needs tmux. Without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does), where it fails.

#[path = "support/tmux.rs"]
mod tmux;

use std::time::Duration;

use tmux::{Tmux, tmux_available};

/// The simulated clock in the header.
fn clock(screen: &str) -> String {
    let head = screen.lines().next().unwrap_or_default();
    head.split('│').map(str::trim).find(|p| p.ends_with("UTC")).unwrap_or_default().to_string()
}

#[test]
fn w_compares_every_discipline_over_the_live_console() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command =
        format!("cd {} && {bin} --seed 3 --warmup 12 --speed 600 --db {}; echo \"gpuroom exited with $?\"; sleep 60", dir.path().display(), db.display());
    let tmux = Tmux::start("whatif", 160, 50, &command);
    let before = tmux.wait_for("the console", Duration::from_secs(60), |s| s.contains("Queue") && s.contains("UTC"));
    tmux.keys(&["W"]);
    let table = tmux.wait_for("the comparison", Duration::from_secs(120), |s| s.contains("re-run exactly") && s.contains("budget crossings"));
    for want in
        ["What if: every discipline", "recorded", "fifo", "priority", "drf", "mlfq", "instance spend", "P95 queue wait", "mean JCT", "spot interruptions"]
    {
        assert!(table.contains(want), "no {want:?} in\n{table}");
    }
    // The recorded policy (fifo) gives back what happened: every marked change of its column is "=".
    let spend = table.lines().find(|l| l.contains("instance spend")).unwrap();
    let cells: Vec<&str> = spend.split("  ").map(str::trim).filter(|c| c.starts_with('$')).collect();
    assert!(cells.len() >= 5 && cells[1].ends_with("(=)") && cells[1].starts_with(cells[0]), "{spend}");
    // The engine did not wait for it.
    assert_ne!(clock(&before), clock(&table), "the clock moved on while the comparison ran");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the pane closed", Duration::from_secs(5), |s| !s.contains("What if:"));
    // A file that is not there: the pane says so; the console goes on.
    tmux.keys(&[":"]);
    tmux.type_text("whatif no-such-policy.toml");
    tmux.keys(&["Enter"]);
    let failed = tmux.wait_for("the failure", Duration::from_secs(30), |s| s.contains("No comparison"));
    assert!(failed.contains("no-such-policy.toml"), "{failed}");
    tmux.keys(&["Escape"]);
    tmux.quit_owning_console();
    tmux.wait_for("the exit", Duration::from_secs(20), |s| s.contains("gpuroom exited with 0"));
}
