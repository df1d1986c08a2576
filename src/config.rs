//! The engine's configuration file (TOML): scheduler and checkpoint policy.
//! Read from `--config FILE`, else `$XDG_CONFIG_HOME/gpuroom/config.toml`
//! (or `~/.config/gpuroom/config.toml`) when it exists; every key is optional
//! and defaults to the built-in policy. Unknown keys are errors (a typo must
//! not silently fall back to a default).
//!
//! ```toml
//! [sched]
//! discipline = "drf"        # fifo | priority | drf | mlfq
//! backfill = true
//! time_sharing = false
//! [sched.max_wait]
//! eval = 1800               # seconds
//! [checkpoint]
//! spot_interval = 1800
//! ```

use serde::Deserialize;

use crate::ckpt::CheckpointPolicy;
use crate::core::RoomConfig;
use crate::sched::SchedConfig;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    pub sched: SchedConfig,
    pub checkpoint: CheckpointPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigFileError {
    pub file: String,
    pub message: String,
}

impl EngineConfig {
    pub fn parse(file: &str, text: &str) -> Result<EngineConfig, ConfigFileError> {
        toml::from_str(text).map_err(|e| ConfigFileError { file: file.to_string(), message: crate::sources::toml_message(text, &e) })
    }

    pub fn room_config(&self) -> RoomConfig {
        RoomConfig { sched: self.sched.clone(), checkpoint: self.checkpoint.clone(), ..RoomConfig::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::DisciplineKind;

    #[test]
    fn keys_are_optional_and_typos_are_errors() {
        assert_eq!(EngineConfig::parse("c.toml", "").unwrap(), EngineConfig::default());
        let c = EngineConfig::parse("c.toml", "[sched]\ndiscipline = \"mlfq\"\n[sched.max_wait]\neval = 600\n").unwrap();
        assert_eq!(c.sched.discipline, DisciplineKind::Mlfq);
        assert_eq!(c.sched.max_wait.eval.0, 600);
        assert_eq!(c.sched.max_wait.training, crate::sched::MaxWait::default().training);
        let err = EngineConfig::parse("c.toml", "[sched]\ndiscipline = \"lottery\"\n").unwrap_err();
        assert!(err.message.starts_with("line 2:"), "{err}");
        let err = EngineConfig::parse("c.toml", "[sched]\nbackfil = true\n").unwrap_err();
        assert!(err.message.contains("backfil"), "{err}");
    }
}
