//! Elastic capacity: what to buy and what to give back, as pure decisions.
//!
//! * `plan` — scale up: from the queued work no node can take now (nor
//!   soon), which pools to launch nodes in, the cheapest that fits each job
//!   once spot's risk is priced in, keeping the floor of non-interruptible
//!   capacity, the pools' and the account's limits, and counting nodes
//!   already on their way so nothing is bought twice;
//! * `release` — scale down: idle nodes past the idle time, above each
//!   pool's warm minimum; reserved capacity is never given back;
//! * `consolidate` — whether moving a small job off a node (save, then
//!   move) to give the node back saves more than the move costs.
//!
//! Imports the domain only. Prices arrive as planning figures (currency per
//! hour, risk already priced in by the room with `cost::mix`); hazards,
//! placement and budgets are judged by the room, which hands the results in.

pub mod consolidate;
pub mod plan;
pub mod release;

use serde::{Deserialize, Serialize};

use crate::domain::units::Secs;

/// Who carries the decisions out.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityMode {
    /// The room buys nothing and gives nothing back (a fixed fleet).
    Off,
    /// Decisions are proposals: an operator approves each one.
    Advisory,
    /// The room launches and releases on its own.
    #[default]
    Control,
}

impl CapacityMode {
    pub fn label(self) -> &'static str {
        match self {
            CapacityMode::Off => "off",
            CapacityMode::Advisory => "advisory",
            CapacityMode::Control => "control",
        }
    }
}

/// Elastic capacity's settings (`[capacity]` in the configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapacityConfig {
    pub mode: CapacityMode,
    /// A node that held no job this long is given back. Billing is per
    /// second (a minute at least), and getting a node back costs a boot
    /// (90 s) billed with no work: past about that long, keeping an idle
    /// node costs more than buying it again. Measured on the burst
    /// experiment: 60 s / 120 s / 300 s / 600 s give 9.2% / 9.5% / 10.1% /
    /// 11.2% of the reservation's spend at the same mean latency (±0.4 min);
    /// on the default cluster (7 days, seeds 1–5) 60 s against 120 s idles
    /// 9.5% of spend against 10.2%, with a shorter mean wait (5m20s
    /// against 9m28s) and a lower price per GPU-hour of work.
    pub idle_release: Secs,
    /// After a spot launch failed for capacity or price, the pool is left
    /// alone this long (another zone, then on-demand, is tried meanwhile).
    pub spot_backoff: Secs,
    /// Share of the fleet's GPUs that must be non-interruptible (reserved or
    /// on-demand): the SLA floor under latency-critical work.
    pub min_stable_share: f64,
    /// GPUs the account may hold in elastic pools at once.
    pub account_gpu_limit: u32,
    /// Move a small job off a mostly idle node when that saves money.
    pub consolidate: bool,
    /// How often the plan runs at most while nothing else changes.
    pub plan_every: Secs,
    /// Waiting jobs the plan looks at, in queue order (the rest wait their turn).
    pub lookahead_jobs: usize,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig {
            mode: CapacityMode::Control,
            idle_release: Secs(60),
            spot_backoff: Secs(900),
            min_stable_share: 0.2,
            account_gpu_limit: 512,
            consolidate: true,
            plan_every: Secs(60),
            lookahead_jobs: 256,
        }
    }
}

impl CapacityConfig {
    /// What is wrong with the settings, if anything.
    pub fn problem(&self) -> Option<String> {
        if self.idle_release.0 < 0 || self.spot_backoff.0 < 0 || self.plan_every.0 < 0 {
            return Some("idle_release, spot_backoff and plan_every must not be negative".into());
        }
        if !(self.min_stable_share.is_finite() && (0.0..=1.0).contains(&self.min_stable_share)) {
            return Some(format!("min_stable_share must be within 0..=1, not {}", self.min_stable_share));
        }
        if self.lookahead_jobs == 0 {
            return Some("lookahead_jobs must be at least 1".into());
        }
        None
    }
}
