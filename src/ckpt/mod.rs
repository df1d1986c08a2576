//! The checkpoint controller: how often a running job saves, and what kind of
//! save (full or incremental).
//!
//! The interval follows Young/Daly: with δ the cost of one checkpoint and M
//! the mean time to the next loss, τ ≈ √(2·δ·M) (Daly's higher-order form).
//! M comes from the risk the spot watcher measures: the probability of an
//! interruption in the next minute at the job's age, and, coupled to the
//! job's max price, the time until the price trend crosses its cap. Above a
//! hazard threshold (15% a minute by default) the interval is shortened
//! further; it lengthens again by itself when the hazard falls. Jobs on
//! on-demand or reserved capacity save on a fixed, long interval.
//!
//! Incremental checkpoints write only what changed since the last save; a
//! full one is written first and every `full_every` saves, so a restore
//! never walks a long chain. This module decides; it does no IO and does not
//! know how the executor writes.

use serde::{Deserialize, Serialize};

use crate::domain::cluster::BillingMode;
pub use crate::domain::job::CheckpointKind;
use crate::domain::job::Job;
use crate::domain::units::{At, Secs};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointPolicy {
    /// Interval for jobs on on-demand or reserved instances.
    pub stable_interval: Secs,
    /// Bounds of the risk-driven interval for jobs on spot.
    pub min_interval: Secs,
    pub max_interval: Secs,
    /// Next-minute interruption probability above which the interval is
    /// shortened by `shorten_factor` on top of Young/Daly.
    pub hazard_threshold: f64,
    pub shorten_factor: f64,
    /// Assumed cost of one checkpoint before the job has measured its own.
    pub default_cost: Secs,
    /// Every n-th save is full (1 = never incremental).
    pub full_every: u32,
    /// The least share of interruptions assumed to beat their notice save
    /// (a notice can come late, or not at all), whatever was measured.
    pub notice_miss_floor: f64,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            stable_interval: Secs(2 * 3600),
            min_interval: Secs(60),
            max_interval: Secs(2 * 3600),
            hazard_threshold: 0.15,
            shorten_factor: 0.5,
            default_cost: Secs(30),
            full_every: 8,
            notice_miss_floor: 0.1,
        }
    }
}

/// Why the interval is what it is (for the console and the experiment).
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub secs: Secs,
    /// The mean time to a loss the interval was computed from (seconds).
    pub mtbf_secs: f64,
    /// The hazard was above the threshold: shortened on top of Young/Daly.
    pub shortened: bool,
}

/// Daly's optimum checkpoint interval for a save cost `delta` and a mean
/// time to interruption `mtbf` (both seconds): √(2δM)·(1 + ⅓√(δ/2M) + δ/18M) − δ
/// while δ < 2M, and M beyond (saving more often than losses come is waste).
pub fn daly_interval(delta: f64, mtbf: f64) -> f64 {
    if !(delta.is_finite() && mtbf.is_finite()) || delta <= 0.0 || mtbf <= 0.0 {
        return mtbf.max(0.0);
    }
    if delta >= 2.0 * mtbf {
        return mtbf;
    }
    let r = delta / (2.0 * mtbf);
    (2.0 * delta * mtbf).sqrt() * (1.0 + r.sqrt() / 3.0 + r / 9.0) - delta
}

/// Mean time to the next interruption implied by a next-minute probability
/// (a constant hazard over the minute): M = 60 / −ln(1 − p).
pub fn mtbf_from_next_minute(p: f64) -> f64 {
    if !p.is_finite() || p <= 0.0 {
        return f64::INFINITY;
    }
    let p = p.min(0.999_999);
    60.0 / -(1.0 - p).ln()
}

impl CheckpointPolicy {
    /// The interval for a job on spot. `p_next_minute` is the hazard at the
    /// job's age; `cost` its measured save time; `notice_miss` the share of
    /// interruptions whose notice save did not finish in time (only those
    /// lose work: a saved-on-notice job loses the layer in flight at most);
    /// `secs_to_cap` the time until the trend takes the market over the
    /// job's max price, if it is heading there (a move is saved first, but
    /// a jump can outrun the save: it counts like an interruption).
    pub fn spot_interval(&self, p_next_minute: f64, cost: Option<Secs>, notice_miss: f64, secs_to_cap: Option<f64>) -> Interval {
        let delta = cost.unwrap_or(self.default_cost).0.max(1) as f64;
        let miss = if notice_miss.is_finite() { notice_miss.clamp(self.notice_miss_floor.clamp(0.0, 1.0), 1.0) } else { 1.0 };
        let mut mtbf = mtbf_from_next_minute(p_next_minute) / miss.max(1e-6);
        if let Some(t) = secs_to_cap.filter(|t| t.is_finite() && *t > 0.0) {
            // Two independent ways to lose the instance: the rates add.
            mtbf = 1.0 / (1.0 / mtbf + 1.0 / t);
        }
        let mut tau = daly_interval(delta, mtbf);
        let shortened = p_next_minute.is_finite() && p_next_minute > self.hazard_threshold;
        if shortened {
            tau *= self.shorten_factor.clamp(0.05, 1.0);
        }
        let (lo, hi) = (self.min_interval.0.max(1), self.max_interval.0.max(self.min_interval.0.max(1)));
        let secs = if tau.is_finite() { (tau.round() as i64).clamp(lo, hi) } else { hi };
        Interval { secs: Secs(secs), mtbf_secs: mtbf, shortened }
    }

    /// The interval in steps (layers) for a job doing `secs_per_step`.
    pub fn in_steps(interval: Secs, secs_per_step: f64) -> u64 {
        if !secs_per_step.is_finite() || secs_per_step <= 0.0 {
            return 1;
        }
        ((interval.0 as f64 / secs_per_step).floor() as u64).max(1)
    }

    /// When a save at `interval` falls due: the interval after the last
    /// save, or after the start of this attempt if that is later or it has
    /// not saved yet. `None` while there is nothing new to save (or it never
    /// started).
    pub fn due_at(job: &Job, interval: Secs) -> Option<At> {
        if job.steps_done <= job.steps_saved {
            return None;
        }
        let since = match (job.last_checkpoint_at, job.started_at) {
            (Some(saved), Some(started)) => saved.max(started),
            (Some(saved), None) => saved,
            (None, Some(started)) => started,
            (None, None) => return None,
        };
        Some(since.checked_add_signed(interval.delta()).unwrap_or(At::MAX_UTC))
    }

    /// Interval for a job on stable capacity.
    pub fn stable(&self, billing: BillingMode) -> Option<Secs> {
        (billing != BillingMode::Spot).then_some(self.stable_interval)
    }

    /// Full for the first save and every `full_every`-th; incremental between.
    pub fn kind(&self, saves_so_far: u64) -> CheckpointKind {
        let every = u64::from(self.full_every.max(1));
        if saves_so_far.is_multiple_of(every) { CheckpointKind::Full } else { CheckpointKind::Incremental }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::{job_spec, t};

    #[test]
    fn daly_matches_young_for_cheap_saves_and_stops_at_the_mtbf() {
        // δ = 30 s, M = 6000 s: Young gives √(2·30·6000) = 600 s; Daly:
        // 600·(1 + √0.0025/3 + 0.0025/9) − 30 = 600·1.016944 − 30 = 580.17 s.
        let tau = daly_interval(30.0, 6000.0);
        assert!((tau - 580.17).abs() < 0.01, "{tau}");
        assert_eq!(daly_interval(500.0, 200.0), 200.0);
        assert_eq!(daly_interval(f64::NAN, 100.0), 100.0);
    }

    #[test]
    fn next_minute_probability_converts_to_a_mean_time() {
        assert!((mtbf_from_next_minute(1.0 - (-1.0f64).exp()) - 60.0).abs() < 1e-9);
        assert!(mtbf_from_next_minute(0.0).is_infinite());
        assert!(mtbf_from_next_minute(1.0).is_finite());
    }

    #[test]
    fn risk_shortens_the_interval_and_calm_lengthens_it() {
        let policy = CheckpointPolicy::default();
        let calm = policy.spot_interval(0.01, Some(Secs(20)), 1.0, None);
        let risky = policy.spot_interval(0.10, Some(Secs(20)), 1.0, None);
        let storm = policy.spot_interval(0.20, Some(Secs(20)), 1.0, None);
        assert!(calm.secs > risky.secs && risky.secs > storm.secs, "{calm:?} {risky:?} {storm:?}");
        assert!(!risky.shortened && storm.shortened);
        // Past the threshold the interval halves on top of Young/Daly's own shrinking.
        let unhalved = daly_interval(20.0, mtbf_from_next_minute(0.20));
        assert!((storm.secs.0 as f64 - (unhalved * 0.5).round().max(60.0)).abs() <= 1.0);
        // A trend heading for the cap in 10 minutes counts as a second risk.
        let near_cap = policy.spot_interval(0.01, Some(Secs(20)), 1.0, Some(600.0));
        assert!(near_cap.secs < calm.secs);
        // Notice saves that land make periodic ones rarer, down to the floor.
        let trusted = policy.spot_interval(0.10, Some(Secs(20)), 0.0, None);
        assert!(trusted.secs > risky.secs);
        assert_eq!(trusted, policy.spot_interval(0.10, Some(Secs(20)), policy.notice_miss_floor, None));
        // No risk at all: the longest interval, never an infinite one.
        assert_eq!(policy.spot_interval(0.0, None, 1.0, None).secs, policy.max_interval);
        assert_eq!(policy.spot_interval(f64::NAN, None, f64::NAN, None).secs, policy.max_interval);
    }

    #[test]
    fn layers_per_interval_and_the_full_incremental_rhythm() {
        assert_eq!(CheckpointPolicy::in_steps(Secs(160), 20.0), 8);
        assert_eq!(CheckpointPolicy::in_steps(Secs(10), 20.0), 1);
        assert_eq!(CheckpointPolicy::in_steps(Secs(10), 0.0), 1);
        let policy = CheckpointPolicy { full_every: 3, ..CheckpointPolicy::default() };
        let kinds: Vec<_> = (0..4).map(|n| policy.kind(n)).collect();
        use CheckpointKind::*;
        assert_eq!(kinds, vec![Full, Incremental, Incremental, Full]);
    }

    #[test]
    fn due_only_after_the_interval_and_with_new_progress() {
        let policy = CheckpointPolicy::default();
        let mut job = Job::new(job_spec(1, "a", 1), t(0));
        job.started_at = Some(t(0));
        job.steps_done = 10;
        let due = CheckpointPolicy::due_at(&job, Secs(600));
        assert!(due.is_some_and(|due| t(599) < due), "not due before the interval");
        assert!(due.is_some_and(|due| t(600) >= due), "due once it has passed");
        job.steps_saved = 10;
        assert_eq!(CheckpointPolicy::due_at(&job, Secs(600)), None, "nothing new to save");
        assert_eq!(policy.stable(BillingMode::Spot), None);
        assert_eq!(policy.stable(BillingMode::Reserved), Some(Secs(7200)));
    }
}
