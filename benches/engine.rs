//! How fast the core runs on the simulated cluster: events applied per second
//! by `Room::apply`, a simulated day end to end, and building a `View`.
//! Prints figures (and throughput); asserts nothing about time.

use std::hint::black_box;

use chrono::TimeDelta;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpuroom::engine::Engine;
use gpuroom::room::Room;
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};

fn recorded_day() -> Vec<(gpuroom::domain::units::At, gpuroom::domain::Event)> {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let end = config.start + TimeDelta::hours(24);
    let mut world = Simulation::new(config, &traces, 1).unwrap();
    let mut room = Room::default();
    let mut events = Vec::new();
    while let Some((at, event)) = world.next_event(end) {
        let effects = room.apply(at, &event);
        world.handle(at, &effects);
        events.push((at, event));
    }
    events
}

fn benches(c: &mut Criterion) {
    let events = recorded_day();
    let mut group = c.benchmark_group("room");
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("apply a recorded simulated day", |b| {
        b.iter(|| {
            let mut room = Room::default();
            for (at, event) in &events {
                black_box(room.apply(*at, event));
            }
            room
        })
    });
    group.finish();

    let traces = Traces::embedded().unwrap();
    c.bench_function("engine: simulate one day (60 GPUs, no log)", |b| {
        b.iter(|| {
            let config = SimConfig::default_embedded();
            let end = config.start + TimeDelta::hours(24);
            let world = Simulation::new(config, &traces, 1).unwrap();
            let mut engine = Engine::new(Room::default(), world, None);
            engine.run_until(end).unwrap();
            engine.room().stats().events
        })
    });

    let mut room = Room::default();
    for (at, event) in &events {
        room.apply(*at, event);
    }
    c.bench_function("view: build the console's View after a day", |b| b.iter(|| black_box(room.view())));
}

criterion_group!(engine, benches);
criterion_main!(engine);
