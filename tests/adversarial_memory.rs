//! The adversarial suite, memory: the room held every job it ever saw
//! (242 MB after 3,000 simulated hours). Finished jobs now retire after
//! `retain_finished`; the money still adds up, retired ids stay taken, and
//! a replay retires the same jobs at the same moments.

mod common;

use chrono::TimeDelta;
use gpuroom::domain::event::{Action, Actor, Effect, Event, Role};
use gpuroom::domain::units::Secs;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};

#[test]
fn finished_jobs_retire_and_the_books_still_reconcile() {
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let end = config.start + TimeDelta::hours(96);
    let mut world = Simulation::new(config, &traces, 7).unwrap();
    let room_config = RoomConfig { retain_finished: Secs(12 * 3600), ..RoomConfig::default() };
    let mut room = Room::new(room_config.clone());
    let mut replica = Room::new(room_config);
    let mut n = 0u64;
    let mut most_held = 0usize;
    let mut last_submit = None;
    while let Some((at, event)) = world.next_event(end) {
        if let Event::JobSubmitted { spec } = &event {
            last_submit = Some(spec.clone());
        }
        let effects = room.apply(at, &event);
        replica.apply(at, &event);
        world.handle(at, &effects);
        n += 1;
        most_held = most_held.max(room.jobs().count());
        if n.is_multiple_of(97) {
            common::check(&room, &format!("after event {n} at {at}"));
        }
    }
    let now = room.now().unwrap();
    common::check(&room, "at the end");
    let retired = room.retired();
    assert!(retired.count > 100, "only {} jobs retired in 96 h", retired.count);
    assert!(retired.ranges() < 50, "{} ranges for {} sequential ids", retired.ranges(), retired.count);
    let cutoff = now - TimeDelta::hours(12);
    for job in room.jobs() {
        assert!(job.finished_at.is_none_or(|f| f >= cutoff), "{} finished at {:?} is still held", job.spec.id, job.finished_at);
    }
    eprintln!("{n} events; {} jobs retired; at most {most_held} held at once", retired.count);

    // A replay holds the same jobs and the same retired totals.
    assert_eq!(serde_json::to_string(&room).unwrap(), serde_json::to_string(&replica).unwrap());
    // And so does a snapshot taken and read back.
    let back: Room = serde_json::from_str(&serde_json::to_string(&room).unwrap()).unwrap();
    assert_eq!(back.retired(), room.retired());

    // A retired id cannot be submitted again; acting on it says why.
    let mut spec = last_submit.unwrap();
    let first = (1..).map(gpuroom::domain::ids::JobId).find(|id| room.retired().contains(*id)).unwrap();
    spec.id = first;
    let at = now + TimeDelta::seconds(1);
    let effects = room.apply(at, &Event::JobSubmitted { spec });
    assert!(effects.iter().any(|e| matches!(e, Effect::Rejected { reason } if reason.contains("already exists"))), "{effects:?}");
    let operator = Actor { user: "ana".into(), origin: "local".into(), role: Role::Operator, account: None };
    let effects = room.apply(at, &Event::Operator { actor: operator, action: Action::Requeue { job: first } });
    assert!(effects.iter().any(|e| matches!(e, Effect::Rejected { reason } if reason.contains("no longer held"))), "{effects:?}");
}
