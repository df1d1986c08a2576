//! The engine's configuration file (TOML): scheduler, checkpoint, spot, cost and
//! forecast policy.
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
//! hazard_threshold = 0.15   # next-minute risk above which intervals halve
//! full_every = 8            # every n-th save is full, the rest incremental
//! [spot]
//! after_interruption = "migrate-spot"   # | "migrate-on-demand" | "requeue"
//! degraded_bids = false     # force the linear max-price curve
//! [spot.bids]
//! start = 1.10              # cap = base × coefficient(progress), from 1.10…
//! top = 2.5                 # …to 2.5 at completion (never above on-demand)
//! [cost]
//! storage_per_gib_month = 23000   # micro-dollars ($0.023)
//! [cost.budget]
//! at_limit = "spot"         # at 100%: "queue" (default) or "spot"
//! notify_pct = 80
//! [forecast]
//! threshold = 0.25          # spend this far off the day-ahead forecast…
//! periods = 3               # …for this many hours raises an alarm
//! [capacity]
//! mode = "advisory"         # | "control" | "off"; unset: control simulated, advisory live
//! idle_release = 60         # seconds a bought node may idle before it is given back
//! min_stable_share = 0.2    # share of GPUs kept non-interruptible (the SLA floor)
//! ```

use serde::Deserialize;

pub mod tenant;
pub use tenant::TenantDecl;

use crate::ckpt::CheckpointPolicy;
use crate::room::RoomConfig;
use crate::sched::SchedConfig;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    pub sched: SchedConfig,
    pub checkpoint: CheckpointPolicy,
    pub spot: SpotConfig,
    pub cost: crate::cost::CostConfig,
    pub forecast: crate::room::config::ForecastConfig,
    /// Live sources and executors (`gpuroom --live`); see `live::config`.
    pub sources: crate::live::config::SourcesConfig,
    pub capacity: CapacitySection,
}

/// `[capacity]`: elastic capacity's settings (`capacity::CapacityConfig`),
/// with the mode left to the world when unset: control on the simulated
/// cluster, advisory on live sources (a person approves each launch).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapacitySection {
    pub mode: Option<crate::capacity::CapacityMode>,
    pub idle_release: crate::domain::units::Secs,
    pub spot_backoff: crate::domain::units::Secs,
    pub min_stable_share: f64,
    pub account_gpu_limit: u32,
    pub consolidate: bool,
    pub plan_every: crate::domain::units::Secs,
    pub lookahead_jobs: usize,
}

impl Default for CapacitySection {
    fn default() -> Self {
        let c = crate::capacity::CapacityConfig::default();
        CapacitySection {
            mode: None,
            idle_release: c.idle_release,
            spot_backoff: c.spot_backoff,
            min_stable_share: c.min_stable_share,
            account_gpu_limit: c.account_gpu_limit,
            consolidate: c.consolidate,
            plan_every: c.plan_every,
            lookahead_jobs: c.lookahead_jobs,
        }
    }
}

impl CapacitySection {
    /// The policy's settings, with `world_default` as the mode when unset.
    pub fn resolve(&self, world_default: crate::capacity::CapacityMode) -> crate::capacity::CapacityConfig {
        crate::capacity::CapacityConfig {
            mode: self.mode.unwrap_or(world_default),
            idle_release: self.idle_release,
            spot_backoff: self.spot_backoff,
            min_stable_share: self.min_stable_share,
            account_gpu_limit: self.account_gpu_limit,
            consolidate: self.consolidate,
            plan_every: self.plan_every,
            lookahead_jobs: self.lookahead_jobs,
        }
    }
}

/// The spot watcher's policy: where interrupted jobs go, the max-price
/// curve, and how the hazard weighs recent interruptions.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpotConfig {
    pub after_interruption: crate::room::config::AfterInterruption,
    pub degraded_bids: bool,
    pub bids: crate::market::bid::BidPolicy,
    pub hazard: crate::market::hazard::HazardConfig,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigFileError {
    pub file: String,
    pub message: String,
}

impl EngineConfig {
    pub fn parse(file: &str, text: &str) -> Result<EngineConfig, ConfigFileError> {
        let config: EngineConfig =
            toml::from_str(text).map_err(|e| ConfigFileError { file: file.to_string(), message: crate::sources::toml_message(text, &e) })?;
        config.spot.hazard.validate().map_err(|e| ConfigFileError { file: file.to_string(), message: format!("[spot.hazard]: {e}") })?;
        let bids = &config.spot.bids;
        if !(bids.start.is_finite() && bids.top.is_finite() && bids.start >= 1.0 && bids.top >= bids.start) {
            return Err(ConfigFileError { file: file.to_string(), message: format!("[spot.bids]: need 1 ≤ start ≤ top, got start {} top {}", bids.start, bids.top) });
        }
        if let Some(problem) = config.cost.budget.problem() {
            return Err(ConfigFileError { file: file.to_string(), message: format!("[cost.budget]: {problem}") });
        }
        if let Some(problem) = config.capacity.resolve(crate::capacity::CapacityMode::Control).problem() {
            return Err(ConfigFileError { file: file.to_string(), message: format!("[capacity]: {problem}") });
        }
        let f = &config.forecast;
        if !(f.threshold.is_finite() && f.threshold > 0.0) || f.periods == 0 {
            return Err(ConfigFileError {
                file: file.to_string(),
                message: format!("[forecast]: need threshold > 0 and periods ≥ 1, got {} and {}", f.threshold, f.periods),
            });
        }
        Ok(config)
    }

    pub fn room_config(&self) -> RoomConfig {
        RoomConfig {
            sched: self.sched.clone(),
            checkpoint: self.checkpoint.clone(),
            after_interruption: self.spot.after_interruption,
            degraded_bids: self.spot.degraded_bids,
            bids: self.spot.bids.clone(),
            hazard: self.spot.hazard.clone(),
            cost: self.cost.clone(),
            forecast: self.forecast.clone(),
            capacity: self.capacity.resolve(crate::capacity::CapacityMode::Control),
            ..RoomConfig::default()
        }
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
        // The span of an unknown key starts its line; that line is the one named.
        assert!(err.message.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn spot_policy_keys_and_their_refusals() {
        use crate::room::config::AfterInterruption;
        let c = EngineConfig::parse("c.toml", "[spot]\nafter_interruption = \"requeue\"\n[spot.bids]\ntop = 3.0\n[checkpoint]\nfull_every = 4\n").unwrap();
        let room = c.room_config();
        assert_eq!((room.after_interruption, room.bids.top, room.checkpoint.full_every), (AfterInterruption::Requeue, 3.0, 4));
        assert!(EngineConfig::parse("c.toml", "[spot.bids]\nstart = 0.5\n").unwrap_err().message.contains("start"));
        assert!(EngineConfig::parse("c.toml", "[spot.hazard]\nwindow = 0\n").unwrap_err().message.contains("window"));
        assert!(EngineConfig::parse("c.toml", "[spot]\nafter_interruption = \"pray\"\n").is_err());
        assert!(EngineConfig::parse("c.toml", "[checkpoint]\nspot_interval = 1800\n").unwrap_err().message.contains("spot_interval"));
    }

    #[test]
    fn cost_and_forecast_keys_and_their_refusals() {
        use crate::cost::budget::AtLimit;
        let c = EngineConfig::parse("c.toml", "[cost.budget]\nat_limit = \"spot\"\n[forecast]\nperiods = 6\n").unwrap();
        let room = c.room_config();
        assert_eq!((room.cost.budget.at_limit, room.forecast.periods), (AtLimit::Spot, 6));
        let err = EngineConfig::parse("c.toml", "[cost.budget]\nnotify_pct = 130\n").unwrap_err();
        assert!(err.message.contains("must rise"), "{err}");
        assert!(EngineConfig::parse("c.toml", "[forecast]\nperiods = 0\n").unwrap_err().message.contains("periods"));
        assert!(EngineConfig::parse("c.toml", "[cost]\nstorage = 1\n").unwrap_err().message.contains("storage"));
    }
}

