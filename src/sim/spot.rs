//! The spot market as the simulated world lives it: real AWS price history
//! replayed as price ticks, and real preemption traces replayed as
//! interruption notices, losses and relaunches of the spot nodes.
//!
//! Nodes of one pool share a trace offset (a capacity reclaim hits a pool,
//! not one instance); pools get seeded, independent offsets. Traces wrap
//! around at their end, which may add one artificial transition per lap.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::domain::ids::PoolKey;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::sources::price_history::PriceSeries;
use crate::sources::spot_trace::SpotTrace;

/// Replays one pool's step function from `start`, wrapping around the
/// history's span so a long run never runs out of prices.
#[derive(Clone, Debug)]
pub struct PriceReplay {
    steps: Vec<(At, MicrosPerHour)>,
    /// Sim time = history time + shift (advances by one span per lap).
    shift: chrono::TimeDelta,
    next: usize,
}

impl PriceReplay {
    /// `None` if the series has no points for the pool.
    pub fn new(series: &PriceSeries, key: &PoolKey, start: At) -> Option<PriceReplay> {
        let steps = series.pools.get(key)?.clone();
        let first = steps.first()?.0;
        // Map `start` into the history: if it lies outside, start at its beginning.
        let last = steps.last()?.0;
        let shift = if start >= first && start <= last { chrono::TimeDelta::zero() } else { start - first };
        let local = start - shift;
        let next = steps.partition_point(|(t, _)| *t <= local).saturating_sub(1);
        Some(PriceReplay { steps, shift, next })
    }

    /// The next price change, in sim time, and moves past it. The first call
    /// gives the price in force at the start (stamped at the start). A
    /// one-point history has no later change: `None` after the first call.
    pub fn next_change(&mut self, start: At) -> Option<(At, MicrosPerHour)> {
        if self.steps.len() == 1 && self.next >= 1 {
            return None;
        }
        if self.next >= self.steps.len() {
            let span = self.steps.last().map(|s| s.0).unwrap_or(start) - self.steps[0].0;
            self.shift += span;
            self.next = 0;
        }
        let (t, p) = self.steps[self.next];
        self.next += 1;
        Some(((t + self.shift).max(start), p))
    }
}

/// Where a spot node stands in its trace.
#[derive(Clone, Debug)]
pub struct SpotLife {
    pub trace: usize,
    /// Sample index that corresponds to the simulation's start.
    pub offset: usize,
}

/// What happens next to a spot node according to its trace.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    Reclaimed(At),
    Relaunched(At),
}

impl SpotLife {
    /// Picks an offset at which the instance is alive and has been for a while.
    pub fn place(trace_index: usize, trace: &SpotTrace, rng: &mut ChaCha8Rng) -> SpotLife {
        let n = trace.samples.len();
        for _ in 0..1000 {
            let i = rng.random_range(0..n);
            if (0..4).all(|k| trace.alive(i + n - k)) {
                return SpotLife { trace: trace_index, offset: i };
            }
        }
        SpotLife { trace: trace_index, offset: 0 }
    }

    fn time_of(&self, trace: &SpotTrace, start: At, sample: usize) -> At {
        start + chrono::TimeDelta::seconds((sample - self.offset) as i64 * trace.gap.0)
    }

    fn sample_of(&self, trace: &SpotTrace, start: At, at: At) -> usize {
        let secs = (at - start).num_seconds().max(0);
        self.offset + (secs / trace.gap.0.max(1)) as usize
    }

    /// The first alive→dead or dead→alive change strictly after `after`.
    pub fn next_transition(&self, trace: &SpotTrace, start: At, after: At) -> Option<Transition> {
        let n = trace.samples.len();
        let from = self.sample_of(trace, start, after);
        // At most two laps: a trace that never changes has no transitions.
        for k in from + 1..from + 2 * n {
            let (before, now) = (trace.alive(k - 1), trace.alive(k));
            if before != now {
                let at = self.time_of(trace, start, k);
                if at <= after {
                    continue;
                }
                return Some(if now { Transition::Relaunched(at) } else { Transition::Reclaimed(at) });
            }
        }
        None
    }
}

/// Whether spot instances can be had in a zone, replayed from a real
/// availability trace (a launch was tried every few minutes for weeks).
#[derive(Clone, Debug)]
pub struct Availability {
    trace: SpotTrace,
    /// Sample index that corresponds to the simulation's start.
    offset: usize,
}

impl Availability {
    /// A seeded place in the trace, so that runs differ by seed but repeat.
    pub fn place(trace: SpotTrace, rng: &mut ChaCha8Rng) -> Availability {
        let offset = rng.random_range(0..trace.samples.len());
        Availability { trace, offset }
    }

    /// Whether a launch at `at` gets an instance.
    pub fn obtainable(&self, start: At, at: At) -> bool {
        let secs = (at - start).num_seconds().max(0);
        self.trace.alive(self.offset + (secs / self.trace.gap.0.max(1)) as usize)
    }

    pub fn share(&self) -> f64 {
        self.trace.availability()
    }
}

/// The 2-minute warning AWS gives before it reclaims a spot instance.
pub const NOTICE: Secs = Secs(120);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    #[test]
    fn a_trace_gives_reclaims_and_relaunches_in_time_order() {
        let trace = SpotTrace { gap: Secs(32), samples: vec![1, 1, 1, 0, 0, 1, 1, 1] };
        let life = SpotLife { trace: 0, offset: 0 };
        assert_eq!(life.next_transition(&trace, t(0), t(0)), Some(Transition::Reclaimed(t(96))));
        assert_eq!(life.next_transition(&trace, t(0), t(96)), Some(Transition::Relaunched(t(160))));
        // After the end it wraps: sample 8 = sample 0 (alive), and 11 = 3 (dead).
        assert_eq!(life.next_transition(&trace, t(0), t(160)), Some(Transition::Reclaimed(t(11 * 32))));
        let never = SpotTrace { gap: Secs(32), samples: vec![1, 1] };
        assert_eq!(life.next_transition(&never, t(0), t(0)), None);
    }

    #[test]
    fn a_price_replay_starts_with_the_price_in_force_and_wraps() {
        use crate::sources::price_history::PriceSeries;
        let key = PoolKey { zone: "z".into(), instance_type: "i".into() };
        let mut series = PriceSeries::default();
        series.pools.insert(key.clone(), vec![(t(0), MicrosPerHour(10)), (t(100), MicrosPerHour(20)), (t(200), MicrosPerHour(30))]);
        let mut replay = PriceReplay::new(&series, &key, t(150)).unwrap();
        assert_eq!(replay.next_change(t(150)), Some((t(150), MicrosPerHour(20))));
        assert_eq!(replay.next_change(t(150)), Some((t(200), MicrosPerHour(30))));
        // Lap: shifted by the span (200 s).
        assert_eq!(replay.next_change(t(150)), Some((t(200), MicrosPerHour(10))));
        assert_eq!(replay.next_change(t(150)), Some((t(300), MicrosPerHour(20))));
        // A flat pool gives its one price and then nothing.
        series.pools.insert(key.clone(), vec![(t(0), MicrosPerHour(7))]);
        let mut flat = PriceReplay::new(&series, &key, t(50)).unwrap();
        assert_eq!(flat.next_change(t(50)), Some((t(50), MicrosPerHour(7))));
        assert_eq!(flat.next_change(t(50)), None);
    }
}
