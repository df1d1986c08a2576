//! Queue disciplines: the order in which the `Room` considers queued jobs.
//! A discipline decides priority, never capacity: the `Room` walks the order
//! and places whatever fits, within quotas and the backfill reservation.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use super::config::{Resources, SchedConfig};
pub use crate::domain::discipline::DisciplineKind;
use crate::domain::ids::TenantId;
use crate::domain::job::{Job, JobSpec};
use crate::domain::units::At;

/// What a discipline may look at besides the jobs.
pub struct OrderContext<'a> {
    pub now: At,
    pub config: &'a SchedConfig,
    /// What each tenant holds now (placed and running jobs).
    pub held: &'a BTreeMap<TenantId, Resources>,
    /// What the up nodes offer in all.
    pub capacity: Resources,
}

pub trait Discipline {
    fn name(&self) -> &'static str;
    fn order(&self, queued: &mut Vec<&Job>, ctx: &OrderContext<'_>);
}

/// The policy behind each kind the domain names.
impl DisciplineKind {
    pub fn discipline(self) -> &'static dyn Discipline {
        match self {
            DisciplineKind::Fifo => &Fifo,
            DisciplineKind::Priority => &PriorityAging,
            DisciplineKind::Drf => &Drf,
            DisciplineKind::Mlfq => &Mlfq,
        }
    }
}

/// When a job arrived, ties by id: FIFO's order, and each tenant's under DRF.
pub fn arrival(job: &Job) -> (At, crate::domain::ids::JobId) {
    (job.submitted_at, job.spec.id)
}

/// A job's place in the order of a discipline that orders job by job
/// (all but DRF, whose order depends on what is ordered before): lowest
/// first. The sorts below and the room's ordered index use this one key.
pub fn sort_key(kind: DisciplineKind, job: &Job, now: At, config: &SchedConfig) -> Option<(i64, At, crate::domain::ids::JobId)> {
    let (at, id) = arrival(job);
    match kind {
        DisciplineKind::Fifo => Some((0, at, id)),
        // Micro-points, highest first.
        DisciplineKind::Priority => Some((((PriorityAging::effective(job, now, config.aging_per_hour) * 1e6).round() as i64).saturating_neg(), at, id)),
        DisciplineKind::Mlfq => Some((Mlfq::effective_level(job, now, config) as i64, at, id)),
        DisciplineKind::Drf => None,
    }
}

/// First in, first out by submission. A requeued job keeps its place: it was
/// taken off the cluster, it did not arrive late.
#[derive(Copy, Clone, Debug, Default)]
pub struct Fifo;

impl Discipline for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn order(&self, queued: &mut Vec<&Job>, ctx: &OrderContext<'_>) {
        // Cached keys: sorting compares inline keys, not scattered jobs.
        queued.sort_by_cached_key(|job| sort_key(DisciplineKind::Fifo, job, ctx.now, ctx.config));
    }
}

/// Highest priority first, where waiting adds `aging_per_hour` points an hour,
/// so a low-priority job overtakes newer high-priority work in bounded time.
#[derive(Copy, Clone, Debug, Default)]
pub struct PriorityAging;

impl PriorityAging {
    pub fn effective(job: &Job, now: At, aging_per_hour: f64) -> f64 {
        f64::from(job.spec.priority) + aging_per_hour * job.wait_secs(now) as f64 / 3600.0
    }
}

impl Discipline for PriorityAging {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn order(&self, queued: &mut Vec<&Job>, ctx: &OrderContext<'_>) {
        // Keys are computed once per job, not per comparison.
        queued.sort_by_cached_key(|j| sort_key(DisciplineKind::Priority, j, ctx.now, ctx.config));
    }
}

/// Dominant resource fairness (Ghodsi et al., NSDI'11) by progressive
/// filling: the next job is always the tenant's whose dominant share (what it
/// holds, plus what is ordered before, over GPUs, GPU memory, CPUs and host
/// memory) is lowest. Within a tenant, first in first out.
#[derive(Copy, Clone, Debug, Default)]
pub struct Drf;

/// A tenant's dominant share and its index (names sort the same way).
#[derive(Clone, Debug, PartialEq)]
struct Share(f64, Reverse<usize>);

impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Share {
    /// Reversed on the share so `BinaryHeap` pops the lowest; ties go to the
    /// tenant whose name sorts first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then_with(|| self.1.cmp(&other.1))
    }
}

/// Progressive filling as it goes: what each tenant (by index, in name
/// order) holds with the jobs given so far, and whose turn is next.
/// `Drf::order` fills a whole queue with it; the room's lazy walk
/// (`room::drf_order`) fills job by job, to the same order.
#[derive(Clone, Debug)]
pub struct DrfFilling {
    capacity: Resources,
    held: Vec<Resources>,
    turns: BinaryHeap<Share>,
}

impl DrfFilling {
    /// Tenants holding `held` (by index) of `capacity`, each with jobs to give.
    pub fn new(held: Vec<Resources>, capacity: Resources) -> DrfFilling {
        let turns = held.iter().enumerate().map(|(i, h)| Share(h.dominant_share(&capacity), Reverse(i))).collect();
        DrfFilling { capacity, held, turns }
    }

    /// The tenant whose turn it is: the lowest share, ties to the lowest index.
    pub fn next_tenant(&mut self) -> Option<usize> {
        self.turns.pop().map(|Share(_, Reverse(i))| i)
    }

    /// Tenant `i` gave a job asking `spec`; with `more` jobs left it takes
    /// a turn again at its new share.
    pub fn gave(&mut self, i: usize, spec: &JobSpec, more: bool) {
        let Some(held) = self.held.get_mut(i) else { return };
        held.add(Resources::of(spec));
        if more {
            self.turns.push(Share(held.dominant_share(&self.capacity), Reverse(i)));
        }
    }
}

impl Discipline for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn order(&self, queued: &mut Vec<&Job>, ctx: &OrderContext<'_>) {
        // Tenants by index (there are few: a linear search beats sorting
        // every job's name), so the filling loop does no string work.
        let mut sorted: Vec<&Job> = queued.clone();
        sorted.sort_by_cached_key(|job| arrival(job));
        let mut names: Vec<&TenantId> = Vec::new();
        let mut per_tenant: Vec<VecDeque<&Job>> = Vec::new();
        for job in sorted {
            let tenant = &job.spec.tags.tenant;
            let i = match names.iter().position(|n| *n == tenant) {
                Some(i) => i,
                None => {
                    names.push(tenant);
                    per_tenant.push(VecDeque::new());
                    names.len() - 1
                }
            };
            per_tenant[i].push_back(job);
        }
        // Ties between equal shares go to the name that sorts first.
        let mut by_name: Vec<usize> = (0..names.len()).collect();
        by_name.sort_by_key(|i| names[*i]);
        let names: Vec<&TenantId> = by_name.iter().map(|i| names[*i]).collect();
        let mut per_tenant: Vec<VecDeque<&Job>> = by_name.iter().map(|i| std::mem::take(&mut per_tenant[*i])).collect();
        let held: Vec<Resources> = names.iter().map(|t| ctx.held.get(*t).copied().unwrap_or_default()).collect();
        let mut filling = DrfFilling::new(held, ctx.capacity);
        let mut order = Vec::with_capacity(queued.len());
        while let Some(i) = filling.next_tenant() {
            let Some(job) = per_tenant[i].pop_front() else { continue };
            order.push(job);
            filling.gave(i, &job.spec, !per_tenant[i].is_empty());
        }
        *queued = order;
    }
}

/// Multi-level feedback queue on attained service (GPUs × time run), as
/// Tiresias' discretized 2D-LAS: a job starts in queue 0 and drops a queue
/// each time its service passes a threshold; lower queues go first, first in
/// first out within a queue. A job waiting `mlfq_promote_after` climbs one
/// queue per such wait, so none starves.
#[derive(Copy, Clone, Debug, Default)]
pub struct Mlfq;

impl Mlfq {
    /// The queue a job's attained service puts it in, before promotion.
    pub fn level(job: &Job, thresholds: &[i64], now: At) -> usize {
        let service_secs = job.attained_gpu_ms(now) / 1000;
        thresholds.iter().filter(|t| service_secs >= **t).count()
    }

    pub fn effective_level(job: &Job, ctx_now: At, config: &SchedConfig) -> usize {
        let level = Mlfq::level(job, &config.mlfq_thresholds, ctx_now);
        let promote = config.mlfq_promote_after.0.max(1);
        let lifted = (job.wait_secs(ctx_now) / promote) as usize;
        level.saturating_sub(lifted)
    }
}

impl Discipline for Mlfq {
    fn name(&self) -> &'static str {
        "mlfq"
    }

    fn order(&self, queued: &mut Vec<&Job>, ctx: &OrderContext<'_>) {
        queued.sort_by_cached_key(|job| sort_key(DisciplineKind::Mlfq, job, ctx.now, ctx.config));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::Job;
    use crate::domain::testkit::{job_spec, t};
    use crate::domain::units::{Mib, Secs};

    fn ctx<'a>(config: &'a SchedConfig, held: &'a BTreeMap<TenantId, Resources>, capacity: Resources, now: i64) -> OrderContext<'a> {
        OrderContext { now: t(now), config, held, capacity }
    }

    fn ids(jobs: &[&Job]) -> Vec<u64> {
        jobs.iter().map(|j| j.spec.id.0).collect()
    }

    #[test]
    fn fifo_orders_by_submission_and_keeps_a_requeued_job_in_front() {
        let config = SchedConfig::default();
        let held = BTreeMap::new();
        let mut early = Job::new(job_spec(1, "a", 1), t(0));
        early.requeues = 1;
        early.queued_since = t(500);
        let late = Job::new(job_spec(2, "a", 1), t(100));
        let mut queue = vec![&late, &early];
        Fifo.order(&mut queue, &ctx(&config, &held, Resources::default(), 600));
        assert_eq!(ids(&queue), vec![1, 2]);
    }

    #[test]
    fn priority_ages_so_an_old_low_job_overtakes_new_high_ones() {
        let config = SchedConfig { aging_per_hour: 2.0, ..SchedConfig::default() };
        let held = BTreeMap::new();
        let low = Job::new(job_spec(1, "a", 1), t(0));
        let fresh_high = |id: u64, at: i64| {
            let mut spec = job_spec(id, "a", 1);
            spec.priority = 10;
            Job::new(spec, t(at))
        };
        // After 3 h the low job has 6 points; a high job just submitted has 10.
        let high = fresh_high(2, 3 * 3600);
        let mut queue = vec![&low, &high];
        PriorityAging.order(&mut queue, &ctx(&config, &held, Resources::default(), 3 * 3600));
        assert_eq!(ids(&queue), vec![2, 1]);
        // After 6 h it has 12: it goes before any newly submitted high job.
        let high = fresh_high(3, 6 * 3600);
        let mut queue = vec![&high, &low];
        PriorityAging.order(&mut queue, &ctx(&config, &held, Resources::default(), 6 * 3600));
        assert_eq!(ids(&queue), vec![1, 3]);
    }

    /// Ghodsi et al., NSDI'11, §4: 9 CPUs and 18 GB; user A's tasks need
    /// <1 CPU, 4 GB>, user B's <3 CPUs, 1 GB>. DRF gives A three tasks and B two.
    #[test]
    fn drf_reproduces_the_papers_worked_example() {
        let config = SchedConfig::default();
        let held = BTreeMap::new();
        let capacity = Resources { gpus: 0.0, gpu_mem: 0.0, cpus: 9.0, host_mem: 18.0 * 1024.0 };
        let task = |id: u64, user: &str, cpus: u32, gb: u32| {
            let mut spec = job_spec(id, user, 0);
            spec.gpus = 0;
            spec.gpu_mem = Mib(0);
            spec.cpus = cpus;
            spec.host_mem = Mib(gb * 1024);
            Job::new(spec, t(id as i64))
        };
        let jobs: Vec<Job> =
            (0..10).map(|i| task(i, if i % 2 == 0 { "A" } else { "B" }, if i % 2 == 0 { 1 } else { 3 }, if i % 2 == 0 { 4 } else { 1 })).collect();
        let mut queue: Vec<&Job> = jobs.iter().collect();
        Drf.order(&mut queue, &ctx(&config, &held, capacity, 100));
        // Walk the order placing what fits, as the Room does.
        let (mut cpus, mut mem) = (0u32, 0u32);
        let mut granted: BTreeMap<&str, u32> = BTreeMap::new();
        for job in &queue {
            if cpus + job.spec.cpus <= 9 && mem + job.spec.host_mem.0 <= 18 * 1024 {
                cpus += job.spec.cpus;
                mem += job.spec.host_mem.0;
                *granted.entry(job.spec.tags.tenant.0.as_str()).or_default() += 1;
            }
        }
        assert_eq!(granted.get("A"), Some(&3));
        assert_eq!(granted.get("B"), Some(&2));
    }

    #[test]
    fn drf_serves_the_tenant_holding_least_first() {
        let config = SchedConfig::default();
        let capacity = Resources { gpus: 16.0, gpu_mem: 16.0 * 16384.0, cpus: 128.0, host_mem: 1e6 };
        let mut held = BTreeMap::new();
        held.insert(TenantId("big".into()), Resources { gpus: 8.0, ..Resources::default() });
        let a = Job::new(job_spec(1, "big", 1), t(0));
        let b = Job::new(job_spec(2, "small", 1), t(10));
        let mut queue = vec![&a, &b];
        Drf.order(&mut queue, &ctx(&config, &held, capacity, 20));
        assert_eq!(ids(&queue), vec![2, 1]);
    }

    #[test]
    fn mlfq_puts_short_service_first_and_promotes_long_waits() {
        let config = SchedConfig { mlfq_thresholds: vec![3600, 36_000], mlfq_promote_after: Secs(4 * 3600), ..SchedConfig::default() };
        let held = BTreeMap::new();
        let mut old = Job::new(job_spec(1, "a", 8), t(0));
        old.service_gpu_ms = 40_000 * 1000; // queue 2
        let fresh = Job::new(job_spec(2, "a", 1), t(100)); // queue 0
        let mut mid = Job::new(job_spec(3, "a", 1), t(50));
        mid.service_gpu_ms = 5_000 * 1000; // queue 1
        assert_eq!((Mlfq::level(&old, &config.mlfq_thresholds, t(200)), Mlfq::level(&mid, &config.mlfq_thresholds, t(200))), (2, 1));
        let mut queue = vec![&old, &fresh, &mid];
        Mlfq.order(&mut queue, &ctx(&config, &held, Resources::default(), 200));
        assert_eq!(ids(&queue), vec![2, 3, 1]);
        // Eight hours of waiting lift the old job two queues: it is first again (arrived first).
        Mlfq.order(&mut queue, &ctx(&config, &held, Resources::default(), 8 * 3600));
        assert_eq!(ids(&queue)[0], 1);
    }

    #[test]
    fn disciplines_parse_by_name() {
        for d in DisciplineKind::ALL {
            assert_eq!(DisciplineKind::parse(d.discipline().name()), Some(d));
        }
        assert_eq!(DisciplineKind::parse("lottery"), None);
    }
}
