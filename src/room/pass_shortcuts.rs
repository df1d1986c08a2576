//! The shortcuts that keep a scheduling pass from trying every job of a
//! long queue (issue 38): tenants whose queued jobs can do nothing in the
//! pass are passed over, and the pass stops once no job of the queue's
//! shapes fits anywhere it may go. Both rest on the queue's classes
//! (`QueueShapes`) and on two monotone facts: a job asking more of every
//! resource is admitted and fits no better, and nodes only fill during a
//! pass. A pass with its shortcuts places exactly what one that tries
//! every job places (`derived_tests` holds them side by side).
//!
//! Owns only these answers; what a pass does with them is `sched`'s.

use std::collections::{BTreeMap, BTreeSet};

use super::headroom::Headroom;
use super::queue_shapes::QueueShapes;
use crate::domain::cluster::Node;
use crate::domain::event::TenantSpec;
use crate::domain::ids::{NodeId, TenantId};
use crate::domain::job::{Job, JobSpec, Tags};
use crate::domain::units::At;
use crate::sched::backfill::Reservation;
use crate::sched::placement::{self, Options};
use crate::sched::quota::{self, Admission, Held};

/// What a tenant's queued jobs may do in a pass (`Shortcuts::tenant_doors`).
#[derive(Clone, Copy, Debug)]
pub struct Open {
    /// One may be admitted within the tenant's quota: it may start, or block
    /// the queue and reserve room.
    pub within: bool,
    /// One fits somewhere now and its quota does not refuse it (it may
    /// start as a borrower, if not within quota).
    pub fits: bool,
}

/// Per tenant with jobs queued, what its jobs may do, as of its last
/// placement in the pass (nodes only fill during a pass, so a door found
/// shut stays shut). A tenant with both doors shut is passed over: each of
/// its jobs would be skipped, refused, or tried as a borrower that fits
/// nowhere.
#[derive(Default)]
pub(super) struct Doors {
    within: BTreeSet<TenantId>,
    shut: BTreeSet<TenantId>,
}

impl Doors {
    pub(super) fn set(&mut self, tenant: TenantId, open: Open) {
        match (open.within, open.fits) {
            (false, false) => {
                self.within.remove(&tenant);
                self.shut.insert(tenant);
            }
            (true, _) => {
                self.shut.remove(&tenant);
                self.within.insert(tenant);
            }
            (false, true) => {
                self.within.remove(&tenant);
                self.shut.remove(&tenant);
            }
        }
    }

    pub(super) fn passed_over(&self, tenant: &TenantId) -> bool {
        self.shut.contains(tenant)
    }

    /// No queued job can be admitted within its tenant's quota any more.
    pub(super) fn none_within(&self) -> bool {
        self.within.is_empty()
    }
}

/// Jobs a pass tries in a row without placing one before it asks whether
/// anything in the queue can start at all: enough that a pass placing
/// steadily never asks, few against a queue of 100,000.
pub(super) const STOP_CHECK_AFTER: u32 = 64;

impl Open {
    /// Every door open: what a pass without shortcuts assumes.
    pub const ALL: Open = Open { within: true, fits: true };
}

/// What the answers read: the nodes, the queue's classes, the tenants'
/// quotas, placement's options, and whether a tenant's budget lets its
/// work be placed.
pub struct Shortcuts<'a> {
    pub nodes: &'a BTreeMap<NodeId, Node>,
    pub shapes: &'a QueueShapes,
    pub quotas: &'a BTreeMap<TenantId, TenantSpec>,
    pub opts: Options<'static>,
    pub budget_allows: &'a dyn Fn(&TenantId) -> bool,
    /// Copied into every probe (`probe_template`).
    pub template: &'a JobSpec,
}

/// A queued job's spec without its names, for the class probes to copy
/// cheaply (only sizes and pools take part in admission and fitting).
pub fn probe_template(job: &Job) -> JobSpec {
    let tags = Tags { tenant: TenantId(String::new()), project: String::new(), env: String::new(), model: String::new() };
    JobSpec { name: String::new(), tags, gpu_models: Vec::new(), ..job.spec.clone() }
}

impl Shortcuts<'_> {
    /// What the queued jobs of `tenant`, which holds `held`, may do in this
    /// pass. For each class of its jobs the least ask decides, since
    /// admission and fitting are both monotone in every ask. A tenant whose
    /// budget stops its work may do nothing.
    pub fn tenant_doors(&self, tenant: &TenantId, held: Held, headroom: &Headroom) -> Open {
        let (mut within, mut fits) = (false, false);
        if !(self.budget_allows)(tenant) {
            return Open { within, fits };
        }
        let quota = self.quotas.get(tenant);
        for probe in self.shapes.probes_of(tenant, self.template) {
            let admission = quota::admit(&probe.spec, held, quota);
            within = within || admission == Admission::WithinQuota;
            // A class refused even its least job is refused every job.
            fits = fits || (admission != Admission::Refused && self.fits_anywhere(headroom, &probe.spec));
            if within && fits {
                break;
            }
        }
        Open { within, fits }
    }

    /// Whether some queued job might still start in this pass: for each
    /// class of the queue, whether a job asking the least of every ask of
    /// the class fits some node it may use, the backfill reservation
    /// respected. `false` means no queued job can start now: each asks at
    /// least its class's least and fitting is monotone in every ask, so
    /// trying them one by one would place nothing (nor would the borrowers
    /// tried after the queue). A class whose least job its tenant's quota
    /// refuses (`held` is what each tenant holds now) is refused every job.
    pub fn anything_may_start(&self, at: At, held: &BTreeMap<TenantId, Held>, headroom: &Headroom, reservation: &Option<Reservation>, spare_left: u32) -> bool {
        let reserved = reservation.as_ref().map(|r| r.node);
        for probe in self.shapes.probes(self.template) {
            let tenant = &probe.class.tenant;
            let refused = quota::admit(&probe.spec, held.get(tenant).copied().unwrap_or_default(), self.quotas.get(tenant)) == Admission::Refused;
            if refused || !(self.budget_allows)(tenant) || !headroom.may_fit(&probe.spec, false) {
                continue;
            }
            if self.nodes.values().any(|n| Some(n.spec.id) != reserved && self.fits(n, &probe.spec)) {
                return true;
            }
            if let Some(r) = reservation {
                let ends_in_time = probe.secs.is_some_and(|secs| at + secs.delta() <= r.at);
                let spare = probe.spec.exclusive && u32::from(probe.spec.gpus) <= spare_left;
                if (ends_in_time || spare) && self.nodes.get(&r.node).is_some_and(|n| self.fits(n, &probe.spec)) {
                    return true;
                }
            }
        }
        false
    }

    fn fits_anywhere(&self, headroom: &Headroom, spec: &JobSpec) -> bool {
        headroom.may_fit(spec, false) && self.nodes.values().any(|n| self.fits(n, spec))
    }

    fn fits(&self, node: &Node, spec: &JobSpec) -> bool {
        placement::fit_on_node(node, spec, false, &self.opts).is_some()
    }
}
