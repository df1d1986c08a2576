//! One job's life under each strategy. Jobs do not compete for spot capacity
//! (a pool either has capacity or not, by its trace), so each job is played
//! on its own, from arrival to its last layer, and the totals are summed.
//!
//! The spot strategies share one loop; they differ in where they place a
//! job, the cap they hold it to, how often they save, and what they do on a
//! 2-minute notice. The policies are the engines' own code: the hazard from
//! `market::hazard`, the cap from `market::bid`, the interval from `ckpt`.

use crate::ckpt::{CheckpointKind, CheckpointPolicy};
use crate::domain::units::{Micros, MicrosPerHour, Secs};
use crate::market::bid::{BidInput, BidPolicy, Verdict, rebase};
use crate::market::hazard::{self, HazardConfig};

use super::config::{ExperimentConfig, Outcome, Strategy};
use super::workload::Job;
use super::world::{Prices, Zone};

const NOTICE: f64 = 120.0;
/// Where the watcher looks for recent reclaims (SPEC §4: the last 5 minutes).
const RECENT: f64 = 300.0;

pub struct World<'a> {
    pub zones: &'a [Zone],
    pub prices: Prices,
    pub config: &'a ExperimentConfig,
    pub checkpoint: CheckpointPolicy,
    pub bids: BidPolicy,
}

enum Place {
    Spot(usize),
    OnDemand,
    /// No capacity anywhere: try again then.
    WaitUntil(f64),
}

/// What one attempt on one instance ended with.
enum End {
    Finished(f64),
    /// Reclaimed by the cloud (trace or price above the max price).
    Interrupted {
        at: f64,
        lost_layers: f64,
        saved_in_time: Option<bool>,
    },
    /// gpuroom moved it (market above its cap).
    Moved(f64),
}

impl World<'_> {
    /// Next-minute interruption probability of an instance of `zone` aged
    /// `age` at `t`: the long-run Kaplan–Meier estimate blended with what the
    /// last 5 minutes showed (one pool-wide instance at risk).
    pub fn hazard(&self, zone: &Zone, t: f64, age: f64) -> f64 {
        // `HazardModel::assess`'s blend, with the recent reclaims counted from
        // the trace directly (jobs are played one at a time, not in time
        // order) and the pool as the one instance at risk.
        let smoothing = HazardConfig::default().smoothing;
        let long_run = zone.survival.p_interrupt_within_smoothed(Secs(age as i64), Secs(60), smoothing).unwrap_or(0.0);
        let recent = zone.recent_reclaims(t, RECENT);
        let prior = Secs(self.config.prior_exposure_secs as i64);
        hazard::blend(long_run, recent, 1, Secs(RECENT as i64), prior).2
    }

    fn place(&self, strategy: Strategy, t: f64, avoid: Option<usize>) -> Place {
        let alive = self.zones.iter().enumerate().filter(|(i, z)| Some(*i) != avoid && z.alive_at(t));
        match strategy {
            Strategy::NaiveSpot => {
                let cheapest = alive.filter(|(_, z)| z.price_at(t) <= self.config.naive_max_price()).min_by_key(|(_, z)| z.price_at(t));
                match cheapest {
                    Some((i, _)) => Place::Spot(i),
                    None => {
                        let next = self.zones.iter().map(|z| z.next_birth(t + 1.0)).fold(f64::INFINITY, f64::min);
                        Place::WaitUntil(next.min(t + 60.0).max(t + 1.0))
                    }
                }
            }
            _ => {
                // Expected price per useful hour: the market plus what the
                // pool's hazard costs in restarts and recompute.
                let restart = self.config.launch_secs + self.config.load_secs;
                let best = alive
                    .map(|(i, z)| {
                        let p = self.hazard(z, t, 0.0);
                        let rate = -(1.0 - p.min(0.999)).ln() / 60.0;
                        let loss_secs = restart + self.config.checkpoint_secs_guess;
                        (i, z.price_at(t).0 as f64 * (1.0 + rate * loss_secs))
                    })
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                match best {
                    Some((i, price)) if price < self.prices.on_demand.0 as f64 => Place::Spot(i),
                    _ => Place::OnDemand,
                }
            }
        }
    }

    pub fn play(&self, strategy: Strategy, job: &Job, out: &mut Outcome) {
        let mut t = job.arrival;
        let mut done = 0usize;
        let mut saved = 0usize;
        let mut saves = 0u64;
        let mut chain_bytes = 0u64;
        let mut avoid = None;
        let mut interrupted = false;
        let mut on_demand = false;
        loop {
            let place = if on_demand { Place::OnDemand } else { self.place(strategy, t, avoid) };
            let zone = match place {
                Place::WaitUntil(next) => {
                    if next.is_infinite() {
                        on_demand = true;
                    } else {
                        t = next;
                    }
                    continue;
                }
                Place::OnDemand => {
                    on_demand = true;
                    None
                }
                Place::Spot(i) => Some(i),
            };
            let launch = t;
            let restore = if saved > 0 { chain_bytes as f64 / self.config.read_bytes_per_sec } else { 0.0 };
            let ready = launch + self.config.launch_secs + self.config.load_secs + restore;
            let end = self.attempt(strategy, job, zone, launch, ready, &mut done, &mut saved, &mut saves, &mut chain_bytes, out);
            let until = match end {
                End::Finished(at) | End::Moved(at) => at,
                End::Interrupted { at, .. } => at,
            };
            match zone {
                Some(i) => {
                    out.spot_spend += self.zones[i].cost(launch, until);
                    out.spot_hours += (until - launch) / 3600.0;
                }
                None => {
                    out.on_demand_spend += cost_at(self.prices.on_demand, until - launch);
                    out.on_demand_hours += (until - launch) / 3600.0;
                }
            }
            match end {
                End::Finished(at) => {
                    out.latencies.push(at - job.arrival);
                    out.jobs += 1;
                    out.interrupted_jobs += u64::from(interrupted);
                    return;
                }
                End::Interrupted { at, lost_layers, saved_in_time } => {
                    interrupted = true;
                    out.interruptions += 1;
                    out.lost_layers += lost_layers;
                    match saved_in_time {
                        Some(true) => out.notice_saves_in_time += 1,
                        Some(false) => out.notice_saves_missed += 1,
                        None => {}
                    }
                    avoid = zone;
                    t = at;
                }
                End::Moved(at) => {
                    if zone.is_none() {
                        out.back_to_spot += 1;
                        on_demand = false;
                    } else {
                        out.moves += 1;
                    }
                    avoid = zone;
                    t = at;
                }
            }
        }
    }

    /// Runs layers on one instance until the job ends, the instance is lost
    /// or the job is moved. Pays nothing (the caller does): returns when the
    /// instance was let go.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &self,
        strategy: Strategy,
        job: &Job,
        zone: Option<usize>,
        launch: f64,
        ready: f64,
        done: &mut usize,
        saved: &mut usize,
        saves: &mut u64,
        chain_bytes: &mut u64,
        out: &mut Outcome,
    ) -> End {
        let n = job.layers.len();
        let gpuroom = matches!(strategy, Strategy::Dynamic | Strategy::Degraded);
        let z = zone.map(|i| &self.zones[i]);
        // When the cloud takes the instance back, and when it says so.
        let death = match (z, strategy) {
            (None, _) => f64::INFINITY,
            (Some(z), Strategy::NaiveSpot) => {
                let by_price = z.first_above(launch, f64::INFINITY, self.config.naive_max_price()).map(|t| t + NOTICE);
                z.next_death(launch).min(by_price.unwrap_or(f64::INFINITY))
            }
            (Some(z), _) => z.next_death(launch),
        };
        let notice = death - NOTICE;
        let mut base = z.map(|z| z.price_at(launch)).unwrap_or(self.prices.on_demand);
        let mut t = ready;
        let mut since_save = 0usize;
        let mut observed: Vec<f64> = Vec::new();
        if t >= death {
            return End::Interrupted { at: death, lost_layers: 0.0, saved_in_time: None };
        }
        while *done < n {
            // At a layer boundary: gpuroom re-prices the job and decides whether to save.
            let mut save_now = false;
            if let (Some(z), true) = (z, gpuroom) {
                let progress = *done as f64 / n as f64;
                let remaining = predict_remaining(&observed, n - *done, self.config);
                let (trend, projected) = z.trend(t, self.config.trend_window_secs, self.config.trend_horizon_secs);
                let market = z.price_at(t);
                base = rebase(base, market, projected, trend);
                let input = BidInput { base, market, on_demand: self.prices.on_demand, progress, remaining };
                let bid = self.bids.bid(&input, strategy == Strategy::Degraded);
                if bid.verdict != Verdict::Stay {
                    // Leave on our own terms: save what is new, then go.
                    let (bytes, secs) = self.save_cost(job, *done - *saved, *saves);
                    let leave = t + if *done > *saved { secs } else { 0.0 };
                    if leave <= death {
                        if *done > *saved {
                            self.record_save(out, bytes, saves, chain_bytes);
                            *saved = *done;
                        }
                        return End::Moved(leave);
                    }
                }
                let hazard = self.hazard(z, t, t - launch);
                let to_cap = z.first_above(t, t + self.config.trend_horizon_secs, bid.cap).map(|c| c - t);
                let per_layer = if observed.is_empty() { self.config.layer_secs_mean } else { mean(&observed) };
                let miss = (out.notice_saves_missed as f64 + 1.0) / ((out.notice_saves_in_time + out.notice_saves_missed) as f64 + 2.0);
                // δ is the next save's cost: incremental saves are cheaper, and
                // cheaper saves shorten the interval, so iterate once.
                let mut delta = self.full_save_secs(job);
                let mut every = 1;
                for _ in 0..2 {
                    let interval = self.checkpoint.spot_interval(hazard, Some(Secs(delta.ceil() as i64)), miss, to_cap);
                    every = CheckpointPolicy::in_steps(interval.secs, per_layer) as usize;
                    delta = self.save_cost(job, every, *saves).1;
                }
                save_now = since_save >= every && *done > *saved;
            } else if strategy == Strategy::NaiveSpot {
                save_now = since_save >= self.config.naive_every_layers && *done > *saved;
            } else if z.is_none() && gpuroom && *done > 0 {
                // On on-demand because spot was out: go back once it pays.
                if let Place::Spot(i) = self.place(strategy, t, None) {
                    let left: f64 = job.layers[*done..].iter().sum();
                    let spot = self.zones[i].price_at(t).0 as f64;
                    let od = self.prices.on_demand.0 as f64;
                    let (bytes, secs) = self.save_cost(job, *done - *saved, *saves);
                    let switch = secs + self.config.launch_secs + self.config.load_secs + job.state_bytes as f64 / self.config.read_bytes_per_sec;
                    if (od - spot) * left > switch * (od + spot) {
                        if *done > *saved {
                            self.record_save(out, bytes, saves, chain_bytes);
                            *saved = *done;
                        }
                        return End::Moved(t + secs);
                    }
                }
            }
            if save_now {
                let (bytes, secs) = self.save_cost(job, *done - *saved, *saves);
                // gpuroom leaves a save the notice would cut to the notice save;
                // naive starts it and loses it if the instance goes first.
                let cut_by_notice = gpuroom && t + secs > notice;
                if !cut_by_notice && t + secs <= death {
                    t += secs;
                    self.record_save(out, bytes, saves, chain_bytes);
                    *saved = *done;
                    since_save = 0;
                    out.checkpoint_pause_secs += secs;
                }
            }
            let layer = job.layers[*done];
            let end = t + layer;
            if end > notice {
                let tn = notice.max(t);
                if gpuroom {
                    // The notice arrives during this layer: save the layers
                    // done at once; the one in flight is lost.
                    let partial = ((tn - t) / layer).clamp(0.0, 1.0);
                    if *done == *saved {
                        return End::Interrupted { at: tn, lost_layers: partial, saved_in_time: Some(true) };
                    }
                    let (bytes, secs) = self.save_cost(job, *done - *saved, *saves);
                    if tn + secs <= death {
                        self.record_save(out, bytes, saves, chain_bytes);
                        *saved = *done;
                        return End::Interrupted { at: tn + secs, lost_layers: partial, saved_in_time: Some(true) };
                    }
                    let lost = (*done - *saved) as f64 + partial;
                    *done = *saved;
                    return End::Interrupted { at: death, lost_layers: lost, saved_in_time: Some(false) };
                }
                if end > death {
                    // Naive: works on until the instance is gone.
                    let partial = ((death - t) / layer).clamp(0.0, 1.0);
                    let lost = (*done - *saved) as f64 + partial;
                    *done = *saved;
                    return End::Interrupted { at: death, lost_layers: lost, saved_in_time: None };
                }
            }
            t = end;
            observed.push(layer);
            *done += 1;
            since_save += 1;
        }
        End::Finished(t)
    }

    fn full_save_secs(&self, job: &Job) -> f64 {
        job.state_bytes as f64 / self.config.write_bytes_per_sec
    }

    /// Bytes and seconds of the next save covering `new_layers` layers.
    fn save_cost(&self, job: &Job, new_layers: usize, saves: u64) -> (u64, f64) {
        let incremental = self.config.incremental && self.checkpoint.kind(saves) == CheckpointKind::Incremental;
        let bytes = if incremental {
            let changed = job.state_bytes as f64 * self.config.changed_share_per_layer * new_layers as f64;
            (changed.min(job.state_bytes as f64)) as u64
        } else {
            job.state_bytes
        };
        (bytes, bytes as f64 / self.config.write_bytes_per_sec)
    }

    fn record_save(&self, out: &mut Outcome, bytes: u64, saves: &mut u64, chain: &mut u64) {
        let full = !(self.config.incremental && self.checkpoint.kind(*saves) == CheckpointKind::Incremental);
        *chain = if full { bytes } else { *chain + bytes };
        *saves += 1;
        out.checkpoints += 1;
        out.checkpoint_bytes += bytes;
    }
}

/// Remaining seconds (mean, std) from the layers seen so far; `None` until
/// two layers have been timed (the curve is then linear: degraded).
fn predict_remaining(observed: &[f64], left: usize, config: &ExperimentConfig) -> Option<(f64, f64)> {
    if observed.len() < config.min_layers_to_predict.max(2) {
        return None;
    }
    let k = observed.len() as f64;
    let m = mean(observed);
    let var = observed.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1.0);
    let left = left as f64;
    // Layer-to-layer spread plus the uncertainty of the mean itself.
    let std = (left * var + left * left * var / k).sqrt();
    Some((left * m, std))
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

pub fn cost_at(price: MicrosPerHour, secs: f64) -> Micros {
    Micros((price.0 as f64 * secs.max(0.0) / 3600.0).round() as i64)
}
