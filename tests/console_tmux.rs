//! End to end through a real terminal: the console runs in tmux at 120×40,
//! shows moving numbers in all five panes, answers `?`, survives a resize to
//! 80×24 and quits cleanly on `q`, restoring the terminal.
//!
//! Needs tmux. Without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does), where it fails.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

const TITLES: [&str; 5] = ["Fleet", "GPU memory", "Queue", "Spot market", "Budgets"];

struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).arg("-f").arg("/dev/null").args(args).output().expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn capture(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "console"]).lines().map(str::to_string).collect()
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "console", keys]);
    }

    /// Waits until `pred` holds for the screen, or gives up after `limit`.
    fn wait_for(&self, limit: Duration, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if pred(&screen) || start.elapsed() > limit {
                return screen;
            }
            sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-L").arg(&self.socket).arg("kill-server").output();
    }
}

fn tmux_available() -> bool {
    Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
}

/// The text inside the box whose top border carries `title`.
fn pane_text(screen: &[String], title: &str) -> Option<String> {
    let grid: Vec<Vec<char>> = screen.iter().map(|l| l.chars().collect()).collect();
    for (row, line) in grid.iter().enumerate() {
        let text: String = line.iter().collect();
        let Some(byte) = text.find(title) else { continue };
        let col = text[..byte].chars().count();
        let is_corner = |c: char| matches!(c, '┌' | '╭' | '┏' | '╔');
        let left = (0..col).rev().find(|&c| is_corner(line[c]))?;
        let right = (col..line.len()).find(|&c| matches!(line[c], '┐' | '╮' | '┓' | '╗')).unwrap_or(line.len() - 1);
        let bottom = (row + 1..grid.len()).find(|&r| grid[r].get(left).is_some_and(|c| matches!(c, '└' | '╰' | '┗' | '╚'))).unwrap_or(grid.len() - 1);
        let mut inside = String::new();
        for cells in grid.iter().take(bottom).skip(row + 1) {
            let end = right.min(cells.len());
            if left + 1 < end {
                inside.extend(&cells[left + 1..end]);
            }
            inside.push('\n');
        }
        return Some(inside);
    }
    None
}

#[test]
fn the_console_moves_answers_keys_resizes_and_quits_cleanly() {
    if !tmux_available() {
        assert!(std::env::var_os("GPUROOM_REQUIRE_TMUX").is_none(), "tmux is required (GPUROOM_REQUIRE_TMUX is set) but not installed");
        eprintln!("SKIPPED: tmux is not installed; set GPUROOM_REQUIRE_TMUX=1 to make this a failure");
        return;
    }
    let tmux = Tmux { socket: format!("gpuroom-test-{}", std::process::id()) };
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!("{bin} --no-log --seed 3; echo \"gpuroom exited with $?\"; sleep 60");
    tmux.run(&["new-session", "-d", "-s", "console", "-x", "120", "-y", "40", "sh", "-c", &command]);

    // Within 5 seconds of the first frame (5 simulated minutes at ×60), every
    // pane shows changing figures: a full cluster's memory pane may hold still
    // for a minute or two, until a job ends or starts.
    let first = tmux.wait_for(Duration::from_secs(20), |s| TITLES.iter().all(|t| pane_text(s, t).is_some()));
    for title in TITLES {
        assert!(pane_text(&first, title).is_some(), "pane {title:?} missing at 120×40:\n{}", first.join("\n"));
    }
    // The memory pane carries FGD's measure for the workload's typical shapes.
    let memory = pane_text(&first, "GPU memory").unwrap_or_default();
    assert!(memory.contains("F(M)"), "memory pane without F(M):\n{memory}");
    let shown = Instant::now();
    let mut unchanged: Vec<&str> = TITLES.to_vec();
    let mut last = first.clone();
    while !unchanged.is_empty() && shown.elapsed() < Duration::from_secs(5) {
        sleep(Duration::from_millis(250));
        last = tmux.capture();
        unchanged.retain(|t| pane_text(&first, t) == pane_text(&last, t));
    }
    assert!(unchanged.is_empty(), "no change within 5 s in {unchanged:?}:\nfirst:\n{}\nlast:\n{}", first.join("\n"), last.join("\n"));

    // Space freezes the display (the header says PAUSED and its clock stands
    // still while the engine goes on); Space again lets it move.
    tmux.keys("Space");
    let paused = tmux.wait_for(Duration::from_secs(5), |s| s[0].contains("PAUSED"));
    sleep(Duration::from_millis(2500));
    let still = tmux.capture();
    assert_eq!(paused[0], still[0], "the paused header moved:\n{}\n{}", paused[0], still[0]);
    tmux.keys("Space");
    let moving = tmux.wait_for(Duration::from_secs(5), |s| !s[0].contains("PAUSED") && s[0] != still[0]);
    assert!(!moving[0].contains("PAUSED"));

    // `?` opens the help listing the keys, Esc closes it.
    tmux.keys("?");
    let help = tmux.wait_for(Duration::from_secs(3), |s| s.join("\n").contains("quit"));
    assert!(help.join("\n").to_lowercase().contains("quit"), "help overlay:\n{}", help.join("\n"));
    tmux.keys("Escape");

    // A small terminal still shows all five panes.
    tmux.run(&["resize-window", "-t", "console", "-x", "80", "-y", "24"]);
    let small = tmux.wait_for(Duration::from_secs(5), |s| s.len() == 24 && TITLES.iter().all(|t| pane_text(s, t).is_some()));
    for title in TITLES {
        assert!(pane_text(&small, title).is_some(), "pane {title:?} missing at 80×24:\n{}", small.join("\n"));
    }
    assert!(small.iter().all(|l| l.chars().count() <= 80));

    // `q` asks first (this console runs the engine); `n` keeps it running;
    // Ctrl-C asks too; `q` then `y` quits with status 0 and leaves the alternate screen.
    tmux.keys("q");
    let asked = tmux.wait_for(Duration::from_secs(5), |s| s.join("\n").contains("Quit and stop the engine?"));
    assert!(asked.join("\n").contains("y  or q  stop and quit"), "the dialog says how:\n{}", asked.join("\n"));
    tmux.keys("n");
    let kept = tmux.wait_for(Duration::from_secs(5), |s| !s.join("\n").contains("Quit and stop the engine?"));
    assert!(kept.join("\n").contains("still running"), "{}", kept.join("\n"));
    tmux.keys("C-c");
    tmux.wait_for(Duration::from_secs(5), |s| s.join("\n").contains("Quit and stop the engine?"));
    tmux.keys("Escape");
    tmux.wait_for(Duration::from_secs(5), |s| !s.join("\n").contains("Quit and stop the engine?"));
    tmux.keys("q");
    tmux.wait_for(Duration::from_secs(5), |s| s.join("\n").contains("Quit and stop the engine?"));
    tmux.keys("y");
    let after = tmux.wait_for(Duration::from_secs(10), |s| s.iter().any(|l| l.contains("gpuroom exited with")));
    let text = after.join("\n");
    assert!(text.contains("gpuroom exited with 0"), "exit:\n{text}");
    assert!(!text.contains("Spot market"), "the console's screen is gone after quitting:\n{text}");
}
