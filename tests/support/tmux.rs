//! A detached tmux server of the test's own (its own socket), running one
//! command in a window of a given size: keys in, the screen out.

#![allow(dead_code)]

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(name: &str, w: u16, h: u16, command: &str) -> Tmux {
        let tmux = Tmux { socket: format!("gpuroom-{name}-{}", std::process::id()) };
        tmux.run(&["new-session", "-d", "-s", "console", "-x", &w.to_string(), "-y", &h.to_string(), "sh", "-c", command]);
        tmux
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).arg("-f").arg("/dev/null").args(args).output().expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "console"])
    }

    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "console", k]);
            sleep(Duration::from_millis(60));
        }
    }

    /// Quits a console that runs its own engine: `q`, which asks first, then `y`.
    pub fn quit_owning_console(&self) {
        self.keys(&["q"]);
        self.wait_for("the quit dialog", Duration::from_secs(10), |s| s.contains("Quit and stop the engine?"));
        self.keys(&["y"]);
    }

    /// Literal text (no key names).
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "console", "-l", text]);
        sleep(Duration::from_millis(60));
    }

    pub fn wait_for(&self, what: &str, limit: Duration, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            if start.elapsed() > limit {
                panic!("waited {limit:?} for {what}; the screen:\n{screen}");
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

pub fn tmux_available() -> bool {
    let ok = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("GPUROOM_REQUIRE_TMUX").is_none(), "tmux is required (GPUROOM_REQUIRE_TMUX is set) but not installed");
        eprintln!("SKIPPED: tmux is not installed; set GPUROOM_REQUIRE_TMUX=1 to make this a failure");
    }
    ok
}
