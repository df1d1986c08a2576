//! The Slurm poller and executor as tokio tasks. The poller reads a snapshot
//! every `poll_secs` (and at once after each command, so the console shows
//! its effect without waiting) and reports it, or that Slurm failed and
//! why, once per change of health. The executor runs commands one at a
//! time, in order, and answers each with one `SlurmDone` event.

use std::sync::Arc;

use tokio::sync::{Notify, mpsc};

use super::SlurmConfig;
use super::cli::SlurmCli;
use crate::domain::event::Event;
use crate::domain::slurm::SlurmCommand;
use crate::sources::report::Report;

pub const SOURCE: &str = "slurm";

/// Starts both tasks; returns the executor's inbox.
pub fn spawn(config: SlurmConfig, reports: mpsc::Sender<Report>) -> mpsc::Sender<SlurmCommand> {
    let cli = Arc::new(config.cli());
    let poke = Arc::new(Notify::new());
    let (tx, rx) = mpsc::channel(256);
    // Checked when the engine read its accounts; a bad one reads as the comment.
    let marker = config.checkpoint_marker().ok().flatten();
    tokio::spawn(poll(cli.clone(), config.poll_every(), marker, poke.clone(), reports.clone()));
    tokio::spawn(execute(cli, rx, poke, reports));
    tx
}

async fn poll(cli: Arc<SlurmCli>, every: std::time::Duration, marker: Option<String>, poke: Arc<Notify>, reports: mpsc::Sender<Report>) {
    let mut healthy: Option<bool> = None;
    loop {
        let report = match cli.snapshot().await {
            Ok(mut snapshot) => {
                if let Some(name) = &marker {
                    read_markers(&mut snapshot, name).await;
                }
                if healthy != Some(true) {
                    let how = if cli.uses_json() { "--json" } else { "parsable text" };
                    let detail = format!("Slurm {} cluster {} ({how})", snapshot.version, snapshot.cluster);
                    if reports.send(Report::Healthy { source: SOURCE.into(), detail }).await.is_err() {
                        return;
                    }
                }
                healthy = Some(true);
                Report::Slurm { snapshot }
            }
            Err(e) => {
                let first = healthy != Some(false);
                healthy = Some(false);
                if !first {
                    // Said once; the next good snapshot says it is back.
                    wait(&poke, every).await;
                    continue;
                }
                Report::Failed { source: SOURCE.into(), hosts: Vec::new(), why: e.to_string() }
            }
        };
        if reports.send(report).await.is_err() {
            return;
        }
        wait(&poke, every).await;
    }
}

/// Each running job's marker file, if it has one: its modification time is
/// the job's last acknowledged checkpoint. The directory is Slurm's word for
/// the job's; a file that is missing or unreadable acknowledges nothing.
async fn read_markers(snapshot: &mut crate::domain::slurm::SlurmSnapshot, name: &str) {
    for job in snapshot.jobs.iter_mut().filter(|j| j.holds_gpus() && j.work_dir.starts_with('/')) {
        let path = std::path::Path::new(&job.work_dir).join(name);
        if let Ok(modified) = tokio::fs::symlink_metadata(&path).await.and_then(|m| m.modified()) {
            job.saved_at = Some(chrono::DateTime::<chrono::Utc>::from(modified));
        }
    }
}

async fn wait(poke: &Notify, every: std::time::Duration) {
    tokio::select! {
        _ = tokio::time::sleep(every) => {}
        _ = poke.notified() => {}
    }
}

async fn execute(cli: Arc<SlurmCli>, mut commands: mpsc::Receiver<SlurmCommand>, poke: Arc<Notify>, reports: mpsc::Sender<Report>) {
    while let Some(command) = commands.recv().await {
        let (ok, message) = match cli.execute(&command).await {
            Ok(done) => (true, done),
            Err(e) => (false, e.to_string()),
        };
        let event = Event::SlurmDone { command: command.id, ok, message };
        if reports.send(Report::Core(event)).await.is_err() {
            return;
        }
        poke.notify_one();
    }
}
