//! One full scheduling pass with a long queue on a big, full cluster: 10,000
//! GPUs (1,250 nodes × 8) all busy, and 1k / 10k / 100k jobs queued (sizes
//! from the Philly trace), under each discipline. The pass is triggered by one
//! job ending, as in operation. Prints time per pass and jobs considered per
//! second; asserts nothing about time.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gpuroom::domain::Effect;
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::Event;
use gpuroom::domain::ids::JobId;
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Mib, Secs};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sched::{DisciplineKind, SchedConfig};
use gpuroom::sim::Traces;

const NODES: u32 = 1250;

fn full_cluster(queued: usize, discipline: DisciplineKind) -> Room {
    let mut room = Room::new(RoomConfig { sched: SchedConfig { discipline, ..SchedConfig::default() }, ..RoomConfig::default() });
    // Quotas cover what each holds: no borrowing, so no reclaim in the pass.
    for (i, name) in ["nlp", "vision", "recsys"].iter().enumerate() {
        let mut spec = tenant_spec(name, [4000, 4000, 4000][i]);
        spec.borrow_limit_gpus = 10_000;
        room.apply(t(0), &Event::TenantDefined { spec });
    }
    for n in 1..=NODES {
        let billing = [BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Reserved, BillingMode::OnDemand][n as usize % 4];
        room.apply(t(0), &Event::NodeUp { spec: node_spec(n, billing, 8) });
    }
    // Fill every GPU: one 8-GPU job per node, started.
    let tenants = ["nlp", "vision", "recsys"];
    let mut started = Vec::new();
    for n in 0..u64::from(NODES) {
        let mut spec = job_spec(n + 1, tenants[n as usize % 3], 8);
        spec.est_runtime = Some(Secs(3600 + (n as i64 % 50) * 600));
        for e in room.apply(t(1), &Event::JobSubmitted { spec }) {
            if let Effect::StartJob { job, .. } = e {
                started.push(job);
            }
        }
    }
    for job in started {
        room.apply(t(2), &Event::JobStarted { job });
    }
    // The queue: job sizes and durations from the Philly trace.
    let philly = Traces::embedded().unwrap().philly;
    for i in 0..queued {
        let row = &philly[i % philly.len()];
        let id = 1_000_000 + i as u64;
        let mut spec = job_spec(id, tenants[i % 3], row.gpus.clamp(1, 8) as u8);
        spec.gpu_mem = Mib(8000 + (i as u32 % 8) * 1000);
        spec.est_runtime = Some(Secs(row.duration.0.max(60) * 2));
        spec.priority = (i % 5) as i32;
        room.apply(t(3), &Event::JobSubmitted { spec });
    }
    room
}

fn pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling pass on 10,000 busy GPUs");
    group.sample_size(10);
    for discipline in DisciplineKind::ALL {
        for queued in [1_000usize, 10_000, 100_000] {
            let room = full_cluster(queued, discipline);
            assert_eq!(room.view().queue.depth as usize, queued);
            group.throughput(Throughput::Elements(queued as u64));
            let name = discipline.discipline().name();
            group.bench_with_input(BenchmarkId::new(name, queued), &room, |b, room| {
                b.iter_batched(
                    || room.clone(),
                    // One 8-GPU job ends: its node frees up and the pass walks the whole queue.
                    // The room is returned so that dropping it is not timed.
                    |mut room| {
                        let effects = room.apply(t(60), &Event::JobExited { job: JobId(7), ok: true, message: String::new() });
                        (room, black_box(effects))
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(sched, pass);
criterion_main!(sched);
