//! The spot watcher and the checkpoint controller as the `Room` runs them:
//! the hazard model fed by lifetimes and notices, each spot job's max price
//! and checkpoint interval, and where an interrupted or moved job goes next.
//!
//! The arithmetic lives in `market::{hazard, bid}` and `ckpt`; this file only
//! gathers each job's inputs from the state and acts on the answers.

use serde::{Deserialize, Serialize};

use crate::domain::cluster::{BillingMode, Node};
use crate::domain::event::Effect;
use crate::domain::ids::{JobId, PoolKey};
use crate::domain::job::{Avoid, JobRisk, Phase, StopReason};
use super::{Room, Severity};
use crate::domain::text::clean;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::market::bid::{BidInput, Verdict, rebase};
use crate::market::hazard::Lifetime;

/// Where a job goes after a spot interruption.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterInterruption {
    /// Back to the queue; any capacity its preference allows, the same pool included.
    Requeue,
    /// Anywhere but the pool it lost: another spot pool or stable capacity.
    #[default]
    MigrateSpot,
    /// Stable capacity only, for the rest of its life.
    MigrateOnDemand,
}

impl Room {
    pub(crate) fn on_lifetimes(&mut self, instance_type: &str, lifetimes: &[Lifetime]) -> Result<(), String> {
        self.hazard.set_prior(instance_type, lifetimes).map_err(|e| format!("spot lifetimes of {}: {e}", clean(instance_type)))?;
        let events = lifetimes.iter().filter(|l| l.interrupted).count();
        self.note(
            self.now.unwrap_or_default(),
            Severity::Info,
            format!("hazard prior for {}: {} lifetimes, {events} interruptions", clean(instance_type), lifetimes.len()),
        );
        Ok(())
    }

    /// Spot instances of a type that are up (the hazard's population at risk).
    pub(crate) fn spot_at_risk(&self, instance_type: &str) -> u32 {
        self.at_risk_by_type().get(instance_type).copied().unwrap_or(0)
    }

    /// The node a job holds GPUs on, if it holds any.
    pub(crate) fn job_node(&self, id: JobId) -> Option<&Node> {
        self.jobs.get(&id)?.placement.as_ref().and_then(|p| self.nodes.get(&p.node))
    }

    /// The pool a job holds GPUs in, if it holds any.
    pub(crate) fn job_pool(&self, id: JobId) -> Option<(PoolKey, BillingMode)> {
        self.job_node(id).map(|node| (node.spec.pool(), node.spec.billing))
    }

    /// Spot instances up, per type, counted once for a batch of refreshes.
    fn at_risk_by_type(&self) -> std::collections::BTreeMap<&str, u32> {
        let mut counts = std::collections::BTreeMap::new();
        for n in self.nodes.values().filter(|n| n.is_up() && n.spec.billing == BillingMode::Spot) {
            *counts.entry(n.spec.instance_type.as_str()).or_insert(0) += 1;
        }
        counts
    }

    /// Recomputes a job's risk, max price and checkpoint interval; returns the
    /// curve's verdict (`Stay` for jobs off spot or with no known price).
    pub(crate) fn refresh_risk(&mut self, at: At, id: JobId) -> Verdict {
        self.refresh_risk_with(at, id, None)
    }

    /// `refresh_risk` with the population at risk already counted.
    fn refresh_risk_with(&mut self, at: At, id: JobId, at_risk: Option<u32>) -> Verdict {
        let (Some(job), Some(node)) = (self.jobs.get(&id), self.job_node(id)) else { return Verdict::Stay };
        if node.spec.billing != BillingMode::Spot {
            if let Some(job) = self.jobs.get_mut(&id) {
                job.risk = None;
            }
            return Verdict::Stay;
        }
        let key = node.spec.pool();
        let age = Secs((at - node.up_since).num_seconds().max(0));
        let at_risk = at_risk.unwrap_or_else(|| self.spot_at_risk(&node.spec.instance_type)).max(1);
        let p = self.hazard.p_next_minute(&node.spec.instance_type, at, age, at_risk);
        let on_demand = node.spec.on_demand_price;
        let pool = self.market.pools.get(&key);
        let market = pool.and_then(|p| p.price);
        let trend = pool.and_then(|p| p.trend.clone());
        let horizon = self.config.trend_horizon;
        let mut base = job.risk.as_ref().and_then(|r| r.base).or(market);
        if let (Some(b), Some(m), Some(tr)) = (base, market, &trend) {
            base = Some(rebase(b, m, tr.projected(horizon), tr.direction));
        }
        let remaining = self.remaining_of(id);
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
        let interval = self.config.checkpoint.spot_interval(p, cost, self.notice_miss_share(), secs_to_cap);
        let verdict = bid.map(|b| b.verdict).unwrap_or(Verdict::Stay);
        if let Some(job) = self.jobs.get_mut(&id) {
            job.risk =
                Some(Box::new(JobRisk { at, p_next_minute: p, interval: interval.secs, shortened: interval.shortened, bid, base }));
        }
        verdict
    }

    /// Refreshes the given jobs and moves those whose market passed their cap.
    pub(crate) fn judge(&mut self, at: At, ids: Vec<JobId>, effects: &mut Vec<Effect>) {
        if ids.is_empty() {
            return;
        }
        let counts: std::collections::BTreeMap<String, u32> =
            self.at_risk_by_type().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        for id in ids {
            let at_risk = self.job_node(id).and_then(|n| counts.get(&n.spec.instance_type).copied());
            let verdict = self.refresh_risk_with(at, id, at_risk);
            let Some(job) = self.jobs.get(&id) else { continue };
            if verdict == Verdict::Stay || job.phase() != Phase::Running {
                continue;
            }
            let Some(bid) = job.risk.as_ref().and_then(|r| r.bid) else { continue };
            let market = self.job_pool(id).and_then(|(k, _)| self.market.price(&k)).unwrap_or(MicrosPerHour(0));
            let name = clean(&job.spec.name);
            let why = match verdict {
                Verdict::OnDemand => "spot costs as much as on-demand".to_string(),
                _ => format!("market {market} above its max price {}", bid.cap),
            };
            self.stats.price_moves += 1;
            self.note(at, Severity::Warn, format!("{id} {name}: {why}; saving and moving"));
            self.stop_job(id, StopReason::MaxPrice { market, cap: bid.cap }, true, effects);
        }
    }

    /// Jobs running on spot nodes, all or of one pool or one type.
    pub(crate) fn spot_jobs(&self, pool: Option<&PoolKey>, instance_type: Option<&str>) -> Vec<JobId> {
        self.holding
            .iter()
            .copied()
            .filter(|id| {
                let Some(node) = self.job_node(*id) else { return false };
                node.spec.billing == BillingMode::Spot
                    && pool.is_none_or(|k| node.spec.zone == k.zone && node.spec.instance_type == k.instance_type)
                    && instance_type.is_none_or(|t| node.spec.instance_type == t)
            })
            .collect()
    }

    /// After a stop for `reason` in `pool`, where the job may go next.
    pub(crate) fn steer_after_stop(&mut self, id: JobId, pool: Option<PoolKey>, reason: &StopReason) {
        let policy = self.config.after_interruption;
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let avoid = match (reason, policy, pool) {
            (StopReason::Interruption, AfterInterruption::Requeue, _) => None,
            (StopReason::Interruption, AfterInterruption::MigrateOnDemand, _) => Some(Avoid::AllSpot),
            (StopReason::Interruption | StopReason::MaxPrice { .. }, _, Some(pool)) => Some(Avoid::Pool(pool)),
            _ => None,
        };
        if avoid.is_some() && job.avoid.as_deref() != Some(&Avoid::AllSpot) {
            if avoid == Some(Avoid::AllSpot) {
                self.stats.migrations += 1;
            }
            job.avoid = avoid.map(Box::new);
        }
        job.risk = None;
    }

    /// Share of notice saves that did not finish before the instance went
    /// (with one miss and one success assumed, so no history reads as 50%).
    pub(crate) fn notice_miss_share(&self) -> f64 {
        let (ok, missed) = (self.stats.notice_saves_in_time, self.stats.notice_saves_missed);
        (missed as f64 + 1.0) / ((ok + missed) as f64 + 2.0)
    }

    /// The interval a running job saves at: risk-driven on spot, fixed otherwise.
    pub(crate) fn checkpoint_interval(&self, id: JobId) -> Option<Secs> {
        let job = self.jobs.get(&id)?;
        let node = self.job_node(id)?;
        match node.spec.billing {
            BillingMode::Spot => Some(job.risk.as_ref().map(|r| r.interval).unwrap_or(self.config.checkpoint.max_interval)),
            mode => self.config.checkpoint.stable(mode),
        }
    }
}
