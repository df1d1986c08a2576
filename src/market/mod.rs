//! The spot market as the core knows it: the latest price and a bounded
//! history per pool (zone × instance type), the on-demand ceiling, the trend
//! over a short window, and the max price each spot instance was bought with.
//!
//! Prices come in as events; this module never fetches anything and never
//! decides scheduling. Max-price curves and hazard models build on it.

pub mod bid;
pub mod hazard;
pub mod series;

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::domain::ids::PoolKey;
pub use crate::domain::spot::Trend;
use crate::domain::units::{At, MicrosPerHour, Secs};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub on_demand: MicrosPerHour,
    pub price: Option<MicrosPerHour>,
    /// The last quote seen (how fresh the feed is).
    pub updated_at: Option<At>,
    /// When the price last changed (how long it has held).
    pub changed_at: Option<At>,
    /// Price changes, oldest first, trimmed to the history window (one point
    /// before the window is kept so the step function is known at its start).
    pub history: VecDeque<(At, MicrosPerHour)>,
    /// The short trend as of the last quote (see `series::trend`).
    #[serde(default)]
    pub trend: Option<series::PriceTrend>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Market {
    pub history_window: Secs,
    /// Span of the trend window.
    #[serde(default = "default_trend_window")]
    pub trend_window: Secs,
    #[serde(with = "crate::domain::serde_pairs")]
    pub pools: BTreeMap<PoolKey, Pool>,
}

fn default_trend_window() -> Secs {
    Secs(3600)
}

impl Market {
    pub fn new(history_window: Secs) -> Market {
        Market { history_window, trend_window: default_trend_window(), pools: BTreeMap::new() }
    }

    pub fn with_trend_window(mut self, span: Secs) -> Market {
        self.trend_window = span;
        self
    }

    /// Makes a pool known with its on-demand ceiling (a node of that type joined).
    pub fn register(&mut self, key: PoolKey, on_demand: MicrosPerHour) {
        self.pools.entry(key).and_modify(|p| p.on_demand = on_demand).or_insert(Pool {
            on_demand,
            price: None,
            updated_at: None,
            changed_at: None,
            history: VecDeque::new(),
            trend: None,
        });
    }

    /// Records a price. Refuses a negative price; an unknown pool is created
    /// (prices may arrive before nodes), with no on-demand ceiling known yet.
    pub fn observe(&mut self, key: PoolKey, at: At, price: MicrosPerHour) -> Result<(), String> {
        if price.0 < 0 {
            return Err(format!("negative spot price {price} for {key}"));
        }
        let window = self.history_window.delta();
        let pool = self.pools.entry(key).or_insert(Pool {
            on_demand: MicrosPerHour(0),
            price: None,
            updated_at: None,
            changed_at: None,
            history: VecDeque::new(),
            trend: None,
        });
        if pool.price != Some(price) {
            pool.changed_at = Some(at);
        }
        pool.price = Some(price);
        pool.updated_at = Some(at);
        if pool.history.back().map(|(_, p)| *p) != Some(price) {
            pool.history.push_back((at, price));
        }
        while pool.history.len() > 1 && pool.history[1].0 <= at - window {
            pool.history.pop_front();
        }
        let steps: Vec<(At, MicrosPerHour)> = pool.history.iter().copied().collect();
        pool.trend = series::trend(&steps, at, self.trend_window, series::DEFAULT_DEAD_BAND);
        Ok(())
    }

    pub fn price(&self, key: &PoolKey) -> Option<MicrosPerHour> {
        self.pools.get(key).and_then(|p| p.price)
    }

    /// The price in force at `at` (the step function), if the history reaches back.
    pub fn price_at(&self, key: &PoolKey, at: At) -> Option<MicrosPerHour> {
        let pool = self.pools.get(key)?;
        pool.history.iter().rev().find(|(t, _)| *t <= at).map(|(_, p)| *p)
    }

    /// Price change over the last `span`, end to end, and its direction (a
    /// ±0.5% dead band); the least-squares trend the bids use is `Pool::trend`.
    pub fn change_over(&self, key: &PoolKey, now: At, span: Secs) -> Option<(i64, Trend)> {
        let now_price = self.price(key)?;
        let then =
            self.price_at(key, now - span.delta()).unwrap_or_else(|| self.pools.get(key).and_then(|p| p.history.front().map(|(_, p)| *p)).unwrap_or(now_price));
        let change = now_price.0 - then.0;
        let band = then.0 / 200;
        let trend = if change > band {
            Trend::Rising
        } else if change < -band {
            Trend::Falling
        } else {
            Trend::Flat
        };
        Some((change, trend))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn key() -> PoolKey {
        PoolKey { zone: "us-east-1c".into(), instance_type: "p3.2xlarge".into() }
    }

    #[test]
    fn keeps_a_step_function_trimmed_to_the_window() {
        let mut m = Market::new(Secs(3600));
        m.register(key(), MicrosPerHour(3_060_000));
        m.observe(key(), t(0), MicrosPerHour(918_000)).unwrap();
        m.observe(key(), t(600), MicrosPerHour(918_000)).unwrap(); // unchanged: no new point
        assert_eq!((m.pools[&key()].updated_at, m.pools[&key()].changed_at), (Some(t(600)), Some(t(0))));
        m.observe(key(), t(1200), MicrosPerHour(950_000)).unwrap();
        m.observe(key(), t(5000), MicrosPerHour(1_000_000)).unwrap();
        let pool = &m.pools[&key()];
        assert_eq!((pool.updated_at, pool.changed_at), (Some(t(5000)), Some(t(5000))));
        // t(0) is dropped: t(1200) is the last point at or before the window start (5000-3600=1400).
        assert_eq!(pool.history.iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![t(1200), t(5000)]);
        assert_eq!(m.price_at(&key(), t(3000)), Some(MicrosPerHour(950_000)));
        assert_eq!(m.price(&key()), Some(MicrosPerHour(1_000_000)));
    }

    #[test]
    fn trend_has_a_dead_band() {
        let mut m = Market::new(Secs(86_400));
        m.observe(key(), t(0), MicrosPerHour(1_000_000)).unwrap();
        m.observe(key(), t(100), MicrosPerHour(1_004_000)).unwrap();
        assert_eq!(m.change_over(&key(), t(200), Secs(300)).unwrap().1, Trend::Flat);
        m.observe(key(), t(200), MicrosPerHour(1_100_000)).unwrap();
        assert_eq!(m.change_over(&key(), t(250), Secs(300)), Some((100_000, Trend::Rising)));
        m.observe(key(), t(300), MicrosPerHour(900_000)).unwrap();
        assert_eq!(m.change_over(&key(), t(300), Secs(200)).unwrap().1, Trend::Falling);
    }

    #[test]
    fn refuses_negative_prices() {
        let mut m = Market::new(Secs(3600));
        assert!(m.observe(key(), t(0), MicrosPerHour(-1)).is_err());
        assert_eq!(m.price(&key()), None);
    }
}
