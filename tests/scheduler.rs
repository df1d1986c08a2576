//! The scheduler through `Room::apply`, with a small executor that starts,
//! saves, stops and finishes jobs as told: no starvation under priority with
//! aging, quota reclaim of borrowed work, EASY backfill behind a reservation,
//! wait alarms with escalation, idle reclaim (and no reclaim on a short idle),
//! MLFQ preemption, MIG slices, and switching discipline at run time.

use gpuroom::ckpt::CheckpointKind;
use std::collections::BTreeMap;

use gpuroom::domain::cluster::{BillingMode, NodeSpec};
use gpuroom::domain::event::{Action, Actor, Effect, Event, GpuSample, Role, TenantSpec};
use gpuroom::domain::ids::{GpuRef, JobId, NodeId};
use gpuroom::domain::job::{JobSpec, Phase, PoolPreference};
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, Secs};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sched::{DisciplineKind, SchedConfig};

/// Plays the executor: a job runs for its `run_secs` once started; saves take
/// 5 s; stops take 2 s.
struct Harness {
    room: Room,
    now: i64,
    pending: Vec<(i64, u64, Event)>,
    seq: u64,
    run_secs: BTreeMap<JobId, i64>,
    /// Current run generation per job, so a stopped run never "finishes".
    generation: BTreeMap<JobId, u64>,
    finishing: Vec<(i64, JobId, u64)>,
    effects: Vec<Effect>,
}

impl Harness {
    fn new(config: RoomConfig, tenants: Vec<TenantSpec>, nodes: Vec<NodeSpec>) -> Harness {
        let mut h = Harness {
            room: Room::new(config),
            now: 0,
            pending: Vec::new(),
            seq: 0,
            run_secs: BTreeMap::new(),
            generation: BTreeMap::new(),
            finishing: Vec::new(),
            effects: Vec::new(),
        };
        for spec in tenants {
            h.apply(Event::TenantDefined { spec });
        }
        for spec in nodes {
            h.apply(Event::NodeUp { spec });
        }
        h
    }

    fn at(&mut self, secs: i64, event: Event) {
        self.seq += 1;
        self.pending.push((secs, self.seq, event));
    }

    fn submit(&mut self, at: i64, spec: JobSpec, run_secs: i64) {
        self.run_secs.insert(spec.id, run_secs);
        self.at(at, Event::JobSubmitted { spec });
    }

    fn apply(&mut self, event: Event) {
        let effects = self.room.apply(t(self.now), &event);
        for e in &effects {
            match e {
                Effect::StartJob { job, .. } => {
                    let generation = self.generation.entry(*job).or_default();
                    *generation += 1;
                    let g = *generation;
                    self.at(self.now + 1, Event::JobStarted { job: *job });
                    let done = self.room.job(*job).map(|j| j.steps_saved).unwrap_or(0);
                    let total = self.room.job(*job).map(|j| j.spec.steps_total).unwrap_or(1).max(1);
                    let left = self.run_secs.get(job).copied().unwrap_or(3600) * (total - done.min(total)) as i64 / total as i64;
                    self.finishing.push((self.now + 1 + left, *job, g));
                }
                Effect::Checkpoint { job, .. } => {
                    let step = self.progress(*job);
                    self.at(self.now + 5, Event::CheckpointDone { job: *job, step, bytes: 1 << 30 });
                }
                Effect::StopJob { job } => {
                    *self.generation.entry(*job).or_default() += 1;
                    self.at(self.now + 2, Event::JobStopped { job: *job });
                }
                _ => {}
            }
        }
        self.effects.extend(effects);
    }

    /// Steps done by now, from the run's start (what telemetry would say).
    fn progress(&self, job: JobId) -> u64 {
        let Some(j) = self.room.job(job) else { return 0 };
        let (Some(started), Some(run)) = (j.started_at, self.run_secs.get(&job)) else { return j.steps_done };
        let secs = (t(self.now) - started).num_seconds().max(0);
        (j.steps_saved + (secs as u64 * j.spec.steps_total / (*run).max(1) as u64)).min(j.spec.steps_total)
    }

    /// Runs everything due up to `until`, with telemetry every `tick` seconds.
    fn run_until(&mut self, until: i64, tick: i64) {
        let mut next_tick = self.now + tick;
        loop {
            let next_event = self.pending.iter().map(|(at, seq, _)| (*at, *seq)).min();
            let next_finish = self.finishing.iter().filter(|(_, job, g)| self.generation.get(job) == Some(g)).map(|(at, _, _)| *at).min();
            let candidates = [next_event.map(|e| e.0), next_finish, Some(next_tick)];
            let Some(when) = candidates.into_iter().flatten().min() else { break };
            if when > until {
                break;
            }
            self.now = self.now.max(when);
            if next_event.is_some_and(|e| e.0 == when) {
                let (_, seq) = next_event.unwrap();
                let i = self.pending.iter().position(|(_, s, _)| *s == seq).unwrap();
                let (_, _, event) = self.pending.remove(i);
                self.apply(event);
            } else if next_finish == Some(when) {
                let i = self.finishing.iter().position(|(at, job, g)| *at == when && self.generation.get(job) == Some(g)).unwrap();
                let (_, job, _) = self.finishing.remove(i);
                *self.generation.entry(job).or_default() += 1;
                self.apply(Event::JobExited { job, ok: true, message: "exit 0".into() });
            } else {
                next_tick += tick;
                let progress: Vec<(JobId, u64)> =
                    self.room.jobs().filter(|j| j.phase() == Phase::Running).map(|j| (j.spec.id, self.progress(j.spec.id))).collect();
                self.apply(Event::Telemetry { gpus: vec![], progress });
            }
        }
        self.now = until;
        self.apply(Event::Tick);
    }

    fn phase(&self, id: u64) -> Phase {
        self.room.job(JobId(id)).unwrap().phase()
    }
}

fn config(discipline: DisciplineKind) -> RoomConfig {
    RoomConfig { sched: SchedConfig { discipline, ..SchedConfig::default() }, ..RoomConfig::default() }
}

fn job(id: u64, tenant: &str, gpus: u8, priority: i32, est: Option<i64>) -> JobSpec {
    let mut spec = job_spec(id, tenant, gpus);
    spec.priority = priority;
    spec.est_runtime = est.map(Secs);
    spec
}

#[test]
fn priority_with_aging_never_starves_low_priority_work() {
    for (aging, expect_placed) in [(1.0, true), (0.0, false)] {
        let mut cfg = config(DisciplineKind::Priority);
        cfg.sched.aging_per_hour = aging;
        // Wait-limit escalation would rescue the job too; this test is about aging alone.
        cfg.sched.max_wait.training = Secs(30 * 86_400);
        let mut h = Harness::new(cfg, vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 1)]);
        // One low-priority job, and a constant stream of priority-10 jobs:
        // a new one every 20 minutes, each running 30 minutes.
        for i in 0..80 {
            h.submit(i * 1200, job(100 + i as u64, "a", 1, 10, None), 1800);
        }
        h.submit(60, job(1, "a", 1, 0, None), 600);
        h.run_until(24 * 3600, 300);
        let placed = h.room.job(JobId(1)).unwrap().attempts > 0;
        assert_eq!(placed, expect_placed, "aging {aging}: low-priority job placed = {placed}");
    }
}

#[test]
fn borrowed_gpus_go_back_to_their_owner_newest_first_after_a_save() {
    let mut a = tenant_spec("a", 4);
    a.borrow_limit_gpus = 4;
    let b = tenant_spec("b", 4);
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![a, b], vec![node_spec(1, BillingMode::Reserved, 8)]);
    for i in 1..=8 {
        h.submit(i, job(i as u64, "a", 1, 0, None), 10 * 3600);
    }
    h.run_until(600, 60);
    assert!((1..=8).all(|i| h.phase(i) == Phase::Running), "a borrows the idle half");
    let borrowed = h.room.borrowed();
    assert_eq!(borrowed.iter().map(|j| j.0).collect::<Vec<_>>(), vec![5, 6, 7, 8]);
    let view = h.room.view();
    let a_row = view.queue.by_tenant.iter().find(|r| r.tenant == "a").unwrap();
    assert_eq!((a_row.gpus_held, a_row.borrowed_gpus), (8, 4));

    // b needs two GPUs back: a's two newest borrowed jobs save, stop and requeue.
    h.submit(700, job(20, "b", 1, 0, None), 3600);
    h.submit(700, job(21, "b", 1, 0, None), 3600);
    h.run_until(760, 60);
    assert_eq!(h.phase(20), Phase::Running, "b got its GPU back");
    assert_eq!(h.phase(21), Phase::Running);
    assert_eq!((h.phase(8), h.phase(7)), (Phase::Queued, Phase::Queued), "the newest borrowed jobs went");
    assert!(h.room.job(JobId(8)).unwrap().checkpoints >= 1, "saved before stopping");
    assert!((1..=6).all(|i| h.phase(i) == Phase::Running));
    // a may not borrow again while b is within its quota and the cluster is full.
    assert!(h.room.view().log.iter().any(|l| l.text.contains("quota reclaim for b")));
}

#[test]
fn backfill_lets_short_jobs_ahead_only_if_they_do_not_delay_the_reserved_one() {
    for (backfill, long_runs_first) in [(true, false), (false, true)] {
        let mut cfg = config(DisciplineKind::Fifo);
        cfg.sched.backfill = backfill;
        let mut h = Harness::new(cfg, vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 4)]);
        h.submit(0, job(1, "a", 2, 0, Some(7200)), 7200); // running 2 h
        h.submit(10, job(2, "a", 4, 0, Some(3600)), 3600); // head: needs the whole node
        h.submit(20, job(3, "a", 2, 0, Some(3000)), 3000); // ends before job 1: may backfill
        h.submit(30, job(4, "a", 2, 0, Some(5 * 3600)), 5 * 3600); // would delay the head
        h.run_until(120, 60);
        assert_eq!(h.phase(3), Phase::Running, "short job backfills");
        h.run_until(3100, 60);
        assert_eq!(h.phase(4) == Phase::Running, long_runs_first, "backfill {backfill}: long job jumped ahead");
        h.run_until(7300, 60);
        if backfill {
            assert_eq!(h.phase(2), Phase::Running, "the head starts when job 1 ends, as reserved");
        } else {
            assert_eq!(h.phase(2), Phase::Queued, "without a reservation the head waits behind job 4");
        }
    }
}

#[test]
fn a_wait_past_its_limit_alarms_escalates_and_clears_when_placed() {
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 2)]);
    let mut eval = job(1, "a", 1, 0, None);
    eval.class = gpuroom::domain::job::JobClass::Eval;
    eval.exclusive = false;
    eval.gpu_mem = Mib(4000);
    eval.pool = PoolPreference::SpotOnly;
    h.submit(0, eval, 600);
    h.run_until(40 * 60, 60);
    assert_eq!(h.phase(1), Phase::Queued, "spot only, and there is no spot capacity");
    assert!(h.room.view().alarms.is_empty());
    h.run_until(47 * 60, 60);
    assert_eq!(h.phase(1), Phase::Running, "escalated past 45 min: any capacity");
    let raised = h.effects.iter().any(|e| matches!(e, Effect::AlarmRaised { id, .. } if id == "wait:a:eval"));
    let cleared = h.effects.iter().any(|e| matches!(e, Effect::AlarmCleared { id } if id == "wait:a:eval"));
    assert!(raised && cleared, "alarm raised and cleared");
    // Nobody acknowledged it: it stays listed, cleared, until someone does.
    assert!(h.room.view().alarms.iter().all(|a| a.id == "wait:a:eval" && !a.is_active()), "{:?}", h.room.view().alarms);
}

fn sample(util: f32) -> Event {
    Event::Telemetry { gpus: vec![GpuSample(GpuRef { node: NodeId(1), index: 0 }, util, Mib(1000))], progress: vec![] }
}

#[test]
fn a_short_idle_never_reclaims_a_long_one_does() {
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 1)]);
    h.submit(0, job(1, "a", 1, 0, None), 10 * 3600);
    h.run_until(10, 3600);
    assert_eq!(h.phase(1), Phase::Running);
    // 4 min 30 s below 5%, then one busy sample, then 4 min 30 s again: never 5 minutes.
    for (i, util) in [1.0, 2.0, 0.5, 3.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 50.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0].iter().enumerate() {
        h.now = 60 + i as i64 * 30;
        h.apply(sample(*util));
    }
    assert_eq!(h.phase(1), Phase::Running, "short idles do not reclaim");
    assert!(!h.effects.iter().any(|e| matches!(e, Effect::Checkpoint { .. })));
    // Five full minutes below the threshold release the GPU (after a save).
    for i in 0..11 {
        h.now = 700 + i * 30;
        h.apply(sample(1.0));
    }
    assert!(h.effects.contains(&Effect::Checkpoint { job: JobId(1), kind: CheckpointKind::Full }));
    h.run_until(1100, 3600);
    let job1 = h.room.job(JobId(1)).unwrap();
    assert_eq!(job1.phase(), Phase::Failed);
    assert!(matches!(&job1.state, gpuroom::domain::job::JobState::Failed { reason } if reason.contains("released")), "{:?}", job1.state);
    assert!(h.room.node(NodeId(1)).unwrap().gpus[0].allocations.is_empty());
}

#[test]
fn mlfq_preempts_a_long_running_job_for_a_new_short_one() {
    let mut h = Harness::new(config(DisciplineKind::Mlfq), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 4)]);
    h.submit(0, job(1, "a", 4, 0, None), 20 * 3600);
    h.run_until(3600, 300);
    // Four GPUs for an hour: 4 GPU-hours, past the first threshold (1 GPU-hour).
    h.submit(3600, job(2, "a", 1, 0, None), 600);
    h.run_until(3700, 300);
    assert_eq!(h.phase(2), Phase::Running, "the short job runs");
    assert_eq!(h.phase(1), Phase::Queued, "the long one was preempted");
    let long = h.room.job(JobId(1)).unwrap();
    assert!(long.checkpoints >= 1 && long.steps_saved > 0, "it saved before stopping");
    h.run_until(4400, 300);
    assert_eq!(h.phase(2), Phase::Done);
    assert_eq!(h.phase(1), Phase::Running, "and resumes once the short job is done");
}

#[test]
fn fifo_does_not_preempt_for_a_short_job() {
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 4)]);
    h.submit(0, job(1, "a", 4, 0, None), 20 * 3600);
    h.submit(3600, job(2, "a", 1, 0, None), 600);
    h.run_until(3700, 300);
    assert_eq!((h.phase(1), h.phase(2)), (Phase::Running, Phase::Queued));
}

#[test]
fn mig_slices_take_small_jobs_side_by_side() {
    let a100 = gpuroom::domain::testkit::mig_node_spec(1, BillingMode::Reserved, 1);
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![a100]);
    for (id, mem) in [(1, 4000), (2, 4500), (3, 9000), (4, 18_000), (5, 4000)] {
        let mut spec = job(id, "a", 1, 0, None);
        spec.gpu_mem = Mib(mem);
        h.submit(0, spec, 3600);
    }
    h.run_until(60, 60);
    assert!((1..=4).all(|i| h.phase(i) == Phase::Running), "four jobs on four slices of one GPU");
    assert_eq!(h.phase(5), Phase::Queued, "no slice left");
    let node = h.room.node(NodeId(1)).unwrap();
    assert_eq!(node.gpus.iter().filter(|g| !g.allocations.is_empty()).count(), 4);
}

#[test]
fn the_discipline_switches_at_run_time_and_viewers_cannot_switch_it() {
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 1)]);
    let viewer = Actor { user: "wall".into(), origin: "wall".into(), role: Role::Viewer, account: None };
    h.apply(Event::Operator { actor: viewer, action: Action::SetDiscipline { discipline: DisciplineKind::Drf } });
    assert_eq!(h.room.view().discipline, "fifo");
    let op = Actor { user: "ops".into(), origin: "ssh".into(), role: Role::Operator, account: None };
    h.apply(Event::Operator { actor: op, action: Action::SetDiscipline { discipline: DisciplineKind::Drf } });
    assert_eq!(h.room.view().discipline, "drf");
    assert!(h.room.view().log.iter().any(|l| l.text.contains("queue discipline fifo → drf")));
}

#[test]
fn a_backlog_past_its_limit_is_one_alarm_per_tenant_and_class_that_counts_and_clears() {
    let mut h = Harness::new(config(DisciplineKind::Fifo), vec![tenant_spec("a", 64)], vec![node_spec(1, BillingMode::Reserved, 2)]);
    // One long job holds the node; four evals wait behind it past their 45 min limit.
    h.submit(0, job(1, "a", 2, 0, None), 3 * 3600);
    for id in 2..=5 {
        let mut eval = job(id, "a", 2, 0, None);
        eval.class = gpuroom::domain::job::JobClass::Eval;
        h.submit(1, eval, 600);
    }
    h.run_until(50 * 60, 60);
    let alarms = h.room.view().alarms;
    let wait: Vec<_> = alarms.iter().filter(|a| a.id.starts_with("wait:")).collect();
    assert_eq!(wait.len(), 1, "one alarm, not one per job: {alarms:?}");
    assert_eq!(wait[0].id, "wait:a:eval");
    assert!(wait[0].text.contains("a: 4 eval jobs waited past") && wait[0].text.contains("oldest j2"), "{}", wait[0].text);
    let raised = h.effects.iter().filter(|e| matches!(e, Effect::AlarmRaised { id, .. } if id.starts_with("wait:"))).count();
    assert_eq!(raised, 1, "raised once, then updated in place");
    // As the node frees up the evals run one by one; the count follows, then the alarm clears.
    h.run_until(3 * 3600 + 15 * 60, 60);
    let left = h.room.view().alarms.into_iter().find(|a| a.id == "wait:a:eval" && a.is_active());
    assert!(left.as_ref().is_none_or(|a| a.text.contains("waited") && !a.text.contains("4 eval")), "{left:?}");
    h.run_until(6 * 3600, 60);
    assert!(h.room.view().alarms.iter().all(|a| !a.id.starts_with("wait:") || !a.is_active()), "cleared once none waits");
    assert!(h.effects.iter().any(|e| matches!(e, Effect::AlarmCleared { id } if id == "wait:a:eval")));
}

/// A job bound to GPU models that finds no room says nothing of a job of
/// the same size that may run anywhere: in the same pass, the unbound job
/// still starts, on the other model.
#[test]
fn a_model_bound_job_that_cannot_start_does_not_hold_back_unbound_work_of_its_size() {
    let mut room = Room::default();
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    for (id, model) in [(1, "T4"), (2, "G2")] {
        let mut spec = node_spec(id, BillingMode::Reserved, 1);
        spec.gpu_model = model.into();
        room.apply(t(0), &Event::NodeUp { spec });
    }
    let bound = |id: u64| JobSpec { gpu_models: vec!["T4".into()], ..job_spec(id, "a", 1) };
    let started = |effects: Vec<Effect>| -> Vec<(JobId, NodeId)> {
        effects.into_iter().filter_map(|e| if let Effect::StartJob { job, node, .. } = e { Some((job, node)) } else { None }).collect()
    };
    assert_eq!(started(room.apply(t(1), &Event::JobSubmitted { spec: bound(1) })), vec![(JobId(1), NodeId(1))]);
    // The T4 is taken: the second T4 job waits, the unbound one of its size goes to the G2.
    let effects = room.apply(t(2), &Event::JobsSubmitted { specs: vec![bound(2), job_spec(3, "a", 1)] });
    assert_eq!(started(effects), vec![(JobId(3), NodeId(2))]);
    assert_eq!(room.job(JobId(2)).map(|j| j.phase()), Some(Phase::Queued));
}
