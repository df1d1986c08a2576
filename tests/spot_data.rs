//! The real spot data under `fixtures/`: every price dump and preemption trace
//! parses as it is, the survival and volatility statistics built on them say
//! sane, data-derived things, and mutated copies of a real dump are refused
//! with the file and the entry named. `--nocapture` shows the tables.

use std::path::{Path, PathBuf};

use gpuroom::domain::units::Secs;
use gpuroom::market::Trend;
use gpuroom::market::hazard::{HazardConfig, HazardModel, Lifetime, Survival};
use gpuroom::market::series::{self, DEFAULT_DEAD_BAND};
use gpuroom::sources::price_history::{self, PriceSeries};
use gpuroom::sources::spot_trace;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn name(path: &Path) -> String {
    path.strip_prefix(fixtures()).unwrap().to_string_lossy().replace('\\', "/")
}

fn price_pages() -> Vec<price_history::PricePage> {
    let files = json_files(&fixtures().join("spot-prices/aws"));
    assert!(files.len() >= 30, "the us-west-2 dumps at least: {files:?}");
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            price_history::parse(&name(f), &text).unwrap_or_else(|e| panic!("a real dump must parse: {e}"))
        })
        .collect()
}

fn traces() -> Vec<(String, Vec<Lifetime>, spot_trace::SpotTrace)> {
    let files = json_files(&fixtures().join("spot-traces/preemption"));
    assert!(files.len() >= 4, "{files:?}");
    files
        .iter()
        .map(|f| {
            let trace = spot_trace::parse(&name(f), &std::fs::read_to_string(f).unwrap()).unwrap();
            let short = f.file_stem().unwrap().to_string_lossy().into_owned();
            (short, trace.lifetimes(), trace)
        })
        .collect()
}

fn pct(p: Option<f64>) -> String {
    p.map_or("-".into(), |p| format!("{:.2}%", 100.0 * p))
}

#[test]
fn every_real_price_dump_parses_and_its_volatility_is_measured() {
    let pages = price_pages();
    let points: usize = pages.iter().map(|p| p.points.len()).sum();
    assert!(points > 1000, "{points} points");
    for page in &pages {
        assert!(page.points.windows(2).all(|w| w[0].at >= w[1].at), "newest first");
        assert!(page.points.iter().all(|p| p.price.0 > 0), "spot is never free");
    }
    let series = PriceSeries::merge(pages.iter(), "Linux/UNIX");
    for steps in series.pools.values() {
        assert!(steps.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 != w[1].1), "one point per change, oldest first");
    }

    let by_type = series::volatility_by_type(&series.pools);
    println!("\nspot price volatility per instance type ({} pools, {points} quotes)", series.pools.len());
    println!("{:<12} {:>5} {:>7} {:>9} {:>9} {:>9} {:>8} {:>11}", "type", "pools", "changes", "mean $/h", "min", "max", "CV", "sd ln(ret)");
    for (ty, v) in &by_type {
        println!(
            "{ty:<12} {:>5} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>7.3}% {:>10.3}%",
            v.pools,
            v.changes,
            v.mean / 1e6,
            v.min.as_f64(),
            v.max.as_f64(),
            100.0 * v.cv,
            100.0 * v.log_return_sd
        );
        assert!(v.cv.is_finite() && v.cv >= 0.0 && v.cv < 1.0, "{ty}: {v:?}");
        assert!(v.min.0 > 0 && v.min.0 as f64 <= v.mean && v.mean <= v.max.0 as f64, "{ty}: {v:?}");
        assert!(v.covered.0 > 86_400, "{ty}: more than a day of history");
    }

    // SPEC §3 says high-memory types swing ≥ 3× more than small ones. Compare
    // over all pools and within one region (us-west-2 has both types).
    let west: std::collections::BTreeMap<_, _> =
        series.pools.iter().filter(|(k, _)| k.zone.starts_with("us-west-2")).map(|(k, v)| (k.clone(), v.clone())).collect();
    let west = series::volatility_by_type(&west);
    for (label, table) in [("all pools", &by_type), ("us-west-2 only", &west)] {
        let (big, small) = (&table["p3.16xlarge"], &table["p3.2xlarge"]);
        let range = |v: &series::Volatility| (v.max.0 - v.min.0) as f64 / v.mean;
        let ratios = [big.cv / small.cv, big.log_return_sd / small.log_return_sd, range(big) / range(small)];
        println!(
            "p3.16xlarge vs p3.2xlarge, {label}: CV ×{:.2}, sd of log returns ×{:.2}, (max − min)/mean ×{:.2} \
             (SPEC §3 claims ≥ 3×: {})",
            ratios[0],
            ratios[1],
            ratios[2],
            if ratios.iter().all(|r| *r >= 3.0) { "holds" } else { "not in this data" }
        );
        assert!(ratios.iter().all(|r| r.is_finite() && *r > 0.0));
    }

    // Trends over the last six hours of the data: defined for every pool (a
    // flat one included), and a projection is never negative.
    let end = series.pools.values().filter_map(|s| s.last().map(|(t, _)| *t)).max().unwrap();
    println!("\ntrend over the 6 h up to {end} per pool (dead band {:.1}%/h)", 100.0 * DEFAULT_DEAD_BAND);
    for (key, steps) in &series.pools {
        let tr = series::trend(steps, end, Secs(6 * 3600), DEFAULT_DEAD_BAND).unwrap();
        let mean = series::time_weighted_mean(steps, end - chrono::TimeDelta::hours(6), end).unwrap();
        assert!(tr.slope.is_finite() && (mean.0 as f64 - tr.mean).abs() <= 1.0, "{key}: {tr:?} vs {mean}");
        assert!(tr.projected(Secs(3600)).0 >= 0);
        println!(
            "  {:<26} {:>9.4} $/h  slope {:>+8.4} $/h per h  ({:>+6.2}%/h, {:?})  in 1 h: {:.4}",
            key.to_string(),
            tr.current.as_f64(),
            tr.slope / 1e6,
            100.0 * tr.relative,
            tr.direction,
            tr.projected(Secs(3600)).as_f64()
        );
    }

    // How often a 1 h trend leaves the dead band, sampled every hour of every pool.
    let mut census = std::collections::BTreeMap::<String, [usize; 3]>::new();
    for (key, steps) in &series.pools {
        let Some((first, _)) = steps.first() else {
            continue;
        };
        let mut now = *first + chrono::TimeDelta::hours(1);
        while now <= end {
            let tr = series::trend(steps, now, Secs(3600), DEFAULT_DEAD_BAND).unwrap();
            let slot = match tr.direction {
                Trend::Rising => 0,
                Trend::Falling => 1,
                Trend::Flat => 2,
            };
            census.entry(key.instance_type.clone()).or_default()[slot] += 1;
            now += chrono::TimeDelta::hours(1);
        }
    }
    println!("\n1 h trend, sampled hourly (dead band {:.1}%/h): rising / falling / flat", 100.0 * DEFAULT_DEAD_BAND);
    for (ty, [up, down, flat]) in &census {
        let n = (up + down + flat) as f64;
        println!("  {ty:<12} {:>5.1}% {:>5.1}% {:>5.1}%  ({n} samples)", 100.0 * *up as f64 / n, 100.0 * *down as f64 / n, 100.0 * *flat as f64 / n);
    }
}

#[test]
fn the_real_preemption_traces_give_sane_survival_curves() {
    let traces = traces();
    let mut pooled = Vec::new();
    println!("\nV100 spot lifetimes (Can't Be Late, NSDI'24), p = P(interrupted in the next minute | age)");
    println!(
        "{:<20} {:>4} {:>4} {:>4} {:>8} {:>7} | {:>6} {:>6} {:>6} | smoothed over 30 min: {:>6} {:>6} {:>6}",
        "trace", "n", "int", "cens", "median", "rate/h", "p@0", "p@30m", "p@2h", "p@0", "p@30m", "p@2h"
    );
    let ages = [Secs(0), Secs(1800), Secs(7200)];
    let minute = Secs(60);
    let smoothing = HazardConfig::default().smoothing;
    let row = |label: &str, lifetimes: &[Lifetime]| -> Survival {
        let s = Survival::try_new(lifetimes).unwrap();
        let raw = ages.map(|a| s.p_interrupt_within(a, minute));
        let smooth = ages.map(|a| s.p_interrupt_within_smoothed(a, minute, smoothing));
        println!(
            "{label:<20} {:>4} {:>4} {:>4} {:>6.1}min {:>7.3} | {:>6} {:>6} {:>6} |                       {:>6} {:>6} {:>6}",
            s.len(),
            s.events(),
            s.censored(),
            s.median().map_or(f64::NAN, |m| m.0 as f64 / 60.0),
            s.mean_rate().unwrap() * 3600.0,
            pct(raw[0]),
            pct(raw[1]),
            pct(raw[2]),
            pct(smooth[0]),
            pct(smooth[1]),
            pct(smooth[2]),
        );
        s
    };
    for (label, lifetimes, trace) in &traces {
        let s = row(label, lifetimes);
        pooled.extend_from_slice(lifetimes);

        // Facts the trace itself fixes: every alive sample is exposure, every 1→0 an event.
        let alive = trace.samples.iter().filter(|x| **x > 0).count() as i64;
        assert_eq!(s.exposure(), Secs(alive * trace.gap.0), "{label}");
        let drops = trace.samples.windows(2).filter(|w| w[0] > 0 && w[1] == 0).count();
        assert_eq!(s.events(), drops, "{label}");
        assert!(s.events() >= 40, "{label}: {} interruptions", s.events());
        assert!(s.censored() <= 1, "{label}: only the run reaching the end is censored");
        check_curve(label, &s);
    }
    let all = row("pooled", &pooled);
    check_curve("pooled", &all);
    // Spot V100s die young: the smoothed hazard falls with age.
    let at = |age| all.p_interrupt_within_smoothed(Secs(age), minute, smoothing).unwrap();
    println!("pooled smoothed hazard falls with age: {} > {} > {}", pct(Some(at(0))), pct(Some(at(1800))), pct(Some(at(7200))));
    assert!(at(0) > at(1800) && at(1800) > at(7200));

    // The model built on that prior, for the console.
    let mut model = HazardModel::new(HazardConfig::default()).unwrap();
    model.set_prior("p3.2xlarge", &pooled).unwrap();
    let now = gpuroom::domain::testkit::t(0);
    let quiet = model.view("p3.2xlarge", now, 8);
    model.record_interruption("p3.2xlarge", now - chrono::TimeDelta::seconds(90));
    model.record_interruption("p3.2xlarge", now - chrono::TimeDelta::seconds(30));
    let stormy = model.view("p3.2xlarge", now, 8);
    println!(
        "p3.2xlarge, 8 up, age 0: long-run {} | quiet window: blended {} | 2 reclaims in 5 min: recent {}, w {:.2}, blended {}",
        pct(quiet.long_run),
        pct(Some(quiet.p)),
        pct(stormy.recent),
        stormy.weight,
        pct(Some(stormy.p))
    );
    assert!(quiet.p < stormy.p && stormy.p < 0.15, "two reclaims among eight do not cross the 15% line");
}

fn check_curve(label: &str, s: &Survival) {
    let steps: Vec<(Secs, f64, f64)> = s.steps().collect();
    assert!(steps.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1 && w[0].2 <= w[1].2), "{label}: monotone");
    assert!(steps.iter().all(|(_, sv, h)| (0.0..=1.0).contains(sv) && h.is_finite()), "{label}");
    let median = s.median().unwrap();
    assert!(Secs(600) <= median && median <= Secs(36_000), "{label}: median {median:?}");
    let rate = s.mean_rate().unwrap() * 3600.0;
    assert!((0.1..2.0).contains(&rate), "{label}: {rate}/h");
    for age in [0, 600, 1800, 3600, 7200, 36_000, 200_000] {
        let raw = s.p_interrupt_within(Secs(age), Secs(60)).unwrap();
        assert!((0.0..0.10).contains(&raw), "{label} at {age}: {raw}");
        let smooth = s.p_interrupt_within_smoothed(Secs(age), Secs(60), Secs(1800)).unwrap();
        assert!((0.0..0.10).contains(&smooth), "{label} at {age}: {smooth}");
    }
    let p0 = s.p_interrupt_within_smoothed(Secs(0), Secs(60), Secs(1800)).unwrap();
    assert!((0.001..0.10).contains(&p0), "{label}: {p0}");
}

/// Rewrites one entry of a real dump through `serde_json::Value`.
fn mutate(text: &str, index: usize, change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(text).unwrap();
    let entry = doc["SpotPriceHistory"][index].as_object_mut().unwrap();
    change(entry);
    serde_json::to_string_pretty(&doc).unwrap()
}

#[test]
fn mutated_copies_of_a_real_dump_are_refused_with_the_file_and_the_entry() {
    let file = "spot-prices/aws/us-west-2/p3.2xlarge.json";
    let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
    let page = price_history::parse(file, &text).unwrap();
    let k = page.points.len() / 2;
    let expect = |mutated: &str, position: &str, needle: &str| {
        let err = price_history::parse(file, mutated).unwrap_err();
        assert_eq!((err.source_name.as_str(), err.position.as_str()), (file, position), "{err}");
        let shown = err.to_string();
        assert!(shown.starts_with(&format!("{file}: {position}: ")) && shown.contains(needle), "{shown}");
    };

    let cut = &text[..text.len() / 2];
    let err = price_history::parse(file, cut).unwrap_err();
    assert!(err.source_name == file && err.position.starts_with("line "), "{err}");
    let err = price_history::parse(file, &text.replacen("\"SpotPriceHistory\"", "\"SpotPriceHistory\" 1", 1)).unwrap_err();
    assert!(err.source_name == file && err.position.starts_with("line 3 column "), "{err}");

    let at = format!("entry {k}");
    for bad in ["NaN", "inf", "-inf", "Infinity", "1e-3", "", "0.9.7", "0.1234567"] {
        expect(&mutate(&text, k, |e| drop(e.insert("SpotPrice".into(), bad.into()))), &at, "SpotPrice");
    }
    expect(&mutate(&text, k, |e| drop(e.insert("SpotPrice".into(), "-0.5".into()))), &at, "negative");
    expect(&mutate(&text, k, |e| drop(e.insert("SpotPrice".into(), 0.97.into()))), &at, "expected a string");
    expect(&mutate(&text, k, |e| drop(e.remove("Timestamp"))), &at, "missing field `Timestamp`");
    expect(&mutate(&text, k, |e| drop(e.insert("Timestamp".into(), "2020-02-30T00:00:00Z".into()))), &at, "Timestamp");
    expect(&mutate(&text, k, |e| drop(e.insert("AvailabilityZone".into(), "".into()))), &at, "empty");

    // Out of order: the first entry strictly older than the one before it, moved a second past it.
    let j = (1..page.points.len()).find(|&j| page.points[j].at < page.points[j - 1].at).unwrap();
    let newer = (page.points[j - 1].at + chrono::TimeDelta::seconds(1)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let swapped = mutate(&text, j, |e| drop(e.insert("Timestamp".into(), newer.clone().into())));
    expect(&swapped, &format!("entry {j}"), &format!("is newer than entry {}'s", j - 1));
    expect(&swapped, &format!("entry {j}"), "a page must be newest first");

    // A real preemption trace, mutated.
    let trace_file = "spot-traces/preemption/aws-04-22-2023/us-west-2b_v100_1.json";
    let trace_text = std::fs::read_to_string(fixtures().join(trace_file)).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&trace_text).unwrap();
    doc["data"][100] = 0.5.into();
    let err = spot_trace::parse(trace_file, &doc.to_string()).unwrap_err();
    assert_eq!((err.source_name.as_str(), err.position.as_str()), (trace_file, "sample 100"), "{err}");
    let err = spot_trace::parse(trace_file, &trace_text[..trace_text.len() / 3]).unwrap_err();
    assert!(err.source_name == trace_file && err.position.starts_with("line "), "{err}");
}
