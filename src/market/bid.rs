//! Max-price curves: the most a running job should pay to stay on spot.
//!
//! AWS has had no auction since 2017. An instance is bought with a max price
//! and interrupted when the market goes above it; gpuroom launches at the
//! on-demand price and keeps, per running job, its own cap: when the market
//! passes the cap the job checkpoints and moves (another spot pool or
//! on-demand). The cap is `base × coefficient(progress)`:
//!
//! * progress is steps (layers) done / total, not wall time: losing a job
//!   late costs the most, so the coefficient rises towards completion;
//! * the shorter the predicted remaining time, the sooner it climbs
//!   (`progress^γ` with γ = remaining / reference, so γ < 1 is concave);
//! * high-variance predictions climb less (the rise is divided by 1 + cv);
//! * the base is the price the job was placed at, moved by the short trend
//!   (`rebase`): a rising market lifts it to the price projected a few
//!   minutes ahead, before the jump; a falling one lowers it;
//! * nothing is worth more than on-demand: the cap stops at that ceiling, and
//!   a market at or above it sends the job to on-demand.
//!
//! Degraded mode (no prediction, or std > 30% of mean): linear in progress.
//! Pure arithmetic; the `Room` and the experiment call it with what they know.

use serde::{Deserialize, Serialize};

use crate::domain::units::MicrosPerHour;

use crate::domain::spot::DEGRADED_STD_RATIO as RELIABLE_CV;
pub use crate::domain::spot::{Bid, BidMode, Verdict};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BidPolicy {
    /// Coefficient at progress 0 (headroom over the market for a new job).
    pub start: f64,
    /// Coefficient at completion, before the on-demand ceiling.
    pub top: f64,
    /// Predicted remaining time (seconds) at which the curve is linear.
    pub reference_remaining_secs: f64,
}

impl Default for BidPolicy {
    fn default() -> Self {
        BidPolicy { start: 1.10, top: 2.5, reference_remaining_secs: 1800.0 }
    }
}

/// What the curve knows about one job and its pool.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct BidInput {
    /// The job's reference price: the market when it was placed, as moved
    /// by the trend since (see `rebase`).
    pub base: MicrosPerHour,
    pub market: MicrosPerHour,
    pub on_demand: MicrosPerHour,
    /// Steps done / total, clamped to 0..=1.
    pub progress: f64,
    /// Predicted remaining seconds: (mean, std), if the predictor has one.
    pub remaining: Option<(f64, f64)>,
}

impl BidPolicy {
    /// The mode the prediction allows.
    pub fn mode_for(remaining: Option<(f64, f64)>) -> BidMode {
        match remaining {
            Some((mean, std)) if mean > 0.0 && mean.is_finite() && std.is_finite() && std <= RELIABLE_CV * mean => BidMode::Dynamic,
            _ => BidMode::Degraded,
        }
    }

    /// The coefficient at `progress` (before the trend and the ceiling).
    pub fn coefficient(&self, progress: f64, remaining: Option<(f64, f64)>, mode: BidMode) -> f64 {
        let p = if progress.is_finite() { progress.clamp(0.0, 1.0) } else { 0.0 };
        let rise = (self.top - self.start).max(0.0);
        match (mode, remaining) {
            (BidMode::Dynamic, Some((mean, std))) if mean > 0.0 => {
                let gamma = (mean / self.reference_remaining_secs.max(1.0)).clamp(0.25, 4.0);
                let cv = (std / mean).max(0.0);
                self.start + rise * p.powf(gamma) / (1.0 + cv)
            }
            _ => self.start + rise * p,
        }
    }

    /// The cap for a job and the verdict at the current market price.
    /// `force_degraded` is the operator's (or the experiment's) override.
    pub fn bid(&self, input: &BidInput, force_degraded: bool) -> Bid {
        let mode = if force_degraded { BidMode::Degraded } else { Self::mode_for(input.remaining) };
        let coefficient = self.coefficient(input.progress, input.remaining, mode);
        let market = input.market.0.max(0);
        let raw = (input.base.0.max(0) as f64 * coefficient).round();
        let ceiling = if input.on_demand.0 > 0 { input.on_demand.0 } else { i64::MAX };
        let cap = if raw.is_finite() { (raw as i64).clamp(0, ceiling) } else { ceiling };
        let verdict = if input.on_demand.0 > 0 && market >= input.on_demand.0 {
            Verdict::OnDemand
        } else if market > cap {
            Verdict::Move
        } else {
            Verdict::Stay
        };
        Bid { cap: MicrosPerHour(cap), coefficient, mode, verdict }
    }
}

/// Moves a job's base with the trend, ahead of the market: towards the
/// projected price when rising, down to it (but not under the market) when
/// falling; a flat market leaves it alone.
pub fn rebase(base: MicrosPerHour, market: MicrosPerHour, projected: MicrosPerHour, trend: super::Trend) -> MicrosPerHour {
    match trend {
        super::Trend::Rising => MicrosPerHour(base.0.max(projected.0)),
        super::Trend::Falling => MicrosPerHour(base.0.min(projected.0.max(market.0))),
        super::Trend::Flat => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Trend;

    fn input(progress: f64, remaining: Option<(f64, f64)>) -> BidInput {
        BidInput { base: MicrosPerHour(1_000_000), market: MicrosPerHour(1_000_000), on_demand: MicrosPerHour(3_060_000), progress, remaining }
    }

    #[test]
    fn the_coefficient_rises_with_progress_and_sooner_when_little_is_left() {
        let policy = BidPolicy::default();
        let long = Some((7200.0, 600.0));
        let short = Some((300.0, 30.0));
        let mut last = 0.0;
        for i in 0..=10 {
            let c = policy.bid(&input(i as f64 / 10.0, long), false).coefficient;
            assert!(c >= last, "non-decreasing in progress");
            last = c;
        }
        let at_half = |r| policy.bid(&input(0.5, r), false).coefficient;
        assert!(at_half(short) > at_half(long), "a job near its end climbs sooner");
        assert_eq!(policy.bid(&input(0.0, short), false).coefficient, policy.start);
    }

    #[test]
    fn uncertain_jobs_bid_lower_and_unreliable_ones_go_linear() {
        let policy = BidPolicy::default();
        let tight = policy.bid(&input(0.8, Some((600.0, 10.0))), false);
        let loose = policy.bid(&input(0.8, Some((600.0, 170.0))), false);
        assert_eq!((tight.mode, loose.mode), (BidMode::Dynamic, BidMode::Dynamic));
        assert!(loose.cap < tight.cap);
        let unreliable = policy.bid(&input(0.8, Some((600.0, 200.0))), false);
        assert_eq!(unreliable.mode, BidMode::Degraded);
        let linear = policy.start + (policy.top - policy.start) * 0.8;
        assert!((unreliable.coefficient - linear).abs() < 1e-12);
        assert_eq!(policy.bid(&input(0.8, None), false).mode, BidMode::Degraded);
        assert_eq!(policy.bid(&input(0.8, Some((600.0, 10.0))), true).mode, BidMode::Degraded);
    }

    #[test]
    fn a_jump_past_the_cap_means_move_and_on_demand_is_the_ceiling() {
        let policy = BidPolicy::default();
        let mut early = input(0.0, None);
        early.market = MicrosPerHour(1_150_000);
        assert_eq!(policy.bid(&early, false).verdict, Verdict::Move, "1.15 > 1.10 × base");
        let mut late = early;
        late.progress = 0.9;
        assert_eq!(policy.bid(&late, false).verdict, Verdict::Stay, "late work rides the jump out");
        let done = policy.bid(&input(1.0, Some((10.0, 0.0))), false);
        assert_eq!(done.cap, MicrosPerHour(2_500_000), "top 2.5 × base stays under on-demand");
        let mut dear = input(1.0, None);
        dear.base = MicrosPerHour(2_000_000);
        assert_eq!(policy.bid(&dear, false).cap, MicrosPerHour(3_060_000), "capped at on-demand");
        dear.market = MicrosPerHour(3_060_000);
        assert_eq!(policy.bid(&dear, false).verdict, Verdict::OnDemand);
        let mut nan = input(f64::NAN, Some((f64::NAN, 1.0)));
        nan.on_demand = MicrosPerHour(0);
        let bid = policy.bid(&nan, false);
        assert_eq!((bid.mode, bid.coefficient), (BidMode::Degraded, policy.start));
    }

    #[test]
    fn the_trend_moves_the_base_ahead_of_the_market() {
        let (base, market) = (MicrosPerHour(1_000_000), MicrosPerHour(1_050_000));
        assert_eq!(rebase(base, market, MicrosPerHour(1_200_000), Trend::Rising), MicrosPerHour(1_200_000));
        assert_eq!(rebase(base, market, MicrosPerHour(1_200_000), Trend::Flat), base);
        assert_eq!(rebase(base, MicrosPerHour(900_000), MicrosPerHour(850_000), Trend::Falling), MicrosPerHour(900_000));
        assert_eq!(rebase(base, MicrosPerHour(990_000), MicrosPerHour(1_100_000), Trend::Falling), base);
    }
}
