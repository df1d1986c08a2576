//! The choice `gpuroom slurm-resume` makes for each node: spot or
//! on-demand, the zone and the max price, by the room's elastic-capacity
//! policy over the node's `[[sources.slurm.power.nodes]]` pools (see the
//! parent module). Pure: prices, the cluster's instances and the time come in;
//! no EC2, no Slurm, no clock.

use std::collections::BTreeMap;

use crate::capacity::plan::{self, FleetGpus, Offer, Waiting};
use crate::capacity::{CapacityConfig, CapacityMode};
use crate::ckpt::CheckpointPolicy;
use crate::config::EngineConfig;
use crate::cost::mix::{SpotRisk, effective_spot};
use crate::domain::capacity::{DEFAULT_BOOT, PoolSpec};
use crate::domain::cluster::BillingMode;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::live::catalogue::{Catalogue, InstanceShape, NodeDecl};
use crate::market::bid::{BidInput, BidPolicy, Verdict};
use crate::market::hazard::{HazardConfig, HazardModel};
use crate::sources::aws::{self};
use crate::sources::slurm::power::{PowerBilling, PowerNode};

/// With no interruption notice seen yet, the room's prior share of notices
/// missed (`room::journal`: (0 + 1) / (0 + 2)).
const NOTICE_MISS_PRIOR: f64 = 0.5;
/// Launch attempts per node, all pools together.
pub(crate) const MAX_ATTEMPTS: usize = 16;

/// Which of Slurm's programs gpuroom is being.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Power {
    Resume,
    Suspend,
}

/// The parts of the engine's policy a choice needs.
#[derive(Clone, Debug)]
pub struct PowerPolicy {
    pub capacity: CapacityConfig,
    pub hazard: HazardConfig,
    pub checkpoint: CheckpointPolicy,
    pub bids: BidPolicy,
    pub degraded_bids: bool,
}

impl PowerPolicy {
    /// From the configuration (`[capacity]`, `[spot]`, `[checkpoint]`);
    /// `[capacity] mode` does not apply: Slurm asked for the node.
    pub fn of(config: &EngineConfig) -> PowerPolicy {
        PowerPolicy {
            capacity: config.capacity.resolve(CapacityMode::Control),
            hazard: config.spot.hazard.clone(),
            checkpoint: config.checkpoint.clone(),
            bids: config.spot.bids.clone(),
            degraded_bids: config.spot.degraded_bids,
        }
    }
}

/// An instance gpuroom launched for a node of the cluster, as EC2 describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInstance {
    pub id: String,
    pub node: String,
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    pub state: String,
    pub private_ip: Option<String>,
    pub private_dns: Option<String>,
}

impl NodeInstance {
    /// Pending or running: it is, or will be, the node.
    pub fn is_live(&self) -> bool {
        matches!(self.state.as_str(), "pending" | "running")
    }
}

/// What to launch for one node, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub pool: PoolTarget,
    /// Spot only.
    pub max_price: Option<MicrosPerHour>,
    /// One node-hour there, spot's risk priced in.
    pub per_hour: f64,
    pub why: String,
}

/// A pool a node may be bought in, priced, or why it may not.
struct Candidate {
    pool: PoolSpec,
    per_hour: f64,
    max_price: Option<MicrosPerHour>,
    market: Option<MicrosPerHour>,
    shut: Option<String>,
}

/// The fleet as the stable floor and the account limit count it, and the
/// nodes up per pool: the cluster's live instances.
pub fn fleet_of(instances: &[NodeInstance], catalogue: &Catalogue) -> (FleetGpus, BTreeMap<PoolTarget, u32>) {
    let mut fleet = FleetGpus::default();
    let mut pools: BTreeMap<PoolTarget, u32> = BTreeMap::new();
    for i in instances.iter().filter(|i| i.is_live()) {
        let gpus = catalogue.instance_type(&i.instance_type).map_or(0, |s| u32::from(s.gpus));
        fleet.total += gpus;
        fleet.elastic += gpus;
        if i.billing != BillingMode::Spot {
            fleet.stable += gpus;
        }
        *pools.entry(PoolTarget { billing: i.billing, instance_type: i.instance_type.clone(), zone: i.zone.clone() }).or_default() += 1;
    }
    (fleet, pools)
}

pub(crate) fn dollars(p: MicrosPerHour) -> String {
    format!("${}/h", aws::price_text(p))
}

fn per_hour_text(x: f64) -> String {
    if x >= 0.01 { format!("${x:.4}/h") } else { format!("${x:.8}/h") }
}

/// What a spot node-hour costs once its interruptions are priced in (the
/// room's formula, with what a fresh instance knows: the hazard's fallback
/// and the prior notice-miss share), and the max price to launch with.
fn spot_terms(
    now: At,
    policy: &PowerPolicy,
    pool: &PoolSpec,
    market: MicrosPerHour,
    cap: Option<MicrosPerHour>,
    at_risk: u32,
) -> Result<(f64, MicrosPerHour), String> {
    let node = &pool.node;
    let od = node.on_demand_price;
    if market >= od {
        return Err(format!("market {} at or above on-demand {}", dollars(market), dollars(od)));
    }
    if let Some(cap) = cap
        && market >= cap
    {
        return Err(format!("market {} at or above max_price {}", dollars(market), dollars(cap)));
    }
    let bid = policy.bids.bid(&BidInput { base: market, market, on_demand: od, progress: 0.0, remaining: None }, policy.degraded_bids);
    if bid.verdict != Verdict::Stay {
        return Err(format!("the max-price curve says not spot at {}", dollars(market)));
    }
    let max_price = cap.map_or(bid.cap, |c| MicrosPerHour(c.0.min(bid.cap.0)));
    let hazard = HazardModel::new(policy.hazard.clone()).map_err(|e| format!("[spot.hazard]: {e}"))?;
    let p = hazard.p_next_minute(&node.instance_type, now, Secs(0), at_risk.max(1)).clamp(0.0, 0.999_999);
    let rate = -60.0 * (1.0 - p).ln();
    let interval = policy.checkpoint.spot_interval(p, None, NOTICE_MISS_PRIOR, None).secs;
    let save_hours = policy.checkpoint.default_cost.0 as f64 / 3600.0;
    let restart_hours = pool.boot.0 as f64 / 3600.0;
    let risk = SpotRisk::from_checkpoints(rate, interval.0.max(1) as f64 / 3600.0, save_hours, restart_hours).map_err(|e| format!("spot risk: {e}"))?;
    let per_hour = effective_spot(market.0 as f64 / 1e6, &risk).map_err(|e| format!("spot price: {e}"))?;
    Ok((per_hour, max_price))
}

/// The pool to launch `entry`'s node in, by the capacity policy: `prices`
/// are the spot markets by zone (`price_problem` says why one is missing),
/// `fleet` and `up` the cluster's instances, `failed` the pools a launch of
/// this node just failed in.
#[allow(clippy::too_many_arguments)]
pub fn choose(
    now: At,
    policy: &PowerPolicy,
    entry: &PowerNode,
    shape: &InstanceShape,
    catalogue: &Catalogue,
    prices: &BTreeMap<String, MicrosPerHour>,
    price_problem: Option<&str>,
    fleet: FleetGpus,
    up: &BTreeMap<PoolTarget, u32>,
    failed: &BTreeMap<PoolTarget, String>,
) -> Result<Choice, String> {
    let billings: &[BillingMode] = match entry.billing {
        PowerBilling::Spot => &[BillingMode::Spot],
        PowerBilling::OnDemand => &[BillingMode::OnDemand],
        PowerBilling::Auto => &[BillingMode::OnDemand, BillingMode::Spot],
    };
    let spot_at_risk: u32 = up.iter().filter(|(t, _)| t.billing == BillingMode::Spot && t.instance_type == entry.instance_type).map(|(_, n)| *n).sum();
    let mut candidates = Vec::new();
    for zone in &entry.zones {
        for &billing in billings {
            let decl = NodeDecl { billing: Some(billing), instance_type: Some(entry.instance_type.clone()), zone: Some(zone.clone()), ..NodeDecl::default() };
            let node = catalogue.host_spec(NodeId(0), &entry.instance_type, Some(&decl), shape.gpus, Some(shape.gpu_model.clone()), Some(shape.gpu_memory));
            let pool = PoolSpec { node, speed: 1.0, max_nodes: u32::MAX, warm_min: 0, boot: DEFAULT_BOOT };
            let market = prices.get(zone).copied();
            let mut c = Candidate { per_hour: f64::INFINITY, max_price: None, market, shut: None, pool };
            if let Some(problem) = c.pool.problem() {
                c.shut = Some(problem);
            } else if billing == BillingMode::Spot {
                let terms = match market {
                    None => Err(price_problem.map_or_else(|| "no spot price".to_string(), |p| format!("no spot price ({p})"))),
                    Some(m) => spot_terms(now, policy, &c.pool, m, entry.max_price, spot_at_risk),
                };
                match terms {
                    Ok((per_hour, max)) => (c.per_hour, c.max_price) = (per_hour, Some(max)),
                    Err(why) => c.shut = Some(why),
                }
            } else {
                c.per_hour = c.pool.node.contract_price.0 as f64 / 1e6;
            }
            if let Some(why) = failed.get(&c.pool.target()) {
                c.shut = Some(format!("launch failed: {why}"));
            }
            candidates.push(c);
        }
    }
    let offers: Vec<Offer<'_>> = candidates
        .iter()
        .map(|c| Offer { pool: &c.pool, nodes: up.get(&c.pool.target()).copied().unwrap_or(0), effective_per_hour: c.per_hour, open: c.shut.is_none() })
        .collect();
    let waiting = Waiting {
        job: JobId(0),
        gpus: shape.gpus,
        gpu_mem: shape.gpu_memory,
        cpus: shape.cpus,
        host_mem: shape.host_memory,
        on_demand: entry.billing != PowerBilling::Spot,
        spot: entry.billing != PowerBilling::OnDemand,
        starts_by: None,
        only: None,
        models: Vec::new(),
    };
    let planned = plan::scale_up(now, &policy.capacity, &offers, &[waiting], &[], fleet);
    let shut: Vec<String> = candidates.iter().filter_map(|c| c.shut.as_ref().map(|why| format!("{}: {why}", c.pool.target()))).collect();
    let Some(chosen) = planned.first().and_then(|p| candidates.iter().find(|c| c.pool.target() == p.pool)) else {
        let gpus = u32::from(shape.gpus);
        let why = if fleet.elastic + gpus > policy.capacity.account_gpu_limit {
            format!(
                "the account's GPU limit ([capacity] account_gpu_limit = {}) would be passed: {} GPUs held",
                policy.capacity.account_gpu_limit, fleet.elastic
            )
        } else if shut.is_empty() {
            "no pool of its entry fits it".to_string()
        } else {
            format!("no pool may be bought: {}", shut.join("; "))
        };
        return Err(why);
    };
    let target = chosen.pool.target();
    let mut why = match (target.billing, chosen.market) {
        (BillingMode::Spot, Some(m)) => format!("spot at {} with its interruptions priced in (market {})", per_hour_text(chosen.per_hour), dollars(m)),
        _ => format!("on-demand at {}", per_hour_text(chosen.per_hour)),
    };
    let cheaper_spot = candidates
        .iter()
        .filter(|c| c.shut.is_none() && c.pool.node.billing == BillingMode::Spot && c.per_hour < chosen.per_hour)
        .min_by(|a, b| a.per_hour.total_cmp(&b.per_hour));
    match cheaper_spot {
        Some(spot) if target.billing != BillingMode::Spot => why.push_str(&format!(
            ", not spot at {}: the stable floor ([capacity] min_stable_share = {}) holds, {} of {} GPUs are non-interruptible",
            per_hour_text(spot.per_hour),
            policy.capacity.min_stable_share,
            fleet.stable,
            fleet.total
        )),
        _ => why.push_str(", the cheapest open pool"),
    }
    let on_demand = candidates.iter().filter(|c| c.shut.is_none() && c.pool.node.billing != BillingMode::Spot).map(|c| c.per_hour).min_by(f64::total_cmp);
    if let (BillingMode::Spot, Some(od)) = (target.billing, on_demand) {
        why.push_str(&format!(" (on-demand: {})", per_hour_text(od)));
    }
    if entry.billing != PowerBilling::Auto {
        why.push_str(&format!(" (billing = {:?})", entry.billing.label()));
    }
    if !shut.is_empty() {
        why.push_str(&format!("; not bought: {}", shut.join("; ")));
    }
    Ok(Choice { pool: target, max_price: chosen.max_price, per_hour: chosen.per_hour, why })
}
