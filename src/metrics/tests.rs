//! The families a simulated day's view gives, by name, label and unit.

use std::sync::Arc;

use super::*;
use crate::engine::Engine;
use crate::room::{Room, RoomConfig};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};

fn day() -> Snapshot {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let start = config.start;
    let world = Simulation::new(config, &traces, 1).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, None);
    engine.run_until(start + chrono::TimeDelta::hours(30)).unwrap();
    let view = engine.room().view();
    Snapshot {
        view: Arc::new(view),
        health: Health { world: "sim".into(), published_ms: 1_000, log_bytes: Some(4096), wal_bytes: Some(0), consoles: Default::default() },
    }
}

fn value(text: &str, series: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' ')).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_days_view_gives_every_family_with_its_unit_and_bounded_labels() {
    let snapshot = day();
    let text = render_text(&snapshot, 4_000);
    let view = &snapshot.view;
    for family in [
        "gpuroom_gpus",
        "gpuroom_nodes",
        "gpuroom_gpu_utilization_ratio",
        "gpuroom_gpu_memory_used_bytes",
        "gpuroom_queue_jobs",
        "gpuroom_queue_oldest_wait_seconds",
        "gpuroom_budget_used_ratio",
        "gpuroom_budget_level",
        "gpuroom_tenant_spend_dollars_total",
        "gpuroom_spend_dollars_total",
        "gpuroom_spot_price_dollars_per_hour",
        "gpuroom_spot_lowest_cap_dollars_per_hour",
        "gpuroom_interruption_notices_total",
        "gpuroom_nodes_lost_total",
        "gpuroom_checkpoints_total",
        "gpuroom_checkpoint_saves_missed_total",
        "gpuroom_engine_events_total",
        "gpuroom_engine_view_age_seconds",
        "gpuroom_engine_log_size_bytes",
        "gpuroom_alarms",
    ] {
        assert!(text.contains(&format!("# TYPE {family} ")), "{family} missing");
    }
    // The figures are the view's.
    let gpus: f64 = text.lines().filter(|l| l.starts_with("gpuroom_gpus{")).map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).sum();
    assert_eq!(gpus as usize, view.nodes.iter().map(|n| n.gpus.len()).sum::<usize>());
    assert_eq!(value(&text, "gpuroom_engine_events_total"), view.events as f64);
    assert_eq!(value(&text, "gpuroom_engine_view_age_seconds"), 3.0);
    let spot = value(&text, "gpuroom_spend_dollars_total{billing=\"spot\"}");
    assert!((spot - view.totals.spend_by_mode[2].0 as f64 / 1e6).abs() < 1e-6);
    // No job id is a label.
    assert!(!text.lines().any(|l| l.contains("job=")), "a job id as a label");
    // Three series per GPU, the rest per tenant, pool and source: never per job.
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    let per_gpu = text.lines().filter(|l| l.starts_with("gpuroom_gpu_") && l.contains("gpu=\"")).count();
    assert!(per_gpu <= 3 * gpus as usize, "{per_gpu} per-GPU series for {gpus} GPUs");
    assert!(series - per_gpu < 150, "{series} series, {per_gpu} per GPU");
}

#[test]
fn openmetrics_is_served_when_asked_and_ends_with_eof() {
    let text = render_openmetrics(&day(), 4_000);
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# UNIT gpuroom_budget_spent_dollars dollars"), "{}", &text[..400]);
}

/// FAMILIES is what a scrape exports: each TYPE line names one of them with
/// its kind, and each one that is not "sometimes" is in a day's scrape.
#[test]
fn the_documented_families_are_the_exported_ones() {
    let text = render_text(&day(), 4_000);
    let typed: Vec<(&str, &str)> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_once(' ')).collect();
    for (name, kind) in &typed {
        let doc = FAMILIES.iter().find(|f| f.name == *name).unwrap_or_else(|| panic!("{name} is exported but not in FAMILIES"));
        assert_eq!(doc.kind, *kind, "{name}");
    }
    for family in FAMILIES.iter().filter(|f| !f.sometimes) {
        assert!(typed.iter().any(|(n, _)| *n == family.name), "{} is documented but not in a day's scrape", family.name);
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for family in FAMILIES {
        assert!(readme.contains(&format!("`{}`", family.name)), "README does not list {}", family.name);
    }
}
