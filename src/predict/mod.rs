//! Predictions about jobs: here, each running job's progress rate (steps per
//! second) as an exponentially weighted mean and variance of the rates seen
//! in telemetry, which gives a remaining-time estimate with its spread (the
//! max-price curve uses it); `lifetime` predicts a job's run time from its
//! features before it starts, and `philly_eval` measures that on a real trace.
//!
//! Pure arithmetic on observations handed in by the `Room`; no IO, no clock.

pub mod lifetime;
pub mod philly_eval;

use serde::{Deserialize, Serialize};

use crate::domain::units::At;

/// Weight of the newest observation.
const ALPHA: f64 = 0.2;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressRate {
    last: Option<(At, u64)>,
    /// Steps per second.
    pub mean: f64,
    pub variance: f64,
    pub samples: u32,
}

impl ProgressRate {
    /// Feeds the step count seen at `at`. Samples that go back in time or in
    /// steps are ignored (they say nothing about the rate).
    pub fn observe(&mut self, at: At, steps: u64) {
        if let Some((t0, s0)) = self.last {
            let dt = (at - t0).num_milliseconds() as f64 / 1000.0;
            if dt <= 0.0 || steps < s0 {
                return;
            }
            let rate = (steps - s0) as f64 / dt;
            if self.samples == 0 {
                self.mean = rate;
                self.variance = 0.0;
            } else {
                let diff = rate - self.mean;
                self.mean += ALPHA * diff;
                self.variance = (1.0 - ALPHA) * (self.variance + ALPHA * diff * diff);
            }
            self.samples += 1;
        }
        self.last = Some((at, steps));
    }

    /// Forget the rate: the job moved and will run at another speed.
    pub fn reset(&mut self) {
        *self = ProgressRate::default();
    }

    /// Seconds to finish `remaining` steps, with its standard deviation
    /// (first order: σ_T ≈ T · σ_rate / rate).
    pub fn remaining_secs(&self, remaining: u64) -> Option<(f64, f64)> {
        if self.samples == 0 || self.mean <= 0.0 {
            return None;
        }
        let mean = remaining as f64 / self.mean;
        let std = mean * self.variance.sqrt() / self.mean;
        Some((mean, std))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    #[test]
    fn a_steady_job_has_a_tight_estimate() {
        let mut rate = ProgressRate::default();
        for i in 0..10 {
            rate.observe(t(i * 30), (i * 60) as u64);
        }
        assert!((rate.mean - 2.0).abs() < 1e-9);
        let (mean, std) = rate.remaining_secs(600).unwrap();
        assert!((mean - 300.0).abs() < 1e-6);
        assert!(std < 1e-6);
    }

    #[test]
    fn an_erratic_job_has_a_wide_estimate_and_bad_samples_are_ignored() {
        let mut rate = ProgressRate::default();
        assert_eq!(rate.remaining_secs(10), None);
        let steps = [0, 10, 70, 80, 140, 150];
        for (i, s) in steps.iter().enumerate() {
            rate.observe(t(i as i64 * 10), *s);
        }
        rate.observe(t(20), 500); // back in time: ignored
        rate.observe(t(60), 100); // fewer steps: ignored
        let (mean, std) = rate.remaining_secs(100).unwrap();
        assert!(std > 0.3 * mean, "std {std} mean {mean}");
    }
}
