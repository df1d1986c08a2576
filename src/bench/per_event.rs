//! What one event costs `Room::apply` as the queue grows (issue 38): the
//! console's 1,000-GPU room (`tui::fixture_large`) built with about 1,000,
//! 10,000 and 100,000 jobs waiting, switched to each queue discipline, then
//! moved on by the same steps (telemetry for every GPU and running job, the
//! jobs that end and what the queue starts in their place, spot prices),
//! timing only `Room::apply`. Per event should cost about the same at every
//! size: the target is the 100,000-queued figure ≤ 3× the 1,000-queued one.
//!
//! At the largest size, under each discipline, two rates a busy Slurm
//! controller is documented to sustain: a sweep of 10,000 submissions
//! (≥ 1,000 jobs/s) and jobs started as running ones end (≥ 500 starts/s).

use std::time::Instant;

use super::progress::progress;
use crate::domain::discipline::DisciplineKind;
use crate::domain::event::{Action, Actor, Event, Role};
use crate::domain::job::Phase;
use crate::room::Room;
use crate::tui::fixture_large::{job, large_room, play, telemetry_step};

/// One queue size under one discipline.
#[derive(Clone, Debug, PartialEq)]
pub struct PerEventFigures {
    pub gpus: usize,
    pub jobs: usize,
    pub discipline: DisciplineKind,
    /// Jobs waiting when the measured steps began.
    pub queued: u32,
    /// Wall seconds to build the room through `Room::apply` (under FIFO,
    /// the fixture's discipline; the switch is not timed).
    pub build_secs: f64,
    pub events: u64,
    pub secs: f64,
    pub micros_per_event: f64,
}

/// Submissions and starts at the largest queue, under one discipline.
#[derive(Clone, Debug, PartialEq)]
pub struct RateFigures {
    pub discipline: DisciplineKind,
    /// Jobs waiting before the sweep.
    pub queued: u32,
    /// The sweep: jobs submitted one event each, and the seconds in `Room::apply`.
    pub submitted: u64,
    pub submit_secs: f64,
    /// Running jobs ended one event each, and the jobs started in their place.
    pub ended: u64,
    pub starts: u64,
    pub start_secs: f64,
}

impl RateFigures {
    pub fn jobs_per_sec(&self) -> f64 {
        self.submitted as f64 / self.submit_secs.max(1e-9)
    }

    pub fn starts_per_sec(&self) -> f64 {
        self.starts as f64 / self.start_secs.max(1e-9)
    }
}

/// Everything this module measures.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct QueueFigures {
    pub per_event: Vec<PerEventFigures>,
    pub rates: Vec<RateFigures>,
}

impl QueueFigures {
    /// The smallest and the largest queue measured under `discipline`.
    pub fn ends(&self, discipline: DisciplineKind) -> Option<(&PerEventFigures, &PerEventFigures)> {
        let mut sizes = self.per_event.iter().filter(|p| p.discipline == discipline);
        let first = sizes.next()?;
        Some((first, sizes.next_back()?))
    }

    /// Per event at the largest queue ÷ at the smallest, for `discipline`.
    pub fn growth(&self, discipline: DisciplineKind) -> Option<f64> {
        let (first, last) = self.ends(discipline)?;
        Some(last.micros_per_event / first.micros_per_event.max(1e-9))
    }
}

const GPUS: usize = 1_000;
/// Seconds of `Room::apply` after which a sweep or the starts stop.
const PART_CAP_SECS: f64 = 30.0;
const SEED: u64 = 1;

/// Queue sizes to measure, the steps at each, and the sweep's size.
fn plan(quick: bool) -> (Vec<usize>, u64, u64) {
    if quick { (vec![200, 2_000], 5, 200) } else { (vec![1_000, 10_000, 100_000], 120, 10_000) }
}

/// Builds each room once and times the same steps on it under each discipline.
pub fn measure(quick: bool) -> QueueFigures {
    let (sizes, steps, sweep) = plan(quick);
    let gpus = if quick { 100 } else { GPUS };
    let mut figures = QueueFigures::default();
    let last = sizes.len() - 1;
    for (i, queued) in sizes.into_iter().enumerate() {
        // About 900 of the fixture's jobs run or finish within its six hours on
        // 1,000 GPUs, and a few percent more of a long queue.
        let jobs = queued + queued / 20 + gpus * 9 / 10;
        progress(format_args!("per event: building {gpus} GPUs with {jobs} jobs submitted"));
        let started = Instant::now();
        let built = large_room(gpus, jobs, SEED);
        let build_secs = started.elapsed().as_secs_f64();
        let mut moved = Vec::new();
        for discipline in DisciplineKind::ALL {
            let mut room = built.clone();
            switch(&mut room, discipline);
            figures.per_event.push(at_queue(&mut room, gpus, jobs, discipline, build_secs, steps));
            if i == last {
                moved.push((discipline, room));
            }
        }
        // The rates last, so that every per-event figure comes first.
        for (discipline, mut room) in moved {
            figures.rates.push(rates(&mut room, discipline, jobs as u64, sweep));
        }
    }
    figures
}

fn switch(room: &mut Room, discipline: DisciplineKind) {
    let at = room.now().unwrap_or_default();
    let actor = Actor { user: "bench".into(), origin: "bench".into(), role: Role::Operator, account: None };
    room.apply(at, &Event::Operator { actor, action: Action::SetDiscipline { discipline } });
}

fn at_queue(room: &mut Room, gpus: usize, jobs: usize, discipline: DisciplineKind, build_secs: f64, steps: u64) -> PerEventFigures {
    let waiting = room.view().queue.depth;
    let before = room.stats().events;
    // Only the time inside `Room::apply` counts, not the fixture's making of the events.
    let secs: f64 = (0..steps).map(|k| telemetry_step(room, k).as_secs_f64()).sum();
    let events = room.stats().events - before;
    let name = discipline.discipline().name();
    progress(format_args!("per event: {name}, {waiting} queued: {events} events in {secs:.3} s"));
    PerEventFigures { gpus, jobs, discipline, queued: waiting, build_secs, events, secs, micros_per_event: secs * 1e6 / events.max(1) as f64 }
}

/// A sweep of `sweep` submissions, one event each, then every running job
/// ended one event each with the executor starting what the room places.
fn rates(room: &mut Room, discipline: DisciplineKind, submitted_so_far: u64, sweep: u64) -> RateFigures {
    let queued = room.view().queue.depth;
    let at = room.now().unwrap_or_default() + chrono::TimeDelta::seconds(1);
    // A slow room stops each part at the time cap: the rate over what was
    // done is the figure, and the bench stays minutes long.
    let (mut submit_secs, mut submitted) = (0.0, 0);
    while submitted < sweep && submit_secs < PART_CAP_SECS {
        let spec = job(SEED + 1, submitted_so_far + 1 + submitted);
        submit_secs += play(room, at, Event::JobSubmitted { spec }).0.as_secs_f64();
        submitted += 1;
    }
    let running: Vec<_> = room.jobs().filter(|j| j.phase() == Phase::Running).map(|j| j.spec.id).collect();
    let at = at + chrono::TimeDelta::seconds(1);
    let (mut start_secs, mut starts, mut ended) = (0.0, 0, 0);
    for job in &running {
        if start_secs >= PART_CAP_SECS {
            break;
        }
        let (secs, started) = play(room, at, Event::JobExited { job: *job, ok: true, message: String::new() });
        start_secs += secs.as_secs_f64();
        starts += started;
        ended += 1;
    }
    let figures = RateFigures { discipline, queued, submitted, submit_secs, ended, starts, start_secs };
    progress(format_args!(
        "per event: {}: {submitted} submitted at {:.0}/s into {queued} queued; {starts} started at {:.0}/s as {ended} ended",
        discipline.discipline().name(),
        figures.jobs_per_sec(),
        figures.starts_per_sec(),
    ));
    figures
}
