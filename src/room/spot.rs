//! The spot watcher and the checkpoint controller as the `Room` runs them:
//! the hazard model fed by lifetimes and notices, each spot job's max price
//! and checkpoint interval, and where an interrupted or moved job goes next.
//!
//! The arithmetic lives in `market::{hazard, bid}` and `ckpt`; this file only
//! gathers each job's inputs from the state and acts on the answers.

//!
//! Owns no state of its own: `Watch` borrows the pieces a judgement needs
//! (the fleet's jobs, the market, the hazard model, the predictor) for one
//! event.

use std::collections::BTreeMap;

use super::config::{AfterInterruption, RoomConfig};
use super::fleet::Fleet;
use super::journal::{Journal, Severity, Stats};
use super::predict::Predictor;
use crate::domain::cluster::BillingMode;
use crate::domain::event::Effect;
use crate::domain::ids::{JobId, PoolKey};
use crate::domain::job::{Avoid, JobRisk, Phase, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::market::Market;
use crate::market::bid::{BidInput, Verdict, rebase};
use crate::market::hazard::{HazardModel, Lifetime};

/// A new prior for an instance type's hazard (spot lifetimes from a trace).
pub fn on_lifetimes(hazard: &mut HazardModel, journal: &mut Journal, now: Option<At>, instance_type: &str, lifetimes: &[Lifetime]) -> Result<(), String> {
    hazard.set_prior(instance_type, lifetimes).map_err(|e| format!("spot lifetimes of {}: {e}", clean(instance_type)))?;
    let events = lifetimes.iter().filter(|l| l.interrupted).count();
    journal.note(
        now.unwrap_or_default(),
        Severity::Info,
        format!("hazard prior for {}: {} lifetimes, {events} interruptions", clean(instance_type), lifetimes.len()),
    );
    Ok(())
}

/// After a stop for `reason` in `pool`, where the job may go next.
pub fn steer_after_stop(policy: AfterInterruption, fleet: &mut Fleet, stats: &mut Stats, id: JobId, pool: Option<PoolKey>, reason: &StopReason) {
    let Some(job) = fleet.jobs.get_mut(&id) else { return };
    let avoid = match (reason, policy, pool) {
        (StopReason::Interruption, AfterInterruption::Requeue, _) => None,
        (StopReason::Interruption, AfterInterruption::MigrateOnDemand, _) => Some(Avoid::AllSpot),
        (StopReason::Interruption | StopReason::MaxPrice { .. }, _, Some(pool)) => Some(Avoid::Pool(pool)),
        _ => None,
    };
    if avoid.is_some() && job.avoid.as_deref() != Some(&Avoid::AllSpot) {
        if avoid == Some(Avoid::AllSpot) {
            stats.migrations += 1;
        }
        job.avoid = avoid.map(Box::new);
    }
    job.risk = None;
}

/// The pieces one judgement of spot jobs reads and writes.
pub struct Watch<'a> {
    pub config: &'a RoomConfig,
    pub now: Option<At>,
    pub fleet: &'a mut Fleet,
    pub market: &'a Market,
    pub hazard: &'a HazardModel,
    pub predictor: &'a Predictor,
    pub journal: &'a mut Journal,
}

impl Watch<'_> {
    /// Recomputes a job's risk, max price and checkpoint interval; returns the
    /// curve's verdict (`Stay` for jobs off spot or with no known price).
    pub fn refresh_risk(&mut self, at: At, id: JobId) -> Verdict {
        self.refresh_risk_with(at, id, None)
    }

    /// `refresh_risk` with the population at risk already counted.
    fn refresh_risk_with(&mut self, at: At, id: JobId, at_risk: Option<u32>) -> Verdict {
        let (Some(job), Some(node)) = (self.fleet.jobs.get(&id), self.fleet.job_node(id)) else { return Verdict::Stay };
        if node.spec.billing != BillingMode::Spot {
            if let Some(job) = self.fleet.jobs.get_mut(&id) {
                job.risk = None;
            }
            return Verdict::Stay;
        }
        let age = Secs((at - node.up_since).num_seconds().max(0));
        let at_risk = at_risk.unwrap_or_else(|| self.fleet.spot_at_risk(&node.spec.instance_type)).max(1);
        let p = self.hazard.p_next_minute(&node.spec.instance_type, at, age, at_risk);
        let on_demand = node.spec.on_demand_price;
        // Found among the few pools without building a key (this runs for
        // every spot job at every telemetry tick).
        let pool = self.market.pools.iter().find(|(k, _)| k.zone == node.spec.zone && k.instance_type == node.spec.instance_type).map(|(_, p)| p);
        let market = pool.and_then(|p| p.price);
        let trend = pool.and_then(|p| p.trend.clone());
        let horizon = self.config.trend_horizon;
        let mut base = job.risk.as_ref().and_then(|r| r.base).or(market);
        if let (Some(b), Some(m), Some(tr)) = (base, market, &trend) {
            base = Some(rebase(b, m, tr.projected(horizon), tr.direction));
        }
        let remaining = self.predictor.remaining(self.fleet, id);
        let progress = job.steps_done as f64 / job.spec.steps_total.max(1) as f64;
        let bid = match (base, market) {
            (Some(base), Some(market)) => {
                let input = BidInput { base, market, on_demand, progress, remaining };
                Some(self.config.bids.bid(&input, self.config.degraded_bids))
            }
            _ => None,
        };
        // Coupled to the max price: a rising trend reaches the cap in
        // (cap − market) / slope hours, a second way to lose the instance.
        let secs_to_cap = match (&bid, market, &trend) {
            (Some(b), Some(m), Some(tr)) if tr.slope > 0.0 && b.cap > m => Some((b.cap.0 - m.0) as f64 / tr.slope * 3600.0),
            _ => None,
        };
        let cost = job.checkpoint_secs.and_then(Secs::from_f64);
        let interval = self.config.checkpoint.spot_interval(p, cost, self.journal.stats.notice_miss_share(), secs_to_cap);
        let verdict = bid.map(|b| b.verdict).unwrap_or(Verdict::Stay);
        if let Some(job) = self.fleet.jobs.get_mut(&id) {
            // A shorter interval may bring the next save before the scan's horizon.
            let moved = job.risk.as_ref().is_none_or(|r| r.interval != interval.secs);
            job.risk = Some(Box::new(JobRisk { at, p_next_minute: p, interval: interval.secs, shortened: interval.shortened, bid, base }));
            if moved {
                self.fleet.note_checkpoint_due(&self.config.checkpoint, id);
            }
        }
        verdict
    }

    /// Refreshes the given jobs and moves those whose market passed their cap.
    pub fn judge(&mut self, at: At, ids: Vec<JobId>, effects: &mut Vec<Effect>) {
        if ids.is_empty() {
            return;
        }
        let counts: BTreeMap<String, u32> = self.fleet.at_risk_by_type().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        for id in ids {
            let at_risk = self.fleet.job_node(id).and_then(|n| counts.get(&n.spec.instance_type).copied());
            let verdict = self.refresh_risk_with(at, id, at_risk);
            let Some(job) = self.fleet.jobs.get(&id) else { continue };
            if verdict == Verdict::Stay || job.phase() != Phase::Running {
                continue;
            }
            let Some(bid) = job.risk.as_ref().and_then(|r| r.bid) else { continue };
            let market = self.fleet.job_pool(id).and_then(|(k, _)| self.market.price(&k)).unwrap_or(MicrosPerHour(0));
            let name = clean(&job.spec.name);
            let why = match verdict {
                Verdict::OnDemand => "spot costs as much as on-demand".to_string(),
                _ => format!("market {market} above its max price {}", bid.cap),
            };
            self.journal.stats.price_moves += 1;
            self.journal.note(at, Severity::Warn, format!("{id} {name}: {why}; saving and moving"));
            self.fleet.stop_job(self.now, &self.config.checkpoint, id, StopReason::MaxPrice { market, cap: bid.cap }, true, effects);
        }
    }
}
