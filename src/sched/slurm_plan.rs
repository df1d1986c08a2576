//! The room's order and placement for a Slurm cluster's pending GPU jobs:
//! the same disciplines that order the room's own queue rank Slurm's pending
//! jobs, and in that order each one that fits now is given a node by price
//! tier (reserved, then spot, then on-demand) and the placement policy; one
//! that cannot be interrupted never gets a spot node. The ranks become
//! Slurm priorities in `sched::slurm_priorities`.
//!
//! Pure: it reads a snapshot, the nodes' billing and the room's scheduling
//! settings and returns the plan. Whether it is only shown or carried out is
//! `room::slurm_govern`'s business.

use std::collections::{BTreeMap, BTreeSet};

use super::config::{FitPolicy, Resources, SchedConfig};
use super::discipline::OrderContext;
use super::slurm_shards::{NodeSpare, shares};
use crate::domain::cluster::BillingMode;
use crate::domain::discipline::DisciplineKind;
use crate::domain::event::TenantSpec;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{Job, JobClass, JobSpec, PoolPreference};
use crate::domain::slurm::{SlurmJob, SlurmSnapshot, SlurmState};
use crate::domain::units::{At, Mib};

/// A Slurm node as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteNode {
    pub name: String,
    pub partitions: Vec<String>,
    pub gpus: u32,
    /// What is free on it: whole GPUs, shards GPU by GPU, CPUs.
    pub spare: NodeSpare,
    pub gpu_type: Option<String>,
    pub billing: BillingMode,
    /// Takes work (not drained, down or failed); a powered-off CLOUD node
    /// does, once Slurm wakes it for the job placed there.
    pub usable: bool,
    /// A CLOUD node Slurm powered off: used after every awake node, since
    /// the job waits for it to boot.
    pub asleep: bool,
}

/// What the plan is made with besides the snapshot.
pub struct PlanInput<'a> {
    pub now: At,
    pub discipline: DisciplineKind,
    pub sched: &'a SchedConfig,
    pub tenants: &'a BTreeMap<TenantId, TenantSpec>,
    pub nodes: Vec<SiteNode>,
    pub uninterruptible_partitions: &'a [String],
    /// Accounts whose pending jobs wait for their budget: not ordered.
    pub stopped_accounts: BTreeSet<String>,
}

/// Where the room wants a pending job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// It fits now: on this node, in this partition.
    Node { node: String, partition: String },
    /// It waits; when capacity frees it may run in these partitions (`None`:
    /// those it asked for), never on these nodes.
    Wait { partitions: Option<Vec<String>>, exclude: Vec<String> },
    /// It runs on several nodes (`-N`, or more GPUs than one node has): on
    /// these, in this partition, when they have room now; else (`nodes`
    /// empty) Slurm spreads it when it can, in the room's order, never on
    /// `exclude`.
    Span { nodes: Vec<String>, partitions: Option<Vec<String>>, exclude: Vec<String> },
}

/// One pending job in the room's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub job: u64,
    /// 1 for the first.
    pub rank: u32,
    pub target: Target,
    pub why: String,
}

/// Pending jobs the room orders: waiting for GPUs, not held (a held job
/// waits for a person or a budget, not for the queue) unless held for the
/// room to admit it.
pub fn ordered_here(job: &SlurmJob) -> bool {
    job.state == SlurmState::Pending && (job.gpus > 0 || job.shards > 0) && (!job.held() || job.awaits_admission())
}

/// Jobs whose reason says only capacity or order stands in their way.
fn waits_for_capacity(job: &SlurmJob) -> bool {
    job.awaits_admission() || matches!(job.reason.as_str(), "Resources" | "Priority" | "None" | "ReqNodeNotAvail" | "BadConstraints" | "PartitionConfig" | "")
}

/// The tier's place in the order capacity is used: what is paid for anyway
/// first, then the cheap and interruptible, then list price.
fn tier(billing: BillingMode) -> u8 {
    match billing {
        BillingMode::Reserved => 0,
        BillingMode::Spot => 1,
        BillingMode::OnDemand => 2,
    }
}

/// A Slurm job as a job of the room's queue, for the disciplines: its
/// account is its tenant, `priority=N` in its comment its priority.
fn as_job(job: &SlurmJob, now: At) -> Job {
    let priority = job
        .comment
        .split([',', ';', ' '])
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("priority"))
        .and_then(|(_, v)| v.trim().parse::<i32>().ok())
        .unwrap_or(0);
    let spec = JobSpec {
        id: JobId::slurm(job.id),
        name: job.name.clone(),
        tags: job.tags(),
        class: JobClass::Training,
        gpus: u8::try_from(job.gpus).unwrap_or(u8::MAX),
        gpu_mem: Mib(0),
        exclusive: true,
        steps_total: 1,
        priority,
        pool: PoolPreference::Any,
        checkpoint_size: Mib(0),
        cpus: 0,
        host_mem: Mib(0),
        est_runtime: job.time_limit,
        gpu_models: Vec::new(),
    };
    let mut queued = Job::new(spec, job.submitted.unwrap_or(now));
    queued.requeues = job.restarts;
    queued
}

/// The pending GPU jobs in the room's discipline's order.
pub fn rank(snapshot: &SlurmSnapshot, input: &PlanInput<'_>) -> Vec<u64> {
    let jobs: Vec<Job> =
        snapshot.jobs.iter().filter(|j| ordered_here(j) && !input.stopped_accounts.contains(&j.tags().tenant.0)).map(|j| as_job(j, input.now)).collect();
    let mut held: BTreeMap<TenantId, Resources> = BTreeMap::new();
    for job in snapshot.jobs.iter().filter(|j| j.holds_gpus()) {
        held.entry(job.tags().tenant).or_default().add(Resources { gpus: f64::from(job.gpus), ..Resources::default() });
    }
    let capacity = Resources { gpus: input.nodes.iter().filter(|n| n.usable).map(|n| f64::from(n.gpus)).sum(), ..Resources::default() };
    let ctx = OrderContext { now: input.now, config: input.sched, held: &held, capacity };
    let mut order: Vec<&Job> = jobs.iter().collect();
    input.discipline.discipline().order(&mut order, &ctx);
    order.into_iter().filter_map(|j| j.spec.id.slurm_id()).collect()
}

/// Free GPUs a node's typical asks cannot use: for each GPU count the
/// pending jobs ask (weighted by how many ask it), the free GPUs of a node
/// with fewer than that many free (whole GPUs: FGD's measure without sharing).
fn fragmented(free: u32, shapes: &BTreeMap<u32, u32>) -> u64 {
    shapes.iter().filter(|(size, _)| free < **size).map(|(_, n)| u64::from(*n) * u64::from(free)).sum()
}

/// The room's plan: the order, and where each job that fits now goes.
pub fn plan(snapshot: &SlurmSnapshot, input: &PlanInput<'_>) -> Vec<Planned> {
    let order = rank(snapshot, input);
    let by_id: BTreeMap<u64, &SlurmJob> = snapshot.jobs.iter().map(|j| (j.id, j)).collect();
    let mut shapes: BTreeMap<u32, u32> = BTreeMap::new();
    for id in &order {
        if let Some(j) = by_id.get(id) {
            *shapes.entry(j.gpus).or_default() += 1;
        }
    }
    let mut spare: BTreeMap<&str, NodeSpare> = input.nodes.iter().filter(|n| n.usable).map(|n| (n.name.as_str(), n.spare.clone())).collect();
    let spot: BTreeSet<&str> = input.nodes.iter().filter(|n| n.billing == BillingMode::Spot).map(|n| n.name.as_str()).collect();
    let stable_partitions: Vec<String> = {
        let mut p: Vec<String> = input
            .nodes
            .iter()
            .filter(|n| n.billing != BillingMode::Spot)
            .flat_map(|n| n.partitions.iter().cloned())
            .filter(|p| input.nodes.iter().filter(|n| n.partitions.contains(p)).all(|n| n.billing != BillingMode::Spot))
            .collect();
        p.sort();
        p.dedup();
        p
    };
    let mut out = Vec::with_capacity(order.len());
    // EASY backfill, as the room's own queue (`sched::backfill`): the first
    // job that waits for capacity holds a node; a later one may use that
    // node only in the GPUs the held one leaves spare or if its time limit
    // ends before the hold falls due. Without it, small jobs of an account
    // already above its share keep taking the GPUs a larger ask waits for.
    let mut hold: Option<Hold> = None;
    for (i, id) in order.iter().enumerate() {
        let Some(job) = by_id.get(id) else { continue };
        let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let interruptible = job.interruptible(input.uninterruptible_partitions);
        let asked = job.partitions();
        // Work that cannot be interrupted asked only for spot partitions: it
        // is moved to the stable ones rather than left where it must not run.
        let asked_only_spot =
            !asked.is_empty() && asked.iter().all(|p| input.nodes.iter().filter(|n| n.partitions.contains(p)).all(|n| n.billing == BillingMode::Spot));
        let allowed: Vec<String> = if !interruptible && asked_only_spot { stable_partitions.clone() } else { asked.clone() };
        let may_run = |n: &SiteNode| {
            n.usable
                && (interruptible || n.billing != BillingMode::Spot)
                && n.partitions.iter().any(|p| allowed.is_empty() || allowed.contains(p))
                && job.gpu_type.as_ref().is_none_or(|t| n.gpu_type.as_ref() == Some(t))
                && !job.excluded.contains(&n.name)
                && (job.required.is_empty() || job.required.contains(&n.name))
        };
        let fits: Vec<&SiteNode> = input.nodes.iter().filter(|n| may_run(n) && spare.get(n.name.as_str()).is_some_and(|r| r.fits(job))).collect();
        let held_back = hold.as_ref().filter(|h| !fits.is_empty() && fits.iter().all(|n| !h.allows(&n.name, job, input.now))).map(|h| (h.job, h.node.clone()));
        let candidates = fits.into_iter().filter(|n| hold.as_ref().is_none_or(|h| h.allows(&n.name, job, input.now)));
        let chosen = if waits_for_capacity(job) {
            candidates.min_by_key(|n| {
                let r = spare.get(n.name.as_str()).cloned().unwrap_or_default();
                let growth = match input.sched.fit {
                    FitPolicy::Fragmentation if !shares(job) => {
                        fragmented(r.gpus.saturating_sub(job.gpus), &shapes) as i64 - fragmented(r.gpus, &shapes) as i64
                    }
                    _ => 0,
                };
                // Shards go where GPUs are shared already, keeping whole ones whole.
                let left = if input.sched.fit == FitPolicy::FirstFit && !shares(job) { 0 } else { r.left_after(job) };
                // ... and on the node with the fewest whole GPUs left to break.
                let whole = if shares(job) { r.gpus } else { 0 };
                (n.asleep, tier(n.billing), growth, left, whole, n.name.clone())
            })
        } else {
            None
        };
        let exclude: Vec<String> = if interruptible { Vec::new() } else { spot.iter().map(|s| s.to_string()).collect() };
        let widest = input.nodes.iter().filter(|n| may_run(n)).map(|n| n.gpus).max().unwrap_or(0);
        let span = if widest > 0 && job.gpus > widest { job.node_count.max(job.gpus.div_ceil(widest)) } else { job.node_count.max(1) };
        if span > 1 {
            // Its share on each node; Slurm keeps a job's nodes in one partition.
            let part = SlurmJob { gpus: job.gpus.div_ceil(span), cpus: job.cpus.div_ceil(span), time_limit: job.time_limit, ..SlurmJob::default() };
            let mut room: Vec<&SiteNode> = input
                .nodes
                .iter()
                .filter(|n| may_run(n) && spare.get(n.name.as_str()).is_some_and(|r| r.fits(&part)))
                .filter(|n| hold.as_ref().is_none_or(|h| h.allows(&n.name, &part, input.now)))
                .collect();
            room.sort_by_key(|n| (n.asleep, tier(n.billing), spare.get(n.name.as_str()).map_or(0, |r| r.left_after(&part)), n.name.clone()));
            let mut partitions: Vec<&String> = room.iter().flat_map(|n| &n.partitions).filter(|p| allowed.is_empty() || allowed.contains(p)).collect();
            partitions.dedup();
            let placed = waits_for_capacity(job)
                .then(|| {
                    partitions.into_iter().find_map(|p| {
                        let nodes: Vec<&SiteNode> = room.iter().copied().filter(|n| n.partitions.contains(p)).take(span as usize).collect();
                        (nodes.len() == span as usize).then(|| (nodes, p.clone()))
                    })
                })
                .flatten();
            let wide = if span > job.node_count.max(1) { format!(", more than a node has ({widest})") } else { String::new() };
            let (nodes, partitions, why) = match placed {
                Some((nodes, partition)) => {
                    for n in &nodes {
                        if let Some(r) = spare.get_mut(n.name.as_str()) {
                            r.take(&part);
                        }
                    }
                    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
                    let why = format!("{} GPU(s) on each of {span} nodes{wide}", part.gpus);
                    let partitions = (!job.partitions().contains(&partition)).then(|| vec![partition]);
                    (names, partitions, why)
                }
                None => {
                    let why = format!("{} GPUs over {span} nodes{wide}: Slurm spreads it when they free, in this order", job.gpus);
                    (Vec::new(), (allowed != asked).then_some(allowed), why)
                }
            };
            out.push(Planned { job: *id, rank, target: Target::Span { nodes, partitions, exclude }, why });
            continue;
        }
        let (target, why) = match chosen {
            Some(n) => {
                if let Some(r) = spare.get_mut(n.name.as_str()) {
                    r.take(job);
                }
                if let Some(h) = hold.as_mut().filter(|h| h.node == n.name && job.time_limit.is_none_or(|l| input.now + l.delta() > h.due)) {
                    h.take(&n.name, whole(job));
                }
                let partition = n.partitions.iter().find(|p| allowed.is_empty() || allowed.contains(p)).cloned().unwrap_or_default();
                let asleep = if n.asleep { ", powered off: Slurm wakes it" } else { "" };
                let ask = if shares(job) { format!("{} GPU shard(s)", job.shards) } else { format!("{} GPU(s)", job.gpus) };
                let why = format!("{ask} free ({}{asleep}){}", billing_word(n.billing), if interruptible { "" } else { "; cannot be interrupted" });
                (Target::Node { node: n.name.clone(), partition }, why)
            }
            None => {
                if hold.is_none() && waits_for_capacity(job) && !shares(job) {
                    let free: BTreeMap<&str, u32> = spare.iter().map(|(n, r)| (*n, r.gpus)).collect();
                    hold = Hold::earliest(job.id, snapshot, input.nodes.iter().filter(|n| may_run(n)), &free, job.gpus, input.now);
                }
                let why = if let Some((first, node)) = held_back {
                    format!("fits, but {node} is held for job {first}, ranked ahead")
                } else if !waits_for_capacity(job) {
                    format!("waits for {}", job.reason)
                } else if !interruptible {
                    "waits for a GPU off spot (cannot be interrupted)".to_string()
                } else if let Some(h) = hold.as_ref().filter(|h| h.job == job.id) {
                    format!("waits for GPUs; {} held for it (free by {} at the time limits)", h.node, h.due.format("%H:%M:%SZ"))
                } else {
                    "waits for GPUs".to_string()
                };
                let partitions = (allowed != asked).then_some(allowed);
                (Target::Wait { partitions, exclude }, why)
            }
        };
        out.push(Planned { job: *id, rank, target, why });
    }
    out
}

/// The node and time the first blocked job is held for.
struct Hold {
    job: u64,
    node: String,
    due: At,
    /// GPUs free on the node at `due` beyond the held job's ask.
    spare: u32,
}

impl Hold {
    /// Where the job could start soonest if running jobs end at their time
    /// limits (a job with none never ends): the free GPUs now, then each
    /// ending job's, in order of its end.
    fn earliest<'a>(
        job: u64,
        snapshot: &SlurmSnapshot,
        nodes: impl Iterator<Item = &'a SiteNode>,
        free: &BTreeMap<&str, u32>,
        need: u32,
        now: At,
    ) -> Option<Hold> {
        let mut best: Option<Hold> = None;
        for node in nodes.filter(|n| n.gpus >= need) {
            let mut ends: Vec<(At, u32)> = snapshot
                .jobs
                .iter()
                .filter(|j| j.holds_gpus() && j.nodes.len() == 1 && j.nodes[0] == node.name)
                .filter_map(|j| Some(((j.started? + j.time_limit?.delta()).max(now), j.gpus)))
                .collect();
            ends.sort();
            let mut have = free.get(node.name.as_str()).copied().unwrap_or(0);
            let mut due = now;
            for (end, gpus) in ends {
                if have >= need {
                    break;
                }
                have += gpus;
                due = end;
            }
            if have >= need && best.as_ref().is_none_or(|b| (due, &node.name) < (b.due, &b.node)) {
                best = Some(Hold { job, node: node.name.clone(), due, spare: have - need });
            }
        }
        best
    }

    /// Whether `job` may take GPUs on `node` now without delaying the hold.
    fn allows(&self, node: &str, job: &SlurmJob, now: At) -> bool {
        node != self.node || whole(job) <= self.spare || job.time_limit.is_some_and(|limit| now + limit.delta() <= self.due)
    }

    /// The hold's GPUs are taken by a job placed in the spare ones.
    fn take(&mut self, node: &str, gpus: u32) {
        if node == self.node {
            self.spare = self.spare.saturating_sub(gpus);
        }
    }
}

/// The whole GPUs a job can keep from others: a sharing job may take a
/// GPU out of whole use.
fn whole(job: &SlurmJob) -> u32 {
    if shares(job) { 1 } else { job.gpus }
}

fn billing_word(billing: BillingMode) -> &'static str {
    match billing {
        BillingMode::Reserved => "reserved",
        BillingMode::Spot => "spot",
        BillingMode::OnDemand => "on-demand",
    }
}

#[cfg(test)]
#[path = "slurm_plan_tests.rs"]
mod tests;
