//! Forecasts of a regular series (hourly spend, GPU demand) with additive
//! Holt-Winters exponential smoothing (SPEC §5), their accuracy as MAPE, and
//! the alarm for actual spend running away from its forecast.
//!
//! Owns: the model and its state, the initialisation, the parameter fit (a
//! bounded Nelder–Mead on the one-step squared error), the rolling
//! one-period-ahead evaluation against naive baselines, and the
//! [`AnomalyDetector`]. Everything is arithmetic on numbers handed in: it must
//! not read a clock, do IO, or know where a series came from or what an
//! alarm leads to; the `Room` feeds it and decides.
//!
//! Position, not time: observation `t` of a series has seasonal phase
//! `t % season`, so callers must hand in gap-free series (see
//! `sources::helios::hourly_means` for one way to fill gaps).

use serde::{Deserialize, Serialize};

use crate::domain::units::Micros;

/// Objective evaluations one [`fit`] may spend: the 5³ grid that seeds the
/// search, then Nelder–Mead with restarts. A fixed budget keeps a fit's cost
/// bounded and its result reproducible.
pub const FIT_MAX_EVALS: u32 = 800;

/// The grid that seeds the search: a smooth but not convex surface has local
/// minima that a single simplex from one start can settle in.
const GRID: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// Nelder–Mead stops (and restarts smaller) once every vertex lies this close
/// to the best in every coordinate: finer than the parameters mean anything.
const SIMPLEX_TOL: f64 = 1e-7;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ForecastError {
    #[error("the season length must be at least 1")]
    ZeroSeason,
    #[error("need at least {needed} values (two full seasons), got {got}")]
    TooShort { needed: usize, got: usize },
    #[error("value {index} is not a finite number")]
    NonFinite { index: usize },
    #[error("{name} = {value} is not in [0, 1]")]
    Parameter { name: &'static str, value: f64 },
    #[error("the state has {got} seasonal terms, the model a season of {season}")]
    SeasonMismatch { season: usize, got: usize },
    #[error("the update would leave a non-finite state")]
    Overflow,
    #[error("{actual} actual values against {forecast} forecasts")]
    LengthMismatch { actual: usize, forecast: usize },
    #[error("no non-zero actual value to measure a percentage error against")]
    NoNonZeroActuals,
    #[error("anomaly threshold {0} is not a positive number")]
    Threshold(f64),
    #[error("a horizon of 0 periods, or a test span shorter than one horizon")]
    EmptyEvaluation,
}

/// Additive Holt-Winters: level `l`, trend `b`, seasonal terms `s` (one per
/// phase, summing to about zero).
///
/// ```text
/// forecast  ŷ(t+k) = l(t) + k·b(t) + s(phase of t+k, as last updated)
/// level     l(t) = α (y(t) − s(t−m)) + (1 − α)(l(t−1) + b(t−1))
/// trend     b(t) = β (l(t) − l(t−1)) + (1 − β) b(t−1)
/// season    s(t) = γ (y(t) − l(t)) + (1 − γ) s(t−m)
/// ```
///
/// At α = 1 the level takes each observation whole, `y − l` is exactly the
/// old seasonal term and γ has no effect: a fit that lands there (the
/// Helios series does) reports whatever γ the search stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HoltWinters {
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    /// Periods per season (24 for hourly data with a daily cycle).
    pub season: usize,
}

/// The model's memory after some observations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HwState {
    pub level: f64,
    pub trend: f64,
    /// Indexed by phase: `seasonal[t % season]` belongs to observation `t`.
    pub seasonal: Vec<f64>,
    /// Observations absorbed so far; the next one is number `seen`.
    pub seen: usize,
}

impl HwState {
    /// Forecasts for the next `horizon` periods (1 to `horizon` ahead).
    pub fn forecast(&self, horizon: usize) -> Vec<f64> {
        let m = self.seasonal.len();
        (1..=horizon)
            .map(|k| {
                let s = if m == 0 { 0.0 } else { self.seasonal[(self.seen + k - 1) % m] };
                self.level + k as f64 * self.trend + s
            })
            .collect()
    }

    /// The forecast for the next period.
    pub fn one_step(&self) -> f64 {
        self.forecast(1).first().copied().unwrap_or(self.level)
    }
}

/// A model fitted to a series, with its state at the series' end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fitted {
    pub model: HoltWinters,
    pub state: HwState,
    /// Sum of squared one-step errors from the second season on.
    pub sse: f64,
    /// How many errors `sse` sums.
    pub errors: usize,
    /// Objective evaluations the fit spent (at most [`FIT_MAX_EVALS`]).
    pub evaluations: u32,
}

impl Fitted {
    pub fn forecast(&self, horizon: usize) -> Vec<f64> {
        self.state.forecast(horizon)
    }

    /// Root mean squared one-step error, in the series' unit.
    pub fn rmse(&self) -> f64 {
        if self.errors == 0 { 0.0 } else { (self.sse / self.errors as f64).sqrt() }
    }
}

fn check_unit(name: &'static str, value: f64) -> Result<(), ForecastError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) { Ok(()) } else { Err(ForecastError::Parameter { name, value }) }
}

fn check_series(series: &[f64], season: usize) -> Result<(), ForecastError> {
    if season == 0 {
        return Err(ForecastError::ZeroSeason);
    }
    if let Some(index) = series.iter().position(|v| !v.is_finite()) {
        return Err(ForecastError::NonFinite { index });
    }
    let needed = season.saturating_mul(2);
    if series.len() < needed {
        return Err(ForecastError::TooShort { needed, got: series.len() });
    }
    Ok(())
}

impl HoltWinters {
    pub fn new(alpha: f64, beta: f64, gamma: f64, season: usize) -> Result<HoltWinters, ForecastError> {
        let model = HoltWinters { alpha, beta, gamma, season };
        model.validate()?;
        Ok(model)
    }

    /// Fields are public (and deserializable), so every entry point checks.
    pub fn validate(&self) -> Result<(), ForecastError> {
        if self.season == 0 {
            return Err(ForecastError::ZeroSeason);
        }
        check_unit("alpha", self.alpha)?;
        check_unit("beta", self.beta)?;
        check_unit("gamma", self.gamma)
    }

    /// The state before observation 0, from the `k = len / season` complete
    /// seasons at the series' start (at least two):
    ///
    /// * trend: the least-squares slope of the `k` season means against the
    ///   season index, divided by the season length;
    /// * seasonal term of phase `i`: the mean over the `k` seasons of the
    ///   value's deviation from that season's trend line (season mean plus
    ///   the slope times the offset from the season's centre), so the terms
    ///   sum to zero;
    /// * level: the trend line's value one period before observation 0.
    ///
    /// Using every complete season rather than the textbook first two
    /// matters: when the fitted α is near 1 the seasonal terms barely move
    /// afterwards (the level absorbs each surprise), so the initial profile
    /// *is* the model's idea of the season, and two days of a noisy series
    /// make a poor one. Also, with β near 0 the initial trend is never
    /// corrected, and an end-to-end slope over two seasons can be steep.
    pub fn initial_state(&self, series: &[f64]) -> Result<HwState, ForecastError> {
        self.validate()?;
        check_series(series, self.season)?;
        let m = self.season;
        let k = series.len() / m;
        let means: Vec<f64> = series.chunks_exact(m).take(k).map(|c| c.iter().sum::<f64>() / m as f64).collect();
        let k_f = k as f64;
        let x_mean = (k_f - 1.0) / 2.0;
        let y_mean = means.iter().sum::<f64>() / k_f;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (j, mean) in means.iter().enumerate() {
            let dx = j as f64 - x_mean;
            sxy += dx * (mean - y_mean);
            sxx += dx * dx;
        }
        // k ≥ 2, so sxx > 0.
        let trend = sxy / sxx / m as f64;
        let centre = (m as f64 - 1.0) / 2.0;
        let mut seasonal = vec![0.0; m];
        for (j, chunk) in series.chunks_exact(m).take(k).enumerate() {
            for (i, y) in chunk.iter().enumerate() {
                seasonal[i] += (y - means[j] - trend * (i as f64 - centre)) / k_f;
            }
        }
        // The line through the first season's mean at its centre, one period
        // before t = 0, so that level + trend forecasts t = 0.
        let level = means[0] - trend * (centre + 1.0);
        if !(level.is_finite() && trend.is_finite() && seasonal.iter().all(|s| s.is_finite())) {
            return Err(ForecastError::Overflow);
        }
        Ok(HwState { level, trend, seasonal, seen: 0 })
    }

    /// Absorbs observation `y` and returns its one-step error (`y` minus
    /// what the state forecast for it). On error the state is unchanged.
    pub fn step(&self, state: &mut HwState, y: f64) -> Result<f64, ForecastError> {
        self.validate()?;
        if state.seasonal.len() != self.season {
            return Err(ForecastError::SeasonMismatch { season: self.season, got: state.seasonal.len() });
        }
        if !y.is_finite() {
            return Err(ForecastError::NonFinite { index: state.seen });
        }
        let phase = state.seen % self.season;
        let s_old = state.seasonal[phase];
        let error = y - (state.level + state.trend + s_old);
        let level = self.alpha * (y - s_old) + (1.0 - self.alpha) * (state.level + state.trend);
        let trend = self.beta * (level - state.level) + (1.0 - self.beta) * state.trend;
        let s_new = self.gamma * (y - level) + (1.0 - self.gamma) * s_old;
        if !(level.is_finite() && trend.is_finite() && s_new.is_finite() && error.is_finite()) {
            return Err(ForecastError::Overflow);
        }
        state.level = level;
        state.trend = trend;
        state.seasonal[phase] = s_new;
        state.seen += 1;
        Ok(error)
    }

    /// Initialises from `series` and runs through all of it. Returns the
    /// final state and the squared one-step errors summed from the second
    /// season on (the first season is where the level was read from, so its
    /// errors say little about the parameters).
    pub fn filter(&self, series: &[f64]) -> Result<(HwState, f64, usize), ForecastError> {
        let mut state = self.initial_state(series)?;
        let (mut sse, mut errors) = (0.0, 0usize);
        for (t, &y) in series.iter().enumerate() {
            let e = self.step(&mut state, y)?;
            if t >= self.season {
                sse += e * e;
                errors += 1;
            }
        }
        Ok((state, sse, errors))
    }

    /// Runs through `series` and forecasts the `horizon` periods after it.
    pub fn forecast(&self, series: &[f64], horizon: usize) -> Result<Vec<f64>, ForecastError> {
        Ok(self.filter(series)?.0.forecast(horizon))
    }
}

/// Fits α, β, γ ∈ [0, 1] to `series` by minimising the sum of squared
/// one-step errors (see [`HoltWinters::filter`]).
///
/// The search: the best point of a 5×5×5 grid seeds a Nelder–Mead simplex
/// whose trial points are clamped into the unit cube (a projection: optima
/// on a face or corner, common here, are reached rather than stepped over);
/// when the simplex has collapsed it restarts around the best point with a
/// step four times smaller, until [`FIT_MAX_EVALS`] evaluations are spent
/// or a restart gains nothing. No randomness, ties go to the earlier point,
/// so the same series always gives the same parameters.
pub fn fit(series: &[f64], season: usize) -> Result<Fitted, ForecastError> {
    check_series(series, season)?;
    let objective = |p: [f64; 3]| -> f64 {
        let model = HoltWinters { alpha: p[0], beta: p[1], gamma: p[2], season };
        match model.filter(series) {
            Ok((_, sse, _)) if sse.is_finite() => sse,
            // An overflowing parameter set is simply the worst possible one.
            _ => f64::INFINITY,
        }
    };
    let mut search = Search { objective, evaluations: 0, budget: FIT_MAX_EVALS };
    let mut best = ([1.0, 0.0, 0.0], f64::INFINITY);
    for &a in &GRID {
        for &b in &GRID {
            for &g in &GRID {
                let p = [a, b, g];
                let f = search.eval(p);
                if f < best.1 {
                    best = (p, f);
                }
            }
        }
    }
    let mut step = 0.2;
    while search.left() >= 8 {
        let (p, f) = search.nelder_mead(best.0, best.1, step);
        let gained = f < best.1 && best.1 - f > 1e-12 * best.1.abs().max(1.0);
        if f < best.1 {
            best = (p, f);
        }
        if !gained && step < 0.2 {
            break;
        }
        step /= 4.0;
        if step < SIMPLEX_TOL {
            break;
        }
    }
    let model = HoltWinters { alpha: best.0[0], beta: best.0[1], gamma: best.0[2], season };
    let (state, sse, errors) = model.filter(series)?;
    Ok(Fitted { model, state, sse, errors, evaluations: search.evaluations })
}

struct Search<F: Fn([f64; 3]) -> f64> {
    objective: F,
    evaluations: u32,
    budget: u32,
}

fn clamp_unit(p: [f64; 3]) -> [f64; 3] {
    p.map(|v| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) })
}

fn toward(from: [f64; 3], to: [f64; 3], t: f64) -> [f64; 3] {
    clamp_unit([from[0] + t * (to[0] - from[0]), from[1] + t * (to[1] - from[1]), from[2] + t * (to[2] - from[2])])
}

impl<F: Fn([f64; 3]) -> f64> Search<F> {
    fn left(&self) -> u32 {
        self.budget.saturating_sub(self.evaluations)
    }

    fn eval(&mut self, p: [f64; 3]) -> f64 {
        self.evaluations += 1;
        let f = (self.objective)(p);
        if f.is_nan() { f64::INFINITY } else { f }
    }

    /// One Nelder–Mead run (reflection 1, expansion 2, contraction ½,
    /// shrink ½) from `start`, vertices `step` away along each axis (inward
    /// where outward would leave the cube). Returns the best vertex.
    fn nelder_mead(&mut self, start: [f64; 3], f_start: f64, step: f64) -> ([f64; 3], f64) {
        let mut simplex: Vec<([f64; 3], f64)> = vec![(start, f_start)];
        for axis in 0..3 {
            let mut p = start;
            p[axis] = if p[axis] + step <= 1.0 { p[axis] + step } else { p[axis] - step };
            let p = clamp_unit(p);
            let f = self.eval(p);
            simplex.push((p, f));
        }
        // Each iteration needs at most 2 evaluations, a shrink 3 more.
        while self.left() >= 5 {
            // Stable sort: ties keep their order, so the run is reproducible.
            simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
            let best = simplex[0];
            let spread = simplex[1..].iter().flat_map(|(p, _)| (0..3).map(move |i| (p[i] - best.0[i]).abs())).fold(0.0, f64::max);
            if spread < SIMPLEX_TOL {
                break;
            }
            let worst = simplex[3];
            let second_worst = simplex[2].1;
            let mut centroid = [0.0; 3];
            for (p, _) in &simplex[..3] {
                for (c, v) in centroid.iter_mut().zip(p) {
                    *c += v / 3.0;
                }
            }
            let reflected = toward(centroid, worst.0, -1.0);
            let f_r = self.eval(reflected);
            if f_r < best.1 {
                let expanded = toward(centroid, worst.0, -2.0);
                let f_e = self.eval(expanded);
                simplex[3] = if f_e < f_r { (expanded, f_e) } else { (reflected, f_r) };
            } else if f_r < second_worst {
                simplex[3] = (reflected, f_r);
            } else {
                let contracted = if f_r < worst.1 { toward(centroid, reflected, 0.5) } else { toward(centroid, worst.0, 0.5) };
                let f_c = self.eval(contracted);
                if f_c < worst.1.min(f_r) {
                    simplex[3] = (contracted, f_c);
                } else {
                    for vertex in simplex.iter_mut().skip(1) {
                        let p = toward(best.0, vertex.0, 0.5);
                        *vertex = (p, self.eval(p));
                    }
                }
            }
        }
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        simplex[0]
    }
}

fn check_pair(actual: &[f64], forecast: &[f64]) -> Result<(), ForecastError> {
    if actual.len() != forecast.len() {
        return Err(ForecastError::LengthMismatch { actual: actual.len(), forecast: forecast.len() });
    }
    if let Some(index) = actual.iter().chain(forecast).position(|v| !v.is_finite()) {
        return Err(ForecastError::NonFinite { index: index % actual.len().max(1) });
    }
    Ok(())
}

/// Mean absolute percentage error, in percent: `100/n Σ |a − f| / |a|`.
/// Periods whose actual is zero are skipped (their percentage error is
/// undefined; an idle hour would otherwise make the mean infinite), so `n`
/// counts only the others; if none is left the result is an error.
pub fn mape(actual: &[f64], forecast: &[f64]) -> Result<f64, ForecastError> {
    check_pair(actual, forecast)?;
    let (sum, n) = actual.iter().zip(forecast).filter(|(a, _)| **a != 0.0).fold((0.0, 0usize), |(s, n), (a, f)| (s + ((a - f) / a).abs(), n + 1));
    if n == 0 { Err(ForecastError::NoNonZeroActuals) } else { Ok(100.0 * sum / n as f64) }
}

/// Symmetric MAPE, in percent (0 to 200): `100/n Σ 2|a − f| / (|a| + |f|)`.
/// Bounded where MAPE is not, and defined for a zero actual unless the
/// forecast is zero too; such exact hits are skipped.
pub fn smape(actual: &[f64], forecast: &[f64]) -> Result<f64, ForecastError> {
    check_pair(actual, forecast)?;
    let (sum, n) = actual
        .iter()
        .zip(forecast)
        .filter(|(a, f)| a.abs() + f.abs() > 0.0)
        .fold((0.0, 0usize), |(s, n), (a, f)| (s + 2.0 * (a - f).abs() / (a.abs() + f.abs()), n + 1));
    if n == 0 { Err(ForecastError::NoNonZeroActuals) } else { Ok(100.0 * sum / n as f64) }
}

/// Whether each evaluation window refits the parameters on all data before
/// it, or reuses those fitted once on the training span. Either way the
/// state is rebuilt from everything before the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refit {
    /// Refit before every window: what a forecaster re-run daily would do.
    EveryWindow,
    /// Fit once on the training span.
    Once,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollingConfig {
    pub season: usize,
    /// Periods forecast from each window's start (24: one day ahead).
    pub horizon: usize,
    /// Length of the training span; windows start here, `horizon` apart.
    pub train_len: usize,
    pub refit: Refit,
}

/// One window of the rolling evaluation. A MAPE is `None` when every actual
/// in the window is zero (an outage).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowScore {
    /// Index of the window's first period.
    pub start: usize,
    pub model: HoltWinters,
    pub forecast: Vec<f64>,
    pub model_mape: Option<f64>,
    /// Same phase one season earlier.
    pub seasonal_naive_mape: Option<f64>,
    /// The last value before the window, held flat.
    pub persistence_mape: Option<f64>,
}

/// Scores pooled over every forecast period of every window (periods with a
/// zero actual skipped, as in [`mape`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RollingReport {
    /// The parameters fitted on the training span.
    pub trained: Fitted,
    pub windows: Vec<WindowScore>,
    pub model_mape: f64,
    pub seasonal_naive_mape: f64,
    pub persistence_mape: f64,
    pub model_smape: f64,
    pub seasonal_naive_smape: f64,
}

/// Rolling-origin evaluation: for each window `[start, start + horizon)`
/// after the training span, forecast it from the data before `start` and
/// score against the actuals, next to two baselines that need no fitting:
/// seasonal-naive (`y[start − season + k mod season]`, "same hour
/// yesterday") and persistence (`y[start − 1]` held flat). Windows that do
/// not fit whole before the series' end are left out.
pub fn rolling_evaluation(series: &[f64], config: &RollingConfig) -> Result<RollingReport, ForecastError> {
    let RollingConfig { season, horizon, train_len, refit } = *config;
    check_series(series, season)?;
    if horizon == 0 || train_len.saturating_add(horizon) > series.len() {
        return Err(ForecastError::EmptyEvaluation);
    }
    let train = series.get(..train_len).unwrap_or(series);
    let trained = fit(train, season)?;
    let mut windows = Vec::new();
    let (mut actual_all, mut model_all, mut naive_all, mut persist_all) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut start = train_len;
    while start + horizon <= series.len() {
        let history = &series[..start];
        let actual = &series[start..start + horizon];
        let model = match refit {
            Refit::EveryWindow => fit(history, season)?.model,
            Refit::Once => trained.model,
        };
        let forecast = model.forecast(history, horizon)?;
        let naive: Vec<f64> = (0..horizon).map(|k| series[start - season + k % season]).collect();
        let persistence = vec![series[start - 1]; horizon];
        let score = |f: &[f64]| mape(actual, f).ok();
        windows.push(WindowScore {
            start,
            model,
            model_mape: score(&forecast),
            seasonal_naive_mape: score(&naive),
            persistence_mape: score(&persistence),
            forecast: forecast.clone(),
        });
        actual_all.extend_from_slice(actual);
        model_all.extend(forecast);
        naive_all.extend(naive);
        persist_all.extend(persistence);
        start += horizon;
    }
    Ok(RollingReport {
        trained,
        windows,
        model_mape: mape(&actual_all, &model_all)?,
        seasonal_naive_mape: mape(&actual_all, &naive_all)?,
        persistence_mape: mape(&actual_all, &persist_all)?,
        model_smape: smape(&actual_all, &model_all)?,
        seasonal_naive_smape: smape(&actual_all, &naive_all)?,
    })
}

/// Fits the model to an hourly spend series and forecasts `horizon` hours.
/// Money goes through f64 (exact below 2⁵³ micros, about $9 billion), and
/// comes back rounded to the micro and floored at zero: a trend may
/// extrapolate below zero, spend cannot.
pub fn forecast_spend(hourly: &[Micros], season: usize, horizon: usize) -> Result<Vec<Micros>, ForecastError> {
    let series: Vec<f64> = hourly.iter().map(|m| m.0 as f64).collect();
    let fitted = fit(&series, season)?;
    // `as` saturates at i64's bounds, which no real forecast reaches.
    Ok(fitted.forecast(horizon).into_iter().map(|v| Micros(v.max(0.0).round() as i64)).collect())
}

/// What one period did to the alarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Alarm {
    /// No change. `run` counts the consecutive periods outside the
    /// threshold up to this one: 0 when inside, and it keeps growing past
    /// the trigger while a raised alarm stays out.
    Quiet { run: u32 },
    /// The run just reached the required length: the alarm goes up.
    Raised { run: u32 },
    /// Back inside after a raised alarm; `run` is how long it was out.
    Cleared { run: u32 },
}

/// Raises when actual deviates from forecast by more than `threshold`
/// (relative to the forecast) for `periods` consecutive periods; clears on
/// the first period back inside. Lives in the `Room`, fed once per period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnomalyDetector {
    threshold: f64,
    periods: u32,
    run: u32,
    raised: bool,
}

impl AnomalyDetector {
    /// `threshold` is a fraction (0.25: 25% off the forecast); `periods` of
    /// 0 is taken as 1.
    pub fn new(threshold: f64, periods: u32) -> Result<AnomalyDetector, ForecastError> {
        if !(threshold.is_finite() && threshold > 0.0) {
            return Err(ForecastError::Threshold(threshold));
        }
        Ok(AnomalyDetector { threshold, periods: periods.max(1), run: 0, raised: false })
    }

    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    pub fn periods(&self) -> u32 {
        self.periods
    }

    pub fn is_raised(&self) -> bool {
        self.raised
    }

    /// Consecutive periods outside the threshold, up to the last one fed.
    pub fn run(&self) -> u32 {
        self.run
    }

    /// `|actual − forecast| / |forecast|`. A forecast of zero makes any
    /// non-zero actual infinitely far off (spending against a forecast of
    /// nothing is exactly what the alarm is for) and a zero actual on target.
    pub fn relative_deviation(actual: f64, forecast: f64) -> f64 {
        let diff = (actual - forecast).abs();
        if forecast == 0.0 { if diff == 0.0 { 0.0 } else { f64::INFINITY } } else { diff / forecast.abs() }
    }

    /// Feeds one period. A non-finite number is refused and leaves the
    /// detector as it was (a missing reading neither extends nor ends a run).
    pub fn observe(&mut self, actual: f64, forecast: f64) -> Result<Alarm, ForecastError> {
        if !actual.is_finite() {
            return Err(ForecastError::NonFinite { index: 0 });
        }
        if !forecast.is_finite() {
            return Err(ForecastError::NonFinite { index: 1 });
        }
        let outside = Self::relative_deviation(actual, forecast) > self.threshold;
        if outside {
            self.run = self.run.saturating_add(1);
            if !self.raised && self.run >= self.periods.max(1) {
                self.raised = true;
                return Ok(Alarm::Raised { run: self.run });
            }
            return Ok(Alarm::Quiet { run: self.run });
        }
        let run = std::mem::take(&mut self.run);
        if self.raised {
            self.raised = false;
            return Ok(Alarm::Cleared { run });
        }
        Ok(Alarm::Quiet { run: 0 })
    }

    /// [`observe`](Self::observe) for spend.
    pub fn observe_spend(&mut self, actual: Micros, forecast: Micros) -> Result<Alarm, ForecastError> {
        self.observe(actual.0 as f64, forecast.0 as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Level 100, trend 0.5 per period, a daily-like cycle of amplitude 10,
    /// plus a fixed irregular wiggle standing in for noise.
    fn synthetic(n: usize, season: usize, noise: f64) -> Vec<f64> {
        (0..n)
            .map(|t| {
                let phase = (t % season) as f64 / season as f64 * std::f64::consts::TAU;
                let wiggle = ((t as f64) * 12.9898).sin() * 0.5 + ((t as f64) * 78.233).cos() * 0.5;
                100.0 + 0.5 * t as f64 + 10.0 * phase.sin() + noise * wiggle
            })
            .collect()
    }

    #[test]
    fn a_noiseless_trend_and_season_is_forecast_almost_exactly() {
        let season = 12;
        let y = synthetic(20 * season + season, season, 0.0);
        let (train, test) = y.split_at(20 * season);
        let fitted = fit(train, season).unwrap();
        let f = fitted.forecast(season);
        let err = mape(test, &f).unwrap();
        assert!(err < 0.5, "MAPE {err}% with {:?}", fitted.model);
        assert!(fitted.evaluations <= FIT_MAX_EVALS);
        // The initialisation alone already knows the slope.
        let s0 = fitted.model.initial_state(train).unwrap();
        assert!((s0.trend - 0.5).abs() < 1e-9, "{}", s0.trend);
        assert!(s0.seasonal.iter().sum::<f64>().abs() < 1e-9);
    }

    #[test]
    fn fitting_beats_the_grid_that_seeds_it_and_is_deterministic() {
        let season = 8;
        let y = synthetic(30 * season, season, 4.0);
        let fitted = fit(&y, season).unwrap();
        let mut grid_best = f64::INFINITY;
        for a in GRID {
            for b in GRID {
                for g in GRID {
                    let sse = HoltWinters::new(a, b, g, season).unwrap().filter(&y).unwrap().1;
                    grid_best = grid_best.min(sse);
                }
            }
        }
        assert!(fitted.sse <= grid_best, "{} vs grid {grid_best}", fitted.sse);
        // A finer grid around the result finds nothing meaningfully better.
        let p = [fitted.model.alpha, fitted.model.beta, fitted.model.gamma];
        for d in [[0.01, 0.0, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.01]] {
            for sign in [-1.0, 1.0] {
                let q = clamp_unit([p[0] + sign * d[0], p[1] + sign * d[1], p[2] + sign * d[2]]);
                let sse = HoltWinters::new(q[0], q[1], q[2], season).unwrap().filter(&y).unwrap().1;
                assert!(sse >= fitted.sse * (1.0 - 1e-6), "{q:?}: {sse} < {}", fitted.sse);
            }
        }
        assert_eq!(fit(&y, season).unwrap(), fitted);
    }

    #[test]
    fn one_step_and_h_step_forecasts_agree_with_the_equations() {
        let model = HoltWinters::new(0.5, 0.1, 0.2, 4).unwrap();
        let mut state = HwState { level: 10.0, trend: 1.0, seasonal: vec![1.0, -1.0, 2.0, -2.0], seen: 0 };
        assert_eq!(state.forecast(5), vec![12.0, 11.0, 15.0, 12.0, 16.0]);
        assert_eq!(state.one_step(), 12.0);
        let e = model.step(&mut state, 14.0).unwrap();
        assert_eq!(e, 2.0);
        // l = .5(14 − 1) + .5(11) = 12; b = .1(2) + .9(1) = 1.1; s = .2(2) + .8(1) = 1.2.
        assert!((state.level - 12.0).abs() < 1e-12);
        assert!((state.trend - 1.1).abs() < 1e-12);
        assert!((state.seasonal[0] - 1.2).abs() < 1e-12);
        assert_eq!(state.seen, 1);
        assert!((state.one_step() - (13.1 - 1.0)).abs() < 1e-12);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let y = synthetic(48, 12, 1.0);
        let mut bad = y.clone();
        bad[7] = f64::NAN;
        assert_eq!(fit(&bad, 12).unwrap_err(), ForecastError::NonFinite { index: 7 });
        bad[7] = f64::INFINITY;
        assert_eq!(HoltWinters::new(0.5, 0.5, 0.5, 12).unwrap().filter(&bad).unwrap_err(), ForecastError::NonFinite { index: 7 });
        assert_eq!(fit(&y[..23], 12).unwrap_err(), ForecastError::TooShort { needed: 24, got: 23 });
        assert_eq!(fit(&y, 0).unwrap_err(), ForecastError::ZeroSeason);
        assert!(matches!(HoltWinters::new(1.5, 0.0, 0.0, 12), Err(ForecastError::Parameter { name: "alpha", .. })));
        assert!(matches!(HoltWinters::new(0.1, f64::NAN, 0.0, 12), Err(ForecastError::Parameter { name: "beta", .. })));
        let model = HoltWinters { alpha: 0.5, beta: 0.5, gamma: -0.1, season: 12 };
        assert!(matches!(model.forecast(&y, 3), Err(ForecastError::Parameter { name: "gamma", .. })));
        let model = HoltWinters::new(0.5, 0.5, 0.5, 3).unwrap();
        let mut state = model.initial_state(&y).unwrap();
        let before = state.clone();
        assert_eq!(model.step(&mut state, f64::NAN).unwrap_err(), ForecastError::NonFinite { index: 0 });
        assert_eq!(state, before);
        let mut short = HwState { seasonal: vec![0.0; 2], ..before };
        assert!(matches!(model.step(&mut short, 1.0), Err(ForecastError::SeasonMismatch { .. })));
        // Huge but finite values overflow in the sums: refused, not NaN.
        assert_eq!(fit(&[1e308; 48], 12).unwrap_err(), ForecastError::Overflow);
    }

    #[test]
    fn mape_skips_zero_actuals_and_smape_is_bounded() {
        assert!((mape(&[100.0, 0.0, 50.0], &[110.0, 5.0, 40.0]).unwrap() - 15.0).abs() < 1e-12);
        assert_eq!(mape(&[0.0, 0.0], &[1.0, 2.0]).unwrap_err(), ForecastError::NoNonZeroActuals);
        assert!(matches!(mape(&[1.0], &[1.0, 2.0]), Err(ForecastError::LengthMismatch { .. })));
        assert!(matches!(mape(&[1.0, f64::NAN], &[1.0, 2.0]), Err(ForecastError::NonFinite { index: 1 })));
        assert_eq!(smape(&[0.0, 100.0], &[10.0, 100.0]).unwrap(), 100.0);
        assert_eq!(smape(&[0.0], &[0.0]).unwrap_err(), ForecastError::NoNonZeroActuals);
    }

    #[test]
    fn rolling_evaluation_scores_every_whole_window() {
        let season = 6;
        let y = synthetic(14 * season + 4, season, 2.0);
        let config = RollingConfig { season, horizon: season, train_len: 10 * season, refit: Refit::EveryWindow };
        let report = rolling_evaluation(&y, &config).unwrap();
        // 4 whole windows; the 4 periods after them are left out.
        assert_eq!(report.windows.iter().map(|w| w.start).collect::<Vec<_>>(), vec![60, 66, 72, 78]);
        assert!(report.model_mape.is_finite());
        // With a steady trend, naive is behind by a season's climb, the model is not.
        assert!(report.model_mape < report.seasonal_naive_mape, "{} vs {}", report.model_mape, report.seasonal_naive_mape);
        let once = rolling_evaluation(&y, &RollingConfig { refit: Refit::Once, ..config }).unwrap();
        assert!(once.windows.iter().all(|w| w.model == once.trained.model));
        let too_long = RollingConfig { train_len: y.len() - 3, ..config };
        assert_eq!(rolling_evaluation(&y, &too_long).unwrap_err(), ForecastError::EmptyEvaluation);
    }

    #[test]
    fn spend_forecasts_are_micros_and_never_negative() {
        // $2/h at night, $5/h by day, for a week: season 24.
        let hourly: Vec<Micros> = (0..24 * 7).map(|h| Micros(if (8..20).contains(&(h % 24)) { 5_000_000 } else { 2_000_000 })).collect();
        let f = forecast_spend(&hourly, 24, 24).unwrap();
        assert_eq!(f.len(), 24);
        assert!((f[10].0 - 5_000_000).abs() < 50_000, "{:?}", f[10]);
        assert!((f[2].0 - 2_000_000).abs() < 50_000, "{:?}", f[2]);
        // A steep fall extrapolates below zero; spend stops at zero.
        let falling: Vec<Micros> = (0..48).map(|h| Micros(10_000_000 - 200_000 * h)).collect();
        let f = forecast_spend(&falling, 4, 100).unwrap();
        assert!(f.iter().all(|m| m.0 >= 0));
        assert_eq!(f[99], Micros(0));
    }

    #[test]
    fn the_alarm_needs_n_consecutive_periods_and_clears_when_back() {
        let mut d = AnomalyDetector::new(0.25, 3).unwrap();
        let feed = |d: &mut AnomalyDetector, a: f64| d.observe(a, 100.0).unwrap();
        assert_eq!(feed(&mut d, 120.0), Alarm::Quiet { run: 0 });
        assert_eq!(feed(&mut d, 130.0), Alarm::Quiet { run: 1 });
        assert_eq!(feed(&mut d, 60.0), Alarm::Quiet { run: 2 });
        // Broken before N: nothing raised.
        assert_eq!(feed(&mut d, 100.0), Alarm::Quiet { run: 0 });
        for run in 1..=2 {
            assert_eq!(feed(&mut d, 150.0), Alarm::Quiet { run });
        }
        assert_eq!(feed(&mut d, 150.0), Alarm::Raised { run: 3 });
        assert!(d.is_raised());
        assert_eq!(feed(&mut d, 150.0), Alarm::Quiet { run: 4 });
        // A refused reading changes nothing.
        assert!(d.observe(f64::NAN, 100.0).is_err());
        assert_eq!(d.run(), 4);
        assert_eq!(feed(&mut d, 110.0), Alarm::Cleared { run: 4 });
        assert!(!d.is_raised());
        assert_eq!(feed(&mut d, 100.0), Alarm::Quiet { run: 0 });
        // Spend against a forecast of nothing is out; nothing against nothing is not.
        assert_eq!(d.observe_spend(Micros(0), Micros(0)).unwrap(), Alarm::Quiet { run: 0 });
        assert_eq!(d.observe_spend(Micros(1), Micros(0)).unwrap(), Alarm::Quiet { run: 1 });
        assert!(AnomalyDetector::new(0.0, 3).is_err());
        assert!(AnomalyDetector::new(f64::NAN, 3).is_err());
        assert_eq!(AnomalyDetector::new(0.5, 0).unwrap().periods(), 1);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<AnomalyDetector>(&json).unwrap(), d);
    }
}
