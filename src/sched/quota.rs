//! Tenant quotas with borrowing. A tenant is entitled to `quota_gpus` (and
//! `quota_gpu_mem`, if set); it may borrow up to `borrow_limit_gpus` more
//! while capacity is idle. Which of its jobs are borrowed is derived, not
//! stored: its jobs holding GPUs in the order they were placed, the ones past
//! the quota are borrowed. So when earlier work ends, later work becomes
//! owned without any bookkeeping.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::event::TenantSpec;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{Job, JobSpec};

/// What a tenant holds: GPUs and GPU memory (MiB) over its placed jobs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    pub gpus: u32,
    pub gpu_mem: u64,
}

impl Held {
    pub fn of(spec: &JobSpec) -> Held {
        Held { gpus: u32::from(spec.gpus), gpu_mem: u64::from(spec.gpus) * u64::from(spec.gpu_mem.0) }
    }

    pub fn add(&mut self, other: Held) {
        self.gpus += other.gpus;
        self.gpu_mem += other.gpu_mem;
    }

    pub fn within(&self, tenant: &TenantSpec) -> bool {
        self.gpus <= tenant.quota_gpus && (tenant.quota_gpu_mem.0 == 0 || self.gpu_mem <= u64::from(tenant.quota_gpu_mem.0))
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    WithinQuota,
    /// Only on idle capacity; preempted first when an owner needs it back.
    Borrow,
    /// Past quota and borrowing limit: waits.
    Refused,
}

/// How a job of a tenant that holds `held` would be admitted.
pub fn admit(spec: &JobSpec, held: Held, tenant: Option<&TenantSpec>) -> Admission {
    let Some(tenant) = tenant else { return Admission::Refused };
    let mut after = held;
    after.add(Held::of(spec));
    if after.within(tenant) {
        Admission::WithinQuota
    } else if after.gpus <= tenant.quota_gpus.saturating_add(tenant.borrow_limit_gpus) {
        Admission::Borrow
    } else {
        Admission::Refused
    }
}

/// The borrowed jobs among `holding` (jobs that hold GPUs): per tenant in
/// placement order (`placed_at`, then id), those past the tenant's quota.
pub fn borrowed<'a>(holding: impl Iterator<Item = &'a Job>, tenants: &BTreeMap<TenantId, TenantSpec>) -> BTreeSet<JobId> {
    let mut per_tenant: BTreeMap<&TenantId, Vec<&Job>> = BTreeMap::new();
    for job in holding {
        per_tenant.entry(&job.spec.tags.tenant).or_default().push(job);
    }
    let mut out = BTreeSet::new();
    for (tenant, mut jobs) in per_tenant {
        jobs.sort_by_key(|j| (j.placed_at, j.spec.id));
        let Some(spec) = tenants.get(tenant) else {
            out.extend(jobs.iter().map(|j| j.spec.id));
            continue;
        };
        let mut held = Held::default();
        for job in jobs {
            held.add(Held::of(&job.spec));
            if !held.within(spec) {
                out.insert(job.spec.id);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::{job_spec, t, tenant_spec};
    use crate::domain::units::Mib;

    #[test]
    fn admission_is_quota_then_borrowing_then_refusal() {
        let mut tenant = tenant_spec("a", 8);
        tenant.borrow_limit_gpus = 4;
        let spec = job_spec(1, "a", 4);
        assert_eq!(admit(&spec, Held { gpus: 4, gpu_mem: 0 }, Some(&tenant)), Admission::WithinQuota);
        assert_eq!(admit(&spec, Held { gpus: 6, gpu_mem: 0 }, Some(&tenant)), Admission::Borrow);
        assert_eq!(admit(&spec, Held { gpus: 9, gpu_mem: 0 }, Some(&tenant)), Admission::Refused);
        tenant.quota_gpu_mem = Mib(50_000);
        // 4 × 12,000 MiB = 48,000 fits the memory quota; a second such job does not.
        assert_eq!(admit(&spec, Held::default(), Some(&tenant)), Admission::WithinQuota);
        assert_eq!(admit(&spec, Held { gpus: 4, gpu_mem: 48_000 }, Some(&tenant)), Admission::Borrow);
        assert_eq!(admit(&spec, Held::default(), None), Admission::Refused, "unknown tenant");
    }

    #[test]
    fn the_jobs_placed_last_are_the_borrowed_ones() {
        let tenants: BTreeMap<TenantId, TenantSpec> = [tenant_spec("a", 4)].into_iter().map(|t| (t.id.clone(), t)).collect();
        let mut jobs: Vec<Job> = (1..=3).map(|i| Job::new(job_spec(i, "a", 2), t(0))).collect();
        for (i, job) in jobs.iter_mut().enumerate() {
            job.placed_at = Some(t(i as i64 * 10));
        }
        assert_eq!(borrowed(jobs.iter(), &tenants), BTreeSet::from([JobId(3)]));
        // When the first ends, nothing is borrowed any more.
        assert!(borrowed(jobs[1..].iter(), &tenants).is_empty());
    }
}
