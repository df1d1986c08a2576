//! `gpuroom mix`: what the exact mix optimizer makes of real figures — the
//! p3.2xlarge spot prices and the V100 preemption traces embedded in the
//! binary — printed with the reserved effective-price curve and where the
//! given utilization sits on it.
//!
//! Gathers inputs from the traces and formats text; the optimization itself
//! is `cost::mix`.

use std::fmt::Write as _;

use crate::cost::mix::{self, Constraint, GridPrices, MixProblem, SpotOffer, SpotRisk};
use crate::domain::ids::PoolKey;
use crate::market::hazard::Survival;
use crate::market::series;
use crate::sim::Traces;

#[derive(Clone, Debug, clap::Args)]
pub struct MixArgs {
    /// GPUs of demand to cover (average over the period).
    #[arg(long, default_value_t = 100.0)]
    pub demand: f64,
    /// Utilization reserved capacity would run at (0..=1).
    #[arg(long, default_value_t = 0.6)]
    pub utilization: f64,
    /// Share of demand that must be non-interruptible (latency-critical services).
    #[arg(long, default_value_t = 0.2)]
    pub sla_floor: f64,
    /// Spot GPUs obtainable per zone.
    #[arg(long, default_value_t = 20.0)]
    pub spot_capacity: f64,
    /// On-demand price per GPU-hour (p3.2xlarge: one V100).
    #[arg(long, default_value_t = 3.06)]
    pub on_demand: f64,
    /// Reserved price as a share of on-demand (1-year, no upfront ≈ 0.65).
    #[arg(long, default_value_t = 0.65)]
    pub reserved_share: f64,
    /// Checkpoint interval, save time and restart time (hours).
    #[arg(long, default_value_t = 0.5)]
    pub checkpoint_hours: f64,
    #[arg(long, default_value_t = 0.01)]
    pub save_hours: f64,
    #[arg(long, default_value_t = 0.05)]
    pub restart_hours: f64,
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

pub fn report(traces: &Traces, args: &MixArgs) -> Result<String, String> {
    let p_od = args.on_demand;
    let p_res = args.on_demand * args.reserved_share;
    let mut s = String::new();
    let curve = mix::reserved_curve(p_res, p_od, args.utilization, 20).map_err(|e| e.to_string())?;
    let _ = writeln!(
        s,
        "Reserved effective price = ${p_res:.3}/h ÷ utilization, against on-demand ${p_od:.2}/h: break-even at {} utilization.",
        pct(curve.break_even)
    );
    let _ = writeln!(s, "  utilization  effective   vs on-demand");
    let here = (args.utilization * 20.0).round() as usize;
    for (i, (u, price)) in curve.points.iter().enumerate() {
        if i % 2 == 1 && i + 1 != here {
            continue;
        }
        let mark = if i + 1 == here { "  ◀ here" } else { "" };
        let bar = "█".repeat(((price / p_od).min(3.0) * 10.0).round() as usize);
        let _ = writeln!(s, "  {:>10}  ${:>7.2}/h  {:>+6.0}%  {bar}{mark}", pct(*u), price, 100.0 * (price / p_od - 1.0));
    }
    let _ = writeln!(
        s,
        "At {} utilization reserved costs ${:.2}/h: {} than on-demand.\n",
        pct(curve.current.utilization),
        curve.current.effective,
        if curve.current.reserved_cheaper { "cheaper" } else { "dearer" }
    );

    let mut offers = Vec::new();
    let _ = writeln!(s, "Spot p3.2xlarge, priced with the hazard measured on the real V100 traces:");
    for (name, trace) in &traces.preemption {
        let file = name.rsplit('/').next().unwrap_or(name);
        let zone = file.split('_').next().unwrap_or(file).to_string();
        let key = PoolKey { zone: zone.clone(), instance_type: "p3.2xlarge".into() };
        let Some(steps) = traces.prices.pools.get(&key) else { continue };
        let (Some(first), Some(last)) = (steps.first(), steps.last()) else { continue };
        let Some(mean) = series::time_weighted_mean(steps, first.0, last.0) else { continue };
        let survival = Survival::new(&trace.lifetimes());
        let rate = survival.mean_rate().unwrap_or(0.0) * 3600.0;
        let risk = SpotRisk::from_checkpoints(rate, args.checkpoint_hours, args.save_hours, args.restart_hours).map_err(|e| e.to_string())?;
        let price = mean.0 as f64 / 1e6;
        let effective = mix::effective_spot(price, &risk).map_err(|e| e.to_string())?;
        let _ = writeln!(
            s,
            "  {zone:<11} market ${price:.3}/h  {rate:.2} interruptions/h  overhead {:+.0}%  → ${effective:.3}/h  capacity {:.0} GPUs",
            100.0 * risk.overhead().unwrap_or(0.0),
            args.spot_capacity
        );
        offers.push(SpotOffer { name: zone, price, risk, capacity_gpus: Some(args.spot_capacity) });
    }
    let problem = MixProblem {
        demand_gpus: args.demand,
        utilization: args.utilization,
        on_demand_price: p_od,
        reserved_price: p_res,
        spot: offers,
        sla_floor: args.sla_floor,
        on_demand_cap: None,
    };
    let comparison = mix::compare(&problem).map_err(|e| e.to_string())?;
    let plan = &comparison.risk_aware;
    let _ = writeln!(
        s,
        "\nCheapest split for {:.0} GPUs at {} utilization with {} non-interruptible (exact):",
        args.demand,
        pct(args.utilization),
        pct(args.sla_floor)
    );
    let spots: Vec<String> = plan.spot.iter().filter(|x| x.share.gpus > 0.0).map(|x| format!("{} {:.0}", x.name, x.share.gpus)).collect();
    let _ = writeln!(
        s,
        "  on-demand {:.0} GPUs, reserved {:.0} (a fleet of {:.0}), spot {:.0} ({})  →  ${:.2}/h, ${:.3} a GPU-hour",
        plan.on_demand.gpus,
        plan.reserved.gpus,
        plan.reserved_fleet_gpus,
        plan.spot.iter().map(|x| x.share.gpus).sum::<f64>(),
        spots.join(", "),
        plan.cost_per_hour,
        plan.cost_per_gpu_hour
    );
    for b in &plan.binding {
        let what = match &b.constraint {
            Constraint::SlaFloor => "the SLA floor".to_string(),
            Constraint::OnDemandCap => "the on-demand cap".to_string(),
            Constraint::SpotCapacity { name, .. } => format!("spot capacity in {name}"),
        };
        let _ = writeln!(s, "  binds: {what} (costs ${:.2}/h)", b.saving_per_hour);
    }
    let naive = &comparison.naive;
    let _ = writeln!(
        s,
        "Naive (spot at its market price, no hazard, floor or capacity): {} spot at ${:.2}/h; with the hazard priced in it costs ${:.2}/h{}.",
        pct(naive.spot_fraction()),
        naive.cost_per_hour,
        comparison.naive_cost_with_risk,
        if comparison.naive_meets_constraints { "" } else { " and breaks the floor or the capacity" }
    );
    let spot_mean = problem.spot.iter().map(|o| o.price).sum::<f64>() / problem.spot.len().max(1) as f64;
    let grid = mix::naive_grid(args.utilization, mix::NAIVE_STEP, mix::NAIVE_OD_CAP, &GridPrices { on_demand: p_od, reserved: p_res, spot: spot_mean })
        .map_err(|e| e.to_string())?;
    let _ = writeln!(
        s,
        "SPEC §1's 5% grid with on-demand ≤ 20% picks on-demand {}, reserved {}, spot {}.",
        pct(grid.on_demand),
        pct(grid.reserved),
        pct(grid.spot)
    );
    Ok(s)
}
