//! The derived state (`derived`) against a recount, event by event, over a
//! simulated day under each discipline; and a batch of submissions, bad
//! ones among them.

use std::collections::BTreeMap;

use crate::domain::cluster::BillingMode;
use crate::domain::event::{Effect, Event};
use crate::domain::ids::JobId;
use crate::domain::job::{AfterCheckpoint, Job, JobState, Phase, PoolPreference, SchedStop, StopReason};
use crate::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use crate::domain::units::Secs;
use crate::room::queue_shapes::QueueShapes;
use crate::room::wait_index::WaitIndex;
use crate::room::{Room, RoomConfig};
use crate::sched::quota::Held;
use crate::sched::{DisciplineKind, MaxWait, Resources};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};

/// Everything `derived` keeps, recounted from the jobs; panics on a difference.
fn check_against_a_recount(room: &Room, what: &str) {
    let fleet = &room.fleet;
    let at = room.now.expect("the room has a clock");
    let mut resources: BTreeMap<_, Resources> = BTreeMap::new();
    let mut held: BTreeMap<_, Held> = BTreeMap::new();
    for job in fleet.holding_ids().filter_map(|id| fleet.jobs.get(&id)) {
        resources.entry(job.spec.tags.tenant.clone()).or_default().add(Resources::of(&job.spec));
        held.entry(job.spec.tags.tenant.clone()).or_default().add(Held::of(&job.spec));
    }
    assert_eq!(fleet.holdings(), (resources, held), "{what}: holdings");
    assert_eq!(fleet.any_borrowed(), !fleet.borrowed().is_empty(), "{what}: borrowing");
    let stopping = fleet.holding_ids().filter_map(|id| fleet.jobs.get(&id)).any(|j| {
        matches!(&j.state,
            JobState::Preempted { reason: StopReason::Scheduler(s) } | JobState::Checkpointing { then: AfterCheckpoint::Stop(StopReason::Scheduler(s)) }
                if !matches!(s, SchedStop::Idle | SchedStop::Consolidate { .. }))
    });
    assert_eq!(fleet.scheduler_stop_pending(), stopping, "{what}: scheduler stops");
    if let Some(order) = fleet.built_queue_order() {
        assert_eq!(order.len(), fleet.queued_ids().count(), "{what}: every queued job in the ordered index once");
        // The index as events left it, walked, against a fresh sort.
        let mut walker = fleet.clone();
        let mut walk = walker.walk_queue(&room.config.sched, at);
        let walked: Vec<JobId> = std::iter::from_fn(|| walker.walk_next(&mut walk, &room.config.sched)).collect();
        let sorted: Vec<JobId> = fleet.ordered_queue(&room.config.sched, at).iter().map(|j| j.spec.id).collect();
        assert_eq!(walked, sorted, "{what}: the ordered index walks as a fresh sort orders");
    }
    if let Some(shapes) = fleet.built_queue_shapes() {
        let fresh = QueueShapes::of(fleet.queued_ids().filter_map(|id| fleet.jobs.get(&id)));
        assert_eq!(shapes.summary(), fresh.summary(), "{what}: the queue's shapes");
        assert_eq!(shapes.len(), fleet.queued_ids().count(), "{what}: every queued job indexed once");
    }
    if let Some(waits) = fleet.built_wait_index() {
        let fresh = WaitIndex::of(fleet.queued_ids().filter_map(|id| fleet.jobs.get(&id)));
        assert_eq!(waits, &fresh, "{what}: the queued jobs by wait, escalated ones per wait alarm");
        let scanned: Vec<JobId> = fleet
            .queued_ids()
            .filter_map(|id| fleet.jobs.get(&id))
            .filter(|j| !j.escalated && Secs(j.wait_secs(at)) > room.config.sched.max_wait.of(j.spec.class))
            .map(|j| j.spec.id)
            .collect();
        assert_eq!(waits.late(at, &room.config.sched.max_wait), scanned, "{what}: the late jobs a scan finds");
        let mut groups: BTreeMap<_, Vec<&Job>> = BTreeMap::new();
        for job in fleet.queued_ids().filter_map(|id| fleet.jobs.get(&id)).filter(|j| j.escalated) {
            groups.entry((job.spec.tags.tenant.clone(), job.spec.class)).or_default().push(job);
        }
        for ((tenant, class), jobs) in groups {
            let oldest = jobs.iter().max_by_key(|j| (j.wait_secs(at), std::cmp::Reverse(j.spec.id))).map(|j| j.spec.id);
            let any_spot_only = jobs.iter().any(|j| j.spec.pool == PoolPreference::SpotOnly);
            let kept = waits.group(&tenant, class, at);
            assert_eq!(kept.map(|g| (g.jobs, g.any_spot_only, g.oldest)), oldest.map(|o| (jobs.len(), any_spot_only, o)), "{what}: a wait alarm's group");
        }
    }
    for job in fleet.jobs.values() {
        let accruing = job.phase() == Phase::Running && fleet.is_holding(job.spec.id);
        assert_eq!(job.service_from.is_some(), accruing, "{what}: job {} accrues service only while it runs", job.spec.id);
        if fleet.is_holding(job.spec.id) {
            let due = fleet.checkpoint_due_at(&room.config.checkpoint, job);
            assert!(due.is_none_or(|due| due > at), "{what}: job {} was due a save at {due:?} and was not asked", job.spec.id);
        }
    }
}

#[test]
fn derived_state_matches_a_recount_after_every_event_of_a_simulated_day() {
    let traces = Traces::embedded().unwrap();
    for discipline in DisciplineKind::ALL {
        let config = SimConfig::default_embedded();
        let end = config.start + chrono::TimeDelta::hours(24);
        let mut world = Simulation::new(config, &traces, 2).unwrap();
        let mut room_config = RoomConfig::default();
        room_config.sched.discipline = discipline;
        // Short limits, so that the day escalates jobs and raises wait alarms.
        room_config.sched.max_wait = MaxWait { training: Secs(1_800), fine_tune: Secs(900), eval: Secs(300), batch_inference: Secs(300) };
        let mut room = Room::new(room_config);
        let mut events = 0;
        while let Some((at, event)) = world.next_event(end) {
            let effects = room.apply(at, &event);
            check_against_a_recount(&room, &format!("{discipline:?}, event {events} ({})", event.kind()));
            world.handle(at, &effects);
            events += 1;
        }
        assert!(room.stats().checkpoints > 0 && room.stats().done > 0, "{discipline:?}: the day ran jobs and saved them");
        assert!(room.stats().escalations > 0, "{discipline:?}: the day escalated late jobs");
        // A room restored from its snapshot builds the same derived state.
        let mut restored: Room = serde_json::from_str(&serde_json::to_string(&room).unwrap()).unwrap();
        assert_eq!(restored, room);
        let next = room.now.unwrap() + chrono::TimeDelta::seconds(1);
        assert_eq!(restored.apply(next, &Event::Tick), room.apply(next, &Event::Tick));
        check_against_a_recount(&restored, "restored");
        assert_eq!(restored.view(), room.view());
    }
}

#[test]
fn a_batch_is_checked_job_by_job_and_placed_in_one_pass() {
    let mut room = Room::default();
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 8) });
    room.apply(t(0), &Event::NodeUp { spec: node_spec(1, BillingMode::Reserved, 8) });
    let mut no_gpus = job_spec(2, "a", 1);
    no_gpus.gpus = 0;
    let specs = vec![job_spec(1, "a", 2), no_gpus, job_spec(1, "a", 1), job_spec(3, "a", 4), job_spec(4, "nobody", 1), job_spec(5, "a", 4)];
    let placements_before = room.stats().placements;
    let effects = room.apply(t(10), &Event::JobsSubmitted { specs });
    let rejected: Vec<&str> = effects.iter().filter_map(|e| if let Effect::Rejected { reason } = e { Some(reason.as_str()) } else { None }).collect();
    assert_eq!(rejected.len(), 3, "{rejected:?}");
    assert!(rejected[0].contains("job j2") && rejected[0].contains("asks 0 GPUs"), "{rejected:?}");
    assert!(rejected[1].contains("job j1") && rejected[1].contains("already exists"), "{rejected:?}");
    assert!(rejected[2].contains("job j4") && rejected[2].contains("unknown tenant"), "{rejected:?}");
    // The good ones went in, and one pass placed what fits: 2 + 4 GPUs of 8.
    let started: Vec<JobId> = effects.iter().filter_map(|e| if let Effect::StartJob { job, .. } = e { Some(*job) } else { None }).collect();
    assert_eq!(started, vec![JobId(1), JobId(3)]);
    assert_eq!(room.stats().placements - placements_before, 2);
    assert_eq!(room.stats().submitted, 3);
    assert_eq!(room.job(JobId(5)).map(|j| j.phase()), Some(Phase::Queued), "job 5 waits for room");
    assert_eq!(room.job(JobId(1)).map(|j| j.spec.gpus), Some(2), "the first job 1 is kept, not the duplicate");
    assert!(room.job(JobId(2)).is_none() && room.job(JobId(4)).is_none());
    assert_eq!(Event::JobsSubmitted { specs: vec![] }.kind(), "submit-batch");
}

/// A queue under pressure: three tenants past their quotas, borrowing, a
/// tenant with a small budget, jobs of every size and pool, more queued than the
/// fleet holds many times over. The pass that passes tenants over and stops
/// when nothing fits gives, event by event, the effects of one that tries
/// every queued job, under each discipline (issue 38).
#[test]
fn a_pass_that_stops_early_places_exactly_what_trying_every_job_places() {
    use crate::domain::job::PoolPreference;
    use crate::domain::units::{Mib, Secs};
    for discipline in DisciplineKind::ALL {
        let mut config = RoomConfig::default();
        config.sched.discipline = discipline;
        config.sched.aging_per_hour = 1.0;
        let mut fast = Room::new(config.clone());
        let mut full = Room::new(config);
        full.sched.test.full_walk = true;
        let both = |rooms: (&mut Room, &mut Room), at: i64, event: Event| {
            let (a, b) = (rooms.0.apply(t(at), &event), rooms.1.apply(t(at), &event));
            assert_eq!(a, b, "{discipline:?} at {at}: {}", event.kind());
            a
        };
        for (name, quota) in [("a", 12), ("b", 8), ("c", 4)] {
            let mut spec = tenant_spec(name, quota);
            spec.borrow_limit_gpus = 6;
            if name == "c" {
                spec.monthly_budget = crate::domain::units::Micros(2_000_000);
            }
            both((&mut fast, &mut full), 0, Event::TenantDefined { spec });
        }
        for n in 1..=6u32 {
            let billing = [BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Spot][n as usize % 3];
            both((&mut fast, &mut full), 0, Event::NodeUp { spec: node_spec(n, billing, if n % 2 == 0 { 8 } else { 4 }) });
        }
        let mut running: Vec<JobId> = Vec::new();
        let started = |effects: Vec<Effect>, running: &mut Vec<JobId>| {
            for effect in effects {
                if let Effect::StartJob { job, .. } = effect {
                    running.push(job);
                }
            }
        };
        for n in 1..=400u64 {
            let mut spec = job_spec(n, ["a", "b", "c"][(n * 7 % 3) as usize], [1, 1, 2, 4, 8][(n * 13 % 5) as usize]);
            spec.exclusive = n % 4 != 0;
            spec.gpu_mem = Mib(2_000 + (n * 997 % 14_000) as u32);
            spec.pool = [PoolPreference::Any, PoolPreference::NoSpot, PoolPreference::SpotOnly][(n % 3) as usize];
            spec.priority = (n % 5) as i32;
            spec.est_runtime = Some(Secs(600 + (n * 311 % 20_000) as i64));
            let effects = both((&mut fast, &mut full), 10 + n as i64, Event::JobSubmitted { spec });
            started(effects, &mut running);
        }
        let mut at = 1_000;
        for round in 0..300u64 {
            at += 60;
            let pending: Vec<JobId> = std::mem::take(&mut running);
            for job in &pending {
                both((&mut fast, &mut full), at, Event::JobStarted { job: *job });
            }
            // The oldest running job ends; the rest keep running.
            let mut holding: Vec<JobId> = fast.jobs().filter(|j| j.phase() == Phase::Running).map(|j| j.spec.id).collect();
            holding.sort();
            if let Some(job) = holding.get((round % 3) as usize) {
                let effects = both((&mut fast, &mut full), at, Event::JobExited { job: *job, ok: true, message: String::new() });
                started(effects, &mut running);
            }
            let effects = both((&mut fast, &mut full), at, Event::Tick);
            started(effects, &mut running);
        }
        assert!(fast.sched.test.not_tried > 1000, "{discipline:?}: the shortcuts were taken ({} jobs not tried)", fast.sched.test.not_tried);
        assert_eq!(full.sched.test.not_tried, 0);
        assert_eq!(fast, full, "{discipline:?}: the rooms end the same");
        assert!(fast.stats().placements > 100, "{discipline:?}: the queue moved ({} placements)", fast.stats().placements);
        assert!(fast.view().queue.depth > 50, "{discipline:?}: and stayed long ({} queued)", fast.view().queue.depth);
    }
}
