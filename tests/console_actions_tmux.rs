//! Operator actions end to end through a real terminal: tmux runs `gpuroom`
//! recording to a real SQLite log; send-keys preempts a running job and
//! confirms, requeues another, approves a budget overrun through the form
//! with a reason, and acknowledges an alarm; the test reads the screen
//! (capture-pane) and then the audit table of the log to check each took
//! effect under the actor from the environment. The same keys on `--wall`
//! do nothing: no dialog on screen, no audit row, no operator event.
//!
//! Needs tmux. Without it the test says so and passes, unless
//! `GPUROOM_REQUIRE_TMUX` is set (as `.ci/run` does), where it fails.

#[path = "support/tmux.rs"]
mod tmux;

use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

use tmux::{Tmux, tmux_available};

use gpuroom::domain::event::Role;
use gpuroom::store::Store;

/// The id of the job on the selected (`▶`) row of the queue table.
fn selected_job(screen: &str) -> String {
    let line = screen.lines().find(|l| l.contains('▶') && l.contains(" j")).unwrap_or_else(|| panic!("no selected job row:\n{screen}"));
    let after = &line[line.find('▶').unwrap() + '▶'.len_utf8()..];
    after.split_whitespace().next().unwrap().to_string()
}

fn console(name: &str, db: &Path, extra: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!(
        "USER=e2e-ana SUDO_USER= SSH_CONNECTION='10.9.8.7 50000 10.0.0.1 22' {bin} --seed 2 --db {} {extra}; echo \"gpuroom exited with $?\"; sleep 60",
        db.display()
    );
    Tmux::start(name, 200, 60, &command)
}

fn quit(tmux: &Tmux) {
    tmux.quit_owning_console();
    tmux.wait_for("the exit", Duration::from_secs(20), |s| s.contains("gpuroom exited with 0"));
}

#[test]
fn preempt_requeue_approve_and_ack_land_on_screen_and_in_the_audit_log() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let tmux = console("actions", &db, "");
    tmux.wait_for("the queue", Duration::from_secs(30), |s| s.contains("Queue") && s.contains("running"));

    // The default order puts waiting jobs on top; the engine's order lists
    // the running ones first: preempt the first row of that.
    tmux.keys(&["3", ":"]);
    tmux.type_text("sort engine");
    tmux.keys(&["Enter", "Home"]);
    let screen = tmux.wait_for("a selected row", Duration::from_secs(5), |s| s.contains('▶'));
    let first = selected_job(&screen);
    tmux.keys(&["p"]);
    // Waited for whole: a capture can land while the terminal is still drawing the frame.
    let dialog = tmux.wait_for("the preempt dialog", Duration::from_secs(5), |s| {
        s.contains("Confirm") && s.contains(&format!("Preempt {first}")) && s.contains("only y sends")
    });
    assert!(dialog.contains("checkpoint") && dialog.contains("only y sends"), "the dialog says what will happen:\n{dialog}");
    tmux.keys(&["y"]);
    tmux.wait_for("the preempt's outcome", Duration::from_secs(10), |s| s.contains(&format!("✓ preempt {first}")));

    // Requeue the next running job; the dialog warns what is lost.
    tmux.keys(&["Down"]);
    sleep(Duration::from_millis(300));
    let second = selected_job(&tmux.screen());
    tmux.keys(&["r"]);
    let dialog = tmux.wait_for("the requeue dialog", Duration::from_secs(5), |s| s.contains(&format!("Requeue {second}")));
    assert!(dialog.contains("WITHOUT saving") && dialog.contains("Lost:"), "{dialog}");
    tmux.keys(&["y"]);
    tmux.wait_for("the requeue's outcome", Duration::from_secs(10), |s| s.contains(&format!("✓ requeue {second}")));

    // Approve an overrun through the form: the reason is required.
    tmux.keys(&["5", "a"]);
    tmux.wait_for("the approval form", Duration::from_secs(5), |s| s.contains("Approve overrun"));
    tmux.type_text("75");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the missing reason", Duration::from_secs(5), |s| s.contains("a reason is required"));
    tmux.keys(&["Tab", "Tab"]);
    tmux.type_text("e2e paper deadline");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the approval dialog", Duration::from_secs(5), |s| s.contains("Reason: e2e paper deadline"));
    tmux.keys(&["y"]);
    tmux.wait_for("the approval's outcome", Duration::from_secs(10), |s| s.contains("✓ approve the overrun of"));

    // Acknowledge every alarm from the command bar, if there are any.
    tmux.keys(&[":"]);
    tmux.type_text("ack");
    tmux.keys(&["Enter"]);
    let acked = tmux.wait_for("the acknowledgement", Duration::from_secs(10), |s| s.contains("✓ acknowledge alarm") || s.contains("no unacknowledged alarm"));
    if acked.contains("no unacknowledged alarm") {
        tmux.keys(&["Escape"]);
    }
    quit(&tmux);

    let store = Store::open_read_only(&db).unwrap();
    let audit = store.audit_records().unwrap();
    let done = |verb: &str, needle: &str| audit.iter().any(|r| r.verb == verb && r.outcome == "done" && r.detail.contains(needle));
    assert!(done("preempt", &first), "{audit:#?}");
    assert!(done("requeue", &second), "{audit:#?}");
    assert!(done("approve a budget overrun", "e2e paper deadline"), "{audit:#?}");
    if acked.contains("✓ acknowledge alarm") {
        assert!(audit.iter().any(|r| r.verb == "acknowledge an alarm" && r.outcome == "done"), "{audit:#?}");
    }
    for r in &audit {
        assert_eq!((r.user.as_str(), r.origin.as_str(), r.role), ("e2e-ana", "ssh 10.9.8.7", Role::Operator), "{r:?}");
    }
}

#[test]
fn the_wall_display_does_nothing_with_action_keys() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wall.db");
    // The wall only reads: an engine writes the log first.
    let engine = std::process::Command::new(env!("CARGO_BIN_EXE_gpuroom"))
        .args(["engine", "--seed", "2", "--speed", "max", "--until-hours", "6", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(engine.status.success(), "{}", String::from_utf8_lossy(&engine.stderr));
    let events_before = Store::open_read_only(&db).unwrap().event_count().unwrap();
    let tmux = console("wall", &db, "--wall");
    let first = tmux.wait_for("the wall", Duration::from_secs(30), |s| s.contains("read-only"));
    assert!(!first.contains("Confirm"));
    for keys in
        [&["3", "Home", "p"][..], &["y"], &["r", "y"], &["5", "a"], &["7", "5", "Enter"], &[":"], &["a", "c", "k", "Enter"], &["X", "y"], &["m", "Enter", "y"]]
    {
        tmux.keys(keys);
    }
    sleep(Duration::from_millis(800));
    let screen = tmux.screen();
    for word in ["Confirm", "Approve overrun", "Migrate", "refused"] {
        assert!(!screen.contains(word), "{word:?} on the wall:\n{screen}");
    }
    // Ctrl-C does not take a wall down; q does, without asking.
    tmux.keys(&["C-c"]);
    sleep(Duration::from_millis(500));
    assert!(tmux.screen().contains("read-only"), "Ctrl-C quit the wall:\n{}", tmux.screen());
    tmux.keys(&["q"]);
    tmux.wait_for("the exit", Duration::from_secs(20), |s| s.contains("gpuroom exited with 0"));
    let store = Store::open_read_only(&db).unwrap();
    assert!(store.audit_records().unwrap().is_empty(), "no action reached the engine");
    let mut operator_events = 0;
    store
        .for_each_event(0, |_, _, e| {
            if e.kind() == "operator" {
                operator_events += 1;
            }
        })
        .unwrap();
    assert_eq!(operator_events, 0);
    assert_eq!(store.event_count().unwrap(), events_before, "the wall wrote nothing");
}

/// `gpuroom --live` in a real terminal: a declared node (no GPU here), the
/// local executor running a real process, NVML's absence and a dead
/// dcgm-exporter shown as named alarms, and an operator preemption that the
/// executor carries out (checkpoint, then stop) before the job runs again.
#[test]
fn the_live_console_runs_a_real_job_and_names_failed_sources() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[sources.local]\nwork_dir = {:?}\nstop_grace_secs = 2\npoll_ms = 100\n[sources.dcgm]\nurls = [\"http://127.0.0.1:{dead}/metrics\"]\n\
             [sources.nvml]\nhost = \"e2e-node\"\n[[sources.nodes]]\nhost = \"e2e-node\"\ngpus = 2\ngpu_memory_mib = 16384\ngpu_model = \"test GPU\"\n",
            dir.path().join("jobs").display().to_string()
        ),
    )
    .expect("write the config");
    let jobs = dir.path().join("jobs.toml");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/jobs/train.sh");
    std::fs::write(
        &jobs,
        format!(
            "[[tenant]]\nid = \"research\"\nquota_gpus = 2\nmonthly_budget = \"100\"\n[[job]]\nname = \"e2e-train\"\ntenant = \"research\"\n\
             gpus = 1\ngpu_mem_mib = 1000\nsteps = 100000\ncheckpoint_mib = 1\ncommand = [\"sh\", {script:?}]\nenv_vars = {{ STEPS = \"100000\", STEP_SECS = \"0.05\" }}\n"
        ),
    )
    .expect("write the jobs");
    let db = dir.path().join("live.db");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!(
        "USER=e2e-ana {bin} --live --config {} --jobs {} --db {}; echo \"gpuroom exited with $?\"; sleep 60",
        config.display(),
        jobs.display(),
        db.display()
    );
    let tmux = Tmux::start("live", 200, 60, &command);
    let screen = tmux.wait_for("the live console with its job running", Duration::from_secs(30), |s| {
        s.contains("LIVE") && s.contains("e2e-node") && s.contains("e2e-train") && s.contains("running")
    });
    assert!(screen.contains("LIVE nvml·dcgm ×1·local"), "the header names the live sources:\n{screen}");
    if !Path::new("/dev/nvidiactl").exists() {
        tmux.wait_for("NVML's absence as an alarm", Duration::from_secs(20), |s| s.contains("no NVIDIA driver"));
    }
    tmux.wait_for("the dead exporter as an alarm", Duration::from_secs(20), |s| s.contains(&format!("127.0.0.1:{dead}")));

    // The live engine owns its log like a simulated one: it holds the lease,
    // beats its heartbeat, and serves views to attached consoles over its socket.
    let store = Store::open_read_only(&db).expect("the live log");
    let lease = store.lease().expect("the lease table").expect("the live engine holds the lease");
    let viewer = gpuroom::domain::event::Actor { user: "e2e".into(), origin: "test".into(), role: gpuroom::domain::event::Role::Viewer, account: None };
    let attached = gpuroom::host::client::Client::connect(&db, &viewer, true).expect("attach to the live engine");
    assert_eq!(attached.engine, lease.holder, "the socket is the lease holder's");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let view = loop {
        if let Some(view) = attached.latest_view(i64::MIN) {
            break view;
        }
        assert!(std::time::Instant::now() < deadline, "the live engine published no view");
        sleep(Duration::from_millis(100));
    };
    assert!(view.view.jobs.iter().any(|j| j.name == "e2e-train"), "the published view shows the job");
    let beat = lease.heartbeat_ms;
    sleep(Duration::from_millis(1500));
    let later = store.lease().expect("the lease table").expect("still held");
    assert_eq!(later.holder, lease.holder);
    assert!(later.heartbeat_ms > beat, "the heartbeat moves: {beat} then {}", later.heartbeat_ms);
    drop((attached, store));

    // Preempt the running job from the queue: saved, stopped, queued, running again.
    tmux.keys(&["3", "p"]);
    tmux.wait_for("the confirmation", Duration::from_secs(10), |s| s.contains("Preempt"));
    tmux.keys(&["y"]);
    tmux.wait_for("the job saved and back to running", Duration::from_secs(30), |s| {
        s.lines().any(|l| l.contains("e2e-train") && l.contains("running")) && s.contains("preempt")
    });
    // The screen can show "running" before the save and the stop are done
    // (the job is still running while it checkpoints): wait for the log to
    // hold the whole preemption, and the job started again, before quitting.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut kinds = Vec::new();
        if let Ok(store) = Store::open_read_only(&db) {
            let _ = store.for_each_event(0, |_, _, e| kinds.push(e.kind()));
        }
        let started = kinds.iter().filter(|k| **k == "started").count();
        if (kinds.contains(&"checkpoint-done") && kinds.contains(&"stopped") && started >= 2) || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    quit(&tmux);
    let store = Store::open_read_only(&db).expect("the live event log");
    let audit = store.audit_records().expect("the audit table");
    assert!(audit.iter().any(|a| a.user == "e2e-ana" && a.verb == "preempt" && a.outcome == "done"), "{audit:?}");
    let mut kinds = Vec::new();
    store.for_each_event(0, |_, _, e| kinds.push(e.kind())).expect("the events");
    for kind in ["node-up", "submit-batch", "started", "checkpoint-done", "stopped", "source"] {
        assert!(kinds.contains(&kind), "no {kind} event in the live log: {kinds:?}");
    }
}
