//! Job lifetime prediction (SPEC §3, "Lifecycle prediction"): how long a job
//! will take from submission to release, as a mean **and** a variance, so the
//! bidder can tell a confident estimate from a guess.
//!
//! Owns: the online regression (recursive least squares with forgetting on
//! log-seconds), the encoding of a job's features into its input vector, one
//! model per phase (load, compute, serialize) plus a total-duration model, the
//! queue-wait estimate, and the reliability test behind the SPEC's degraded
//! mode. Everything here is arithmetic on values handed in: it must not read a
//! clock, touch IO, draw random numbers or know about the `Room`, the market or
//! the scheduler; callers decide what a prediction is used for.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

pub use crate::domain::spot::DEGRADED_STD_RATIO;

/// Below this many observations a model's residual variance is itself too
/// uncertain to trust, however small it looks (two equal samples give zero).
pub const MIN_RELIABLE_SAMPLES: u64 = 8;

/// Durations are floored at one second before taking logs: the core counts in
/// whole seconds, and the floor keeps ln(0) out of the model.
pub const MIN_SECS: f64 = 1.0;

/// Log-space means are clamped to [ln MIN_SECS, ln horizon] and log-space
/// variances to this cap, so that an extrapolating model yields large but
/// finite numbers (non-finite floats would not survive serialization). At the
/// cap the spread is a factor e⁴ ≈ 55 either way: the estimate is already
/// useless, the cap only keeps it representable.
const MAX_LOG_VAR: f64 = 16.0;

/// λ: a memory of about 1/(1 − λ) = 1,000 jobs. On the Philly trace's
/// training part, 0.9999 (a memory ten times longer) did no better.
const DEFAULT_FORGETTING: f64 = 0.999;

/// Huber's threshold, in standard deviations of the innovation: the textbook
/// value (95% efficiency under normal noise). Durations are heavy-tailed even
/// in log space (a job that dies after a minute among week-long ones), and a
/// squared-error fit lets such jobs drag the estimate away from typical jobs.
pub const DEFAULT_HUBER: f64 = 1.345;

/// Robust weighting needs a noise estimate; before this many samples it has
/// none worth the name and every sample counts fully.
const ROBUST_WARMUP: u64 = 10;

/// The smallest weight Huber's rule may give a sample, so the update's
/// denominator λ/weight stays finite.
const MIN_SAMPLE_WEIGHT: f64 = 1e-6;

/// Prior variance of each weight (P₀ = δ·I). Log-durations sit around 5–12, so
/// the intercept must be free to move that far from 0 within a few samples.
const DEFAULT_PRIOR_VAR: f64 = 100.0;

/// Distinct class names (cluster, tenant, job class) with a slot of their own;
/// later ones share the overflow slot.
const DEFAULT_CLASS_CAP: usize = 16;

/// Reference clock and bandwidth: features are logs of ratios to these, so a
/// job on the reference hardware contributes 0 and the weights stay small.
/// (A100 SXM boost clock and HBM2e bandwidth; any fixed value would do.)
const REF_SM_CLOCK_MHZ: f64 = 1410.0;
const REF_MEM_BANDWIDTH_GBS: f64 = 2039.0;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PredictError {
    #[error("feature {0} is not a finite, valid value; the sample was ignored")]
    BadFeature(String),
    #[error("duration {0} s is not a finite non-negative number; the sample was ignored")]
    BadDuration(f64),
    #[error("input has {got} features, the model expects {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("the update would make the model non-finite; the sample was ignored")]
    Numerical,
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// A normal estimate of a scalar (here: log-seconds).
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normal {
    pub mean: f64,
    pub var: f64,
}

/// Recursive least squares with exponential forgetting, read as a Bayesian
/// linear model: `p` is the weights' covariance in units of the noise
/// variance, so a prediction's variance is σ²·(1 + xᵀPx) — larger for inputs
/// unlike those seen (a new cluster, an unusual size), not only noisier ones.
///
/// Optionally robust (Huber): a sample whose innovation exceeds c standard
/// deviations is learned with weight c/|u|, as weighted least squares would.
/// The noise estimate still counts every sample in full, so the variance
/// stays honest about the tails even while the fit ignores them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rls {
    dim: usize,
    forgetting: f64,
    prior_var: f64,
    huber: Option<f64>,
    weights: Vec<f64>,
    /// Row-major dim × dim, kept symmetric.
    p: Vec<f64>,
    /// Discounted sums for σ²: Σ λ^age · e²/(1 + xᵀPx/λ) and Σ λ^age. Their
    /// ratio is the forgetting average, exact from the first sample (no
    /// start-up bias as with a plain EWMA started at 0).
    sq_sum: f64,
    weight_sum: f64,
    samples: u64,
    rejected: u64,
}

impl Rls {
    /// `forgetting` λ in (0, 1] (1 = never forget), `prior_var` δ > 0.
    pub fn new(dim: usize, forgetting: f64, prior_var: f64) -> Result<Rls, PredictError> {
        if dim == 0 {
            return Err(PredictError::Config("the model needs at least one feature".into()));
        }
        if !(forgetting > 0.0 && forgetting <= 1.0) {
            return Err(PredictError::Config(format!("forgetting factor {forgetting} is not in (0, 1]")));
        }
        if !(prior_var.is_finite() && prior_var > 0.0) {
            return Err(PredictError::Config(format!("prior variance {prior_var} is not a positive number")));
        }
        Ok(Rls::unchecked(dim, forgetting, prior_var))
    }

    /// The same model, robust with Huber threshold `c` > 0 (in standard
    /// deviations of the innovation).
    pub fn with_huber(self, c: f64) -> Result<Rls, PredictError> {
        if !(c.is_finite() && c > 0.0) {
            return Err(PredictError::Config(format!("Huber threshold {c} is not a positive number")));
        }
        Ok(Rls { huber: Some(c), ..self })
    }

    fn unchecked(dim: usize, forgetting: f64, prior_var: f64) -> Rls {
        let mut p = vec![0.0; dim * dim];
        for i in 0..dim {
            p[i * dim + i] = prior_var;
        }
        Rls { dim, forgetting, prior_var, huber: None, weights: vec![0.0; dim], p, sq_sum: 0.0, weight_sum: 0.0, samples: 0, rejected: 0 }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Samples learned from.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples refused (non-finite input, wrong size, numerical trouble).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The residual variance σ², once there is a sample.
    pub fn noise_var(&self) -> Option<f64> {
        (self.weight_sum > 0.0).then(|| self.sq_sum / self.weight_sum)
    }

    fn p_times(&self, x: &[f64]) -> Vec<f64> {
        self.p.chunks_exact(self.dim).map(|row| dot(row, x)).collect()
    }

    /// Learns `y` at `x`. A refused sample leaves the model untouched and is
    /// counted in `rejected`.
    pub fn observe(&mut self, x: &[f64], y: f64) -> Result<(), PredictError> {
        let result = self.try_observe(x, y);
        if result.is_err() {
            self.rejected += 1;
        }
        result
    }

    fn try_observe(&mut self, x: &[f64], y: f64) -> Result<(), PredictError> {
        if x.len() != self.dim {
            return Err(PredictError::Dimension { expected: self.dim, got: x.len() });
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(PredictError::BadFeature(format!("#{i}")));
        }
        if !y.is_finite() {
            return Err(PredictError::BadDuration(y));
        }
        let n = self.dim;
        let lambda = self.forgetting;
        let px = self.p_times(x);
        let xpx = dot(x, &px);
        let denom = lambda + xpx;
        if !(denom.is_finite() && denom > 0.0) {
            return Err(PredictError::Numerical);
        }
        let error = y - dot(&self.weights, x);
        // Weighted RLS: a sample of weight w updates as if its noise variance
        // were σ²/w, i.e. with λ/w in place of λ in the gain's denominator.
        let weight = match (self.huber, self.noise_var()) {
            (Some(c), Some(s2)) if self.samples >= ROBUST_WARMUP && s2 > 0.0 => {
                let u = error.abs() / (s2 * denom / lambda).sqrt();
                if u > c { (c / u).max(MIN_SAMPLE_WEIGHT) } else { 1.0 }
            }
            _ => 1.0,
        };
        let gain_denom = lambda / weight + xpx;
        let gain: Vec<f64> = px.iter().map(|v| v / gain_denom).collect();
        let weights: Vec<f64> = self.weights.iter().zip(&gain).map(|(w, k)| w + k * error).collect();
        // P ← (P − k·(Px)ᵀ)/λ, built symmetric from the upper triangle: rounding
        // would otherwise drift P away from symmetry and, over many updates,
        // from positive definiteness.
        let mut p = vec![0.0; n * n];
        for i in 0..n {
            for j in i..n {
                let v = (self.p[i * n + j] - gain[i] * px[j]) / lambda;
                p[i * n + j] = v;
                p[j * n + i] = v;
            }
        }
        // Forgetting inflates P by 1/λ each step in every direction, including
        // those the data never excites (a cluster not seen for weeks): left
        // alone they wind up without bound. Capping each variance at the prior
        // by P ← D·P·D (D diagonal, dᵢ ≤ 1) keeps P positive definite and its
        // correlations intact, and says "no more uncertain than knowing nothing".
        // Only the rows and columns of capped variances change (dᵢ = 1
        // elsewhere), which keeps this O(n) per capped direction.
        for i in 0..n {
            let d = p[i * n + i];
            if d > self.prior_var {
                let s = (self.prior_var / d).sqrt();
                for j in 0..n {
                    p[i * n + j] *= s;
                    p[j * n + i] *= s;
                }
            }
        }
        // The standardized innovation e²/(1 + xᵀPx/λ) estimates σ² without the
        // part of the error due to the weights not being known yet.
        let standardized = error * error * lambda / denom;
        let sq_sum = lambda * self.sq_sum + standardized;
        let weight_sum = lambda * self.weight_sum + 1.0;
        let finite = weights.iter().chain(&p).all(|v| v.is_finite()) && sq_sum.is_finite();
        if !finite || (0..n).any(|i| p[i * n + i] <= 0.0) {
            return Err(PredictError::Numerical);
        }
        self.weights = weights;
        self.p = p;
        self.sq_sum = sq_sum;
        self.weight_sum = weight_sum;
        self.samples += 1;
        Ok(())
    }

    /// The estimate of y at `x` and its predictive variance σ²·(1 + xᵀPx/λ)
    /// (the next update would forget by λ first, as the noise estimate
    /// assumes); `None` before the first sample, or for an input of the wrong
    /// size or with non-finite entries.
    pub fn predict(&self, x: &[f64]) -> Option<Normal> {
        if x.len() != self.dim || x.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let sigma2 = self.noise_var()?;
        let mean = dot(&self.weights, x);
        let var = sigma2 * (1.0 + dot(x, &self.p_times(x)) / self.forgetting);
        (mean.is_finite() && var.is_finite()).then_some(Normal { mean, var: var.max(0.0) })
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// What is known about a job when its lifetime is predicted. Every field may
/// be missing: it then encodes as 0 with a "missing" indicator, so a model
/// trained on partial telemetry still learns what "unknown" tends to mean.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFeatures {
    pub model_layers: Option<u32>,
    pub input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub gpus: Option<u32>,
    /// Measured SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Measured memory bandwidth, GB/s.
    pub mem_bandwidth_gbs: Option<f64>,
    /// A typical duration, in seconds, of jobs like this one that have already
    /// finished, as the caller judges likeness (e.g. `RecentDurations`' median
    /// for the same tenant and size). Never from jobs still running: that
    /// would leak the future into the model.
    pub recent_similar_secs: Option<f64>,
    /// Cluster, tenant or job class; one-hot over a vocabulary capped at the
    /// configured number of classes.
    pub class: Option<String>,
    /// 0–23.
    pub hour_of_day: Option<u8>,
    /// 0 = Monday … 6 = Sunday.
    pub day_of_week: Option<u8>,
}

const NUMERIC_FEATURES: usize = 7;

/// Hours of the day are one-hot in blocks of this many: a slot per hour had
/// too many weights for a memory of ~1,000 jobs and did worse on the Philly
/// trace's training part than no hour at all; six blocks did better.
const HOURS_PER_BLOCK: usize = 4;
const HOUR_BLOCKS: usize = 24 / HOURS_PER_BLOCK;

/// Turns `JobFeatures` into the fixed-size input vector. The class vocabulary
/// is a `BTreeMap` that grows (in order of first observation) up to a cap:
/// deterministic and serializable, unlike a randomly seeded hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureEncoder {
    class_cap: usize,
    classes: BTreeMap<String, usize>,
}

impl FeatureEncoder {
    pub fn new(class_cap: usize) -> FeatureEncoder {
        FeatureEncoder { class_cap, classes: BTreeMap::new() }
    }

    /// Intercept, value + missing flag per numeric feature, a slot per class
    /// plus one shared by overflow and unseen classes, six 4-hour blocks of
    /// the day, and weekday / weekend (Philly's weekday one-hot did worse).
    pub fn dim(&self) -> usize {
        1 + 2 * NUMERIC_FEATURES + self.class_cap + 1 + HOUR_BLOCKS + 2
    }

    /// Gives `class` a slot of its own if it is new and there is room. Only
    /// learning calls this: a prediction for an unseen class uses the shared
    /// slot, whose weights are the least certain, so its variance says so.
    pub fn learn_class(&mut self, class: &str) {
        if !self.classes.contains_key(class) && self.classes.len() < self.class_cap {
            let slot = self.classes.len();
            self.classes.insert(class.to_string(), slot);
        }
    }

    /// The input vector, and the name of the first feature that was present
    /// but invalid (non-finite, non-positive rate, hour ≥ 24…). An invalid
    /// feature is encoded as missing; whether to still use the sample is the
    /// caller's choice.
    pub fn encode(&self, f: &JobFeatures) -> (Vec<f64>, Option<&'static str>) {
        let mut x = Vec::with_capacity(self.dim());
        let mut bad = None;
        x.push(1.0);
        let ln_ratio = |v: f64, reference: f64| (v.is_finite() && v > 0.0).then(|| (v / reference).ln());
        let ln_secs = |v: f64| (v.is_finite() && v >= 0.0).then(|| v.max(MIN_SECS).ln());
        // Counts enter as log1p: durations scale roughly as a power of them, so
        // the model is linear in logs on both sides.
        let numeric: [(&'static str, Option<Option<f64>>); NUMERIC_FEATURES] = [
            ("model_layers", f.model_layers.map(|v| Some(f64::from(v).ln_1p()))),
            ("input_tokens", f.input_tokens.map(|v| Some((v as f64).ln_1p()))),
            ("max_output_tokens", f.max_output_tokens.map(|v| Some((v as f64).ln_1p()))),
            ("gpus", f.gpus.map(|v| Some(f64::from(v).ln_1p()))),
            ("sm_clock_mhz", f.sm_clock_mhz.map(|v| ln_ratio(v, REF_SM_CLOCK_MHZ))),
            ("mem_bandwidth_gbs", f.mem_bandwidth_gbs.map(|v| ln_ratio(v, REF_MEM_BANDWIDTH_GBS))),
            ("recent_similar_secs", f.recent_similar_secs.map(ln_secs)),
        ];
        for (name, value) in numeric {
            match value {
                Some(Some(v)) => x.extend([v, 0.0]),
                Some(None) => {
                    bad = bad.or(Some(name));
                    x.extend([0.0, 1.0]);
                }
                None => x.extend([0.0, 1.0]),
            }
        }
        let mut one_hot = |len: usize, index: Option<usize>| {
            let start = x.len();
            x.resize(start + len, 0.0);
            if let Some(i) = index.filter(|i| *i < len) {
                x[start + i] = 1.0;
            }
        };
        let class = f.class.as_ref().map(|c| self.classes.get(c).copied().unwrap_or(self.class_cap));
        one_hot(self.class_cap + 1, class);
        let hour = f.hour_of_day.map(usize::from);
        if hour.is_some_and(|h| h >= 24) {
            bad = bad.or(Some("hour_of_day"));
        }
        one_hot(HOUR_BLOCKS, hour.map(|h| h / HOURS_PER_BLOCK));
        let day = f.day_of_week.map(usize::from);
        if day.is_some_and(|d| d >= 7) {
            bad = bad.or(Some("day_of_week"));
        }
        one_hot(2, day.filter(|d| *d < 7).map(|d| usize::from(d >= 5)));
        (x, bad)
    }
}

/// A duration estimate in seconds from a lognormal in log-seconds.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean_secs: f64,
    pub std_secs: f64,
    /// The point that minimizes absolute (and percentage) error better than
    /// the mean does for a skewed distribution.
    pub median_secs: f64,
}

impl Estimate {
    /// mean = exp(μ + σ²/2), var = (exp(σ²) − 1)·exp(2μ + σ²), median = exp(μ).
    pub fn from_log(log: Normal) -> Estimate {
        let mu = log.mean.clamp(MIN_SECS.ln(), (crate::domain::units::HORIZON_SECS as f64).ln());
        let s2 = log.var.clamp(0.0, MAX_LOG_VAR);
        let mean_secs = (mu + s2 / 2.0).exp();
        let std_secs = (s2.exp_m1() * (2.0 * mu + s2).exp()).sqrt();
        Estimate { mean_secs, std_secs, median_secs: mu.exp() }
    }

    /// A sum of independent phases: means and variances add; the median is
    /// that of the lognormal with the same mean and variance (Fenton–Wilkinson),
    /// since the sum has no closed form.
    pub fn sum(parts: &[Estimate]) -> Estimate {
        let mean_secs: f64 = parts.iter().map(|p| p.mean_secs).sum();
        let var: f64 = parts.iter().map(|p| p.std_secs * p.std_secs).sum();
        let median_secs = if mean_secs > 0.0 { mean_secs / (1.0 + var / (mean_secs * mean_secs)).sqrt() } else { 0.0 };
        Estimate { mean_secs, std_secs: var.sqrt(), median_secs }
    }
}

/// Where a finished job spent its time, in seconds.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseDurations {
    /// Load and preprocess: CPU and memory bound.
    pub load: f64,
    /// Forward compute: GPU bound.
    pub compute: f64,
    /// Serialize and return results: I/O bound.
    pub serialize: f64,
}

/// Names of the phases, in the order of `Prediction::phases`.
pub const PHASE_NAMES: [&str; 3] = ["load", "compute", "serialize"];

/// Which model produced a prediction's totals.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Basis {
    /// Sum of the three phase models.
    Phases,
    /// The total-duration model.
    Total,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub mean_secs: f64,
    pub std_secs: f64,
    pub median_secs: f64,
    /// Per phase (load, compute, serialize), once the phase models have data,
    /// even when the totals come from the total model.
    pub phases: Option<[Estimate; 3]>,
    pub basis: Basis,
    /// Observations behind the model that gave the totals.
    pub samples: u64,
}

impl Prediction {
    fn new(total: Estimate, phases: Option<[Estimate; 3]>, basis: Basis, samples: u64) -> Prediction {
        Prediction { mean_secs: total.mean_secs, std_secs: total.std_secs, median_secs: total.median_secs, phases, basis, samples }
    }
}

/// The SPEC's test for trusting a prediction: std ≤ 30% of mean, and enough
/// samples behind it for the std itself to mean something.
pub fn is_reliable(prediction: &Prediction) -> bool {
    prediction.samples >= MIN_RELIABLE_SAMPLES
        && prediction.mean_secs.is_finite()
        && prediction.mean_secs > 0.0
        && prediction.std_secs <= DEGRADED_STD_RATIO * prediction.mean_secs
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LifetimeConfig {
    /// λ of the regressions (memory ≈ 1/(1 − λ) jobs).
    pub forgetting: f64,
    /// δ in P₀ = δ·I.
    pub prior_var: f64,
    /// Huber threshold for robust fitting; `None` for plain least squares.
    pub huber: Option<f64>,
    /// Class names with a one-hot slot of their own.
    pub class_cap: usize,
}

impl Default for LifetimeConfig {
    fn default() -> LifetimeConfig {
        LifetimeConfig { forgetting: DEFAULT_FORGETTING, prior_var: DEFAULT_PRIOR_VAR, huber: Some(DEFAULT_HUBER), class_cap: DEFAULT_CLASS_CAP }
    }
}

/// One regression per phase plus one on the total, sharing an encoder.
/// Phase observations also train the total model, so the total model is
/// always at least as informed as the phase models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LifetimePredictor {
    encoder: FeatureEncoder,
    phases: [Rls; 3],
    total: Rls,
    /// Samples refused before reaching a model (invalid features or durations).
    rejected: u64,
}

impl Default for LifetimePredictor {
    fn default() -> LifetimePredictor {
        LifetimePredictor::from_valid(&LifetimeConfig::default())
    }
}

impl LifetimePredictor {
    pub fn new(config: &LifetimeConfig) -> Result<LifetimePredictor, PredictError> {
        let check = Rls::new(1, config.forgetting, config.prior_var)?;
        if let Some(c) = config.huber {
            check.with_huber(c)?;
        }
        Ok(LifetimePredictor::from_valid(config))
    }

    /// Builds without `Rls::new`'s checks, which `new` has done (and which
    /// the defaults pass by construction).
    fn from_valid(config: &LifetimeConfig) -> LifetimePredictor {
        let encoder = FeatureEncoder::new(config.class_cap);
        let mut rls = Rls::unchecked(encoder.dim(), config.forgetting, config.prior_var);
        rls.huber = config.huber;
        LifetimePredictor { encoder, phases: [rls.clone(), rls.clone(), rls.clone()], total: rls, rejected: 0 }
    }

    /// Samples refused, here or inside a model.
    pub fn rejected(&self) -> u64 {
        self.rejected + self.total.rejected() + self.phases.iter().map(Rls::rejected).sum::<u64>()
    }

    /// Observations learned by the total model (phase observations included).
    pub fn samples(&self) -> u64 {
        self.total.samples()
    }

    pub fn total_model(&self) -> &Rls {
        &self.total
    }

    fn input_for_learning(&mut self, features: &JobFeatures) -> Result<Vec<f64>, PredictError> {
        let (x, bad) = self.encoder.encode(features);
        if let Some(name) = bad {
            self.rejected += 1;
            return Err(PredictError::BadFeature(name.to_string()));
        }
        // The class slot is assigned only once the sample is known good, so a
        // junk sample cannot take a slot.
        if let Some(class) = &features.class {
            self.encoder.learn_class(class);
            return Ok(self.encoder.encode(features).0);
        }
        Ok(x)
    }

    fn log_target(&mut self, secs: f64) -> Result<f64, PredictError> {
        if !(secs.is_finite() && secs >= 0.0) {
            self.rejected += 1;
            return Err(PredictError::BadDuration(secs));
        }
        Ok(secs.max(MIN_SECS).ln())
    }

    /// A job finished with known phase durations.
    pub fn observe(&mut self, features: &JobFeatures, phases: PhaseDurations) -> Result<(), PredictError> {
        let secs = [phases.load, phases.compute, phases.serialize];
        let mut targets = [0.0; 3];
        for (target, s) in targets.iter_mut().zip(secs) {
            *target = self.log_target(s)?;
        }
        let total = self.log_target(secs.iter().sum())?;
        let x = self.input_for_learning(features)?;
        // Each model refuses on its own (only numerical trouble can make one
        // refuse what another took); the first refusal is reported.
        let mut result = self.total.observe(&x, total);
        for (model, y) in self.phases.iter_mut().zip(targets) {
            result = result.and(model.observe(&x, y));
        }
        result
    }

    /// A job finished and only its total duration is known (traces such as
    /// Philly); trains the total model only.
    pub fn observe_total(&mut self, features: &JobFeatures, secs: f64) -> Result<(), PredictError> {
        let y = self.log_target(secs)?;
        let x = self.input_for_learning(features)?;
        self.total.observe(&x, y)
    }

    /// The job's duration once started, with its spread; `None` before any
    /// observation. An invalid feature is treated as missing (a prediction
    /// is still owed). With both phase and total models trained, the totals
    /// come from whichever has the smaller variance: the phase models know
    /// more per job, the total model may have seen many more jobs.
    pub fn predict(&self, features: &JobFeatures) -> Option<Prediction> {
        let (x, _) = self.encoder.encode(features);
        let total = self.total.predict(&x).map(Estimate::from_log);
        let mut phase_estimates = [Estimate { mean_secs: 0.0, std_secs: 0.0, median_secs: 0.0 }; 3];
        let mut have_phases = true;
        for (estimate, model) in phase_estimates.iter_mut().zip(&self.phases) {
            match model.predict(&x) {
                Some(log) => *estimate = Estimate::from_log(log),
                None => have_phases = false,
            }
        }
        let phases = have_phases.then_some(phase_estimates);
        let phase_sum = phases.map(|p| Estimate::sum(&p));
        let phase_samples = self.phases.iter().map(Rls::samples).min().unwrap_or(0);
        match (phase_sum, total) {
            (Some(sum), Some(total)) if sum.std_secs <= total.std_secs => Some(Prediction::new(sum, phases, Basis::Phases, phase_samples)),
            (_, Some(total)) => Some(Prediction::new(total, phases, Basis::Total, self.total.samples())),
            (Some(sum), None) => Some(Prediction::new(sum, phases, Basis::Phases, phase_samples)),
            (None, None) => None,
        }
    }
}

/// Expected wait in seconds before a job needing `gpus_needed` GPUs starts,
/// under a fluid first-come-first-served picture: the `work_ahead_gpu_secs`
/// of jobs queued ahead of it is poured into GPUs as they become free (all
/// free ones at once, perfectly divisible), and the job starts once that work
/// is done *and* `gpus_needed` GPUs are free. `running` holds each running
/// job's (GPUs, predicted remaining seconds); the cluster has `capacity_gpus`.
///
/// It ignores packing losses and backfill, so it is optimistic when big jobs
/// are queued ahead and pessimistic under backfill; it is a queue-depth
/// signal, not a schedule. `None` when the job can never fit
/// (`gpus_needed > capacity_gpus`) or a remaining time is not finite;
/// negative remaining times count as 0 (the job is overdue, not early).
pub fn queue_wait(gpus_needed: u32, work_ahead_gpu_secs: f64, running: &[(u32, f64)], capacity_gpus: u32) -> Option<f64> {
    if gpus_needed > capacity_gpus || capacity_gpus == 0 || !work_ahead_gpu_secs.is_finite() {
        return None;
    }
    if running.iter().any(|(_, r)| !r.is_finite()) {
        return None;
    }
    let mut ends: Vec<(f64, u64)> = running.iter().map(|(g, r)| (r.max(0.0), u64::from(*g))).collect();
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let capacity = u64::from(capacity_gpus);
    // Free GPUs are what the still-running jobs leave, never below 0 even if
    // the input books more GPUs than the cluster has (stale telemetry).
    let mut busy: u64 = ends.iter().map(|(_, g)| g).sum();
    let mut free = capacity.saturating_sub(busy);
    let mut work_left = work_ahead_gpu_secs.max(0.0);
    let mut now = 0.0;
    let mut work_done_at = None;
    let mut fits_at = None;
    let mut next = ends.iter().peekable();
    loop {
        if fits_at.is_none() && free >= u64::from(gpus_needed) {
            fits_at = Some(now);
        }
        // Until the next running job ends, `free` GPUs chew on the work ahead.
        let until = next.peek().map(|(t, _)| *t);
        if work_done_at.is_none() {
            if work_left <= 0.0 {
                work_done_at = Some(now);
            } else if free > 0 {
                let finish = now + work_left / free as f64;
                match until {
                    Some(t) if t < finish => work_left -= (t - now) * free as f64,
                    _ => work_done_at = Some(finish),
                }
            }
        }
        if let (Some(done), Some(fits)) = (work_done_at, fits_at) {
            return Some(f64::max(done, fits));
        }
        let (t, g) = next.next().copied()?;
        now = t;
        busy = busy.saturating_sub(g);
        free = capacity.saturating_sub(busy);
    }
}

/// The median of the last few durations per key (cluster and size, tenant…),
/// fed as jobs finish: the `recent_similar_secs` feature, which carries the
/// short-term regularity of a workload (sweeps, retries) that static features
/// miss. Keys are capped so that unbounded input cannot grow it without end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecentDurations {
    keep: usize,
    max_keys: usize,
    by_key: BTreeMap<String, VecDeque<f64>>,
}

impl RecentDurations {
    pub fn new(keep: usize, max_keys: usize) -> RecentDurations {
        RecentDurations { keep: keep.max(1), max_keys, by_key: BTreeMap::new() }
    }

    /// Records a finished job's duration; non-finite or negative ones are
    /// ignored, as are new keys past the cap.
    pub fn record(&mut self, key: &str, secs: f64) {
        if !(secs.is_finite() && secs >= 0.0) {
            return;
        }
        if !self.by_key.contains_key(key) && self.by_key.len() >= self.max_keys {
            return;
        }
        let recent = self.by_key.entry(key.to_string()).or_default();
        if recent.len() == self.keep {
            recent.pop_front();
        }
        recent.push_back(secs);
    }

    pub fn median(&self, key: &str) -> Option<f64> {
        let recent = self.by_key.get(key)?;
        let mut sorted: Vec<f64> = recent.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(sorted[n / 2]),
            _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn rls_fits_a_line_exactly_and_its_variance_collapses() {
        let mut rls = Rls::new(2, 1.0, 1000.0).unwrap();
        for i in 0..50 {
            let x = f64::from(i) / 10.0;
            rls.observe(&[1.0, x], 3.0 - 2.0 * x).unwrap();
        }
        assert!(close(rls.weights()[0], 3.0, 1e-4) && close(rls.weights()[1], -2.0, 1e-4), "{:?}", rls.weights());
        let p = rls.predict(&[1.0, 10.0]).unwrap();
        assert!(close(p.mean, -17.0, 1e-4));
        // Only the first innovations, before the line is pinned down, count.
        assert!(p.var < 1e-3, "{p:?}");
    }

    #[test]
    fn rls_refuses_bad_samples_and_keeps_its_state() {
        let mut rls = Rls::new(2, 0.999, 100.0).unwrap();
        rls.observe(&[1.0, 1.0], 1.0).unwrap();
        let before = rls.clone();
        assert!(matches!(rls.observe(&[1.0, f64::NAN], 1.0), Err(PredictError::BadFeature(_))));
        assert!(matches!(rls.observe(&[1.0, 1.0], f64::INFINITY), Err(PredictError::BadDuration(_))));
        assert!(matches!(rls.observe(&[1.0], 1.0), Err(PredictError::Dimension { expected: 2, got: 1 })));
        assert!(matches!(rls.observe(&[1.0, 1e300], 1e300), Err(PredictError::Numerical)));
        assert_eq!(rls.rejected(), 4);
        assert_eq!(rls.weights(), before.weights());
        assert_eq!(rls.samples(), 1);
        assert_eq!(rls.predict(&[1.0, f64::NAN]), None);
        assert!(Rls::new(2, 1.5, 1.0).is_err() && Rls::new(2, 0.99, 0.0).is_err() && Rls::new(0, 0.99, 1.0).is_err());
    }

    #[test]
    fn unexcited_directions_do_not_wind_up_under_forgetting() {
        let mut rls = Rls::new(3, 0.9, 10.0).unwrap();
        for i in 0..2000 {
            // The third feature is never non-zero.
            rls.observe(&[1.0, f64::from(i % 7), 0.0], 1.0).unwrap();
        }
        assert!(rls.p[2 * 3 + 2] <= 10.0 + 1e-9);
        assert!(rls.p.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn the_encoder_marks_missing_and_invalid_features() {
        let mut encoder = FeatureEncoder::new(2);
        let (x, bad) = encoder.encode(&JobFeatures::default());
        assert_eq!(x.len(), encoder.dim());
        assert_eq!(bad, None);
        // Intercept, then (value, missing) pairs: all missing.
        assert_eq!(&x[..5], &[1.0, 0.0, 1.0, 0.0, 1.0]);
        assert_eq!(x.iter().sum::<f64>(), 1.0 + NUMERIC_FEATURES as f64);

        let f = JobFeatures { gpus: Some(3), sm_clock_mhz: Some(f64::NAN), hour_of_day: Some(30), ..JobFeatures::default() };
        let (x, bad) = encoder.encode(&f);
        assert_eq!(bad, Some("sm_clock_mhz"));
        assert!(close(x[7], 4f64.ln(), 1e-12) && x[8] == 0.0);
        assert_eq!((x[9], x[10]), (0.0, 1.0), "an invalid clock encodes as missing");

        for class in ["a", "b", "c"] {
            encoder.learn_class(class);
        }
        let slot = |class: &str| {
            let (x, _) = encoder.encode(&JobFeatures { class: Some(class.into()), ..JobFeatures::default() });
            x[1 + 2 * NUMERIC_FEATURES..1 + 2 * NUMERIC_FEATURES + 3].iter().position(|v| *v == 1.0)
        };
        assert_eq!((slot("a"), slot("b"), slot("c"), slot("never seen")), (Some(0), Some(1), Some(2), Some(2)));
    }

    #[test]
    fn hours_fall_in_blocks_and_days_in_weekday_or_weekend() {
        let encoder = FeatureEncoder::new(0);
        let tail = |hour, day| {
            let f = JobFeatures { hour_of_day: hour, day_of_week: day, ..JobFeatures::default() };
            let (x, _) = encoder.encode(&f);
            x[x.len() - HOUR_BLOCKS - 2..].to_vec()
        };
        assert_eq!(tail(Some(14), Some(6)), [0., 0., 0., 1., 0., 0., 0., 1.]);
        assert_eq!(tail(Some(23), Some(0)), [0., 0., 0., 0., 0., 1., 1., 0.]);
        assert_eq!(tail(None, Some(9)), [0.0; 8], "missing and invalid are all 0");
    }

    #[test]
    fn lognormal_moments_and_sums() {
        let e = Estimate::from_log(Normal { mean: 2f64.ln() + 5.0, var: 0.25 });
        assert!(close(e.median_secs, 2.0 * 5f64.exp(), 1e-12));
        assert!(close(e.mean_secs, e.median_secs * 0.125f64.exp(), 1e-12));
        let var = 0.25f64.exp_m1() * (2.0 * (2f64.ln() + 5.0) + 0.25).exp();
        assert!(close(e.std_secs, var.sqrt(), 1e-12));
        let s = Estimate::sum(&[e, e]);
        assert!(close(s.mean_secs, 2.0 * e.mean_secs, 1e-12));
        assert!(close(s.std_secs, 2f64.sqrt() * e.std_secs, 1e-12));
        assert!(s.median_secs < s.mean_secs);
        // Extrapolation stays finite.
        let wild = Estimate::from_log(Normal { mean: 1e6, var: 1e6 });
        assert!(wild.mean_secs.is_finite() && wild.std_secs.is_finite());
    }

    #[test]
    fn phases_add_up_and_feed_the_total_model() {
        let mut predictor = LifetimePredictor::default();
        assert_eq!(predictor.predict(&JobFeatures::default()), None);
        let f = JobFeatures { gpus: Some(8), class: Some("train".into()), ..JobFeatures::default() };
        for _ in 0..40 {
            predictor.observe(&f, PhaseDurations { load: 60.0, compute: 3600.0, serialize: 120.0 }).unwrap();
        }
        let p = predictor.predict(&f).unwrap();
        let phases = p.phases.unwrap();
        assert!(close(phases[0].median_secs, 60.0, 0.01) && close(phases[1].median_secs, 3600.0, 0.01), "{phases:?}");
        assert!(close(p.mean_secs, 3780.0, 0.01), "{p:?}");
        assert_eq!(predictor.samples(), 40);
        assert!(is_reliable(&p));
        assert!(predictor.observe(&f, PhaseDurations { load: -1.0, compute: 1.0, serialize: 1.0 }).is_err());
        assert_eq!(predictor.rejected(), 1);
    }

    #[test]
    fn few_samples_are_never_reliable() {
        let mut predictor = LifetimePredictor::default();
        let f = JobFeatures { gpus: Some(1), ..JobFeatures::default() };
        predictor.observe_total(&f, 100.0).unwrap();
        predictor.observe_total(&f, 100.0).unwrap();
        let p = predictor.predict(&f).unwrap();
        assert_eq!((p.basis, p.samples, p.phases), (Basis::Total, 2, None));
        assert!(!is_reliable(&p), "{p:?}");
    }

    #[test]
    fn queue_wait_walks_running_jobs_and_drains_work_ahead() {
        // Empty cluster, nothing ahead: start now.
        assert_eq!(queue_wait(4, 0.0, &[], 8), Some(0.0));
        // 8 GPUs, 6 busy for 100 s: a 4-GPU job waits for them.
        assert_eq!(queue_wait(4, 0.0, &[(6, 100.0)], 8), Some(100.0));
        // 800 GPU·s ahead on an idle 8-GPU cluster: 100 s.
        assert_eq!(queue_wait(1, 800.0, &[], 8), Some(100.0));
        // 2 free GPUs chew 200 GPU·s in the first 100 s, then 8 free finish
        // the remaining 400 in 50 s.
        assert_eq!(queue_wait(1, 600.0, &[(6, 100.0)], 8), Some(150.0));
        // Everything busy, nothing ahead: when the first job ends.
        assert_eq!(queue_wait(2, 0.0, &[(4, 300.0), (4, 50.0)], 8), Some(50.0));
        assert_eq!(queue_wait(16, 0.0, &[], 8), None);
        assert_eq!(queue_wait(1, 0.0, &[(8, f64::NAN)], 8), None);
        // Overbooked input does not make free GPUs appear from nowhere.
        assert_eq!(queue_wait(8, 0.0, &[(12, 10.0), (4, 20.0)], 8), Some(20.0));
    }

    #[test]
    fn recent_durations_keep_a_bounded_median_per_key() {
        let mut recent = RecentDurations::new(3, 1);
        assert_eq!(recent.median("a"), None);
        for s in [10.0, 1000.0, 20.0, 30.0] {
            recent.record("a", s);
        }
        assert_eq!(recent.median("a"), Some(30.0));
        recent.record("a", 40.0);
        assert_eq!(recent.median("a"), Some(30.0));
        recent.record("a", f64::NAN);
        recent.record("b", 5.0);
        assert_eq!(recent.median("b"), None, "past the key cap");
        let mut even = RecentDurations::new(4, 4);
        for s in [1.0, 2.0, 3.0, 10.0] {
            even.record("k", s);
        }
        assert_eq!(even.median("k"), Some(2.5));
    }
}
