//! The Slurm pane end to end: `gpuroom --live` in a real terminal (tmux) on
//! the real Slurm that `.ci/slurm-up` starts. An operator selects real
//! `sbatch` jobs in the pane and suspends, resumes, requeues, holds and
//! migrates them with the pane's keys and the command bar, confirming each
//! dialog; the test reads the screen, asks Slurm itself (squeue) that each
//! verb happened, sees a refused verb named on screen and sent nowhere, and
//! finds every request and Slurm's answer in the log's audit table under the
//! actor from the environment.
//!
//! Needs tmux and Slurm: skipped, saying so, without them unless
//! `GPUROOM_REQUIRE_TMUX` / `GPUROOM_REQUIRE_SLURM` are set (as `.ci/run` does).

#[path = "support/loopback.rs"]
mod loopback;
#[path = "support/slurm.rs"]
mod slurm_support;
#[path = "support/tmux.rs"]
mod tmux;

use std::path::Path;
use std::time::Duration;

use gpuroom::domain::slurm::SlurmState;
use gpuroom::store::Store;
use slurm_support::{cancel_all, find, slurm_conf, submit, wait_for_jobs};
use tmux::{Tmux, tmux_available};

const WAIT: Duration = Duration::from_secs(30);

/// One Slurm cluster: the tests here take turns.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The selected (`▶`) row of the Slurm pane's job table.
fn selected_row(screen: &str) -> Option<&str> {
    screen.lines().find(|l| l.contains('▶'))
}

/// The job id on the selected row (its times tick, its id does not).
fn selected_id(screen: &str) -> Option<String> {
    let row = selected_row(screen)?;
    row.split('▶').nth(1)?.split_whitespace().next().map(str::to_string)
}

/// Presses `key` and waits (up to 2 s) for the selection to leave job `id`;
/// false when it stayed (the key had nowhere to go).
fn press_and_move(tmux: &Tmux, key: &str, id: &str) -> bool {
    tmux.keys(&[key]);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        if selected_id(&tmux.screen()).is_some_and(|now| now != id) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Moves the Slurm pane's selection to the row of job `name`: down a row at
/// a time, from the top once the bottom is reached. Each key is seen to land
/// before the next look, so a screen not yet redrawn never picks the row.
fn select(tmux: &Tmux, name: &str) {
    for _ in 0..24 {
        let screen = tmux.screen();
        let row = selected_row(&screen).unwrap_or_else(|| panic!("no selected row:\n{screen}")).to_string();
        if row.contains(name) {
            return;
        }
        let id = selected_id(&screen).unwrap_or_default();
        if !press_and_move(tmux, "j", &id) {
            press_and_move(tmux, "g", &id);
        }
    }
    panic!("cannot select {name}:\n{}", tmux.screen());
}

/// The job table's row of `name` shows `state` (the mirror has caught up).
fn row_shows(tmux: &Tmux, name: &str, state: &str) {
    tmux.wait_for(&format!("{name} {state} on screen"), WAIT, |s| s.lines().any(|l| l.contains(name) && l.contains(state)));
}

/// Presses `key` on the selected job, checks the dialog says `says`, confirms.
fn act(tmux: &Tmux, key: &str, says: &str) {
    tmux.keys(&[key]);
    tmux.wait_for(&format!("the dialog saying {says:?}"), WAIT, |s| s.contains(says));
    tmux.keys(&["y"]);
}

fn config(dir: &Path, conf: &Path) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[sources.nvml]\nenabled = false\n[sources.slurm]\nmode = \"advisory\"\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\n",
        conf.display().to_string()
    );
    std::fs::write(&path, text).expect("write the config");
    path
}

#[test]
fn an_operator_drives_real_slurm_jobs_from_the_slurm_pane() {
    if !tmux_available() {
        return;
    }
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    cancel_all(&conf);
    let train = submit(&conf, "e2e-train", "vision", 2, &[]);
    wait_for_jobs(&conf, "e2e-train to run", |jobs| find(jobs, train).state == SlurmState::Running);
    let wait = submit(&conf, "e2e-wait", "nlp", 3, &[]);
    wait_for_jobs(&conf, "e2e-wait to wait for GPUs", |jobs| find(jobs, wait).reason == "Resources");

    let dir = tempfile::tempdir().expect("a temp dir");
    let config = config(dir.path(), &conf);
    let db = dir.path().join("slurm.db");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!(
        "USER=e2e-ana SUDO_USER= SSH_CONNECTION= {bin} --live --config {} --db {}; echo \"gpuroom exited with $?\"; sleep 60",
        config.display(),
        db.display()
    );
    let tmux = Tmux::start("slurm", 200, 60, &command);
    let screen = tmux.wait_for("the Slurm pane with both jobs", WAIT, |s| s.contains("gpuroom-ci") && s.contains("e2e-train") && s.contains("e2e-wait"));
    assert!(screen.contains("Slurm 22.05"), "the release is named:\n{screen}");
    tmux.keys(&["7"]);

    // Suspend the running job with `s`, then resume it with `S`.
    select(&tmux, "e2e-train");
    act(&tmux, "s", &format!("Suspend Slurm job {train} e2e-train"));
    wait_for_jobs(&conf, "Slurm to suspend e2e-train", |jobs| find(jobs, train).state == SlurmState::Suspended);
    row_shows(&tmux, "e2e-train", "suspended");
    act(&tmux, "S", &format!("Resume Slurm job {train}"));
    wait_for_jobs(&conf, "Slurm to resume e2e-train", |jobs| find(jobs, train).state == SlurmState::Running);
    row_shows(&tmux, "e2e-train", "running");

    // Requeue it with `r`: the dialog says what Slurm will do and what is lost.
    tmux.keys(&["r"]);
    let dialog = tmux.wait_for("the requeue dialog", WAIT, |s| s.contains(&format!("scontrol requeue {train}")));
    assert!(dialog.contains("Slurm saves nothing"), "the loss is named:\n{dialog}");
    tmux.keys(&["y"]);
    wait_for_jobs(&conf, "Slurm to requeue e2e-train", |jobs| find(jobs, train).restarts == 1);

    // Hold the pending job with `h`, then move it to `spare` through the
    // command line the migrate key opens.
    select(&tmux, "e2e-wait");
    act(&tmux, "h", &format!("Hold Slurm job {wait}"));
    wait_for_jobs(&conf, "Slurm to hold e2e-wait", |jobs| find(jobs, wait).held());
    row_shows(&tmux, "e2e-wait", "held");
    tmux.keys(&["m"]);
    tmux.wait_for("the migrate command line", WAIT, |s| s.contains(&format!("slurm {wait} migrate partition=")));
    tmux.type_text("spare");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the migrate dialog", WAIT, |s| s.contains(&format!("scontrol update jobid={wait} partition=spare")));
    tmux.keys(&["y"]);
    wait_for_jobs(&conf, "Slurm to move e2e-wait to spare", |jobs| find(jobs, wait).partition == "spare");
    row_shows(&tmux, "e2e-wait", "spare");

    // Suspending a pending job: the dialog warns, the engine refuses, Slurm never hears of it.
    select(&tmux, "e2e-wait");
    act(&tmux, "s", "the engine will refuse this");
    let screen = tmux.wait_for("the refusal", WAIT, |s| s.contains("refused") && s.contains(&format!("cannot suspend job {wait}")));
    assert!(screen.contains("it is pending"), "the refusal says why:\n{screen}");
    let jobs = wait_for_jobs(&conf, "e2e-wait still pending", |jobs| find(jobs, wait).state == SlurmState::Pending);
    assert!(find(&jobs, wait).held(), "still held: nothing reached Slurm");

    tmux.quit_owning_console();
    tmux.wait_for("the exit", WAIT, |s| s.contains("gpuroom exited with 0"));
    let store = Store::open_read_only(&db).expect("the live log");
    let audit = store.audit_records().expect("the audit table");
    let ana: Vec<(&str, &str)> = audit.iter().filter(|r| r.user == "e2e-ana").map(|r| (r.verb.as_str(), r.outcome.as_str())).collect();
    for verb in ["suspend", "resume", "requeue", "hold", "migrate"] {
        let done = ana.iter().filter(|(v, o)| *v == verb && *o == "done").count();
        assert_eq!(done, 2, "{verb}: the request and Slurm's answer, each audited once: {audit:#?}");
    }
    assert!(ana.contains(&("suspend", "refused")), "the refusal is audited: {audit:#?}");
    assert!(audit.iter().filter(|r| r.user == "e2e-ana").all(|r| r.origin == "local"), "{audit:#?}");
    let requeued = audit.iter().find(|r| r.verb == "requeue" && r.detail.contains(&format!("scontrol requeue {train}")));
    assert!(requeued.is_some(), "Slurm's answer names the command it ran: {audit:#?}");
    cancel_all(&conf);
}

/// The fleet pane of a Slurm site: `localhost` is a node of the room, its
/// state Slurm's, its GPUs the Slurm jobs' (drilled into: by id, name and
/// account) with dcgm-exporter's utilization matched by host name.
#[test]
fn the_fleet_pane_shows_the_slurm_node_with_its_jobs_and_dcgm_figures() {
    if !tmux_available() {
        return;
    }
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    cancel_all(&conf);
    let train = submit(&conf, "fleet-train", "vision", 3, &[]);
    wait_for_jobs(&conf, "fleet-train to run", |jobs| find(jobs, train).state == SlurmState::Running);
    let mut page = String::new();
    for gpu in 0..4 {
        let labels = format!("gpu=\"{gpu}\",modelName=\"NVIDIA A10G\",Hostname=\"localhost\"");
        page.push_str(&format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} {}\nDCGM_FI_DEV_FB_USED{{{labels}}} 2000\nDCGM_FI_DEV_FB_FREE{{{labels}}} 20564\n", 61 + gpu));
    }
    let exporter = loopback::Loopback::start(move |_| loopback::Reply::ok("text/plain; version=0.0.4", page.clone()));

    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("config.toml");
    let text = format!(
        "[sources.nvml]\nenabled = false\n[sources.dcgm]\nurls = [{:?}]\nevery_secs = 1\n[sources.slurm]\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\n\
         [[sources.nodes]]\nhost = \"localhost\"\ninstance_type = \"g5.12xlarge\"\nbilling = \"on-demand\"\n",
        exporter.url("/metrics"),
        conf.display().to_string()
    );
    std::fs::write(&config, text).expect("write the config");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!("{bin} --live --config {}; echo \"gpuroom exited with $?\"; sleep 60", config.display());
    let tmux = Tmux::start("slurm-fleet", 160, 48, &command);
    tmux.wait_for("the Slurm job", WAIT, |s| s.contains("fleet-train"));
    tmux.keys(&["1"]);
    let screen = tmux.wait_for("localhost in the fleet pane as Slurm's", WAIT, |s| s.lines().any(|l| l.contains("localhost") && l.contains("slurm mixed")));
    let row = screen.lines().find(|l| l.contains("localhost") && l.contains("slurm mixed")).unwrap();
    assert!(row.contains("g5.12xlarge") && row.contains("on-demand") || row.contains("OD"), "what the node is and costs:\n{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the drill-down", WAIT, |s| s.contains("Esc back"));
    tmux.keys(&["z"]);
    let slurm_job = format!("slurm-{train} fleet-train (vision)");
    let detail = tmux.wait_for("the drill-down with the Slurm job on its GPUs and dcgm's figures", WAIT, |s| s.contains(&slurm_job) && s.contains("64%"));
    let held = detail.lines().filter(|l| l.contains(&slurm_job)).count();
    assert_eq!(held, 3, "the job's three GPUs:\n{detail}");
    assert!(detail.contains("61%") && detail.contains("62%") && detail.contains("63%"), "dcgm's utilization per GPU:\n{detail}");
    tmux.quit_owning_console();
    tmux.wait_for("the exit", WAIT, |s| s.contains("gpuroom exited with 0"));
    cancel_all(&conf);
}
