//! The live path end to end, with real processes: a node declared in the
//! configuration (this machine has no GPU), a jobs file, the local executor
//! running `examples/jobs/train.sh`, and the room scheduling, checkpointing,
//! preempting and finishing them through `live::Live` exactly as the
//! console's driver does, at the wall-clock time.

use std::time::Duration;

use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::ids::JobId;
use gpuroom::live::Live;
use gpuroom::live::catalogue::Catalogue;
use gpuroom::live::config::{JobsFile, SourcesConfig};
use gpuroom::live::run::spawn_sources;
use gpuroom::room::Room;

const HOST: &str = "test-node";

fn sources(work: &std::path::Path) -> SourcesConfig {
    let text = format!(
        "[nvml]\nenabled = false\n[local]\nwork_dir = {:?}\nstop_grace_secs = 2\npoll_ms = 100\n\
         [[nodes]]\nhost = {HOST:?}\ngpus = 2\ngpu_memory_mib = 16384\ngpu_model = \"test GPU\"\n",
        work.display().to_string()
    );
    toml::from_str(&text).expect("a sources table")
}

fn jobs(steps: u32, step_secs: &str) -> JobsFile {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/jobs/train.sh");
    let text = format!(
        "[[tenant]]\nid = \"research\"\nquota_gpus = 2\nmonthly_budget = \"100\"\n\
         [[job]]\nname = \"tiny-train\"\ntenant = \"research\"\ngpus = 1\ngpu_mem_mib = 1000\nsteps = {steps}\n\
         checkpoint_mib = 1\ncommand = [\"sh\", {script:?}]\nenv_vars = {{ STEPS = \"{steps}\", STEP_SECS = \"{step_secs}\" }}\n"
    );
    JobsFile::parse("jobs.toml", &text).expect("a jobs file")
}

fn state(live: &Live, job: JobId) -> Option<String> {
    live.engine.room().view().jobs.iter().find(|j| j.id == job).map(|j| j.state.clone())
}

/// Applies the adapters' reports as they come until `done` holds (or 60 s).
async fn run_until(live: &mut Live, reports: &mut tokio::sync::mpsc::Receiver<gpuroom::sources::report::Report>, mut done: impl FnMut(&Live) -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if done(live) {
            return true;
        }
        match tokio::time::timeout(Duration::from_millis(200), reports.recv()).await {
            Ok(Some(report)) => live.report(chrono::Utc::now(), report).expect("apply a report"),
            Ok(None) => return done(live),
            Err(_) => live.tick(chrono::Utc::now()).expect("tick"),
        }
    }
    done(live)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_as_a_process_reports_progress_and_finishes() {
    let work = tempfile::tempdir().expect("a temp dir");
    let config = sources(work.path());
    let mut adapters = spawn_sources(&config, HOST);
    let catalogue = Catalogue::new(Vec::new(), config.nodes.clone());
    let mut live = Live::new(Room::default(), None, catalogue, HOST.into(), chrono::Utc::now(), adapters.executor.clone());
    live.begin(chrono::Utc::now(), Some(&jobs(20, "0.05"))).expect("begin");
    let view = live.engine.room().view();
    assert_eq!(view.nodes.len(), 1, "the declared node is up");
    let job = JobId(1);
    let finished = run_until(&mut live, &mut adapters.reports, |l| state(l, job).is_none()).await;
    assert!(finished, "the job ended; last state {:?}", state(&live, job));
    let stats = live.engine.room().view().totals.stats;
    assert_eq!((stats.done, stats.failed), (1, 0), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_preemption_saves_stops_requeues_and_the_job_resumes() {
    let work = tempfile::tempdir().expect("a temp dir");
    let config = sources(work.path());
    let mut adapters = spawn_sources(&config, HOST);
    let catalogue = Catalogue::new(Vec::new(), config.nodes.clone());
    let mut live = Live::new(Room::default(), None, catalogue, HOST.into(), chrono::Utc::now(), adapters.executor.clone());
    live.begin(chrono::Utc::now(), Some(&jobs(60, "0.1"))).expect("begin");
    let job = JobId(1);
    let progressed = |l: &Live| l.engine.room().view().jobs.iter().any(|j| j.id == job && j.state == "running" && j.progress > 0.1);
    assert!(run_until(&mut live, &mut adapters.reports, progressed).await, "the job runs and reports progress");
    let actor = Actor { user: "ana".into(), origin: "test".into(), role: Role::Operator, account: None };
    let outcome = live.engine.operate(&actor, Action::Preempt { job }).expect("the store");
    assert!(outcome.is_ok(), "{outcome:?}");
    let saved = |l: &Live| l.engine.room().view().jobs.iter().any(|j| j.id == job && j.last_save.is_some() && j.state != "running" && j.state != "ckpt");
    assert!(run_until(&mut live, &mut adapters.reports, saved).await, "saved and stopped: {:?}", state(&live, job));
    // Requeued, placed again, resumed from its checkpoint, and finished.
    let finished = run_until(&mut live, &mut adapters.reports, |l| state(l, job).is_none()).await;
    assert!(finished, "the job ended; last state {:?}", state(&live, job));
    let view = live.engine.room().view();
    assert_eq!((view.totals.stats.done, view.totals.stats.failed), (1, 0), "{:?}", view.totals.stats);
    assert!(view.log.iter().any(|l| l.text.contains("ana") || l.text.contains("preempt")), "the log says who preempted");
}
