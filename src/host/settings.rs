//! Where the runners find their settings: the simulated cluster's file, the
//! engine's configuration file (given, or the XDG default), the policy
//! overrides of the command line, and where logs go by default.
//!
//! Reads files and the environment; decides nothing about jobs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chrono::TimeDelta;

use crate::config::EngineConfig;
use crate::domain::discipline::DisciplineKind;
use crate::room::RoomConfig;
use crate::sim::config::SimConfig;

/// The policy the command line asks for: a configuration file, and a queue
/// discipline that overrides it.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub config: Option<PathBuf>,
    pub discipline: Option<DisciplineKind>,
    /// The group a new log is shared with; `None`: private.
    pub log_group: Option<String>,
}

impl Policy {
    /// Who may use a log this run creates.
    pub fn access(&self) -> Result<crate::store::Access> {
        match self.log_group.as_deref() {
            Some(group) => crate::store::Access::for_group(group).map_err(|e| anyhow::anyhow!("--log-group: {e}")),
            None => Ok(crate::store::Access::private()),
        }
    }
}

/// The simulated world the command line asks for.
#[derive(Clone, Debug)]
pub struct WorldChoice {
    pub seed: u64,
    pub sim_config: Option<PathBuf>,
}

/// A simulated cluster's configuration: parsed, named for messages, and its
/// text (kept in the log so that a crashed run can be resumed).
pub struct LoadedSim {
    pub config: SimConfig,
    pub name: String,
    pub text: String,
}

pub fn load_sim(path: Option<&Path>) -> Result<LoadedSim> {
    match path {
        None => {
            let (_, text) = crate::sim::data::DEFAULT_CONFIG;
            Ok(LoadedSim { config: SimConfig::default_embedded(), name: "default".to_string(), text: text.to_string() })
        }
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let config = SimConfig::parse(&path.display().to_string(), &text)?;
            Ok(LoadedSim { config, name: path.display().to_string(), text })
        }
    }
}

/// Simulated hours from the command line, checked.
pub fn hours(h: f64) -> Result<TimeDelta> {
    if !(h.is_finite() && (0.0..=24.0 * 3650.0).contains(&h)) {
        bail!("hours must be between 0 and 87600, got {h}");
    }
    Ok(TimeDelta::milliseconds((h * 3_600_000.0).round() as i64))
}

/// The whole configuration file (policy and live sources), then `--discipline`.
pub fn engine_config(policy: &Policy) -> Result<EngineConfig> {
    let default_file = xdg_dir("XDG_CONFIG_HOME", ".config").map(|base| base.join("gpuroom/config.toml")).filter(|p| p.exists());
    let mut config = match policy.config.clone().or(default_file) {
        Some(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            EngineConfig::parse(&path.display().to_string(), &text)?
        }
        None => EngineConfig::default(),
    };
    if let Some(d) = policy.discipline {
        config.sched.discipline = d;
    }
    Ok(config)
}

/// The room's policy from the configuration file and the command line.
pub fn room_config(policy: &Policy) -> Result<RoomConfig> {
    Ok(engine_config(policy)?.room_config())
}

/// An XDG base directory: `$VAR` if set to an absolute path, else `~/fallback`.
fn xdg_dir(var: &str, home_fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute()).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_fallback)))
}

/// A new log's default path: `$XDG_STATE_HOME/gpuroom/KIND-STAMP.db`, its
/// folder made (only here: a `--db` folder must exist). `None` without a
/// home, or where the folder cannot be made.
pub fn default_log_path(kind: &str) -> Option<PathBuf> {
    let dir = xdg_dir("XDG_STATE_HOME", ".local/state")?.join("gpuroom");
    std::fs::create_dir_all(&dir).ok()?;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    Some(dir.join(format!("{kind}-{stamp}.db")))
}
