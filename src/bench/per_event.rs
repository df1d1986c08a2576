//! What one event costs `Room::apply` as the queue grows: the console's
//! 1,000-GPU room (`tui::fixture_large`) built with about 1,000, 10,000 and
//! 100,000 jobs waiting, then moved on by the same steps (telemetry for
//! every GPU and running job, the jobs that end and what the queue starts
//! in their place, spot prices), timing only `Room::apply`. An event that
//! needs no look at the queue should cost the same at every size; one that
//! ends a job runs a scheduling pass, which reads the queue.

use std::time::Instant;

use super::progress::progress;
use crate::tui::fixture_large::{large_room, telemetry_step};

/// One queue size.
#[derive(Clone, Debug, PartialEq)]
pub struct PerEventFigures {
    pub gpus: usize,
    pub jobs: usize,
    /// Jobs waiting when the measured steps began.
    pub queued: u32,
    /// Wall seconds to build the room through `Room::apply`.
    pub build_secs: f64,
    pub events: u64,
    pub secs: f64,
    pub micros_per_event: f64,
}

const GPUS: usize = 1_000;
const SEED: u64 = 1;

/// Queue sizes to measure, and the steps at each.
fn plan(quick: bool) -> (Vec<usize>, u64) {
    if quick { (vec![200, 2_000], 5) } else { (vec![1_000, 10_000, 100_000], 120) }
}

/// Builds each room and times the same number of steps on it.
pub fn measure(quick: bool) -> Vec<PerEventFigures> {
    let (sizes, steps) = plan(quick);
    let gpus = if quick { 100 } else { GPUS };
    sizes.into_iter().map(|queued| at_queue(gpus, queued, steps)).collect()
}

fn at_queue(gpus: usize, queued: usize, steps: u64) -> PerEventFigures {
    // About 900 of the fixture's jobs run or finish within its six hours on
    // 1,000 GPUs, and a few percent more of a long queue.
    let jobs = queued + queued / 20 + gpus * 9 / 10;
    progress(format_args!("per event: building {gpus} GPUs with {jobs} jobs submitted"));
    let started = Instant::now();
    let mut room = large_room(gpus, jobs, SEED);
    let build_secs = started.elapsed().as_secs_f64();
    let waiting = room.view().queue.depth;
    let before = room.stats().events;
    // Only the time inside `Room::apply` counts, not the fixture's making of the events.
    let secs: f64 = (0..steps).map(|k| telemetry_step(&mut room, k).as_secs_f64()).sum();
    let events = room.stats().events - before;
    progress(format_args!("per event: {waiting} queued: {events} events in {secs:.3} s (built in {build_secs:.1} s)"));
    PerEventFigures { gpus, jobs, queued: waiting, build_secs, events, secs, micros_per_event: secs * 1e6 / events.max(1) as f64 }
}
