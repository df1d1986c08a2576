//! The Slurm part of the `View`: partitions with their GPU use, nodes with
//! their GRES GPUs (which indices are in use), jobs with where their GPUs
//! are, how long they have waited or run, the policy's advice and the
//! outcome of the last command sent for them. Every text from Slurm is
//! cleaned of control characters here, before any console sees it.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::slurm::SlurmMirror;
use crate::domain::event::TenantSpec;
use crate::domain::ids::TenantId;
use crate::domain::slurm::{SlurmJob, SlurmMode, SlurmPolicy, SlurmState};
use crate::domain::text::clean;
use crate::domain::units::{At, Secs};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmView {
    pub cluster: String,
    pub version: String,
    pub mode: SlurmMode,
    /// "requeue" or "suspend".
    pub preempt_by: String,
    pub seen_at: Option<At>,
    /// Why the newest poll failed, while it does: what is shown is older.
    pub stale: Option<String>,
    pub partitions: Vec<SlurmPartitionRow>,
    pub nodes: Vec<SlurmNodeRow>,
    /// Running and suspended first (by node), then pending by priority, then
    /// the recently finished that Slurm still lists.
    pub jobs: Vec<SlurmJobRow>,
    pub accounts: Vec<SlurmAccountRow>,
    pub commands_in_flight: usize,
    /// The room is Slurm's policy: its discipline's name ("drf").
    #[serde(default)]
    pub governs: Option<String>,
    /// Starts Slurm made in the room's order, and those that broke it.
    #[serde(default)]
    pub followed: u64,
    #[serde(default)]
    pub out_of_order: u64,
}

/// The cluster at a glance, for the header and the wall.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmTotals {
    pub gpus: u32,
    pub gpus_used: u32,
    /// GPU jobs pending and not held: what Slurm has yet to place.
    pub pending: usize,
    /// The longest of their waits.
    pub oldest_wait: Option<Secs>,
}

impl SlurmView {
    pub fn totals(&self) -> SlurmTotals {
        let waiting = || self.jobs.iter().filter(|j| j.state == SlurmState::Pending && !j.held && (j.gpus > 0 || j.shards > 0));
        SlurmTotals {
            gpus: self.nodes.iter().map(|n| n.gpus).sum(),
            gpus_used: self.nodes.iter().map(|n| n.gpus_used).sum(),
            pending: waiting().count(),
            oldest_wait: waiting().filter_map(|j| j.waited).max(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmPartitionRow {
    pub name: String,
    pub state: String,
    pub default: bool,
    pub nodes: usize,
    pub gpus: u32,
    pub gpus_used: u32,
    pub running: usize,
    pub pending: usize,
    pub pending_gpus: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmNodeRow {
    pub name: String,
    pub state: String,
    pub unavailable: bool,
    pub reason: String,
    pub cpus: u32,
    pub cpus_alloc: u32,
    pub gpus: u32,
    pub gpu_type: Option<String>,
    pub gpus_used: u32,
    /// Per GPU index: the job holding it, if Slurm said which.
    pub gpu_jobs: Vec<Option<u64>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmJobRow {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: SlurmState,
    pub held: bool,
    pub reason: String,
    pub gpus: u32,
    /// GPU shards it asks or holds (`gres/shard`), sharing a GPU.
    #[serde(default, skip_serializing_if = "crate::domain::slurm::is_zero")]
    pub shards: u32,
    /// "n1[0-1] n2[0-3]", or the node list when Slurm gave no indices.
    pub placement: String,
    /// Time pending (pending jobs) or running (others) as of the snapshot.
    pub waited: Option<Secs>,
    pub ran: Option<Secs>,
    pub restarts: u32,
    /// What gpuroom's policy would do, and why.
    pub advice: Option<String>,
    /// The last command sent for it: "requeue by alice: done", "… failed: why".
    pub command: Option<String>,
    pub command_failed: bool,
    pub in_flight: bool,
    /// Its place in the room's order (pending, governed).
    #[serde(default)]
    pub rank: Option<u32>,
    /// Where the room sends it and why, or how it keeps it saved on spot.
    #[serde(default)]
    pub plan: Option<String>,
    /// On spot and asked to save without ever answering, or on spot though
    /// it cannot be interrupted: shown as an alarm.
    #[serde(default)]
    pub plan_alarm: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmAccountRow {
    pub account: String,
    /// None: no gpuroom tenant for it (it owns nothing; all it holds is borrowed).
    pub quota: Option<u32>,
    pub holding: u32,
    pub pending_gpus: u32,
}

/// "n1[0-1]" from a node and its GPU indices.
fn placement(job: &SlurmJob) -> String {
    if job.gpu_idx.is_empty() {
        return job.nodes.iter().map(|n| clean(n)).collect::<Vec<_>>().join(" ");
    }
    job.gpu_idx
        .iter()
        .map(|(node, idx)| {
            let list = crate::domain::slurm::compress_indices(idx);
            format!("{}[{list}]", clean(node))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Running first (by node), then pending in the room's order where it
/// governs (else Slurm's priority), then the rest.
fn order(job: &SlurmJob, mirror: &SlurmMirror) -> (u8, String, u32, std::cmp::Reverse<u64>, u64) {
    let group = match job.state {
        SlurmState::Running | SlurmState::Completing => 0,
        SlurmState::Suspended => 1,
        SlurmState::Pending => 2,
        _ => 3,
    };
    let node = job.nodes.first().cloned().unwrap_or_default();
    let rank = mirror.govern.plan.get(&job.id).map_or(u32::MAX, |p| p.rank);
    (group, node, rank, std::cmp::Reverse(job.priority), job.id)
}

/// The room's plan for a job, in words: where it goes and why (pending), how
/// it is kept saved on spot (running), whether Slurm started it in order.
fn plan_words(mirror: &SlurmMirror, job: &SlurmJob, at: Option<At>, grace: Secs) -> (Option<String>, bool) {
    if let Some(p) = mirror.govern.plan.get(&job.id) {
        let whither = p.node.as_ref().map(|n| format!("→ {}: ", clean(n))).unwrap_or_default();
        return (Some(format!("#{} {whither}{}", p.rank, p.why)), false);
    }
    let mut words = Vec::new();
    let mut alarm = false;
    if let (Some(s), Some(at)) = (mirror.saves.get(&job.id), at) {
        if !s.interruptible {
            words.push("on spot but cannot be interrupted".to_string());
            alarm = true;
        } else if s.not_checkpointing(at, grace) {
            words.push(format!("not checkpointing (asked {})", s.unanswered.map(|u| u.format("%H:%M:%S").to_string()).unwrap_or_default()));
            alarm = true;
        } else {
            let due = (s.next_due - at).num_seconds();
            words.push(if due > 0 { format!("ckpt in {}", Secs(due)) } else { "ckpt due".to_string() });
        }
        words.push(match s.saved {
            Some(saved) => format!("saved {} ago", Secs((at - saved).num_seconds().max(0))),
            None => "never saved".to_string(),
        });
        words.push(format!("{} GPU·s at risk", s.at_risk(at)));
        if let (Some(cap), Some(market)) = (s.cap, s.market) {
            words.push(format!("cap {cap} vs {market}{}", if s.moving { ", moving off" } else { "" }));
        }
    }
    if let Some(start) = mirror.govern.starts.iter().rev().find(|s| s.job == job.id)
        && job.holds_gpus()
    {
        words.push(match &start.broke {
            None => format!("started in order (#{})", start.rank),
            Some(why) => {
                alarm = true;
                format!("out of order: {why}")
            }
        });
    }
    ((!words.is_empty()).then(|| words.join(" · ")), alarm)
}

/// The Slurm pane's view of the mirror, with the room's policy and tenants.
pub fn slurm_view(mirror: &SlurmMirror, policy: &SlurmPolicy, tenants: &BTreeMap<TenantId, TenantSpec>, discipline: &str) -> Option<SlurmView> {
    let snapshot = mirror.snapshot.as_ref()?;
    let at = mirror.seen_at;
    let secs_since = |t: Option<At>| Some(Secs((at? - t?).num_seconds().max(0)));
    let mut jobs: Vec<&SlurmJob> = snapshot.jobs.iter().collect();
    jobs.sort_by_key(|j| order(j, mirror));
    let rows = jobs
        .iter()
        .map(|j| {
            let record = mirror.last.get(&j.id);
            let command = record.map(|r| {
                let how = match &r.outcome {
                    None => "on its way".to_string(),
                    Some(Ok(_)) => "done".to_string(),
                    Some(Err(e)) => e.rsplit_once("failed: ").map_or(e.clone(), |(_, why)| format!("failed: {why}")),
                };
                format!("{} by {}: {how}", r.verb, clean(&r.by))
            });
            let (plan, plan_alarm) = plan_words(mirror, j, at, policy.checkpoint_grace);
            SlurmJobRow {
                rank: mirror.govern.plan.get(&j.id).map(|p| p.rank),
                plan,
                plan_alarm,
                id: j.id,
                name: clean(&j.name),
                user: clean(&j.user),
                account: clean(&j.account),
                partition: clean(&j.partition),
                state: j.state.clone(),
                held: j.held(),
                reason: clean(&j.reason),
                gpus: j.gpus,
                shards: j.shards,
                placement: placement(j),
                waited: if j.state == SlurmState::Pending { secs_since(j.submitted) } else { None },
                ran: if j.holds_gpus() { secs_since(j.started) } else { None },
                restarts: j.restarts,
                advice: mirror
                    .advice
                    .get(&j.id)
                    .map(|a| format!("{} for job {}: {}", a.verb, a.for_job, a.why))
                    .or_else(|| mirror.acts.proposals.get(&j.id).map(|a| format!("{}: {}", a.verb, a.why))),
                command_failed: matches!(record.and_then(|r| r.outcome.as_ref()), Some(Err(_))),
                in_flight: mirror.in_flight.values().any(|c| c.job == j.id),
                command,
            }
        })
        .collect();
    let nodes = snapshot
        .nodes
        .iter()
        .map(|n| {
            let mut gpu_jobs = vec![None; n.gpus as usize];
            for job in snapshot.jobs.iter().filter(|j| j.holds_gpus()) {
                for (_, idx) in job.gpu_idx.iter().filter(|(node, _)| node == &n.name) {
                    for i in idx {
                        if let Some(slot) = gpu_jobs.get_mut(*i as usize) {
                            *slot = Some(job.id);
                        }
                    }
                }
            }
            SlurmNodeRow {
                name: clean(&n.name),
                state: clean(&n.state),
                unavailable: n.unavailable(),
                reason: clean(&n.reason),
                cpus: n.cpus,
                cpus_alloc: n.cpus_alloc,
                gpus: n.gpus,
                gpu_type: n.gpu_type.as_deref().map(clean),
                gpus_used: n.gpus_used,
                gpu_jobs,
            }
        })
        .collect();
    let partitions = snapshot
        .partitions
        .iter()
        .map(|p| {
            let members: Vec<_> = snapshot.nodes.iter().filter(|n| p.nodes.contains(&n.name)).collect();
            let in_it: Vec<_> = snapshot.jobs.iter().filter(|j| j.partition == p.name).collect();
            let pending: Vec<_> = in_it.iter().filter(|j| j.state == SlurmState::Pending).collect();
            SlurmPartitionRow {
                name: clean(&p.name),
                state: clean(&p.state),
                default: p.default,
                nodes: members.len(),
                gpus: members.iter().map(|n| n.gpus).sum(),
                gpus_used: members.iter().map(|n| n.gpus_used).sum(),
                running: in_it.iter().filter(|j| j.holds_gpus()).count(),
                pending: pending.len(),
                pending_gpus: pending.iter().map(|j| j.gpus).sum(),
            }
        })
        .collect();
    let holding = crate::sched::slurm_advice::usage(snapshot);
    let mut names: Vec<&str> = snapshot.jobs.iter().filter(|j| j.active()).map(|j| j.account.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let accounts = names
        .into_iter()
        .map(|a| SlurmAccountRow {
            account: clean(a),
            quota: tenants.get(&TenantId(a.to_string())).map(|t| t.quota_gpus),
            holding: holding.get(a).copied().unwrap_or(0),
            pending_gpus: snapshot.jobs.iter().filter(|j| j.account == a && j.state == SlurmState::Pending).map(|j| j.gpus).sum(),
        })
        .collect();
    Some(SlurmView {
        cluster: clean(&snapshot.cluster),
        version: clean(&snapshot.version),
        mode: policy.mode,
        preempt_by: policy.preempt_by.verb().name().to_string(),
        seen_at: at,
        stale: mirror.stale.clone(),
        partitions,
        nodes,
        jobs: rows,
        accounts,
        commands_in_flight: mirror.in_flight.len(),
        governs: policy.govern.then(|| discipline.to_string()),
        followed: mirror.govern.followed,
        out_of_order: mirror.govern.out_of_order,
    })
}
