//! Small builders for tests (unit and integration) and examples: a fixed epoch,
//! node and job specs with sensible defaults. Not used by the product itself.

use chrono::{TimeZone, Utc};

use super::cluster::{BillingMode, NodeSpec};
use super::event::TenantSpec;
use super::ids::{JobId, NodeId, TenantId};
use super::job::{JobClass, JobSpec, PoolPreference, Tags};
use super::units::{At, Mib, Micros, MicrosPerHour};

/// `secs` seconds after 2020-01-06T00:00:00Z.
pub fn t(secs: i64) -> At {
    Utc.with_ymd_and_hms(2020, 1, 6, 0, 0, 0).unwrap() + chrono::TimeDelta::seconds(secs)
}

/// A node of `gpus` 16 GiB V100s, priced like a p3 instance.
pub fn node_spec(id: u32, billing: BillingMode, gpus: u8) -> NodeSpec {
    NodeSpec {
        id: NodeId(id),
        name: format!("n{id:02}"),
        instance_type: "p3.16xlarge".into(),
        zone: "us-east-1c".into(),
        billing,
        gpu_model: "V100-16GB".into(),
        gpu_count: gpus,
        gpu_memory: Mib(16_384),
        mig_capable: false,
        cpus: 64,
        host_memory: Mib(488 * 1024),
        on_demand_price: MicrosPerHour(24_480_000),
        contract_price: match billing {
            BillingMode::Reserved => MicrosPerHour(15_912_000),
            _ => MicrosPerHour(24_480_000),
        },
        max_price: (billing == BillingMode::Spot).then_some(MicrosPerHour(24_480_000)),
        mig_slices: Vec::new(),
        mig_gpus: 0,
    }
}

/// A node of `gpus` A100-40GB whose first GPU runs in MIG mode, split into
/// 3g.20gb + 2g.10gb + 1g.5gb + 1g.5gb slices.
pub fn mig_node_spec(id: u32, billing: BillingMode, gpus: u8) -> NodeSpec {
    let mut spec = node_spec(id, billing, gpus);
    spec.gpu_model = "A100-40GB".into();
    spec.gpu_memory = Mib(40_960);
    spec.mig_capable = true;
    spec.mig_slices = vec![Mib(20_480), Mib(10_240), Mib(5120), Mib(5120)];
    spec.mig_gpus = 1;
    spec
}

/// An exclusive training job of `gpus` GPUs and 1,000 steps for `tenant`.
pub fn job_spec(id: u64, tenant: &str, gpus: u8) -> JobSpec {
    JobSpec {
        id: JobId(id),
        name: format!("job-{id}"),
        tags: Tags { tenant: TenantId(tenant.into()), project: "proj".into(), env: "dev".into(), model: "resnet50".into() },
        class: JobClass::Training,
        gpus,
        gpu_mem: Mib(12_000),
        exclusive: true,
        steps_total: 1_000,
        priority: 0,
        pool: PoolPreference::Any,
        checkpoint_size: Mib(2048),
        cpus: 4,
        host_mem: Mib(16_384),
        est_runtime: None,
        gpu_models: Vec::new(),
    }
}

/// Tenant `id` with a quota of `quota_gpus` GPUs, a $10,000 monthly budget,
/// no memory quota, and up to 64 GPUs it may borrow.
pub fn tenant_spec(id: &str, quota_gpus: u32) -> TenantSpec {
    TenantSpec { id: TenantId(id.into()), quota_gpus, monthly_budget: Micros(10_000_000_000), quota_gpu_mem: Mib(0), borrow_limit_gpus: 64 }
}
