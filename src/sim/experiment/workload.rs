//! Bursts of inference work: a Poisson baseline, and bursts during which
//! arrivals run at `peak_factor` × the baseline (SPEC §3: peaks ≈ 7×).
//!
//! Each job is layer-wise (progress = layers done / total). Its layer times
//! are drawn once, so every strategy replays exactly the same work.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use super::config::ExperimentConfig;

#[derive(Clone, Debug)]
pub struct Job {
    pub arrival: f64,
    /// Seconds of each layer.
    pub layers: Vec<f64>,
    /// Bytes of a full checkpoint of the job's state.
    pub state_bytes: u64,
}

impl Job {
    pub fn work_secs(&self) -> f64 {
        self.layers.iter().sum()
    }
}

/// Burst start times, sorted, inside the span (bursts do not overlap).
pub fn bursts(config: &ExperimentConfig, span: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let slot = span / config.bursts as f64;
    (0..config.bursts).map(|i| i as f64 * slot + rng.random_range(0.0..(slot - config.burst_secs).max(1.0))).collect()
}

pub fn generate(config: &ExperimentConfig, span: f64, seed: u64) -> (Vec<f64>, Vec<Job>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let starts = bursts(config, span, &mut rng);
    let base_rate = config.baseline_jobs_per_hour / 3600.0;
    let peak_rate = base_rate * config.peak_factor;
    let in_burst = |t: f64| {
        let i = starts.partition_point(|s| *s <= t);
        i > 0 && t < starts[i - 1] + config.burst_secs
    };
    // Thinning: draw at the peak rate, keep baseline arrivals outside bursts.
    let gaps = Exp::new(peak_rate).ok();
    let mut jobs = Vec::new();
    let mut t = 0.0;
    let last_start = span - config.drain_secs;
    while let Some(gaps) = &gaps {
        t += gaps.sample(&mut rng);
        if t >= last_start {
            break;
        }
        let keep = in_burst(t) || rng.random_range(0.0..1.0) < 1.0 / config.peak_factor;
        if keep {
            jobs.push(job(config, t, &mut rng));
        }
    }
    (starts, jobs)
}

fn job(config: &ExperimentConfig, arrival: f64, rng: &mut ChaCha8Rng) -> Job {
    let n = config.layer_choices[rng.random_range(0..config.layer_choices.len())];
    let erratic = rng.random_range(0.0..1.0) < config.erratic_share;
    let mean = lognormal(config.layer_secs_mean, config.layer_secs_cv_between_jobs).sample(rng);
    let within = if erratic { config.erratic_layer_cv } else { config.steady_layer_cv };
    let per_layer = lognormal(mean, within);
    let layers = (0..n).map(|_| per_layer.sample(rng).max(0.1)).collect();
    let gib = rng.random_range(config.state_gib.0..=config.state_gib.1);
    Job { arrival, layers, state_bytes: (gib * 1024.0 * 1024.0 * 1024.0) as u64 }
}

/// A log-normal with the given mean and coefficient of variation.
fn lognormal(mean: f64, cv: f64) -> LogNormal<f64> {
    let sigma2 = (1.0 + cv * cv).ln();
    let mu = mean.max(1e-9).ln() - sigma2 / 2.0;
    LogNormal::new(mu, sigma2.sqrt()).unwrap_or_else(|_| LogNormal::new(0.0, 1e-9).expect("a valid log-normal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_peak_at_the_configured_factor() {
        let config = ExperimentConfig::default();
        let span = 7.0 * 86_400.0;
        let (starts, jobs) = generate(&config, span, 7);
        assert_eq!(starts.len(), config.bursts);
        let burst_time = config.bursts as f64 * config.burst_secs;
        let in_burst = jobs
            .iter()
            .filter(|j| {
                let i = starts.partition_point(|s| *s <= j.arrival);
                i > 0 && j.arrival < starts[i - 1] + config.burst_secs
            })
            .count() as f64;
        let outside = jobs.len() as f64 - in_burst;
        let ratio = (in_burst / burst_time) / (outside / (span - config.drain_secs - burst_time));
        assert!((ratio - config.peak_factor).abs() < 1.5, "peak/baseline {ratio}");
        assert!(jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        assert_eq!(generate(&config, span, 7).1.len(), jobs.len(), "seeded");
    }
}
