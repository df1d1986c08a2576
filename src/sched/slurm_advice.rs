//! gpuroom's quota policy applied to a Slurm cluster: tenants (Slurm
//! accounts) own a number of GPUs and may borrow idle ones beyond it; when a
//! tenant's pending job fits within its quota but not on the free GPUs, the
//! borrowers' newest jobs on one node of its partition are preempted to make
//! exactly that room — never partial room, never an owner's quota.
//!
//! Pure: it reads a snapshot and the tenants and returns advice. Whether the
//! advice is only shown or issued is the room's business (room::slurm).

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::event::TenantSpec;
use crate::domain::ids::TenantId;
use crate::domain::slurm::{SlurmJob, SlurmSnapshot, SlurmState};

/// One thing gpuroom would ask Slurm to do, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advice {
    /// The job to preempt.
    pub job: u64,
    /// The pending job it makes room for.
    pub for_job: u64,
    pub why: String,
}

/// Reasons a pending job waits for GPUs (not for a dependency, a hold, a
/// start time or a limit of its own).
fn waits_for_gpus(job: &SlurmJob) -> bool {
    job.state == SlurmState::Pending && job.gpus > 0 && matches!(job.reason.as_str(), "Resources" | "Priority" | "None" | "ReqNodeNotAvail")
}

/// GPUs each account holds now (running, suspended and completing jobs).
pub fn usage(snapshot: &SlurmSnapshot) -> BTreeMap<String, u32> {
    let mut held = BTreeMap::new();
    for job in snapshot.jobs.iter().filter(|j| j.holds_gpus()) {
        *held.entry(job.account.clone()).or_insert(0u32) += job.gpus;
    }
    held
}

fn quota_of(tenants: &BTreeMap<TenantId, TenantSpec>, account: &str) -> u32 {
    // An account gpuroom has no tenant for owns nothing: all it holds is borrowed.
    tenants.get(&TenantId(account.to_string())).map_or(0, |t| t.quota_gpus)
}

/// Where a waiting job may run beyond its partitions: work that cannot be
/// interrupted (`ckpt=no`, or only uninterruptible partitions) is never given
/// a spot node, so no job is preempted there for it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Site<'a> {
    pub spot_nodes: &'a [String],
    pub uninterruptible_partitions: &'a [String],
}

/// What to preempt so that tenants within their quota get their GPUs back.
/// `busy`: jobs a command that frees GPUs (requeue, cancel, migrate) is on
/// its way for: their GPUs are counted as free already, so nobody else is
/// preempted for the same room.
pub fn reclaim(snapshot: &SlurmSnapshot, tenants: &BTreeMap<TenantId, TenantSpec>, busy: &BTreeSet<u64>, site: Site<'_>) -> Vec<Advice> {
    let mut held = usage(snapshot);
    let mut free: BTreeMap<&str, u32> =
        snapshot.nodes.iter().filter(|n| !n.unavailable()).map(|n| (n.name.as_str(), n.gpus.saturating_sub(n.gpus_used))).collect();
    // Completing jobs are ending: their GPUs are as good as free.
    for job in snapshot.jobs.iter().filter(|j| (busy.contains(&j.id) || j.state == SlurmState::Completing) && j.holds_gpus()) {
        if let Some(h) = held.get_mut(&job.account) {
            *h = h.saturating_sub(job.gpus);
        }
        if let [node] = job.nodes.as_slice()
            && let Some(f) = free.get_mut(node.as_str())
        {
            *f = f.saturating_add(job.gpus);
        }
    }
    let mut taken: BTreeSet<u64> = busy.clone();
    // A job held for the room's admission waits for GPUs as much as any.
    let mut waiting: Vec<&SlurmJob> = snapshot.jobs.iter().filter(|j| (waits_for_gpus(j) || j.awaits_admission()) && !busy.contains(&j.id)).collect();
    // Slurm's own order: priority, then age.
    waiting.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.submitted.cmp(&b.submitted)).then(a.id.cmp(&b.id)));
    let mut advice = Vec::new();
    for job in waiting {
        let quota = quota_of(tenants, &job.account);
        let mine = held.get(&job.account).copied().unwrap_or(0);
        if quota == 0 || mine.saturating_add(job.gpus) > quota {
            continue; // beyond its quota it may only borrow what is idle
        }
        // Slurm lists a job submitted to several partitions as `spot,od`.
        let asked = job.partitions();
        let in_asked = |name: &String| snapshot.partitions.iter().any(|p| asked.contains(&p.name) && p.nodes.contains(name));
        let off_spot = !job.interruptible(site.uninterruptible_partitions);
        let mut best: Option<(u32, &str, Vec<&SlurmJob>)> = None;
        for node in
            snapshot.nodes.iter().filter(|n| in_asked(&n.name) && !n.unavailable() && n.gpus >= job.gpus && !(off_spot && site.spot_nodes.contains(&n.name)))
        {
            let idle = free.get(node.name.as_str()).copied().unwrap_or(0);
            if idle >= job.gpus {
                best = None; // it fits already: Slurm will start it
                break;
            }
            let books = Books { tenants, held: &held, taken: &taken };
            let Some(victims) = victims_on(snapshot, &node.name, job, job.gpus - idle, &books, site) else { continue };
            let cost: u32 = victims.iter().map(|v| v.gpus).sum();
            if best.as_ref().is_none_or(|(c, name, _)| (cost, node.name.as_str()) < (*c, name)) {
                best = Some((cost, node.name.as_str(), victims));
            }
        }
        let Some((_, node, victims)) = best else { continue };
        for victim in victims {
            taken.insert(victim.id);
            if let Some(h) = held.get_mut(&victim.account) {
                *h = h.saturating_sub(victim.gpus);
            }
            let over = quota_of(tenants, &victim.account);
            advice.push(Advice {
                job: victim.id,
                for_job: job.id,
                why: format!(
                    "account {} borrows beyond its quota of {over} GPU(s); job {} of {} waits for {} GPU(s) within its quota of {quota} on {node}",
                    victim.account, job.id, job.account, job.gpus
                ),
            });
        }
        *held.entry(job.account.clone()).or_insert(0) += job.gpus;
        if let Some(f) = free.get_mut(node) {
            *f = 0;
        }
    }
    advice
}

/// Who owns what, as the reclaim has counted it so far.
#[derive(Clone, Copy)]
struct Books<'a> {
    tenants: &'a BTreeMap<TenantId, TenantSpec>,
    /// GPUs each account holds.
    held: &'a BTreeMap<String, u32>,
    /// Jobs already chosen (or on their way out).
    taken: &'a BTreeSet<u64>,
}

/// Borrowed work on `node` whose GPUs, newest first, cover `need`; `None`
/// when the borrowed work there is not enough.
fn victims_on<'a>(snapshot: &'a SlurmSnapshot, node: &str, waiting: &SlurmJob, need: u32, books: &Books<'_>, site: Site<'_>) -> Option<Vec<&'a SlurmJob>> {
    let Books { tenants, held, taken } = *books;
    let mut candidates: Vec<&SlurmJob> = snapshot
        .jobs
        .iter()
        .filter(|j| j.state == SlurmState::Running && j.account != waiting.account && !taken.contains(&j.id))
        .filter(|j| j.nodes.len() == 1 && j.nodes[0] == node && j.gpus > 0)
        .collect();
    // Work that can save goes before work that restarts from zero; then the
    // newest first: the least work is lost.
    let loses_all = |j: &SlurmJob| !j.interruptible(site.uninterruptible_partitions);
    candidates.sort_by(|a, b| loses_all(a).cmp(&loses_all(b)).then(b.started.cmp(&a.started)).then(b.id.cmp(&a.id)));
    let mut over: BTreeMap<&str, i64> = BTreeMap::new();
    let mut chosen = Vec::new();
    let mut freed = 0;
    for job in candidates {
        let borrowed = over
            .entry(job.account.as_str())
            .or_insert_with(|| i64::from(held.get(&job.account).copied().unwrap_or(0)) - i64::from(quota_of(tenants, &job.account)));
        // Only what is beyond the quota is borrowed: a job that would take
        // its tenant below its own quota is not preempted.
        if *borrowed < i64::from(job.gpus) {
            continue;
        }
        *borrowed -= i64::from(job.gpus);
        freed += job.gpus;
        chosen.push(job);
        if freed >= need {
            return Some(chosen);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::slurm::{SlurmNode, SlurmPartition};
    use crate::domain::units::Mib;

    fn tenant(name: &str, quota: u32) -> (TenantId, TenantSpec) {
        let id = TenantId(name.to_string());
        (id.clone(), TenantSpec { id, quota_gpus: quota, monthly_budget: crate::domain::units::Micros(0), quota_gpu_mem: Mib(0), borrow_limit_gpus: 8 })
    }

    fn job(id: u64, account: &str, state: SlurmState, gpus: u32, started: i64) -> SlurmJob {
        let running = state == SlurmState::Running;
        SlurmJob {
            id,
            name: format!("j{id}"),
            account: account.into(),
            partition: "gpu".into(),
            reason: if running { "None".into() } else { "Resources".into() },
            state,
            gpus,
            nodes: if running { vec!["n1".into()] } else { vec![] },
            started: running.then(|| chrono::DateTime::from_timestamp(started, 0).unwrap()),
            submitted: chrono::DateTime::from_timestamp(started - 10, 0),
            ..Default::default()
        }
    }

    fn cluster(jobs: Vec<SlurmJob>) -> SlurmSnapshot {
        let used = jobs.iter().filter(|j| j.holds_gpus()).map(|j| j.gpus).sum();
        SlurmSnapshot {
            partitions: vec![SlurmPartition { name: "gpu".into(), state: "UP".into(), nodes: vec!["n1".into()], default: true }],
            nodes: vec![SlurmNode { name: "n1".into(), state: "mixed".into(), gpus: 4, gpus_used: used, ..Default::default() }],
            jobs,
            ..Default::default()
        }
    }

    #[test]
    fn an_owner_within_quota_gets_the_borrowers_newest_jobs_preempted_and_no_more() {
        let tenants: BTreeMap<_, _> = [tenant("a", 2), tenant("b", 2)].into();
        // a holds 4 (2 borrowed) in two jobs; b waits for 2 within its quota.
        let snap = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Running, 2, 200), job(3, "b", SlurmState::Pending, 2, 300)]);
        let advice = reclaim(&snap, &tenants, &BTreeSet::new(), Site::default());
        assert_eq!(advice.len(), 1);
        assert_eq!((advice[0].job, advice[0].for_job), (2, 3), "the newer of a's jobs goes");
        assert!(advice[0].why.contains("account a borrows"), "{}", advice[0].why);
        // Already on its way: its GPUs count as free, nothing more is advised.
        assert!(reclaim(&snap, &tenants, &BTreeSet::from([2]), Site::default()).is_empty());
    }

    #[test]
    fn no_advice_when_the_job_fits_is_beyond_its_quota_or_only_owners_hold_the_gpus() {
        let tenants: BTreeMap<_, _> = [tenant("a", 2), tenant("b", 2)].into();
        let fits = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(3, "b", SlurmState::Pending, 2, 300)]);
        assert!(reclaim(&fits, &tenants, &BTreeSet::new(), Site::default()).is_empty(), "two GPUs are idle");
        let greedy =
            cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Running, 2, 200), job(3, "b", SlurmState::Pending, 3, 300)]);
        assert!(reclaim(&greedy, &tenants, &BTreeSet::new(), Site::default()).is_empty(), "3 GPUs is beyond b's quota of 2");
        let owners: BTreeMap<_, _> = [tenant("a", 4), tenant("b", 2)].into();
        let snap = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Running, 2, 200), job(3, "b", SlurmState::Pending, 2, 300)]);
        assert!(reclaim(&snap, &owners, &BTreeSet::new(), Site::default()).is_empty(), "a is within its own quota");
    }

    #[test]
    fn a_job_already_ending_frees_its_room_and_nobody_else_is_preempted() {
        let tenants: BTreeMap<_, _> = [tenant("a", 2), tenant("b", 2)].into();
        let snap =
            cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Completing, 2, 200), job(3, "b", SlurmState::Pending, 2, 300)]);
        assert!(reclaim(&snap, &tenants, &BTreeSet::new(), Site::default()).is_empty(), "job 2 is completing (requeued): a's job 1 is within quota");
    }

    #[test]
    fn a_job_held_for_admission_in_two_partitions_asks_for_room_off_spot_if_it_cannot_be_interrupted() {
        let tenants: BTreeMap<_, _> = [tenant("a", 2), tenant("b", 2)].into();
        let mut waiting = job(3, "b", SlurmState::Pending, 2, 300);
        (waiting.reason, waiting.admin_comment, waiting.partition) = ("JobHeldAdmin".into(), "gpuroom:admit".into(), "spot,gpu".into());
        // a's older job can save, its newer one cannot: the one that can goes.
        let mut newer = job(2, "a", SlurmState::Running, 2, 200);
        newer.comment = "ckpt=no".into();
        let snap = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), newer, waiting.clone()]);
        let advice = reclaim(&snap, &tenants, &BTreeSet::new(), Site::default());
        assert_eq!(advice.iter().map(|a| (a.job, a.for_job)).collect::<Vec<_>>(), [(1, 3)]);
        // The waiting job cannot be interrupted and n1 is spot: nothing to make room for there.
        waiting.comment = "ckpt=no".into();
        let snap = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Running, 2, 200), waiting]);
        let spot = ["n1".to_string()];
        assert!(reclaim(&snap, &tenants, &BTreeSet::new(), Site { spot_nodes: &spot, uninterruptible_partitions: &[] }).is_empty());
    }

    #[test]
    fn held_and_dependent_jobs_do_not_ask_for_room() {
        let tenants: BTreeMap<_, _> = [tenant("a", 2), tenant("b", 2)].into();
        let mut waiting = job(3, "b", SlurmState::Pending, 2, 300);
        waiting.reason = "JobHeldUser".into();
        let snap = cluster(vec![job(1, "a", SlurmState::Running, 2, 100), job(2, "a", SlurmState::Running, 2, 200), waiting]);
        assert!(reclaim(&snap, &tenants, &BTreeSet::new(), Site::default()).is_empty());
    }
}
