//! The first 2,000 jobs of the real Philly trace (fixtures/jobs/philly-pollux.csv,
//! as they arrived, 1 to 8 GPUs) on a 64-GPU cluster, under each discipline:
//! no GPU over-committed, no job lost, quotas respected, every job finishes.
//! Prints mean job completion time per discipline and checks that the
//! multi-level feedback queue beats FIFO on it, as Tiresias found.

mod common;

use chrono::TimeDelta;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sched::{DisciplineKind, SchedConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};

const CLUSTER: &str = include_str!("../fixtures/sim/philly-64.toml");

struct Outcome {
    discipline: DisciplineKind,
    mean_jct_secs: i64,
    mean_wait_secs: i64,
    preemptions: u64,
}

fn replay(discipline: DisciplineKind, traces: &Traces) -> Outcome {
    let config = SimConfig::parse("fixtures/sim/philly-64.toml", CLUSTER).unwrap();
    assert_eq!(config.workload.trace_jobs, 2000);
    let start = config.start;
    let limit = start + TimeDelta::days(150);
    let mut world = Simulation::new(config, traces, 1).unwrap();
    let mut room = Room::new(RoomConfig { sched: SchedConfig { discipline, ..SchedConfig::default() }, ..RoomConfig::default() });
    let mut n = 0u64;
    while let Some((at, event)) = world.next_event(limit) {
        let effects = room.apply(at, &event);
        assert!(!effects.iter().any(|e| matches!(e, gpuroom::domain::Effect::Rejected { .. })), "{discipline:?}: {effects:?}");
        world.handle(at, &effects);
        n += 1;
        if n.is_multiple_of(97) {
            common::check(&room, &format!("{discipline:?} after event {n} at {at}"));
        }
        if room.stats().done == 2000 {
            break;
        }
    }
    common::check(&room, &format!("{discipline:?} at the end"));
    let stats = room.stats();
    assert_eq!((stats.submitted, stats.done, stats.failed), (2000, 2000, 0), "{discipline:?}: every job finishes");
    Outcome {
        discipline,
        mean_jct_secs: stats.jct_secs_sum / 2000,
        mean_wait_secs: stats.wait_secs_sum / stats.wait_count.max(1) as i64,
        preemptions: stats.preemptions_by_scheduler,
    }
}

#[test]
fn the_first_2000_philly_jobs_finish_under_every_discipline_and_mlfq_beats_fifo() {
    let traces = Traces::embedded().unwrap();
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = DisciplineKind::ALL
            .into_iter()
            .map(|d| {
                s.spawn({
                    let traces = &traces;
                    move || replay(d, traces)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("discipline  mean JCT (h)  mean wait (h)  scheduler preemptions");
    for o in &outcomes {
        println!(
            "{:<10}  {:>12.1}  {:>13.1}  {:>21}",
            o.discipline.discipline().name(),
            o.mean_jct_secs as f64 / 3600.0,
            o.mean_wait_secs as f64 / 3600.0,
            o.preemptions
        );
    }
    let jct = |d: DisciplineKind| outcomes.iter().find(|o| o.discipline == d).unwrap().mean_jct_secs;
    assert!(jct(DisciplineKind::Mlfq) < jct(DisciplineKind::Fifo), "MLFQ mean JCT {} s vs FIFO {} s", jct(DisciplineKind::Mlfq), jct(DisciplineKind::Fifo));
}
