//! What the fleet's per-event checks would otherwise recompute from every
//! job holding GPUs: what each tenant holds, when running jobs' saves fall
//! due, and which jobs the scheduler asked to stop. Kept up to date at the
//! few places that move jobs, so that an event costs the same with 100 or
//! 10,000 jobs running (issue 19).
//!
//! Derived, never a source of truth: it is not serialized (a room restored
//! from a snapshot rebuilds it on its first event), it never takes part in
//! a room's equality, and every figure it gives is the one a full recount
//! would give, so replays stay byte-identical.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::JobSpec;
use crate::domain::units::At;
use crate::sched::Resources;
use crate::sched::quota::Held;

/// One tenant's running total over its jobs holding GPUs.
#[derive(Clone, Copy, Debug, Default)]
pub struct TenantHolding {
    pub jobs: u32,
    pub resources: Resources,
    pub held: Held,
}

impl TenantHolding {
    pub fn add(&mut self, spec: &JobSpec) {
        self.jobs += 1;
        self.resources.add(Resources::of(spec));
        self.held.add(Held::of(spec));
    }

    /// Every figure is a whole number well inside f64's exact range, so
    /// subtracting gives what a recount would.
    fn remove(&mut self, spec: &JobSpec) {
        let (r, h) = (Resources::of(spec), Held::of(spec));
        self.jobs = self.jobs.saturating_sub(1);
        self.resources.gpus -= r.gpus;
        self.resources.gpu_mem -= r.gpu_mem;
        self.resources.cpus -= r.cpus;
        self.resources.host_mem -= r.host_mem;
        self.held.gpus = self.held.gpus.saturating_sub(h.gpus);
        self.held.gpu_mem = self.held.gpu_mem.saturating_sub(h.gpu_mem);
    }
}

/// The fleet's derived indices (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct Derived {
    /// Per tenant, over the jobs in `Fleet::holding`; `None` until built
    /// (then `scheduler_stops` is rebuilt too).
    pub holdings: Option<BTreeMap<TenantId, TenantHolding>>,
    /// When running jobs' next saves fall due, earliest first. An entry may
    /// be stale (the job saved, stopped or changed since): it is checked when
    /// its time comes. Every running job's due time has an entry at or before
    /// it (`Fleet::note_checkpoint_due` adds one wherever it can come sooner);
    /// `None`: rebuilt from every running job on the next event.
    pub checkpoint_due: Option<BTreeSet<(At, JobId)>>,
    /// Jobs the scheduler asked to stop (to give capacity back or let a job
    /// of a higher queue in): a superset of those still stopping, which
    /// `Fleet::scheduler_stop_pending` checks one by one.
    pub scheduler_stops: BTreeSet<JobId>,
    /// The queue in discipline order; `None` until a pass first walks it
    /// (and under priority with a negative aging rate, sorted per pass).
    pub queue_order: Option<super::queue_order::QueueOrder>,
    /// The queued jobs by shape; `None` until a pass first asks for it.
    pub queue_shapes: Option<super::queue_shapes::QueueShapes>,
    /// The queued jobs by wait: those not escalated per class, the
    /// escalated per tenant and class (what a wait alarm counts); `None`
    /// until the wait alarms first look.
    pub waits: Option<super::wait_index::WaitIndex>,
}

impl PartialEq for Derived {
    /// Derived state never makes two rooms differ: it is a cache of theirs.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Derived {
    /// A job started holding GPUs.
    pub fn hold(&mut self, spec: &JobSpec) {
        if let Some(map) = &mut self.holdings {
            map.entry(spec.tags.tenant.clone()).or_default().add(spec);
        }
    }

    /// A job let its GPUs go.
    pub fn unhold(&mut self, spec: &JobSpec) {
        let Some(map) = &mut self.holdings else { return };
        let Some(entry) = map.get_mut(&spec.tags.tenant) else {
            self.holdings = None;
            return;
        };
        entry.remove(spec);
        if entry.jobs == 0 {
            map.remove(&spec.tags.tenant);
        }
    }

    /// Anything may have moved a save sooner (the policy changed): the next
    /// event looks at every running job again.
    pub fn wake_checkpoints(&mut self) {
        self.checkpoint_due = None;
    }
}
