//! An alarm's life through `Room::apply`: raised → (acknowledged) →
//! cleared, and a cleared alarm nobody saw stays listed, unread, until an
//! operator acknowledges it. Fleet-level events are alarms, not log lines:
//! a spot storm, a missed interruption save, a burst of failed jobs, a pool
//! refusing launches. And on the real simulated cluster, nothing an on-call
//! engineer should have seen slips by between two looks.

use chrono::TimeDelta;
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::{Action, Actor, Event, Role};
use gpuroom::domain::ids::{JobId, NodeId};
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::engine::Engine;
use gpuroom::room::view::{AlarmCounts, AlarmSeverity};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};

fn operator() -> Actor {
    Actor { user: "ana".into(), origin: "ssh 10.0.0.5".into(), role: Role::Operator, account: None }
}

fn ack(room: &mut Room, at: i64, id: &str) -> Result<String, String> {
    let fx = room.apply(t(at), &Event::Operator { actor: operator(), action: Action::AcknowledgeAlarm { id: id.into() } });
    match fx.iter().find_map(|e| if let gpuroom::domain::event::Effect::Rejected { reason } = e { Some(reason.clone()) } else { None }) {
        Some(why) => Err(why),
        None => Ok(room.audit().last().map(|a| a.what.clone()).unwrap_or_default()),
    }
}

/// Four one-GPU spot nodes and a job on the first.
fn spot_room() -> Room {
    let mut room = Room::new(RoomConfig::default());
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("nlp", 4) });
    for id in 1..=4 {
        room.apply(t(0), &Event::NodeUp { spec: node_spec(id, BillingMode::Spot, 1) });
    }
    let mut job = job_spec(1, "nlp", 1);
    job.pool = gpuroom::domain::job::PoolPreference::Any;
    room.apply(t(1), &Event::JobSubmitted { spec: job });
    room.apply(t(2), &Event::JobStarted { job: JobId(1) });
    room
}

#[test]
fn a_spot_storm_and_a_missed_save_are_critical_alarms_that_stay_until_read() {
    let mut room = spot_room();
    let on = room.view().jobs.iter().find(|j| j.id == JobId(1)).and_then(|j| j.node.clone()).expect("job 1 placed");
    let node = room.view().nodes.iter().find(|n| n.name == on).map(|n| n.id).unwrap();
    // A notice: the job starts its save, and the node goes before it is written.
    room.apply(t(100), &Event::InterruptionNotice { node, deadline: t(220) });
    room.apply(t(220), &Event::NodeLost { node, reason: "spot interruption".into() });
    let others: Vec<NodeId> = (1..=4).map(NodeId).filter(|n| *n != node).collect();
    room.apply(t(300), &Event::NodeLost { node: others[0], reason: "spot interruption".into() });
    assert!(room.view().alarms.iter().all(|a| a.id != "storm:fleet"), "two losses are not a storm");
    room.apply(t(400), &Event::NodeLost { node: others[1], reason: "spot interruption".into() });

    let view = room.view();
    let storm = view.alarms.iter().find(|a| a.id == "storm:fleet").expect("a storm alarm");
    assert!(storm.text.starts_with("storm: 3 nodes lost within 10m00s"), "{}", storm.text);
    assert_eq!(storm.severity, AlarmSeverity::Critical);
    let save = view.alarms.iter().find(|a| a.id == "save:j1").expect("a missed-save alarm");
    assert!(save.text.contains("its save did not finish before") && save.text.contains("last checkpoint"), "{}", save.text);
    assert_eq!(save.severity, AlarmSeverity::Critical);
    // The notice's own alarm cleared when its node went: nobody saw it, so it stays, unread.
    let notice = view.alarms.iter().find(|a| a.id.starts_with("notice:")).expect("the notice stays listed");
    assert_eq!((notice.cleared_at, notice.severity), (Some(t(220)), AlarmSeverity::Warning));
    let counts = AlarmCounts::of(&view.alarms);
    assert_eq!((counts.open, counts.critical, counts.unread), (2, 2, 1), "{:#?}", view.alarms);

    // Acknowledged, the save alarm holds until it clears and then leaves;
    // the storm, which nobody acknowledged, clears and stays, unread.
    ack(&mut room, 500, "save:j1").unwrap();
    room.apply(t(400 + 900), &Event::Tick);
    let view = room.view();
    assert!(view.alarms.iter().all(|a| a.id != "save:j1"), "acked and cleared: gone");
    let storm = view.alarms.iter().find(|a| a.id == "storm:fleet").expect("still listed");
    assert_eq!(storm.cleared_at, Some(t(1300)));
    assert_eq!(AlarmCounts::of(&view.alarms), AlarmCounts { open: 0, acked: 0, unread: 2, critical: 0 });
    assert_eq!(view.alarms[0].id, "storm:fleet", "the latest cleared first");
    assert!(!AlarmCounts::of(&view.alarms).quiet(), "an unread alarm is not quiet");

    // Read, it leaves; a second time there is nothing to read.
    let what = ack(&mut room, 1400, "storm:fleet").unwrap();
    assert!(what.contains("cleared at") && what.contains("storm: 3 nodes"), "{what}");
    let left: Vec<String> = room.view().alarms.iter().map(|a| a.id.clone()).collect();
    assert_eq!(left, vec![notice_id(&room)], "only the unread notice is left");
    ack(&mut room, 1400, &left[0]).unwrap();
    assert!(room.view().alarms.is_empty());
    let again = ack(&mut room, 1401, "storm:fleet").unwrap_err();
    assert!(again.contains("not listed"), "{again}");
}

fn notice_id(room: &Room) -> String {
    room.view().alarms.iter().find(|a| a.id.starts_with("notice:")).map(|a| a.id.clone()).unwrap_or_default()
}

#[test]
fn a_cleared_condition_alarm_fires_again_as_new_and_an_ack_does_not_carry_over() {
    let mut room = Room::new(RoomConfig::default());
    let down =
        |ok: bool| Event::SourceStatus { source: "dcgm n0".into(), ok, detail: if ok { "answers".into() } else { "connection refused".into() }, stale: vec![] };
    room.apply(t(0), &down(false));
    let id = room.view().alarms[0].id.clone();
    ack(&mut room, 10, &id).unwrap();
    assert_eq!(room.view().alarms[0].acked_by.as_deref(), Some("ana"));
    room.apply(t(20), &down(true));
    assert!(room.view().alarms.is_empty(), "acknowledged, then cleared: gone");
    room.apply(t(30), &down(false));
    room.apply(t(40), &down(true));
    let view = room.view();
    assert_eq!(view.alarms.len(), 1, "fired and cleared while nobody looked");
    assert_eq!((view.alarms[0].acked_by.as_ref(), view.alarms[0].cleared_at), (None, Some(t(40))));
    room.apply(t(50), &down(false));
    let view = room.view();
    assert_eq!((view.alarms.len(), view.alarms[0].cleared_at, view.alarms[0].raised_at), (1, None, t(50)), "the same alarm fires again, active");
}

#[test]
fn jobs_failing_in_a_burst_are_one_alarm() {
    let mut room = Room::new(RoomConfig::default());
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("nlp", 8) });
    room.apply(t(0), &Event::NodeUp { spec: node_spec(1, BillingMode::OnDemand, 8) });
    for id in 1..=6 {
        room.apply(t(1), &Event::JobSubmitted { spec: job_spec(id, "nlp", 1) });
    }
    for id in 1..=6 {
        room.apply(t(2), &Event::JobStarted { job: JobId(id) });
    }
    for id in 1..=6 {
        room.apply(t(60 * id as i64), &Event::JobExited { job: JobId(id), ok: false, message: "CUDA error: out of memory".into() });
    }
    let view = room.view();
    let burst: Vec<_> = view.alarms.iter().filter(|a| a.id == "failures:jobs").collect();
    assert_eq!(burst.len(), 1, "{:#?}", view.alarms);
    assert!(burst[0].text.starts_with("6 jobs failed within 10m00s (j1, j2, j3, j4, and 2 more)"), "{}", burst[0].text);
    assert_eq!(view.log.iter().filter(|l| l.text.contains("jobs failed within")).count(), 1, "one log line, updated in place");
}

/// The real simulated cluster (real spot traces) for two days: every burst
/// of node losses the log shows is an alarm an operator can still find —
/// active, or cleared and unread — never only a log line.
#[test]
fn on_the_simulated_cluster_no_storm_slips_by_unseen() {
    let traces = Traces::embedded().unwrap();
    let (name, text) = gpuroom::sim::data::DEFAULT_CONFIG;
    let config = SimConfig::parse(name, text).unwrap();
    let start = config.start;
    let world = Simulation::new(config, &traces, 7).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, None);
    let mut storms_seen = 0;
    for hour in 1..=48 {
        engine.run_until(start + TimeDelta::hours(hour)).unwrap();
        let view = engine.room().view();
        if view.alarms.iter().any(|a| a.id == "storm:fleet" && a.acked_by.is_none()) {
            storms_seen += 1;
            // Read it, as the on-call would: it leaves only when read.
            let room = engine.operate(&operator(), Action::AcknowledgeAlarm { id: "storm:fleet".into() }).unwrap();
            assert!(room.is_ok(), "{room:?}");
        }
    }
    let view = engine.room().view();
    assert!(view.totals.stats.nodes_lost >= 3, "the traces take nodes away: {}", view.totals.stats.nodes_lost);
    eprintln!("{} nodes lost in two days; a storm alarm in {storms_seen} of 48 hourly looks", view.totals.stats.nodes_lost);
    assert!(storms_seen > 0, "{} nodes lost in two days and never a storm alarm", view.totals.stats.nodes_lost);
}
