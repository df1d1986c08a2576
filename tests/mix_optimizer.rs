//! The buying-mix optimizer against SPEC §1's naive 5% grid: the grid picks
//! 100% spot at every utilization; the exact, risk-aware optimizer does not
//! once the measured hazard, recompute, checkpoints, spot capacity and an SLA
//! floor are priced in, agrees with the naive model when they are all zero,
//! and is never beaten by brute force.

use gpuroom::cost::mix::{
    Constraint, GridPrices, MixError, MixProblem, NAIVE_OD_CAP, NAIVE_STEP, SpotOffer, SpotRisk, break_even, compare, curve, effective_reserved, naive_grid,
    reserved_curve, solve, solve_naive,
};

const P_OD: f64 = 0.85;
const P_RES: f64 = 0.30;

/// The spot price: dearer when the cluster is less busy.
fn p_spot(u: f64) -> f64 {
    0.18 + 0.10 * (1.0 - u)
}

fn utilizations() -> impl Iterator<Item = f64> {
    (1..=20).map(|i| f64::from(i) * 0.05)
}

/// The real V100 spot traces give 0.3–0.75 interruptions per hour; a job
/// saving every 30 min loses 15 min per interruption on average, plus 6 min to
/// restart; each save takes 1.5 min (5%).
fn v100_risk() -> SpotRisk {
    SpotRisk::from_checkpoints(0.47, 0.5, 0.025, 0.1).unwrap()
}

fn offer(name: &str, price: f64, risk: SpotRisk, capacity: Option<f64>) -> SpotOffer {
    SpotOffer { name: name.into(), price, risk, capacity_gpus: capacity }
}

/// 100 GPUs of demand; the V100 market supplies at most 60, a high-memory
/// type (5% dearer, hazard 0.75/h) at most 40; 20% must be non-interruptible.
fn realistic(u: f64) -> MixProblem {
    let high_mem = SpotRisk { interruptions_per_hour: 0.75, ..v100_risk() };
    MixProblem {
        demand_gpus: 100.0,
        utilization: u,
        on_demand_price: P_OD,
        reserved_price: P_RES,
        spot: vec![offer("p3.2xlarge", p_spot(u), v100_risk(), Some(60.0)), offer("p3.8xlarge", p_spot(u) * 1.05, high_mem, Some(40.0))],
        sla_floor: 0.20,
        on_demand_cap: None,
    }
}

fn grid_prices(u: f64) -> GridPrices {
    GridPrices { on_demand: P_OD, reserved: P_RES, spot: p_spot(u) }
}

#[test]
fn the_naive_grid_picks_all_spot_at_every_utilization() {
    for u in utilizations() {
        let pick = naive_grid(u, NAIVE_STEP, NAIVE_OD_CAP, &grid_prices(u)).unwrap();
        assert_eq!((pick.on_demand, pick.reserved, pick.spot), (0.0, 0.0, 1.0), "u = {u}: {pick:?}");
        assert!((pick.price - p_spot(u)).abs() < 1e-12);
    }
}

#[test]
fn break_even_is_about_35_percent() {
    let u_star = break_even(P_RES, P_OD).unwrap();
    assert!((u_star - 0.30 / 0.85).abs() < 1e-15);
    assert!((u_star - 0.353).abs() < 5e-4, "{u_star}");
    for u in utilizations() {
        let eff = effective_reserved(P_RES, u).unwrap();
        assert_eq!(eff > P_OD, u < u_star, "u = {u}: {eff}");
    }
    let points = curve(P_RES, P_OD, 20);
    assert_eq!(points.len(), 20);
    assert!(points.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1), "falls as utilization rises");
    let at = reserved_curve(P_RES, P_OD, 0.30, 20).unwrap().current;
    assert!(!at.reserved_cheaper && at.saving_vs_on_demand < 0.0);
    let at = reserved_curve(P_RES, P_OD, 0.60, 20).unwrap().current;
    assert!(at.reserved_cheaper && (at.saving_vs_on_demand - (1.0 - 0.5 / 0.85)).abs() < 1e-12);
}

#[test]
fn the_risk_aware_optimizer_does_not_pick_all_spot() {
    let u_star = break_even(P_RES, P_OD).unwrap();
    println!();
    println!("demand 100 GPUs, SLA floor 20%, p3.2xlarge ≤ 60 GPUs at 0.47/h, p3.8xlarge ≤ 40 GPUs at 0.75/h (+5% price); prices per GPU-hour");
    println!("  u    | naive grid od/res/spot | risk-aware od/res/spot (2x+8x) | cost  | naive: raw, with risk   | binding (saves per GPU-h)");
    println!("  -----+------------------------+--------------------------------+-------+-------------------------+--------------------------");
    let mut last_spot = None;
    for u in utilizations() {
        let grid = naive_grid(u, NAIVE_STEP, NAIVE_OD_CAP, &grid_prices(u)).unwrap();
        let c = compare(&realistic(u)).unwrap();
        let plan = &c.risk_aware;
        let (v100, hm) = (&plan.spot[0].share, &plan.spot[1].share);
        let binding: Vec<String> = plan
            .binding
            .iter()
            .map(|b| match &b.constraint {
                Constraint::SlaFloor => format!("floor {:.3}", b.saving_per_hour / 100.0),
                Constraint::OnDemandCap => "od cap".into(),
                Constraint::SpotCapacity { name, .. } => format!("{name} cap {:.3}", b.saving_per_hour / 100.0),
            })
            .collect();
        println!(
            "  {u:.2} |  {:>3.0}% / {:>3.0}% / {:>3.0}%   |  {:>3.0}% / {:>3.0}% / {:>3.0}% ({:.0}+{:.0})   | {:.3} | {:.3}, {:.3}{:<11} | {}",
            grid.on_demand * 100.0,
            grid.reserved * 100.0,
            grid.spot * 100.0,
            plan.on_demand.fraction * 100.0,
            plan.reserved.fraction * 100.0,
            plan.spot_fraction() * 100.0,
            v100.fraction * 100.0,
            hm.fraction * 100.0,
            plan.cost_per_gpu_hour,
            c.naive.cost_per_gpu_hour,
            c.naive_cost_with_risk / 100.0,
            if c.naive_meets_constraints { "" } else { " infeasible" },
            binding.join(", "),
        );

        // The naive model agrees with the grid: all spot.
        assert!((c.naive.spot_fraction() - 1.0).abs() < 1e-12, "u = {u}");
        assert!(!c.naive_meets_constraints);
        // Risk priced in: at most what the market and the floor allow on spot.
        assert!(plan.spot_fraction() <= 0.80 + 1e-12, "u = {u}: {plan:?}");
        assert!(plan.on_demand.fraction + plan.reserved.fraction >= 0.20 - 1e-12);
        assert!((v100.gpus - 60.0).abs() < 1e-9, "the safer V100 market is used up first");
        // The firm part goes to reserved exactly above break-even.
        if u > u_star {
            assert!(plan.reserved.fraction > 0.19 && plan.on_demand.fraction == 0.0, "u = {u}: {plan:?}");
        } else {
            assert!(plan.on_demand.fraction > 0.19 && plan.reserved.fraction == 0.0, "u = {u}: {plan:?}");
        }
        assert!(plan.binds(&Constraint::SlaFloor) && plan.binds(&Constraint::SpotCapacity { index: 0, name: "p3.2xlarge".into() }));
        // The spot prices are effective prices: raw × (1 + 0.47·0.35 + 0.05).
        assert!((plan.spot[0].share.unit_price - p_spot(u) * (1.0 + 0.47 * 0.35 + 0.05)).abs() < 1e-12);
        // The naive all-spot plan looks cheaper only because it ignores the risk.
        assert!(c.naive.cost_per_hour < plan.cost_per_hour);
        last_spot = Some(plan.spot_fraction());
    }
    assert_eq!(last_spot, Some(0.80));
}

#[test]
fn the_hazard_alone_reorders_the_spot_types() {
    // Without capacity limits the high-memory type's 5% price premium is
    // outweighed by its risk only when the hazard is priced: naive picks the
    // cheaper raw price, risk-aware the cheaper useful hour.
    let mut p = realistic(0.8);
    p.spot[0].price = p_spot(0.8) * 1.05;
    p.spot[1].price = p_spot(0.8);
    p.spot.iter_mut().for_each(|o| o.capacity_gpus = None);
    let risk = solve(&p).unwrap();
    let naive = solve_naive(&p).unwrap();
    assert!((risk.spot[0].share.fraction - 0.8).abs() < 1e-12, "{risk:?}");
    assert!((naive.spot[1].share.fraction - 1.0).abs() < 1e-12, "{naive:?}");
}

#[test]
fn with_no_risk_no_floor_and_no_limit_it_agrees_with_the_naive_model() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut cases: Vec<(f64, f64, f64, f64)> = utilizations().map(|u| (u, P_OD, P_RES, p_spot(u))).collect();
    cases.extend((0..200).map(|_| (0.05 + 0.95 * next(), 0.2 + next(), 0.1 + 0.5 * next(), 0.1 + next())));
    for (u, od, res, spot) in cases {
        let p = MixProblem {
            demand_gpus: 10.0,
            utilization: u,
            on_demand_price: od,
            reserved_price: res,
            spot: vec![offer("s", spot, SpotRisk::NONE, None)],
            sla_floor: 0.0,
            on_demand_cap: Some(NAIVE_OD_CAP),
        };
        let risk = solve(&p).unwrap();
        let naive = solve_naive(&p).unwrap();
        assert_eq!(risk, naive);
        // The LP's vertices lie on the 5% grid here, so the grid finds the same price.
        let grid = naive_grid(u, NAIVE_STEP, NAIVE_OD_CAP, &GridPrices { on_demand: od, reserved: res, spot }).unwrap();
        assert!((grid.price - naive.cost_per_gpu_hour).abs() < 1e-12, "{u} {od} {res} {spot}: {grid:?} vs {naive:?}");
        let split = (naive.on_demand.fraction, naive.reserved.fraction, naive.spot[0].share.fraction);
        let picked = (grid.on_demand, grid.reserved, grid.spot);
        let tie = (grid.price - naive.cost_per_gpu_hour).abs() < 1e-12 && split != picked;
        assert!(split == picked || tie, "{split:?} vs {picked:?}");
    }
    // And on the prices both pick all spot.
    for u in utilizations() {
        let mut p = realistic(u);
        p.spot = vec![offer("v100", p_spot(u), SpotRisk::NONE, None)];
        p.sla_floor = 0.0;
        assert_eq!(solve(&p).unwrap().spot[0].share.fraction, 1.0);
    }
}

/// Brute force 1: a 0.1% grid over (on-demand, reserved) with one spot type
/// taking the rest. Every case's vertices are multiples of 0.001, so the grid
/// holds the optimum and must match it; it must never beat it.
#[test]
fn the_exact_solver_matches_a_fine_grid() {
    let mut checked = 0;
    for (k, u) in [0.1, 0.3, 0.35, 0.5, 0.9].into_iter().enumerate() {
        for (floor, cap, od_cap) in [(0.2, Some(0.5), None), (0.0, None, Some(0.2)), (0.4, Some(0.9), Some(0.1)), (1.0, Some(0.3), None)] {
            let price = [0.1, 0.4, 0.2, 0.3, 0.26][k];
            let risk = SpotRisk { interruptions_per_hour: 0.47, recompute_hours: 0.25, restart_hours: 0.1, checkpoint_fraction: 0.05 };
            let p = MixProblem {
                demand_gpus: 1.0,
                utilization: u,
                on_demand_price: P_OD,
                reserved_price: P_RES,
                spot: vec![offer("s", price, risk, cap)],
                sla_floor: floor,
                on_demand_cap: od_cap,
            };
            let plan = solve(&p).unwrap();
            let c = [plan.on_demand.unit_price, plan.reserved.unit_price, plan.spot[0].share.unit_price];
            let mut best = f64::INFINITY;
            for i in 0..=1000 {
                let x_od = f64::from(i) / 1000.0;
                if od_cap.is_some_and(|m| x_od > m + 1e-12) {
                    break;
                }
                for j in 0..=(1000 - i) {
                    let x_res = f64::from(j) / 1000.0;
                    let x_s = f64::from(1000 - i - j) / 1000.0;
                    if x_od + x_res < floor - 1e-12 || cap.is_some_and(|m| x_s > m + 1e-12) {
                        continue;
                    }
                    best = best.min(c[0] * x_od + c[1] * x_res + c[2] * x_s);
                }
            }
            assert!(plan.cost_per_hour <= best + 1e-12, "beaten: {p:?}");
            assert!((plan.cost_per_hour - best).abs() < 1e-9, "{p:?}: {} vs grid {best}", plan.cost_per_hour);
            checked += 1;
        }
    }
    assert_eq!(checked, 20);
}

/// Brute force 2: vertex enumeration of the LP with several spot types, on
/// random cases from a fixed-seed generator. A vertex fixes every variable
/// but one at a bound (0, a capacity, the on-demand cap) or closes the floor;
/// the demand equation gives the last one.
#[test]
fn the_exact_solver_matches_vertex_enumeration() {
    let mut seed = 42u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    for case in 0..400 {
        let types = 1 + case % 3;
        let spot: Vec<SpotOffer> = (0..types)
            .map(|k| {
                let risk = SpotRisk {
                    interruptions_per_hour: 0.3 + 0.45 * next(),
                    recompute_hours: 0.5 * next(),
                    restart_hours: 0.1 * next(),
                    checkpoint_fraction: 0.1 * next(),
                };
                offer(&format!("t{k}"), 0.1 + 0.6 * next(), risk, (next() < 0.8).then(|| 50.0 * next()))
            })
            .collect();
        let p = MixProblem {
            demand_gpus: 1.0 + 99.0 * next(),
            utilization: next(),
            on_demand_price: 0.3 + next(),
            reserved_price: 0.1 + 0.4 * next(),
            spot,
            sla_floor: if next() < 0.2 { 0.0 } else { next() },
            on_demand_cap: (next() < 0.5).then(&mut next),
        };
        let plan = solve(&p).unwrap();
        let d = p.demand_gpus;
        let mut cost = vec![plan.on_demand.unit_price, plan.reserved.unit_price];
        cost.extend(plan.spot.iter().map(|s| s.share.unit_price));
        let mut upper = vec![p.on_demand_cap.map_or(f64::INFINITY, |c| c * d), f64::INFINITY];
        upper.extend(p.spot.iter().map(|o| o.capacity_gpus.unwrap_or(f64::INFINITY)));
        let n = cost.len();
        let floor = p.sla_floor * d;
        let tol = 1e-9 * d;
        let mut best = f64::INFINITY;
        let mut consider = |x: &[f64]| {
            let ok = x.iter().zip(&upper).all(|(x, u)| *x >= -tol && *x <= u + tol) && x[0] + x[1] >= floor - tol;
            if ok {
                best = best.min(x.iter().zip(&cost).map(|(x, c)| x * c).sum());
            }
        };
        // Fix every variable in `fixed` at 0 or its bound, as `mask` says.
        let place = |fixed: &[usize], mask: u32, x: &mut [f64]| -> bool {
            for (bit, i) in fixed.iter().enumerate() {
                x[*i] = if mask & (1 << bit) != 0 { upper[*i] } else { 0.0 };
            }
            fixed.iter().all(|i| x[*i].is_finite())
        };
        // Floor not among the active constraints: all but `free` at a bound,
        // the demand equation gives `free`.
        for free in 0..n {
            let fixed: Vec<usize> = (0..n).filter(|i| *i != free).collect();
            for mask in 0..(1u32 << fixed.len()) {
                let mut x = vec![0.0; n];
                if place(&fixed, mask, &mut x) {
                    x[free] = d - fixed.iter().map(|i| x[*i]).sum::<f64>();
                    consider(&x);
                }
            }
        }
        // Floor active: one firm variable closes it, one spot variable closes
        // the demand (two firm or two spot unknowns make the system singular).
        for a in 0..2 {
            for b in 2..n {
                let fixed: Vec<usize> = (0..n).filter(|i| *i != a && *i != b).collect();
                for mask in 0..(1u32 << fixed.len()) {
                    let mut x = vec![0.0; n];
                    if place(&fixed, mask, &mut x) {
                        x[a] = floor - x[1 - a];
                        x[b] = d - (0..n).filter(|i| *i != b).map(|i| x[i]).sum::<f64>();
                        consider(&x);
                    }
                }
            }
        }
        assert!(best.is_finite(), "case {case}: no vertex");
        assert!(plan.cost_per_hour <= best + 1e-9 * best.max(1.0), "case {case}: beaten, {} vs {best}", plan.cost_per_hour);
        assert!((plan.cost_per_hour - best).abs() < 1e-9 * best.max(1.0), "case {case}: {} vs {best}: {p:?}", plan.cost_per_hour);
        let total: f64 = plan.on_demand.gpus + plan.reserved.gpus + plan.spot.iter().map(|s| s.share.gpus).sum::<f64>();
        assert!((total - d).abs() < 1e-9 * d);
    }
}

#[test]
fn bad_input_is_refused_with_a_clear_error() {
    let base = realistic(0.5);
    let mut p = base.clone();
    p.spot[0].price = f64::NAN;
    assert!(matches!(solve(&p), Err(MixError::NotFinite { ref what, .. }) if what == "p3.2xlarge spot price"), "{:?}", solve(&p));
    let mut p = base.clone();
    p.spot[1].capacity_gpus = Some(-5.0);
    assert_eq!(solve(&p), Err(MixError::Negative { what: "p3.8xlarge capacity".into(), value: -5.0 }));
    let mut p = base.clone();
    p.demand_gpus = 0.0;
    assert_eq!(solve(&p), Err(MixError::NoDemand(0.0)));
    let mut p = base.clone();
    p.sla_floor = 1.2;
    assert_eq!(solve(&p), Err(MixError::NotAFraction { what: "SLA floor".into(), value: 1.2 }));
    let mut p = base.clone();
    p.on_demand_price = f64::INFINITY;
    assert!(matches!(compare(&p), Err(MixError::NotFinite { .. })));
    let mut p = base;
    p.spot[0].risk.interruptions_per_hour = -0.1;
    assert!(matches!(solve(&p), Err(MixError::Negative { ref what, .. }) if what == "p3.2xlarge interruptions per hour"));
    assert!(matches!(effective_reserved(0.3, f64::NAN), Err(MixError::NotFinite { .. })));
    assert_eq!(break_even(0.3, 0.0), Err(MixError::FreeOnDemand(0.0)));
    assert!(matches!(naive_grid(0.5, 0.0, 0.2, &grid_prices(0.5)), Err(MixError::BadStep(_))));
    assert!(matches!(naive_grid(0.5, 0.05, 1.5, &grid_prices(0.5)), Err(MixError::NotAFraction { .. })));
    println!("e.g. {}", MixError::NotAFraction { what: "SLA floor".into(), value: 1.2 });
}
