//! What if, for a Slurm site: a log the engine recorded while watching (or
//! governing) Slurm holds Slurm's snapshots, not jobs of the room's own. This
//! reads such a log once and makes of it (1) what Slurm did, as an `Outcome`
//! like any column's, and (2) the site as the live model replays it: the
//! Slurm nodes as nodes of the room that take work, up and down as Slurm
//! showed them; the accounts as tenants; every GPU job Slurm ran or queued
//! submitted when Slurm says it was, running for as long as Slurm ran it.
//!
//! Money in the recorded column is the recorded room's own ledger of the
//! Slurm nodes (each GPU charged to the job that held it, the rest idle), so
//! both sides are charged by the same code; the job figures (waits,
//! completions, requeues, the queue at the end) come from the snapshots.
//!
//! Owns the reading of snapshots and the translation; reads the log through
//! `Store::for_each_event` and writes nothing. It does not run the re-runs
//! (`whatif::compare` does, through the same loop and `Scorer` as every
//! what-if) and must not touch the live model or the scoring.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::outcome::{Outcome, Scorer, Window};
use super::recorded::{Logged, Observed, Recorded, gpu_speed};
use crate::domain::cluster::NodeSpec;
use crate::domain::discipline::DisciplineKind;
use crate::domain::event::{Action, Event, TenantSpec};
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::{JobClass, JobSpec, PoolPreference};
use crate::domain::slurm::{SlurmJob, SlurmNode, SlurmState};
use crate::domain::spot_drain;
use crate::domain::units::{At, HORIZON_SECS, Mib, Micros};
use crate::room::{Room, RoomConfig};
use crate::sched::config::FitPolicy;
use crate::store::{Store, StoreError};

/// How the re-runs of a Slurm site are made, for the table's heading.
pub const MODEL: &str = "Slurm site re-run on the live model: the snapshots' jobs submitted when Slurm says, each run as long as Slurm ran it, \
on the Slurm nodes up and down as Slurm showed them, with the log's accounts and prices (README › What if)";

/// The name of the re-run closest to what Slurm does by default.
pub const REFERENCE: &str = "fifo first-fit";

/// The live model's executor spends 4 s (CUDA) and a draw of 10–60 s
/// starting each run before it computes (`sim::executor`); Slurm's run time
/// already holds the job's own start, so the model computes that much less.
const MODEL_STARTUP_SECS: f64 = 39.0;

/// Slurm does not say how big a job's state is: each GPU's share of a
/// checkpoint is taken as 1 GiB (2.5 s at the model's 400 MiB/s).
const CHECKPOINT_MIB_PER_GPU: u32 = 1024;

/// A spot drain that names no deadline: the cloud's two-minute notice.
const NOTICE_SECS: i64 = 120;

/// Slurm node states with no usable machine behind them.
const GONE_STATES: &[&str] = &["down", "fail", "not_responding", "future", "inval", "unknown"];

/// Where an event goes among those at the same time: the fleet and the
/// accounts first, then losses, then arrivals, then the clock.
const SETUP: u8 = 0;
const LOSS: u8 = 1;
const ARRIVAL: u8 = 2;
const CLOCK: u8 = 3;

/// The room's policy closest to Slurm's defaults (priority/basic: first
/// come, first served; select/cons_tres: the first nodes that fit, in
/// order; sched/backfill), for the re-run that measures the model's error.
pub fn reference_config(recorded: &RoomConfig) -> RoomConfig {
    let mut config = recorded.clone();
    config.sched.discipline = DisciplineKind::Fifo;
    config.sched.fit = FitPolicy::FirstFit;
    config.sched.backfill = true;
    config
}

/// Whether the log holds jobs of the room's own (the kinds `Event::kind`
/// gives a submission): such a log is re-run as the room's, not as Slurm's.
pub fn has_room_jobs(store: &Store) -> Result<bool, StoreError> {
    Ok(store.for_each_event_of_kinds(&["submit", "submit-batch"], |_, _, _| {})? > 0)
}

/// One Slurm GPU job as the snapshots showed it.
#[derive(Clone, Debug, Default)]
struct Track {
    /// Its last sighting: account, GPUs, partitions, limits, comment.
    job: SlurmJob,
    first_start: Option<At>,
    /// The run it is in (started, last seen running), and its last one.
    run: Option<(At, At)>,
    last_run: Option<(At, At)>,
    nodes: BTreeSet<String>,
    restarts: u32,
    /// When it was last seen running before it ended, and whether well.
    ended: Option<(At, bool)>,
    pending: bool,
    /// It left the queue without ever running (cancelled while pending).
    left_unstarted: bool,
}

impl Track {
    fn new(job: &SlurmJob) -> Track {
        Track { job: job.clone(), restarts: job.restarts, ..Track::default() }
    }

    fn see(&mut self, at: At, job: &SlurmJob) {
        let submitted = self.job.submitted.or(job.submitted);
        self.job = job.clone();
        self.job.submitted = submitted;
        match job.state {
            SlurmState::Running | SlurmState::Suspended => {
                let since = self.last_run.map(|(_, end)| end);
                let start = self.run.map_or_else(|| job.started.filter(|s| *s <= at && since.is_none_or(|e| *s >= e)).unwrap_or(at), |(s, _)| s);
                self.run = Some((start, at));
                self.first_start.get_or_insert(start);
                self.nodes.extend(job.nodes.iter().cloned());
                (self.ended, self.pending, self.left_unstarted) = (None, false, false);
            }
            // Back in the queue (requeued): whatever ended it before did not end it for good.
            SlurmState::Pending => {
                self.close_run();
                (self.ended, self.pending, self.left_unstarted) = (None, true, false);
            }
            // Completing: the job is done, its epilog runs; a later state may say it failed.
            _ => self.end(matches!(job.state, SlurmState::Completed | SlurmState::Completing)),
        }
    }

    fn close_run(&mut self) {
        if let Some(run) = self.run.take() {
            self.last_run = Some(run);
        }
    }

    fn end(&mut self, ok: bool) {
        self.close_run();
        self.pending = false;
        match self.last_run {
            Some((_, last)) => self.ended = Some((last, ok)),
            None => self.left_unstarted = true,
        }
    }

    /// Gone from squeue: after running it finished (squeue shows a failure
    /// for a while, a success often not at all); before, it was cancelled.
    fn vanish(&mut self) {
        self.end(self.run.is_some());
    }

    fn open(&self) -> bool {
        self.ended.is_none() && !self.left_unstarted
    }
}

/// A Slurm node's life in the re-run: up, and a spot deadline ahead.
#[derive(Default)]
struct NodeLife {
    up: bool,
    lost_at: Option<At>,
}

/// A Slurm site read from its log.
#[derive(Debug)]
pub struct Site {
    /// What Slurm did (`actual`) and the site as the live model replays it.
    pub recorded: Recorded,
    /// What the reader must know of the translation (what was left out).
    pub notes: Vec<String>,
    /// Each account's waits in what Slurm did.
    pub slurm_waits: BTreeMap<String, Vec<i64>>,
    /// Each re-run's, by its column's name, as the re-runs finish.
    pub rerun_waits: Mutex<BTreeMap<String, BTreeMap<String, Vec<i64>>>>,
    gpu_jobs: usize,
}

impl Site {
    /// A clear word when there is nothing to re-run.
    pub fn check(&self) -> Result<(), String> {
        if self.gpu_jobs == 0 {
            return Err("its Slurm snapshots show no GPU job: there is nothing to re-run (a CPU-only site, or a log too short to see one)".into());
        }
        if self.recorded.jobs.is_empty() {
            return Err(format!("none of its {} Slurm GPU jobs could be re-run: {}", self.gpu_jobs, self.notes.join("; ")));
        }
        Ok(())
    }
}

/// What the reading gathers, event by event.
#[derive(Default)]
struct Reading {
    config: RoomConfig,
    window: Window,
    first_at: At,
    specs: BTreeMap<NodeId, NodeSpec>,
    names: BTreeMap<String, NodeId>,
    lives: BTreeMap<NodeId, NodeLife>,
    unknown_nodes: BTreeSet<String>,
    tracks: BTreeMap<u64, Track>,
    open: BTreeSet<u64>,
    tenants: BTreeMap<String, At>,
    exogenous: Vec<(At, u8, Logged)>,
    left_out: BTreeMap<&'static str, u64>,
    snapshots: u64,
    requeues: u64,
}

impl Reading {
    fn push(&mut self, at: At, rank: u8, event: Event) {
        self.exogenous.push((at, rank, Logged::Event(event)));
    }

    fn gather(&mut self, at: At, event: Event) {
        match event {
            Event::NodeUp { spec } => {
                self.specs.insert(spec.id, spec);
            }
            Event::TenantDefined { spec } => {
                self.tenants.entry(spec.id.0.clone()).or_insert(at);
                self.push(at, SETUP, Event::TenantDefined { spec });
            }
            Event::PriceTick { .. } | Event::SpotLifetimes { .. } => self.push(at, SETUP, event),
            Event::Tick => self.push(at, CLOCK, event),
            Event::Telemetry { .. } => self.exogenous.push((at, CLOCK, Logged::Telemetry)),
            // Slurm's own verbs have no Slurm to go to, and the discipline is the question asked.
            Event::Operator { action: Action::Slurm { .. } | Action::SetDiscipline { .. }, .. } => *self.left_out.entry("operator").or_default() += 1,
            Event::Operator { .. } => self.push(at, CLOCK, event),
            Event::Slurm { snapshot } => {
                self.snapshots += 1;
                for node in &snapshot.nodes {
                    self.see_node(at, node);
                }
                self.see_jobs(at, &snapshot.jobs);
                // The room's clock moves as often as Slurm was read.
                self.push(at, CLOCK, Event::Tick);
            }
            other => *self.left_out.entry(other.kind()).or_default() += 1,
        }
    }

    fn see_node(&mut self, at: At, node: &SlurmNode) {
        let Some((id, spec)) = node.node.and_then(|id| self.specs.get(&id).map(|spec| (id, spec.clone()))) else {
            if node.gpus > 0 {
                self.unknown_nodes.insert(node.name.clone());
            }
            return;
        };
        self.names.insert(node.name.clone(), id);
        let life = self.lives.entry(id).or_default();
        if life.lost_at.is_some_and(|d| d <= at) {
            (life.up, life.lost_at) = (false, None);
        }
        let gone = node.powered_down() || GONE_STATES.iter().any(|s| node.state.contains(s));
        let spot = if node.state.contains("drain") { spot_drain::parse(&node.reason) } else { None };
        let mut out = Vec::new();
        if !life.up && life.lost_at.is_none() && !gone && spot.is_none() {
            life.up = true;
            out.push((at, SETUP, Event::NodeUp { spec }));
        } else if life.up && life.lost_at.is_none() {
            if let Some(drain) = spot {
                let deadline =
                    drain.deadline.filter(|d| *d >= at).unwrap_or_else(|| at.checked_add_signed(chrono::TimeDelta::seconds(NOTICE_SECS)).unwrap_or(at));
                life.lost_at = Some(deadline);
                out.push((at, LOSS, Event::InterruptionNotice { node: id, deadline }));
                out.push((deadline, LOSS, Event::NodeLost { node: id, reason: format!("spot interruption (Slurm drained {})", node.name) }));
            } else if gone {
                life.up = false;
                out.push((at, LOSS, Event::NodeLost { node: id, reason: format!("Slurm: {} {}", node.name, node.state) }));
            }
        }
        for (when, rank, event) in out {
            self.push(when, rank, event);
        }
    }

    fn see_jobs(&mut self, at: At, jobs: &[SlurmJob]) {
        let mut present = BTreeSet::new();
        for job in jobs.iter().filter(|j| j.gpus > 0) {
            present.insert(job.id);
            let track = self.tracks.entry(job.id).or_insert_with(|| Track::new(job));
            if job.restarts > track.restarts {
                if self.window.holds(at) {
                    self.requeues += u64::from(job.restarts - track.restarts);
                }
                track.restarts = job.restarts;
            }
            track.see(at, job);
        }
        for id in self.open.difference(&present) {
            if let Some(track) = self.tracks.get_mut(id) {
                track.vanish();
            }
        }
        self.open = present.into_iter().filter(|id| self.tracks.get(id).is_some_and(Track::open)).collect();
    }
}

/// Reads the log once: replays it into a room under its own policy for the
/// money (`Scorer` over `window`) and follows the snapshots. `None` when the
/// log holds no Slurm snapshot. `first_at` is the log's first event.
pub fn read(store: &Store, config: &RoomConfig, window: Window, first_at: At, progress: &mut dyn FnMut(f64)) -> Result<Option<Site>, StoreError> {
    let total = store.event_count()?.max(1) as f64;
    let mut room = Room::new(config.clone());
    let mut scorer = Scorer::new(window);
    let mut r = Reading { config: config.clone(), window, first_at, ..Reading::default() };
    let (mut events, mut in_window) = (0u64, 0u64);
    store.for_each_event(0, |_, at, event| {
        if window.until.is_some_and(|u| at >= u) {
            return;
        }
        events += 1;
        in_window += u64::from(window.holds(at));
        if events.is_multiple_of(4096) {
            progress(events as f64 / total);
        }
        let effects = room.apply(at, &event);
        scorer.observe(at, &event, &effects, room.stats());
        r.gather(at, event);
    })?;
    progress(1.0);
    if r.snapshots == 0 {
        return Ok(None);
    }
    let actual = scorer.finish(&room);
    Ok(Some(r.finish(actual, events, in_window)))
}

impl Reading {
    /// The slowest GPU a job ran on, as a V100 is 1.0 (1.0 when unknown).
    fn speed_of(&self, track: &Track) -> f64 {
        let speeds = track.nodes.iter().filter_map(|n| self.names.get(n)).filter_map(|id| self.specs.get(id)).map(|s| gpu_speed(&s.gpu_model));
        speeds.reduce(f64::min).unwrap_or(1.0)
    }

    /// The job as the room's, and what the model runs of it; `Err` names why it is left out.
    fn translate(&self, track: &Track, typical_secs: f64, largest: u32, gpu_mem: Mib) -> Result<(At, Observed), &'static str> {
        let job = &track.job;
        let submitted = job.submitted.ok_or("no submit time")?;
        if track.left_unstarted {
            return Err("left the queue without running");
        }
        if job.gpus > largest || job.gpus > u32::from(self.config.max_gpus_per_job) {
            return Err("larger than any node (the room places a job on one node)");
        }
        let speed = self.speed_of(track);
        let limit = job.time_limit.map(|s| s.0 as f64).filter(|s| *s > 0.0);
        let work = |wall: f64| ((wall - MODEL_STARTUP_SECS).max(1.0) * speed).round().max(1.0) as u64;
        let wall = |(start, end): (At, At)| (end - start).num_milliseconds() as f64 / 1000.0;
        let (steps, rate, failed_at_step, predicted_secs) = match (track.ended, track.run, track.last_run) {
            (Some((_, true)), _, Some(run)) => (work(wall(run)), Some(1.0), None, None),
            (Some((_, false)), _, Some(run)) => (work(wall(run)) + 1, Some(1.0), Some(work(wall(run))), None),
            // Still running when the log ends: to its time limit, else as long as the log showed.
            (_, Some(run), _) => (work(wall(run).max(limit.unwrap_or(0.0))), Some(1.0), None, None),
            _ => ((limit.unwrap_or(typical_secs)).round().max(1.0) as u64, None, None, limit),
        };
        let spec = JobSpec {
            id: JobId(job.id),
            name: if job.name.is_empty() { format!("slurm-{}", job.id) } else { job.name.clone() },
            tags: job.tags(),
            class: JobClass::Training,
            gpus: u8::try_from(job.gpus).unwrap_or(u8::MAX),
            gpu_mem,
            exclusive: true,
            steps_total: steps,
            priority: 0,
            pool: if job.interruptible(&self.config.slurm.uninterruptible_partitions) { PoolPreference::Any } else { PoolPreference::NoSpot },
            checkpoint_size: Mib(CHECKPOINT_MIB_PER_GPU.saturating_mul(job.gpus)),
            cpus: 0,
            host_mem: Mib(0),
            est_runtime: job.time_limit.filter(|s| (1..=HORIZON_SECS).contains(&s.0)),
            gpu_models: Vec::new(),
        };
        Ok((submitted.max(self.first_at), Observed { spec, rate, failed_at_step, predicted_secs }))
    }

    fn finish(mut self, mut actual: Outcome, events: u64, in_window: u64) -> Site {
        let mut finished_secs: Vec<f64> = (self.tracks.values())
            .filter(|t| matches!(t.ended, Some((_, true))))
            .filter_map(|t| t.last_run.map(|(s, e)| (e - s).num_seconds() as f64 * self.speed_of(t)))
            .collect();
        finished_secs.sort_by(f64::total_cmp);
        let typical = finished_secs.get(finished_secs.len() / 2).copied().filter(|s| *s > 0.0).unwrap_or(3600.0);
        let site_nodes: BTreeSet<NodeId> = self.names.values().copied().collect();
        let sized = || site_nodes.iter().filter_map(|id| self.specs.get(id));
        let largest = sized().map(|s| u32::from(s.gpu_count)).max().unwrap_or(0);
        let site_gpus: u32 = sized().map(|s| u32::from(s.gpu_count)).sum();
        let gpu_mem = sized().map(|s| s.gpu_memory).min().unwrap_or(Mib(16_384));
        let mut jobs = BTreeMap::new();
        let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut slurm_waits: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let (window, first_at) = (self.window, self.first_at);
        // The job figures are the snapshots'; the money stays the ledger's.
        let o = &mut actual;
        (o.submitted, o.finished, o.failed, o.jct_secs_sum, o.jct_count, o.queued_at_end) = (0, 0, 0, 0, 0, 0);
        (o.waits, o.requeues) = (Vec::new(), self.requeues);
        let mut first_job: BTreeMap<String, At> = BTreeMap::new();
        let mut arrivals = Vec::new();
        for track in self.tracks.values() {
            let (submitted, observed) = match self.translate(track, typical, largest, gpu_mem) {
                Ok(ok) => ok,
                Err(why) => {
                    *skipped.entry(why).or_default() += 1;
                    continue;
                }
            };
            let account = observed.spec.tags.tenant.0.clone();
            o.submitted += u64::from(window.holds(submitted));
            if let Some(start) = track.first_start.map(|s| s.max(first_at))
                && window.holds(start)
            {
                let wait = (start - submitted).num_seconds().max(0);
                o.waits.push(wait);
                slurm_waits.entry(account.clone()).or_default().push(wait);
            }
            match track.ended {
                Some((end, true)) if window.holds(end) => {
                    o.finished += 1;
                    o.jct_secs_sum += (end - submitted).num_seconds().max(0);
                    o.jct_count += 1;
                }
                Some((end, false)) if window.holds(end) => o.failed += 1,
                _ => {}
            }
            o.queued_at_end += u64::from(track.pending && track.open());
            let first = first_job.entry(account).or_insert(submitted);
            *first = (*first).min(submitted);
            arrivals.push((submitted, ARRIVAL, Logged::Event(Event::JobSubmitted { spec: observed.spec.clone() })));
            jobs.insert(observed.spec.id, observed);
        }
        // An account the log defines late, or never, is a tenant from the
        // start with the whole site as its quota, until the log says otherwise.
        for (account, first) in &first_job {
            if self.tenants.get(account).is_none_or(|defined| defined > first) {
                let spec = TenantSpec {
                    id: TenantId(account.clone()),
                    quota_gpus: site_gpus,
                    monthly_budget: Micros(0),
                    quota_gpu_mem: Mib(0),
                    borrow_limit_gpus: site_gpus,
                };
                self.push(first_at, SETUP, Event::TenantDefined { spec });
            }
        }
        self.exogenous.extend(arrivals);
        self.exogenous.sort_by_key(|(at, rank, _)| (*at, *rank));
        actual.waits.sort_unstable();
        let notes = self.notes(&jobs, &skipped, site_nodes.len(), site_gpus, typical);
        let gpu_jobs = self.tracks.len();
        let recorded = Recorded {
            actual,
            events,
            in_window,
            exogenous: self.exogenous.into_iter().map(|(at, _, logged)| (at, logged)).collect(),
            jobs,
            typical_job_secs: typical,
            left_out: self.left_out,
        };
        Site { recorded, notes, slurm_waits, rerun_waits: Mutex::new(BTreeMap::new()), gpu_jobs }
    }

    fn notes(&self, jobs: &BTreeMap<JobId, Observed>, skipped: &BTreeMap<&'static str, u64>, nodes: usize, gpus: u32, typical_secs: f64) -> Vec<String> {
        let running = jobs.keys().filter(|id| self.tracks.get(&id.0).is_some_and(|t| t.run.is_some())).count();
        let unstarted = jobs.values().filter(|o| o.rate.is_none()).count();
        let mut text = format!("{} Slurm GPU jobs on {nodes} Slurm nodes ({gpus} GPUs), each run as long as Slurm ran it", jobs.len());
        if running > 0 {
            text.push_str(&format!("; {running} still running at the end run to their time limit (else as long as the log showed)"));
        }
        if unstarted > 0 {
            text.push_str(&format!("; {unstarted} that never started run for their time limit, else the typical job's {:.0} min", typical_secs / 60.0));
        }
        text.push_str("; checkpoints taken as 1 GiB a GPU (Slurm does not say)");
        let typed = jobs.keys().filter(|id| self.tracks.get(&id.0).is_some_and(|t| t.job.gpu_type.is_some())).count();
        if typed > 0 {
            text.push_str(&format!("; {typed} asked a GPU type, which the room's jobs cannot name: here they may run on another, at its speed"));
        }
        let mut notes = vec![text];
        if !skipped.is_empty() {
            let parts: Vec<String> = skipped.iter().map(|(why, n)| format!("{n} {why}")).collect();
            notes.push(format!("left out of every column: {}", parts.join(", ")));
        }
        if !self.unknown_nodes.is_empty() {
            let names: Vec<&str> = self.unknown_nodes.iter().map(String::as_str).take(5).collect();
            notes.push(format!("{} Slurm nodes with GPUs the room never sized ({}…) are left out of the re-runs", self.unknown_nodes.len(), names.join(", ")));
        }
        notes
    }
}

#[path = "slurm_site_notes.rs"]
mod notes;
pub use notes::{AccountWaits, model_error_note};

#[cfg(test)]
#[path = "slurm_site_tests.rs"]
mod tests;
