//! The room's Slurm mirror, driven by events as the adapter sends them.

use crate::domain::event::{Action, Actor, Effect, Event, Role, TenantSpec};
use crate::domain::ids::TenantId;
use crate::domain::slurm::{PreemptBy, SlurmJob, SlurmMode, SlurmNode, SlurmPartition, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::testkit::t;
use crate::domain::units::{Mib, Micros};
use crate::room::{Room, RoomConfig};

fn job(id: u64, account: &str, state: SlurmState, gpus: u32, at: i64) -> SlurmJob {
    let running = state != SlurmState::Pending;
    SlurmJob {
        id,
        name: format!("job{id}\u{1b}[31m"),
        user: "u".into(),
        account: account.into(),
        partition: "gpu".into(),
        reason: if running { "None".into() } else { "Resources".into() },
        gpus,
        nodes: if running { vec!["n1".into()] } else { Vec::new() },
        gpu_idx: if running { vec![("n1".into(), (0..gpus).map(|i| i + (id as u32 % 2) * 2).collect())] } else { Vec::new() },
        submitted: Some(t(at)),
        started: running.then(|| t(at)),
        state,
        ..Default::default()
    }
}

fn snapshot(jobs: Vec<SlurmJob>) -> Event {
    let used = jobs.iter().filter(|j| j.holds_gpus()).map(|j| j.gpus).sum();
    Event::Slurm {
        snapshot: SlurmSnapshot {
            cluster: "c".into(),
            version: "22.05.8".into(),
            partitions: vec![
                SlurmPartition { name: "gpu".into(), state: "UP".into(), nodes: vec!["n1".into()], default: true },
                SlurmPartition { name: "spare".into(), state: "UP".into(), nodes: vec!["n1".into()], default: false },
            ],
            nodes: vec![SlurmNode { name: "n1".into(), state: "mixed".into(), cpus: 4, gpus: 4, gpus_used: used, ..Default::default() }],
            jobs,
        },
    }
}

fn room(mode: SlurmMode) -> Room {
    let mut config = RoomConfig::default();
    config.slurm.mode = mode;
    let mut room = Room::new(config);
    for (name, quota) in [("a", 2), ("b", 2)] {
        let spec = TenantSpec { id: TenantId(name.into()), quota_gpus: quota, monthly_budget: Micros(0), quota_gpu_mem: Mib(0), borrow_limit_gpus: 4 };
        room.apply(t(0), &Event::TenantDefined { spec });
    }
    room
}

fn alice() -> Actor {
    Actor { user: "alice".into(), origin: "console".into(), role: Role::Operator, account: None }
}

fn sent(effects: &[Effect]) -> Vec<(u64, u64, SlurmVerb)> {
    effects.iter().filter_map(|e| if let Effect::Slurm { command } = e { Some((command.id, command.job, command.verb.clone())) } else { None }).collect()
}

fn rejected(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| if let Effect::Rejected { reason } = e { Some(reason.clone()) } else { None })
}

/// a borrows all four GPUs; b waits for two within its quota. a's jobs
/// cannot save (`ckpt=no`): a preemption is the requeue alone (as for a job
/// never seen saving).
fn contested() -> Vec<SlurmJob> {
    let cannot_save = |j: SlurmJob| SlurmJob { comment: "ckpt=no".into(), ..j };
    vec![cannot_save(job(1, "a", SlurmState::Running, 2, 10)), cannot_save(job(2, "a", SlurmState::Running, 2, 20)), job(3, "b", SlurmState::Pending, 2, 30)]
}

#[test]
fn a_borrowed_job_never_seen_saving_is_requeued_without_the_signal_that_would_end_it() {
    let mut room = room(SlurmMode::Control);
    let jobs = vec![job(1, "a", SlurmState::Running, 2, 10), job(2, "a", SlurmState::Running, 2, 20), job(3, "b", SlurmState::Pending, 2, 30)];
    assert_eq!(sent(&room.apply(t(40), &snapshot(jobs))), vec![(1, 2, SlurmVerb::Requeue)]);
}

#[test]
fn a_borrowed_job_that_can_save_is_asked_to_then_requeued_after_the_grace_period() {
    let mut room = room(SlurmMode::Control);
    // a's jobs have saved before (`saved=EPOCH` in their comments): they catch the signal.
    let saved = |j: SlurmJob| SlurmJob { comment: "saved=25".into(), ..j };
    let jobs = || vec![saved(job(1, "a", SlurmState::Running, 2, 10)), saved(job(2, "a", SlurmState::Running, 2, 20)), job(3, "b", SlurmState::Pending, 2, 30)];
    assert_eq!(sent(&room.apply(t(40), &snapshot(jobs()))), vec![(1, 2, SlurmVerb::Signal { signal: "USR1".into() })]);
    room.apply(t(40), &Event::SlurmDone { command: 1, ok: true, message: "scancel --batch --signal=USR1 2".into() });
    let grace = room.config().slurm.checkpoint_grace.0;
    for s in 41..40 + grace {
        assert!(sent(&room.apply(t(s), &snapshot(jobs()))).is_empty(), "{s}: saving; nobody else is preempted for the same room");
    }
    assert_eq!(sent(&room.apply(t(40 + grace), &snapshot(jobs()))), vec![(2, 2, SlurmVerb::Requeue)]);
}

#[test]
fn advisory_mode_shows_the_reclaim_and_sends_nothing() {
    let mut room = room(SlurmMode::Advisory);
    let effects = room.apply(t(40), &snapshot(contested()));
    assert!(sent(&effects).is_empty());
    let view = room.view();
    let slurm = view.slurm.as_ref().unwrap();
    let two = slurm.jobs.iter().find(|j| j.id == 2).unwrap();
    assert!(two.advice.as_deref().unwrap().starts_with("requeue for job 3"), "{two:?}");
    assert!(slurm.jobs.iter().filter(|j| j.id != 2).all(|j| j.advice.is_none()));
    assert!(two.name.starts_with("job2") && !two.name.contains('\u{1b}'), "Slurm's texts are cleaned");
    assert_eq!(two.placement, "n1[0-1]");
    assert_eq!(slurm.accounts.iter().map(|a| (a.account.as_str(), a.quota, a.holding)).collect::<Vec<_>>(), [("a", Some(2), 4), ("b", Some(2), 0)]);
    let budgets: Vec<_> = view.budgets.iter().map(|b| (b.tenant.as_str(), b.gpus_held, b.quota_gpus)).collect();
    assert_eq!(budgets, [("a", 4, 2), ("b", 0, 2)], "the budget pane's GPUs held count the account's Slurm jobs");
    assert!(view.log.iter().any(|l| l.text.contains("slurm advice: requeue job 2")));
}

#[test]
fn control_mode_sends_once_waits_for_news_and_never_retries_a_failure_blindly() {
    let mut room = room(SlurmMode::Control);
    let effects = room.apply(t(40), &snapshot(contested()));
    assert_eq!(sent(&effects), vec![(1, 2, SlurmVerb::Requeue)]);
    // The next poll still shows it running: nothing more while the command is out.
    assert!(sent(&room.apply(t(41), &snapshot(contested()))).is_empty());
    let effects =
        room.apply(t(42), &Event::SlurmDone { command: 1, ok: false, message: "scontrol requeue 2: permission denied (Access/permission denied)".into() });
    assert!(effects.iter().any(
        |e| matches!(e, Effect::AlarmRaised { id, text } if id == "slurm:commands" && text.contains("permission denied") && text.contains("not retried"))
    ));
    let audit = effects.iter().find_map(|e| if let Effect::Audit { actor, outcome, .. } = e { Some((actor.clone(), outcome.clone())) } else { None }).unwrap();
    assert_eq!((audit.0.user.as_str(), audit.0.origin.as_str()), ("gpuroom", "policy"));
    assert!(audit.1.unwrap_err().contains("failed: scontrol requeue 2"));
    for s in 43..50 {
        assert!(sent(&room.apply(t(s), &snapshot(contested()))).is_empty(), "the same state: not sent again");
    }
    let row = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 2).unwrap();
    assert!(row.command_failed && row.command.as_deref().unwrap().contains("failed: "), "{row:?}");
    // Its state changed (it was suspended by someone and resumed, say): the policy may try again.
    let mut moved = contested();
    moved[1].restarts = 1;
    assert_eq!(sent(&room.apply(t(50), &snapshot(moved))), vec![(2, 2, SlurmVerb::Requeue)]);
}

#[test]
fn a_successful_command_waits_for_a_snapshot_taken_after_it() {
    let mut room = room(SlurmMode::Control);
    room.apply(t(40), &snapshot(contested()));
    let effects = room.apply(t(41), &Event::SlurmDone { command: 1, ok: true, message: "scontrol requeue 2".into() });
    assert!(effects.iter().any(|e| matches!(e, Effect::Audit { outcome: Ok(_), .. })));
    // A poll that raced the command still shows it running: not sent twice.
    assert!(sent(&room.apply(t(42), &snapshot(contested()))).is_empty());
    let mut after = contested();
    after[1] = job(2, "a", SlurmState::Pending, 2, 20);
    after[1].reason = "BeginTime".into();
    after[1].restarts = 1;
    assert!(sent(&room.apply(t(43), &snapshot(after))).is_empty(), "b fits now: no advice");
    assert!(room.view().slurm.unwrap().jobs.iter().all(|j| j.advice.is_none()));
}

#[test]
fn operator_verbs_are_checked_against_the_snapshot_and_preempt_follows_the_policy() {
    let mut config = RoomConfig::default();
    config.slurm.preempt_by = PreemptBy::Suspend;
    let mut room = Room::new(config);
    let act = |room: &mut Room, at: i64, job: u64, verb: SlurmVerb| room.apply(t(at), &Event::Operator { actor: alice(), action: Action::Slurm { job, verb } });
    assert_eq!(rejected(&act(&mut room, 1, 1, SlurmVerb::Requeue)).unwrap(), "no Slurm cluster is attached");
    let mut jobs = contested();
    jobs.push(SlurmJob { reason: "JobHeldUser".into(), ..job(4, "b", SlurmState::Pending, 1, 5) });
    room.apply(t(40), &snapshot(jobs));
    assert!(rejected(&act(&mut room, 41, 99, SlurmVerb::Cancel)).unwrap().contains("not in the newest snapshot"));
    assert!(rejected(&act(&mut room, 41, 3, SlurmVerb::Suspend)).unwrap().contains("it is pending"));
    assert!(rejected(&act(&mut room, 41, 1, SlurmVerb::Resume)).unwrap().contains("it is running"));
    assert!(rejected(&act(&mut room, 41, 4, SlurmVerb::Hold)).unwrap().contains("(held)"));
    assert!(rejected(&act(&mut room, 41, 3, SlurmVerb::Migrate { partition: Some("nope".into()), exclude: vec![] })).unwrap().contains("no partition"));
    assert!(rejected(&act(&mut room, 41, 3, SlurmVerb::Migrate { partition: Some("gpu".into()), exclude: vec![] })).unwrap().contains("already in partition"));
    assert_eq!(sent(&act(&mut room, 42, 1, SlurmVerb::Preempt)), vec![(1, 1, SlurmVerb::Suspend)], "preempt is suspend by this policy");
    assert!(rejected(&act(&mut room, 43, 1, SlurmVerb::Cancel)).unwrap().contains("on its way (suspend by alice@console)"));
    assert_eq!(sent(&act(&mut room, 44, 4, SlurmVerb::Release)).len(), 1);
    let migrate = SlurmVerb::Migrate { partition: Some("spare".into()), exclude: vec!["n1".into()] };
    assert_eq!(sent(&act(&mut room, 45, 2, migrate.clone())), vec![(3, 2, migrate)]);
    assert!(room.view().audit.iter().any(|a| a.user == "alice" && a.what.contains("slurm suspend job 1")));
    let viewer = Actor { role: Role::Viewer, ..alice() };
    let refused = room.apply(t(46), &Event::Operator { actor: viewer, action: Action::Slurm { job: 3, verb: SlurmVerb::Hold } });
    assert!(rejected(&refused).unwrap().contains("read-only"));
    assert!(rejected(&room.apply(t(47), &Event::SlurmDone { command: 77, ok: true, message: String::new() })).unwrap().contains("#77"));
}

#[test]
fn long_waits_raise_one_alarm_per_partition_and_a_failed_poll_marks_the_mirror_stale() {
    let mut room = room(SlurmMode::Advisory);
    let jobs = vec![job(1, "a", SlurmState::Pending, 1, 0), job(2, "b", SlurmState::Pending, 1, 100)];
    let effects = room.apply(t(3500), &snapshot(jobs.clone()));
    assert!(!effects.iter().any(|e| matches!(e, Effect::AlarmRaised { .. })));
    let effects = room.apply(t(3700), &snapshot(jobs.clone()));
    let text =
        effects.iter().find_map(|e| if let Effect::AlarmRaised { id, text } = e { (id == "slurm:wait:gpu").then(|| text.clone()) } else { None }).unwrap();
    assert!(text.contains("1 GPU job(s) pending over 1h") && text.contains("oldest 1"), "{text}");
    let effects = room.apply(t(3800), &snapshot(vec![job(1, "a", SlurmState::Running, 1, 3750)]));
    assert!(effects.iter().any(|e| matches!(e, Effect::AlarmCleared { id } if id == "slurm:wait:gpu")));
    room.apply(t(3900), &Event::SourceStatus { source: "slurm".into(), ok: false, detail: "squeue --json: controller unreachable".into(), stale: vec![] });
    let view = room.view();
    assert_eq!(view.slurm.unwrap().stale.as_deref(), Some("squeue --json: controller unreachable"));
    room.apply(t(3905), &snapshot(vec![]));
    assert!(room.view().slurm.unwrap().stale.is_none());
}

#[test]
fn the_mirror_survives_a_snapshot_of_the_room() {
    let mut room = room(SlurmMode::Control);
    room.apply(t(40), &snapshot(contested()));
    let json = serde_json::to_string(&room).unwrap();
    let back: Room = serde_json::from_str(&json).unwrap();
    assert_eq!(back.slurm(), room.slurm());
}

/// Issue 33, item 3: gpuroom runs Slurm's commands with the engine's
/// rights, so a console's user acts only on their own jobs unless named an
/// operator of the job's account, and sends only the checkpoint signal
/// unless that operator may send any.
#[test]
fn a_console_user_acts_on_their_own_slurm_jobs_or_as_an_operator_of_the_account() {
    use crate::domain::event::OsAccount;
    use crate::domain::slurm::SlurmOperator;
    let mut config = RoomConfig::default();
    config.slurm.operators = vec![
        SlurmOperator { user: "olga".into(), accounts: vec!["a".into()], any_signal: false },
        SlurmOperator { user: "root-ops".into(), accounts: vec!["*".into()], any_signal: true },
    ];
    let mut room = Room::new(config);
    let mut jobs = contested();
    jobs[0].user = "alice".into();
    jobs[1].user = "bob".into();
    jobs[2].user = "bob".into();
    room.apply(t(40), &snapshot(jobs));
    let who = |name: &str, engine: bool| Actor {
        user: name.into(),
        origin: "ssh 10.0.0.9".into(),
        role: Role::Operator,
        account: Some(OsAccount { name: name.into(), engine }),
    };
    let mut at = 41;
    let mut act = |room: &mut Room, actor: Actor, job: u64, verb: SlurmVerb| {
        at += 1;
        room.apply(t(at), &Event::Operator { actor, action: Action::Slurm { job, verb } })
    };
    let kill = || SlurmVerb::Signal { signal: "KILL".into() };
    let usr1 = || SlurmVerb::Signal { signal: "USR1".into() };

    let refused = rejected(&act(&mut room, who("mallory", false), 1, SlurmVerb::Cancel)).expect("not hers");
    assert!(refused.contains("mallory may not cancel Slurm job 1: it is alice's (account a)"), "{refused}");
    assert!(rejected(&act(&mut room, who("alice", false), 2, SlurmVerb::Requeue)).unwrap().contains("it is bob's"));
    let refused = rejected(&act(&mut room, who("alice", false), 1, kill())).expect("only the checkpoint signal");
    assert!(refused.contains("only the checkpoint signal (USR1), not KILL"), "{refused}");
    assert_eq!(sent(&act(&mut room, who("alice", false), 1, usr1())).len(), 1, "her own job, the checkpoint signal");
    let effects = act(&mut room, who("olga", false), 2, SlurmVerb::Suspend);
    assert_eq!(sent(&effects).len(), 1, "an operator of account a: {:?}", rejected(&effects));
    assert!(rejected(&act(&mut room, who("olga", false), 3, SlurmVerb::Hold)).unwrap().contains("not an operator of that account"), "b is not olga's");
    assert_eq!(sent(&act(&mut room, who("root-ops", false), 3, SlurmVerb::Hold)).len(), 1);
    // The engine's own user holds its rights anyway; an actor from an older log is judged as then.
    let mut later = contested();
    later.extend([
        SlurmJob { user: "zed".into(), ..job(5, "b", SlurmState::Running, 0, 50) },
        SlurmJob { user: "zed".into(), ..job(6, "b", SlurmState::Running, 0, 50) },
    ]);
    room.apply(t(48), &snapshot(later));
    let effects = act(&mut room, who("gpuroom-svc", true), 5, kill());
    assert_eq!(sent(&effects).len(), 1, "{:?}", rejected(&effects));
    let effects = act(&mut room, alice(), 6, SlurmVerb::Requeue);
    assert_eq!(sent(&effects).len(), 1, "{:?}", rejected(&effects));
}
