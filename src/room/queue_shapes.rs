//! The queue by shape: queued jobs grouped into classes that may use the
//! same nodes (tenant, whole GPUs or shared, the pools they may use, GPU
//! count), with the least each class asks of a node. A pass whose head job
//! is blocked asks, in one placement check per class, whether anything in
//! the queue could still start; when nothing can, it stops instead of
//! trying every one of 100,000 queued jobs (issue 38).
//!
//! Derived, like `derived`: not serialized, never part of a room's
//! equality, kept up to date by the `Fleet` methods that move jobs in and
//! out of the queue, and rebuilt from the queue when missing. It only ever
//! gives lower bounds of what queued jobs ask, so a pass that stops on it
//! stops where trying every job would have placed nothing either.

use std::collections::BTreeMap;

use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{Job, JobSpec, PoolPreference};
use crate::domain::units::{Mib, Secs};

/// Queued jobs that may use the same nodes, whatever their size.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShapeClass {
    pub tenant: TenantId,
    pub exclusive: bool,
    /// The pools the jobs may use now (an escalated spot-only job may use any).
    pub pool: PoolPreference,
    pub gpus: u8,
}

impl ShapeClass {
    fn of(job: &Job) -> ShapeClass {
        let s = &job.spec;
        let pool = if s.pool == PoolPreference::SpotOnly && job.escalated { PoolPreference::Any } else { s.pool };
        ShapeClass { tenant: s.tags.tenant.clone(), exclusive: s.exclusive, pool, gpus: s.gpus }
    }
}

/// What one queued job asks beyond its class, each the smaller the easier it fits.
#[derive(Clone, Copy, Debug)]
struct Asks {
    gpu_mem: u32,
    cpus: u32,
    host_mem: u32,
    /// Seconds of work left by its submitter's estimate; `i64::MAX` with none.
    secs: i64,
}

impl Asks {
    fn of(job: &Job) -> Asks {
        let s = &job.spec;
        let secs = job.remaining_estimate().map_or(i64::MAX, |s| s.0);
        Asks { gpu_mem: s.gpu_mem.0, cpus: s.cpus, host_mem: s.host_mem.0, secs }
    }
}

/// A multiset of numbers that tells its least.
#[derive(Clone, Debug, Default)]
struct Least(BTreeMap<i64, u32>);

impl Least {
    fn insert(&mut self, value: i64) {
        *self.0.entry(value).or_default() += 1;
    }

    fn remove(&mut self, value: i64) {
        if let Some(count) = self.0.get_mut(&value) {
            *count -= 1;
            if *count == 0 {
                self.0.remove(&value);
            }
        }
    }

    fn least(&self) -> Option<i64> {
        self.0.first_key_value().map(|(v, _)| *v)
    }
}

/// One class's queued jobs: how many, and each of their asks' least.
#[derive(Clone, Debug)]
struct Members {
    class: ShapeClass,
    count: u32,
    gpu_mem: Least,
    cpus: Least,
    host_mem: Least,
    secs: Least,
}

/// The least a class's jobs ask: a job of this shape fits wherever any of
/// them does (fitting is monotone in each ask), and ends no later.
#[derive(Clone, Debug)]
pub struct ClassProbe<'a> {
    pub class: &'a ShapeClass,
    /// A job spec asking the least of everything (no GPU-model bound).
    pub spec: JobSpec,
    /// The shortest estimate of work left among them, if any has one.
    pub secs: Option<Secs>,
}

/// The queue's classes (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct QueueShapes {
    /// Per queued job, its class (an index into `members`) and its asks as
    /// indexed, so that it leaves exactly what it added.
    jobs: BTreeMap<JobId, (usize, Asks)>,
    index: BTreeMap<ShapeClass, usize>,
    members: Vec<Members>,
}

impl QueueShapes {
    pub fn of<'a>(queued: impl Iterator<Item = &'a Job>) -> QueueShapes {
        let mut shapes = QueueShapes::default();
        for job in queued {
            shapes.insert(job);
        }
        shapes
    }

    /// A job joined the queue (or changed how it may be placed: it is re-indexed).
    pub fn insert(&mut self, job: &Job) {
        self.remove(job.spec.id);
        let class = ShapeClass::of(job);
        let at = match self.index.get(&class) {
            Some(at) => *at,
            None => {
                let empty = || Least(BTreeMap::new());
                self.members.push(Members { class: class.clone(), count: 0, gpu_mem: empty(), cpus: empty(), host_mem: empty(), secs: empty() });
                self.index.insert(class, self.members.len() - 1);
                self.members.len() - 1
            }
        };
        let asks = Asks::of(job);
        let m = &mut self.members[at];
        m.count += 1;
        m.gpu_mem.insert(i64::from(asks.gpu_mem));
        m.cpus.insert(i64::from(asks.cpus));
        m.host_mem.insert(i64::from(asks.host_mem));
        m.secs.insert(asks.secs);
        self.jobs.insert(job.spec.id, (at, asks));
    }

    /// A job left the queue.
    pub fn remove(&mut self, id: JobId) {
        let Some((at, asks)) = self.jobs.remove(&id) else { return };
        let Some(m) = self.members.get_mut(at) else { return };
        m.count = m.count.saturating_sub(1);
        m.gpu_mem.remove(i64::from(asks.gpu_mem));
        m.cpus.remove(i64::from(asks.cpus));
        m.host_mem.remove(i64::from(asks.host_mem));
        m.secs.remove(asks.secs);
    }

    /// One probe per class with jobs queued, built from `template` (any job
    /// spec: only its sizes and pool are replaced).
    pub fn probes<'a>(&'a self, template: &'a JobSpec) -> impl Iterator<Item = ClassProbe<'a>> + 'a {
        self.probes_where(|_| true, template)
    }

    fn probes_where<'a>(&'a self, keep: impl Fn(&ShapeClass) -> bool + 'a, template: &'a JobSpec) -> impl Iterator<Item = ClassProbe<'a>> + 'a {
        self.members.iter().filter(move |m| m.count > 0 && keep(&m.class)).map(move |m| {
            let least = |l: &Least| u32::try_from(l.least().unwrap_or(0)).unwrap_or(u32::MAX);
            let mut spec = template.clone();
            spec.gpus = m.class.gpus;
            spec.exclusive = m.class.exclusive;
            spec.pool = m.class.pool;
            spec.gpu_mem = Mib(least(&m.gpu_mem));
            spec.cpus = least(&m.cpus);
            spec.host_mem = Mib(least(&m.host_mem));
            spec.gpu_models = Vec::new();
            let secs = m.secs.least().filter(|s| *s != i64::MAX).map(Secs);
            ClassProbe { class: &m.class, spec, secs }
        })
    }

    /// The probes of one tenant's classes.
    pub fn probes_of<'a>(&'a self, tenant: &'a TenantId, template: &'a JobSpec) -> impl Iterator<Item = ClassProbe<'a>> + 'a {
        self.probes_where(move |class| class.tenant == *tenant, template)
    }

    /// The tenants with jobs queued.
    pub fn tenants(&self) -> std::collections::BTreeSet<&TenantId> {
        self.members.iter().filter(|m| m.count > 0).map(|m| &m.class.tenant).collect()
    }

    /// Per class with jobs: how many, and the least of each ask (for tests
    /// that hold the index against one built afresh).
    pub fn summary(&self) -> BTreeMap<ShapeClass, (u32, [Option<i64>; 4])> {
        self.members
            .iter()
            .filter(|m| m.count > 0)
            .map(|m| (m.class.clone(), (m.count, [m.gpu_mem.least(), m.cpus.least(), m.host_mem.least(), m.secs.least()])))
            .collect()
    }

    /// How many jobs are indexed (the queue's length when up to date).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::{job_spec, t};

    fn job(id: u64, tenant: &str, gpus: u8, mem: u32, est: i64) -> Job {
        let mut spec = job_spec(id, tenant, gpus);
        spec.gpu_mem = Mib(mem);
        spec.est_runtime = Some(Secs(est));
        Job::new(spec, t(0))
    }

    #[test]
    fn a_class_tells_the_least_of_each_ask_and_forgets_what_leaves() {
        let jobs = [job(1, "a", 1, 9_000, 600), job(2, "a", 1, 4_000, 7_200), job(3, "a", 2, 1_000, 60), job(4, "b", 1, 2_000, 60)];
        let mut shapes = QueueShapes::of(jobs.iter());
        let template = jobs[0].spec.clone();
        let least = |shapes: &QueueShapes, tenant: &str, gpus: u8| {
            shapes.probes(&template).find(|p| p.class.tenant.0 == tenant && p.class.gpus == gpus).map(|p| (p.spec.gpu_mem.0, p.secs.map(|s| s.0)))
        };
        assert_eq!(least(&shapes, "a", 1), Some((4_000, Some(600))), "the least memory and the least time, from different jobs");
        shapes.remove(JobId(2));
        assert_eq!(least(&shapes, "a", 1), Some((9_000, Some(600))));
        shapes.remove(JobId(1));
        assert_eq!(least(&shapes, "a", 1), None, "an empty class gives no probe");
        assert_eq!(least(&shapes, "a", 2), Some((1_000, Some(60))));
        assert_eq!(shapes.len(), 2);
        // Removing twice, or what was never there, changes nothing.
        shapes.remove(JobId(1));
        shapes.remove(JobId(99));
        assert_eq!(shapes.len(), 2);
    }

    #[test]
    fn an_escalated_spot_only_job_moves_to_the_class_that_may_use_any_pool() {
        let mut j = job(1, "a", 1, 1_000, 60);
        j.spec.pool = PoolPreference::SpotOnly;
        let mut shapes = QueueShapes::of(std::iter::once(&j));
        let pools = |shapes: &QueueShapes| shapes.probes(&j.spec).map(|p| p.class.pool).collect::<Vec<_>>();
        assert_eq!(pools(&shapes), vec![PoolPreference::SpotOnly]);
        let mut escalated = j.clone();
        escalated.escalated = true;
        shapes.insert(&escalated);
        assert_eq!(pools(&shapes), vec![PoolPreference::Any]);
        assert_eq!(shapes.len(), 1);
    }
}
