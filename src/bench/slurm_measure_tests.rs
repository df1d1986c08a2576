use std::collections::BTreeMap;

use super::*;

fn node(name: &str, spot: bool, prices: &[(f64, f64)]) -> BenchNode {
    BenchNode { name: name.into(), spot, gpus: 4, prices: prices.to_vec() }
}

fn outcome(name: &str, account: &str, gpus: u32, checkpointable: bool, lost_secs: u64) -> JobOutcome {
    JobOutcome { name: name.into(), account: account.into(), gpus, checkpointable, lost_secs }
}

fn waiting(name: &str, account: &str, gpus: u32, rank: Option<u32>, placed_now: bool) -> Seen {
    Seen { name: name.into(), account: account.into(), gpus, running: false, node: None, submitted: 0.0, started: None, rank, placed_now }
}

fn running(name: &str, account: &str, gpus: u32, node: &str, started: f64) -> Seen {
    Seen {
        name: name.into(),
        account: account.into(),
        gpus,
        running: true,
        node: Some(node.into()),
        submitted: 0.0,
        started: Some(started),
        rank: None,
        placed_now: false,
    }
}

#[test]
fn water_filling_gives_each_the_same_until_its_demand_is_met() {
    let demand: BTreeMap<&str, f64> = [("a", 12.0), ("b", 2.0), ("c", 6.0)].into_iter().collect();
    let fair = water_fill(&demand, 12.0);
    assert_eq!((fair["a"], fair["b"], fair["c"]), (5.0, 2.0, 5.0));
    let fair = water_fill(&demand, 40.0);
    assert_eq!((fair["a"], fair["b"], fair["c"]), (12.0, 2.0, 6.0), "no one gets more than it asks");
}

#[test]
fn a_run_is_measured_from_its_samples() {
    let nodes = [node("s1", true, &[(0.0, 2.4), (10.0, 4.2)]), node("o1", false, &[(0.0, 5.672)])];
    let outcomes = [outcome("a1", "a", 4, true, 0), outcome("a2", "a", 4, false, 0), outcome("b1", "b", 4, true, 5)];
    // 0–10 s: a1 on spot, a2 (cannot be interrupted) on demand, b1 waits;
    // 10–20 s: a2 done, b1 on demand; then all done.
    let samples = vec![
        Sample { t: 0.0, capacity: 8, jobs: vec![running("a1", "a", 4, "s1", 0.0), running("a2", "a", 4, "o1", 0.0), waiting("b1", "b", 4, Some(1), false)] },
        Sample { t: 10.0, capacity: 8, jobs: vec![running("a1", "a", 4, "s1", 0.0), running("b1", "b", 4, "o1", 10.0)] },
        Sample { t: 20.0, capacity: 8, jobs: vec![] },
    ];
    let f = measure(&outcomes, &nodes, &samples);
    assert_eq!((f.jobs, f.started), (3, 3));
    assert!((f.mean_wait - 10.0 / 3.0).abs() < 1e-9 && f.p95_wait == 10.0, "{f:?}");
    // 0–10 s contended: a holds all 8 GPUs, DRF says 4 each: half the cluster is off.
    assert!((f.contended_secs - 10.0).abs() < 1e-9 && (f.drf_error - 0.5).abs() < 1e-9, "{f:?}");
    assert_eq!(f.shares["a"], (1.0, 0.5));
    assert_eq!(f.shares["b"], (0.0, 0.5));
    assert!((f.spot_gpu_hours - 80.0 / 3600.0).abs() < 1e-9 && (f.on_demand_gpu_hours - 80.0 / 3600.0).abs() < 1e-9);
    assert_eq!(f.uninterruptible_on_spot, 0);
    // Spend: a1 s1 10 s at 2.4 then 10 s at 4.2; a2 then b1 on o1 for 20 s.
    let want = (2.4 * 10.0 + 4.2 * 10.0 + 5.672 * 20.0) / 3600.0;
    assert!((f.spend - want).abs() < 1e-9, "{} vs {want}", f.spend);
    assert_eq!((f.recompute_gpu_secs, f.interrupted_jobs), (20.0, 1));
    assert_eq!(f.makespan, 20.0);
}

#[test]
fn an_uninterruptible_job_on_spot_is_counted_once() {
    let nodes = [node("s1", true, &[(0.0, 2.4)])];
    let outcomes = [outcome("x", "a", 1, false, 0)];
    let samples: Vec<Sample> = (0..3).map(|t| Sample { t: f64::from(t), capacity: 4, jobs: vec![running("x", "a", 1, "s1", 0.0)] }).collect();
    assert_eq!(measure(&outcomes, &nodes, &samples).uninterruptible_on_spot, 1);
}

#[test]
fn kendall_counts_the_starts_against_the_last_order_both_waited_in() {
    // Three wait; the room's plan starts y now, then x (rank 1), then z.
    let early = Sample {
        t: 0.0,
        capacity: 4,
        jobs: vec![waiting("x", "a", 4, Some(1), false), waiting("y", "b", 1, Some(2), true), waiting("z", "a", 4, Some(3), false)],
    };
    let in_order = |x: f64, y: f64, z: f64| {
        vec![
            early.clone(),
            Sample { t: 5.0, capacity: 4, jobs: vec![running("x", "a", 4, "n", x), running("y", "b", 1, "n", y), running("z", "a", 4, "n", z)] },
        ]
    };
    let (tau, pairs) = kendall(&in_order(2.0, 1.0, 3.0));
    assert_eq!((tau, pairs), (Some(1.0), 3));
    let (tau, pairs) = kendall(&in_order(3.0, 1.0, 2.0));
    assert_eq!((tau, pairs), (Some(1.0 / 3.0), 3), "z jumped x: one pair of three discordant");
    let (tau, pairs) = kendall(&in_order(1.0, 1.2, 3.0));
    assert_eq!((tau, pairs), (Some(1.0), 2), "x and y in the same second: a tie, left out");
    // A later order replaces an earlier one: x's rank fell behind z.
    let mut samples = in_order(3.0, 1.0, 2.0);
    samples.insert(1, Sample { t: 1.0, capacity: 4, jobs: vec![waiting("x", "a", 4, Some(3), false), waiting("z", "a", 4, Some(2), false)] });
    assert_eq!(kendall(&samples), (Some(1.0), 3));
    // The room placed z now on a snapshot from before x ended: Slurm starts
    // z; the sample after still lists z (the plan is a snapshot old) beside
    // x, and that decision is the one counted.
    let mut samples = in_order(3.0, 1.0, 2.0);
    let mut z = running("z", "a", 4, "n", 2.0);
    (z.rank, z.placed_now) = (Some(2), true);
    samples.insert(1, Sample { t: 2.5, capacity: 4, jobs: vec![waiting("x", "a", 4, Some(1), false), z] });
    assert_eq!(kendall(&samples), (Some(1.0), 3));
    // Both placed now: the room started them at once, the pair is left out.
    let both = Sample { t: 0.5, capacity: 4, jobs: vec![waiting("x", "a", 4, Some(1), true), waiting("z", "a", 4, Some(3), true)] };
    let mut samples = in_order(3.0, 1.0, 2.0);
    samples.insert(1, both);
    assert_eq!(kendall(&samples), (Some(1.0), 2));
}

#[test]
fn nothing_sampled_measures_to_zero_not_to_nan() {
    let f = measure(&[outcome("x", "a", 1, true, 0)], &[], &[]);
    assert_eq!((f.started, f.mean_wait, f.drf_error, f.tau, f.makespan), (0, 0.0, 0.0, None, 0.0));
    assert!(f.shares.is_empty());
}
