//! Slurm's nodes as nodes of the room: on each snapshot, which room node is
//! Slurm's (it then takes none of the room's own jobs), Slurm's state for it,
//! which Slurm job holds each of its GPUs, and whether a machine is behind it
//! at all (a powered-down CLOUD node is down and costs nothing). A node's cost
//! is settled before any of that changes, so every second is charged to
//! whoever held the GPU during it (`room::cost` charges a held GPU to the
//! Slurm job's account and tags, kept here in `Costs::slurm_tags`).
//!
//! Slurm stays the scheduler of record: nothing here places, stops or moves
//! a job. Owns no state of its own; writes nodes' Slurm marks and GPU holders.
//! An `impl Room`, with the room's handler for `Event::Slurm`.

use std::collections::BTreeMap;

use super::Room;
use crate::domain::cluster::BillingMode;
use crate::domain::cluster::{NodeState, SlurmNodeState};
use crate::domain::event::Effect;
use crate::domain::ids::{JobId, NodeId};
use crate::domain::slurm::{GpusOn, SlurmSnapshot};
use crate::domain::units::At;

/// What a snapshot says about one room node: Slurm's state, the job on each
/// GPU (by index), and whether the machine is there.
struct Seen {
    state: SlurmNodeState,
    holders: Vec<Option<u64>>,
    powered_down: bool,
}

impl Room {
    /// The room's handler for `Event::Slurm`: the nodes and GPU holders
    /// mirrored, the mirror's advice and acts, and for each node newly
    /// drained for a spot interruption the room's own notice path (the
    /// hazard model, the node draining, the alarm).
    pub(super) fn on_slurm(&mut self, at: At, snapshot: &SlurmSnapshot, effects: &mut Vec<Effect>) -> Result<(), String> {
        self.on_slurm_fleet(at, snapshot, effects);
        let spot: Vec<String> = self.site_nodes(snapshot).into_iter().filter(|n| n.billing == BillingMode::Spot).map(|n| n.name).collect();
        let (outcome, drained) = self.slurm_desk().on_snapshot(at, snapshot, &spot, effects);
        self.govern_slurm(at, snapshot, effects);
        self.save_slurm_jobs(at, snapshot, effects);
        for (node, deadline) in drained {
            if self.fleet.nodes.get(&node).is_some_and(|n| matches!(n.state, NodeState::Up)) {
                self.settle_all(at);
                let _ = self.on_notice(at, node, deadline, effects);
            }
        }
        outcome
    }

    /// Mirrors the snapshot's nodes and GPU holders into the fleet.
    fn on_slurm_fleet(&mut self, at: At, snapshot: &SlurmSnapshot, effects: &mut Vec<Effect>) {
        let mut seen: BTreeMap<NodeId, Seen> = BTreeMap::new();
        // Each node's jobs, found once: a site has thousands of both.
        let mut on_node: BTreeMap<&str, Vec<&crate::domain::slurm::SlurmJob>> = BTreeMap::new();
        for job in snapshot.jobs.iter().filter(|j| j.holds_gpus()) {
            for name in &job.nodes {
                on_node.entry(name.as_str()).or_default().push(job);
            }
        }
        for n in &snapshot.nodes {
            let Some(id) = n.node else { continue };
            let Some(node) = self.fleet.nodes.get(&id) else { continue };
            let mut holders: Vec<Option<u64>> = vec![None; node.gpus.len()];
            let mut counted: Vec<(u64, u32)> = Vec::new();
            for job in on_node.get(n.name.as_str()).map(Vec::as_slice).unwrap_or_default() {
                match job.gpus_on(&n.name) {
                    GpusOn::Indices(idx) => {
                        for i in idx {
                            if let Some(slot) = holders.get_mut(i as usize) {
                                *slot = Some(job.id);
                            }
                        }
                    }
                    GpusOn::Count(c) if c > 0 => counted.push((job.id, c)),
                    GpusOn::Count(_) => {}
                }
            }
            // Without indices a job is given the lowest GPUs left, in job order.
            for (job, count) in counted {
                for slot in holders.iter_mut().filter(|h| h.is_none()).take(count as usize) {
                    *slot = Some(job);
                }
            }
            let name = if n.name == node.spec.name { String::new() } else { n.name.clone() };
            seen.insert(id, Seen { state: SlurmNodeState { state: n.state.clone(), reason: n.reason.clone(), name }, holders, powered_down: n.powered_down() });
        }
        for job in snapshot.jobs.iter().filter(|j| j.holds_gpus()) {
            self.costs.slurm_tags.insert(JobId::slurm(job.id), job.tags());
        }
        for (id, s) in seen {
            self.mirror_node(at, id, s, effects);
        }
    }

    fn mirror_node(&mut self, at: At, id: NodeId, seen: Seen, effects: &mut Vec<Effect>) {
        let Some(node) = self.fleet.nodes.get(&id) else { return };
        let holders_now: Vec<Option<u64>> = node.gpus.iter().map(|g| g.slurm_job).collect();
        let down_here = matches!(node.state, NodeState::Down { .. });
        // Only a node Slurm itself powered down comes back: one the room lost stays lost.
        let revive = down_here && !seen.powered_down && node.slurm.as_ref().is_some_and(SlurmNodeState::powered_down);
        let power_off = seen.powered_down && node.is_up();
        // A spot drain Slurm no longer shows (an operator resumed the node): it takes work again.
        let undrained = matches!(node.state, NodeState::Draining { .. }) && !seen.state.state.contains("drain") && !seen.powered_down;
        let changed = holders_now != seen.holders || power_off || revive || undrained || node.slurm.as_ref() != Some(&seen.state);
        if !changed {
            return;
        }
        if node.is_up() {
            self.costs.settle_node(self.now, &mut self.fleet, &self.market, id);
        }
        let name = self.fleet.node_name(id);
        let Some(node) = self.fleet.nodes.get_mut(&id) else { return };
        for (gpu, holder) in node.gpus.iter_mut().zip(&seen.holders) {
            gpu.slurm_job = *holder;
        }
        let first = node.slurm.is_none();
        node.slurm = Some(seen.state.clone());
        if power_off {
            node.state = NodeState::Down { since: at };
            self.journal.note(at, super::journal::Severity::Info, format!("{name}: Slurm powered it down (no machine, nothing billed)"));
        } else if undrained {
            node.state = NodeState::Up;
            self.journal.clear(at, &format!("notice:{}", id.0), effects);
            self.journal.note(at, super::journal::Severity::Info, format!("{name}: Slurm resumed it"));
        } else if revive {
            node.state = NodeState::Up;
            node.up_since = at;
            let gpus = node.spec.gpu_count;
            self.costs.node_up(at, &self.fleet, &self.market, id, gpus);
            self.journal.note(at, super::journal::Severity::Info, format!("{name}: Slurm powered it up"));
        }
        if first {
            self.sched.queue_dirty = true;
        }
    }
}
