//! The real Slurm that `.ci/slurm-up` starts (one node, 4 CPUs, 4 fake GRES
//! GPUs, partitions `gpu` and `spare`): where its slurm.conf is, running its
//! commands, submitting jobs and reading them back. Shared by the Slurm tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuroom::domain::slurm::SlurmJob;
use gpuroom::sources::slurm::json;

/// The cluster's slurm.conf, or `None` (the test is skipped, saying so)
/// unless `GPUROOM_REQUIRE_SLURM` is set, where a missing cluster fails.
pub fn slurm_conf() -> Option<PathBuf> {
    let required = std::env::var_os("GPUROOM_REQUIRE_SLURM").is_some();
    match std::env::var_os("GPUROOM_SLURM_CONF") {
        Some(conf) => Some(PathBuf::from(conf)),
        None => {
            assert!(!required, "Slurm is required (GPUROOM_REQUIRE_SLURM is set) but GPUROOM_SLURM_CONF is not");
            eprintln!("SKIPPED: no Slurm; run .ci/slurm-up DIR and set GPUROOM_SLURM_CONF=DIR/slurm.conf");
            None
        }
    }
}

pub fn slurm_command(conf: &Path, program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program).args(args).env("SLURM_CONF", conf).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Submits `sleep 600` under `name`/`account` asking `gpus` GPUs; its id.
pub fn submit(conf: &Path, name: &str, account: &str, gpus: u32, extra: &[&str]) -> u64 {
    let gres = format!("--gres=gpu:{gpus}");
    let mut args = vec!["--parsable", "-J", name, "-A", account, "-p", "gpu", gres.as_str(), "-o", "/dev/null"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--wrap", "sleep 600"]);
    let out = slurm_command(conf, "sbatch", &args);
    out.split(';').next().and_then(|id| id.parse().ok()).unwrap_or_else(|| panic!("sbatch said {out:?}"))
}

/// The jobs as `squeue --json` lists them now.
pub fn jobs_now(conf: &Path) -> Vec<SlurmJob> {
    json::jobs("squeue --json", &slurm_command(conf, "squeue", &["--json"])).expect("squeue --json reads")
}

/// Polls squeue until `ok` holds (or 60 s); the jobs then.
pub fn wait_for_jobs(conf: &Path, what: &str, ok: impl Fn(&[SlurmJob]) -> bool) -> Vec<SlurmJob> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let jobs = jobs_now(conf);
        if ok(&jobs) {
            return jobs;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; jobs: {jobs:#?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub fn find(jobs: &[SlurmJob], id: u64) -> &SlurmJob {
    jobs.iter().find(|j| j.id == id).unwrap_or_else(|| panic!("job {id} is not in {jobs:#?}"))
}

/// Cancels this user's jobs and waits until none is active and no node
/// holds a GPU, a shard or a CPU: each test starts on an idle cluster.
pub fn cancel_all(conf: &Path) {
    let user = slurm_command(conf, "id", &["-un"]);
    slurm_command(conf, "scancel", &["-u", &user]);
    wait_for_jobs(conf, "no active job", |jobs| jobs.iter().all(|j| !j.active()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let nodes = json::nodes("sinfo -N --json", &slurm_command(conf, "sinfo", &["-N", "--json"])).expect("sinfo -N --json reads");
        if nodes.iter().all(|n| n.gpus_used == 0 && n.shards_used == 0 && n.cpus_alloc == 0) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for the GPUs to be free: {nodes:#?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Applies an engine's reports as they come (a tick when none comes within
/// 200 ms) until `done` holds, or fails after `limit` saying what it waited
/// for and what the room showed. `now` is the engine's clock.
pub async fn apply_until(
    live: &mut gpuroom::live::Live,
    reports: &mut tokio::sync::mpsc::Receiver<gpuroom::sources::report::Report>,
    what: &str,
    limit: Duration,
    now: impl Fn() -> chrono::DateTime<chrono::Utc>,
    done: impl Fn(&gpuroom::live::Live) -> bool,
) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done(live) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; slurm: {:#?}; log: {:#?}",
            live.engine.room().view().slurm,
            live.engine.room().view().log
        );
        match tokio::time::timeout(Duration::from_millis(200), reports.recv()).await {
            Ok(Some(report)) => live.report(now(), report).expect("apply a report"),
            Ok(None) => panic!("the adapters stopped"),
            Err(_) => live.tick(now()).expect("tick"),
        }
    }
}
