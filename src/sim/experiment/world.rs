//! The experiment's world: spot pools, each with its real price step function
//! and its real preemption trace, laid on one clock (seconds from the start).
//!
//! All instances of a pool share its trace: a capacity reclaim takes the
//! pool, which is what one probed instance can tell. The trace is not wrapped:
//! the experiment's span is the trace's.

use crate::domain::ids::PoolKey;
use crate::domain::units::{At, Micros, MicrosPerHour, Secs};
use crate::market::hazard::{Lifetime, Survival};
use crate::market::{Trend, series};
use crate::sources::price_history::PriceSeries;
use crate::sources::spot_trace::SpotTrace;

pub struct Zone {
    pub key: PoolKey,
    /// Price changes, seconds from the start; the first holds from 0.
    prices: Vec<(f64, MicrosPerHour)>,
    /// The same, as absolute times, for the market's statistics.
    steps: Vec<(At, MicrosPerHour)>,
    start: At,
    alive: Vec<bool>,
    gap: f64,
    /// Alive→dead changes (the instant the pool is reclaimed), ascending.
    deaths: Vec<f64>,
    /// Dead→alive changes (capacity back), ascending.
    births: Vec<f64>,
    /// The long-run survival of an instance in this pool (the trace itself).
    pub survival: Survival,
}

impl Zone {
    /// `None` if the price series has nothing for the pool by `start`.
    pub fn new(key: PoolKey, series: &PriceSeries, trace: &SpotTrace, start: At) -> Option<Zone> {
        let all = series.pools.get(&key)?;
        let first = series.price_at(&key, start)?;
        let span = trace.samples.len() as f64 * trace.gap.0 as f64;
        let mut prices = vec![(0.0, first)];
        for (at, price) in all {
            let secs = (*at - start).num_milliseconds() as f64 / 1000.0;
            if secs > 0.0 && secs < span {
                prices.push((secs, *price));
            }
        }
        let steps = all.clone();
        let alive: Vec<bool> = trace.samples.iter().map(|s| *s > 0).collect();
        let gap = trace.gap.0 as f64;
        let (mut deaths, mut births) = (Vec::new(), Vec::new());
        for i in 1..alive.len() {
            match (alive[i - 1], alive[i]) {
                (true, false) => deaths.push(i as f64 * gap),
                (false, true) => births.push(i as f64 * gap),
                _ => {}
            }
        }
        let lifetimes: Vec<Lifetime> = trace.lifetimes();
        Some(Zone { key, prices, steps, start, alive, gap, deaths, births, survival: Survival::new(&lifetimes) })
    }

    pub fn span(&self) -> f64 {
        self.alive.len() as f64 * self.gap
    }

    pub fn alive_at(&self, t: f64) -> bool {
        let i = (t / self.gap).floor();
        i >= 0.0 && (i as usize) < self.alive.len() && self.alive[i as usize]
    }

    /// The first reclaim strictly after `t` (the end of the span if none).
    pub fn next_death(&self, t: f64) -> f64 {
        let i = self.deaths.partition_point(|d| *d <= t);
        self.deaths.get(i).copied().unwrap_or(f64::INFINITY)
    }

    /// When capacity is next available at or after `t`.
    pub fn next_birth(&self, t: f64) -> f64 {
        if self.alive_at(t) {
            return t;
        }
        let i = self.births.partition_point(|b| *b <= t);
        self.births.get(i).copied().unwrap_or(f64::INFINITY)
    }

    /// Reclaims within (t − span, t]: what a watcher of this pool has just seen.
    pub fn recent_reclaims(&self, t: f64, span: f64) -> usize {
        let lo = self.deaths.partition_point(|d| *d <= t - span);
        let hi = self.deaths.partition_point(|d| *d <= t);
        hi - lo
    }

    pub fn price_at(&self, t: f64) -> MicrosPerHour {
        let i = self.prices.partition_point(|(s, _)| *s <= t);
        self.prices[i.saturating_sub(1)].1
    }

    /// What an instance costs from `t0` to `t1` at the step price.
    pub fn cost(&self, t0: f64, t1: f64) -> Micros {
        if t1 <= t0 {
            return Micros(0);
        }
        let mut total = 0.0;
        let mut i = self.prices.partition_point(|(s, _)| *s <= t0).saturating_sub(1);
        let mut from = t0;
        while from < t1 {
            let until = self.prices.get(i + 1).map(|(s, _)| *s).unwrap_or(f64::INFINITY).min(t1);
            total += self.prices[i].1.0 as f64 * (until - from) / 3600.0;
            from = until;
            i += 1;
        }
        Micros(total.round() as i64)
    }

    /// The first time in [t0, t1) the market is above `threshold`.
    pub fn first_above(&self, t0: f64, t1: f64, threshold: MicrosPerHour) -> Option<f64> {
        if self.price_at(t0) > threshold {
            return Some(t0);
        }
        let i = self.prices.partition_point(|(s, _)| *s <= t0);
        self.prices[i..].iter().take_while(|(s, _)| *s < t1).find(|(_, p)| *p > threshold).map(|(s, _)| *s)
    }

    /// The short trend at `t` over `window` seconds, and the price it projects
    /// `horizon` seconds ahead.
    pub fn trend(&self, t: f64, window: f64, horizon: f64) -> (Trend, MicrosPerHour) {
        let now = self.at(t);
        match series::trend(&self.steps, now, Secs(window as i64), series::DEFAULT_DEAD_BAND) {
            Some(tr) => (tr.direction, tr.projected(Secs(horizon as i64))),
            None => (Trend::Flat, self.price_at(t)),
        }
    }

    fn at(&self, t: f64) -> At {
        crate::sim::after(self.start, t)
    }
}

/// On-demand and reserved prices of the experiment's instance type.
#[derive(Copy, Clone, Debug)]
pub struct Prices {
    pub on_demand: MicrosPerHour,
    pub reserved: MicrosPerHour,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn zone() -> Zone {
        let key = PoolKey { zone: "z".into(), instance_type: "p3.2xlarge".into() };
        let mut series = PriceSeries::default();
        series.pools.insert(key.clone(), vec![(t(-100), MicrosPerHour(3600)), (t(64), MicrosPerHour(7200))]);
        let trace = SpotTrace { gap: Secs(32), samples: vec![1, 1, 1, 0, 0, 1, 1, 1] };
        Zone::new(key, &series, &trace, t(0)).unwrap()
    }

    #[test]
    fn a_zone_knows_its_prices_and_its_reclaims() {
        let z = zone();
        assert_eq!(z.span(), 256.0);
        assert_eq!(z.cost(0.0, 64.0), Micros(64));
        assert_eq!(z.cost(32.0, 96.0), Micros(32 + 64));
        assert_eq!(z.next_death(0.0), 96.0);
        assert_eq!(z.next_death(96.0), f64::INFINITY);
        assert!(z.alive_at(95.0) && !z.alive_at(96.0) && !z.alive_at(159.0));
        assert_eq!(z.next_birth(100.0), 160.0);
        assert_eq!(z.next_birth(10.0), 10.0);
        assert_eq!(z.recent_reclaims(100.0, 300.0), 1);
        assert_eq!(z.recent_reclaims(500.0, 300.0), 0);
        assert_eq!(z.first_above(0.0, 200.0, MicrosPerHour(5000)), Some(64.0));
        assert_eq!(z.first_above(0.0, 60.0, MicrosPerHour(5000)), None);
        assert_eq!(z.first_above(70.0, 80.0, MicrosPerHour(5000)), Some(70.0));
    }
}
