//! Statistics of a spot price history: time-weighted mean, least-squares
//! trend with a projection, and volatility, per pool and per instance type.
//!
//! A history is a step function `&[(At, MicrosPerHour)]`, oldest first, each
//! price holding until the next point (as `Pool::history` and
//! `sources::price_history::PriceSeries` keep them). Nothing is known before
//! the first point, so every statistic covers only the part of its window the
//! history reaches. This module computes; it never stores prices or bids.
//! Points out of order are not refused (that is the parsers' job) but give
//! meaningless, finite numbers, never a panic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::ids::PoolKey;
use crate::domain::spot::Trend;
use crate::domain::units::{At, MicrosPerHour, Secs};

/// A relative slope (per hour) within ± this is `Trend::Flat`: 0.5 % per
/// hour, the same dead band `Market::trend` puts on a change.
pub const DEFAULT_DEAD_BAND: f64 = 0.005;

const MS_PER_HOUR: f64 = 3_600_000.0;

/// One constant stretch of the step function inside a window, in
/// milliseconds from the window's start.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Piece {
    start: i64,
    stop: i64,
    price: i64,
}

impl Piece {
    fn ms(self) -> i64 {
        self.stop - self.start
    }
}

fn ms_between(from: At, to: At) -> i64 {
    (to - from).num_milliseconds()
}

/// The stretches of `steps` inside `[from, to]`, clipped to it.
fn pieces(steps: &[(At, MicrosPerHour)], from: At, to: At) -> Vec<Piece> {
    let mut out = Vec::new();
    if to <= from {
        return out;
    }
    let end = ms_between(from, to);
    let first = steps.partition_point(|(t, _)| *t <= from).saturating_sub(1);
    let tail = steps.get(first..).unwrap_or(&[]);
    for (i, (at, price)) in tail.iter().enumerate() {
        let start = ms_between(from, *at).max(0);
        if start >= end {
            break;
        }
        let stop = tail.get(i + 1).map_or(end, |(next, _)| ms_between(from, *next).min(end));
        if stop > start {
            out.push(Piece { start, stop, price: price.0 });
        }
    }
    out
}

/// The price in force at `at`, if the history has started by then.
pub fn price_at(steps: &[(At, MicrosPerHour)], at: At) -> Option<MicrosPerHour> {
    let i = steps.partition_point(|(t, _)| *t <= at);
    i.checked_sub(1).and_then(|i| steps.get(i)).map(|(_, p)| *p)
}

/// Time-weighted mean price over `[from, to]` (the part the history covers),
/// computed exactly in integers and rounded half up. At a single instant
/// (`from == to`) it is the price then. `None` if the history covers none of it.
pub fn time_weighted_mean(steps: &[(At, MicrosPerHour)], from: At, to: At) -> Option<MicrosPerHour> {
    if from == to {
        return price_at(steps, from);
    }
    let pieces = pieces(steps, from, to);
    let den: i128 = pieces.iter().map(|p| i128::from(p.ms())).sum();
    if den <= 0 {
        return None;
    }
    let num: i128 = pieces.iter().map(|p| i128::from(p.price) * i128::from(p.ms())).sum();
    let (q, r) = (num.div_euclid(den), num.rem_euclid(den));
    let rounded = if 2 * r >= den { q + 1 } else { q };
    Some(MicrosPerHour(i64::try_from(rounded).unwrap_or(i64::MAX)))
}

fn mean_of(pieces: &[Piece]) -> Option<(f64, i64)> {
    let total: i64 = pieces.iter().map(|p| p.ms()).fold(0, i64::saturating_add);
    (total > 0).then(|| (pieces.iter().map(|p| p.price as f64 * p.ms() as f64).sum::<f64>() / total as f64, total))
}

/// Where the price is heading over a short window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PriceTrend {
    /// Least-squares slope, in micro-dollars per hour, per hour.
    pub slope: f64,
    /// Time-weighted mean over the covered window, micro-dollars per hour.
    pub mean: f64,
    /// `slope / mean`: the fraction of the price gained per hour (0 when the mean is 0).
    pub relative: f64,
    /// The sign of `relative` outside the dead band.
    pub direction: Trend,
    /// The price in force at the window's end.
    pub current: MicrosPerHour,
    /// How much of the span the history covers.
    pub covered: Secs,
}

impl PriceTrend {
    /// The price `horizon` ahead by linear extrapolation from the current
    /// price, floored at 0. From the current price rather than the fitted
    /// line's value at `now`, because after a fresh step the line lags below
    /// the price actually paid, and a bid must clear that one.
    pub fn projected(&self, horizon: Secs) -> MicrosPerHour {
        let hours = horizon.0.max(0) as f64 / 3600.0;
        let value = (self.current.0 as f64 + self.slope * hours).max(0.0);
        // `as` saturates at i64::MAX, and the value is neither NaN nor negative.
        MicrosPerHour(value.round() as i64)
    }
}

/// Least-squares line through the step function over `[now − span, now]`.
///
/// The fit is continuous and exact, not sampled: with `p(t)` the step
/// function over the covered interval of length `L` and midpoint `c`,
/// `slope = ∫(t − c) p(t) dt / ∫(t − c)² dt`, and each constant piece
/// `[s, e]` contributes `p·(e − s)(e + s − 2c)/2` to the numerator, while the
/// denominator is `L³/12`. So a price re-quoted often weighs no more than one
/// quoted once, and the answer depends only on the prices and how long they held.
/// `dead_band` is a relative slope per hour (see `DEFAULT_DEAD_BAND`); a
/// negative or non-finite one counts as 0. `None` without a covered stretch.
pub fn trend(steps: &[(At, MicrosPerHour)], now: At, span: Secs, dead_band: f64) -> Option<PriceTrend> {
    if span.0 <= 0 {
        return None;
    }
    let from = now.checked_sub_signed(span.delta()).unwrap_or(At::MIN_UTC);
    let pieces = pieces(steps, from, now);
    let (mean, _) = mean_of(&pieces)?;
    let start = pieces.first()?.start as f64 / MS_PER_HOUR;
    let stop = pieces.last()?.stop as f64 / MS_PER_HOUR;
    let length = stop - start;
    if length <= 0.0 {
        return None;
    }
    let mid = (start + stop) / 2.0;
    let moment: f64 = pieces
        .iter()
        .map(|p| {
            let (s, e) = (p.start as f64 / MS_PER_HOUR, p.stop as f64 / MS_PER_HOUR);
            p.price as f64 * (e - s) * (e + s - 2.0 * mid) / 2.0
        })
        .sum();
    let slope = moment / (length.powi(3) / 12.0);
    let relative = if mean > 0.0 { slope / mean } else { 0.0 };
    let band = if dead_band.is_finite() { dead_band.abs() } else { 0.0 };
    let direction = if relative > band {
        Trend::Rising
    } else if relative < -band {
        Trend::Falling
    } else {
        Trend::Flat
    };
    let current = MicrosPerHour(pieces.last()?.price);
    Some(PriceTrend { slope, mean, relative, direction, current, covered: Secs((length * 3600.0).round() as i64) })
}

/// How much a price swings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Volatility {
    /// Pools that contributed (covered some time).
    pub pools: usize,
    /// Time covered, summed over pools.
    pub covered: Secs,
    /// Time-weighted mean price, micro-dollars per hour.
    pub mean: f64,
    /// Time-weighted standard deviation over the mean. Across zones it is the
    /// root of the time-weighted mean of each pool's squared CV, so a zone
    /// that is steadily dearer than another adds nothing: only movement counts.
    pub cv: f64,
    /// Sample standard deviation of `ln(p₂/p₁)` over consecutive changes
    /// (pooled across zones); 0 with fewer than two changes. Per change, not
    /// per hour: a flat pool adds time to `cv` but no returns here.
    pub log_return_sd: f64,
    /// Price changes inside the window(s).
    pub changes: usize,
    pub min: MicrosPerHour,
    pub max: MicrosPerHour,
}

/// Returns of changes to or from a zero price are skipped (no logarithm).
fn log_returns(pieces: &[Piece]) -> Vec<f64> {
    pieces
        .windows(2)
        .filter_map(|w| match w {
            [a, b] if a.price > 0 && b.price > 0 && a.price != b.price => Some((b.price as f64 / a.price as f64).ln()),
            _ => None,
        })
        .collect()
}

fn sample_sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

fn pool_stats(steps: &[(At, MicrosPerHour)], from: At, to: At) -> Option<(Volatility, Vec<f64>)> {
    let pieces = pieces(steps, from, to);
    let (mean, total) = mean_of(&pieces)?;
    let var = pieces.iter().map(|p| (p.price as f64 - mean).powi(2) * p.ms() as f64).sum::<f64>() / total as f64;
    let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
    let returns = log_returns(&pieces);
    let volatility = Volatility {
        pools: 1,
        covered: Secs(total / 1000),
        mean,
        cv,
        log_return_sd: sample_sd(&returns),
        changes: returns.len(),
        min: MicrosPerHour(pieces.iter().map(|p| p.price).min().unwrap_or(0)),
        max: MicrosPerHour(pieces.iter().map(|p| p.price).max().unwrap_or(0)),
    };
    Some((volatility, returns))
}

/// Volatility of one pool over `[from, to]`; `None` if the history covers none of it.
pub fn volatility(steps: &[(At, MicrosPerHour)], from: At, to: At) -> Option<Volatility> {
    pool_stats(steps, from, to).map(|(v, _)| v)
}

/// Volatility per instance type, over all its zones.
///
/// Every pool runs from its first point to the newest point of the whole map
/// (the dumps' common end), holding its last price until then: a zone whose
/// price never moved is real and is included, with its time at CV 0. A pool
/// whose only point is that newest one covers no time and is left out.
pub fn volatility_by_type(pools: &BTreeMap<PoolKey, Vec<(At, MicrosPerHour)>>) -> BTreeMap<String, Volatility> {
    let Some(end) = pools.values().filter_map(|s| s.last().map(|(t, _)| *t)).max() else {
        return BTreeMap::new();
    };
    let mut by_type: BTreeMap<String, Vec<(Volatility, Vec<f64>)>> = BTreeMap::new();
    for (key, steps) in pools {
        let Some((first, _)) = steps.first() else {
            continue;
        };
        if let Some(stats) = pool_stats(steps, *first, end) {
            by_type.entry(key.instance_type.clone()).or_default().push(stats);
        }
    }
    by_type
        .into_iter()
        .filter_map(|(instance_type, stats)| {
            let weight = |v: &Volatility| v.covered.0 as f64;
            let total: f64 = stats.iter().map(|(v, _)| weight(v)).sum();
            if total <= 0.0 {
                return None;
            }
            let returns: Vec<f64> = stats.iter().flat_map(|(_, r)| r.iter().copied()).collect();
            let volatility = Volatility {
                pools: stats.len(),
                covered: Secs(stats.iter().map(|(v, _)| v.covered.0).fold(0, i64::saturating_add)),
                mean: stats.iter().map(|(v, _)| v.mean * weight(v)).sum::<f64>() / total,
                cv: (stats.iter().map(|(v, _)| v.cv.powi(2) * weight(v)).sum::<f64>() / total).sqrt(),
                log_return_sd: sample_sd(&returns),
                changes: returns.len(),
                min: stats.iter().map(|(v, _)| v.min).min().unwrap_or_default(),
                max: stats.iter().map(|(v, _)| v.max).max().unwrap_or_default(),
            };
            Some((instance_type, volatility))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    fn steps(points: &[(i64, i64)]) -> Vec<(At, MicrosPerHour)> {
        points.iter().map(|(s, p)| (t(*s), MicrosPerHour(*p))).collect()
    }

    #[test]
    fn time_weighted_mean_by_hand() {
        let s = steps(&[(0, 100), (600, 200), (1800, 50)]);
        // (100·600 + 200·1200 + 50·1800) / 3600 = 390000 / 3600 = 108.3
        assert_eq!(time_weighted_mean(&s, t(0), t(3600)), Some(MicrosPerHour(108)));
        // (100·300 + 200·300) / 600
        assert_eq!(time_weighted_mean(&s, t(300), t(900)), Some(MicrosPerHour(150)));
        // Before the first point nothing is known: only [0, 600] counts.
        assert_eq!(time_weighted_mean(&s, t(-600), t(600)), Some(MicrosPerHour(100)));
        // (100·600 + 200·600) / 1200 = 150; (100·600 + 200·300)/900 = 133.3
        assert_eq!(time_weighted_mean(&s, t(0), t(900)), Some(MicrosPerHour(133)));
        // Half up: (1 + 2) / 2 = 1.5
        assert_eq!(time_weighted_mean(&steps(&[(0, 1), (10, 2)]), t(0), t(20)), Some(MicrosPerHour(2)));
        assert_eq!(time_weighted_mean(&s, t(700), t(700)), Some(MicrosPerHour(200)));
        assert_eq!(time_weighted_mean(&s, t(-100), t(-10)), None);
        assert_eq!(time_weighted_mean(&s, t(900), t(300)), None);
        assert_eq!(time_weighted_mean(&[], t(0), t(10)), None);
    }

    #[test]
    fn trend_of_a_step_by_hand() {
        // $1/h for an hour then $2/h for an hour. c = 1 h, L = 2 h:
        // ∫(t − 1)p = 1e6·∫₁²(t − 1)dt = 0.5e6, ∫(t − 1)² = 8/12, slope = 0.75e6 per hour.
        let up = steps(&[(0, 1_000_000), (3600, 2_000_000)]);
        let tr = trend(&up, t(7200), Secs(7200), DEFAULT_DEAD_BAND).unwrap();
        assert!(close(tr.slope, 750_000.0), "{tr:?}");
        assert!(close(tr.mean, 1_500_000.0));
        assert!(close(tr.relative, 0.5));
        assert_eq!((tr.direction, tr.current, tr.covered), (Trend::Rising, MicrosPerHour(2_000_000), Secs(7200)));
        assert_eq!(tr.projected(Secs(3600)), MicrosPerHour(2_750_000));
        assert_eq!(tr.projected(Secs(-5)), MicrosPerHour(2_000_000));

        let down = steps(&[(0, 2_000_000), (3600, 1_000_000)]);
        let tr = trend(&down, t(7200), Secs(7200), DEFAULT_DEAD_BAND).unwrap();
        assert!(close(tr.slope, -750_000.0));
        assert_eq!(tr.direction, Trend::Falling);
        assert_eq!(tr.projected(Secs(3 * 3600)), MicrosPerHour(0), "floored at 0");

        // Thirds at 0, 1, 2 ($/h) over 3 h: c = 1.5, moment = 1·1·0/2 + 2·1·2/2 = 2,
        // ∫(t − c)² = 27/12: slope = 8/9 $/h per hour (a step lags the line through it).
        let stairs = steps(&[(0, 0), (3600, 1_000_000), (7200, 2_000_000)]);
        let tr = trend(&stairs, t(10_800), Secs(10_800), DEFAULT_DEAD_BAND).unwrap();
        assert!(close(tr.slope, 8.0 / 9.0 * 1e6), "{tr:?}");
    }

    #[test]
    fn trend_covers_only_what_is_known_and_has_a_dead_band() {
        let s = steps(&[(0, 1_000_000)]);
        let tr = trend(&s, t(600), Secs(3600), DEFAULT_DEAD_BAND).unwrap();
        assert_eq!((tr.slope, tr.direction, tr.covered), (0.0, Trend::Flat, Secs(600)));
        // +0.2% for the second half of an hour: c = 1/2, moment = 2000·(1/2)(1/4) = 250,
        // slope = 250 / (1/12) = 3000 per hour, relative 0.3% per hour: inside a 0.5% band.
        let small = steps(&[(0, 1_000_000), (1800, 1_002_000)]);
        let tr = trend(&small, t(3600), Secs(3600), DEFAULT_DEAD_BAND).unwrap();
        assert!(close(tr.slope, 3000.0), "{tr:?}");
        assert_eq!(tr.direction, Trend::Flat);
        assert_eq!(trend(&small, t(3600), Secs(3600), 0.001).unwrap().direction, Trend::Rising);
        assert_eq!(trend(&small, t(3600), Secs(3600), f64::NAN).unwrap().direction, Trend::Rising);
        assert_eq!(trend(&s, t(0), Secs(3600), DEFAULT_DEAD_BAND), None);
        assert_eq!(trend(&s, t(600), Secs(0), DEFAULT_DEAD_BAND), None);
        assert_eq!(trend(&[], t(600), Secs(60), DEFAULT_DEAD_BAND), None);
    }

    #[test]
    fn volatility_by_hand() {
        // $1, $2, $1 for an hour each: mean 4/3, variance ((1/3)²·2 + (2/3)²)/3 = 2/9,
        // CV = (√2/3)/(4/3) = √2/4. Returns ln 2, −ln 2: sample sd = √2·ln 2.
        let a = steps(&[(0, 1_000_000), (3600, 2_000_000), (7200, 1_000_000)]);
        let v = volatility(&a, t(0), t(10_800)).unwrap();
        assert!(close(v.mean, 4e6 / 3.0));
        assert!(close(v.cv, 2f64.sqrt() / 4.0), "{v:?}");
        assert!(close(v.log_return_sd, 2f64.sqrt() * 2f64.ln()));
        assert_eq!((v.changes, v.min, v.max, v.covered), (2, MicrosPerHour(1_000_000), MicrosPerHour(2_000_000), Secs(10_800)));
        // One change only: no spread of returns to speak of.
        assert_eq!(volatility(&a, t(0), t(7200)).unwrap().log_return_sd, 0.0);
        assert_eq!(volatility(&a, t(-10), t(-1)), None);
    }

    #[test]
    fn volatility_per_type_pools_zones_and_keeps_flat_ones() {
        let key = |zone: &str, ty: &str| PoolKey { zone: zone.into(), instance_type: ty.into() };
        let mut pools = BTreeMap::new();
        pools.insert(key("a", "p3.16xlarge"), steps(&[(0, 1_000_000), (3600, 2_000_000), (7200, 1_000_000)]));
        pools.insert(key("b", "p3.16xlarge"), steps(&[(0, 3_000_000)]));
        pools.insert(key("a", "p3.2xlarge"), steps(&[(0, 500_000), (10_800, 600_000)]));
        pools.insert(key("c", "p3.2xlarge"), steps(&[(10_800, 700_000)]));
        let by_type = volatility_by_type(&pools);
        // Both zones run to 10 800 s, the newest point. CV = √((3·(√2/4)² + 3·0)/6) = 1/4.
        let big = &by_type["p3.16xlarge"];
        assert_eq!((big.pools, big.covered, big.changes), (2, Secs(21_600), 2));
        assert!(close(big.cv, 0.25), "{big:?}");
        assert!(close(big.mean, 13e6 / 6.0));
        assert!(close(big.log_return_sd, 2f64.sqrt() * 2f64.ln()));
        assert_eq!((big.min, big.max), (MicrosPerHour(1_000_000), MicrosPerHour(3_000_000)));
        // The change at the very end holds for no time; zone c covers nothing.
        let small = &by_type["p3.2xlarge"];
        assert_eq!((small.pools, small.changes, small.cv, small.max), (1, 0, 0.0, MicrosPerHour(500_000)));
        assert!(volatility_by_type(&BTreeMap::new()).is_empty());
    }

    #[test]
    fn out_of_order_points_do_not_panic() {
        let s = steps(&[(100, 5), (0, 7), (50, 9)]);
        let _ = time_weighted_mean(&s, t(0), t(200));
        let _ = trend(&s, t(200), Secs(300), DEFAULT_DEAD_BAND);
        let _ = volatility(&s, t(0), t(200));
        let extreme = steps(&[(0, i64::MAX), (1, 0), (2, i64::MAX)]);
        assert!(time_weighted_mean(&extreme, t(0), t(3)).is_some());
        assert!(trend(&extreme, t(3), Secs(3), DEFAULT_DEAD_BAND).is_some_and(|tr| tr.slope.is_finite()));
    }
}
