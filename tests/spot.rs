//! The spot watcher and the checkpoint controller through `Room::apply`: a
//! real preemption trace replayed end to end, max-price moves, risk-driven
//! intervals, and refused input.

use std::collections::BTreeMap;

use gpuroom::domain::cluster::{BillingMode, NodeSpec};
use gpuroom::domain::event::{Effect, Event};
use gpuroom::domain::ids::{JobId, NodeId};
use gpuroom::domain::job::{Phase, PoolPreference};
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, MicrosPerHour};
use gpuroom::market::hazard::Lifetime;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sources::spot_trace;

fn fixture(path: &str) -> String {
    let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn small_spot(id: u32) -> NodeSpec {
    let mut spec = node_spec(id, BillingMode::Spot, 1);
    spec.instance_type = "p3.2xlarge".into();
    spec.zone = "us-west-2b".into();
    spec.on_demand_price = MicrosPerHour(3_060_000);
    spec.contract_price = MicrosPerHour(3_060_000);
    spec.max_price = Some(MicrosPerHour(3_060_000));
    spec
}

fn rejected(effects: &[Effect]) -> bool {
    effects.iter().any(|e| matches!(e, Effect::Rejected { .. }))
}

/// Plays the executor for one job: starts after 60 s, saves in 20 s, stops
/// in 5 s, runs one step per second while it runs.
struct Executor {
    pending: BTreeMap<(i64, u64), Event>,
    seq: u64,
    running_since: Option<(i64, u64)>,
}

impl Executor {
    fn steps(&self, now: i64) -> Option<u64> {
        self.running_since.map(|(since, base)| base + (now - since).max(0) as u64)
    }

    fn react(&mut self, now: i64, effects: &[Effect], total: u64) {
        for effect in effects {
            match effect {
                Effect::StartJob { job, resume_step, .. } => {
                    self.running_since = Some((now + 60, *resume_step));
                    self.later(now + 60, Event::JobStarted { job: *job });
                    let ends = now + 60 + (total - resume_step) as i64;
                    self.later(ends, Event::JobExited { job: *job, ok: true, message: "exit 0".into() });
                }
                Effect::Checkpoint { job, .. } => {
                    let step = self.steps(now).unwrap_or(0).min(total);
                    self.later(now + 20, Event::CheckpointDone { job: *job, step, bytes: 1 << 30 });
                }
                Effect::StopJob { job } => {
                    self.running_since = None;
                    self.pending.retain(|_, e| !matches!(e, Event::JobExited { .. }));
                    self.later(now + 5, Event::JobStopped { job: *job });
                }
                _ => {}
            }
        }
    }

    fn later(&mut self, at: i64, event: Event) {
        self.seq += 1;
        self.pending.insert((at, self.seq), event);
    }
}

#[test]
fn a_real_preemption_trace_end_to_end_through_the_room() {
    let name = "spot-traces/preemption/aws-04-22-2023/us-west-2b_v100_1.json";
    let trace = spot_trace::parse(name, &fixture(name)).unwrap();
    let gap = trace.gap.0;
    let mut room = Room::default();
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("nlp", 8) });
    let prior: Vec<Lifetime> = trace.lifetimes();
    assert!(!rejected(&room.apply(t(0), &Event::SpotLifetimes { instance_type: "p3.2xlarge".into(), lifetimes: prior })));
    room.apply(t(0), &Event::PriceTick { zone: "us-west-2b".into(), instance_type: "p3.2xlarge".into(), price: MicrosPerHour(918_000) });
    let first_alive = trace.samples.iter().position(|s| *s > 0).unwrap() as i64 * gap;
    room.apply(t(first_alive), &Event::NodeUp { spec: small_spot(1) });
    // Three days of work: it lives through many reclaims.
    let total = 3 * 86_400;
    let mut spec = job_spec(1, "nlp", 1);
    spec.steps_total = total;
    spec.gpu_mem = Mib(8000);
    let mut exec = Executor { pending: BTreeMap::new(), seq: 0, running_since: None };
    let fx = room.apply(t(first_alive), &Event::JobSubmitted { spec });
    exec.react(first_alive, &fx, total);

    // The trace's transitions, as the cloud would announce them.
    for (i, pair) in trace.samples.windows(2).enumerate() {
        let at = (i as i64 + 1) * gap;
        if at <= first_alive {
            continue;
        }
        match (pair[0] > 0, pair[1] > 0) {
            (true, false) => {
                exec.later(at - 120, Event::InterruptionNotice { node: NodeId(1), deadline: t(at) });
                exec.later(at, Event::NodeLost { node: NodeId(1), reason: "spot interruption".into() });
            }
            (false, true) => exec.later(at, Event::NodeUp { spec: small_spot(1) }),
            _ => {}
        }
    }
    let end = trace.samples.len() as i64 * gap;
    let mut next_telemetry = first_alive + 60;
    let mut hazard_after_notice = Vec::new();
    loop {
        let next_event = exec.pending.keys().next().map(|k| k.0);
        let now = match next_event {
            Some(at) if at <= next_telemetry => at,
            _ => next_telemetry,
        };
        if now > end || room.job(JobId(1)).is_some_and(|j| j.phase().is_terminal()) {
            break;
        }
        let event = if Some(now) == next_event {
            let key = *exec.pending.keys().next().unwrap();
            exec.pending.remove(&key).unwrap()
        } else {
            next_telemetry += 60;
            let progress = exec.steps(now).map(|s| vec![(JobId(1), s.min(total))]).unwrap_or_default();
            Event::Telemetry { gpus: vec![], progress }
        };
        if let Event::NodeLost { .. } = event {
            exec.running_since = None;
            exec.pending.retain(|_, e| !matches!(e, Event::JobExited { .. } | Event::CheckpointDone { .. } | Event::JobStopped { .. }));
        }
        let is_notice = matches!(event, Event::InterruptionNotice { .. });
        let fx = room.apply(t(now), &event);
        assert!(!rejected(&fx), "at {now}: {event:?} → {fx:?}");
        exec.react(now, &fx, total);
        if is_notice {
            hazard_after_notice.push(room.hazard().assess("p3.2xlarge", t(now), gpuroom::domain::units::Secs(0), 1).recent_events);
        }
    }

    let stats = room.stats().clone();
    let job = room.job(JobId(1)).unwrap();
    assert_eq!(job.phase(), Phase::Done, "the job finished inside the trace: {job:?}");
    assert!(stats.notices >= 20, "a real trace reclaims often: {stats:?}");
    // A 20 s save always fits the 2-minute notice; only the seconds between
    // the save and the stop are lost, never a whole interval.
    assert_eq!((stats.notice_saves_in_time, stats.notice_saves_missed), (stats.notices, 0));
    assert!(stats.lost_steps <= stats.notices * 30, "lost {} steps over {} notices", stats.lost_steps, stats.notices);
    assert_eq!(job.requeues as u64, stats.notices);
    // The watcher learned every reclaim live and saw each in its window.
    assert_eq!(room.hazard().get("p3.2xlarge").unwrap().live_lifetimes() as u64, stats.nodes_lost);
    assert!(hazard_after_notice.iter().all(|n| *n >= 1));
    println!(
        "trace replay: {} notices, {} saved in time, {} steps lost, {} checkpoints",
        stats.notices, stats.notice_saves_in_time, stats.lost_steps, stats.checkpoints
    );
}

fn spot_and_on_demand() -> Room {
    let mut room = Room::new(RoomConfig::default());
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("nlp", 8) });
    room.apply(t(0), &Event::PriceTick { zone: "us-west-2b".into(), instance_type: "p3.2xlarge".into(), price: MicrosPerHour(1_000_000) });
    room.apply(t(0), &Event::NodeUp { spec: small_spot(1) });
    let mut od = small_spot(2);
    od.billing = BillingMode::OnDemand;
    od.max_price = None;
    room.apply(t(0), &Event::NodeUp { spec: od });
    room
}

#[test]
fn a_price_jump_past_the_cap_saves_and_moves_the_job_off_the_pool() {
    let mut room = spot_and_on_demand();
    let mut spec = job_spec(1, "nlp", 1);
    spec.gpu_mem = Mib(8000);
    spec.pool = PoolPreference::Any;
    let fx = room.apply(t(1), &Event::JobSubmitted { spec });
    assert!(fx.iter().any(|e| matches!(e, Effect::StartJob { node: NodeId(1), .. })), "spot first (cheaper tier): {fx:?}");
    room.apply(t(60), &Event::JobStarted { job: JobId(1) });
    room.apply(t(120), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), 50)] });
    let risk = room.job(JobId(1)).unwrap().risk.clone().unwrap();
    let cap = risk.bid.unwrap().cap;
    assert!(cap > MicrosPerHour(1_000_000) && cap < MicrosPerHour(1_200_000), "early cap ≈ 1.1 × base: {cap}");
    // A small rise stays under the cap: nothing happens.
    let fx = room.apply(t(180), &Event::PriceTick { zone: "us-west-2b".into(), instance_type: "p3.2xlarge".into(), price: MicrosPerHour(1_040_000) });
    assert!(!fx.iter().any(|e| matches!(e, Effect::Checkpoint { .. })), "{fx:?}");
    // A jump past it: save, then stop, then the job goes to on-demand.
    let fx = room.apply(t(240), &Event::PriceTick { zone: "us-west-2b".into(), instance_type: "p3.2xlarge".into(), price: MicrosPerHour(1_500_000) });
    assert!(fx.iter().any(|e| matches!(e, Effect::Checkpoint { job: JobId(1), .. })), "{fx:?}");
    let fx = room.apply(t(250), &Event::CheckpointDone { job: JobId(1), step: 60, bytes: 1 << 30 });
    assert_eq!(fx, vec![Effect::StopJob { job: JobId(1) }]);
    let fx = room.apply(t(255), &Event::JobStopped { job: JobId(1) });
    assert!(fx.iter().any(|e| matches!(e, Effect::StartJob { job: JobId(1), node: NodeId(2), resume_step: 60, .. })), "{fx:?}");
    let stats = room.stats();
    assert_eq!((stats.price_moves, stats.migrations, stats.lost_steps), (1, 1, 0));
    assert!(room.view().log.iter().any(|l| l.text.contains("above its max price")));
}

#[test]
fn late_work_rides_out_a_jump_that_would_move_a_fresh_job() {
    let mut room = spot_and_on_demand();
    let mut spec = job_spec(1, "nlp", 1);
    spec.gpu_mem = Mib(8000);
    room.apply(t(1), &Event::JobSubmitted { spec });
    room.apply(t(60), &Event::JobStarted { job: JobId(1) });
    for (i, steps) in [(1, 300), (2, 600), (3, 900)] {
        room.apply(t(60 + i * 120), &Event::Telemetry { gpus: vec![], progress: vec![(JobId(1), steps)] });
    }
    let fx = room.apply(t(500), &Event::PriceTick { zone: "us-west-2b".into(), instance_type: "p3.2xlarge".into(), price: MicrosPerHour(1_500_000) });
    assert!(!fx.iter().any(|e| matches!(e, Effect::Checkpoint { .. } | Effect::StopJob { .. })), "90% done: the cap is high: {fx:?}");
    assert_eq!(room.job(JobId(1)).unwrap().phase(), Phase::Running);
}

#[test]
fn a_riskier_type_saves_more_often_and_bad_lifetimes_are_refused() {
    let interval_with = |lifetimes: Vec<Lifetime>| {
        let mut room = spot_and_on_demand();
        room.apply(t(0), &Event::SpotLifetimes { instance_type: "p3.2xlarge".into(), lifetimes });
        let mut spec = job_spec(1, "nlp", 1);
        spec.gpu_mem = Mib(8000);
        room.apply(t(1), &Event::JobSubmitted { spec });
        room.apply(t(60), &Event::JobStarted { job: JobId(1) });
        room.job(JobId(1)).unwrap().risk.clone().unwrap()
    };
    let life = |mins: i64| Lifetime { secs: gpuroom::domain::units::Secs(mins * 60), interrupted: true };
    let calm = interval_with((0..50).map(|i| life(600 + i)).collect());
    let risky = interval_with((0..50).map(|i| life(5 + i % 10)).collect());
    assert!(risky.p_next_minute > calm.p_next_minute, "{risky:?} vs {calm:?}");
    assert!(risky.interval < calm.interval, "{risky:?} vs {calm:?}");

    let mut room = spot_and_on_demand();
    let before = room.hazard().clone();
    let fx = room.apply(
        t(5),
        &Event::SpotLifetimes {
            instance_type: "p3.2xlarge".into(),
            lifetimes: vec![life(10), Lifetime { secs: gpuroom::domain::units::Secs(0), interrupted: true }],
        },
    );
    assert!(rejected(&fx), "{fx:?}");
    assert_eq!(room.hazard(), &before, "a refused batch changes nothing");
}
