//! The lifetime predictor (SPEC §3) from the outside: the regression recovers
//! what it should on synthetic data made by formulas (no random numbers), its
//! variance follows the data's consistency, bad input is refused without a
//! panic, and on the real Philly trace it beats the naive baseline. The
//! Philly report prints with `cargo test --test predict_philly -- --nocapture`.

use gpuroom::predict::lifetime::{self, DEGRADED_STD_RATIO, JobFeatures, LifetimePredictor, PhaseDurations, PredictError, Rls, is_reliable, queue_wait};
use gpuroom::predict::philly_eval;
use gpuroom::sources::philly;

/// A deterministic stand-in for noise: a fixed, irregular sequence in [-1, 1].
fn wiggle(i: usize) -> f64 {
    ((i as f64) * 12.9898).sin() * 0.5 + ((i as f64) * 78.233).cos() * 0.5
}

#[test]
fn rls_recovers_known_coefficients() {
    let truth = [2.0, 0.5, -1.5, 0.25];
    let mut rls = Rls::new(4, 0.999, 100.0).unwrap();
    for i in 0..600 {
        let x = [1.0, (i as f64 * 0.37).sin() * 3.0, ((i % 17) as f64) / 4.0, (i as f64 * 0.11).cos()];
        let y: f64 = truth.iter().zip(&x).map(|(w, v)| w * v).sum::<f64>() + 0.01 * wiggle(i);
        rls.observe(&x, y).unwrap();
    }
    for (w, t) in rls.weights().iter().zip(truth) {
        assert!((w - t).abs() < 0.01, "weights {:?} vs {truth:?}", rls.weights());
    }
    let noise = rls.noise_var().unwrap();
    assert!(noise < 1e-3, "residual variance {noise}");
    assert_eq!(rls.rejected(), 0);
}

fn job(gpus: u32, tokens: u64) -> JobFeatures {
    JobFeatures {
        model_layers: Some(32),
        input_tokens: Some(tokens),
        max_output_tokens: Some(512),
        gpus: Some(gpus),
        sm_clock_mhz: Some(1410.0),
        mem_bandwidth_gbs: Some(2039.0),
        class: Some("inference".into()),
        hour_of_day: Some(14),
        day_of_week: Some(2),
        ..JobFeatures::default()
    }
}

#[test]
fn variance_shrinks_with_consistent_data_and_grows_with_noisy_data() {
    let mut steady = LifetimePredictor::default();
    let mut noisy = LifetimePredictor::default();
    let f = job(4, 2048);
    let mut steady_std = Vec::new();
    for i in 0..200 {
        // Within ±2% every time, versus a factor of up to ×3 either way.
        let phases = PhaseDurations { load: 30.0, compute: 600.0 * (1.0 + 0.02 * wiggle(i)), serialize: 10.0 };
        steady.observe(&f, phases).unwrap();
        noisy.observe(&f, PhaseDurations { compute: 600.0 * 3f64.powf(wiggle(i)), ..phases }).unwrap();
        if i == 20 || i == 199 {
            steady_std.push(steady.predict(&f).unwrap().std_secs);
        }
    }
    let s = steady.predict(&f).unwrap();
    let n = noisy.predict(&f).unwrap();
    assert!(steady_std[1] < steady_std[0], "steady std went {steady_std:?}");
    assert!((s.mean_secs - 640.0).abs() < 0.02 * 640.0, "{s:?}");
    assert!(is_reliable(&s), "{s:?}");
    assert!(!is_reliable(&n), "{n:?}");
    assert!(n.std_secs > 10.0 * s.std_secs, "noisy {n:?} vs steady {s:?}");
    assert!(n.std_secs > DEGRADED_STD_RATIO * n.mean_secs);
    // Compute carries the noise; the other phases stay tight.
    let phases = n.phases.unwrap();
    assert!(phases[1].std_secs > 10.0 * phases[0].std_secs, "{phases:?}");
}

#[test]
fn a_job_unlike_any_seen_gets_a_wider_estimate() {
    let mut predictor = LifetimePredictor::default();
    for i in 0..300 {
        let tokens = 512 << (i % 4);
        predictor.observe_total(&job(1, tokens), 100.0 * (tokens as f64 / 512.0)).unwrap();
    }
    let seen = predictor.predict(&job(1, 1024)).unwrap();
    let unseen_class = predictor.predict(&JobFeatures { class: Some("never seen".into()), ..job(1, 1024) }).unwrap();
    assert!((seen.median_secs - 200.0).abs() < 2.0, "{seen:?}");
    assert!(unseen_class.std_secs / unseen_class.mean_secs > seen.std_secs / seen.mean_secs, "{unseen_class:?} vs {seen:?}");
}

#[test]
fn non_finite_input_is_refused_without_panicking() {
    let mut predictor = LifetimePredictor::default();
    let ok = job(2, 1000);
    predictor.observe_total(&ok, 500.0).unwrap();
    let before = predictor.clone();
    let bad_clock = JobFeatures { sm_clock_mhz: Some(f64::NAN), ..ok.clone() };
    let bad_bandwidth = JobFeatures { mem_bandwidth_gbs: Some(f64::INFINITY), ..ok.clone() };
    assert!(matches!(predictor.observe_total(&bad_clock, 500.0), Err(PredictError::BadFeature(name)) if name == "sm_clock_mhz"));
    assert!(predictor.observe_total(&bad_bandwidth, 500.0).is_err());
    assert!(matches!(predictor.observe_total(&ok, f64::NAN), Err(PredictError::BadDuration(_))));
    assert!(predictor.observe_total(&ok, -3.0).is_err());
    let phases = PhaseDurations { load: 1.0, compute: f64::INFINITY, serialize: 1.0 };
    assert!(predictor.observe(&ok, phases).is_err());
    assert_eq!(predictor.rejected(), 5);
    assert_eq!(predictor.samples(), before.samples());
    // A prediction is still owed: the bad feature counts as missing.
    let p = predictor.predict(&bad_clock).unwrap();
    assert!(p.mean_secs.is_finite() && p.std_secs.is_finite());
    // Huge but finite values stay finite end to end.
    let huge = JobFeatures { input_tokens: Some(u64::MAX), model_layers: Some(u32::MAX), ..ok };
    predictor.observe_total(&huge, 1e12).unwrap();
    let p = predictor.predict(&huge).unwrap();
    assert!(p.mean_secs.is_finite() && p.std_secs.is_finite(), "{p:?}");
}

#[test]
fn the_predictor_flags_unreliable_when_std_exceeds_30_percent() {
    let mut predictor = LifetimePredictor::default();
    let f = job(1, 100);
    // Alternating 100 s and 300 s: σ of ln is ~0.55, std/mean ~ 0.6.
    for i in 0..100 {
        predictor.observe_total(&f, if i % 2 == 0 { 100.0 } else { 300.0 }).unwrap();
    }
    let p = predictor.predict(&f).unwrap();
    assert!(p.std_secs > DEGRADED_STD_RATIO * p.mean_secs, "{p:?}");
    assert!(!lifetime::is_reliable(&p));
    assert!(p.median_secs < p.mean_secs);
}

#[test]
fn queue_wait_is_a_documented_fluid_estimate() {
    // 16 GPUs: 12 busy for 600 s, 4 for 60 s; 3,200 GPU·s queued ahead.
    // 0–60 s: nothing free. 60–600 s: 4 free eat 2,160. Then 16 free eat the
    // other 1,040 in 65 s: 665 s.
    let wait = queue_wait(8, 3200.0, &[(12, 600.0), (4, 60.0)], 16).unwrap();
    assert!((wait - 665.0).abs() < 1e-9, "{wait}");
    assert_eq!(queue_wait(32, 0.0, &[], 16), None);
}

#[test]
fn philly_trace_model_beats_the_naive_baseline() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/jobs/philly-pollux.csv");
    let text = std::fs::read_to_string(path).unwrap();
    let jobs = philly::parse("fixtures/jobs/philly-pollux.csv", &text).unwrap();
    let started = std::time::Instant::now();
    let report = philly_eval::evaluate(&jobs).unwrap();
    println!("{report}");
    println!("(evaluation took {:.1} s)", started.elapsed().as_secs_f64());

    assert_eq!(report.n_train + report.n_test + report.skipped_zero, jobs.len());
    assert!(report.n_test > 20_000);
    for a in [&report.naive, &report.recent_median, &report.model_median, &report.model_mean] {
        for v in [a.median_ape, a.p90_ape, a.within_12pct, a.within_factor_2] {
            assert!(v.is_finite() && v >= 0.0, "{report}");
        }
    }
    assert!(report.model_median.median_ape < report.naive.median_ape, "{report}");
    assert_eq!(report.rejected, 0);
    assert!(report.coverage_80 > 0.0 && report.coverage_80 <= 1.0);
}
