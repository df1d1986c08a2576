//! The local executor with real child processes (`examples/jobs/*.sh`):
//! the environment a job gets, progress and checkpoints, a checkpoint
//! request by SIGUSR1, a stop by SIGTERM and then SIGKILL after the grace,
//! exits on its own, resumption, and bad input (an unregistered job, a
//! missing program, malformed progress lines).

use std::time::Duration;

use gpuroom::ckpt::CheckpointKind;
use gpuroom::domain::event::{Effect, Event};
use gpuroom::domain::ids::{JobId, NodeId};
use gpuroom::sources::local::{ExecutorInput, JobCommand, LocalConfig, spawn};
use gpuroom::sources::report::Report;
use tokio::sync::mpsc;

const TRAIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/jobs/train.sh");
const STUBBORN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/jobs/stubborn.sh");

struct Rig {
    inputs: mpsc::Sender<ExecutorInput>,
    reports: mpsc::Receiver<Report>,
    _work: tempfile::TempDir,
}

fn rig(grace: u64) -> Rig {
    let work = tempfile::tempdir().expect("a temp dir");
    let config = LocalConfig { work_dir: work.path().to_path_buf(), stop_grace_secs: grace, poll_ms: 50 };
    let (inputs, rx) = mpsc::channel(16);
    let (tx, reports) = mpsc::channel(256);
    drop(spawn(config, rx, tx));
    Rig { inputs, reports, _work: work }
}

fn sh(script: &str, env: &[(&str, &str)]) -> JobCommand {
    JobCommand { program: "sh".into(), args: vec![script.into()], workdir: None, env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
}

impl Rig {
    async fn send(&self, input: ExecutorInput) {
        self.inputs.send(input).await.expect("the executor runs");
    }

    async fn start(&self, job: u64, command: JobCommand, gpus: Vec<u8>, resume_step: u64) {
        self.send(ExecutorInput::Register { job: JobId(job), command }).await;
        self.send(ExecutorInput::Effect(Effect::StartJob { job: JobId(job), node: NodeId(0), gpus, resume_step })).await;
    }

    /// The next report that `pick` accepts (others are dropped), within 20 s.
    async fn until<T>(&mut self, mut pick: impl FnMut(&Report) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let report = tokio::time::timeout_at(deadline, self.reports.recv()).await.expect("a report in time").expect("the executor runs");
            if let Some(t) = pick(&report) {
                return t;
            }
        }
    }
}

fn core(report: &Report) -> Option<&Event> {
    match report {
        Report::Core(e) => Some(e),
        _ => None,
    }
}

#[tokio::test]
async fn a_job_gets_its_gpus_and_files_reports_progress_and_exits() {
    let mut rig = rig(5);
    let dump = rig._work.path().join("env.txt");
    let dump_s = dump.display().to_string();
    rig.start(1, sh(TRAIN, &[("STEPS", "5"), ("STEP_SECS", "0.02"), ("ENV_DUMP", &dump_s)]), vec![0, 2], 0).await;
    assert!(matches!(rig.until(|r| core(r).cloned()).await, Event::JobStarted { job: JobId(1) }));
    rig.until(|r| match core(r) {
        Some(Event::Telemetry { progress, .. }) => progress.first().is_some_and(|p| p.1 == 5).then_some(()),
        _ => None,
    })
    .await;
    let exited = rig.until(|r| match core(r) {
        Some(Event::JobExited { ok, message, .. }) => Some((*ok, message.clone())),
        _ => None,
    });
    assert_eq!(exited.await, (true, "exit status 0".to_string()));
    let env = std::fs::read_to_string(&dump).expect("the job wrote its environment");
    for needle in ["CUDA_VISIBLE_DEVICES=0,2", "GPUROOM_JOB_ID=j1", "GPUROOM_RESUME_STEP=0", "GPUROOM_PROGRESS_FILE=", "GPUROOM_CHECKPOINT_DIR="] {
        assert!(env.contains(needle), "{needle} missing from\n{env}");
    }
}

#[tokio::test]
async fn preemption_is_a_checkpoint_then_a_stop_and_a_resumed_run_starts_from_it() {
    let mut rig = rig(5);
    rig.start(2, sh(TRAIN, &[("STEPS", "1000"), ("STEP_SECS", "0.05")]), vec![1], 0).await;
    rig.until(|r| matches!(core(r), Some(Event::Telemetry { .. })).then_some(())).await;
    rig.send(ExecutorInput::Effect(Effect::Checkpoint { job: JobId(2), kind: CheckpointKind::Incremental })).await;
    let (step, bytes) = rig
        .until(|r| match core(r) {
            Some(Event::CheckpointDone { job: JobId(2), step, bytes }) => Some((*step, *bytes)),
            _ => None,
        })
        .await;
    assert!(step > 0 && bytes > 0, "step {step} bytes {bytes}");
    rig.send(ExecutorInput::Effect(Effect::StopJob { job: JobId(2) })).await;
    rig.until(|r| matches!(core(r), Some(Event::JobStopped { job: JobId(2) })).then_some(())).await;
    // Resumed from the checkpoint: the first progress is just past it.
    rig.send(ExecutorInput::Effect(Effect::StartJob { job: JobId(2), node: NodeId(0), gpus: vec![1], resume_step: step })).await;
    let first = rig
        .until(|r| match core(r) {
            Some(Event::Telemetry { progress, .. }) => progress.first().map(|p| p.1),
            _ => None,
        })
        .await;
    assert!(first > step && first <= step + 5, "resumed at {first}, checkpoint at {step}");
    rig.send(ExecutorInput::Effect(Effect::StopJob { job: JobId(2) })).await;
    rig.until(|r| matches!(core(r), Some(Event::JobStopped { .. })).then_some(())).await;
}

#[tokio::test]
async fn a_job_that_ignores_sigterm_is_killed_after_the_grace() {
    let mut rig = rig(1);
    rig.start(3, sh(STUBBORN, &[]), vec![0], 0).await;
    rig.until(|r| matches!(core(r), Some(Event::Telemetry { .. })).then_some(())).await;
    rig.send(ExecutorInput::Effect(Effect::StopJob { job: JobId(3) })).await;
    rig.until(|r| matches!(core(r), Some(Event::JobStopped { job: JobId(3) })).then_some(())).await;
}

#[tokio::test]
async fn failures_on_its_own_and_bad_input_are_reported_plainly() {
    let mut rig = rig(1);
    let exit3 = JobCommand {
        program: "sh".into(),
        args: vec!["-c".into(), "echo 'progress 1' >> \"$GPUROOM_PROGRESS_FILE\"; echo 'progress lots' >> \"$GPUROOM_PROGRESS_FILE\"; exit 3".into()],
        workdir: None,
        env: vec![],
    };
    rig.start(4, exit3, vec![0], 0).await;
    let bad_line = rig
        .until(|r| match r {
            Report::Failed { source, why, .. } if source == "local j4" => Some(why.clone()),
            _ => None,
        })
        .await;
    assert!(bad_line.contains("line 2") && bad_line.contains("\"lots\""), "{bad_line}");
    let exited = rig.until(|r| match core(r) {
        Some(Event::JobExited { job: JobId(4), ok, message }) => Some((*ok, message.clone())),
        _ => None,
    });
    assert_eq!(exited.await, (false, "exit status 3".to_string()));

    rig.send(ExecutorInput::Effect(Effect::StartJob { job: JobId(5), node: NodeId(0), gpus: vec![0], resume_step: 0 })).await;
    let unregistered = rig.until(|r| match core(r) {
        Some(Event::JobExited { job: JobId(5), ok: false, message }) => Some(message.clone()),
        _ => None,
    });
    assert!(unregistered.await.contains("no command registered"));

    let missing = JobCommand { program: "/nonexistent/trainer".into(), args: vec![], workdir: None, env: vec![] };
    rig.start(6, missing, vec![0], 0).await;
    let message = rig.until(|r| match core(r) {
        Some(Event::JobExited { job: JobId(6), ok: false, message }) => Some(message.clone()),
        _ => None,
    });
    let message = message.await;
    assert!(message.contains("cannot start") && message.contains("/nonexistent/trainer"), "{message}");
}
