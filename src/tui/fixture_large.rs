//! A large `View` for rendering benchmarks and scale tests, built through the
//! real core (`Room::apply`, `Room::view`): four tenants with budgets, a fleet
//! of `gpus` GPUs on reserved, on-demand and spot nodes of 8 and 1 GPUs (the
//! instance types, prices and zones of `fixtures/sim/default.toml`), six spot
//! pools with moving prices, telemetry for every GPU, and `jobs` jobs
//! submitted over six simulated hours, so that at 10,000 jobs on 1,000 GPUs
//! most wait, a few hundred run and some have finished. Everything is played
//! the way an executor would: placed jobs start, saves land at once, stops
//! happen, jobs exit when their work is done.
//!
//! `telemetry_step` moves the room on by `STEP_SECS` (one view of the
//! console at the default speed: ×60, 4 views/s) with fresh utilizations,
//! progress and the jobs that end, so a benchmark gets a steady stream of
//! changing views.
//!
//! Deterministic: the same arguments give the same room. Owns nothing the
//! product runs on; it must not reach into `Room` internals, only
//! `Room::apply` and `Room::view` (and the read-only accessors).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::{GpuSample, TenantSpec};
use crate::domain::ids::{GpuRef, JobId, NodeId, TenantId};
use crate::domain::job::{JobClass, JobSpec, Phase, PoolPreference, Tags};
use crate::domain::testkit::t;
use crate::domain::units::{At, Mib, Micros, MicrosPerHour, Secs};
use crate::domain::{Effect, Event};
use crate::room::{Room, View};

/// Simulated seconds between two views at the default speed (×60, 4 views/s).
pub const STEP_SECS: i64 = 15;

/// Simulated hours the build covers.
const HOURS: i64 = 6;

/// Seconds between two rounds of the build (telemetry, prices, arrivals).
const ROUND_SECS: i64 = 600;

/// Name, share of the jobs and of the quotas, budget in cents per GPU of the
/// fleet per month, projects, models.
type TenantDef = (&'static str, u32, i64, [&'static str; 3], [&'static str; 3]);

const TENANTS: [TenantDef; 4] = [
    ("nlp", 40, 90_000, ["llm-pretrain", "qa-finetune", "summarize"], ["gpt2-xl", "bert-large", "t5-base"]),
    ("vision", 30, 70_000, ["detector", "segmentation", "ocr"], ["resnet50", "vit-b16", "yolov5"]),
    ("recsys", 20, 40_000, ["ranker", "ctr-eval", "retrieval"], ["dlrm", "two-tower", "din"]),
    // A small budget: past 80% within the six hours.
    ("speech", 10, 110, ["asr", "tts", "diarize"], ["whisper-l", "conformer", "fastspeech2"]),
];

/// (instance type, GPU model, GPUs, GPU MiB, CPUs, host MiB, on-demand $/h,
/// reserved $/h, spot $/h in us-west-2b) as in `fixtures/sim/default.toml`.
type TypeDef = (&'static str, &'static str, u8, u32, u32, u32, i64, i64, i64);

const P3_16XL: TypeDef = ("p3.16xlarge", "V100-16GB", 8, 16_384, 64, 499_712, 24_480_000, 15_910_000, 7_344_000);
const P2_8XL: TypeDef = ("p2.8xlarge", "K80-12GB", 8, 12_288, 32, 499_712, 7_200_000, 4_680_000, 2_160_000);
const P3_2XL: TypeDef = ("p3.2xlarge", "V100-16GB", 1, 16_384, 8, 62_464, 3_060_000, 1_990_000, 918_000);

const ZONES: [&str; 2] = ["us-west-2b", "us-west-2c"];

/// splitmix64: a small, portable, seeded hash for the fixture's choices.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A uniform number in [0, 1) from `seed` and two keys.
pub(super) fn unit(seed: u64, a: u64, b: u64) -> f64 {
    (mix(seed ^ mix(a ^ mix(b))) >> 11) as f64 / (1u64 << 53) as f64
}

/// Feeds `event` at `at` and plays the executor for every effect: starts
/// what is placed, saves at once what is asked to save, stops what is asked
/// to stop. Returns the time spent in `Room::apply` (for the benchmarks).
fn feed(room: &mut Room, at: At, event: Event) -> Duration {
    play(room, at, event).0
}

/// `feed`, also counting the jobs the room started (for the benchmarks).
pub fn play(room: &mut Room, at: At, event: Event) -> (Duration, u64) {
    let mut pending = VecDeque::from([event]);
    let mut applying = Duration::ZERO;
    let mut starts = 0;
    while let Some(event) = pending.pop_front() {
        let started = Instant::now();
        let effects = room.apply(at, &event);
        applying += started.elapsed();
        for effect in effects {
            match effect {
                Effect::StartJob { job, .. } => {
                    starts += 1;
                    pending.push_back(Event::JobStarted { job });
                }
                Effect::Checkpoint { job, .. } => {
                    let (step, bytes) = room.job(job).map_or((0, 0), |j| (j.steps_done, u64::from(j.spec.checkpoint_size.0) << 20));
                    pending.push_back(Event::CheckpointDone { job, step, bytes });
                }
                Effect::StopJob { job } => pending.push_back(Event::JobStopped { job }),
                _ => {}
            }
        }
    }
    (applying, starts)
}

/// How long a job really runs: its estimate × 0.5–1.3 (from its id), so
/// backfill's estimates are off the way users' are.
fn actual_secs(spec: &JobSpec) -> f64 {
    let est = spec.est_runtime.map_or(3600, |s| s.0) as f64;
    est * (0.5 + 0.8 * unit(0, spec.id.0, 1))
}

/// Steps per second of a running job.
fn rate(spec: &JobSpec) -> f64 {
    spec.steps_total as f64 / actual_secs(spec).max(1.0)
}

/// Mean utilization of a job on each of its GPUs (12–98%, from its id).
fn base_util(job: JobId, class: JobClass) -> f64 {
    let u = unit(0, job.0, 2);
    match class {
        JobClass::Training | JobClass::FineTune => 55.0 + 43.0 * u,
        JobClass::Eval => 25.0 + 50.0 * u,
        JobClass::BatchInference => 12.0 + 40.0 * u,
    }
}

/// One telemetry round at `at`: every GPU of the up nodes (utilization moving
/// ±6 points with `k`, memory in use swinging like training does) and the
/// progress of every running job; jobs whose work is done exit first.
fn round(room: &mut Room, at: At, dt: f64, k: u64) -> Duration {
    let mut applying = Duration::ZERO;
    let mut exits = Vec::new();
    let mut progress = Vec::new();
    for job in room.jobs() {
        if !matches!(job.phase(), Phase::Running | Phase::Checkpointing) {
            continue;
        }
        let next = job.steps_done as f64 + rate(&job.spec) * dt;
        if next >= job.spec.steps_total as f64 && job.phase() == Phase::Running {
            exits.push((job.spec.id, unit(0, job.spec.id.0, 3) >= 0.03));
        } else {
            progress.push((job.spec.id, (next as u64).min(job.spec.steps_total - 1)));
        }
    }
    for (job, ok) in exits {
        let message = if ok { String::new() } else { "CUDA out of memory".into() };
        applying += feed(room, at, Event::JobExited { job, ok, message });
    }
    let mut gpus = Vec::new();
    let phase = at.timestamp() as f64 / 600.0;
    for node in room.nodes().filter(|n| n.is_up()) {
        for gpu in &node.gpus {
            let gpu_ref = GpuRef { node: node.spec.id, index: gpu.index };
            let wobble = 12.0 * (unit(k, u64::from(node.spec.id.0), u64::from(gpu.index)) - 0.5);
            let mut util = 0.0;
            let mut used = 0.0;
            for a in &gpu.allocations {
                let Some(job) = room.job(a.job) else { continue };
                util += base_util(a.job, job.spec.class) + wobble;
                let swing = 0.78 + 0.2 * (phase + unit(0, a.job.0, 4) * std::f64::consts::TAU).sin();
                used += f64::from(a.size.0.min(job.spec.gpu_mem.0.max(1))) * swing;
            }
            let util = (util.clamp(0.0, 100.0) * 10.0).round() as f32 / 10.0;
            gpus.push(GpuSample(gpu_ref, util, Mib((used as u32).min(gpu.memory.0))));
        }
    }
    progress.retain(|(id, _)| room.job(*id).is_some_and(|j| matches!(j.phase(), Phase::Running | Phase::Checkpointing)));
    applying + feed(room, at, Event::Telemetry { gpus, progress })
}

fn node(id: u32, ty: &TypeDef, billing: BillingMode, zone: &str, max_price: Option<i64>) -> NodeSpec {
    let &(name, model, gpus, mem, cpus, host, on_demand, reserved, _) = ty;
    NodeSpec {
        id: NodeId(id),
        name: format!("n{id:03}"),
        instance_type: name.into(),
        zone: zone.into(),
        billing,
        gpu_model: model.into(),
        gpu_count: gpus,
        gpu_memory: Mib(mem),
        mig_capable: false,
        cpus,
        host_memory: Mib(host),
        on_demand_price: MicrosPerHour(on_demand),
        contract_price: MicrosPerHour(if billing == BillingMode::Reserved { reserved } else { on_demand }),
        max_price: (billing == BillingMode::Spot).then_some(MicrosPerHour(max_price.unwrap_or(on_demand))),
        mig_slices: Vec::new(),
        mig_gpus: 0,
    }
}

/// The fleet: about 11/12 of the GPUs on 8-GPU nodes (three p3.16xlarge to
/// one p2.8xlarge; 2 reserved, 1 on-demand, 2 spot in 5), the rest on 1-GPU
/// p3.2xlarge (1 on-demand, 2 spot in 3), both zones. Some spot nodes carry
/// a max price below on-demand, so the market can pass it.
fn fleet(gpus: usize) -> Vec<NodeSpec> {
    let eights = gpus * 11 / 12 / 8;
    let singles = gpus - eights * 8;
    let mut specs = Vec::with_capacity(eights + singles);
    for i in 0..eights {
        let ty = if i % 4 == 3 { &P2_8XL } else { &P3_16XL };
        let billing = [BillingMode::Reserved, BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Spot, BillingMode::Spot][i % 5];
        let max = (i % 7 == 3).then_some(ty.8 * 11 / 10);
        specs.push(node(specs.len() as u32 + 1, ty, billing, ZONES[i % 2], max));
    }
    for i in 0..singles {
        let billing = [BillingMode::OnDemand, BillingMode::Spot, BillingMode::Spot][i % 3];
        specs.push(node(specs.len() as u32 + 1, &P3_2XL, billing, ZONES[(i / 3) % 2], None));
    }
    specs
}

/// The spot price of a pool in round `r`: a seeded walk of ±4% a round
/// around the type's price (us-west-2c 6% dearer).
fn spot_price(seed: u64, pool: usize, r: i64) -> MicrosPerHour {
    let ty = [&P3_16XL, &P2_8XL, &P3_2XL][pool % 3];
    let zone = if pool / 3 == 1 { 1.06 } else { 1.0 };
    let mut level = 1.0;
    for step in 0..=r {
        level *= 1.0 + 0.08 * (unit(seed, pool as u64 + 100, step as u64) - 0.5);
        level = level.clamp(0.8, 1.25);
    }
    MicrosPerHour((ty.8 as f64 * zone * level / 1000.0).round() as i64 * 1000)
}

fn price_ticks(room: &mut Room, seed: u64, at: At, r: i64) {
    for pool in 0..6 {
        let ty = [&P3_16XL, &P2_8XL, &P3_2XL][pool % 3];
        let event = Event::PriceTick { zone: ZONES[pool / 3].into(), instance_type: ty.0.into(), price: spot_price(seed, pool, r) };
        feed(room, at, event);
    }
}

/// Job `n` (1-based): its tenant by share, its size (half 1-GPU, of them
/// 40% sharing a GPU; 2, 4 and 8 GPUs for the rest), class, pool preference
/// and an estimate of 20 minutes to 2 days.
pub fn job(seed: u64, n: u64) -> JobSpec {
    let u = |salt: u64| unit(seed, n, salt + 10);
    let pick = (u(0) * 100.0) as u32;
    let mut acc = 0;
    let tenant = TENANTS.iter().find(|t| {
        acc += t.1;
        pick < acc
    });
    let (tenant, _, _, projects, models) = tenant.unwrap_or(&TENANTS[0]);
    let size = u(1);
    let (gpus, exclusive) = match size {
        s if s < 0.20 => (1, false),
        s if s < 0.50 => (1, true),
        s if s < 0.65 => (2, true),
        s if s < 0.80 => (4, true),
        _ => (8, true),
    };
    let class = if !exclusive {
        if u(2) < 0.5 { JobClass::Eval } else { JobClass::BatchInference }
    } else if u(2) < 0.3 {
        JobClass::FineTune
    } else {
        JobClass::Training
    };
    let pool = match u(3) {
        p if p < 0.10 => PoolPreference::NoSpot,
        p if p < 0.30 && !exclusive => PoolPreference::SpotOnly,
        _ => PoolPreference::Any,
    };
    // Log-uniform between 20 minutes and 2 days.
    let est = (1200.0 * (172_800.0f64 / 1200.0).powf(u(4))).round() as i64;
    let project = projects[(u(5) * 3.0) as usize % 3];
    let model = models[(u(6) * 3.0) as usize % 3];
    let gpu_mem = if exclusive { 9_000 + (u(7) * 3_000.0) as u32 } else { 2_000 + (u(7) * 6_000.0) as u32 };
    JobSpec {
        id: JobId(n),
        name: format!("{model}-{project}-{n}"),
        tags: Tags {
            tenant: TenantId((*tenant).into()),
            project: project.into(),
            env: ["research", "staging", "prod"][(u(8) * 3.0) as usize % 3].into(),
            model: model.into(),
        },
        class,
        gpus,
        gpu_mem: Mib(gpu_mem),
        exclusive,
        steps_total: 1_000 + (u(9) * 19_000.0) as u64,
        priority: (u(10) * 5.0) as i32,
        pool,
        checkpoint_size: Mib(if exclusive { 2048 * u32::from(gpus) } else { 512 }),
        cpus: 4 * u32::from(gpus),
        host_mem: Mib(16_384 * u32::from(gpus)),
        est_runtime: Some(Secs(est)),
        gpu_models: Vec::new(),
    }
}

/// The room behind `large_view`: `gpus` GPUs, `jobs` jobs submitted over six
/// simulated hours from 2020-01-06 00:00 (a tenth of them at once, the rest
/// in rounds of ten minutes), `seed` choosing sizes, tenants and prices.
pub fn large_room(gpus: usize, jobs: usize, seed: u64) -> Room {
    let tenants = TENANTS
        .iter()
        .map(|(name, share, cents_per_gpu, ..)| TenantSpec {
            id: TenantId((*name).into()),
            quota_gpus: (gpus as u32 * share).div_ceil(100),
            monthly_budget: Micros(cents_per_gpu * gpus as i64 * 10_000),
            quota_gpu_mem: Mib(0),
            borrow_limit_gpus: (gpus as u32).div_ceil(10),
        })
        .collect();
    let ticks = |room: &mut Room, at: At, r: i64| price_ticks(room, seed, at, r);
    grow(Recipe { tenants, fleet: fleet(gpus), jobs, job: &|n| job(seed, n), ticks: &ticks })
}

/// What a fixture room is grown from.
pub(super) struct Recipe<'a> {
    pub tenants: Vec<TenantSpec>,
    pub fleet: Vec<NodeSpec>,
    /// How many jobs are submitted, and job `n` (1-based).
    pub jobs: usize,
    pub job: &'a dyn Fn(u64) -> JobSpec,
    /// The market's moves at the start of round `r` (round 0 before the nodes).
    pub ticks: &'a dyn Fn(&mut Room, At, i64),
}

/// Six simulated hours of `recipe` through `Room::apply` from 2020-01-06
/// 00:00: a tenth of the jobs at once, the rest in rounds of ten minutes,
/// telemetry and progress every round, as an executor would play them.
pub(super) fn grow(recipe: Recipe<'_>) -> Room {
    let Recipe { tenants, fleet, jobs, job, ticks } = recipe;
    let mut room = Room::default();
    let at0 = t(0);
    for spec in tenants {
        feed(&mut room, at0, Event::TenantDefined { spec });
    }
    ticks(&mut room, at0, 0);
    for spec in fleet {
        feed(&mut room, at0, Event::NodeUp { spec });
    }
    let rounds = HOURS * 3600 / ROUND_SECS;
    let first = jobs / 10;
    let per_round = (jobs - first).div_ceil(rounds as usize).max(1);
    let mut next = 1u64;
    // Each round's arrivals come as one batch, the way a sweep is submitted.
    let mut submit = |room: &mut Room, at: At, count: usize| {
        let mut specs = Vec::with_capacity(count);
        while specs.len() < count && next as usize <= jobs {
            specs.push(job(next));
            next += 1;
        }
        if !specs.is_empty() {
            feed(room, at, Event::JobsSubmitted { specs });
        }
    };
    submit(&mut room, t(60), first);
    for r in 1..=rounds {
        let at = t(r * ROUND_SECS);
        ticks(&mut room, at, r);
        round(&mut room, at, ROUND_SECS as f64, r as u64);
        submit(&mut room, at + chrono::TimeDelta::seconds(1), per_round);
    }
    // Fresh samples for every GPU, as of the end.
    let end = t(rounds * ROUND_SECS + 30);
    round(&mut room, end, 30.0, rounds as u64 + 1);
    room
}

/// The console's `View` of `large_room(gpus, jobs, seed)`.
pub fn large_view(gpus: usize, jobs: usize, seed: u64) -> View {
    large_room(gpus, jobs, seed).view()
}

/// Moves the room on by `STEP_SECS`: jobs whose work is done exit (and the
/// queue moves), then one telemetry event with utilizations changed by `k`
/// and every running job's progress. A spot price moves every 20th step.
/// Returns the time spent in `Room::apply`, not in making the events.
pub fn telemetry_step(room: &mut Room, k: u64) -> Duration {
    let at = room.now().unwrap_or_else(|| t(0)) + chrono::TimeDelta::seconds(STEP_SECS);
    if k.is_multiple_of(20) {
        let pool = (k / 20 % 6) as usize;
        let ty = [&P3_16XL, &P2_8XL, &P3_2XL][pool % 3];
        let r = HOURS * 3600 / ROUND_SECS + (k / 20) as i64;
        let price = Event::PriceTick { zone: ZONES[pool / 3].into(), instance_type: ty.0.into(), price: spot_price(7, pool, r) };
        return feed(room, at, price) + round(room, at, STEP_SECS as f64, 1_000_000 + k);
    }
    round(room, at, STEP_SECS as f64, 1_000_000 + k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::budget::BudgetLevel;

    #[test]
    fn a_small_large_room_has_what_the_benchmark_needs() {
        let v = large_view(120, 600, 1);
        let gpus: usize = v.nodes.iter().map(|n| n.gpus.len()).sum();
        assert_eq!(gpus, 120);
        for mode in BillingMode::ALL {
            assert!(v.nodes.iter().any(|n| n.billing == mode), "{mode:?} nodes");
        }
        assert!(v.nodes.iter().any(|n| n.gpus.len() == 1) && v.nodes.iter().any(|n| n.gpus.len() == 8));
        assert!(v.nodes.iter().filter(|n| n.up).flat_map(|n| &n.gpus).all(|g| g.util.is_some()), "every GPU sampled");
        assert_eq!(v.market.len(), 6);
        assert!(v.market.iter().all(|m| m.price.is_some()));
        assert_eq!(v.budgets.len(), 4);
        assert!(v.budgets.iter().any(|b| b.level != BudgetLevel::Ok), "a tenant past 80%");
        assert_eq!(v.totals.stats.submitted, 600);
        assert!(v.queue.depth > 300, "most wait: {}", v.queue.depth);
        assert!(v.queue.running > 20, "some run: {}", v.queue.running);
        assert!(v.totals.stats.done > 0, "some finished");
    }

    #[test]
    fn it_is_deterministic_and_steps_change_the_view() {
        let mut a = large_room(40, 200, 3);
        let b = large_room(40, 200, 3);
        assert_eq!(a.view(), b.view());
        let before = a.view();
        telemetry_step(&mut a, 1);
        let after = a.view();
        assert_eq!(after.at, before.at.map(|at| at + chrono::TimeDelta::seconds(STEP_SECS)));
        let utils = |v: &View| v.nodes.iter().flat_map(|n| n.gpus.iter().map(|g| g.util)).collect::<Vec<_>>();
        assert_ne!(utils(&before), utils(&after));
        assert_ne!(large_room(40, 200, 4).view(), b.view(), "the seed matters");
    }
}
