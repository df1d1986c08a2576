//! Buying mix: what one useful GPU-hour costs under each billing mode, and the
//! exact cheapest on-demand / reserved / spot split for a demand (SPEC §1).
//!
//! It owns the effective prices (reserved over its utilization, spot with the
//! expected interruption and checkpoint overhead priced in), the reserved
//! break-even curve the console draws, the mix linear program with its exact
//! solution and the constraints that bind, and the naive 5% grid of SPEC §1,
//! kept as the reference the optimizer must beat.
//!
//! It must not estimate hazards (`market::hazard` does; the rate arrives here
//! as a number), read prices, traces or the clock, or touch the ledger: these
//! are planning figures in currency per hour as `f64`, not the integer
//! micro-units that `accrual` and `books` charge.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// Utilization is clamped up to this before dividing by it: an idle
/// reservation is very dear, not infinitely dear, so curves and plans stay finite.
pub const MIN_UTILIZATION: f64 = 1e-3;
/// SPEC §1's naive optimizer: weights on a 5% grid ...
pub const NAIVE_STEP: f64 = 0.05;
/// ... with at most 20% on-demand.
pub const NAIVE_OD_CAP: f64 = 0.20;
/// Finer grids than this are refused: `naive_grid` walks `(1/step)²` mixes.
const MAX_GRID_STEPS: f64 = 1000.0;
/// A relaxed constraint must save more than this share of the cost to count
/// as binding, so that rounding in the sums never reports a phantom.
const BINDING_TOLERANCE: f64 = 1e-9;

/// Input the mix model refuses, naming the field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum MixError {
    #[error("{what} must be a finite number, got {value}")]
    NotFinite { what: String, value: f64 },
    #[error("{what} must not be negative, got {value}")]
    Negative { what: String, value: f64 },
    #[error("{what} must be a fraction in [0, 1], got {value}")]
    NotAFraction { what: String, value: f64 },
    #[error("demand must be more than zero GPUs, got {0}")]
    NoDemand(f64),
    #[error("the on-demand price must be above zero to compare reserved with it, got {0}")]
    FreeOnDemand(f64),
    #[error("a checkpoint interval must be longer than zero hours, got {0}")]
    NoInterval(f64),
    #[error("grid step {0} must divide 1 into between 1 and 1000 whole steps")]
    BadStep(f64),
}

fn finite(what: &str, value: f64) -> Result<f64, MixError> {
    if value.is_finite() { Ok(value) } else { Err(MixError::NotFinite { what: what.to_string(), value }) }
}

fn non_negative(what: &str, value: f64) -> Result<f64, MixError> {
    if finite(what, value)? < 0.0 { Err(MixError::Negative { what: what.to_string(), value }) } else { Ok(value) }
}

fn fraction(what: &str, value: f64) -> Result<f64, MixError> {
    if (0.0..=1.0).contains(&finite(what, value)?) { Ok(value) } else { Err(MixError::NotAFraction { what: what.to_string(), value }) }
}

// ---------------------------------------------------------------------------
// Reserved: prepaid, so idle hours are paid for too.

/// Price of one *useful* reserved GPU-hour: the prepaid hourly price spread
/// over the share of hours that do work. `utilization` is a fraction in
/// [0, 1], clamped up to [`MIN_UTILIZATION`].
pub fn effective_reserved(reserved_price: f64, utilization: f64) -> Result<f64, MixError> {
    let price = non_negative("reserved price", reserved_price)?;
    let u = fraction("utilization", utilization)?;
    Ok(price / u.max(MIN_UTILIZATION))
}

/// The utilization `u* = p_res / p_od` at which a useful reserved hour costs
/// what an on-demand hour does; below it reserved is dearer. Above 1 means a
/// reservation never pays at these prices.
pub fn break_even(reserved_price: f64, on_demand_price: f64) -> Result<f64, MixError> {
    let res = non_negative("reserved price", reserved_price)?;
    let od = non_negative("on-demand price", on_demand_price)?;
    if od <= 0.0 {
        return Err(MixError::FreeOnDemand(od));
    }
    Ok(res / od)
}

/// Where the current utilization sits on the reserved curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub utilization: f64,
    /// Reserved price per useful GPU-hour at `utilization`.
    pub effective: f64,
    /// True when reserved is cheaper than on-demand here (utilization above break-even).
    pub reserved_cheaper: bool,
    /// `1 − effective / on-demand`: positive is the saving of reserved over
    /// on-demand, negative what it overpays.
    pub saving_vs_on_demand: f64,
}

/// Everything the console needs to draw the reserved effective-price curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservedCurve {
    /// `(utilization, effective price)` at `u = i / points` for `i = 1..=points`.
    pub points: Vec<(f64, f64)>,
    /// The on-demand price, the flat line the curve crosses.
    pub on_demand: f64,
    /// `p_res / p_od`.
    pub break_even: f64,
    pub current: CurvePoint,
}

/// The reserved curve over `(0, 1]` with its break-even and the current point.
pub fn reserved_curve(reserved_price: f64, on_demand_price: f64, utilization: f64, points: usize) -> Result<ReservedCurve, MixError> {
    let break_even = break_even(reserved_price, on_demand_price)?;
    let effective = effective_reserved(reserved_price, utilization)?;
    let points = (1..=points)
        .map(|i| {
            let u = i as f64 / points as f64;
            (u, reserved_price / u.max(MIN_UTILIZATION))
        })
        .collect();
    let current = CurvePoint { utilization, effective, reserved_cheaper: effective < on_demand_price, saving_vs_on_demand: 1.0 - effective / on_demand_price };
    Ok(ReservedCurve { points, on_demand: on_demand_price, break_even, current })
}

/// Just the `(utilization, effective price)` points of [`reserved_curve`];
/// empty (nothing to draw) when the prices are refused.
pub fn curve(reserved_price: f64, on_demand_price: f64, points: usize) -> Vec<(f64, f64)> {
    reserved_curve(reserved_price, on_demand_price, 1.0, points).map(|c| c.points).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Spot: cheap per hour, but an interruption throws work away.

/// What running on one spot type costs beyond its market price, in hours.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpotRisk {
    /// Measured hazard: interruptions per hour of running on this type (1/h).
    pub interruptions_per_hour: f64,
    /// Work redone after an interruption, since the last checkpoint (h).
    pub recompute_hours: f64,
    /// Getting running again: new instance, restore, warm-up (h).
    pub restart_hours: f64,
    /// Share of running time spent saving checkpoints: save time / interval (dimensionless, in [0, 1]).
    pub checkpoint_fraction: f64,
}

impl SpotRisk {
    /// No risk at all: spot at its market price, as the naive model sees it.
    pub const NONE: SpotRisk = SpotRisk { interruptions_per_hour: 0.0, recompute_hours: 0.0, restart_hours: 0.0, checkpoint_fraction: 0.0 };

    /// Risk of a job that saves every `interval_hours`, each save taking
    /// `save_hours`. Interruptions arrive at a constant rate, so one lands
    /// uniformly within an interval and loses half an interval on average.
    pub fn from_checkpoints(interruptions_per_hour: f64, interval_hours: f64, save_hours: f64, restart_hours: f64) -> Result<SpotRisk, MixError> {
        let interval = non_negative("checkpoint interval", interval_hours)?;
        if interval <= 0.0 {
            return Err(MixError::NoInterval(interval));
        }
        let save = non_negative("checkpoint save time", save_hours)?;
        let risk = SpotRisk {
            interruptions_per_hour,
            recompute_hours: interval / 2.0,
            restart_hours,
            checkpoint_fraction: fraction("checkpoint save time / interval", save / interval)?,
        };
        risk.overhead()?;
        Ok(risk)
    }

    /// Expected extra paid hours per hour of useful work (dimensionless):
    ///
    /// `overhead = λ · (recompute + restart) + checkpoint_fraction`
    ///
    /// with λ in interruptions per hour and the two durations in hours. It is
    /// first order: the work lost while redoing lost work is left out, which
    /// understates the overhead by about its square (≈ 4% of itself at the
    /// measured V100 rates), against an optimizer that would otherwise see spot
    /// as free of risk.
    pub fn overhead(&self) -> Result<f64, MixError> {
        let rate = non_negative("interruptions per hour", self.interruptions_per_hour)?;
        let recompute = non_negative("recompute hours", self.recompute_hours)?;
        let restart = non_negative("restart hours", self.restart_hours)?;
        let checkpoint = fraction("checkpoint fraction", self.checkpoint_fraction)?;
        finite("spot overhead", rate * (recompute + restart) + checkpoint)
    }
}

/// Price of one useful spot GPU-hour: `market price × (1 + overhead)`, see
/// [`SpotRisk::overhead`].
pub fn effective_spot(market_price: f64, risk: &SpotRisk) -> Result<f64, MixError> {
    let price = non_negative("spot price", market_price)?;
    finite("spot effective price", price * (1.0 + risk.overhead()?))
}

// ---------------------------------------------------------------------------
// The mix as a linear program.

/// One spot instance type on offer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpotOffer {
    pub name: String,
    /// Market price per GPU-hour.
    pub price: f64,
    pub risk: SpotRisk,
    /// GPUs the market can supply on average; `None` for no limit.
    pub capacity_gpus: Option<f64>,
}

/// The buying problem for one period.
///
/// Formulation. `demand_gpus` D is the average number of GPUs doing useful
/// work over the period. Each mode is priced per *useful* GPU-hour:
///
/// * on-demand at `on_demand_price`: billed per second, so only useful hours are bought;
/// * reserved at `reserved_price / utilization`: `utilization` u is the share
///   of hours the reserved fleet would be busy, so serving `x_res` GPUs of
///   demand means reserving `R = x_res / u` GPUs and paying `p_res · R`;
/// * spot type k at its [`effective_spot`] price.
///
/// Minimise `c_od·x_od + c_res·x_res + Σ c_k·x_k` subject to
/// `x_od + x_res + Σ x_k = D`, `x_k ≤ capacity_k`,
/// `x_od + x_res ≥ sla_floor · D` (capacity that cannot be taken back),
/// `x_od ≤ on_demand_cap · D` when a cap is set, and everything ≥ 0.
/// Reserved capacity is unlimited, so every valid problem is feasible.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixProblem {
    pub demand_gpus: f64,
    /// Fraction in [0, 1]; clamped up to [`MIN_UTILIZATION`] when dividing.
    pub utilization: f64,
    pub on_demand_price: f64,
    /// Prepaid price per reserved GPU-hour, busy or not.
    pub reserved_price: f64,
    pub spot: Vec<SpotOffer>,
    /// Share of demand that must run on on-demand or reserved capacity.
    pub sla_floor: f64,
    /// Most of the demand that may run on on-demand, as a share; `None` for no cap.
    pub on_demand_cap: Option<f64>,
}

impl MixProblem {
    pub fn validate(&self) -> Result<(), MixError> {
        let demand = finite("demand", self.demand_gpus)?;
        if demand <= 0.0 {
            return Err(MixError::NoDemand(demand));
        }
        fraction("utilization", self.utilization)?;
        non_negative("on-demand price", self.on_demand_price)?;
        non_negative("reserved price", self.reserved_price)?;
        fraction("SLA floor", self.sla_floor)?;
        if let Some(cap) = self.on_demand_cap {
            fraction("on-demand cap", cap)?;
        }
        for offer in &self.spot {
            effective_spot(offer.price, &offer.risk).map_err(|e| rename(e, &offer.name))?;
            if let Some(cap) = offer.capacity_gpus {
                non_negative(&format!("{} capacity", offer.name), cap)?;
            }
        }
        Ok(())
    }

    /// The same problem as the naive model sees it: spot at its raw price, no
    /// risk, no capacity limit, no SLA floor (the on-demand cap is policy, not
    /// risk, and is kept).
    pub fn naive(&self) -> MixProblem {
        MixProblem {
            spot: self.spot.iter().map(|o| SpotOffer { name: o.name.clone(), price: o.price, risk: SpotRisk::NONE, capacity_gpus: None }).collect(),
            sla_floor: 0.0,
            ..self.clone()
        }
    }
}

/// Says which spot type a field error came from.
fn rename(error: MixError, name: &str) -> MixError {
    match error {
        MixError::NotFinite { what, value } => MixError::NotFinite { what: format!("{name} {what}"), value },
        MixError::Negative { what, value } => MixError::Negative { what: format!("{name} {what}"), value },
        MixError::NotAFraction { what, value } => MixError::NotAFraction { what: format!("{name} {what}"), value },
        other => other,
    }
}

/// One mode's part of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// GPUs of demand served (average over the period).
    pub gpus: f64,
    /// `gpus / demand`.
    pub fraction: f64,
    /// Price per useful GPU-hour the optimizer used.
    pub unit_price: f64,
    pub cost_per_hour: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpotShare {
    pub name: String,
    pub market_price: f64,
    /// [`SpotRisk::overhead`] as priced (0 in the naive model).
    pub overhead: f64,
    pub share: Share,
}

/// A constraint of [`MixProblem`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Constraint {
    SlaFloor,
    OnDemandCap,
    SpotCapacity { index: usize, name: String },
}

/// A constraint that binds: dropping it alone would make the plan cheaper by
/// `saving_per_hour` (what the constraint costs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    pub constraint: Constraint,
    pub saving_per_hour: f64,
}

/// The cheapest split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixPlan {
    pub demand_gpus: f64,
    pub on_demand: Share,
    pub reserved: Share,
    /// Reserved GPUs to buy: `reserved.gpus / utilization`.
    pub reserved_fleet_gpus: f64,
    /// In the problem's order.
    pub spot: Vec<SpotShare>,
    pub cost_per_hour: f64,
    /// `cost_per_hour / demand`: the mixed price of SPEC §1.
    pub cost_per_gpu_hour: f64,
    pub binding: Vec<Binding>,
}

impl MixPlan {
    pub fn spot_fraction(&self) -> f64 {
        self.spot.iter().map(|s| s.share.fraction).sum()
    }

    pub fn binds(&self, constraint: &Constraint) -> bool {
        self.binding.iter().any(|b| &b.constraint == constraint)
    }
}

/// The risk-aware plan next to the naive one, and what the naive plan really
/// costs once risk is priced in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixComparison {
    pub risk_aware: MixPlan,
    pub naive: MixPlan,
    /// The naive split priced at the risk-aware unit prices.
    pub naive_cost_with_risk: f64,
    /// False when the naive split breaks the SLA floor or a spot capacity.
    pub naive_meets_constraints: bool,
}

/// The problem in numbers: option 0 is on-demand, 1 reserved, 2.. the spot types.
struct Lp {
    demand: f64,
    cost: Vec<f64>,
    /// Upper bound in GPUs; infinite for none.
    cap: Vec<f64>,
    floor: f64,
}

const ON_DEMAND: usize = 0;
const RESERVED: usize = 1;
const FIRM: usize = 2;

impl Lp {
    fn new(problem: &MixProblem) -> Result<Lp, MixError> {
        problem.validate()?;
        let d = problem.demand_gpus;
        let mut cost = vec![problem.on_demand_price, effective_reserved(problem.reserved_price, problem.utilization)?];
        let mut cap = vec![problem.on_demand_cap.map_or(f64::INFINITY, |c| c * d), f64::INFINITY];
        for offer in &problem.spot {
            cost.push(effective_spot(offer.price, &offer.risk)?);
            cap.push(offer.capacity_gpus.unwrap_or(f64::INFINITY));
        }
        Ok(Lp { demand: d, cost, cap, floor: problem.sla_floor * d })
    }

    /// Cheapest first; ties go to the lower index, so non-interruptible
    /// capacity (and on-demand, which can be given back) wins a tie.
    fn order(&self, options: std::ops::Range<usize>) -> Vec<usize> {
        let mut order: Vec<usize> = options.collect();
        order.sort_by(|a, b| self.cost[*a].total_cmp(&self.cost[*b]).then(a.cmp(b)));
        order
    }

    /// The exact optimum, greedily:
    ///
    /// 1. cover the floor `F` from the firm options (on-demand, reserved), cheapest first;
    /// 2. cover the rest of `D` from every option's remaining room, cheapest first.
    ///
    /// Why this is optimal. Fix the firm total `y`. The problem splits into
    /// "cheapest `y` from the firm options" and "cheapest `D − y` from spot",
    /// each a fractional knapsack with one equality and box bounds, solved by
    /// filling cheapest first (moving a unit from a dearer used option to a
    /// cheaper one with room never raises the cost and keeps every
    /// constraint). Their costs `g(y)` and `h(D − y)` are piecewise linear with
    /// non-decreasing slopes, so `φ(y) = g(y) + h(D − y)` is convex on the
    /// feasible `y ∈ [max(F, D − Σ spot capacity), D]` and its minimum is
    /// where raising `y` stops paying: the next firm unit costs at least the
    /// spot unit it would replace. Step 1 puts `y` at `F` with the cheapest
    /// firm units (the first `F` of `g`'s fill order); step 2 merges the rest of
    /// `g`'s units with `h`'s in one ascending order, so it raises `y` exactly
    /// while the next firm unit is cheaper than the next spot unit, or while
    /// spot has run out: it stops at the minimiser of `φ`. Reserved is
    /// unbounded, so both steps always complete.
    fn solve(&self) -> Vec<f64> {
        let mut used = vec![0.0; self.cost.len()];
        let mut need = self.floor;
        for i in self.order(0..FIRM) {
            need = self.take(i, need, &mut used);
        }
        let mut rest = self.demand - used.iter().sum::<f64>();
        for i in self.order(0..self.cost.len()) {
            rest = self.take(i, rest, &mut used);
        }
        used
    }

    fn take(&self, i: usize, need: f64, used: &mut [f64]) -> f64 {
        if need <= 0.0 {
            return 0.0;
        }
        let (Some(x), Some(cap)) = (used.get_mut(i), self.cap.get(i)) else { return need };
        let amount = need.min((cap - *x).max(0.0));
        *x += amount;
        if amount >= need { 0.0 } else { need - amount }
    }

    fn total(&self, x: &[f64]) -> f64 {
        x.iter().zip(&self.cost).map(|(x, c)| x * c).sum()
    }
}

/// The exact cheapest split of `problem`, with the constraints that bind.
pub fn solve(problem: &MixProblem) -> Result<MixPlan, MixError> {
    let lp = Lp::new(problem)?;
    let x = lp.solve();
    let cost = lp.total(&x);
    let mut binding = Vec::new();
    let mut relaxed = |constraint: Constraint, lp: Lp| {
        let saving = cost - lp.total(&lp.solve());
        if saving > BINDING_TOLERANCE * cost.abs().max(1.0) {
            binding.push(Binding { constraint, saving_per_hour: saving });
        }
    };
    if problem.sla_floor > 0.0 {
        relaxed(Constraint::SlaFloor, Lp { floor: 0.0, ..Lp::new(problem)? });
    }
    if problem.on_demand_cap.is_some() {
        relaxed(Constraint::OnDemandCap, Lp::new(&MixProblem { on_demand_cap: None, ..problem.clone() })?);
    }
    for (index, offer) in problem.spot.iter().enumerate() {
        if offer.capacity_gpus.is_some() {
            let mut open = problem.clone();
            if let Some(o) = open.spot.get_mut(index) {
                o.capacity_gpus = None;
            }
            relaxed(Constraint::SpotCapacity { index, name: offer.name.clone() }, Lp::new(&open)?);
        }
    }
    Ok(plan(problem, &lp, &x, binding))
}

/// The naive model's plan: [`solve`] on [`MixProblem::naive`].
pub fn solve_naive(problem: &MixProblem) -> Result<MixPlan, MixError> {
    problem.validate()?;
    solve(&problem.naive())
}

/// Both plans, and the naive one priced with risk.
pub fn compare(problem: &MixProblem) -> Result<MixComparison, MixError> {
    let risk_aware = solve(problem)?;
    let naive = solve_naive(problem)?;
    let lp = Lp::new(problem)?;
    let x = amounts(&naive);
    let slack = BINDING_TOLERANCE * problem.demand_gpus;
    let firm = x.iter().take(FIRM).sum::<f64>();
    let within_caps = x.iter().zip(&lp.cap).all(|(x, cap)| *x <= cap + slack);
    Ok(MixComparison { naive_cost_with_risk: lp.total(&x), naive_meets_constraints: firm + slack >= lp.floor && within_caps, risk_aware, naive })
}

fn amounts(plan: &MixPlan) -> Vec<f64> {
    let mut x = vec![plan.on_demand.gpus, plan.reserved.gpus];
    x.extend(plan.spot.iter().map(|s| s.share.gpus));
    x
}

fn plan(problem: &MixProblem, lp: &Lp, x: &[f64], binding: Vec<Binding>) -> MixPlan {
    let d = lp.demand;
    let share = |i: usize| {
        let gpus = x.get(i).copied().unwrap_or(0.0);
        let unit_price = lp.cost.get(i).copied().unwrap_or(0.0);
        Share { gpus, fraction: gpus / d, unit_price, cost_per_hour: gpus * unit_price }
    };
    let reserved = share(RESERVED);
    let cost = lp.total(x);
    MixPlan {
        demand_gpus: d,
        on_demand: share(ON_DEMAND),
        reserved_fleet_gpus: reserved.gpus / problem.utilization.max(MIN_UTILIZATION),
        reserved,
        spot: problem
            .spot
            .iter()
            .enumerate()
            .map(|(k, o)| SpotShare { name: o.name.clone(), market_price: o.price, overhead: o.risk.overhead().unwrap_or(0.0), share: share(FIRM + k) })
            .collect(),
        cost_per_hour: cost,
        cost_per_gpu_hour: cost / d,
        binding,
    }
}

// ---------------------------------------------------------------------------
// SPEC §1's naive optimizer, kept to be beaten.

/// Raw prices per GPU-hour for the grid: reserved is divided by utilization
/// there, spot is taken at its market price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridPrices {
    pub on_demand: f64,
    pub reserved: f64,
    pub spot: f64,
}

/// The grid's pick: weights summing to 1 and the mixed price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridChoice {
    pub on_demand: f64,
    pub reserved: f64,
    pub spot: f64,
    /// `Σ weight × effective price`.
    pub price: f64,
}

/// Enumerates weights on a `step` grid with on-demand at most `on_demand_cap`
/// and returns the cheapest mix by `Σ w × effective price` (reserved at
/// `p_res / u`). Ties keep the first found, with less on-demand, then less
/// reserved. This is SPEC §1's naive optimizer with `NAIVE_STEP` and
/// `NAIVE_OD_CAP`; it sees no risk, no capacity and no floor.
pub fn naive_grid(utilization: f64, step: f64, on_demand_cap: f64, prices: &GridPrices) -> Result<GridChoice, MixError> {
    let reserved = effective_reserved(prices.reserved, utilization)?;
    let od = non_negative("on-demand price", prices.on_demand)?;
    let spot = non_negative("spot price", prices.spot)?;
    let cap = fraction("on-demand cap", on_demand_cap)?;
    let step = finite("grid step", step)?;
    let steps = if step > 0.0 { (1.0 / step).round() } else { 0.0 };
    if !(1.0..=MAX_GRID_STEPS).contains(&steps) || (steps * step - 1.0).abs() > 1e-9 {
        return Err(MixError::BadStep(step));
    }
    let n = steps as u32;
    let mut best: Option<GridChoice> = None;
    for i in 0..=n {
        let w_od = f64::from(i) / steps;
        if w_od > cap + 1e-9 {
            break;
        }
        for j in 0..=(n - i) {
            let w_res = f64::from(j) / steps;
            let w_spot = f64::from(n - i - j) / steps;
            let price = w_od * od + w_res * reserved + w_spot * spot;
            if best.as_ref().is_none_or(|b| price.total_cmp(&b.price) == Ordering::Less) {
                best = Some(GridChoice { on_demand: w_od, reserved: w_res, spot: w_spot, price });
            }
        }
    }
    // i = 0 always runs, so `best` is set; the fallback only keeps this panic-free.
    Ok(best.unwrap_or(GridChoice { on_demand: 0.0, reserved: 0.0, spot: 1.0, price: spot }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, price: f64, risk: SpotRisk, cap: Option<f64>) -> SpotOffer {
        SpotOffer { name: name.into(), price, risk, capacity_gpus: cap }
    }

    fn problem(u: f64, spot: Vec<SpotOffer>, floor: f64, od_cap: Option<f64>) -> MixProblem {
        MixProblem { demand_gpus: 100.0, utilization: u, on_demand_price: 0.85, reserved_price: 0.30, spot, sla_floor: floor, on_demand_cap: od_cap }
    }

    /// Convex φ(y) is minimised at a breakpoint: try every one and compare.
    fn by_breakpoints(lp: &Lp) -> f64 {
        let fill = |opts: &[usize], amount: f64| -> Option<f64> {
            let mut order = opts.to_vec();
            order.sort_by(|a, b| lp.cost[*a].total_cmp(&lp.cost[*b]));
            let (mut left, mut cost) = (amount, 0.0);
            for i in order {
                let t = left.min(lp.cap[i]);
                cost += t * lp.cost[i];
                left -= t;
            }
            (left <= 1e-12).then_some(cost)
        };
        let firm: Vec<usize> = (0..FIRM).collect();
        let mut spot: Vec<usize> = (FIRM..lp.cost.len()).collect();
        spot.sort_by(|a, b| lp.cost[*a].total_cmp(&lp.cost[*b]));
        let mut ys = vec![lp.floor, lp.demand];
        let mut acc = 0.0;
        for i in &spot {
            acc += lp.cap[*i];
            ys.push(lp.demand - acc);
        }
        ys.push(lp.cap[ON_DEMAND]);
        ys.retain(|y| y.is_finite() && *y >= lp.floor && *y <= lp.demand);
        ys.iter().filter_map(|y| Some(fill(&firm, *y)? + fill(&spot, lp.demand - y)?)).fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn reserved_price_over_utilization_and_break_even() {
        assert_eq!(effective_reserved(0.30, 0.5), Ok(0.60));
        assert_eq!(effective_reserved(0.30, 0.0), Ok(0.30 / MIN_UTILIZATION));
        let u = break_even(0.30, 0.85).unwrap();
        assert!((u - 0.352_941).abs() < 1e-6);
        let c = reserved_curve(0.30, 0.85, 0.6, 20).unwrap();
        assert_eq!(c.points.len(), 20);
        assert_eq!(c.points[19], (1.0, 0.30));
        assert!(c.current.reserved_cheaper);
        assert!(curve(f64::NAN, 0.85, 10).is_empty());
        assert_eq!(break_even(0.3, 0.0), Err(MixError::FreeOnDemand(0.0)));
    }

    #[test]
    fn spot_overhead_is_rate_times_lost_hours_plus_checkpoint_share() {
        let risk = SpotRisk::from_checkpoints(0.5, 1.0, 0.05, 0.1).unwrap();
        assert_eq!(risk.recompute_hours, 0.5);
        assert!((risk.overhead().unwrap() - (0.5 * 0.6 + 0.05)).abs() < 1e-12);
        assert!((effective_spot(0.2, &risk).unwrap() - 0.2 * 1.35).abs() < 1e-12);
        assert!(matches!(SpotRisk::from_checkpoints(0.5, 0.0, 0.0, 0.0), Err(MixError::NoInterval(_))));
        let bad = SpotRisk { interruptions_per_hour: f64::NAN, ..SpotRisk::NONE };
        assert!(matches!(effective_spot(0.2, &bad), Err(MixError::NotFinite { .. })));
    }

    #[test]
    fn greedy_matches_breakpoint_enumeration() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..500 {
            let spot = (0..3)
                .map(|k| {
                    let risk = SpotRisk { interruptions_per_hour: next(), recompute_hours: next(), ..SpotRisk::NONE };
                    offer(&format!("s{k}"), next(), risk, (next() < 0.7).then(|| next() * 80.0))
                })
                .collect();
            let mut p = problem(next(), spot, next(), (next() < 0.5).then(&mut next));
            p.on_demand_price = next() * 2.0;
            let lp = Lp::new(&p).unwrap();
            let x = lp.solve();
            assert!((x.iter().sum::<f64>() - 100.0).abs() < 1e-9);
            let exact = by_breakpoints(&lp);
            assert!((lp.total(&x) - exact).abs() < 1e-9, "{p:?}: greedy {} vs {exact}", lp.total(&x));
        }
    }

    #[test]
    fn binding_constraints_are_the_ones_that_cost_money() {
        let v100 = offer("v100", 0.2, SpotRisk::NONE, Some(60.0));
        let plan = solve(&problem(0.8, vec![v100], 0.2, Some(0.2))).unwrap();
        assert_eq!(plan.spot[0].share.gpus, 60.0);
        assert_eq!(plan.reserved.gpus, 40.0);
        assert!(plan.binds(&Constraint::SpotCapacity { index: 0, name: "v100".into() }));
        assert!(!plan.binds(&Constraint::SlaFloor));
        assert!(!plan.binds(&Constraint::OnDemandCap));
        assert!((plan.reserved_fleet_gpus - 50.0).abs() < 1e-12);
    }

    #[test]
    fn refused_input_names_the_field() {
        let p = problem(0.5, vec![offer("v100", 0.2, SpotRisk::NONE, Some(-1.0))], 0.2, None);
        assert_eq!(solve(&p), Err(MixError::Negative { what: "v100 capacity".into(), value: -1.0 }));
        let p = problem(0.5, vec![offer("v100", f64::NAN, SpotRisk::NONE, None)], 0.2, None);
        assert!(matches!(solve(&p), Err(MixError::NotFinite { what, .. }) if what == "v100 spot price"));
        assert!(matches!(solve(&problem(1.5, vec![], 0.2, None)), Err(MixError::NotAFraction { .. })));
        assert!(matches!(naive_grid(0.5, 0.03, 0.2, &GridPrices { on_demand: 1.0, reserved: 0.3, spot: 0.2 }), Err(MixError::BadStep(_))));
    }
}
