//! The room's handlers for the cluster's events: a node up (new, relaunched
//! or a bought one ready), a node lost (its jobs back to the queue from
//! their last checkpoint, its spot lifetime to the hazard model), a spot
//! interruption notice (the node draining, its jobs saving), a tenant
//! defined, a pool defined, and a live source's status.
//!
//! An `impl Room`; the parts come through `Room`'s lenders.

use super::journal::Severity;
use super::{Room, life, sources};
use crate::domain::capacity::PoolSpec;
use crate::domain::cluster::{BillingMode, Node, NodeSpec, NodeState};
use crate::domain::event::{Effect, TenantSpec};
use crate::domain::ids::NodeId;
use crate::domain::job::{AfterCheckpoint, JobState, StopReason};
use crate::domain::text::clean;
use crate::domain::units::{At, Secs};
use crate::market::hazard::Lifetime;

impl Room {
    pub(super) fn on_tenant(&mut self, spec: &TenantSpec) -> Result<(), String> {
        self.fleet.tenants.insert(spec.id.clone(), spec.clone());
        Ok(())
    }

    pub(super) fn on_pool_defined(&mut self, at: At, pool: &PoolSpec) -> Result<(), String> {
        if pool.node.billing == BillingMode::Spot && pool.problem().is_none() {
            self.market.register(pool.node.pool(), pool.node.on_demand_price);
        }
        self.capacity.on_pool_defined(pool, &mut self.journal, at)
    }

    /// A live source answered or failed; Slurm's failure marks the mirror stale.
    pub(super) fn on_source_status(&mut self, at: At, status: sources::Status<'_>, effects: &mut Vec<Effect>) -> Result<(), String> {
        let slurm_down = sources::on_source_status(&mut self.sources, &mut self.fleet, &mut self.journal, at, status, effects)?;
        if let Some(detail) = slurm_down {
            self.slurm.unreachable(&detail);
        }
        Ok(())
    }

    pub(super) fn on_node_up(&mut self, at: At, spec: &NodeSpec) -> Result<(), String> {
        if let Some(problem) = spec.problem() {
            return Err(format!("node {}: {problem}", clean(&spec.name)));
        }
        if let Some(existing) = self.fleet.nodes.get_mut(&spec.id)
            && existing.is_up()
        {
            if !matches!(existing.state, NodeState::Booting { .. }) {
                return Err(format!("node {} is already up", clean(&existing.spec.name)));
            }
            // A node the room bought is ready: billed since its launch, it now takes work.
            existing.state = NodeState::Up;
            let text = format!("{} ready: {} {} in {}", clean(&spec.name), spec.billing.label(), clean(&spec.instance_type), clean(&spec.zone));
            self.journal.note(at, Severity::Info, text);
            self.elastic(at).on_ready(spec.id);
            self.sched.queue_dirty = true;
            return Ok(());
        }
        let relaunch = self.fleet.nodes.contains_key(&spec.id);
        if spec.billing == BillingMode::Spot {
            self.market.register(spec.pool(), spec.on_demand_price);
        }
        self.fleet.nodes.insert(spec.id, Node::new(spec.clone(), at));
        self.costs.node_up(at, &self.fleet, &self.market, spec.id, spec.gpu_count);
        let verb = if relaunch { "relaunched" } else { "joined" };
        let text = format!(
            "{} {verb}: {} {} in {} ({} × {})",
            clean(&spec.name),
            spec.billing.label(),
            clean(&spec.instance_type),
            clean(&spec.zone),
            spec.gpu_count,
            clean(&spec.gpu_model)
        );
        self.journal.note(at, Severity::Info, text);
        self.sched.queue_dirty = true;
        Ok(())
    }
    pub(super) fn on_node_lost(&mut self, at: At, node_id: NodeId, reason: &str, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.fleet.nodes.get(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !node.is_up() {
            return Err(format!("node {} is already down", clean(&node.spec.name)));
        }
        let victims = life::jobs_on(node);
        let name = self.fleet.node_name(node_id);
        if node.spec.billing == BillingMode::Spot {
            let (kind, secs, noticed) = (node.spec.instance_type.clone(), (at - node.up_since).num_seconds(), matches!(node.state, NodeState::Draining { .. }));
            if !noticed {
                self.hazard.record_interruption(&kind, at);
            }
            if let Ok(life) = Lifetime::new(Secs(secs), true) {
                let _ = self.hazard.record_lifetime(&kind, life);
            }
        }
        let pool = self.fleet.nodes.get(&node_id).map(|n| n.spec.pool());
        for job_id in victims {
            if let Some(job) = self.fleet.jobs.get(&job_id)
                && let JobState::Checkpointing { then: AfterCheckpoint::Stop(StopReason::Interruption) } = job.state
            {
                self.journal.stats.notice_saves_missed += 1;
                let job_name = job.spec.name.clone();
                self.tripwires().save_missed(at, job_id, &job_name, &name, effects);
            }
            let cancelled_by = match self.fleet.jobs.get(&job_id).map(|j| &j.state) {
                Some(JobState::Preempted { reason: StopReason::Operator { actor, requeue: false } }) => Some(clean(actor)),
                _ => None,
            };
            self.release(job_id);
            match cancelled_by {
                // Being cancelled anyway: the loss only makes it final sooner.
                Some(actor) => self.finish(at, job_id, JobState::Failed { reason: format!("cancelled by {actor}") })?,
                None => {
                    self.requeue_from_checkpoint(at, job_id);
                    self.steer_after_stop(job_id, pool.clone(), &StopReason::Interruption);
                }
            }
        }
        self.costs.settle_node(self.now, &mut self.fleet, &self.market, node_id);
        if let Some(node) = self.fleet.nodes.get_mut(&node_id) {
            node.state = NodeState::Down { since: at };
        }
        self.journal.stats.nodes_lost += 1;
        self.capacity.forget(node_id, at);
        self.journal.clear(at, &format!("notice:{}", node_id.0), effects);
        self.journal.note(at, Severity::Warn, format!("{name} lost: {}", clean(reason)));
        self.tripwires().node_lost(at, &name, effects);
        Ok(())
    }
    pub(super) fn on_notice(&mut self, at: At, node_id: NodeId, deadline: At, effects: &mut Vec<Effect>) -> Result<(), String> {
        let node = self.fleet.nodes.get_mut(&node_id).ok_or_else(|| format!("unknown node #{}", node_id.0))?;
        if !matches!(node.state, NodeState::Up) {
            return Err(format!("interruption notice for {} which is not up", clean(&node.spec.name)));
        }
        node.state = NodeState::Draining { deadline };
        let jobs = life::jobs_on(node);
        // On a Slurm node the jobs to save are Slurm's (room::slurm_acts signals them).
        let mut slurm_jobs: Vec<u64> = node.gpus.iter().filter_map(|g| g.slurm_job).collect();
        slurm_jobs.sort_unstable();
        slurm_jobs.dedup();
        self.journal.stats.notices += 1;
        let name = self.fleet.node_name(node_id);
        let secs = (deadline - at).num_seconds();
        let text = format!("spot interruption: {name} reclaimed in {secs}s, saving {} job(s)", jobs.len() + slurm_jobs.len());
        self.journal.raise(at, format!("notice:{}", node_id.0), text, effects);
        for job in jobs {
            self.stop_job(job, StopReason::Interruption, true, effects);
        }
        if let Some(kind) = self.fleet.nodes.get(&node_id).map(|n| n.spec.instance_type.clone()) {
            self.hazard.record_interruption(&kind, at);
            // The rest of the type's fleet just got riskier: shorter intervals.
            let others = self.fleet.spot_jobs(None, Some(&kind));
            self.watch().judge(at, others, effects);
        }
        Ok(())
    }
}
