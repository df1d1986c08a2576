//! Best fit against first fit on the Alibaba 2023 GPU cluster trace: its
//! 8,152 pods (7,064 asking GPUs, 3,078 of them a fraction of one,
//! `gpu_milli`) replayed through the `Room` as they were created and deleted,
//! on the trace's first 160 GPU nodes (the whole 1,213-node cluster never
//! fills with this pod set, so nothing would fragment). A GPU is 1,000
//! milli-units of "memory", so a pod's fraction is a block of it. Prints the
//! mean share of free capacity stranded on partly used GPUs, and how many
//! pods could not be placed on arrival though enough GPU capacity was free in
//! all; checks the invariants after events.

mod common;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use chrono::TimeDelta;
use gpuroom::domain::cluster::{BillingMode, NodeSpec};
use gpuroom::domain::event::{Effect, Event, TenantSpec};
use gpuroom::domain::ids::{JobId, NodeId, TenantId};
use gpuroom::domain::job::{JobClass, JobSpec, PoolPreference, Tags};
use gpuroom::domain::testkit::t;
use gpuroom::domain::units::{Mib, Micros, MicrosPerHour};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sched::{FitPolicy, SchedConfig};
use gpuroom::sources::alibaba::{AlibabaPod, parse_nodes, parse_pods};

const NODES: &str = include_str!("../fixtures/cluster/alibaba-2023-gpu-nodes.csv");
const PODS: &str = include_str!("../fixtures/jobs/alibaba-2023-pods-default.csv");
const SUBSET: usize = 160;

struct Outcome {
    mean_fragmentation: f64,
    /// Arrivals that waited although free GPU capacity was at least their ask.
    stranded: u64,
    placed: u64,
}

fn pod_spec(i: usize, pod: &AlibabaPod) -> JobSpec {
    JobSpec {
        id: JobId(i as u64 + 1),
        name: pod.name.clone(),
        tags: Tags { tenant: TenantId("alibaba".into()), project: pod.qos.clone(), env: "prod".into(), model: "-".into() },
        class: JobClass::BatchInference,
        gpus: pod.num_gpu as u8,
        gpu_mem: Mib(pod.gpu_milli),
        exclusive: pod.gpu_milli == 1000,
        steps_total: 1,
        priority: 0,
        pool: PoolPreference::Any,
        checkpoint_size: Mib(1),
        cpus: pod.cpu_milli.div_ceil(1000) as u32,
        host_mem: Mib(pod.memory_mib as u32),
        est_runtime: None,
        gpu_models: if pod.num_gpu > 0 { pod.gpu_models() } else { Vec::new() },
    }
}

fn replay(fit: FitPolicy) -> Outcome {
    let nodes = parse_nodes("fixtures/cluster/alibaba-2023-gpu-nodes.csv", NODES).unwrap();
    let pods = parse_pods("fixtures/jobs/alibaba-2023-pods-default.csv", PODS).unwrap();
    let sched = SchedConfig { fit, backfill: false, time_sharing: false, idle_window: gpuroom::domain::units::Secs(0), ..SchedConfig::default() };
    let mut room = Room::new(RoomConfig { sched, ..RoomConfig::default() });
    let tenant = TenantSpec { id: TenantId("alibaba".into()), quota_gpus: 100_000, monthly_budget: Micros(0), quota_gpu_mem: Mib(0), borrow_limit_gpus: 0 };
    room.apply(t(0), &Event::TenantDefined { spec: tenant });
    for (i, n) in nodes.iter().take(SUBSET).enumerate() {
        let spec = NodeSpec {
            id: NodeId(i as u32 + 1),
            name: n.sn.clone(),
            instance_type: n.model.clone(),
            zone: "alibaba".into(),
            billing: BillingMode::Reserved,
            gpu_model: n.model.clone(),
            gpu_count: n.gpu as u8,
            gpu_memory: Mib(1000),
            mig_capable: false,
            cpus: (n.cpu_milli / 1000) as u32,
            host_memory: Mib(n.memory_mib as u32),
            on_demand_price: MicrosPerHour(1_000_000),
            contract_price: MicrosPerHour(1_000_000),
            max_price: None,
            mig_slices: Vec::new(),
            mig_gpus: 0,
        };
        assert!(room.apply(t(0), &Event::NodeUp { spec }).is_empty());
    }
    // Arrivals in creation order; each placed pod runs for its recorded lifetime.
    let mut arrivals: Vec<(usize, &AlibabaPod)> = pods.iter().enumerate().filter(|(_, p)| p.num_gpu > 0).collect();
    arrivals.sort_by_key(|(i, p)| (p.creation_time, *i));
    let runtime: Vec<i64> = pods
        .iter()
        .map(|p| {
            let (created, deleted) = p.lifetime().expect("the default pod list has times");
            (deleted - p.scheduled_time.unwrap_or(created).max(created)).max(1)
        })
        .collect();
    let mut exits: BinaryHeap<Reverse<(i64, u64)>> = BinaryHeap::new();
    let mut frag_sum = 0.0;
    let mut samples = 0u64;
    let mut stranded = 0u64;
    let mut placed = 0u64;
    let mut n = 0u64;
    let handle = |room: &mut Room, at: i64, event: Event, exits: &mut BinaryHeap<Reverse<(i64, u64)>>, placed: &mut u64| {
        let effects = room.apply(t(0) + TimeDelta::seconds(at), &event);
        for e in effects {
            match e {
                Effect::StartJob { job, .. } => {
                    *placed += 1;
                    room.apply(t(0) + TimeDelta::seconds(at), &Event::JobStarted { job });
                    exits.push(Reverse((at + runtime[job.0 as usize - 1], job.0)));
                }
                Effect::Rejected { reason } => panic!("{reason}"),
                _ => {}
            }
        }
    };
    for (i, pod) in arrivals {
        while let Some(Reverse((end, job))) = exits.peek().copied() {
            if Some(end) > pod.creation_time {
                break;
            }
            exits.pop();
            handle(&mut room, end, Event::JobExited { job: JobId(job), ok: true, message: String::new() }, &mut exits, &mut placed);
        }
        let spec = pod_spec(i, pod);
        let ask = u64::from(spec.gpus) * u64::from(spec.gpu_mem.0);
        let before = placed;
        handle(&mut room, pod.creation_time.unwrap_or(0), Event::JobSubmitted { spec }, &mut exits, &mut placed);
        let frag = gpuroom::sched::fragmentation::measure_nodes(room.nodes());
        if placed == before && frag.free_memory >= ask {
            stranded += 1;
        }
        frag_sum += frag.partial_free_share;
        samples += 1;
        n += 1;
        if n.is_multiple_of(1000) {
            common::check(&room, &format!("{fit:?} after pod {n}"));
        }
    }
    common::check(&room, &format!("{fit:?} at the end"));
    Outcome { mean_fragmentation: frag_sum / samples as f64, stranded, placed }
}

#[test]
fn best_fit_strands_no_more_of_the_alibaba_cluster_than_first_fit() {
    let (best, first, gradient) = std::thread::scope(|s| {
        let b = s.spawn(|| replay(FitPolicy::BestFit));
        let f = s.spawn(|| replay(FitPolicy::FirstFit));
        let g = replay(FitPolicy::Fragmentation);
        (b.join().unwrap(), f.join().unwrap(), g)
    });
    println!("policy         free capacity on partly used GPUs (mean)  stranded arrivals  placed");
    println!("best fit       {:>40.5}  {:>17}  {:>6}", best.mean_fragmentation, best.stranded, best.placed);
    println!("first fit      {:>40.5}  {:>17}  {:>6}", first.mean_fragmentation, first.stranded, first.placed);
    println!("fragmentation  {:>40.5}  {:>17}  {:>6}", gradient.mean_fragmentation, gradient.stranded, gradient.placed);
    assert_eq!(gradient.placed, 7064, "the fragmentation-aware room places every GPU pod too");
    // Both pack (neither spreads pods the way a least-allocated scheduler
    // does); best fit must be at least as good on both counts.
    assert!(best.mean_fragmentation <= first.mean_fragmentation, "best fit {:.5} vs first fit {:.5}", best.mean_fragmentation, first.mean_fragmentation);
    assert!(best.stranded <= first.stranded);
    assert_eq!(best.placed, 7064, "every GPU pod is placed in the end");
}
