//! The Slurm adapter: reads a Slurm cluster (partitions, nodes with GRES
//! GPUs, jobs) with its own commands and carries gpuroom's verbs out with
//! scontrol and scancel. gpuroom does not schedule a Slurm cluster's jobs;
//! it shows them, advises, and in control mode acts.
//!
//! ```toml
//! [sources.slurm]
//! mode = "advisory"        # or "control": gpuroom's policy issues its commands
//! preempt = "requeue"      # or "suspend"
//! poll_secs = 5
//! timeout_secs = 10
//! prefix = ["ssh", "slurm-head"]   # optional: run the commands elsewhere
//! bin_dir = "/opt/slurm/bin"       # optional: where squeue & co. live
//! conf = "/etc/slurm/slurm.conf"   # optional: SLURM_CONF for them
//! [[sources.slurm.account]]        # Slurm accounts as tenants, with quotas
//! id = "vision"
//! quota_gpus = 16
//! monthly_budget = "0"
//! [[sources.slurm.operators]]      # who may act on others' jobs through gpuroom
//! user = "ana"
//! accounts = ["vision"]            # or ["*"]
//! any_signal = false               # true: any signal, not only checkpoint_signal
//! ```
//!
//! * `gres` / `json` / `text` — reading Slurm's outputs (both JSON shapes,
//!   and the parsable text where `--json` is missing);
//! * `cli` — running the commands, time limits, classified errors;
//! * `task` — the poller and the executor as tokio tasks.
//!
//! Owns no state of the room's: it sends `Report`s and `SlurmDone` events.

pub mod cli;
pub mod gres;
pub mod json;
pub mod power;
pub mod task;
pub mod text;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::tenant::TenantDecl;
use crate::domain::event::TenantSpec;
use crate::domain::ids::TenantId;
use crate::domain::slurm::{PreemptBy, SlurmMode, SlurmPolicy};
use crate::domain::units::{Mib, Micros, Secs};

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    pub mode: SlurmMode,
    pub preempt: PreemptBy,
    pub poll_secs: u64,
    pub timeout_secs: u64,
    pub prefix: Vec<String>,
    pub bin_dir: Option<PathBuf>,
    pub conf: Option<PathBuf>,
    /// Minutes a GPU job may pend before its partition's wait alarm.
    pub wait_alarm_mins: u64,
    /// Read `--json` (false: the parsable text, for Slurm without it).
    pub json: bool,
    /// Sent to a job to save its work before gpuroom requeues it (`scancel
    /// --signal=… --batch`), and how many seconds later the requeue follows.
    pub checkpoint_signal: String,
    pub checkpoint_grace_secs: u64,
    pub account: Vec<TenantDecl>,
    /// Who may act on other users' jobs (see `SlurmPolicy::may_act`).
    pub operators: Vec<crate::domain::slurm::SlurmOperator>,
    /// Power saving: what `gpuroom slurm-resume` launches for a CLOUD node (`power`).
    pub power: Option<power::PowerConfig>,
    /// With `mode = "control"`: the room orders Slurm's pending GPU jobs,
    /// chooses their nodes and asks spot jobs to save at its risk; in
    /// advisory mode it shows what it would do. Off by default: it rewrites
    /// every pending job's priority.
    pub govern: bool,
    /// Partitions whose jobs cannot be interrupted (never routed to spot).
    pub uninterruptible_partitions: Vec<String>,
    /// Partitions of spot nodes the `[[nodes]]` table does not name.
    pub spot_partitions: Vec<String>,
    /// How a job acknowledges a checkpoint: `"comment"` (it writes
    /// `saved=EPOCH` into its own comment) or `"file:NAME"` (it touches NAME
    /// in its working directory, read on the head node).
    pub checkpoint_ack: String,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            mode: SlurmMode::Advisory,
            preempt: PreemptBy::Requeue,
            poll_secs: 5,
            timeout_secs: 10,
            prefix: Vec::new(),
            bin_dir: None,
            conf: None,
            wait_alarm_mins: 60,
            json: true,
            checkpoint_signal: "USR1".to_string(),
            checkpoint_grace_secs: 60,
            account: Vec::new(),
            operators: Vec::new(),
            power: None,
            govern: false,
            uninterruptible_partitions: Vec::new(),
            spot_partitions: Vec::new(),
            checkpoint_ack: "comment".to_string(),
        }
    }
}

impl SlurmConfig {
    pub fn policy(&self) -> SlurmPolicy {
        SlurmPolicy {
            mode: self.mode,
            preempt_by: self.preempt,
            wait_alarm: Secs(i64::try_from(self.wait_alarm_mins).unwrap_or(i64::MAX / 120).saturating_mul(60)),
            checkpoint_signal: self.checkpoint_signal.clone(),
            checkpoint_grace: Secs(i64::try_from(self.checkpoint_grace_secs.min(86_400)).unwrap_or(60)),
            operators: self.operators.clone(),
            govern: self.govern,
            uninterruptible_partitions: self.uninterruptible_partitions.clone(),
            spot_partitions: self.spot_partitions.clone(),
        }
    }

    pub fn cli(&self) -> cli::SlurmCli {
        let cli = cli::SlurmCli::new(self.prefix.clone(), self.bin_dir.clone(), self.conf.clone(), Duration::from_secs(self.timeout_secs.clamp(1, 600)));
        if self.json { cli } else { cli.without_json() }
    }

    /// The accounts as tenants; a budget that is not an amount is an error,
    /// and so is a checkpoint signal Slurm would not take (checked here, as
    /// every engine reads its accounts before it starts).
    pub fn accounts(&self) -> Result<Vec<TenantSpec>, String> {
        crate::domain::slurm::SlurmVerb::signal(&self.checkpoint_signal).map_err(|e| format!("[sources.slurm] checkpoint_signal: {e}"))?;
        self.checkpoint_marker()?;
        self.account
            .iter()
            .map(|a| {
                let budget = Micros::parse_decimal(&a.monthly_budget).map_err(|e| format!("[[sources.slurm.account]] {:?}: monthly_budget: {e}", a.id))?;
                Ok(TenantSpec {
                    id: TenantId(a.id.clone()),
                    quota_gpus: a.quota_gpus,
                    monthly_budget: budget,
                    quota_gpu_mem: Mib(0),
                    borrow_limit_gpus: a.borrow_limit_gpus,
                })
            })
            .collect()
    }

    /// The marker file's name when jobs acknowledge a save by one
    /// (`checkpoint_ack = "file:NAME"`); `None` for the comment. A name
    /// with a path in it is refused: the marker lives in the job's directory.
    pub fn checkpoint_marker(&self) -> Result<Option<String>, String> {
        match self.checkpoint_ack.split_once(':') {
            None if self.checkpoint_ack == "comment" => Ok(None),
            Some(("file", name)) if !name.is_empty() && !name.contains('/') && name != ".." => Ok(Some(name.to_string())),
            _ => Err(format!("[sources.slurm] checkpoint_ack: {:?} is neither \"comment\" nor \"file:NAME\" (a file name, no '/')", self.checkpoint_ack)),
        }
    }

    pub fn poll_every(&self) -> Duration {
        Duration::from_secs(self.poll_secs.clamp(1, 3600))
    }
}

#[cfg(test)]
mod tests {
    use super::SlurmConfig;

    #[test]
    fn a_checkpoint_signal_slurm_would_not_take_is_refused_before_the_engine_starts() {
        let bad = SlurmConfig { checkpoint_signal: "USR1; reboot".into(), ..SlurmConfig::default() };
        assert!(bad.accounts().unwrap_err().contains("checkpoint_signal"));
        let ok = SlurmConfig { checkpoint_signal: "SIGTERM".into(), checkpoint_grace_secs: 10, ..SlurmConfig::default() };
        assert!(ok.accounts().is_ok());
        assert_eq!((ok.policy().checkpoint_signal.as_str(), ok.policy().checkpoint_grace.0), ("SIGTERM", 10));
    }

    #[test]
    fn a_checkpoint_marker_is_the_comment_or_a_plain_file_name() {
        let with = |ack: &str| SlurmConfig { checkpoint_ack: ack.into(), ..SlurmConfig::default() }.checkpoint_marker();
        assert_eq!(with("comment"), Ok(None));
        assert_eq!(with("file:.saved"), Ok(Some(".saved".into())));
        for bad in ["file:", "file:../x", "file:/etc/passwd", "mtime", "file:.."] {
            assert!(with(bad).unwrap_err().contains("checkpoint_ack"), "{bad}");
        }
        assert!(SlurmConfig { checkpoint_ack: "nope".into(), ..SlurmConfig::default() }.accounts().is_err());
    }

    #[test]
    fn operators_are_read_and_a_misspelt_key_is_refused() {
        let config: SlurmConfig = toml::from_str("[[operators]]\nuser = \"ana\"\naccounts = [\"vision\", \"*\"]\nany_signal = true\n").unwrap();
        let ops = &config.policy().operators;
        assert_eq!((ops[0].user.as_str(), ops[0].accounts.len(), ops[0].any_signal), ("ana", 2, true));
        let err = toml::from_str::<SlurmConfig>("[[operators]]\nuser = \"ana\"\naccount = [\"vision\"]\n").unwrap_err().to_string();
        assert!(err.contains("account"), "{err}");
    }
}
