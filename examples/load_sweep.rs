//! Prints the simulated cluster every 6 h for a given target load: a tuning
//! aid for fixtures/sim/default.toml (`cargo run --release --example load_sweep -- 1.2`).
fn main() {
    let load: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let traces = gpuroom::sim::Traces::embedded().unwrap();
    let mut config = gpuroom::sim::config::SimConfig::default_embedded();
    config.target_load = load;
    let start = config.start;
    let world = gpuroom::sim::Simulation::new(config, &traces, 1).unwrap();
    let mut engine = gpuroom::engine::Engine::new(gpuroom::room::Room::default(), world, None);
    for h in (6..=96).step_by(6) {
        engine.run_until(start + chrono::TimeDelta::hours(h)).unwrap();
        let v = engine.room().view();
        println!(
            "{h:>3}h busy {:>2}/{:>2} util {:>3.0}% queue {:>3} oldest {:>8} mean wait {:>8}",
            v.cluster.gpus_busy,
            v.cluster.gpus_total,
            v.cluster.util_mean,
            v.queue.depth,
            v.queue.oldest_wait.map(|w| w.to_string()).unwrap_or_default(),
            v.totals.mean_wait.map(|w| w.to_string()).unwrap_or_default()
        );
    }
}
