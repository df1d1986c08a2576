//! Slurm jobs on spot nodes, saved at the room's risk (`govern = true`): on
//! each snapshot every running job on a spot node gets the checkpoint
//! controller's interval for its instance type (Young/Daly on the hazard
//! the spot watcher measures, shorter as it rises) and the max price of its
//! progress (the bid curve). When the interval falls due since its last
//! acknowledged save it is sent the checkpoint signal; the job acknowledges
//! by `saved=EPOCH` in its comment (or a marker file the adapter reads), so
//! the room knows its last good checkpoint and the work at risk, and names a
//! job that never answers "not checkpointing". When the market passes its
//! cap it is asked to save and then moved off that pool (requeued with the
//! pool's nodes excluded). Control mode sends; advisory mode shows.
//!
//! Fills the mirror's `saves` (`room::slurm_notes::SaveNote`); reads the fleet, market and hazard; sends
//! through the mirror and its follow-ups. An `impl Room`.

use std::collections::BTreeMap;

use super::Room;
use super::journal::Severity;
use super::slurm::{AdviceNote, FollowUp};
use super::slurm_notes::SaveNote;
use crate::domain::cluster::BillingMode;
use crate::domain::event::Effect;
use crate::domain::slurm::{SlurmJob, SlurmMode, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::text::clean;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::market::bid::BidInput;

impl Room {
    /// The checkpoint cadence and max price of every Slurm job on a spot node.
    pub(super) fn save_slurm_jobs(&mut self, at: At, snapshot: &SlurmSnapshot, effects: &mut Vec<Effect>) {
        if !self.config.slurm.govern {
            return;
        }
        let control = self.config.slurm.mode == SlurmMode::Control;
        let grace = self.config.slurm.checkpoint_grace;
        let signal = self.config.slurm.checkpoint_verb();
        let mut kept = BTreeMap::new();
        for job in snapshot.jobs.iter().filter(|j| j.state == SlurmState::Running) {
            let Some(mut note) = self.spot_note(at, snapshot, job) else { continue };
            if let Some(before) = self.slurm.saves.get(&job.id) {
                note.signalled = before.signalled;
                note.unanswered = before.unanswered;
                note.base = before.base.or(note.base);
                note.moving = before.moving;
                self.refresh_bid(at, &mut note, job);
            }
            if note.saved.is_some_and(|s| note.unanswered.is_some_and(|u| s >= u - chrono::TimeDelta::seconds(1))) {
                note.unanswered = None;
            }
            let since = [Some(note.started), note.saved, note.signalled].into_iter().flatten().max().unwrap_or(at);
            note.next_due = since + note.interval.delta();
            let busy = self.slurm.acts.follow_ups.contains_key(&job.id);
            if note.interruptible && !busy && note.next_due <= at {
                if control {
                    if self.slurm.may_send(job.id) && self.slurm.check_verb(&self.config.slurm, job.id, &signal).is_ok() {
                        self.slurm.send(at, job.id, signal.clone(), "checkpoint".to_string(), effects);
                        note.signalled = Some(at);
                        note.unanswered.get_or_insert(at);
                        note.next_due = at + note.interval.delta();
                    }
                } else {
                    let why = format!("its checkpoint is due every {} on spot ({:.1}%/min)", note.interval, note.p_next_minute * 100.0);
                    self.slurm.acts.proposals.insert(job.id, AdviceNote { verb: signal.clone(), for_job: 0, why });
                }
            }
            let was_silent = self.slurm.saves.get(&job.id).is_some_and(|b| b.not_checkpointing(at, grace));
            if note.not_checkpointing(at, grace) && !was_silent {
                let text = format!(
                    "slurm job {} {}: asked to save at {}, no acknowledgement (saved=EPOCH in its comment)",
                    job.id,
                    clean(&job.name),
                    note.unanswered.map(|u| u.format("%H:%M:%SZ").to_string()).unwrap_or_default()
                );
                self.journal.note(at, Severity::Warn, text);
            }
            if !note.moving && note.interruptible && self.over_cap(&note, job) {
                note.moving = self.move_off_pool(at, snapshot, job, &note, &signal, effects);
            }
            kept.insert(job.id, note);
        }
        self.slurm.saves = kept;
    }

    /// The job's spot node, hazard, interval and bid, if it runs on spot.
    fn spot_note(&self, at: At, snapshot: &SlurmSnapshot, job: &SlurmJob) -> Option<SaveNote> {
        let name = job.nodes.first()?;
        let slurm_node = snapshot.nodes.iter().find(|n| &n.name == name)?;
        let node = slurm_node.node.and_then(|id| self.fleet.nodes.get(&id));
        let spot_by_partition = slurm_node.partitions.iter().any(|p| self.config.slurm.spot_partitions.contains(p));
        if !node.map_or(spot_by_partition, |n| n.spec.billing == BillingMode::Spot) {
            return None;
        }
        let started = job.started.unwrap_or(at);
        let (p, market) = match node {
            Some(n) => {
                let age = Secs((at - n.up_since).num_seconds().max(0));
                let at_risk = self.fleet.spot_at_risk(&n.spec.instance_type).max(1);
                (self.hazard.p_next_minute(&n.spec.instance_type, at, age, at_risk), self.market.price(&n.spec.pool()))
            }
            None => (self.hazard.p_next_minute("", at, Secs(0), 1), None),
        };
        let trend = node.and_then(|n| self.market.pools.get(&n.spec.pool())).and_then(|pool| pool.trend.clone());
        let mut note = SaveNote {
            node: clean(name),
            room_node: node.map(|n| n.spec.id),
            gpus: job.gpus,
            started,
            p_next_minute: p,
            interval: Secs(0),
            signalled: None,
            unanswered: None,
            saved: job.last_saved(),
            next_due: at,
            base: market,
            market,
            cap: None,
            interruptible: job.interruptible(&self.config.slurm.uninterruptible_partitions),
            moving: false,
        };
        self.refresh_bid(at, &mut note, job);
        let secs_to_cap = match (note.cap, market, &trend) {
            (Some(cap), Some(m), Some(tr)) if tr.slope > 0.0 && cap > m => Some((cap.0 - m.0) as f64 / tr.slope * 3600.0),
            _ => None,
        };
        note.interval = self.config.checkpoint.spot_interval(p, None, self.journal.stats.notice_miss_share(), secs_to_cap).secs;
        Some(note)
    }

    /// Its cap from the bid curve at its progress (elapsed over its time
    /// limit; none known: at the start of the curve).
    fn refresh_bid(&self, at: At, note: &mut SaveNote, job: &SlurmJob) {
        let Some(node) = note.room_node.and_then(|id| self.fleet.nodes.get(&id)) else { return };
        note.market = self.market.price(&node.spec.pool());
        let (Some(base), Some(market)) = (note.base, note.market) else { return };
        let elapsed = (at - note.started).num_seconds().max(0) as f64;
        let (progress, remaining) = match job.time_limit {
            Some(limit) if limit.0 > 0 => ((elapsed / limit.0 as f64).clamp(0.0, 1.0), Some(((limit.0 as f64 - elapsed).max(0.0), 0.0))),
            _ => (0.0, None),
        };
        let input = BidInput { base, market, on_demand: node.spec.on_demand_price, progress, remaining };
        note.cap = Some(self.config.bids.bid(&input, self.config.degraded_bids).cap);
    }

    fn over_cap(&self, note: &SaveNote, _job: &SlurmJob) -> bool {
        matches!((note.market, note.cap), (Some(m), Some(c)) if m > c)
    }

    /// Asks the job to save now and moves it off its pool after the grace
    /// period (the migrate verb: requeued with the pool's nodes excluded).
    /// Whether it was asked (control) or proposed (advisory).
    fn move_off_pool(&mut self, at: At, snapshot: &SlurmSnapshot, job: &SlurmJob, note: &SaveNote, signal: &SlurmVerb, effects: &mut Vec<Effect>) -> bool {
        let Some(pool) =
            snapshot.nodes.iter().find(|n| n.name == note.node).and_then(|n| n.node).and_then(|id| self.fleet.nodes.get(&id)).map(|n| n.spec.pool())
        else {
            return false;
        };
        let exclude: Vec<String> = snapshot
            .nodes
            .iter()
            .filter(|n| n.node.and_then(|id| self.fleet.nodes.get(&id)).is_some_and(|x| x.spec.pool() == pool && x.spec.billing == BillingMode::Spot))
            .map(|n| n.name.clone())
            .collect();
        let mut all = job.excluded.clone();
        all.extend(exclude.into_iter().filter(|x| !job.excluded.contains(x)));
        let migrate = SlurmVerb::Migrate { partition: None, exclude: all };
        let why = format!(
            "market {} above its max price {} on {}: save, then requeue off {pool}",
            note.market.unwrap_or(MicrosPerHour(0)),
            note.cap.unwrap_or(MicrosPerHour(0)),
            note.node
        );
        self.journal.note(at, Severity::Warn, format!("slurm job {} {}: {why}", job.id, clean(&job.name)));
        self.journal.stats.price_moves += 1;
        if self.config.slurm.mode != SlurmMode::Control {
            self.slurm.acts.proposals.insert(job.id, AdviceNote { verb: migrate, for_job: 0, why });
            return false;
        }
        // A signal already on its way (the cadence's) is the save asked for.
        if self.slurm.check_verb(&self.config.slurm, job.id, signal).is_ok() {
            self.slurm.send(at, job.id, signal.clone(), "max price".to_string(), effects);
        }
        let due = at + self.config.slurm.checkpoint_grace.delta();
        self.slurm.acts.follow_ups.insert(job.id, FollowUp { verb: migrate, due, by: "max price".to_string() });
        true
    }
}
