//! The Holt-Winters forecast (SPEC §5) on a real series: GPUs running in the
//! Helios cluster's virtual cluster vc6YE, May 2020, rolled up to hourly
//! means. Trains on 1–21 May, forecasts each of 22–31 May one day ahead, and
//! scores it against seasonal-naive and persistence. Then the spend alarm is
//! tried on the same series with an injected overrun. The tables print with
//! `cargo test --test forecast_helios -- --nocapture`.

use gpuroom::cost::forecast::{self, Alarm, AnomalyDetector, Refit, RollingConfig, RollingReport};
use gpuroom::domain::units::Micros;
use gpuroom::sources::helios;

const SEASON: usize = 24;
const TRAIN_DAYS: usize = 21;

fn hourly_running_gpus() -> Vec<f64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/series/helios-earth-vc6YE-minutely.csv");
    let text = std::fs::read_to_string(path).unwrap();
    let samples = helios::parse("helios-earth-vc6YE-minutely.csv", &text).unwrap();
    assert_eq!(samples.len(), 31 * 24 * 60);
    let hourly = helios::hourly_means(&samples);
    assert_eq!(hourly.len(), 31 * 24, "31 days of May 2020");
    assert_eq!(hourly[0].hour.to_rfc3339(), "2020-05-01T00:00:00+00:00");
    assert!(hourly.iter().all(|h| h.minutes == 60), "the file has no gaps");
    hourly.iter().map(|h| h.running_gpus).collect()
}

fn show(name: &str, r: &RollingReport) {
    let m = r.trained.model;
    println!("\n{name}");
    println!(
        "  fitted on 1–{TRAIN_DAYS} May: alpha {:.4}  beta {:.4}  gamma {:.4}  (one-step RMSE {:.2} GPUs, {} evaluations)",
        m.alpha,
        m.beta,
        m.gamma,
        r.trained.rmse(),
        r.trained.evaluations
    );
    println!("  day     alpha   beta  gamma   MAPE model  seasonal-naive  persistence");
    for w in &r.windows {
        let pct = |v: Option<f64>| v.map_or("     -".to_string(), |v| format!("{v:6.2}%"));
        println!(
            "  {:>2} May  {:.3}  {:.3}  {:.3}      {}         {}      {}",
            w.start / SEASON + 1,
            w.model.alpha,
            w.model.beta,
            w.model.gamma,
            pct(w.model_mape),
            pct(w.seasonal_naive_mape),
            pct(w.persistence_mape)
        );
    }
    println!(
        "  all     MAPE model {:.2}%  seasonal-naive {:.2}%  persistence {:.2}%   (sMAPE model {:.2}%, seasonal-naive {:.2}%)",
        r.model_mape, r.seasonal_naive_mape, r.persistence_mape, r.model_smape, r.seasonal_naive_smape
    );
}

#[test]
fn one_day_ahead_forecast_of_running_gpus() {
    let series = hourly_running_gpus();
    let config = RollingConfig { season: SEASON, horizon: SEASON, train_len: TRAIN_DAYS * SEASON, refit: Refit::EveryWindow };
    let refit = forecast::rolling_evaluation(&series, &config).unwrap();
    let once = forecast::rolling_evaluation(&series, &RollingConfig { refit: Refit::Once, ..config }).unwrap();
    show("Holt-Winters, refitted every day on all data before it", &refit);
    show("Holt-Winters, parameters fitted once on 1–21 May", &once);

    assert_eq!(refit.windows.len(), 10, "22–31 May");
    for r in [&refit, &once] {
        assert!(r.model_mape.is_finite() && r.seasonal_naive_mape.is_finite() && r.persistence_mape.is_finite());
        assert!(r.trained.evaluations <= forecast::FIT_MAX_EVALS);
        // The fit lands on α = 1, β = 0: a random walk plus the mean daily
        // profile of the training days. What the data says: a day of demand
        // is mostly its level, and the model does better than "same hour
        // yesterday"...
        assert!(r.model_mape < r.seasonal_naive_mape, "model {:.2}% vs seasonal-naive {:.2}%", r.model_mape, r.seasonal_naive_mape);
        // ...but not than holding the last hour flat, whose error it stays close to.
        assert!(r.model_mape < r.persistence_mape * 1.5, "model {:.2}% vs persistence {:.2}%", r.model_mape, r.persistence_mape);
    }
}

#[test]
fn the_spend_alarm_catches_an_injected_overrun_and_clears() {
    // Spend as if every running GPU cost $2.48 an hour (a p3 V100 on
    // demand, per GPU).
    let price = 2.48e6;
    let spend: Vec<Micros> = hourly_running_gpus().iter().map(|g| Micros((g * price).round() as i64)).collect();
    let day = 28; // 29 May: a calm day, no natural excursion.
    let start = day * SEASON;
    let forecast = forecast::forecast_spend(&spend[..start], SEASON, SEASON).unwrap();
    let (inject_from, inject_hours) = (10, 4);

    let actual = |inject: bool, h: usize| {
        let real = spend[start + h];
        if inject && (inject_from..inject_from + inject_hours).contains(&h) { Micros(real.0 + real.0 / 2) } else { real }
    };
    let run_day = |inject: bool| -> Vec<Alarm> {
        let mut detector = AnomalyDetector::new(0.25, 3).unwrap();
        (0..SEASON).map(|h| detector.observe_spend(actual(inject, h), forecast[h]).unwrap()).collect()
    };
    let plain = run_day(false);
    let injected = run_day(true);
    println!("\n29 May, spend vs the day-ahead forecast (threshold 25%, 3 periods; +50% injected 10:00–13:59)");
    for h in 0..SEASON {
        let a = actual(true, h);
        let dev = AnomalyDetector::relative_deviation(a.0 as f64, forecast[h].0 as f64);
        println!("  {h:02}:00  forecast {}  actual {a}  off {:5.1}%  {:?}", forecast[h], 100.0 * dev, injected[h]);
    }
    assert!(plain.iter().all(|a| matches!(a, Alarm::Quiet { run: 0 })), "the real day alone is within 25%: {plain:?}");
    assert_eq!(injected[inject_from], Alarm::Quiet { run: 1 });
    assert_eq!(injected[inject_from + 1], Alarm::Quiet { run: 2 });
    assert_eq!(injected[inject_from + 2], Alarm::Raised { run: 3 });
    assert_eq!(injected[inject_from + 3], Alarm::Quiet { run: 4 });
    assert_eq!(injected[inject_from + 4], Alarm::Cleared { run: 4 });
    let raised = injected.iter().filter(|a| matches!(a, Alarm::Raised { .. })).count();
    assert_eq!(raised, 1);
}
