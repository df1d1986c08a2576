//! Invariants that must hold after every single event: no GPU over-committed,
//! no job lost or in two places, progress within bounds, money reconciled.
//! Checked on a long simulated run on real traces, and under random garbage.

mod common;

use chrono::TimeDelta;
use common::check;
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::{Action, Actor, Event, GpuSample, Role};
use gpuroom::domain::ids::{GpuRef, JobId, NodeId};
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, MicrosPerHour};
use gpuroom::room::Room;
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn a_three_day_simulated_run_keeps_every_invariant_after_every_event() {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let end = config.start + TimeDelta::hours(72);
    let mut world = Simulation::new(config, &traces, 3).unwrap();
    let mut room = Room::default();
    let mut n = 0u64;
    let mut rejections = Vec::new();
    while let Some((at, event)) = world.next_event(end) {
        let effects = room.apply(at, &event);
        for e in &effects {
            if let gpuroom::domain::Effect::Rejected { reason } = e {
                rejections.push(format!("{at} {}: {reason}", event.kind()));
            }
        }
        world.handle(at, &effects);
        n += 1;
        if n.is_multiple_of(7) {
            check(&room, &format!("after event {n} ({}) at {at}", event.kind()));
        }
    }
    check(&room, "at the end");
    assert!(rejections.is_empty(), "the simulated world and the room disagree:\n{}", rejections.join("\n"));
    let stats = room.stats();
    assert!(stats.done > 500 && stats.notices > 50 && stats.requeues > 10, "a busy run: {stats:?}");
}

#[test]
fn random_garbage_never_panics_and_never_breaks_an_invariant() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for round in 0..20 {
        let mut room = Room::default();
        let mut now = 0i64;
        for step in 0..1500 {
            now += rng.random_range(-5..60);
            let job = JobId(rng.random_range(0..40));
            let node = NodeId(rng.random_range(0..6));
            let event = match rng.random_range(0..14) {
                0 => Event::TenantDefined { spec: tenant_spec(["nlp", "vision", ""][rng.random_range(0..3)], 8) },
                1 => Event::NodeUp {
                    spec: node_spec(node.0, [BillingMode::Spot, BillingMode::Reserved, BillingMode::OnDemand][rng.random_range(0..3)], rng.random_range(0..9)),
                },
                2 => Event::NodeLost { node, reason: "chaos".into() },
                3 => {
                    let mut spec = job_spec(job.0, ["nlp", "vision", "ghost"][rng.random_range(0..3)], rng.random_range(0..10));
                    spec.exclusive = rng.random::<bool>();
                    spec.gpu_mem = Mib(rng.random_range(0..20_000));
                    spec.steps_total = rng.random_range(0..2000);
                    Event::JobSubmitted { spec }
                }
                4 => Event::JobStarted { job },
                5 => Event::CheckpointDone { job, step: rng.random_range(0..3000), bytes: 1 },
                6 => Event::JobStopped { job },
                7 => Event::JobExited { job, ok: rng.random::<bool>(), message: "x\x1b[31m".into() },
                8 => Event::Telemetry {
                    gpus: vec![GpuSample(
                        GpuRef { node, index: rng.random_range(0..10) },
                        [f32::NAN, 50.0, -3.0, 1e9][rng.random_range(0..4)],
                        Mib(rng.random_range(0..99_999)),
                    )],
                    progress: vec![(job, rng.random_range(0..3000))],
                },
                9 => {
                    Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(rng.random_range(-10..30_000_000)) }
                }
                10 => Event::InterruptionNotice { node, deadline: t(now + 120) },
                11 => {
                    let actor = Actor {
                        user: "op".into(),
                        origin: "chaos".into(),
                        role: if rng.random::<bool>() { Role::Operator } else { Role::Viewer },
                        account: None,
                    };
                    let action = [Action::Preempt { job }, Action::Requeue { job }, Action::Cancel { job }][rng.random_range(0..3)].clone();
                    Event::Operator { actor, action }
                }
                _ => Event::Tick,
            };
            room.apply(t(now), &event);
            if step % 25 == 0 {
                check(&room, &format!("round {round} step {step} ({})", event.kind()));
            }
        }
        check(&room, &format!("round {round} end"));
    }
}
