//! Property tests (proptest): whatever the discipline, fit policy, quotas and
//! the order of events — submissions of any size, starts, saves, stops, exits,
//! lost nodes, interruption notices, telemetry, operator actions — no GPU is
//! over-committed, no job is lost or in two places, quotas plus borrowing are
//! respected and money reconciles, after every event. Failing cases shrink to
//! a minimal event list.

mod common;

use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::{Action, Actor, Effect, Event, GpuSample, Role};
use gpuroom::domain::ids::{GpuRef, JobId, NodeId};
use gpuroom::domain::job::PoolPreference;
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, MicrosPerHour, Secs};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sched::{DisciplineKind, FitPolicy, SchedConfig};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Submit {
        gpus: u8,
        mem: u32,
        exclusive: bool,
        tenant: u8,
        pool: u8,
        priority: i32,
        est: Option<i64>,
    },
    /// Act on the k-th job that exists (modulo their number).
    Start(usize),
    Save(usize),
    Stop(usize),
    Exit(usize, bool),
    Progress(usize, u64),
    Idle(u8, u8, f32),
    Lose(u8),
    Notice(u8),
    Relaunch(u8),
    Operator(usize, u8),
    Switch(u8),
    Wait(u16),
    /// A spot price move (may pass jobs' max prices).
    Price(u32),
    /// Output counters of a job.
    Output(usize, u64),
    /// Lifetimes for the hazard prior (some of them invalid).
    Lifetimes(Vec<i64>),
    /// An overrun approval, with or without a reason and a bound.
    Approve(u8, bool, Option<i64>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u8..=8, 500u32..16_000, any::<bool>(), 0u8..3, 0u8..3, 0i32..5, proptest::option::of(prop_oneof![60i64..20_000, Just(i64::MAX), Just(0i64), Just(-5i64)]))
            .prop_map(|(gpus, mem, exclusive, tenant, pool, priority, est)| Step::Submit { gpus, mem, exclusive, tenant, pool, priority, est }),
        3 => any::<usize>().prop_map(Step::Start),
        1 => any::<usize>().prop_map(Step::Save),
        1 => any::<usize>().prop_map(Step::Stop),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(k, ok)| Step::Exit(k, ok)),
        2 => (any::<usize>(), prop_oneof![0u64..1200, 0u64..3]).prop_map(|(k, s)| Step::Progress(k, s)),
        1 => (1u8..=4, 0u8..8, 0.0f32..100.0).prop_map(|(n, g, u)| Step::Idle(n, g, u)),
        1 => (1u8..=4).prop_map(Step::Lose),
        1 => (1u8..=4).prop_map(Step::Notice),
        1 => (1u8..=4).prop_map(Step::Relaunch),
        1 => (any::<usize>(), 0u8..3).prop_map(|(k, a)| Step::Operator(k, a)),
        1 => (0u8..4).prop_map(Step::Switch),
        2 => (1u16..3600).prop_map(Step::Wait),
        1 => (1_000_000u32..20_000_000).prop_map(Step::Price),
        1 => (any::<usize>(), 0u64..100_000).prop_map(|(k, n)| Step::Output(k, n)),
        1 => proptest::collection::vec(-5i64..20_000, 0..20).prop_map(Step::Lifetimes),
        1 => (0u8..3, any::<bool>(), proptest::option::of(-5i64..1_000_000_000)).prop_map(|(t, r, a)| Step::Approve(t, r, a)),
    ]
}

fn nth_job(room: &Room, k: usize) -> Option<JobId> {
    let ids: Vec<JobId> = room.jobs().map(|j| j.spec.id).collect();
    (!ids.is_empty()).then(|| ids[k % ids.len()])
}

fn node(i: u8) -> gpuroom::domain::cluster::NodeSpec {
    let billing = [BillingMode::Reserved, BillingMode::Spot, BillingMode::OnDemand, BillingMode::Spot][usize::from(i - 1) % 4];
    node_spec(u32::from(i), billing, [8, 4, 8, 1][usize::from(i - 1) % 4])
}

fn run(config: SchedConfig, steps: Vec<Step>) {
    let mut room = Room::new(RoomConfig { sched: config, ..RoomConfig::default() });
    let mut now = 0i64;
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let mut spec = tenant_spec(name, [8, 6, 4][i]);
        spec.borrow_limit_gpus = [4, 8, 0][i];
        // Budgets small enough that long cases pass 80%, 100% and 120%.
        spec.monthly_budget = gpuroom::domain::units::Micros([50_000_000, 200_000_000, 0][i]);
        room.apply(t(0), &Event::TenantDefined { spec });
    }
    room.apply(t(0), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(7_344_000) });
    for i in 1..=4 {
        room.apply(t(0), &Event::NodeUp { spec: node(i) });
    }
    let mut next_id = 1u64;
    let mut ledger: Vec<gpuroom::cost::ledger::LedgerLine> = Vec::new();
    for (n, step) in steps.into_iter().enumerate() {
        now += 7;
        let event = match step {
            Step::Submit { gpus, mem, exclusive, tenant, pool, priority, est } => {
                let mut spec = job_spec(next_id, ["a", "b", "c"][usize::from(tenant)], gpus);
                next_id += 1;
                spec.gpu_mem = Mib(mem);
                spec.exclusive = exclusive || gpus > 1;
                spec.pool = [PoolPreference::Any, PoolPreference::NoSpot, PoolPreference::SpotOnly][usize::from(pool)];
                spec.priority = priority;
                spec.est_runtime = est.map(Secs);
                Event::JobSubmitted { spec }
            }
            Step::Start(k) => match nth_job(&room, k) {
                Some(job) => Event::JobStarted { job },
                None => Event::Tick,
            },
            Step::Save(k) => match nth_job(&room, k) {
                Some(job) => Event::CheckpointDone { job, step: room.job(job).map_or(0, |j| j.steps_done), bytes: 1 },
                None => Event::Tick,
            },
            Step::Stop(k) => match nth_job(&room, k) {
                Some(job) => Event::JobStopped { job },
                None => Event::Tick,
            },
            Step::Exit(k, ok) => match nth_job(&room, k) {
                Some(job) => Event::JobExited { job, ok, message: "x".into() },
                None => Event::Tick,
            },
            Step::Progress(k, s) => match nth_job(&room, k) {
                Some(job) => Event::Telemetry { gpus: vec![], progress: vec![(job, s)] },
                None => Event::Tick,
            },
            Step::Idle(n, g, u) => Event::Telemetry { gpus: vec![GpuSample(GpuRef { node: NodeId(u32::from(n)), index: g }, u, Mib(100))], progress: vec![] },
            Step::Lose(i) => Event::NodeLost { node: NodeId(u32::from(i)), reason: "prop".into() },
            Step::Notice(i) => Event::InterruptionNotice { node: NodeId(u32::from(i)), deadline: t(now + 120) },
            Step::Relaunch(i) => Event::NodeUp { spec: node(i) },
            Step::Operator(k, a) => match nth_job(&room, k) {
                Some(job) => {
                    let action = [Action::Preempt { job }, Action::Requeue { job }, Action::Cancel { job }][usize::from(a)].clone();
                    Event::Operator { actor: Actor { user: "p".into(), origin: "prop".into(), role: Role::Operator, account: None }, action }
                }
                None => Event::Tick,
            },
            Step::Switch(d) => Event::Operator {
                actor: Actor { user: "p".into(), origin: "prop".into(), role: Role::Operator, account: None },
                action: Action::SetDiscipline { discipline: DisciplineKind::ALL[usize::from(d)] },
            },
            Step::Wait(secs) => {
                now += i64::from(secs);
                Event::Tick
            }
            Step::Price(p) => Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(i64::from(p)) },
            Step::Output(k, n) => match nth_job(&room, k) {
                Some(job) => Event::JobOutput { job, requests: n, tokens: n * 100 },
                None => Event::Tick,
            },
            Step::Lifetimes(secs) => Event::SpotLifetimes {
                instance_type: "p3.16xlarge".into(),
                lifetimes: secs.into_iter().map(|s| gpuroom::market::hazard::Lifetime { secs: Secs(s), interrupted: s % 3 != 0 }).collect(),
            },
            Step::Approve(tenant, reason, amount) => Event::Operator {
                actor: Actor { user: "p".into(), origin: "prop".into(), role: Role::Operator, account: None },
                action: Action::ApproveOverrun {
                    tenant: gpuroom::domain::ids::TenantId(["a", "b", "c"][usize::from(tenant)].into()),
                    reason: if reason { "deadline".into() } else { String::new() },
                    amount: amount.map(gpuroom::domain::units::Micros),
                    until: None,
                },
            },
        };
        let effects = room.apply(t(now), &event);
        // The core never answers with a panic, only with effects.
        let _ = effects.iter().filter(|e| matches!(e, Effect::Rejected { .. })).count();
        for effect in &effects {
            if let Effect::Ledger { lines } = effect {
                ledger.extend(lines.iter().cloned());
            }
        }
        common::check(&room, &format!("step {n}: {event:?}"));
        common::check_ledger(&room, &ledger, &format!("step {n}: {event:?}"));
    }
}

fn config() -> impl Strategy<Value = SchedConfig> {
    (0usize..4, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(d, first_fit, time_sharing, backfill)| SchedConfig {
        discipline: DisciplineKind::ALL[d],
        fit: if first_fit { FitPolicy::FirstFit } else { FitPolicy::BestFit },
        time_sharing,
        backfill,
        ..SchedConfig::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_event(config in config(), steps in proptest::collection::vec(step(), 1..160)) {
        run(config, steps);
    }
}
