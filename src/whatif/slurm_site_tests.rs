//! A small Slurm site recorded to a real SQLite log: 4 nodes of 4 GPUs (n1,
//! n2 spot; n3, n4 on demand), account a flooding the queue with sixteen
//! 2-GPU jobs, b arriving five minutes later with four, scheduled by a FIFO,
//! first-fit scheduler written here, and seen by a snapshot every 5 s. What
//! Slurm did is computed here from that schedule, independently of the
//! reader; the re-runs go through `whatif::compare` and the live model.

use super::*;
use crate::domain::cluster::BillingMode;
use crate::domain::slurm::{SlurmPartition, SlurmSnapshot};
use crate::domain::testkit::{node_spec, t, tenant_spec};
use crate::domain::units::MicrosPerHour;
use crate::store::RunMeta;
use crate::whatif::{Comparison, Model, Rerunner, Scenario, WhatIfError, compare};

const POLL: i64 = 5;
const END: i64 = 7200;

/// One job of the site: who, how many GPUs, when submitted, for how long.
#[derive(Clone)]
struct Planned {
    id: u64,
    account: &'static str,
    gpus: u32,
    submit: i64,
    secs: i64,
    fails: bool,
    /// Slurm's schedule: when and where it started.
    start: Option<(i64, usize)>,
}

fn flood() -> Vec<Planned> {
    let job = |id, account, submit, secs| Planned { id, account, gpus: 2, submit, secs, fails: false, start: None };
    let mut jobs: Vec<Planned> = (0..16).map(|i| job(100 + i, "a", i as i64, 1800 + 60 * (i as i64 % 5))).collect();
    jobs[3].fails = true;
    jobs.extend((0..4).map(|i| job(200 + i, "b", 300 + i as i64, 1200)));
    jobs
}

/// FIFO by submission, each job on the first node with room (exact times).
fn schedule(jobs: &mut [Planned], nodes: usize) {
    let mut free = vec![4u32; nodes];
    let mut running: Vec<(i64, usize, u32)> = Vec::new();
    let mut queue: Vec<usize> = Vec::new();
    let mut times: Vec<i64> = jobs.iter().map(|j| j.submit).collect();
    let mut now = 0;
    while let Some(&next) = times.iter().filter(|x| **x >= now).min() {
        now = next;
        running.retain(|(end, node, gpus)| {
            if *end <= now {
                free[*node] += gpus;
                false
            } else {
                true
            }
        });
        queue.extend((0..jobs.len()).filter(|i| jobs[*i].submit == now));
        while let Some(&head) = queue.first() {
            let Some(node) = (0..nodes).find(|n| free[*n] >= jobs[head].gpus) else { break };
            free[node] -= jobs[head].gpus;
            jobs[head].start = Some((now, node));
            running.push((now + jobs[head].secs, node, jobs[head].gpus));
            times.push(now + jobs[head].secs);
            queue.remove(0);
        }
        now += 1;
    }
}

fn slurm_job(p: &Planned, at: i64, names: &[String]) -> Option<SlurmJob> {
    let mut job = SlurmJob {
        id: p.id,
        name: format!("train{}", p.id),
        user: p.account.into(),
        account: p.account.into(),
        partition: "gpu".into(),
        gpus: p.gpus,
        submitted: Some(t(p.submit)),
        state: SlurmState::Pending,
        reason: "Priority".into(),
        ..Default::default()
    };
    match p.start {
        Some((start, node)) if at >= start => {
            let end = start + p.secs;
            // squeue shows an ended job for one poll (a success only some of the time), then never.
            if at >= end + POLL || (at >= end && !p.fails && p.id % 2 == 1) {
                return None;
            }
            job.state = if at < end {
                SlurmState::Running
            } else if p.fails {
                SlurmState::Failed
            } else {
                SlurmState::Completed
            };
            job.started = Some(t(start));
            job.nodes = vec![names[node].clone()];
        }
        _ => {}
    }
    Some(job)
}

fn snapshot(at: i64, jobs: &[Planned], names: &[String], extra: &[SlurmJob]) -> Event {
    let nodes = names.iter().enumerate().map(|(i, name)| SlurmNode {
        name: name.clone(),
        state: "mixed".into(),
        gpus: 4,
        node: Some(NodeId(i as u32 + 1)),
        partitions: vec!["gpu".into()],
        ..Default::default()
    });
    let mut seen: Vec<SlurmJob> = jobs.iter().filter(|p| p.submit <= at).filter_map(|p| slurm_job(p, at, names)).collect();
    seen.extend(extra.iter().cloned());
    let partitions = vec![SlurmPartition { name: "gpu".into(), state: "UP".into(), nodes: names.to_vec(), default: true }];
    Event::Slurm { snapshot: SlurmSnapshot { cluster: "site".into(), version: "23.02".into(), partitions, nodes: nodes.collect(), jobs: seen } }
}

/// The site's log: a defined (a's), b left to the reader; a job with no
/// submit time and one larger than any node, both waiting throughout.
fn record(path: &std::path::Path, jobs: &[Planned], extra: &[SlurmJob]) -> Vec<String> {
    let mut store =
        Store::create(path, &RunMeta { room_config: RoomConfig::default(), source: "slurm".into(), created_with: "test".into(), world: None }).unwrap();
    let names: Vec<String> = (1..=4).map(|i| format!("n{i}")).collect();
    store.begin().unwrap();
    let mut a = tenant_spec("a", 16);
    a.borrow_limit_gpus = 16;
    store.append(t(0), &Event::TenantDefined { spec: a }).unwrap();
    let price = MicrosPerHour(7_200_000);
    store.append(t(0), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price }).unwrap();
    for (i, name) in names.iter().enumerate() {
        let mut spec = node_spec(i as u32 + 1, if i < 2 { BillingMode::Spot } else { BillingMode::OnDemand }, 4);
        spec.name = name.clone();
        store.append(t(0), &Event::NodeUp { spec }).unwrap();
    }
    for at in (0..=END).step_by(POLL as usize) {
        store.append(t(at), &snapshot(at, jobs, &names, extra)).unwrap();
    }
    store.commit().unwrap();
    names
}

fn pending(id: u64, gpus: u32, submitted: Option<At>) -> SlurmJob {
    let state = SlurmState::Pending;
    SlurmJob { id, account: "b".into(), partition: "gpu".into(), gpus, submitted, state, ..Default::default() }
}

fn scenario(name: &str, discipline: DisciplineKind, fit: FitPolicy) -> Scenario {
    let mut config = RoomConfig::default();
    (config.sched.discipline, config.sched.fit) = (discipline, fit);
    Scenario { name: name.into(), config, fleet: None }
}

fn site_log() -> (tempfile::TempDir, std::path::PathBuf, Vec<Planned>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("site.db");
    let mut jobs = flood();
    schedule(&mut jobs, 4);
    record(&db, &jobs, &[pending(900, 8, Some(t(60))), pending(901, 1, None)]);
    (dir, db, jobs)
}

fn run(db: &std::path::Path, scenarios: &[Scenario]) -> Result<Comparison, WhatIfError> {
    let name = db.file_name().unwrap().to_string_lossy();
    compare(&Store::open_read_only(db).unwrap(), &name, scenarios, Window::default(), Model::Auto, &mut |_| {})
}

fn mean(w: &[i64]) -> f64 {
    w.iter().sum::<i64>() as f64 / w.len().max(1) as f64
}

#[test]
fn the_recorded_column_is_what_slurm_did_and_the_fifo_model_lands_close_to_it() {
    let (_dir, db, jobs) = site_log();
    // What the schedule says: a wait is start - submit; an end is the last poll that saw it running.
    let mut waits: Vec<i64> = jobs.iter().map(|p| p.start.unwrap().0 - p.submit).collect();
    waits.sort_unstable();
    let last_seen = |p: &Planned| {
        let end = p.start.unwrap().0 + p.secs;
        (end - 1) / POLL * POLL
    };
    let finished: Vec<&Planned> = jobs.iter().filter(|p| !p.fails).collect();
    let jct: i64 = finished.iter().map(|p| last_seen(p) - p.submit).sum();
    assert!(jobs.iter().all(|p| p.start.unwrap().0 + p.secs + POLL <= END), "every job ends inside the log");

    let fifo = scenario("fifo", DisciplineKind::Fifo, FitPolicy::FirstFit);
    let c = run(&db, &[fifo, scenario("drf", DisciplineKind::Drf, FitPolicy::BestFit)]).unwrap();
    let slurm = &c.columns[0].outcome;
    assert_eq!(slurm.waits, waits);
    assert_eq!((slurm.submitted, slurm.finished, slurm.failed, slurm.queued_at_end, slurm.requeues), (20, 19, 1, 0, 0));
    assert_eq!((slurm.jct_count, slurm.jct_secs_sum), (19, jct));
    assert!(slurm.spend().0 > 0 && !slurm.spend_by_tenant.is_empty(), "the recorded room's ledger charged the Slurm jobs: {slurm:?}");
    assert_eq!(c.model, MODEL);

    let model = &c.columns[1].outcome;
    let (s, m) = (slurm.mean_wait_secs().unwrap(), model.mean_wait_secs().unwrap());
    assert!((m - s).abs() < 0.05 * s, "FIFO model mean wait {m} s against Slurm's {s} s");
    let (s, m) = (slurm.mean_jct_secs().unwrap(), model.mean_jct_secs().unwrap());
    assert!((m - s).abs() < 0.02 * s, "FIFO model JCT {m} s against Slurm's {s} s");
    assert_eq!((model.submitted, model.finished, model.failed), (20, 19, 1));
    assert_eq!(model.spend(), slurm.spend(), "the same nodes, up as long, at the same prices");
    let note = c.notes.iter().find(|n| n.starts_with("model error against what Slurm did")).expect("the model's error is stated");
    assert!(note.contains("mean wait") && note.contains("P95 wait") && note.contains("mean JCT") && note.contains("instance spend"), "{note}");
    assert!(c.notes.iter().any(|n| n.contains("1 no submit time") && n.contains("1 larger than any node")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.starts_with("mean queue wait by account (recorded · fifo · drf): a ")), "{:?}", c.notes);
    eprintln!("{}", c.render(crate::whatif::Format::Text));
}

#[test]
fn drf_gives_the_account_that_came_late_a_shorter_wait_than_slurms_fifo() {
    let (_dir, db, _) = site_log();
    let store = Store::open_read_only(&db).unwrap();
    let first = store.first_event_at().unwrap().unwrap();
    let horizon = store.last_event_before(None).unwrap().unwrap();
    let site = read(&store, &RoomConfig::default(), Window::default(), first, &mut |_| {}).unwrap().unwrap();
    for d in [DisciplineKind::Drf, DisciplineKind::Fifo] {
        let s = scenario(d.name(), d, FitPolicy::BestFit);
        Rerunner::Site(&site).run(&s, first, horizon, Window::default(), &mut |_| {}).unwrap();
    }
    let kept = site.rerun_waits.lock().unwrap();
    let (slurm_b, drf_b, fifo_b) = (mean(&site.slurm_waits["b"]), mean(&kept["drf"]["b"]), mean(&kept["fifo"]["b"]));
    eprintln!("b's mean wait: Slurm {slurm_b:.0} s, FIFO model {fifo_b:.0} s, DRF {drf_b:.0} s");
    assert!(drf_b < 0.7 * slurm_b, "DRF puts b ahead of a's backlog: {drf_b} s against Slurm's {slurm_b} s");
    assert!((fifo_b - slurm_b).abs() < 0.05 * slurm_b, "FIFO on the model waits as Slurm did: {fifo_b} against {slurm_b}");
}

#[test]
fn a_site_with_no_gpu_job_is_a_clear_error_and_a_room_log_is_not_a_site() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cpu.db");
    let cpu = SlurmJob { id: 1, account: "a".into(), gpus: 0, state: SlurmState::Running, submitted: Some(t(0)), ..Default::default() };
    record(&db, &[], &[cpu]);
    let err = run(&db, &[scenario("drf", DisciplineKind::Drf, FitPolicy::BestFit)]).unwrap_err().to_string();
    assert!(err.contains("cpu.db") && err.contains("no GPU job"), "{err}");
    assert!(!has_room_jobs(&Store::open_read_only(&db).unwrap()).unwrap());
    let only_unusable = dir.path().join("unusable.db");
    record(&only_unusable, &[], &[pending(5, 2, None)]);
    let err = run(&only_unusable, &[]).unwrap_err().to_string();
    assert!(err.contains("none of its 1 Slurm GPU jobs") && err.contains("no submit time"), "{err}");
}

#[test]
fn a_submission_is_the_kind_the_routing_looks_for() {
    let spec = crate::domain::testkit::job_spec(1, "a", 1);
    assert_eq!([Event::JobSubmitted { spec: spec.clone() }.kind(), Event::JobsSubmitted { specs: vec![spec] }.kind()], ["submit", "submit-batch"]);
}

/// Snapshots by hand: a job requeued once, and a spot node drained for an
/// interruption, lost at its deadline and back later.
#[test]
fn a_requeue_and_a_spot_drain_are_read_as_they_happened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("drain.db");
    let names: Vec<String> = (1..=4).map(|i| format!("n{i}")).collect();
    record(&db, &[], &[]);
    let mut store = Store::open_for_writing(&db).unwrap();
    let job = |state: SlurmState, restarts: u32, started: Option<i64>| SlurmJob {
        id: 7,
        account: "a".into(),
        gpus: 1,
        state,
        restarts,
        submitted: Some(t(0)),
        started: started.map(t),
        nodes: if started.is_some() { vec!["n1".into()] } else { vec![] },
        ..Default::default()
    };
    let deadline = t(END + 200);
    let drained = crate::domain::spot_drain::reason("terminate", Some(deadline));
    let steps: [(i64, Option<SlurmJob>, &str, &str); 6] = [
        (END + 10, Some(job(SlurmState::Running, 0, Some(END + 5))), "mixed", ""),
        (END + 100, Some(job(SlurmState::Preempted, 1, None)), "idle+drain", drained.as_str()),
        (END + 300, Some(job(SlurmState::Pending, 1, None)), "down+drain", drained.as_str()),
        (END + 400, Some(job(SlurmState::Running, 1, Some(END + 390))), "idle", ""),
        (END + 1000, Some(job(SlurmState::Running, 1, Some(END + 390))), "mixed", ""),
        (END + 1010, None, "idle", ""),
    ];
    for (at, job, state, reason) in steps {
        let Event::Slurm { mut snapshot } = snapshot(at, &[], &names, &job.into_iter().collect::<Vec<_>>()) else { unreachable!() };
        (snapshot.nodes[0].state, snapshot.nodes[0].reason) = (state.into(), reason.into());
        store.append(t(at), &Event::Slurm { snapshot }).unwrap();
    }
    drop(store);
    let store = Store::open_read_only(&db).unwrap();
    let site = read(&store, &RoomConfig::default(), Window::default(), t(0), &mut |_| {}).unwrap().unwrap();
    let o = &site.recorded.actual;
    assert_eq!((o.requeues, o.finished, o.waits.clone(), o.interruptions), (1, 1, vec![END + 5], 1));
    assert_eq!(o.jct_secs_sum, END + 1000, "ends when last seen running");
    let observed = &site.recorded.jobs[&JobId(7)];
    assert_eq!(observed.spec.steps_total, (610.0 - MODEL_STARTUP_SECS).round() as u64, "the last run's length, less the model's start");
    let n1: Vec<(i64, &str)> = (site.recorded.exogenous.iter())
        .filter_map(|(at, logged)| match logged {
            Logged::Event(Event::NodeUp { spec }) if spec.id == NodeId(1) => Some(((*at - t(0)).num_seconds(), "up")),
            Logged::Event(Event::InterruptionNotice { node: NodeId(1), deadline: d }) if *d == deadline => Some(((*at - t(0)).num_seconds(), "notice")),
            Logged::Event(Event::NodeLost { node: NodeId(1), .. }) => Some(((*at - t(0)).num_seconds(), "lost")),
            _ => None,
        })
        .collect();
    assert_eq!(n1, [(0, "up"), (END + 100, "notice"), (END + 200, "lost"), (END + 400, "up")]);
}
