//! Survival analysis of spot instance lifetimes: Kaplan–Meier and
//! Nelson–Aalen estimates from observed lifetimes (interrupted or censored),
//! a short window of recent interruptions per instance type, and the blend of
//! the two into "probability of an interruption in the next minute" that the
//! checkpoint controller acts on (SPEC §4).
//!
//! It owns only statistics over lifetimes and interruption times handed to it.
//! It never reads traces or clocks (lifetimes are learned elsewhere, e.g. from
//! `sources::spot_trace`, and fed in) and never decides what to do with a risk.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

pub use crate::domain::spot::Lifetime;
use crate::domain::units::{At, Secs};

impl Lifetime {
    /// A lifetime must last: a zero or negative one says nothing about risk
    /// and would put a zero in the at-risk arithmetic.
    pub fn new(secs: Secs, interrupted: bool) -> Result<Lifetime, HazardError> {
        let life = Lifetime { secs, interrupted };
        life.check()?;
        Ok(life)
    }

    fn check(self) -> Result<(), HazardError> {
        if self.secs.0 <= 0 {
            return Err(HazardError::NonPositiveLifetime(self.secs.0));
        }
        Ok(())
    }
}

/// Input the hazard model refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HazardError {
    #[error("a lifetime must be positive, got {0} s")]
    NonPositiveLifetime(i64),
    #[error("lifetime {index}: a lifetime must be positive, got {secs} s")]
    NonPositiveLifetimeAt { index: usize, secs: i64 },
    #[error("hazard config: {0}")]
    Config(String),
}

/// Kaplan–Meier survival and Nelson–Aalen cumulative hazard of a set of
/// lifetimes, precomputed at the distinct interruption times so that every
/// lookup is a binary search.
///
/// Ties follow the usual convention: an instance censored at `t` is counted at
/// risk at `t` (it was seen alive up to `t`) and removed after it, so at an
/// event time `t_i` with `d_i` interruptions and `n_i` at risk,
/// `S` is multiplied by `1 − d_i/n_i` and `H` grows by `d_i/n_i`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Survival {
    /// Distinct interruption times, ascending (seconds of age).
    times: Vec<i64>,
    /// S just after each of `times`.
    survival: Vec<f64>,
    /// H just after each of `times`.
    cumulative: Vec<f64>,
    lifetimes: usize,
    events: usize,
    /// Instance-seconds observed (all lifetimes, interrupted or not).
    exposure: i64,
    /// The longest lifetime seen, interrupted or censored: past it the KM
    /// curve is not informed by data.
    last_observed: i64,
    /// Lifetimes dropped by `new` because they were not positive.
    rejected: usize,
}

impl Survival {
    /// Builds the estimates, silently dropping lifetimes that are not
    /// positive (counted in `rejected`); `try_new` refuses them instead.
    pub fn new(lifetimes: &[Lifetime]) -> Survival {
        let mut valid: Vec<Lifetime> = lifetimes.iter().copied().filter(|l| l.check().is_ok()).collect();
        let rejected = lifetimes.len() - valid.len();
        valid.sort_unstable();
        Survival { rejected, ..Survival::from_sorted(&valid) }
    }

    /// Like `new`, but the first lifetime that is not positive is an error naming it.
    pub fn try_new(lifetimes: &[Lifetime]) -> Result<Survival, HazardError> {
        if let Some((index, l)) = lifetimes.iter().enumerate().find(|(_, l)| l.check().is_err()) {
            return Err(HazardError::NonPositiveLifetimeAt { index, secs: l.secs.0 });
        }
        Ok(Survival::new(lifetimes))
    }

    /// `sorted` by age. Within a tie the order does not matter: a whole group
    /// of equal ages is taken at once, all of it at risk.
    fn from_sorted(sorted: &[Lifetime]) -> Survival {
        let mut out = Survival { lifetimes: sorted.len(), ..Survival::default() };
        let mut at_risk = sorted.len();
        let (mut s, mut h) = (1.0_f64, 0.0_f64);
        for group in sorted.chunk_by(|a, b| a.secs == b.secs) {
            let t = group.first().map_or(0, |l| l.secs.0);
            let deaths = group.iter().filter(|l| l.interrupted).count();
            out.exposure = out.exposure.saturating_add(t.saturating_mul(group.len() as i64));
            if deaths > 0 {
                let ratio = deaths as f64 / at_risk as f64;
                s *= 1.0 - ratio;
                h += ratio;
                out.times.push(t);
                out.survival.push(s);
                out.cumulative.push(h);
                out.events += deaths;
            }
            at_risk -= group.len();
            out.last_observed = t;
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.lifetimes == 0
    }
    /// Lifetimes used (after dropping rejected ones).
    pub fn len(&self) -> usize {
        self.lifetimes
    }
    pub fn events(&self) -> usize {
        self.events
    }
    pub fn censored(&self) -> usize {
        self.lifetimes - self.events
    }
    pub fn rejected(&self) -> usize {
        self.rejected
    }
    pub fn exposure(&self) -> Secs {
        Secs(self.exposure)
    }
    pub fn last_observed(&self) -> Secs {
        Secs(self.last_observed)
    }

    /// Number of event times at or before `age`.
    fn steps_to(&self, age: i64) -> usize {
        self.times.partition_point(|t| *t <= age)
    }

    /// Kaplan–Meier `S(age)`: the probability of lasting beyond `age`.
    /// 1 before the first interruption (and with no data at all); past the
    /// longest observed lifetime it holds its last value, which the data do
    /// not support: `p_interrupt_within` extends it with the tail rate instead.
    pub fn survival(&self, age: Secs) -> f64 {
        match self.steps_to(age.0) {
            0 => 1.0,
            k => self.survival.get(k - 1).copied().unwrap_or(1.0),
        }
    }

    /// Nelson–Aalen `H(age) = Σ_{t_i ≤ age} d_i/n_i`.
    pub fn cumulative_hazard(&self, age: Secs) -> f64 {
        match self.steps_to(age.0) {
            0 => 0.0,
            k => self.cumulative.get(k - 1).copied().unwrap_or(0.0),
        }
    }

    /// Interruptions per instance-second of exposure: the maximum-likelihood
    /// rate if lifetimes were exponential. `None` with no exposure.
    pub fn mean_rate(&self) -> Option<f64> {
        (self.exposure > 0).then(|| self.events as f64 / self.exposure as f64)
    }

    /// The smallest age at which `S` falls to one half or below, if it does.
    pub fn median(&self) -> Option<Secs> {
        let k = self.survival.iter().position(|s| *s <= 0.5)?;
        self.times.get(k).map(|t| Secs(*t))
    }

    /// `(age, S, H)` at every interruption time, ascending.
    pub fn steps(&self) -> impl Iterator<Item = (Secs, f64, f64)> + '_ {
        self.times.iter().zip(&self.survival).zip(&self.cumulative).map(|((t, s), h)| (Secs(*t), *s, *h))
    }

    /// Survival extended past the longest observed lifetime `T` by the
    /// constant tail rate λ: `S(T)·exp(−λ(age − T))`.
    fn extended(&self, age: i64, rate: f64) -> f64 {
        let s = self.survival(Secs(age));
        if age <= self.last_observed {
            return s;
        }
        s * (-(rate * (age - self.last_observed) as f64)).exp()
    }

    /// Probability of an interruption within `horizon` for an instance that
    /// has lasted `age`: `1 − S(age + h)/S(age)`, with `S` extended past the
    /// data by the constant tail rate λ = interruptions / exposure. Where
    /// `S(age)` is 0 (every instance seen that old was interrupted) the
    /// answer is the tail's `1 − exp(−λh)`. A negative age counts as 0; a
    /// horizon of zero or less gives 0. `None` with no lifetimes at all.
    pub fn p_interrupt_within(&self, age: Secs, horizon: Secs) -> Option<f64> {
        let rate = self.mean_rate()?;
        if horizon.0 <= 0 {
            return Some(0.0);
        }
        let age = age.0.max(0);
        let now = self.extended(age, rate);
        let p = if now > 0.0 { 1.0 - self.extended(age.saturating_add(horizon.0), rate) / now } else { -(-rate * horizon.0 as f64).exp_m1() };
        Some(p.clamp(0.0, 1.0))
    }

    /// Nelson–Aalen `H` extended past the longest observed lifetime `T` by
    /// the tail rate: `H(T) + λ(age − T)`.
    fn extended_hazard(&self, age: i64, rate: f64) -> f64 {
        let h = self.cumulative_hazard(Secs(age));
        if age <= self.last_observed {
            return h;
        }
        h + rate * (age - self.last_observed) as f64
    }

    /// Like `p_interrupt_within`, but from the mean hazard over the next
    /// `bandwidth` of age: `r = (H(age + b) − H(age)) / b` (Nelson–Aalen,
    /// extended by the tail rate), `p = 1 − exp(−r·h)`.
    ///
    /// Why: a few hundred lifetimes put KM steps far apart, so over a horizon
    /// of a minute the raw conditional probability is 0 at most ages and
    /// jumps at a few (the real V100 traces give 0 at age 0 in three zones of
    /// four). Averaging the hazard over half an hour of age keeps its shape
    /// (spot hazard falls with age) without the comb. A `bandwidth` no
    /// longer than `horizon` gives the raw answer.
    pub fn p_interrupt_within_smoothed(&self, age: Secs, horizon: Secs, bandwidth: Secs) -> Option<f64> {
        let rate = self.mean_rate()?;
        if horizon.0 <= 0 {
            return Some(0.0);
        }
        if bandwidth <= horizon {
            return self.p_interrupt_within(age, horizon);
        }
        let age = age.0.max(0);
        let end = age.saturating_add(bandwidth.0);
        let width = (end - age).max(1) as f64;
        let hazard = (self.extended_hazard(end, rate) - self.extended_hazard(age, rate)).max(0.0) / width;
        Some((-(-hazard * horizon.0 as f64).exp_m1()).clamp(0.0, 1.0))
    }
}

/// The default span of the recent-interruption window (SPEC §4: "the last 5 minutes").
pub const DEFAULT_WINDOW: Secs = Secs(300);

/// `span` before `at`, or the earliest representable time rather than overflow.
fn before(at: At, span: Secs) -> At {
    at.checked_sub_signed(span.delta()).unwrap_or(At::MIN_UTC)
}

/// Interruption times of one instance type over a sliding window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecentInterruptions {
    span: Secs,
    /// Ascending; trimmed to the span behind the newest.
    times: VecDeque<At>,
}

impl Default for RecentInterruptions {
    fn default() -> Self {
        RecentInterruptions::new(DEFAULT_WINDOW)
    }
}

impl RecentInterruptions {
    /// A span of zero or less would count nothing; it is raised to one second.
    pub fn new(span: Secs) -> RecentInterruptions {
        RecentInterruptions { span: Secs(span.0.max(1)), times: VecDeque::new() }
    }

    pub fn span(&self) -> Secs {
        self.span
    }

    /// Records an interruption. Late arrivals are placed in order; ones older
    /// than the window behind the newest are dropped (they can never count).
    pub fn record(&mut self, at: At) {
        let newest = self.times.back().copied().map_or(at, |b| b.max(at));
        let cutoff = before(newest, self.span);
        if at <= cutoff {
            return;
        }
        let i = self.times.partition_point(|t| *t <= at);
        self.times.insert(i, at);
        while self.times.front().is_some_and(|t| *t <= cutoff) {
            self.times.pop_front();
        }
    }

    /// Interruptions in `(now − span, now]`.
    pub fn count(&self, now: At) -> usize {
        let from = before(now, self.span);
        self.times.partition_point(|t| *t <= now).saturating_sub(self.times.partition_point(|t| *t <= from))
    }

    /// Instance-seconds of exposure the window stands for with
    /// `instances_at_risk` up now.
    pub fn exposure(&self, instances_at_risk: u32) -> f64 {
        f64::from(instances_at_risk) * self.span.0 as f64
    }

    /// Probability that a given instance is interrupted in the next minute,
    /// from a constant rate λ = events / (instances at risk × span).
    ///
    /// The approximation: the true exposure is ∫ N(t) dt over the window, which
    /// is not tracked; the number up now stands for N throughout. Right after a
    /// mass reclaim N now is below what it was, so λ comes out high: the error
    /// leans toward checkpointing too often, not too rarely. Then
    /// `p = 1 − exp(−60 λ)`. `None` when nothing is at risk.
    pub fn p_next_minute(&self, now: At, instances_at_risk: u32) -> Option<f64> {
        recent_p_next_minute(self.count(now), self.exposure(instances_at_risk))
    }
}

/// `1 − exp(−60 λ)` with λ = events / exposure (instance-seconds); `None`
/// when nothing was at risk.
fn recent_p_next_minute(events: usize, exposure: f64) -> Option<f64> {
    (exposure > 0.0).then(|| -(-(events as f64 / exposure) * 60.0).exp_m1())
}

/// The credibility blend of a long-run and a recent next-minute probability:
/// `p = w·p_recent + (1 − w)·p_long`, with `w = E / (E + E₀)`, `E` the
/// instance-seconds the recent window saw and `E₀` the prior exposure.
/// Returns (p_recent, w, p). Shared by `HazardModel::assess` and callers
/// that count recent events themselves (the spot experiment).
pub fn blend(long_run: f64, recent_events: usize, instances_at_risk: u32, window: Secs, prior_exposure: Secs) -> (Option<f64>, f64, f64) {
    let exposure = f64::from(instances_at_risk) * window.0 as f64;
    let recent = recent_p_next_minute(recent_events, exposure);
    let total = exposure + prior_exposure.0.max(0) as f64;
    let weight = if total > 0.0 { exposure / total } else { 0.0 };
    let p = match recent {
        Some(r) => weight * r + (1.0 - weight) * long_run,
        None => long_run,
    };
    (recent, weight, p.clamp(0.0, 1.0))
}

/// How the long-run and the recent estimates are weighed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HazardConfig {
    /// The recent-interruption window.
    pub window: Secs,
    /// Instance-seconds of recent exposure that weigh as much as the long-run
    /// estimate (the credibility constant).
    pub prior_exposure: Secs,
    /// Age over which the long-run hazard is averaged (see
    /// `Survival::p_interrupt_within_smoothed`); 60 s or less uses the raw
    /// Kaplan–Meier step function.
    pub smoothing: Secs,
    /// Interruptions per instance-hour assumed for a type with no lifetimes
    /// at all. The default is the order of the real V100 traces in
    /// `fixtures/spot-traces/preemption` (0.31 to 0.74 per hour per zone,
    /// 0.47 pooled).
    pub fallback_per_hour: f64,
    /// Live lifetimes kept per type (the oldest go first), so the model stays
    /// small inside the `Room` and a rebuild stays cheap.
    pub max_live: usize,
}

impl Default for HazardConfig {
    fn default() -> Self {
        HazardConfig { window: DEFAULT_WINDOW, prior_exposure: Secs(3600), smoothing: Secs(1800), fallback_per_hour: 0.5, max_live: 512 }
    }
}

impl HazardConfig {
    pub fn validate(&self) -> Result<(), HazardError> {
        if self.window.0 <= 0 {
            return Err(HazardError::Config(format!("window must be positive, got {} s", self.window.0)));
        }
        if self.prior_exposure.0 < 0 {
            return Err(HazardError::Config(format!("prior_exposure must not be negative, got {} s", self.prior_exposure.0)));
        }
        if self.smoothing.0 < 0 {
            return Err(HazardError::Config(format!("smoothing must not be negative, got {} s", self.smoothing.0)));
        }
        if !self.fallback_per_hour.is_finite() || self.fallback_per_hour < 0.0 {
            return Err(HazardError::Config(format!("fallback_per_hour must be a finite rate ≥ 0, got {}", self.fallback_per_hour)));
        }
        Ok(())
    }
}

/// What one instance type's lifetimes and recent interruptions say.
///
/// Serialized as its lifetimes and window only; the Kaplan–Meier arrays are
/// rebuilt on load, so two equal models compare equal however they were made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TypeRiskWire", into = "TypeRiskWire")]
pub struct TypeRisk {
    prior: Vec<Lifetime>,
    live: VecDeque<Lifetime>,
    recent: RecentInterruptions,
    /// Derived from `prior` and `live`; never set apart from them.
    long_run: Survival,
}

#[derive(Clone, Serialize, Deserialize)]
struct TypeRiskWire {
    prior: Vec<Lifetime>,
    live: VecDeque<Lifetime>,
    recent: RecentInterruptions,
}

impl TryFrom<TypeRiskWire> for TypeRisk {
    type Error = HazardError;
    fn try_from(wire: TypeRiskWire) -> Result<TypeRisk, HazardError> {
        for l in wire.prior.iter().chain(&wire.live) {
            l.check()?;
        }
        let mut risk = TypeRisk { prior: wire.prior, live: wire.live, recent: wire.recent, long_run: Survival::default() };
        risk.rebuild();
        Ok(risk)
    }
}

impl From<TypeRisk> for TypeRiskWire {
    fn from(risk: TypeRisk) -> TypeRiskWire {
        TypeRiskWire { prior: risk.prior, live: risk.live, recent: risk.recent }
    }
}

impl TypeRisk {
    fn new(window: Secs) -> TypeRisk {
        TypeRisk { prior: Vec::new(), live: VecDeque::new(), recent: RecentInterruptions::new(window), long_run: Survival::default() }
    }

    fn rebuild(&mut self) {
        let all: Vec<Lifetime> = self.prior.iter().chain(&self.live).copied().collect();
        self.long_run = Survival::new(&all);
    }

    /// The long-run estimate over the prior and the live lifetimes together.
    pub fn survival(&self) -> &Survival {
        &self.long_run
    }
    pub fn recent(&self) -> &RecentInterruptions {
        &self.recent
    }
    pub fn live_lifetimes(&self) -> usize {
        self.live.len()
    }
}

/// The parts of a next-minute risk, for the checkpoint controller and the console.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RiskEstimate {
    /// Long-run conditional probability at the job's age (KM, smoothed over
    /// `HazardConfig::smoothing`); `None` when the type has no lifetimes and
    /// the fallback rate was used.
    pub long_run: Option<f64>,
    /// Interruptions of the type in the recent window.
    pub recent_events: usize,
    /// The window's estimate; `None` when nothing of the type is at risk.
    pub recent: Option<f64>,
    /// Credibility of the recent estimate, in [0, 1].
    pub weight: f64,
    /// `weight × recent + (1 − weight) × long_run`.
    pub p: f64,
}

/// Interruption risk per instance type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HazardModel {
    config: HazardConfig,
    types: BTreeMap<String, TypeRisk>,
}

const MINUTE: Secs = Secs(60);

impl HazardModel {
    pub fn new(config: HazardConfig) -> Result<HazardModel, HazardError> {
        config.validate()?;
        Ok(HazardModel { config, types: BTreeMap::new() })
    }

    pub fn config(&self) -> &HazardConfig {
        &self.config
    }

    fn entry(&mut self, instance_type: &str) -> &mut TypeRisk {
        let window = self.config.window;
        self.types.entry(instance_type.to_string()).or_insert_with(|| TypeRisk::new(window))
    }

    pub fn get(&self, instance_type: &str) -> Option<&TypeRisk> {
        self.types.get(instance_type)
    }

    pub fn types(&self) -> impl Iterator<Item = (&str, &TypeRisk)> {
        self.types.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Replaces the long-run lifetimes of a type (learned elsewhere, e.g. from
    /// the real traces). Refuses the batch, unchanged, if any is not positive.
    pub fn set_prior(&mut self, instance_type: &str, lifetimes: &[Lifetime]) -> Result<(), HazardError> {
        if let Some((index, l)) = lifetimes.iter().enumerate().find(|(_, l)| l.check().is_err()) {
            return Err(HazardError::NonPositiveLifetimeAt { index, secs: l.secs.0 });
        }
        let risk = self.entry(instance_type);
        risk.prior = lifetimes.to_vec();
        risk.rebuild();
        Ok(())
    }

    /// A node's life seen live: launch to interruption, or censored when it
    /// ended otherwise (released, or still up when the caller snapshots it).
    /// Only the newest `max_live` are kept.
    pub fn record_lifetime(&mut self, instance_type: &str, lifetime: Lifetime) -> Result<(), HazardError> {
        lifetime.check()?;
        let max_live = self.config.max_live;
        let risk = self.entry(instance_type);
        risk.live.push_back(lifetime);
        while risk.live.len() > max_live {
            risk.live.pop_front();
        }
        risk.rebuild();
        Ok(())
    }

    /// An interruption of the type (notice or reclaim) at `at`, for the window.
    pub fn record_interruption(&mut self, instance_type: &str, at: At) {
        self.entry(instance_type).recent.record(at);
    }

    /// The next-minute risk for a job of `job_age` on `instance_type`.
    ///
    /// `p = w·p_recent + (1 − w)·p_long`, with `p_long` the KM probability of
    /// an interruption within 60 s at the job's age (its hazard averaged over
    /// `smoothing` of age), `p_recent` the window's
    /// estimate, and the credibility weight `w = E / (E + E₀)`, where
    /// `E = instances_at_risk × window` is the instance-seconds the window
    /// saw and `E₀ = prior_exposure`. A quiet fleet of one instance moves the
    /// estimate little; a large fleet that just lost several moves it a lot.
    /// A type with no lifetimes uses `fallback_per_hour` as its long-run rate.
    pub fn assess(&self, instance_type: &str, now: At, job_age: Secs, instances_at_risk: u32) -> RiskEstimate {
        let risk = self.types.get(instance_type);
        let long_run = risk.and_then(|r| r.long_run.p_interrupt_within_smoothed(job_age, MINUTE, self.config.smoothing));
        // A config read from disk skipped `validate`: a bad rate counts as none.
        let fallback = Some(self.config.fallback_per_hour).filter(|r| r.is_finite() && *r > 0.0).unwrap_or(0.0);
        let base = long_run.unwrap_or_else(|| -(-fallback / 60.0).exp_m1());
        let window = risk.map_or(self.config.window, |r| r.recent.span());
        let recent_events = risk.map_or(0, |r| r.recent.count(now));
        let (recent, weight, p) = blend(base, recent_events, instances_at_risk, window, self.config.prior_exposure);
        RiskEstimate { long_run, recent_events, recent, weight, p }
    }

    /// `assess(…).p`.
    pub fn p_next_minute(&self, instance_type: &str, now: At, job_age: Secs, instances_at_risk: u32) -> f64 {
        self.assess(instance_type, now, job_age, instances_at_risk).p
    }

    /// The console's row for a type: the risk of a fresh instance (age 0).
    pub fn view(&self, instance_type: &str, now: At, instances_at_risk: u32) -> RiskEstimate {
        self.assess(instance_type, now, Secs(0), instances_at_risk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn life(secs: i64, interrupted: bool) -> Lifetime {
        Lifetime { secs: Secs(secs), interrupted }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Lifetimes 2, 3+, 5, 5, 7+, 8 (+ = censored), by hand:
    ///
    /// | t | n at risk | d | S                         | H                  |
    /// |---|-----------|---|---------------------------|--------------------|
    /// | 2 | 6         | 1 | 5/6                       | 1/6                |
    /// | 3 | 5 (cens.) | 0 | 5/6                       | 1/6                |
    /// | 5 | 4         | 2 | 5/6·(1 − 2/4) = 5/12      | 1/6 + 2/4 = 2/3    |
    /// | 7 | 2 (cens.) | 0 | 5/12                      | 2/3                |
    /// | 8 | 1         | 1 | 5/12·(1 − 1/1) = 0        | 2/3 + 1 = 5/3      |
    ///
    /// Exposure 2+3+5+5+7+8 = 30 s with 4 interruptions: λ = 4/30 per second.
    /// Median: the first t with S ≤ 1/2 is 5.
    fn textbook() -> Survival {
        Survival::try_new(&[life(5, true), life(2, true), life(3, false), life(8, true), life(5, true), life(7, false)]).unwrap()
    }

    #[test]
    fn kaplan_meier_and_nelson_aalen_match_the_hand_calculation() {
        let s = textbook();
        assert_eq!((s.len(), s.events(), s.censored()), (6, 4, 2));
        let expect_s = [(0, 1.0), (1, 1.0), (2, 5.0 / 6.0), (3, 5.0 / 6.0), (4, 5.0 / 6.0), (5, 5.0 / 12.0), (7, 5.0 / 12.0), (8, 0.0), (100, 0.0)];
        for (age, want) in expect_s {
            assert!(close(s.survival(Secs(age)), want), "S({age}) = {} not {want}", s.survival(Secs(age)));
        }
        let expect_h = [(1, 0.0), (2, 1.0 / 6.0), (4, 1.0 / 6.0), (5, 2.0 / 3.0), (8, 5.0 / 3.0)];
        for (age, want) in expect_h {
            assert!(close(s.cumulative_hazard(Secs(age)), want), "H({age}) = {}", s.cumulative_hazard(Secs(age)));
        }
        assert_eq!(s.median(), Some(Secs(5)));
        assert!(close(s.mean_rate().unwrap(), 4.0 / 30.0));
        assert_eq!(s.exposure(), Secs(30));
        assert_eq!(s.steps().map(|(t, _, _)| t.0).collect::<Vec<_>>(), vec![2, 5, 8]);
    }

    #[test]
    fn conditional_probabilities_and_the_tail() {
        let s = textbook();
        // 1 − S(5)/S(2) = 1 − (5/12)/(5/6) = 1/2.
        assert!(close(s.p_interrupt_within(Secs(2), Secs(3)).unwrap(), 0.5));
        assert!(close(s.p_interrupt_within(Secs(0), Secs(2)).unwrap(), 1.0 / 6.0));
        assert!(close(s.p_interrupt_within(Secs(0), Secs(1)).unwrap(), 0.0));
        // Everyone seen past 7 was gone by 8.
        assert!(close(s.p_interrupt_within(Secs(6), Secs(3)).unwrap(), 1.0));
        // S(8) = 0: the tail rate answers, 1 − exp(−4/30 · 3).
        let tail = 1.0 - (-4.0_f64 / 30.0 * 3.0).exp();
        assert!(close(s.p_interrupt_within(Secs(8), Secs(3)).unwrap(), tail));
        assert!(close(s.p_interrupt_within(Secs(50), Secs(3)).unwrap(), tail));
        assert_eq!(s.p_interrupt_within(Secs(2), Secs(0)), Some(0.0));
        assert_eq!(s.p_interrupt_within(Secs(-5), Secs(2)), s.p_interrupt_within(Secs(0), Secs(2)));
        assert!(s.p_interrupt_within(Secs(0), Secs(i64::MAX)).unwrap() <= 1.0);
    }

    #[test]
    fn smoothing_averages_the_nelson_aalen_hazard_over_age() {
        let s = textbook();
        // (H(4) − H(0)) / 4 = (1/6) / 4 per second, over 1 s.
        assert!(close(s.p_interrupt_within_smoothed(Secs(0), Secs(1), Secs(4)).unwrap(), 1.0 - (-1.0_f64 / 24.0).exp()));
        // From 6 over 4: H(8) − H(6) = 1, then λ·2 past T = 8.
        let rate: f64 = (1.0 + 4.0 / 30.0 * 2.0) / 4.0;
        assert!(close(s.p_interrupt_within_smoothed(Secs(6), Secs(1), Secs(4)).unwrap(), 1.0 - (-rate).exp()));
        // Past T it is the tail rate; a bandwidth no wider than the horizon is the raw KM.
        let tail = 1.0 - (-4.0_f64 / 30.0 * 3.0).exp();
        assert!(close(s.p_interrupt_within_smoothed(Secs(20), Secs(3), Secs(10)).unwrap(), tail));
        assert_eq!(s.p_interrupt_within_smoothed(Secs(2), Secs(3), Secs(3)), s.p_interrupt_within(Secs(2), Secs(3)));
        assert_eq!(s.p_interrupt_within_smoothed(Secs(2), Secs(0), Secs(30)), Some(0.0));
        assert_eq!(Survival::new(&[]).p_interrupt_within_smoothed(Secs(0), Secs(60), Secs(600)), None);
        assert!(s.p_interrupt_within_smoothed(Secs(i64::MAX), Secs(60), Secs(i64::MAX)).unwrap().is_finite());
    }

    #[test]
    fn a_censored_end_is_extended_by_the_tail_rate() {
        // 2, 4+: S = 1/2 from 2 on, T = 4 (censored), λ = 1/6 per second.
        let s = Survival::new(&[life(2, true), life(4, false)]);
        let want = 1.0 - (-1.0_f64 / 6.0).exp();
        assert!(close(s.p_interrupt_within(Secs(3), Secs(2)).unwrap(), want));
        let want = 1.0 - (-2.0_f64 / 6.0).exp();
        assert!(close(s.p_interrupt_within(Secs(5), Secs(2)).unwrap(), want));
        assert_eq!(s.median(), Some(Secs(2)));
    }

    #[test]
    fn an_event_and_a_censoring_at_the_same_age() {
        // 3, 3+, 4: both at 3 are at risk at 3, so S(3) = 1 − 1/3, not 1 − 1/2.
        let s = Survival::new(&[life(3, true), life(3, false), life(4, true)]);
        assert!(close(s.survival(Secs(3)), 2.0 / 3.0));
        assert!(close(s.cumulative_hazard(Secs(3)), 1.0 / 3.0));
        assert!(close(s.survival(Secs(4)), 0.0));
        assert!(close(s.cumulative_hazard(Secs(4)), 4.0 / 3.0));
    }

    #[test]
    fn all_censored_empty_and_invalid() {
        let s = Survival::new(&[life(5, false), life(10, false)]);
        assert_eq!((s.survival(Secs(100)), s.cumulative_hazard(Secs(100)), s.median()), (1.0, 0.0, None));
        assert_eq!(s.mean_rate(), Some(0.0));
        assert_eq!(s.p_interrupt_within(Secs(0), Secs(60)), Some(0.0));
        assert_eq!(s.p_interrupt_within(Secs(20), Secs(60)), Some(0.0));

        let empty = Survival::new(&[]);
        assert!(empty.is_empty());
        assert_eq!((empty.survival(Secs(1)), empty.mean_rate(), empty.median()), (1.0, None, None));
        assert_eq!(empty.p_interrupt_within(Secs(0), Secs(60)), None);

        let mixed = Survival::new(&[life(0, true), life(-4, true), life(10, true)]);
        assert_eq!((mixed.len(), mixed.rejected()), (1, 2));
        assert_eq!(Survival::try_new(&[life(10, true), life(0, true)]), Err(HazardError::NonPositiveLifetimeAt { index: 1, secs: 0 }));
        assert!(Lifetime::new(Secs(-1), false).is_err());
        let huge = Survival::new(&[life(i64::MAX, true), life(i64::MAX, false)]);
        assert!(huge.p_interrupt_within(Secs(i64::MAX), Secs(i64::MAX)).unwrap().is_finite());
    }

    #[test]
    fn the_window_counts_recent_interruptions() {
        let mut w = RecentInterruptions::default();
        for s in [10, 100, 200] {
            w.record(t(s));
        }
        w.record(t(50)); // late, still inside the window
        assert_eq!(w.count(t(200)), 4);
        assert_eq!(w.count(t(360)), 2); // (60, 360]: 100, 200
        w.record(t(1000));
        w.record(t(600)); // older than 1000 − 300: can never count
        assert_eq!(w.count(t(1000)), 1);
        // 1 event over 10 instances × 300 s: λ = 1/3000 per second.
        let p = w.p_next_minute(t(1000), 10).unwrap();
        assert!(close(p, 1.0 - (-60.0_f64 / 3000.0).exp()));
        assert_eq!(w.p_next_minute(t(1000), 0), None);
        assert_eq!(RecentInterruptions::new(Secs(-3)).span(), Secs(1));
    }

    #[test]
    fn the_blend_weighs_recent_exposure_against_the_prior() {
        let raw = HazardConfig { smoothing: Secs(0), ..HazardConfig::default() };
        let mut m = HazardModel::new(raw).unwrap();
        // A prior where every instance ends at 600 s (one censored at 300 s).
        let prior: Vec<Lifetime> = (0..10).map(|_| life(600, true)).chain([life(300, false)]).collect();
        m.set_prior("p3.2xlarge", &prior).unwrap();
        let quiet = m.assess("p3.2xlarge", t(1000), Secs(0), 12);
        // KM: nothing ends before 600 s, so at age 0 the next minute is safe.
        assert_eq!(quiet.long_run, Some(0.0));
        // w = 12·300 / (12·300 + 3600) = 1/2, and the window is empty.
        assert!(close(quiet.weight, 0.5));
        assert_eq!((quiet.recent_events, quiet.recent), (0, Some(0.0)));
        assert_eq!(quiet.p, 0.0);

        for s in [800, 850, 900] {
            m.record_interruption("p3.2xlarge", t(s));
        }
        let stormy = m.assess("p3.2xlarge", t(1000), Secs(580), 12);
        // Long run at 580 s: 1 − S(640)/S(580) = 1 (every prior instance ended at 600).
        assert_eq!(stormy.long_run, Some(1.0));
        let recent = 1.0 - (-3.0_f64 / 3600.0 * 60.0).exp();
        assert!(close(stormy.recent.unwrap(), recent));
        assert!(close(stormy.p, 0.5 * recent + 0.5));
        assert_eq!(m.view("p3.2xlarge", t(1000), 12).recent_events, 3);

        // Unknown type: the fallback rate, 0.5 per hour.
        let unknown = m.assess("p9.huge", t(1000), Secs(0), 0);
        assert_eq!((unknown.long_run, unknown.recent, unknown.weight), (None, None, 0.0));
        assert!(close(unknown.p, 1.0 - (-0.5_f64 / 60.0).exp()));

        // Smoothed over 30 min of age, the prior's wall at 600 s shows from age 0:
        // The censored one left at 300 s, so the ten at 600 s are all at risk then:
        // H(1800) − H(0) = 10/10 + λ·1200 with λ = 10/6300 per second.
        let smooth = HazardModel { config: HazardConfig::default(), ..m.clone() };
        let rate: f64 = (1.0 + 10.0 / 6300.0 * 1200.0) / 1800.0;
        let p = smooth.assess("p3.2xlarge", t(10_000), Secs(0), 0);
        assert!(close(p.long_run.unwrap(), 1.0 - (-rate * 60.0).exp()), "{p:?}");
    }

    #[test]
    fn live_lifetimes_are_validated_bounded_and_serialized() {
        let config = HazardConfig { max_live: 3, ..HazardConfig::default() };
        let mut m = HazardModel::new(config).unwrap();
        assert!(m.record_lifetime("p3.2xlarge", life(0, true)).is_err());
        assert!(m.set_prior("p3.2xlarge", &[life(10, true), life(-1, false)]).is_err());
        assert!(m.get("p3.2xlarge").is_none_or(|r| r.survival().is_empty()));
        for s in 1..=5 {
            m.record_lifetime("p3.2xlarge", life(s * 100, s % 2 == 0)).unwrap();
        }
        let risk = m.get("p3.2xlarge").unwrap();
        assert_eq!(risk.live_lifetimes(), 3);
        assert_eq!(risk.survival().len(), 3);
        m.record_interruption("p3.2xlarge", t(5));

        let text = serde_json::to_string(&m).unwrap();
        assert!(!text.contains("cumulative"), "derived arrays are not stored: {text}");
        let back: HazardModel = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.get("p3.2xlarge").unwrap().survival(), m.get("p3.2xlarge").unwrap().survival());
        let bad = text.replace("\"secs\":300", "\"secs\":-300");
        assert!(serde_json::from_str::<HazardModel>(&bad).is_err());
    }

    #[test]
    fn config_is_validated() {
        for bad in [
            HazardConfig { window: Secs(0), ..HazardConfig::default() },
            HazardConfig { prior_exposure: Secs(-1), ..HazardConfig::default() },
            HazardConfig { smoothing: Secs(-1), ..HazardConfig::default() },
            HazardConfig { fallback_per_hour: f64::NAN, ..HazardConfig::default() },
            HazardConfig { fallback_per_hour: f64::INFINITY, ..HazardConfig::default() },
            HazardConfig { fallback_per_hour: -0.1, ..HazardConfig::default() },
        ] {
            assert!(HazardModel::new(bad).is_err());
        }
        let zero_prior = HazardModel::new(HazardConfig { prior_exposure: Secs(0), ..HazardConfig::default() }).unwrap();
        assert_eq!(zero_prior.assess("x", t(0), Secs(0), 0).weight, 0.0);
        assert_eq!(zero_prior.assess("x", t(0), Secs(0), 2).weight, 1.0);
    }
}
