//! The spot watcher's vocabulary: an observed instance lifetime (what the
//! hazard model learns from), a job's max price and what to do at the
//! market's price. The arithmetic is in `market::hazard` and `market::bid`.

use serde::{Deserialize, Serialize};

use super::units::{MicrosPerHour, Secs};

/// SPEC §3: runtimes count as unpredictable (degraded mode: drop the
/// predictor, bid linearly on progress) when std > 30% of mean.
pub const DEGRADED_STD_RATIO: f64 = 0.30;

/// Which way the price went over the trend window.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trend {
    Rising,
    Falling,
    Flat,
}

/// One observed lifetime of a spot instance.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lifetime {
    pub secs: Secs,
    /// True if it ended in an interruption, false if censored (the trace
    /// ended, we released the node, or it is still up).
    pub interrupted: bool,
}

/// How the max-price curve was applied: with the runtime prediction, or
/// degraded without it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BidMode {
    Dynamic,
    /// The predictor is unreliable: linear in progress only.
    Degraded,
}

/// What to do with a job on spot at the current market price.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Stay,
    /// The market is above the job's cap: save and move.
    Move,
    /// Spot costs as much as on-demand: run there instead.
    OnDemand,
}

/// The max-price curve's answer for a job: its cap per hour, the coefficient
/// the base price was multiplied by, how it was worked out, and the verdict.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bid {
    pub cap: MicrosPerHour,
    pub coefficient: f64,
    pub mode: BidMode,
    pub verdict: Verdict,
}
