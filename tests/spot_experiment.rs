//! The spot experiment over the embedded real traces: what must hold
//! whatever the figures (they are printed, and written to
//! docs/spot-experiment.md by `gpuroom sim --experiment spot --out ...`).

use gpuroom::sim::Traces;
use gpuroom::sim::experiment::{self, ExperimentConfig, Strategy};

#[test]
fn six_strategies_over_the_real_traces() {
    let traces = Traces::embedded().unwrap();
    let report = experiment::run(&traces, ExperimentConfig::default(), 1).unwrap();
    println!("{}", report.table());
    let config = &report.config;
    assert!(report.bursts >= 100, "SPEC §3: at least 100 bursts");
    assert!(report.jobs > 1000);
    let get = |s: Strategy| &report.results.iter().find(|(k, _)| *k == s).unwrap().1;
    for (strategy, outcome) in &report.results {
        assert_eq!(outcome.jobs as usize, report.jobs, "{strategy:?} finished every job");
    }
    let total = |s: Strategy| get(s).total(config).0;
    // The bound is a bound: nothing that buys spot or on-demand beats it.
    for s in [Strategy::OnDemand, Strategy::NaiveSpot, Strategy::Dynamic, Strategy::Degraded] {
        assert!(total(Strategy::Omniscient) <= total(s), "{s:?} under the omniscient bound");
    }
    assert!(total(Strategy::Dynamic) < total(Strategy::OnDemand));
    assert!(total(Strategy::OnDemand) < total(Strategy::Reserved), "a reservation sized for 7× peaks idles");
    let (naive, dynamic) = (get(Strategy::NaiveSpot), get(Strategy::Dynamic));
    // Saving on the notice and migrating: fewer layers lost, fewer jobs hit twice.
    assert!(dynamic.recompute_per_interruption() < naive.recompute_per_interruption() / 2.0);
    assert!(dynamic.preemption_rate() < naive.preemption_rate());
    assert!(dynamic.checkpoint_bytes < naive.checkpoint_bytes, "incremental and risk-paced saves write less");
    assert!(dynamic.latency(0.99) < naive.latency(0.99), "falling back to on-demand keeps the tail short");
    assert_eq!(dynamic.notice_saves_missed, 0, "a ≤16 GiB save fits the 2-minute notice at 500 MB/s");
    assert!(naive.notice_saves_in_time + naive.notice_saves_missed == 0, "naive ignores notices");
    assert!(get(Strategy::Reserved).interruptions == 0 && get(Strategy::OnDemand).interruptions == 0);
    // Same seed, same table.
    let again = experiment::run(&traces, ExperimentConfig::default(), 1).unwrap();
    assert_eq!(again.table(), report.table());
}
