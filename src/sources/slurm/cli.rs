//! Running Slurm's own commands: squeue, sinfo and scontrol to read the
//! cluster, scontrol and scancel to act on it. Each run has a time limit;
//! its failure is classified (job not found, permission denied, controller
//! down, wrong state, timed out, not installed) with Slurm's own words kept,
//! and is never retried here: the room decides what happens next.
//!
//! A prefix (`["ssh", "head"]`) runs the same commands on another machine;
//! `conf` points them at a slurm.conf other than the default.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{json, text};
use crate::domain::slurm::{SlurmCommand, SlurmSnapshot, SlurmVerb};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    PermissionDenied,
    ControllerDown,
    /// The job is not in a state the verb applies to.
    InvalidState,
    TimedOut,
    NotInstalled,
    /// The reply could not be read.
    BadReply,
    Other,
}

impl ErrorKind {
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "job not found",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::ControllerDown => "controller unreachable",
            ErrorKind::InvalidState => "not in a state for that",
            ErrorKind::TimedOut => "timed out",
            ErrorKind::NotInstalled => "not installed",
            ErrorKind::BadReply => "unreadable reply",
            ErrorKind::Other => "failed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{command}: {} ({message})", kind.label())]
pub struct SlurmError {
    pub kind: ErrorKind,
    /// The command line, as run.
    pub command: String,
    /// Slurm's own words (stderr, or stdout when stderr was empty).
    pub message: String,
}

/// What Slurm's words say went wrong.
pub fn classify(message: &str) -> ErrorKind {
    let m = message.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
    if has(&["invalid job id", "job not found", "invalid job_id"]) {
        ErrorKind::NotFound
    } else if has(&["permission denied", "access denied", "not authorized", "user not found"]) {
        ErrorKind::PermissionDenied
    } else if has(&[
        "unable to contact slurm controller",
        "socket timed out",
        "connection refused",
        "connect failure",
        "could not establish a configuration source",
        "zero bytes were transmitted",
    ]) {
        ErrorKind::ControllerDown
    } else if has(&[
        "pending execution",
        "already completing or completed",
        "job is current",
        "invalid job state",
        "not suspended",
        "is not running",
        "job has already finished",
        "requested operation is presently disabled",
        "job is no longer pending",
    ]) {
        ErrorKind::InvalidState
    } else {
        ErrorKind::Other
    }
}

#[derive(Debug)]
pub struct SlurmCli {
    pub prefix: Vec<String>,
    pub bin_dir: Option<PathBuf>,
    pub conf: Option<PathBuf>,
    pub timeout: Duration,
    /// Cleared when this Slurm has no `--json`: the parsable text is read instead.
    json: AtomicBool,
    /// Cluster name and release, asked once (`scontrol show config`).
    identity: Mutex<Option<(String, String)>>,
}

impl SlurmCli {
    pub fn new(prefix: Vec<String>, bin_dir: Option<PathBuf>, conf: Option<PathBuf>, timeout: Duration) -> SlurmCli {
        SlurmCli { prefix, bin_dir, conf, timeout, json: AtomicBool::new(true), identity: Mutex::new(None) }
    }

    /// Read the text output instead of JSON from now on (old Slurm, or tests of that path).
    pub fn without_json(self) -> SlurmCli {
        self.json.store(false, Ordering::Relaxed);
        self
    }

    pub fn uses_json(&self) -> bool {
        self.json.load(Ordering::Relaxed)
    }

    fn program(&self, name: &str) -> String {
        match &self.bin_dir {
            Some(dir) => dir.join(name).display().to_string(),
            None => name.to_string(),
        }
    }

    /// Runs `name args…`; its stdout, or what went wrong. `strict_stderr`:
    /// an `error:` line on stderr is a failure even with exit status 0
    /// (scancel reports an unknown job that way).
    pub async fn run(&self, name: &str, args: &[&str], strict_stderr: bool) -> Result<String, SlurmError> {
        let program = self.program(name);
        let mut line: Vec<String> = self.prefix.clone();
        line.push(program);
        line.extend(args.iter().map(|a| a.to_string()));
        let shown = line.join(" ");
        let mut cmd = tokio::process::Command::new(&line[0]);
        cmd.args(&line[1..]).kill_on_drop(true).stdin(std::process::Stdio::null());
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let fail = |kind, message: String| SlurmError { kind, command: shown.clone(), message };
        let output = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Err(_) => return Err(fail(ErrorKind::TimedOut, format!("no answer within {} s", self.timeout.as_secs_f32()))),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail(ErrorKind::NotInstalled, format!("{} not found (install Slurm's client commands or set slurm.bin_dir)", line[0])));
            }
            Ok(Err(e)) => return Err(fail(ErrorKind::Other, e.to_string())),
            Ok(Ok(o)) => o,
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        let stderr_error = strict_stderr && stderr.lines().any(|l| l.contains("error:"));
        if !output.status.success() || stderr_error {
            let words = if stderr.is_empty() { stdout.trim().to_string() } else { stderr };
            let words = if words.is_empty() { format!("exit status {}", output.status) } else { words };
            return Err(fail(classify(&words), words));
        }
        Ok(stdout)
    }

    fn bad_reply(command: &str, e: crate::sources::ParseError) -> SlurmError {
        // An errors list from Slurm is its own failure (controller down): classify its words.
        let message = e.to_string();
        let kind = match classify(&message) {
            ErrorKind::Other => ErrorKind::BadReply,
            k => k,
        };
        let kind = if e.position == "errors" && kind == ErrorKind::BadReply { ErrorKind::ControllerDown } else { kind };
        SlurmError { kind, command: command.to_string(), message }
    }

    /// Whether stderr says this Slurm has no `--json`.
    fn no_json(e: &SlurmError) -> bool {
        let m = e.message.to_ascii_lowercase();
        m.contains("unrecognized option") || m.contains("invalid option") || (m.contains("plugin") && m.contains("json"))
    }

    async fn identity(&self) -> Result<(String, String), SlurmError> {
        if let Some(known) = self.identity.lock().ok().and_then(|g| g.clone()) {
            return Ok(known);
        }
        let config = self.run("scontrol", &["show", "config"], false).await?;
        let value = |key: &str| {
            config.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let known = (value("ClusterName").unwrap_or_default(), value("SLURM_VERSION").unwrap_or_default());
        if let Ok(mut g) = self.identity.lock() {
            *g = Some(known.clone());
        }
        Ok(known)
    }

    /// Everything at once: partitions, nodes, jobs (recently finished included).
    pub async fn snapshot(&self) -> Result<SlurmSnapshot, SlurmError> {
        let (cluster, version) = self.identity().await?;
        let partitions = self.run("scontrol", &["show", "partition", "--oneliner"], false).await?;
        let partitions = text::partitions("scontrol show partition", &partitions).map_err(|e| Self::bad_reply("scontrol show partition", e))?;
        // Nodes before jobs: a job that starts between the two reads then
        // shows as running on a node that still looks free, never as pending
        // on a node its own start already fills; the room would re-place
        // such a job elsewhere, and Slurm, having started it, refuses that.
        if self.uses_json() {
            match self.run("sinfo", &["-N", "--json"], false).await {
                Ok(body) => {
                    let nodes = json::nodes("sinfo -N --json", &body).map_err(|e| Self::bad_reply("sinfo -N --json", e))?;
                    let body = self.run("squeue", &["--json"], false).await?;
                    let jobs = json::jobs("squeue --json", &body).map_err(|e| Self::bad_reply("squeue --json", e))?;
                    return Ok(SlurmSnapshot { cluster, version, partitions, nodes, jobs });
                }
                Err(e) if Self::no_json(&e) => self.json.store(false, Ordering::Relaxed),
                Err(e) => return Err(e),
            }
        }
        let body = self.run("sinfo", &["-h", "-N", "-O", text::SINFO_FORMAT], false).await?;
        let nodes = text::nodes("sinfo -O", &body).map_err(|e| Self::bad_reply("sinfo -O", e))?;
        let body = self.run("squeue", &["-h", "-a", "-t", "all", "-O", text::SQUEUE_FORMAT], false).await?;
        let jobs = text::jobs("squeue -O", &body).map_err(|e| Self::bad_reply("squeue -O", e))?;
        Ok(SlurmSnapshot { cluster, version, partitions, nodes, jobs })
    }

    /// Carries one command out; what Slurm said, or why it failed.
    pub async fn execute(&self, command: &SlurmCommand) -> Result<String, SlurmError> {
        let id = command.job.to_string();
        let id = id.as_str();
        let simple = |verb: &'static str| async move { self.run("scontrol", &[verb, id], false).await.map(|_| format!("scontrol {verb} {id}")) };
        match &command.verb {
            SlurmVerb::Requeue | SlurmVerb::Preempt => simple("requeue").await,
            SlurmVerb::Suspend => simple("suspend").await,
            SlurmVerb::Resume => simple("resume").await,
            SlurmVerb::Hold => simple("hold").await,
            SlurmVerb::Release => simple("release").await,
            SlurmVerb::Cancel => self.run("scancel", &["--verbose", id], true).await.map(|_| format!("scancel {id}")),
            SlurmVerb::Signal { signal } => {
                let flag = format!("--signal={signal}");
                self.run("scancel", &["--verbose", "--batch", &flag, id], true).await.map(|_| format!("scancel --batch {flag} {id}"))
            }
            SlurmVerb::Migrate { partition, exclude } => self.migrate(id, partition.as_deref(), exclude).await,
            SlurmVerb::Schedule(schedule) => self.schedule(id, schedule).await,
        }
    }

    /// The room's placement, then (a job held for admission) its release,
    /// then its priority: Slurm refuses a new priority on a held job, and a
    /// released job must already be where the room wants it.
    async fn schedule(&self, id: &str, schedule: &crate::domain::slurm::Schedule) -> Result<String, SlurmError> {
        let mut done = Vec::new();
        let routing = schedule.routing();
        if !routing.is_empty() {
            let mut args = vec!["update".to_string(), format!("jobid={id}")];
            args.extend(routing);
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            self.run("scontrol", &words, false).await?;
            done.push(format!("scontrol {}", args.join(" ")));
        }
        if schedule.release {
            self.run("scontrol", &["release", id], false).await?;
            done.push(format!("release {id}"));
        }
        if let Some(p) = schedule.priority {
            let priority = format!("priority={p}");
            self.run("scontrol", &["update", &format!("jobid={id}"), &priority], false).await?;
            done.push(format!("scontrol update jobid={id} {priority}"));
        }
        Ok(done.join(", "))
    }

    /// A running job is requeued held, changed, then released (so it cannot
    /// restart where it was in between); a pending one is only changed.
    async fn migrate(&self, id: &str, partition: Option<&str>, exclude: &[String]) -> Result<String, SlurmError> {
        let held = match self.run("scontrol", &["requeuehold", id], false).await {
            Ok(_) => true,
            Err(e) if e.kind == ErrorKind::InvalidState => false,
            Err(e) => return Err(e),
        };
        let mut update = vec!["update".to_string(), format!("jobid={id}")];
        if let Some(p) = partition {
            update.push(format!("partition={p}"));
        }
        if !exclude.is_empty() {
            update.push(format!("excnodelist={}", exclude.join(",")));
            // A job pinned to a node (gpuroom's placement) must not stay pinned where it may no longer run.
            if held {
                update.push("reqnodelist=".to_string());
            }
        }

        let args: Vec<&str> = update.iter().map(String::as_str).collect();
        let changed = self.run("scontrol", &args, false).await;
        if held {
            // Released whatever happened: a job must not be left held by a half-done move.
            self.run("scontrol", &["release", id], false).await?;
        }
        let done = match changed {
            Ok(_) => format!("scontrol {}{}", if held { "requeuehold, " } else { "" }, update.join(" ")),
            Err(mut e) => {
                if held {
                    e.message = format!("{} (it was requeued and released where it was)", e.message);
                }
                return Err(e);
            }
        };
        Ok(if held { format!("{done}, release {id}") } else { done })
    }

    /// Drains `node` (`scontrol update nodename=… state=drain reason=…`):
    /// Slurm places no new job there and leaves running ones be. What Slurm
    /// said (usually nothing). The reason is one argument: with an `ssh`
    /// prefix, whose remote shell splits words, it would need quoting.
    pub async fn drain_node(&self, node: &str, reason: &str) -> Result<String, SlurmError> {
        let (name, reason) = (format!("nodename={node}"), format!("reason={reason}"));
        self.run("scontrol", &["update", &name, "state=drain", &reason], false).await.map(|out| out.trim().to_string())
    }

    /// A node's state (`IDLE+DRAIN`, …) and reason (with Slurm's
    /// `[user@time]` tail; `None` when it has none), from `scontrol show node`.
    pub async fn node_state(&self, node: &str) -> Result<(String, Option<String>), SlurmError> {
        let out = self.run("scontrol", &["show", "node", node], false).await?;
        parse_node_state(&out).ok_or_else(|| SlurmError {
            kind: ErrorKind::BadReply,
            command: format!("scontrol show node {node}"),
            message: format!("no State= in {:?}", out.chars().take(200).collect::<String>()),
        })
    }

    /// `scontrol update nodename=NODE key=value…` (nodeaddr, nodehostname,
    /// state, reason: what power saving's programs tell Slurm), each pair
    /// one argument; what Slurm said.
    pub async fn update_node(&self, node: &str, settings: &[(&str, &str)]) -> Result<String, SlurmError> {
        let mut args = vec!["update".to_string(), format!("nodename={node}")];
        args.extend(settings.iter().map(|(k, v)| format!("{k}={v}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run("scontrol", &args, false).await.map(|out| out.trim().to_string())
    }

    /// The cluster's name (`ClusterName` in `scontrol show config`).
    pub async fn cluster_name(&self) -> Result<String, SlurmError> {
        self.identity().await.map(|(name, _)| name)
    }
}

/// State and reason of the first node in `scontrol show node`'s text: each
/// field is `Key=value`, but a reason (the last field) runs to the end of its line.
fn parse_node_state(out: &str) -> Option<(String, Option<String>)> {
    let state = out.split_whitespace().find_map(|w| w.strip_prefix("State="))?.to_string();
    let reason = out.lines().find_map(|l| l.trim_start().strip_prefix("Reason=")).map(|r| r.trim().to_string()).filter(|r| !r.is_empty() && r != "(null)");
    Some((state, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_words_are_classified() {
        assert_eq!(classify("Invalid job id specified for job 999"), ErrorKind::NotFound);
        assert_eq!(classify("scancel: error: Kill job error on job id 2: Access/permission denied"), ErrorKind::PermissionDenied);
        assert_eq!(classify("slurm_load_jobs error: Unable to contact slurm controller (connect failure)"), ErrorKind::ControllerDown);
        assert_eq!(classify("Job is pending execution for job 2"), ErrorKind::InvalidState);
        assert_eq!(classify("something new"), ErrorKind::Other);
    }

    #[tokio::test]
    async fn a_missing_command_and_a_stalled_one_fail_plainly() {
        let cli = SlurmCli::new(vec![], Some(PathBuf::from("/nonexistent/bin")), None, Duration::from_secs(5));
        let e = cli.snapshot().await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotInstalled, "{e}");
        assert!(e.to_string().contains("/nonexistent/bin/scontrol"), "{e}");
        let slow = SlurmCli::new(vec!["sh".into(), "-c".into(), "sleep 5".into()], None, None, Duration::from_millis(200));
        let e = slow.run("squeue", &[], false).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::TimedOut, "{e}");
        let failing = SlurmCli::new(vec!["sh".into(), "-c".into(), "echo 'Invalid job id specified' >&2; exit 1".into()], None, None, Duration::from_secs(5));
        assert_eq!(failing.run("scontrol", &[], false).await.unwrap_err().kind, ErrorKind::NotFound);
        let quiet = SlurmCli::new(
            vec!["sh".into(), "-c".into(), "echo 'scancel: error: Kill job error on job id 9: Invalid job id specified' >&2".into()],
            None,
            None,
            Duration::from_secs(5),
        );
        assert!(quiet.run("scancel", &[], false).await.is_ok(), "lenient: exit status 0");
        assert_eq!(quiet.run("scancel", &[], true).await.unwrap_err().kind, ErrorKind::NotFound, "strict: the error line counts");
    }

    #[test]
    fn a_nodes_state_and_reason_are_read() {
        let drained = "NodeName=localhost Arch=x86_64 CoresPerSocket=1 \n   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0\n   Partitions=gpu,spare \n   Reason=spot interruption: stop at 2026-12-04T22:10:00Z (gpuroom agent) [root@2026-12-04T22:08:01]\n";
        let (state, reason) = parse_node_state(drained).unwrap();
        assert_eq!(state, "IDLE+DRAIN");
        assert_eq!(reason.as_deref(), Some("spot interruption: stop at 2026-12-04T22:10:00Z (gpuroom agent) [root@2026-12-04T22:08:01]"));
        assert_eq!(parse_node_state("NodeName=n1\n   State=IDLE ThreadsPerCore=1\n"), Some(("IDLE".to_string(), None)));
        assert_eq!(parse_node_state("Node n9 not found"), None);
    }
}
