//! `gpuroom agent`, the real binary, against the real Slurm of `.ci/slurm-up`
//! and a metadata service of our own on 127.0.0.1: a spot interruption
//! notice drains the node `localhost` once, with a reason Slurm shows and
//! `spot_drain::parse` reads back; a second agent finds it already drained;
//! without a notice nothing is drained; a drain Slurm cannot make and a
//! silent metadata service make `--once` fail, saying why.
//!
//! Its own test binary: draining the cluster's one node would stall the
//! other Slurm tests' jobs. The node is always resumed (a Drop guard), and
//! the tests here take turns. Skipped with a message when
//! `GPUROOM_SLURM_CONF` is not set, unless `GPUROOM_REQUIRE_SLURM` is.

#[path = "support/loopback.rs"]
mod loopback;
#[path = "support/slurm.rs"]
mod slurm_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpuroom::domain::spot_drain::{self, SpotDrain};
use loopback::{Loopback, Reply, Seen};
use slurm_support::{slurm_command, slurm_conf};

const NODE: &str = "localhost";
/// A generous cap on any wait: only a hang trips it.
const PATIENCE: Duration = Duration::from_secs(30);

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// IMDSv2 as the agent needs it: a token, then 404 or the notice.
struct Fake {
    notice: Mutex<Option<String>>,
    action_polls: AtomicUsize,
    untokened: AtomicBool,
}

impl Fake {
    fn serve(notice: Option<String>) -> (Arc<Fake>, Loopback) {
        let fake = Arc::new(Fake { notice: Mutex::new(notice), action_polls: AtomicUsize::new(0), untokened: AtomicBool::new(false) });
        let f = fake.clone();
        (fake, Loopback::start(move |seen| f.answer(seen)))
    }

    fn answer(&self, seen: &Seen) -> Reply {
        if seen.method == "PUT" && seen.url == "/latest/api/token" {
            return Reply::ok("text/plain", "token-1");
        }
        if seen.header("X-aws-ec2-metadata-token") != Some("token-1") {
            self.untokened.store(true, SeqCst);
            return Reply::status(401, "");
        }
        match seen.url.as_str() {
            "/latest/meta-data/spot/instance-action" => {
                self.action_polls.fetch_add(1, SeqCst);
                match self.notice.lock().unwrap().clone() {
                    Some(body) => Reply::ok("text/plain", body),
                    None => Reply::status(404, "Not Found"),
                }
            }
            _ => Reply::status(404, "Not Found"),
        }
    }
}

/// Puts the node back in service however the test ends.
struct Resume(PathBuf);

impl Drop for Resume {
    fn drop(&mut self) {
        resume(&self.0);
    }
}

fn resume(conf: &Path) {
    // Refused ("Invalid node state specified") when the node is not drained: fine.
    let _ = Command::new("scontrol").args(["update", &format!("nodename={NODE}"), "state=resume"]).env("SLURM_CONF", conf).output();
}

/// A running agent: killed if the test fails before it is stopped.
struct Agent {
    child: Child,
    lines: mpsc::Receiver<(bool, String)>,
    seen: Vec<(bool, String)>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    fn start(args: &[&str]) -> Agent {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpuroom"))
            .arg("agent")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpuroom agent starts");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for (is_err, pipe) in [(false, Box::new(out) as Box<dyn std::io::Read + Send>), (true, Box::new(err))] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send((is_err, line));
                }
            });
        }
        Agent { child, lines, seen: Vec::new() }
    }

    /// Every line so far (stderr ones flagged true).
    fn lines(&mut self) -> &[(bool, String)] {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        &self.seen
    }

    fn wait_for_line(&mut self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some((_, l)) = self.lines().iter().find(|(e, l)| !e && ok(l)) {
                return l.clone();
            }
            assert!(Instant::now() < deadline, "no line {what} from the agent; it said {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM; the exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the agent ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn once(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuroom")).arg("agent").arg("--once").args(args).stdin(Stdio::null()).output().expect("gpuroom agent --once runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The node's state and reason as sinfo shows them (`%T %E`).
fn node_now(conf: &Path) -> (String, String) {
    let out = slurm_command(conf, "sinfo", &["-N", "-h", "-n", NODE, "-o", "%N|%T|%E"]);
    let line = out.lines().next().unwrap_or_else(|| panic!("sinfo shows no {NODE}: {out:?}"));
    let f: Vec<&str> = line.splitn(3, '|').collect();
    assert_eq!(f.len(), 3, "{line:?}");
    (f[1].to_string(), f[2].to_string())
}

fn drained(state: &str) -> bool {
    state.starts_with("drain")
}

#[test]
fn a_termination_notice_drains_the_node_once_with_a_reason_the_head_reads_back() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = turn();
    resume(&conf);
    let _resume = Resume(conf.clone());
    let (state, _) = node_now(&conf);
    assert!(!drained(&state), "{NODE} is {state} before the test");

    let deadline = DateTime::from_timestamp(Utc::now().timestamp() + 120, 0).unwrap();
    let body = format!(r#"{{"action": "terminate", "time": "{}"}}"#, deadline.format("%Y-%m-%dT%H:%M:%SZ"));
    let (fake, imds) = Fake::serve(Some(body));
    let endpoint = imds.url("");
    let conf_arg = conf.display().to_string();
    let mut agent = Agent::start(&["--node", NODE, "--imds", &endpoint, "--slurm-conf", &conf_arg, "--every", "1"]);

    // Slurm shows it: drained (draining while a job runs), with the agent's reason.
    let wait_until = Instant::now() + PATIENCE;
    let (state, reason) = loop {
        let (state, reason) = node_now(&conf);
        if drained(&state) {
            break (state, reason);
        }
        assert!(Instant::now() < wait_until, "{NODE} never drained: {state} {reason:?}; the agent said {:#?}", agent.lines());
        std::thread::sleep(Duration::from_millis(200));
    };
    let expected = spot_drain::reason("terminate", Some(deadline));
    assert_eq!(reason, expected, "state {state}");
    assert_eq!(spot_drain::parse(&reason), Some(SpotDrain { kind: "terminate".into(), deadline: Some(deadline) }));
    // scontrol's view (with Slurm's [user@time] tail) reads back the same.
    let shown = slurm_command(&conf, "scontrol", &["show", "node", NODE]);
    let with_tail = shown.lines().find_map(|l| l.trim().strip_prefix("Reason=")).unwrap_or_else(|| panic!("no Reason= in {shown}"));
    assert_eq!(spot_drain::parse(with_tail).and_then(|d| d.deadline), Some(deadline), "{with_tail:?}");

    let line = agent.wait_for_line("saying it drained", |l| l.starts_with("drained "));
    assert!(line.starts_with(&format!("drained {NODE}: {expected} (Slurm: state ")), "{line}");
    assert!(line.to_ascii_uppercase().contains("DRAIN"), "Slurm's state is in the line: {line}");

    // Three more polls: the same notice is not drained again, and nothing went wrong.
    let polls = fake.action_polls.load(SeqCst);
    let wait_until = Instant::now() + PATIENCE;
    while fake.action_polls.load(SeqCst) < polls + 3 {
        assert!(Instant::now() < wait_until, "the agent stopped polling");
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines = agent.lines().to_vec();
    assert_eq!(lines.iter().filter(|(_, l)| l.starts_with("drained ")).count(), 1, "drained once: {lines:#?}");
    assert!(lines.iter().all(|(e, _)| !e), "nothing on stderr while running: {lines:#?}");
    assert!(!fake.untokened.load(SeqCst), "every GET carried the IMDSv2 token");

    let status = agent.terminate();
    assert!(status.success(), "SIGTERM ends it cleanly: {status:?}; it said {:#?}", agent.lines());

    // Another agent (a restart) finds the node drained for this very notice: left as it is.
    let again = once(&["--node", NODE, "--imds", &endpoint, "--slurm-conf", &conf_arg]);
    let out = text(&again.stdout);
    assert!(again.status.success(), "{again:?}");
    assert!(out.starts_with(&format!("already drained {NODE}: {expected}")), "{out}");
    assert_eq!(node_now(&conf).1, expected);

    drop(_resume);
    let (state, _) = node_now(&conf);
    assert!(!drained(&state), "the guard resumed {NODE}: {state}");
}

#[test]
fn without_a_notice_nothing_is_drained() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = turn();
    resume(&conf);
    let _resume = Resume(conf.clone());
    let conf_arg = conf.display().to_string();

    let (fake, imds) = Fake::serve(None);
    let quiet = once(&["--node", NODE, "--imds", &imds.url(""), "--slurm-conf", &conf_arg]);
    assert!(quiet.status.success(), "{quiet:?}");
    assert!(!text(&quiet.stdout).contains("drained"), "{quiet:?}");
    assert_eq!(fake.action_polls.load(SeqCst), 1, "one poll");
    let (state, reason) = node_now(&conf);
    assert!(!drained(&state), "{NODE} is {state} ({reason})");
}

#[test]
fn a_drain_slurm_cannot_make_fails_once_plainly() {
    // Touches no Slurm (an unknown node name is no test here: slurmctld maps
    // any name to the node of a one-node cluster named `localhost`).
    let (_fake, imds) = Fake::serve(Some(r#"{"action": "stop", "time": "2026-12-04T22:10:00Z"}"#.to_string()));
    let out = once(&["--node", "gpu-7", "--imds", &imds.url(""), "--slurm-bin", "/nonexistent/bin"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("could not drain gpu-7: /nonexistent/bin/scontrol update nodename=gpu-7 state=drain reason=spot interruption: stop at 2026-12-04T22:10:00Z (gpuroom agent): not installed"), "{err}");
    assert!(err.contains("gpu-7 was not drained"), "{err}");
    assert!(!text(&out.stdout).contains("drained"), "{out:?}");
}

#[test]
fn a_silent_metadata_service_fails_once_plainly() {
    // Touches no Slurm: runs with or without one.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = once(&["--node", "nowhere", "--imds", &endpoint, "--slurm-bin", "/nonexistent"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains(&format!("imds: {endpoint}/latest/api/token: cannot connect")), "{err}");
    assert!(err.contains(&format!("the metadata service at {endpoint} did not answer")), "{err}");
    assert!(text(&out.stdout).is_empty(), "{out:?}");
}
