//! The room as Slurm's policy, driven by snapshots as the adapter sends
//! them: the order and the nodes leave as one `scontrol update` per job and
//! only when Slurm's copy differs; advisory mode sends nothing; a start that
//! jumps the order is flagged; spot jobs are asked to save at the room's
//! interval, their acknowledgement read back, a silent one named; the market
//! passing a job's cap saves it and moves it off the pool.

use crate::domain::cluster::BillingMode;
use crate::domain::event::{Effect, Event, TenantSpec};
use crate::domain::ids::{NodeId, TenantId};
use crate::domain::slurm::{Schedule, SlurmJob, SlurmMode, SlurmNode, SlurmPartition, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::testkit::{node_spec, t};
use crate::domain::units::{Mib, Micros, MicrosPerHour, Secs};
use crate::room::{Room, RoomConfig};
use crate::sched::DisciplineKind;

fn node(name: &str, id: u32, partition: &str, used: u32) -> SlurmNode {
    SlurmNode {
        name: name.into(),
        state: if used > 0 { "mixed".into() } else { "idle".into() },
        cpus: 4,
        gpus: 4,
        gpus_used: used,
        gpu_type: Some("a10g".into()),
        partitions: vec![partition.into()],
        node: Some(NodeId(id)),
        ..Default::default()
    }
}

fn pending(id: u64, account: &str, gpus: u32, comment: &str, submitted: i64) -> SlurmJob {
    SlurmJob {
        id,
        name: format!("j{id}"),
        user: "u".into(),
        account: account.into(),
        partition: "spot,od".into(),
        state: SlurmState::Pending,
        reason: "Resources".into(),
        gpus,
        submitted: Some(t(submitted)),
        priority: 4_294_901_000 - id,
        comment: comment.into(),
        ..Default::default()
    }
}

fn running(id: u64, account: &str, gpus: u32, node: &str, started: i64) -> SlurmJob {
    SlurmJob {
        state: SlurmState::Running,
        reason: "None".into(),
        nodes: vec![node.into()],
        gpu_idx: vec![(node.into(), (0..gpus).collect())],
        started: Some(t(started)),
        partition: "spot".into(),
        ..pending(id, account, gpus, "", started)
    }
}

fn snap(used: [u32; 3], jobs: Vec<SlurmJob>) -> Event {
    Event::Slurm {
        snapshot: SlurmSnapshot {
            cluster: "site".into(),
            version: "22.05.8".into(),
            partitions: vec![
                SlurmPartition { name: "spot".into(), state: "UP".into(), nodes: vec!["n1".into(), "n2".into()], default: true },
                SlurmPartition { name: "od".into(), state: "UP".into(), nodes: vec!["n3".into()], default: false },
            ],
            nodes: vec![node("n1", 0, "spot", used[0]), node("n2", 1, "spot", used[1]), node("n3", 2, "od", used[2])],
            jobs,
        },
    }
}

/// Three 4-GPU nodes Slurm schedules: n1 and n2 spot, n3 on demand; DRF.
fn site(mode: SlurmMode) -> Room {
    let mut config = RoomConfig::default();
    config.slurm.mode = mode;
    config.slurm.govern = true;
    config.slurm.checkpoint_grace = Secs(30);
    config.sched.discipline = DisciplineKind::Drf;
    let mut room = Room::new(config);
    for name in ["a", "b"] {
        let spec = TenantSpec { id: TenantId(name.into()), quota_gpus: 4, monthly_budget: Micros(0), quota_gpu_mem: Mib(0), borrow_limit_gpus: 8 };
        room.apply(t(0), &Event::TenantDefined { spec });
    }
    for (i, (name, billing)) in [("n1", BillingMode::Spot), ("n2", BillingMode::Spot), ("n3", BillingMode::OnDemand)].into_iter().enumerate() {
        let mut spec = node_spec(i as u32, billing, 4);
        spec.name = name.into();
        room.apply(t(0), &Event::NodeUp { spec });
    }
    room.apply(t(0), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(7_200_000) });
    room
}

fn sent(effects: &[Effect]) -> Vec<(u64, SlurmVerb, String)> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Slurm { command } = e { Some((command.job, command.verb.clone(), command.by.clone())) } else { None })
        .collect()
}

fn schedules(effects: &[Effect]) -> Vec<(u64, Schedule)> {
    sent(effects).into_iter().filter_map(|(job, verb, _)| if let SlurmVerb::Schedule(s) = verb { Some((job, *s)) } else { None }).collect()
}

/// Every command sent answered as Slurm would: done.
fn all_done(room: &mut Room, at: i64, effects: &[Effect]) {
    for e in effects {
        if let Effect::Slurm { command } = e {
            room.apply(t(at), &Event::SlurmDone { command: command.id, ok: true, message: String::new() });
        }
    }
}

/// As after the quota's reclaim requeued `job` at `at` and Slurm said done.
fn requeued_by_policy(room: &mut Room, job: u64, at: i64) {
    let record = crate::room::slurm::CommandRecord {
        id: 99,
        at: t(at),
        verb: SlurmVerb::Requeue,
        by: "policy".into(),
        outcome: Some(Ok("done".into())),
        state: SlurmState::Running,
        restarts: 0,
        seq_done: 0,
    };
    room.slurm.last.insert(job, record);
}

#[test]
fn without_govern_the_room_sends_no_order() {
    let mut room = site(SlurmMode::Control);
    room.config.slurm.govern = false;
    let effects = room.apply(t(10), &snap([0, 0, 0], vec![pending(10, "a", 2, "", 1)]));
    assert!(schedules(&effects).is_empty());
}

#[test]
fn the_order_and_the_nodes_leave_once_and_drf_puts_the_poorer_account_first() {
    let mut room = site(SlurmMode::Control);
    // a holds 4 GPUs on n1; a's two jobs came first, b's later.
    let jobs = vec![running(1, "a", 4, "n1", 0), pending(10, "a", 2, "", 1), pending(11, "a", 2, "", 2), pending(12, "b", 2, "ckpt=no", 3)];
    let effects = room.apply(t(10), &snap([4, 0, 0], jobs.clone()));
    let s = schedules(&effects);
    assert_eq!(s.len(), 3, "{s:#?}");
    let of = |job: u64| s.iter().find(|(j, _)| *j == job).map(|(_, s)| s.clone()).unwrap();
    // b holds nothing: first. It cannot be interrupted: on-demand n3 (Slurm
    // takes n3's partition from the job's list: the list is left alone).
    assert_eq!((of(12).nodes.clone(), of(12).partition.clone()), (Some(vec!["n3".to_string()]), None));
    // a's two share n2 (spot before on-demand).
    assert_eq!(of(10).nodes, Some(vec!["n2".to_string()]));
    assert_eq!(of(11).nodes, Some(vec!["n2".to_string()]));
    // 10 and 11 are in order already: only 12 is given a number, above both.
    assert_eq!((of(10).priority, of(11).priority), (None, None));
    let p12 = u64::from(of(12).priority.unwrap());
    assert!(p12 > jobs[1].priority && jobs[1].priority > jobs[2].priority, "{p12}");
    assert!(room.view().slurm.unwrap().governs.as_deref() == Some("drf"));

    // Slurm carried it out: the next snapshot shows it, and nothing leaves again.
    all_done(&mut room, 11, &effects);
    let mut updated = jobs.clone();
    for j in updated.iter_mut() {
        if let Some((_, s)) = s.iter().find(|(id, _)| *id == j.id) {
            j.priority = s.priority.map_or(j.priority, u64::from);
            if let Some(p) = &s.partition {
                j.partition = p.clone();
            }
        }
    }
    let _ = room.apply(t(12), &snap([4, 0, 0], updated.clone()));
    let effects = room.apply(t(13), &snap([4, 0, 0], updated.clone()));
    assert!(schedules(&effects).is_empty(), "{:#?}", schedules(&effects));

    // Slurm starts 12 on n3 and 10 on n2: in order.
    let mut started = updated.clone();
    started[3] = SlurmJob { partition: "od".into(), ..running(12, "b", 2, "n3", 14) };
    started[1] = running(10, "a", 2, "n2", 14);
    let _ = room.apply(t(15), &snap([4, 2, 2], started));
    let view = room.view().slurm.unwrap();
    assert_eq!((view.followed, view.out_of_order), (2, 0));
}

#[test]
fn a_start_that_takes_the_node_of_a_job_ranked_ahead_is_flagged() {
    let mut room = site(SlurmMode::Control);
    let jobs = vec![running(1, "a", 4, "n1", 0), running(2, "a", 4, "n2", 0), pending(10, "b", 4, "", 1), pending(11, "a", 4, "", 2)];
    let effects = room.apply(t(10), &snap([4, 4, 0], jobs.clone()));
    all_done(&mut room, 11, &effects);
    // 10 (b, rank 1) was placed on n3; Slurm starts 11 there instead.
    let mut now = jobs.clone();
    now[3] = SlurmJob { partition: "od".into(), ..running(11, "a", 4, "n3", 12) };
    let _ = room.apply(t(13), &snap([4, 4, 4], now));
    let view = room.view().slurm.unwrap();
    assert_eq!((view.followed, view.out_of_order), (0, 1));
    let row = view.jobs.iter().find(|j| j.id == 11).unwrap();
    assert!(row.plan_alarm && row.plan.as_deref().unwrap().contains("ahead of job 10"), "{row:#?}");
    assert!(room.view().log.iter().any(|l| l.text.contains("room rank 2") && l.text.contains("ahead of job 10")));
}

#[test]
fn advisory_mode_shows_the_plan_and_sends_nothing() {
    let mut room = site(SlurmMode::Advisory);
    let effects = room.apply(t(10), &snap([0, 0, 0], vec![pending(10, "a", 2, "", 1), running(1, "a", 2, "n1", 0)]));
    assert!(sent(&effects).is_empty(), "{:#?}", sent(&effects));
    let view = room.view().slurm.unwrap();
    let row = view.jobs.iter().find(|j| j.id == 10).unwrap();
    assert_eq!(row.rank, Some(1));
    assert!(row.plan.as_deref().unwrap().starts_with("#1 → n1"), "{row:#?}");
}

#[test]
fn a_spot_job_is_asked_to_save_at_the_rooms_interval_and_its_acknowledgement_read_back() {
    let mut room = site(SlurmMode::Control);
    let job = |comment: &str| SlurmJob { comment: comment.into(), ..running(5, "a", 2, "n1", 0) };
    let _ = room.apply(t(1), &snap([2, 0, 0], vec![job("")]));
    let interval = room.slurm.saves[&5].interval;
    assert!(interval.0 >= 60 && interval.0 <= 7200, "{interval:?}");
    // Not yet due.
    let effects = room.apply(t(interval.0 - 5), &snap([2, 0, 0], vec![job("")]));
    assert!(sent(&effects).is_empty());
    // Due: the checkpoint signal, sent by "checkpoint".
    let effects = room.apply(t(interval.0 + 1), &snap([2, 0, 0], vec![job("")]));
    assert_eq!(sent(&effects).iter().map(|(j, v, by)| (*j, v.name(), by.as_str())).collect::<Vec<_>>(), vec![(5, "signal", "checkpoint")]);
    all_done(&mut room, interval.0 + 2, &effects);
    // It saves and says so in its comment: the last good checkpoint is known.
    let saved = interval.0 + 10;
    let acked = job(&format!("project=x;saved={}", t(saved).timestamp()));
    let _ = room.apply(t(saved + 5), &snap([2, 0, 0], vec![acked.clone()]));
    let note = &room.slurm.saves[&5];
    assert_eq!((note.saved, note.unanswered), (Some(t(saved)), None));
    assert_eq!(note.next_due, t(saved) + note.interval.delta());
    assert_eq!(note.at_risk(t(saved + 5)), 10, "5 s on 2 GPUs since the save");
    // The next signal goes unanswered past the grace: "not checkpointing".
    let due = note.next_due;
    let later = (due - t(0)).num_seconds();
    let effects = room.apply(t(later + 1), &snap([2, 0, 0], vec![acked.clone()]));
    all_done(&mut room, later + 2, &effects);
    let _ = room.apply(t(later + 40), &snap([2, 0, 0], vec![acked]));
    let row = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 5).unwrap();
    assert!(row.plan_alarm && row.plan.as_deref().unwrap().contains("not checkpointing"), "{row:#?}");
}

#[test]
fn a_job_that_cannot_be_interrupted_is_never_signalled_and_is_flagged_on_spot() {
    let mut room = site(SlurmMode::Control);
    let job = SlurmJob { comment: "ckpt=no".into(), ..running(5, "a", 2, "n1", 0) };
    let effects = room.apply(t(10_000), &snap([2, 0, 0], vec![job]));
    assert!(sent(&effects).is_empty());
    let row = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 5).unwrap();
    assert!(row.plan_alarm && row.plan.as_deref().unwrap().contains("cannot be interrupted"), "{row:#?}");
}

#[test]
fn the_market_passing_a_jobs_cap_saves_it_and_moves_it_off_the_pool() {
    let mut room = site(SlurmMode::Control);
    let job = || SlurmJob { time_limit: Some(Secs(3600)), ..running(5, "a", 2, "n1", 0) };
    let _ = room.apply(t(1), &snap([2, 0, 0], vec![job()]));
    let cap = room.slurm.saves[&5].cap.expect("a cap from the bid curve");
    // The pool's price jumps past the cap.
    room.apply(t(20), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(cap.0 * 2) });
    let effects = room.apply(t(21), &snap([2, 0, 0], vec![job()]));
    let s = sent(&effects);
    assert!(s.iter().any(|(j, v, by)| *j == 5 && v.name() == "signal" && by == "max price"), "{s:#?}");
    all_done(&mut room, 22, &effects);
    // After the grace period: migrate with the pool's spot nodes excluded.
    let effects = room.apply(t(60), &snap([2, 0, 0], vec![job()]));
    let s = sent(&effects);
    let migrate = s.iter().find(|(_, v, _)| v.name() == "migrate").unwrap_or_else(|| panic!("{s:#?}"));
    assert_eq!(migrate.1, SlurmVerb::Migrate { partition: None, exclude: vec!["n1".into(), "n2".into()] });
}

#[test]
fn a_job_held_for_admission_is_released_by_its_placement_and_one_held_by_a_person_is_not() {
    let mut room = site(SlurmMode::Control);
    let admit = SlurmJob { reason: "JobHeldUser".into(), priority: 0, admin_comment: "gpuroom:admit".into(), ..pending(10, "a", 2, "ckpt=no", 1) };
    let person = SlurmJob { reason: "JobHeldAdmin".into(), priority: 0, ..pending(11, "a", 2, "", 2) };
    let effects = room.apply(t(10), &snap([0, 0, 0], vec![admit, person]));
    let s = schedules(&effects);
    assert_eq!(s.len(), 1, "{s:#?}");
    let (job, schedule) = &s[0];
    assert_eq!(*job, 10);
    assert!(schedule.release && schedule.priority.is_some_and(|p| p > 0), "released, with its place in the order");
    assert_eq!(schedule.nodes.as_deref(), Some(&["n3".to_string()][..]));
    // Asked for spot only, it cannot be interrupted: moved to the on-demand partition.
    let only_spot = SlurmJob {
        reason: "JobHeldUser".into(),
        priority: 0,
        admin_comment: "gpuroom:admit".into(),
        partition: "spot".into(),
        ..pending(20, "b", 2, "ckpt=no", 3)
    };
    let effects = room.apply(t(20), &snap([0, 0, 0], vec![only_spot]));
    let s = schedules(&effects);
    assert_eq!((s[0].1.nodes.as_deref(), s[0].1.partition.as_deref()), (Some(&["n3".to_string()][..]), Some("od")), "{s:#?}");
}

#[test]
fn a_held_job_with_nowhere_to_go_stays_held_and_leaves_with_its_priority_once_placed() {
    let mut room = site(SlurmMode::Control);
    let held = |id: u64, account: &str, comment: &str, at: i64| SlurmJob {
        reason: "JobHeldUser".into(),
        priority: 0,
        admin_comment: "gpuroom:admit".into(),
        ..pending(id, account, 4, comment, at)
    };
    let full = vec![running(1, "a", 4, "n1", 0), running(2, "a", 4, "n2", 0), SlurmJob { partition: "od".into(), ..running(3, "a", 4, "n3", 0) }];
    let mut jobs = full.clone();
    jobs.extend([held(10, "a", "", 1), held(11, "b", "ckpt=no", 2)]);
    let effects = room.apply(t(10), &snap([4, 4, 4], jobs));
    let s = schedules(&effects);
    // Nothing fits: no release and no priority (either would free it for
    // Slurm's backfill); only b's routing off spot goes out.
    assert!(s.iter().all(|(_, x)| !x.release && x.priority.is_none()), "{s:#?}");
    assert_eq!(s.iter().map(|(id, x)| (*id, x.exclude.clone())).collect::<Vec<_>>(), vec![(11, Some(vec!["n1".to_string(), "n2".to_string()]))]);
    all_done(&mut room, 11, &effects);
    let view = room.view().slurm.unwrap();
    let rank = |id: u64| view.jobs.iter().find(|j| j.id == id).and_then(|j| j.rank);
    assert_eq!((rank(11), rank(10)), (Some(1), Some(2)), "b holds nothing: ranked first");
    // n3 frees (a snapshot after the routing was done): b's job is placed
    // there and released with its priority; a's stays held.
    let jobs = |used: [u32; 3]| {
        let mut jobs: Vec<SlurmJob> = full.iter().filter(|j| used[2] > 0 || j.id != 3).cloned().collect();
        jobs.extend([held(10, "a", "", 1), SlurmJob { excluded: vec!["n1".into(), "n2".into()], ..held(11, "b", "ckpt=no", 2) }]);
        snap(used, jobs)
    };
    room.apply(t(15), &jobs([4, 4, 4]));
    let effects = room.apply(t(20), &jobs([4, 4, 0]));
    let s = schedules(&effects);
    assert_eq!(s.len(), 1, "{s:#?}");
    assert_eq!(s[0].0, 11);
    assert!(s[0].1.release && s[0].1.priority.is_some_and(|p| p > 0) && s[0].1.nodes.as_deref() == Some(&["n3".to_string()][..]), "{s:#?}");
}

#[test]
fn a_job_over_several_nodes_is_placed_in_one_partition_or_left_to_slurm_in_the_rooms_order() {
    let mut room = site(SlurmMode::Control);
    let wide = SlurmJob { reason: "JobHeldUser".into(), priority: 0, admin_comment: "gpuroom:admit".into(), ..pending(10, "a", 8, "", 1) };
    // Two spot nodes free: 4 GPUs on each, released there.
    let effects = room.apply(t(10), &snap([0, 0, 0], vec![wide.clone()]));
    let s = schedules(&effects);
    assert_eq!(s.len(), 1, "{s:#?}");
    assert!(s[0].1.release && s[0].1.priority.is_some(), "{s:#?}");
    assert_eq!(s[0].1.nodes.as_deref(), Some(&["n1".to_string(), "n2".to_string()][..]));
    let why = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 10).and_then(|j| j.plan).unwrap_or_default();
    assert!(why.contains("4 GPU(s) on each of 2 nodes, more than a node has"), "{why}");
    // n1 busy: no partition has two free nodes; released for Slurm to spread when they free.
    let mut room = site(SlurmMode::Control);
    let effects = room.apply(t(10), &snap([4, 0, 0], vec![running(1, "b", 4, "n1", 0), wide]));
    let s = schedules(&effects);
    assert!(s.len() == 1 && s[0].1.release && s[0].1.nodes.is_none(), "{s:#?}");
}

#[test]
fn a_powered_off_node_takes_work_only_when_no_awake_node_can() {
    let mut room = site(SlurmMode::Control);
    let asleep = |mut e: Event| {
        if let Event::Slurm { snapshot } = &mut e {
            snapshot.nodes[2].state = "idle+cloud+powered_down".into();
        }
        e
    };
    let job = |id: u64, account: &str, at: i64| SlurmJob { partition: "od,spot".into(), ..pending(id, account, 4, "", at) };
    // n1 is free and awake: it gets the job, not the sleeping n3.
    let effects = room.apply(t(10), &asleep(snap([0, 4, 0], vec![running(1, "a", 4, "n2", 0), job(10, "a", 1)])));
    assert_eq!(schedules(&effects)[0].1.nodes.as_deref(), Some(&["n1".to_string()][..]));
    all_done(&mut room, 11, &effects);
    // Spot full: the sleeping on-demand node is woken for the next one.
    let effects = room.apply(t(20), &asleep(snap([4, 4, 0], vec![running(1, "a", 4, "n2", 0), running(10, "a", 4, "n1", 12), job(11, "b", 15)])));
    let why = room.view().slurm.unwrap().jobs.into_iter().map(|j| (j.id, j.plan, j.rank)).collect::<Vec<_>>();
    assert_eq!(schedules(&effects).first().and_then(|s| s.1.nodes.clone()), Some(vec!["n3".to_string()]), "{why:#?}");
}

#[test]
fn a_gpu_carrying_shards_is_not_free_whole_and_a_sharing_job_joins_it() {
    let mut room = site(SlurmMode::Control);
    let shared = |mut e: Event| {
        if let Event::Slurm { snapshot } = &mut e {
            (snapshot.nodes[2].shards, snapshot.nodes[2].shards_used) = (16, 2);
        }
        e
    };
    let full =
        vec![running(1, "a", 4, "n1", 0), running(2, "a", 4, "n2", 0), SlurmJob { gpus: 0, shards: 2, partition: "od".into(), ..running(3, "b", 0, "n3", 0) }];
    let mut jobs = full.clone();
    jobs.extend([pending(10, "b", 4, "", 1), SlurmJob { gpus: 0, shards: 2, ..pending(11, "b", 0, "", 2) }]);
    let effects = room.apply(t(10), &shared(snap([4, 4, 0], jobs)));
    let s = schedules(&effects);
    assert_eq!(s.iter().map(|(id, x)| (*id, x.nodes.clone())).collect::<Vec<_>>(), vec![(11, Some(vec!["n3".to_string()]))], "{s:#?}");
    let view = room.view().slurm.unwrap();
    let why = |id: u64| view.jobs.iter().find(|j| j.id == id).and_then(|j| j.plan.clone()).unwrap_or_default();
    assert!(why(10).contains("waits") && why(11).contains("2 GPU shard(s) free"), "{} / {}", why(10), why(11));
}

#[test]
fn a_node_list_the_job_asked_binds_the_plan_and_one_the_room_set_does_not() {
    let mut room = site(SlurmMode::Control);
    // Asked for n2 (`-w n2`) although n1 is as good: it goes to n2, and
    // Slurm already has it there, so nothing is sent for the node.
    let asked = SlurmJob { required: vec!["n2".into()], ..pending(10, "a", 2, "", 1) };
    let effects = room.apply(t(10), &snap([0, 0, 0], vec![asked.clone()]));
    let why = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 10).and_then(|j| j.plan).unwrap_or_default();
    assert!(why.contains("→ n2"), "{why}");
    assert!(schedules(&effects).iter().all(|(_, s)| s.nodes.is_none()), "{effects:#?}");
    // A job the room pinned to n1: when n1 fills, the room's own pin does not keep it there.
    let free = pending(11, "b", 2, "", 2);
    let effects = room.apply(t(20), &snap([0, 0, 0], vec![free.clone()]));
    assert_eq!(schedules(&effects)[0].1.nodes.as_deref(), Some(&["n1".to_string()][..]));
    all_done(&mut room, 21, &effects);
    let pinned = SlurmJob { required: vec!["n1".into()], ..free };
    room.apply(t(25), &snap([4, 0, 0], vec![running(1, "a", 4, "n1", 22), pinned.clone()]));
    let effects = room.apply(t(30), &snap([4, 0, 0], vec![running(1, "a", 4, "n1", 22), pinned]));
    assert_eq!(schedules(&effects).first().and_then(|s| s.1.nodes.clone()), Some(vec!["n2".to_string()]), "{effects:#?}");
}

#[test]
fn a_job_requeued_off_a_node_is_not_sent_back_there_while_its_credential_is_revoked() {
    let mut room = site(SlurmMode::Control);
    let other = running(1, "b", 2, "n1", 0);
    room.apply(t(10), &snap([4, 0, 0], vec![other.clone(), running(10, "a", 2, "n1", 5)]));
    // The room requeued it (the quota's reclaim): pending again, Slurm's
    // BeginTime hold on it, n1's two GPUs free.
    requeued_by_policy(&mut room, 10, 12);
    let requeued = SlurmJob { reason: "BeginTime".into(), restarts: 1, ..pending(10, "a", 2, "", 1) };
    let effects = room.apply(t(13), &snap([2, 0, 0], vec![other.clone(), requeued.clone()]));
    let to = |effects: &[Effect]| schedules(effects).into_iter().find(|(id, _)| *id == 10).map(|(_, s)| (s.nodes, s.start_now));
    assert_eq!(to(&effects), Some((Some(vec!["n2".to_string()]), true)), "placed now, but not on n1 (a relaunch there is killed): {effects:#?}");
    // Seconds later, n1 (the tighter fit) is a place again.
    let mut room = site(SlurmMode::Control);
    room.apply(t(10), &snap([4, 0, 0], vec![other.clone(), running(10, "a", 2, "n1", 5)]));
    requeued_by_policy(&mut room, 10, 12);
    let effects = room.apply(t(20), &snap([2, 0, 0], vec![other, requeued]));
    assert_eq!(to(&effects), Some((Some(vec!["n1".to_string()]), true)));
}

#[test]
fn a_moved_job_is_still_the_rooms_to_start_after_its_order_went_out() {
    let mut room = site(SlurmMode::Control);
    let full = vec![running(1, "b", 4, "n1", 0), running(2, "b", 4, "n2", 0), SlurmJob { partition: "od".into(), ..running(3, "b", 4, "n3", 0) }];
    requeued_by_policy(&mut room, 10, 5);
    let requeued = SlurmJob { reason: "BeginTime".into(), restarts: 1, ..pending(10, "a", 4, "ckpt=no", 1) };
    let with = |jobs: &[SlurmJob], job: &SlurmJob| jobs.iter().cloned().chain([job.clone()]).collect::<Vec<_>>();
    let first = room.apply(t(10), &snap([4, 4, 4], with(&full, &requeued)));
    assert!(schedules(&first).is_empty(), "{first:#?}");
    // Nowhere to go: it cannot be interrupted, so spot goes in its ExcNodeList (the room's last command to it now).
    let effects = room.apply(t(20), &snap([4, 4, 4], with(&full, &requeued)));
    let plan = room.view().slurm.unwrap().jobs.into_iter().map(|j| (j.id, j.plan, j.command)).collect::<Vec<_>>();
    assert!(schedules(&effects).iter().any(|(id, s)| *id == 10 && s.exclude.is_some() && !s.start_now), "{effects:#?} {plan:#?}");
    all_done(&mut room, 21, &effects);
    // n3 frees: the room starts it there at once, not after Slurm's two minutes.
    room.apply(t(25), &snap([4, 4, 4], with(&full, &requeued)));
    let effects = room.apply(t(30), &snap([4, 4, 0], with(&full[..2], &requeued)));
    let s = schedules(&effects);
    let plan = room.view().slurm.unwrap().jobs.into_iter().map(|j| (j.id, j.plan, j.command)).collect::<Vec<_>>();
    assert!(s.iter().any(|(id, s)| *id == 10 && s.start_now && s.nodes.as_deref() == Some(&["n3".to_string()][..])), "{s:#?} {plan:#?}");
}
