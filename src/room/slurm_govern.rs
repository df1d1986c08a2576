//! The room as Slurm's policy (`govern = true`): on each snapshot the room's
//! discipline ranks Slurm's pending GPU jobs and its placement chooses their
//! nodes (`sched::slurm_plan`); in control mode the ranks leave as Slurm
//! priorities and the nodes as `ReqNodeList`/`Partition`/`ExcNodeList`, in
//! one `scontrol update` per job and only where Slurm's copy differs, so
//! Slurm's own scheduler and backfill start the work in the room's order on
//! the room's nodes. On a site that holds GPU jobs at submission
//! (`job_submit.lua`), a job leaves the hold only when the room places it:
//! the room is then the only one that starts work. Each start Slurm makes
//! is checked against the order it was given: one that jumped a job the
//! room had placed is flagged.
//!
//! Fills `Governance` (`room::slurm_notes`, kept in the mirror); reads the fleet for the nodes'
//! billing; sends through the mirror. An `impl Room`.

use std::collections::{BTreeMap, BTreeSet};

use super::Room;
use super::journal::Severity;
use super::slurm_notes::{PlanNote, StartNote};
use crate::domain::cluster::BillingMode;
use crate::domain::event::Effect;
use crate::domain::slurm::{Schedule, SlurmMode, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::text::clean;
use crate::domain::units::At;
use crate::sched::slurm_plan::{self, PlanInput, SiteNode, Target};
use crate::sched::slurm_priorities;
use crate::sched::slurm_shards::NodeSpare;

/// Who, in the room, moves running jobs (`room::slurm_saves`,
/// `room::slurm_acts`, the quota reclaim of `room::slurm`): a job they
/// requeued starts when the room places it, not after Slurm's hold of a
/// requeued job (`BeginTime`, two minutes).
const MOVERS: [&str; 3] = ["max price", "spot notice", "policy"];

/// Starts kept for the console and the bench (the newest).
const STARTS_KEPT: usize = 200;

/// How long a node refuses a requeued job after its last run there, in
/// seconds: slurmd revokes the run's credential and kills a relaunch whose
/// new credential is not newer, in whole seconds, than the revocation
/// ("Job credential revoked", exit 1, the job failed for good; seen in the
/// bench 94 ms after a requeue, while a relaunch 15 s later ran). Slurm's
/// own answer is to hold every requeued job back two minutes; the room
/// starts a job it moved at once, on another node, or on the same one once
/// this has passed.
const CREDENTIAL_REVOKED: i64 = 5;

impl Room {
    /// The Slurm nodes as placement sees them: their billing from the room's
    /// node (the `[[nodes]]` table), else from `spot_partitions`.
    pub(super) fn site_nodes(&self, snapshot: &SlurmSnapshot) -> Vec<SiteNode> {
        let policy = &self.config.slurm;
        // Only jobs holding shards shape a node's GPUs beyond Slurm's own
        // counts: scanned once here, not once per node over every job.
        let sharing: Vec<crate::domain::slurm::SlurmJob> = snapshot.jobs.iter().filter(|j| j.shards > 0 && j.holds_gpus()).cloned().collect();
        snapshot
            .nodes
            .iter()
            .map(|n| {
                let declared = n.node.and_then(|id| self.fleet.nodes.get(&id)).map(|node| node.spec.billing);
                let billing =
                    declared.unwrap_or(if n.partitions.iter().any(|p| policy.spot_partitions.contains(p)) { BillingMode::Spot } else { BillingMode::OnDemand });
                SiteNode {
                    name: n.name.clone(),
                    partitions: n.partitions.clone(),
                    gpus: n.gpus,
                    spare: NodeSpare::of(n, &sharing),
                    gpu_type: n.gpu_type.clone(),
                    billing,
                    usable: !n.unavailable(),
                    asleep: n.powered_down(),
                }
            })
            .collect()
    }

    /// The room's order and placement for the newest snapshot: checked
    /// against the starts Slurm made since the last one, then sent (control
    /// mode) or shown (advisory).
    pub(super) fn govern_slurm(&mut self, at: At, snapshot: &SlurmSnapshot, effects: &mut Vec<Effect>) {
        if !self.config.slurm.govern {
            return;
        }
        self.check_starts(at, snapshot);
        let nodes = self.site_nodes(snapshot);
        let input = PlanInput {
            now: at,
            discipline: self.config.sched.discipline,
            sched: &self.config.sched,
            tenants: &self.fleet.tenants,
            nodes,
            uninterruptible_partitions: &self.config.slurm.uninterruptible_partitions,
            stopped_accounts: self.budgets.levels.iter().filter(|(_, l)| **l >= crate::cost::budget::BudgetLevel::Limited).map(|(t, _)| t.0.clone()).collect(),
        };
        let moved: Vec<u64> = snapshot.jobs.iter().filter(|j| j.state == SlurmState::Pending && self.moved_by_room(j.id)).map(|j| j.id).collect();
        self.slurm.govern.moved.extend(moved);
        let mut as_asked = snapshot.clone();
        for job in &mut as_asked.jobs {
            // A job the room moved off its node waits for the room, not for
            // Slurm's hold of a requeued job: the plan places it now.
            if job.reason == "BeginTime" && self.slurm.govern.moved.contains(&job.id) {
                job.reason = "Priority".into();
            }
            if let Some(asked) = self.slurm.govern.asked.get(&job.id) {
                job.partition = asked.clone();
            }
            if self.slurm.govern.pinned.get(&job.id) == Some(&job.required) {
                job.required.clear();
            }
            if let Some((seen, nodes)) = self.slurm.govern.ran_on.get(&job.id)
                && job.state == SlurmState::Pending
                && (at - *seen).num_seconds() < CREDENTIAL_REVOKED
            {
                job.excluded.extend(nodes.iter().cloned());
            }
        }
        let plan = slurm_plan::plan(&as_asked, &input);
        let ranked: BTreeSet<u64> = plan.iter().map(|p| p.job).collect();
        // The band sits above every pending job the room does not rank.
        let floor = snapshot.jobs.iter().filter(|j| j.state == SlurmState::Pending && !ranked.contains(&j.id)).map(|j| j.priority).max().unwrap_or(0);
        let floor = u32::try_from(floor).unwrap_or(u32::MAX).min(slurm_priorities::FIRST.saturating_sub(1));
        let order: Vec<u64> = plan.iter().map(|p| p.job).collect();
        let current: BTreeMap<u64, u64> = snapshot.jobs.iter().filter(|j| ranked.contains(&j.id)).map(|j| (j.id, j.priority)).collect();
        let priorities = slurm_priorities::priorities(&order, &current, floor);
        let control = self.config.slurm.mode == SlurmMode::Control;
        let by_id: BTreeMap<u64, &crate::domain::slurm::SlurmJob> = snapshot.jobs.iter().map(|j| (j.id, j)).collect();
        let mut notes = BTreeMap::new();
        for planned in &plan {
            let Some(job) = by_id.get(&planned.job) else { continue };
            let was = self.slurm.govern.set.get(&job.id).cloned().unwrap_or_default();
            // A job the room moved off its node (a price, a notice, the
            // quota) is not kept back once placed: on another node than the
            // one it left (see CREDENTIAL_REVOKED).
            let placed = matches!(&planned.target, Target::Node { .. }) || matches!(&planned.target, Target::Span { nodes, .. } if !nodes.is_empty());
            let start_now = placed && job.reason == "BeginTime" && self.slurm.govern.moved.contains(&job.id) && !was.start_now;
            // A job held for admission leaves the hold only once the room has
            // placed it (or, over several nodes that are not free together,
            // for Slurm's own reservation):
            // released to wait, Slurm's backfill would start it on a node
            // freed for a job ranked ahead. Its priority goes out with the
            // release, never before: Slurm releases a held job whose priority is set.
            let admits = !matches!(planned.target, Target::Wait { .. });
            let release = job.awaits_admission() && admits;
            let priority = priorities.get(&job.id).copied().filter(|_| release || !job.awaits_admission());
            let mut change = Schedule { priority, release, start_now, ..Schedule::default() };
            // Not when Slurm has it there already (the job's own `-w`, or the room's earlier word).
            let pin = |change: &mut Schedule, nodes: &[String]| {
                if was.nodes.as_deref() != Some(nodes) && job.required != nodes {
                    change.nodes = Some(nodes.to_vec());
                }
            };
            let node = match &planned.target {
                Target::Node { node, partition } => {
                    // Slurm picks the partition of the node asked from the job's list.
                    if !job.partitions().contains(partition) {
                        change.partition = Some(partition.clone());
                    }
                    pin(&mut change, std::slice::from_ref(node));
                    Some(node.clone())
                }
                Target::Span { nodes, partitions, exclude } if !nodes.is_empty() => {
                    if let Some(p) = partitions.as_ref().map(|p| p.join(",")) {
                        change.partition = Some(p);
                    }
                    pin(&mut change, nodes);
                    add_excluded(&mut change, job, exclude);
                    nodes.first().cloned()
                }
                Target::Wait { partitions, exclude } | Target::Span { partitions, exclude, .. } => {
                    if let Some(p) = partitions.as_ref().map(|p| p.join(",")).filter(|p| *p != job.partition) {
                        change.partition = Some(p);
                    }
                    // A node the room chose stays chosen while the job may
                    // still run there (it was taken meanwhile, or Slurm is
                    // starting it as this snapshot was read); only a node it
                    // may no longer use is taken back, and only one the room set.
                    let usable = |name: &String| input.nodes.iter().any(|n| &n.name == name && n.usable) && !exclude.contains(name);
                    if was.nodes.as_ref().is_some_and(|n| !n.is_empty() && !n.iter().all(usable)) {
                        change.nodes = Some(Vec::new());
                    }
                    add_excluded(&mut change, job, exclude);
                    None
                }
            };
            notes.insert(job.id, PlanNote { rank: planned.rank, node, why: clean(&planned.why) });
            if change == Schedule::default() || !control {
                continue;
            }
            let verb = SlurmVerb::Schedule(Box::new(change.clone()));
            if self.slurm.may_send(job.id) && self.slurm.check_verb(&self.config.slurm, job.id, &verb).is_ok() {
                self.slurm.send(at, job.id, verb, "order".to_string(), effects);
                if change.partition.is_some() {
                    self.slurm.govern.asked.entry(job.id).or_insert_with(|| job.partition.clone());
                }
                match &change.nodes {
                    Some(nodes) if nodes.is_empty() => drop(self.slurm.govern.pinned.remove(&job.id)),
                    Some(nodes) => drop(self.slurm.govern.pinned.insert(job.id, nodes.clone())),
                    None => {}
                }
                let set = self.slurm.govern.set.entry(job.id).or_default();
                merge(set, change);
            }
        }
        self.slurm.govern.plan = notes;
        // What the room set on a job that no longer waits is Slurm's past.
        let waiting = |id: &u64| by_id.get(id).is_some_and(|j| j.state == SlurmState::Pending);
        self.slurm.govern.set.retain(|id, _| waiting(id));
        self.slurm.govern.asked.retain(|id, _| waiting(id));
        self.slurm.govern.pinned.retain(|id, _| by_id.get(id).is_some_and(|j| j.active()));
        self.slurm.govern.moved.retain(|id| waiting(id));
        for job in snapshot.jobs.iter().filter(|j| j.holds_gpus() && !j.nodes.is_empty()) {
            self.slurm.govern.ran_on.insert(job.id, (at, job.nodes.clone()));
        }
        self.slurm.govern.ran_on.retain(|id, _| by_id.get(id).is_some_and(|j| j.active()));
    }

    /// Whether the room's own last command requeued or migrated the job.
    fn moved_by_room(&self, job: u64) -> bool {
        self.slurm.last.get(&job).is_some_and(|r| {
            matches!(r.verb, SlurmVerb::Migrate { .. } | SlurmVerb::Requeue) && MOVERS.contains(&r.by.as_str()) && matches!(r.outcome, Some(Ok(_)))
        })
    }

    /// Each job that started since the last snapshot, against the order the
    /// room gave: it broke the order when it took the node the room had
    /// given a job ranked ahead of it that still waits, or runs on a node the
    /// room did not choose for it. (A job ahead that waits while its own node
    /// stays free is Slurm being a pass late, not a jump.)
    fn check_starts(&mut self, at: At, snapshot: &SlurmSnapshot) {
        let before = std::mem::take(&mut self.slurm.govern.plan);
        if before.is_empty() {
            return;
        }
        let pending: BTreeSet<u64> = snapshot.jobs.iter().filter(|j| j.state == SlurmState::Pending).map(|j| j.id).collect();
        let mut started: Vec<(&crate::domain::slurm::SlurmJob, &PlanNote)> =
            snapshot.jobs.iter().filter(|j| j.holds_gpus()).filter_map(|j| before.get(&j.id).map(|note| (j, note))).collect();
        started.sort_by_key(|(_, note)| note.rank);
        for (job, note) in started {
            let node = job.nodes.first().cloned().unwrap_or_default();
            let jumped = before
                .iter()
                .filter(|(id, n)| n.rank < note.rank && pending.contains(id) && n.node.as_ref().is_some_and(|x| job.nodes.contains(x)))
                .min_by_key(|(_, n)| n.rank);
            let broke = match (jumped, &note.node) {
                (Some((id, ahead)), _) => Some(format!("started ahead of job {id} (rank {}, placed on {})", ahead.rank, ahead.node.as_deref().unwrap_or("-"))),
                (None, Some(chosen)) if !job.nodes.contains(chosen) => Some(format!("on {}, not on the room's {chosen}", clean(&node))),
                _ => None,
            };
            match &broke {
                Some(why) => {
                    self.slurm.govern.out_of_order += 1;
                    let text = format!("slurm job {} {} (room rank {}): {why}", job.id, clean(&job.name), note.rank);
                    self.journal.note(at, Severity::Warn, text);
                }
                None => self.slurm.govern.followed += 1,
            }
            self.slurm.govern.starts.push(StartNote { at, job: job.id, rank: note.rank, node: clean(&node), broke });
        }
        let excess = self.slurm.govern.starts.len().saturating_sub(STARTS_KEPT);
        self.slurm.govern.starts.drain(..excess);
    }
}

/// The nodes the plan keeps a job off, added to those it keeps off already.
fn add_excluded(change: &mut Schedule, job: &crate::domain::slurm::SlurmJob, exclude: &[String]) {
    if exclude.iter().any(|x| !job.excluded.contains(x)) {
        let mut all: Vec<String> = job.excluded.clone();
        all.extend(exclude.iter().filter(|x| !job.excluded.contains(x)).cloned());
        change.exclude = Some(all);
    }
}

/// What was set before, updated by what was just sent.
fn merge(set: &mut Schedule, change: Schedule) {
    if change.priority.is_some() {
        set.priority = change.priority;
    }
    if change.partition.is_some() {
        set.partition = change.partition;
    }
    if change.nodes.is_some() {
        set.nodes = change.nodes;
    }
    if change.exclude.is_some() {
        set.exclude = change.exclude;
    }
    set.start_now |= change.start_now;
}
