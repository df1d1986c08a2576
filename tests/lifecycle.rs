//! The job life cycle through `Room::apply`, one event at a time, and the
//! refusals: what the core does with input that does not make sense.

use gpuroom::ckpt::CheckpointKind;
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::{Action, Actor, Effect, Event, GpuSample, Role};
use gpuroom::domain::ids::{GpuRef, JobId, NodeId};
use gpuroom::domain::job::{JobSpec, Phase};
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, Micros, MicrosPerHour};
use gpuroom::room::Room;

fn room_with(nodes: &[(u32, BillingMode, u8)]) -> Room {
    let mut room = Room::default();
    for tenant in ["nlp", "vision"] {
        room.apply(t(0), &Event::TenantDefined { spec: tenant_spec(tenant, 8) });
    }
    for (id, billing, gpus) in nodes {
        let spec = node_spec(*id, *billing, *gpus);
        if *billing == BillingMode::Spot {
            room.apply(t(0), &Event::PriceTick { zone: spec.zone.clone(), instance_type: spec.instance_type.clone(), price: MicrosPerHour(7_344_000) });
        }
        assert!(!rejected(&room.apply(t(0), &Event::NodeUp { spec })));
    }
    room
}

fn rejected(effects: &[Effect]) -> bool {
    effects.iter().any(|e| matches!(e, Effect::Rejected { .. }))
}

fn reason(effects: &[Effect]) -> String {
    effects.iter().find_map(|e| if let Effect::Rejected { reason } = e { Some(reason.clone()) } else { None }).unwrap_or_default()
}

fn submit(room: &mut Room, at: i64, spec: JobSpec) -> Vec<Effect> {
    room.apply(t(at), &Event::JobSubmitted { spec })
}

fn operator(user: &str, role: Role) -> Actor {
    Actor { user: user.into(), origin: "test".into(), role, account: None }
}

fn phase(room: &Room, id: u64) -> Phase {
    room.job(JobId(id)).unwrap().phase()
}

#[test]
fn a_job_runs_checkpoints_and_finishes() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8)]);
    let fx = submit(&mut room, 10, job_spec(1, "nlp", 2));
    assert_eq!(fx, vec![Effect::StartJob { job: JobId(1), node: NodeId(1), gpus: vec![0, 1], resume_step: 0 }]);
    assert_eq!(phase(&room, 1), Phase::Placed);
    room.apply(t(15), &Event::JobStarted { job: JobId(1) });
    assert_eq!(phase(&room, 1), Phase::Running);

    let sample = |i| GpuSample(GpuRef { node: NodeId(1), index: i }, 91.0, Mib(11_000));
    room.apply(t(45), &Event::Telemetry { gpus: vec![sample(0), sample(1)], progress: vec![(JobId(1), 100)] });
    assert_eq!(room.job(JobId(1)).unwrap().steps_done, 100);
    // Reserved capacity saves every 2 hours.
    let fx = room.apply(t(15 + 7200), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), 400)] });
    // Two charge periods closed on the way (the ledger's lines), then the save.
    assert!(matches!(&fx[0], Effect::Ledger { lines } if !lines.is_empty()), "{fx:?}");
    assert_eq!(fx[1..], [Effect::Checkpoint { job: JobId(1), kind: CheckpointKind::Full }]);
    assert_eq!(phase(&room, 1), Phase::Checkpointing);
    room.apply(t(7230), &Event::CheckpointDone { job: JobId(1), step: 400, bytes: 2 << 30 });
    assert_eq!(phase(&room, 1), Phase::Running);
    assert_eq!(room.job(JobId(1)).unwrap().steps_saved, 400);

    room.apply(t(9000), &Event::JobExited { job: JobId(1), ok: true, message: "exit 0".into() });
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.phase(), Phase::Done);
    assert_eq!(job.steps_done, 1000);
    assert!(room.node(NodeId(1)).unwrap().gpus.iter().all(|g| g.allocations.is_empty()), "GPUs released");
    // 2 of 8 GPUs of a $15.912/h reserved node for 8,990 s.
    let expected = 15_912_000i64 * 2 / 8 * 8990 / 3600;
    assert!((job.cost.0 - expected).abs() <= 1, "cost {} vs {expected}", job.cost.0);
    let view = room.view();
    assert_eq!(view.totals.stats.done, 1);
    // The tenant pays the GPUs and, on top, writing and keeping the checkpoint.
    assert!(job.service_cost > gpuroom::domain::units::Micros(0));
    assert_eq!(view.budgets.iter().find(|b| b.tenant == "nlp").unwrap().month_to_date, job.cost + job.service_cost);
}

#[test]
fn every_micro_of_spend_is_a_job_or_idle() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8), (2, BillingMode::Spot, 8), (3, BillingMode::OnDemand, 4)]);
    let mut small = job_spec(3, "vision", 1);
    small.exclusive = false;
    small.gpu_mem = Mib(3000);
    submit(&mut room, 0, job_spec(1, "nlp", 8));
    submit(&mut room, 0, job_spec(2, "vision", 3));
    submit(&mut room, 0, small);
    room.apply(t(1), &Event::JobStarted { job: JobId(1) });
    room.apply(t(777), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(8_111_111) });
    room.apply(t(3601), &Event::Tick);
    let view = room.view();
    let jobs: Micros = room.jobs().map(|j| j.cost).sum();
    let idle: Micros = view.totals.idle_by_mode.iter().copied().sum();
    assert_eq!(jobs + idle, view.totals.spend);
    let tenants: Micros = view.budgets.iter().map(|b| b.month_to_date).sum();
    assert_eq!(tenants, jobs);
}

#[test]
fn an_interruption_notice_saves_stops_and_requeues_from_the_checkpoint() {
    let mut room = room_with(&[(1, BillingMode::Spot, 8)]);
    submit(&mut room, 0, job_spec(1, "nlp", 4));
    room.apply(t(5), &Event::JobStarted { job: JobId(1) });
    room.apply(t(600), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), 300)] });

    let fx = room.apply(t(700), &Event::InterruptionNotice { node: NodeId(1), deadline: t(820) });
    assert!(fx.contains(&Effect::Checkpoint { job: JobId(1), kind: CheckpointKind::Full }));
    assert!(fx.iter().any(|e| matches!(e, Effect::AlarmRaised { .. })));
    assert_eq!(room.view().alarms.len(), 1);
    // Nothing new lands on a draining node.
    let fx = submit(&mut room, 701, job_spec(2, "nlp", 1));
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(phase(&room, 2), Phase::Queued);

    let fx = room.apply(t(760), &Event::CheckpointDone { job: JobId(1), step: 300, bytes: 1 << 30 });
    assert_eq!(fx, vec![Effect::StopJob { job: JobId(1) }]);
    assert_eq!(phase(&room, 1), Phase::Preempted);
    room.apply(t(762), &Event::JobStopped { job: JobId(1) });
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.phase(), Phase::Queued);
    assert_eq!((job.requeues, job.steps_done, job.steps_saved), (1, 300, 300));
    assert_eq!(room.view().jobs.iter().find(|j| j.id == JobId(1)).unwrap().state, "requeued");

    let fx = room.apply(t(820), &Event::NodeLost { node: NodeId(1), reason: "spot interruption".into() });
    assert!(fx.contains(&Effect::AlarmCleared { id: "notice:1".into() }));
    // Cleared, and listed unread until someone acknowledges it.
    let alarms = room.view().alarms;
    assert!(alarms.len() == 1 && alarms[0].id == "notice:1" && alarms[0].cleared_at == Some(t(820)), "{alarms:?}");
    assert_eq!(room.stats().notice_saves_in_time, 1);

    // The replacement instance comes up and the requeued job resumes at step 300.
    let fx = room.apply(t(900), &Event::NodeUp { spec: node_spec(1, BillingMode::Spot, 8) });
    assert!(fx.contains(&Effect::StartJob { job: JobId(1), node: NodeId(1), gpus: vec![0, 1, 2, 3], resume_step: 300 }), "{fx:?}");
}

#[test]
fn losing_a_node_mid_save_loses_the_unsaved_steps() {
    let mut room = room_with(&[(1, BillingMode::Spot, 8)]);
    submit(&mut room, 0, job_spec(1, "nlp", 8));
    room.apply(t(5), &Event::JobStarted { job: JobId(1) });
    room.apply(t(60), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), 250)] });
    room.apply(t(100), &Event::InterruptionNotice { node: NodeId(1), deadline: t(220) });
    room.apply(t(220), &Event::NodeLost { node: NodeId(1), reason: "reclaimed".into() });
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.phase(), Phase::Queued);
    assert_eq!((job.steps_done, job.lost_steps), (0, 250));
    assert_eq!(room.stats().notice_saves_missed, 1);
    assert!(room.node(NodeId(1)).unwrap().gpus.iter().all(|g| g.allocations.is_empty()));
}

#[test]
fn operator_actions_preempt_requeue_and_cancel() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8)]);
    for id in 1..=3 {
        submit(&mut room, 0, job_spec(id, "nlp", 2));
    }
    for id in 1..=3 {
        room.apply(t(1), &Event::JobStarted { job: JobId(id) });
    }
    room.apply(t(60), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), 10), (JobId(2), 20), (JobId(3), 30)] });
    let alice = operator("alice", Role::Operator);

    // Preempt saves first.
    let fx = room.apply(t(70), &Event::Operator { actor: alice.clone(), action: Action::Preempt { job: JobId(1) } });
    assert_eq!(fx, vec![Effect::Checkpoint { job: JobId(1), kind: CheckpointKind::Full }]);
    // Requeue stops at once and resumes from the last save (none: step 0).
    let fx = room.apply(t(71), &Event::Operator { actor: alice.clone(), action: Action::Requeue { job: JobId(2) } });
    assert_eq!(fx, vec![Effect::StopJob { job: JobId(2) }]);
    room.apply(t(73), &Event::JobStopped { job: JobId(2) });
    // Requeued job 2 is placed again at once (there is room).
    let job = room.job(JobId(2)).unwrap();
    assert_eq!((job.phase(), job.lost_steps, job.requeues), (Phase::Placed, 20, 1));
    // Cancel ends it for good.
    room.apply(t(74), &Event::Operator { actor: alice.clone(), action: Action::Cancel { job: JobId(3) } });
    room.apply(t(76), &Event::JobStopped { job: JobId(3) });
    assert_eq!(phase(&room, 3), Phase::Failed);
    assert!(room.view().log.iter().any(|l| l.text.contains("alice@test: cancel j3")), "audit line");
    assert_eq!(room.stats().operator_actions, 3);
}

#[test]
fn read_only_actors_and_impossible_actions_are_refused() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8)]);
    submit(&mut room, 0, job_spec(1, "nlp", 1));
    room.apply(t(1), &Event::JobStarted { job: JobId(1) });
    let before = room.job(JobId(1)).unwrap().clone();

    let wall = operator("wall", Role::Viewer);
    let fx = room.apply(t(2), &Event::Operator { actor: wall, action: Action::Cancel { job: JobId(1) } });
    assert!(reason(&fx).contains("read-only"), "{fx:?}");
    let after = room.job(JobId(1)).unwrap();
    assert_eq!((&after.state, &after.placement, after.requeues), (&before.state, &before.placement, before.requeues));

    let bob = operator("bob", Role::Operator);
    let fx = room.apply(t(3), &Event::Operator { actor: bob.clone(), action: Action::Preempt { job: JobId(99) } });
    assert!(reason(&fx).contains("unknown job j99"));
    submit(&mut room, 4, {
        let mut s = job_spec(2, "nlp", 8);
        s.gpu_mem = Mib(12_000);
        s
    });
    let fx = room.apply(t(5), &Event::Operator { actor: bob, action: Action::Preempt { job: JobId(2) } });
    assert!(reason(&fx).contains("queued, not running"), "{fx:?}");
}

#[test]
fn illegal_moves_and_bad_input_leave_the_state_alone() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 1)]);
    submit(&mut room, 0, job_spec(1, "nlp", 1));
    submit(&mut room, 0, job_spec(2, "nlp", 1)); // queued: no room

    let fx = room.apply(t(1), &Event::JobStarted { job: JobId(2) });
    assert!(reason(&fx).contains("cannot go from queued to running"), "{fx:?}");
    assert_eq!(phase(&room, 2), Phase::Queued);
    assert!(rejected(&room.apply(t(1), &Event::CheckpointDone { job: JobId(2), step: 1, bytes: 1 })));
    assert!(rejected(&room.apply(t(1), &Event::JobStopped { job: JobId(2) })));
    assert!(rejected(&room.apply(t(1), &Event::JobExited { job: JobId(2), ok: true, message: String::new() })));

    // Time never goes backwards.
    let fx = room.apply(t(0), &Event::Tick);
    assert!(reason(&fx).contains("time went backwards"), "{fx:?}");
    assert_eq!(room.now(), Some(t(1)));

    // Submissions that cannot be honoured.
    assert!(reason(&submit(&mut room, 2, job_spec(1, "nlp", 1))).contains("already exists"));
    assert!(reason(&submit(&mut room, 2, job_spec(3, "nobody", 1))).contains("unknown tenant"));
    assert!(reason(&submit(&mut room, 2, job_spec(4, "nlp", 0))).contains("asks 0 GPUs"));
    assert!(
        reason(&submit(&mut room, 2, {
            let mut s = job_spec(5, "nlp", 1);
            s.steps_total = 0;
            s
        }))
        .contains("no work")
    );

    // Telemetry: good samples kept, bad ones counted and reported.
    let good = GpuSample(GpuRef { node: NodeId(1), index: 0 }, 55.0, Mib(100));
    let nan = GpuSample(GpuRef { node: NodeId(1), index: 0 }, f32::NAN, Mib(100));
    let ghost = GpuSample(GpuRef { node: NodeId(7), index: 3 }, 10.0, Mib(100));
    let fx = room.apply(t(3), &Event::Telemetry { gpus: vec![good, nan, ghost], progress: vec![(JobId(42), 1)] });
    assert!(reason(&fx).contains("3 unknown GPU(s) or job(s)"), "{fx:?}");
    assert_eq!(room.node(NodeId(1)).unwrap().gpus[0].util, Some(55.0));

    // A node cannot come up twice; unknown nodes cannot be lost.
    assert!(reason(&room.apply(t(4), &Event::NodeUp { spec: node_spec(1, BillingMode::Reserved, 1) })).contains("already up"));
    assert!(rejected(&room.apply(t(4), &Event::NodeLost { node: NodeId(9), reason: String::new() })));
    assert!(rejected(&room.apply(t(4), &Event::PriceTick { zone: "z".into(), instance_type: "i".into(), price: MicrosPerHour(-5) })));
    assert_eq!(room.stats().rejected, 13);
}

#[test]
fn month_to_date_is_split_exactly_at_the_month_boundary() {
    use chrono::{TimeZone, Utc};
    let mut room = Room::default();
    let jan31 = Utc.with_ymd_and_hms(2020, 1, 31, 23, 0, 0).unwrap();
    room.apply(jan31, &Event::TenantDefined { spec: tenant_spec("nlp", 8) });
    room.apply(jan31, &Event::NodeUp { spec: node_spec(1, BillingMode::OnDemand, 8) });
    room.apply(jan31, &Event::JobSubmitted { spec: job_spec(1, "nlp", 8) });
    room.apply(jan31 + chrono::TimeDelta::hours(2), &Event::Tick);
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.cost, Micros(2 * 24_480_000));
    // Only the hour in February counts towards February's month-to-date.
    let feb = room.view().budgets.into_iter().find(|b| b.tenant == "nlp").unwrap();
    assert_eq!(feb.month_to_date, Micros(24_480_000));
}

#[test]
fn names_with_escape_sequences_reach_the_view_clean() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8)]);
    let mut spec = job_spec(1, "nlp", 1);
    spec.name = "evil\x1b[2J\x1b]0;owned\x07name".into();
    spec.tags.project = "p\u{202E}roj".into();
    submit(&mut room, 0, spec);
    let view = room.view();
    let text = serde_json::to_string(&view).unwrap();
    assert!(!text.contains("\\u001b") && !text.contains("\\u0007") && !text.contains('\u{202E}'), "{text}");
}

#[test]
fn a_job_being_cancelled_when_its_node_is_lost_ends_cancelled() {
    let mut room = room_with(&[(1, BillingMode::Spot, 8)]);
    submit(&mut room, 0, job_spec(1, "nlp", 1));
    room.apply(t(1), &Event::JobStarted { job: JobId(1) });
    let alice = operator("alice", Role::Operator);
    room.apply(t(2), &Event::Operator { actor: alice, action: Action::Cancel { job: JobId(1) } });
    room.apply(t(3), &Event::NodeLost { node: NodeId(1), reason: "reclaimed".into() });
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.state, gpuroom::domain::job::JobState::Failed { reason: "cancelled by alice".into() });
    assert_eq!(job.requeues, 0);
}

#[test]
fn a_tenants_burn_counts_a_mig_slice_at_its_share_of_the_instance() {
    let mut room = Room::default();
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("nlp", 8) });
    // Two A100s, the first split into 20+10+5+5 GiB slices: five units.
    room.apply(t(0), &Event::NodeUp { spec: gpuroom::domain::testkit::mig_node_spec(1, BillingMode::Reserved, 2) });
    let mut small = job_spec(1, "nlp", 1);
    small.gpu_mem = Mib(5000);
    submit(&mut room, 1, small);
    let view = room.view();
    let burn = view.budgets.iter().find(|b| b.tenant == "nlp").unwrap().burn;
    // A 5 GiB slice is 5/40 of one GPU of two: 1/16 of the $15.912/h instance.
    assert_eq!(burn, MicrosPerHour(15_912_000 / 16));
    room.apply(t(3601), &Event::Tick);
    assert_eq!(room.job(JobId(1)).unwrap().cost, Micros(15_912_000 / 16), "the ledger charges the same share");
}

#[test]
fn finished_jobs_teach_the_room_how_long_the_next_one_runs() {
    let mut room = room_with(&[(1, BillingMode::Reserved, 8)]);
    // Ten one-GPU jobs of one model, each running 1,800 s.
    for i in 0..10u64 {
        let start = i as i64 * 2000;
        let mut spec = job_spec(i + 1, "nlp", 1);
        spec.tags.model = "whisper".into();
        submit(&mut room, start, spec);
        room.apply(t(start + 1), &Event::JobStarted { job: JobId(i + 1) });
        room.apply(t(start + 1800), &Event::JobExited { job: JobId(i + 1), ok: true, message: "exit 0".into() });
    }
    // One more of the same model, waiting behind a full node.
    let mut big = job_spec(50, "nlp", 8);
    big.tags.model = "llama".into();
    submit(&mut room, 30_000, big);
    let mut next = job_spec(51, "nlp", 1);
    next.tags.model = "whisper".into();
    submit(&mut room, 30_001, next);
    let view = room.view();
    let row = view.jobs.iter().find(|j| j.id == JobId(51)).unwrap();
    assert_eq!(row.state, "queued");
    let predicted = row.predicted_runtime.expect("a prediction from ten finished jobs").0;
    assert!((1500..=2200).contains(&predicted), "predicted {predicted} s for jobs that ran 1,800 s");
}
