//! The room's settings: the policies' own (scheduler, checkpoints, hazard,
//! max prices, cost, Slurm) and the room's (history kept, limits, where an
//! interrupted job goes, when spend is off its forecast). They are part of
//! the state and of every snapshot, so a replay under other settings is a
//! what-if analysis.

use serde::{Deserialize, Serialize};

use crate::capacity::CapacityConfig;
use crate::ckpt::CheckpointPolicy;
use crate::cost::CostConfig;
use crate::domain::slurm::SlurmPolicy;
use crate::domain::units::Secs;
use crate::market::bid::BidPolicy;
use crate::market::hazard::HazardConfig;
use crate::sched::SchedConfig;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoomConfig {
    pub sched: SchedConfig,
    pub checkpoint: CheckpointPolicy,
    /// How much price history each spot pool keeps for the console.
    pub price_history: Secs,
    /// Span of the price-trend window.
    pub trend_window: Secs,
    /// Lines of the recent-events log kept for the console.
    pub log_capacity: usize,
    /// Limits a job spec must respect; larger asks are refused at submission.
    pub max_gpus_per_job: u8,
    /// How far ahead the trend lifts (or lowers) a spot job's max-price base.
    #[serde(default = "default_trend_horizon")]
    pub trend_horizon: Secs,
    #[serde(default)]
    pub hazard: HazardConfig,
    #[serde(default)]
    pub bids: BidPolicy,
    /// Force the linear (degraded) max-price curve for every job.
    #[serde(default)]
    pub degraded_bids: bool,
    #[serde(default)]
    pub after_interruption: AfterInterruption,
    #[serde(default)]
    pub cost: CostConfig,
    #[serde(default)]
    pub forecast: ForecastConfig,
    /// Advisory or control mode for a Slurm cluster, and what preempt means there.
    #[serde(default)]
    pub slurm: SlurmPolicy,
    /// Elastic capacity: what the room buys and gives back, and on whose say.
    #[serde(default)]
    pub capacity: CapacityConfig,
    /// How long a finished job stays in memory before only its id and costs
    /// remain (see `retired`); 0 keeps every job.
    #[serde(default = "default_retain_finished")]
    pub retain_finished: Secs,
    /// When several events together make an alarm (a storm, a burst of failures).
    #[serde(default)]
    pub alarms: super::trips::AlarmRules,
}

fn default_trend_horizon() -> Secs {
    Secs(600)
}

fn default_retain_finished() -> Secs {
    Secs(8 * 24 * 3600)
}

impl Default for RoomConfig {
    fn default() -> Self {
        RoomConfig {
            sched: SchedConfig::default(),
            checkpoint: CheckpointPolicy::default(),
            price_history: Secs(12 * 3600),
            trend_window: Secs(3600),
            log_capacity: 200,
            max_gpus_per_job: 64,
            trend_horizon: default_trend_horizon(),
            hazard: Default::default(),
            bids: Default::default(),
            degraded_bids: false,
            after_interruption: Default::default(),
            cost: Default::default(),
            forecast: Default::default(),
            slurm: Default::default(),
            capacity: Default::default(),
            retain_finished: default_retain_finished(),
            alarms: Default::default(),
        }
    }
}

/// Where a job goes after a spot interruption.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterInterruption {
    /// Back to the queue; any capacity its preference allows, the same pool included.
    Requeue,
    /// Anywhere but the pool it lost: another spot pool or stable capacity.
    #[default]
    MigrateSpot,
    /// Stable capacity only, for the rest of its life.
    MigrateOnDemand,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForecastConfig {
    /// Relative deviation from the forecast that counts as off.
    pub threshold: f64,
    /// Consecutive hours off before the alarm.
    pub periods: u32,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig { threshold: 0.25, periods: 3 }
    }
}
