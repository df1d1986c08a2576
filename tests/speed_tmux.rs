//! The simulated speed from the keyboard, end to end through a real
//! terminal: tmux runs `gpuroom` at ×60; `+` doubles the speed and `-`
//! halves it, the header says the speed, and the simulated clock really
//! moves that much faster (measured on the header's clock, not trusted from
//! the label).
//!
//! Needs tmux. Without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does), where it fails.

#[path = "support/tmux.rs"]
mod tmux;

use std::thread::sleep;
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use tmux::{Tmux, tmux_available};

/// The simulated time in the header (`2020-01-06 03:00:00 UTC`).
fn clock(screen: &str) -> NaiveDateTime {
    let header = screen.lines().next().unwrap_or_default();
    let end = header.find(" UTC").unwrap_or_else(|| panic!("no clock in the header: {header}"));
    let start = header[..end].char_indices().rev().nth(18).map(|(i, _)| i).unwrap();
    NaiveDateTime::parse_from_str(&header[start..end], "%Y-%m-%d %H:%M:%S").unwrap_or_else(|e| panic!("{e}: {header}"))
}

/// Simulated seconds per wall-clock second over `wall`.
fn measured_speed(tmux: &Tmux, wall: Duration) -> f64 {
    let (t0, c0) = (Instant::now(), clock(&tmux.screen()));
    sleep(wall);
    let (t1, c1) = (Instant::now(), clock(&tmux.screen()));
    (c1 - c0).num_seconds() as f64 / (t1 - t0).as_secs_f64()
}

#[test]
fn plus_and_minus_change_how_fast_the_simulated_clock_runs() {
    if !tmux_available() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!("{bin} --seed 3 --speed 60 --no-log; echo \"gpuroom exited with $?\"; sleep 60");
    let tmux = Tmux::start("speed", 200, 60, &command);
    tmux.wait_for("the console at ×60", Duration::from_secs(30), |s| s.contains("×60 (+/-)") && s.contains(" UTC"));
    let slow = measured_speed(&tmux, Duration::from_secs(3));

    tmux.keys(&["+", "+", "+", "+"]);
    tmux.wait_for("×960 in the header", Duration::from_secs(5), |s| s.contains("×960 (+/-)") && s.contains("speed ×960 (was ×480)"));
    let fast = measured_speed(&tmux, Duration::from_secs(3));
    assert!(fast > 8.0 * slow, "×960 runs the clock ~16 times as fast as ×60: {slow:.0} then {fast:.0} simulated s per s");

    tmux.keys(&["-", "-", "-", "-", "-"]);
    tmux.wait_for("×30 in the header", Duration::from_secs(5), |s| s.contains("×30 (+/-)"));
    let slower = measured_speed(&tmux, Duration::from_secs(3));
    assert!(slower < fast / 8.0, "×30 is slower again: {fast:.0} then {slower:.0}");

    tmux.quit_owning_console();
    tmux.wait_for("the exit", Duration::from_secs(20), |s| s.contains("gpuroom exited with 0"));
}
