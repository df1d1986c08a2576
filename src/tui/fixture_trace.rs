//! A console room on a real fleet: the GPU nodes of Alibaba's 2023 trace
//! (1,213 nodes, 6,212 GPUs of seven models, `sources::alibaba::NODES`) and
//! its `default` pod list as the work, grown through `Room::apply` the way
//! `fixture_large` grows its synthetic room (six simulated hours, telemetry
//! every ten minutes, an executor that starts what is placed). Where the
//! synthetic room is uniform, this one has what real fleets have: 1-, 2-,
//! 4- and 8-GPU nodes, pods that share a GPU by thousandths, pods bound to
//! GPU models, CPU-only pods.
//!
//! What the trace does not say is filled in plainly, and said here:
//! * Owners: the trace names none; its QoS classes (LS, BE, Burstable,
//!   Guaranteed) stand in for tenants, with quotas in proportion to what
//!   each asks of the list.
//! * Money: the nodes are an owned (reserved) fleet, priced per GPU-hour
//!   from public on-demand list prices of the named models (`PRICES`); the
//!   trace's anonymized G2 and G3 are priced and sized as a V100.
//! * GPU memory: 16 GiB a GPU, 32 GiB on V100M32 and G3, 24 GiB on A10; a
//!   pod's share of a GPU (`gpu_milli`) asks that share of 16 GiB.
//! * Runtimes: the pod's own lifetime in the trace (creation to deletion),
//!   kept between ten minutes and a week.
//! * CPU-only pods (1,088 of 8,152) are left out: the room schedules GPU work (it refuses a
//!   job of no GPUs).
//! * Load: the list is cycled (copies named `-c1`, `-c2` …) up to the number
//!   of jobs asked, so a long queue can be measured on the real fleet.
//!
//! Owns nothing the product runs on; like `fixture_large` it only feeds
//! events and reads the room.

use super::fixture_large::{Recipe, grow, unit};
use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::TenantSpec;
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::{JobClass, JobSpec, PoolPreference, Tags};
use crate::domain::units::{Mib, Micros, MicrosPerHour, Secs};
use crate::room::Room;
use crate::sources::alibaba::{self, AlibabaNode, AlibabaPod, NODES, POD_LISTS};

/// On-demand dollars per GPU-hour by the trace's model name: GCP's list
/// prices for P100 ($1.46) and T4 ($0.35), AWS's for a V100 16 GB (p3.2xlarge,
/// $3.06), a V100 32 GB (p3dn.24xlarge ÷ 8, $3.90) and an A10 (g5.xlarge,
/// $1.006); G2 and G3, anonymized in the trace, as a V100 of their memory.
const PRICES: [(&str, i64, u32); 7] = [
    ("P100", 1_460_000, 16_384),
    ("T4", 350_000, 16_384),
    ("V100M16", 3_060_000, 16_384),
    ("V100M32", 3_900_000, 32_768),
    ("A10", 1_006_000, 24_576),
    ("G2", 3_060_000, 16_384),
    ("G3", 3_900_000, 32_768),
];

/// A reserved GPU costs this share of on-demand (as in `fixtures/sim/default.toml`: 15.91 / 24.48).
const RESERVED_SHARE: f64 = 0.65;

/// A pod's share of a GPU is this many MiB per thousandth (16 GiB a GPU).
const MIB_PER_WHOLE_GPU: u32 = 16_384;

/// Tenant (the pod's QoS class), share of quota in percent, priority.
const CLASSES: [(&str, u32, i32); 4] = [("ls", 60, 3), ("be", 34, 0), ("burstable", 5, 2), ("guaranteed", 1, 4)];

fn model_terms(model: &str) -> (i64, u32) {
    PRICES.iter().find(|(m, ..)| *m == model).map_or((3_060_000, 16_384), |(_, price, mem)| (*price, *mem))
}

fn node_spec(index: usize, node: &AlibabaNode) -> NodeSpec {
    let (per_gpu, memory) = model_terms(&node.model);
    let gpus = node.gpu.min(u32::from(u8::MAX)) as u8;
    let on_demand = per_gpu * i64::from(gpus);
    NodeSpec {
        id: NodeId(index as u32 + 1),
        name: node.sn.clone(),
        instance_type: format!("{}x{}", node.model, gpus),
        zone: "trace".into(),
        billing: BillingMode::Reserved,
        gpu_model: node.model.clone(),
        gpu_count: gpus,
        gpu_memory: Mib(memory),
        mig_capable: false,
        cpus: (node.cpu_milli / 1000) as u32,
        host_memory: Mib(node.memory_mib.min(u64::from(u32::MAX)) as u32),
        on_demand_price: MicrosPerHour(on_demand),
        contract_price: MicrosPerHour((on_demand as f64 * RESERVED_SHARE).round() as i64),
        max_price: None,
        mig_slices: Vec::new(),
        mig_gpus: 0,
    }
}

fn tenant_of(pod: &AlibabaPod) -> &'static (&'static str, u32, i32) {
    CLASSES.iter().find(|(name, ..)| name.eq_ignore_ascii_case(&pod.qos)).unwrap_or(&CLASSES[1])
}

/// Job `n` (1-based): pod `(n - 1) mod pods`, copy `(n - 1) / pods`.
fn job_of(pods: &[AlibabaPod], n: u64) -> JobSpec {
    let i = (n - 1) as usize % pods.len();
    let copy = (n - 1) as usize / pods.len();
    let pod = &pods[i];
    let (tenant, _, priority) = tenant_of(pod);
    let exclusive = pod.num_gpu > 0 && pod.gpu_milli >= 1000;
    let gpus = pod.num_gpu.min(u32::from(u8::MAX)) as u8;
    let gpu_mem = if exclusive { MIB_PER_WHOLE_GPU } else { pod.gpu_milli * MIB_PER_WHOLE_GPU / 1000 };
    let class = match *tenant {
        "ls" => JobClass::BatchInference,
        "burstable" => JobClass::Eval,
        "guaranteed" => JobClass::FineTune,
        _ => JobClass::Training,
    };
    let lifetime = pod.lifetime().map_or(3600.0 * (1.0 + 23.0 * unit(0, n, 20)), |(created, deleted)| (deleted - created) as f64);
    let name = if copy == 0 { pod.name.clone() } else { format!("{}-c{copy}", pod.name) };
    JobSpec {
        id: JobId(n),
        name,
        // The trace names no projects or models: its name for the cluster, and "unnamed".
        tags: Tags { tenant: TenantId((*tenant).into()), project: "openb".into(), env: "prod".into(), model: "unnamed".into() },
        class,
        gpus,
        gpu_mem: Mib(gpu_mem),
        exclusive,
        steps_total: 1_000 + (unit(0, n, 21) * 19_000.0) as u64,
        priority: *priority,
        pool: PoolPreference::Any,
        checkpoint_size: Mib(512 * u32::from(gpus.max(1))),
        cpus: pod.cpu_milli.div_ceil(1000) as u32,
        host_mem: Mib(pod.memory_mib.min(u64::from(u32::MAX)) as u32),
        est_runtime: Some(Secs(lifetime.clamp(600.0, 7.0 * 86_400.0) as i64)),
        gpu_models: pod.gpu_models(),
    }
}

/// The `default` list's pods that ask for GPUs.
fn gpu_pods() -> Vec<AlibabaPod> {
    let mut pods = alibaba::parse_pods(POD_LISTS[0].0, POD_LISTS[0].1).unwrap_or_default();
    pods.retain(|p| p.num_gpu > 0);
    pods
}

/// The room on every `stride`-th node of the trace's list (1: all 6,212
/// GPUs) with `jobs` jobs from its `default` pod list.
pub fn trace_room(stride: usize, jobs: usize) -> Room {
    let nodes = alibaba::parse_nodes(NODES.0, NODES.1).unwrap_or_default();
    let pods = gpu_pods();
    let fleet: Vec<NodeSpec> = nodes.iter().step_by(stride.max(1)).enumerate().map(|(i, n)| node_spec(i, n)).collect();
    let gpus: u32 = fleet.iter().map(|n| u32::from(n.gpu_count)).sum();
    let mean_price = fleet.iter().map(|n| n.contract_price.0).sum::<i64>() / i64::from(gpus.max(1));
    let tenants = CLASSES
        .iter()
        .map(|(name, share, _)| {
            let quota = (gpus * share).div_ceil(100);
            TenantSpec {
                id: TenantId((*name).into()),
                quota_gpus: quota,
                // A month of the quota at the fleet's mean reserved price.
                monthly_budget: Micros(mean_price * i64::from(quota) * 730),
                quota_gpu_mem: Mib(0),
                borrow_limit_gpus: gpus.div_ceil(10),
            }
        })
        .collect();
    // The lists are embedded and tested: empty only if one stopped parsing,
    // and then the room is the bare fleet rather than a crash.
    let jobs = if pods.is_empty() { 0 } else { jobs };
    grow(Recipe { tenants, fleet, jobs, job: &|n| job_of(&pods, n), ticks: &|_, _, _| {} })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_trace_parses_and_sizes_the_fleet() {
        let nodes = alibaba::parse_nodes(NODES.0, NODES.1).unwrap();
        assert_eq!(nodes.len(), 1_213);
        let fleet: Vec<NodeSpec> = nodes.iter().enumerate().map(|(i, n)| node_spec(i, n)).collect();
        assert_eq!(fleet.iter().map(|n| u32::from(n.gpu_count)).sum::<u32>(), 6_212);
        assert!(fleet.iter().all(|n| n.contract_price.0 > 0 && n.contract_price < n.on_demand_price), "every model priced");
        let models: std::collections::BTreeSet<&str> = fleet.iter().map(|n| n.gpu_model.as_str()).collect();
        assert_eq!(models.len(), PRICES.len(), "every model of the list has terms: {models:?}");
        assert!(models.iter().all(|m| PRICES.iter().any(|(p, ..)| p == m)));
    }

    #[test]
    fn pods_become_jobs_that_keep_their_asks() {
        let mut pods = gpu_pods();
        assert!(pods.len() == 7_064 && pods.iter().all(|p| p.num_gpu > 0), "{} pods ask for GPUs", pods.len());
        let shared = pods.iter().position(|p| p.num_gpu == 1 && p.gpu_milli < 1000).unwrap();
        let job = job_of(&pods, shared as u64 + 1);
        assert!(!job.exclusive && job.gpu_mem.0 == pods[shared].gpu_milli * 16_384 / 1000);
        let whole = pods.iter().position(|p| p.gpu_milli == 1000).unwrap();
        assert!(job_of(&pods, whole as u64 + 1).exclusive);
        // The published lists name no models; a list that does binds its jobs.
        pods[0].gpu_spec = "V100M16|V100M32".into();
        assert_eq!(job_of(&pods, 1).gpu_models, vec!["V100M16".to_string(), "V100M32".to_string()]);
        // The list cycles: the same pod again, named as a copy.
        let again = job_of(&pods, (pods.len() + shared) as u64 + 1);
        assert_eq!((again.gpu_mem, again.name.ends_with("-c1")), (job.gpu_mem, true));
    }

    #[test]
    fn a_small_trace_room_places_work_on_several_models() {
        let room = trace_room(20, 600);
        let v = room.view();
        assert_eq!(v.totals.stats.submitted, 600);
        assert!(v.queue.running > 20, "some run: {}", v.queue.running);
        let busy_models: std::collections::BTreeSet<String> =
            room.nodes().filter(|n| n.gpus.iter().any(|g| !g.allocations.is_empty())).map(|n| n.spec.gpu_model.clone()).collect();
        assert!(busy_models.len() >= 3, "work on several models: {busy_models:?}");
        assert_eq!(v.budgets.len(), CLASSES.len());
    }
}
