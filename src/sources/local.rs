//! The local executor: runs the room's jobs as processes on this machine.
//! It carries out `StartJob`, `Checkpoint` and `StopJob` effects and answers
//! with `JobStarted`, progress `Telemetry`, `CheckpointDone`, `JobStopped`
//! and `JobExited` events. Owns the child processes and their files; never
//! sees the room.
//!
//! # The contract with a job
//!
//! A job is started in its own process group with:
//!
//! * `CUDA_VISIBLE_DEVICES` — the GPU indexes it was placed on, e.g. `0,2`;
//! * `GPUROOM_JOB_ID` (`j12`), `GPUROOM_RESUME_STEP` (the step of the last
//!   checkpoint it should resume from; 0 for a fresh start);
//! * `GPUROOM_CHECKPOINT_DIR` — where it keeps its checkpoints (the same
//!   folder on every run of the job, so a resumed run finds them);
//! * `GPUROOM_CHECKPOINT_KIND_FILE` — says `full` or `incremental` when a
//!   checkpoint is asked for;
//! * `GPUROOM_PROGRESS_FILE` — a file the job appends lines to:
//!   `progress <step>` as it goes, and `checkpoint <step> <bytes>` once a
//!   checkpoint is safely written.
//!
//! A checkpoint request is `SIGUSR1`: the job writes a checkpoint (of the
//! kind in the kind file) and appends its `checkpoint` line. A stop is
//! `SIGTERM` to the group, then `SIGKILL` after `stop_grace_secs`; the room
//! asks for a checkpoint first when it wants the work saved (a preemption is
//! checkpoint, then stop). Malformed lines are skipped and reported once per
//! run; they never stop the job. The job's standard output and error go to
//! `output.log` in its run folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use super::report::Report;
use crate::ckpt::CheckpointKind;
use crate::domain::event::{Effect, Event};
use crate::domain::ids::JobId;

/// What a job runs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct JobCommand {
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    /// Per-job folders (progress file, checkpoints, output) go under it.
    pub work_dir: PathBuf,
    /// Seconds between SIGTERM and SIGKILL.
    pub stop_grace_secs: u64,
    /// How often progress files are read and exits noticed.
    pub poll_ms: u64,
}

impl Default for LocalConfig {
    fn default() -> LocalConfig {
        LocalConfig { work_dir: std::env::temp_dir().join("gpuroom-jobs"), stop_grace_secs: 30, poll_ms: 500 }
    }
}

pub enum ExecutorInput {
    Register { job: JobId, command: JobCommand },
    Effect(Effect),
}

/// One line of the progress file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgressLine {
    Progress(u64),
    Checkpoint { step: u64, bytes: u64 },
}

pub fn parse_line(line: &str) -> Result<ProgressLine, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |w: &str, what: &str| w.parse::<u64>().map_err(|_| format!("{what} {w:?} is not a whole number"));
    match words.as_slice() {
        ["progress", step] => Ok(ProgressLine::Progress(number(step, "step")?)),
        ["checkpoint", step, bytes] => Ok(ProgressLine::Checkpoint { step: number(step, "step")?, bytes: number(bytes, "bytes")? }),
        _ => Err(format!("expected `progress <step>` or `checkpoint <step> <bytes>`, got {line:?}")),
    }
}

/// Complete lines out of appended bytes; a last line without its newline
/// waits for the rest.
#[derive(Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let Some(last) = self.pending.iter().rposition(|b| *b == b'\n') else { return Vec::new() };
        let complete: Vec<u8> = self.pending.drain(..=last).collect();
        String::from_utf8_lossy(&complete).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
    }
}

struct Running {
    child: tokio::process::Child,
    pid: Pid,
    progress_file: PathBuf,
    kind_file: PathBuf,
    offset: u64,
    lines: LineBuffer,
    line_no: usize,
    last_step: Option<u64>,
    stop_asked: bool,
    kill_at: Option<tokio::time::Instant>,
    reported_bad_line: bool,
}

struct Executor {
    config: LocalConfig,
    commands: BTreeMap<JobId, JobCommand>,
    running: BTreeMap<JobId, Running>,
    runs: BTreeMap<JobId, u32>,
    reports: mpsc::Sender<Report>,
}

/// Runs the executor as a task until `inputs` closes; children are killed
/// when it ends (`kill_on_drop`).
pub fn spawn(config: LocalConfig, mut inputs: mpsc::Receiver<ExecutorInput>, reports: mpsc::Sender<Report>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut poll = tokio::time::interval(Duration::from_millis(config.poll_ms.max(10)));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ex = Executor { config, commands: BTreeMap::new(), running: BTreeMap::new(), runs: BTreeMap::new(), reports };
        loop {
            tokio::select! {
                input = inputs.recv() => match input {
                    Some(input) => ex.on_input(input).await,
                    None => break,
                },
                _ = poll.tick() => {
                    if ex.poll().await.is_err() {
                        break;
                    }
                }
            }
        }
        for run in ex.running.values() {
            let _ = killpg(run.pid, Signal::SIGKILL);
        }
    })
}

impl Executor {
    async fn send(&self, event: Event) -> Result<(), ()> {
        self.reports.send(Report::Core(event)).await.map_err(|_| ())
    }

    async fn on_input(&mut self, input: ExecutorInput) {
        match input {
            ExecutorInput::Register { job, command } => {
                self.commands.insert(job, command);
            }
            ExecutorInput::Effect(Effect::StartJob { job, gpus, resume_step, .. }) => {
                let event = match self.start(job, &gpus, resume_step).await {
                    Ok(()) => Event::JobStarted { job },
                    Err(message) => Event::JobExited { job, ok: false, message },
                };
                let _ = self.send(event).await;
            }
            ExecutorInput::Effect(Effect::Checkpoint { job, kind }) => {
                if let Some(run) = self.running.get(&job) {
                    let word = match kind {
                        CheckpointKind::Full => "full",
                        CheckpointKind::Incremental => "incremental",
                    };
                    let _ = tokio::fs::write(&run.kind_file, word).await;
                    let _ = kill(run.pid, Signal::SIGUSR1);
                }
            }
            ExecutorInput::Effect(Effect::StopJob { job }) => match self.running.get_mut(&job) {
                Some(run) if !run.stop_asked => {
                    run.stop_asked = true;
                    run.kill_at = Some(tokio::time::Instant::now() + Duration::from_secs(self.config.stop_grace_secs));
                    let _ = killpg(run.pid, Signal::SIGTERM);
                }
                Some(_) => {}
                // Never started here (or already gone): it is stopped.
                None => {
                    let _ = self.send(Event::JobStopped { job }).await;
                }
            },
            ExecutorInput::Effect(_) => {}
        }
    }

    async fn start(&mut self, job: JobId, gpus: &[u8], resume_step: u64) -> Result<(), String> {
        let command = self.commands.get(&job).cloned().ok_or_else(|| format!("{job}: no command registered for this job"))?;
        if self.running.contains_key(&job) {
            return Err(format!("{job}: already running here"));
        }
        let run_no = {
            let n = self.runs.entry(job).or_insert(0);
            *n += 1;
            *n
        };
        let job_dir = self.config.work_dir.join(job.to_string());
        let run_dir = job_dir.join(format!("run-{run_no}"));
        let checkpoints = job_dir.join("checkpoints");
        for dir in [&run_dir, &checkpoints] {
            tokio::fs::create_dir_all(dir).await.map_err(|e| format!("{job}: creating {}: {e}", dir.display()))?;
        }
        let progress_file = run_dir.join("progress");
        let kind_file = run_dir.join("checkpoint-kind");
        tokio::fs::write(&progress_file, b"").await.map_err(|e| format!("{job}: creating {}: {e}", progress_file.display()))?;
        let output = open_log(&run_dir.join("output.log")).map_err(|e| format!("{job}: {e}"))?;
        let output_err = output.try_clone().map_err(|e| format!("{job}: {e}"))?;
        let visible: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
        let mut cmd = tokio::process::Command::new(&command.program);
        cmd.args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("CUDA_VISIBLE_DEVICES", visible.join(","))
            .env("GPUROOM_JOB_ID", job.to_string())
            .env("GPUROOM_RESUME_STEP", resume_step.to_string())
            .env("GPUROOM_PROGRESS_FILE", &progress_file)
            .env("GPUROOM_CHECKPOINT_DIR", &checkpoints)
            .env("GPUROOM_CHECKPOINT_KIND_FILE", &kind_file)
            .stdin(std::process::Stdio::null())
            .stdout(output)
            .stderr(output_err)
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &command.workdir {
            cmd.current_dir(dir);
        }
        let child = cmd.spawn().map_err(|e| format!("{job}: cannot start {:?}: {e}", command.program))?;
        let pid = child.id().map(|p| Pid::from_raw(p as i32)).ok_or_else(|| format!("{job}: the process ended before it had an id"))?;
        let run = Running {
            child,
            pid,
            progress_file,
            kind_file,
            offset: 0,
            lines: LineBuffer::default(),
            line_no: 0,
            last_step: None,
            stop_asked: false,
            kill_at: None,
            reported_bad_line: false,
        };
        self.running.insert(job, run);
        Ok(())
    }

    /// Reads new progress lines of every job, notices exits, and kills
    /// jobs past their grace. `Err`: the reports channel is closed.
    async fn poll(&mut self) -> Result<(), ()> {
        let jobs: Vec<JobId> = self.running.keys().copied().collect();
        for job in jobs {
            let (events, ended) = {
                let Some(run) = self.running.get_mut(&job) else { continue };
                let exit = run.child.try_wait();
                let mut events = read_progress(job, run).await;
                let ended = match exit {
                    Ok(Some(status)) => Some(if run.stop_asked {
                        Event::JobStopped { job }
                    } else {
                        Event::JobExited { job, ok: status.success(), message: describe_exit(status) }
                    }),
                    Ok(None) => {
                        if run.kill_at.is_some_and(|t| tokio::time::Instant::now() >= t) {
                            let _ = killpg(run.pid, Signal::SIGKILL);
                            run.kill_at = None;
                        }
                        None
                    }
                    Err(e) => Some(Event::JobExited { job, ok: false, message: format!("{job}: lost track of the process: {e}") }),
                };
                events.extend(ended.iter().cloned().map(Report::Core));
                (events, ended.is_some())
            };
            if ended {
                self.running.remove(&job);
            }
            for report in events {
                self.reports.send(report).await.map_err(|_| ())?;
            }
        }
        Ok(())
    }
}

async fn read_progress(job: JobId, run: &mut Running) -> Vec<Report> {
    let mut out = Vec::new();
    let Ok(mut file) = tokio::fs::File::open(&run.progress_file).await else { return out };
    if file.seek(std::io::SeekFrom::Start(run.offset)).await.is_err() {
        return out;
    }
    let mut bytes = Vec::new();
    let Ok(n) = file.read_to_end(&mut bytes).await else { return out };
    run.offset += n as u64;
    let mut step = None;
    for line in run.lines.push(&bytes) {
        run.line_no += 1;
        match parse_line(&line) {
            Ok(ProgressLine::Progress(s)) => step = Some(s),
            Ok(ProgressLine::Checkpoint { step: s, bytes }) => {
                if let Some(p) = step.take().filter(|p| Some(*p) != run.last_step) {
                    run.last_step = Some(p);
                    out.push(Report::Core(Event::Telemetry { gpus: Vec::new(), progress: vec![(job, p)] }));
                }
                out.push(Report::Core(Event::CheckpointDone { job, step: s, bytes }));
            }
            Err(why) if !run.reported_bad_line => {
                run.reported_bad_line = true;
                let why = format!("{} line {}: {why} (skipped; later bad lines are skipped silently)", run.progress_file.display(), run.line_no);
                out.push(Report::Failed { source: format!("local {job}"), hosts: Vec::new(), why });
            }
            Err(_) => {}
        }
    }
    if let Some(p) = step.filter(|p| Some(*p) != run.last_step) {
        run.last_step = Some(p);
        out.push(Report::Core(Event::Telemetry { gpus: Vec::new(), progress: vec![(job, p)] }));
    }
    out
}

fn open_log(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("opening {}: {e}", path.display()))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => "exit status 0".to_string(),
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "ended".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_the_protocol_parse_and_bad_ones_say_why() {
        assert_eq!(parse_line("progress 12"), Ok(ProgressLine::Progress(12)));
        assert_eq!(parse_line("  checkpoint 40 1048576 "), Ok(ProgressLine::Checkpoint { step: 40, bytes: 1_048_576 }));
        assert!(parse_line("progress twelve").unwrap_err().contains("\"twelve\" is not a whole number"));
        assert!(parse_line("checkpoint 4").unwrap_err().contains("expected"));
        assert!(parse_line("progress -3").is_err());
        assert!(parse_line("hello").is_err());
    }

    #[test]
    fn a_partial_last_line_waits_for_the_rest() {
        let mut buf = LineBuffer::default();
        assert_eq!(buf.push(b"progress 1\nprog"), vec!["progress 1".to_string()]);
        assert!(buf.push(b"ress ").is_empty());
        assert_eq!(buf.push(b"2\n\ncheckpoint 2 9\n"), vec!["progress 2".to_string(), "checkpoint 2 9".to_string()]);
    }

    #[test]
    fn exits_are_described_with_their_status_or_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(describe_exit(std::process::ExitStatus::from_raw(3 << 8)), "exit status 3");
        assert_eq!(describe_exit(std::process::ExitStatus::from_raw(9)), "killed by signal 9");
    }
}
