//! The figures of `gpuroom bench slurm`, from what one run saw: Slurm's jobs
//! sampled about once a second (state, node, when Slurm started them), the
//! room's order at that moment, and what the jobs themselves recorded as
//! recomputed after an interruption. Pure arithmetic on those samples, so the
//! same code measures Slurm alone and Slurm governed by the room, and tests
//! can feed it samples without a cluster.
//!
//! Owns the definitions (each one said where it is computed); reads nothing
//! but its arguments.

use std::collections::{BTreeMap, BTreeSet};

/// A node of the bench cluster: its billing, GPUs and price over time.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchNode {
    pub name: String,
    pub spot: bool,
    pub gpus: u32,
    /// Dollars per hour from each time on (seconds into the run), in order.
    pub prices: Vec<(f64, f64)>,
}

impl BenchNode {
    pub fn price_at(&self, t: f64) -> f64 {
        self.prices.iter().take_while(|(from, _)| *from <= t).last().or(self.prices.first()).map_or(0.0, |(_, p)| *p)
    }
}

/// One job as a sample saw it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Seen {
    pub name: String,
    pub account: String,
    pub gpus: u32,
    pub running: bool,
    pub node: Option<String>,
    /// When Slurm says it was submitted and (running) started, in seconds into the run.
    pub submitted: f64,
    pub started: Option<f64>,
    /// The room's place for it while it waits (`None`: not ranked), and
    /// whether the room's plan starts it now (a node fits).
    pub rank: Option<u32>,
    pub placed_now: bool,
}

/// Slurm's jobs at one moment of a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    pub t: f64,
    /// GPUs of the nodes up at that moment (a reclaimed node is not).
    pub capacity: u32,
    pub jobs: Vec<Seen>,
}

/// What a job of the set is, as the bench submitted it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobOutcome {
    pub name: String,
    pub account: String,
    pub gpus: u32,
    pub checkpointable: bool,
    /// Seconds of work it computed again after being interrupted (its own count).
    pub lost_secs: u64,
}

/// The figures of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub jobs: usize,
    pub started: usize,
    /// First start less submission, seconds.
    pub mean_wait: f64,
    pub p95_wait: f64,
    /// Every second a job waited, requeued waits too (a preempted job waits
    /// again), per job of the set.
    pub mean_pending: f64,
    /// Submission to its last second running, per job that finished.
    pub mean_completion: f64,
    /// Each account's mean share of the GPUs and its DRF share, over the contended samples.
    pub shares: BTreeMap<String, (f64, f64)>,
    /// Mean over contended time of the GPUs held away from the DRF allocation, as a share of the cluster.
    pub drf_error: f64,
    pub contended_secs: f64,
    pub spot_gpu_hours: f64,
    pub on_demand_gpu_hours: f64,
    /// Jobs that cannot be interrupted seen running on a spot node.
    pub uninterruptible_on_spot: usize,
    /// GPU-seconds computed again after interruptions.
    pub recompute_gpu_secs: f64,
    pub interrupted_jobs: usize,
    /// Dollars, the job's share of its node's price over the time it ran there.
    pub spend: f64,
    /// Kendall's tau between the room's intended start order and Slurm's, over
    /// pairs of jobs that waited together and started at different seconds.
    pub tau: Option<f64>,
    pub tau_pairs: usize,
    /// From first submission to last end, seconds.
    pub makespan: f64,
}

/// Measures one run; `outcomes` are the jobs as submitted (with their own
/// recompute counts), `nodes` the cluster, `samples` in time order.
pub fn measure(outcomes: &[JobOutcome], nodes: &[BenchNode], samples: &[Sample]) -> Figures {
    let by_name: BTreeMap<&str, &JobOutcome> = outcomes.iter().map(|o| (o.name.as_str(), o)).collect();
    let node_of: BTreeMap<&str, &BenchNode> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut f = Figures { jobs: outcomes.len(), ..Figures::default() };
    waits(samples, &by_name, &mut f);
    usage(samples, &by_name, &node_of, &mut f);
    fairness(samples, &by_name, &mut f);
    let (tau, pairs) = kendall(samples);
    f.tau = tau;
    f.tau_pairs = pairs;
    f.recompute_gpu_secs = outcomes.iter().map(|o| o.lost_secs as f64 * f64::from(o.gpus)).sum();
    f.interrupted_jobs = outcomes.iter().filter(|o| o.lost_secs > 0).count();
    f
}

/// Wait: Slurm's first start time less its submit time, per job of the set.
fn waits(samples: &[Sample], by_name: &BTreeMap<&str, &JobOutcome>, f: &mut Figures) {
    let mut first: BTreeMap<&str, f64> = BTreeMap::new();
    for seen in samples.iter().flat_map(|s| &s.jobs).filter(|j| by_name.contains_key(j.name.as_str())) {
        if let Some(started) = seen.started.filter(|_| seen.running) {
            let wait = (started - seen.submitted).max(0.0);
            first.entry(seen.name.as_str()).or_insert(wait);
        }
    }
    let (mut pending, mut last_run): (BTreeMap<&str, f64>, BTreeMap<&str, f64>) = (BTreeMap::new(), BTreeMap::new());
    for (sample, dt) in spans(samples) {
        for seen in sample.jobs.iter().filter(|j| by_name.contains_key(j.name.as_str())) {
            if seen.running {
                last_run.insert(seen.name.as_str(), (sample.t + dt - seen.submitted).max(0.0));
            } else {
                *pending.entry(seen.name.as_str()).or_default() += dt;
            }
        }
    }
    if !by_name.is_empty() {
        f.mean_pending = pending.values().sum::<f64>() / by_name.len() as f64;
    }
    if !last_run.is_empty() {
        f.mean_completion = last_run.values().sum::<f64>() / last_run.len() as f64;
    }
    let mut waits: Vec<f64> = first.into_values().collect();
    waits.sort_by(f64::total_cmp);
    f.started = waits.len();
    if !waits.is_empty() {
        f.mean_wait = waits.iter().sum::<f64>() / waits.len() as f64;
        let rank = ((0.95 * waits.len() as f64).ceil() as usize).clamp(1, waits.len());
        f.p95_wait = waits[rank - 1];
    }
}

/// The time a sample stands for: up to the next one.
fn spans(samples: &[Sample]) -> impl Iterator<Item = (&Sample, f64)> {
    samples.iter().enumerate().map(|(i, s)| (s, samples.get(i + 1).map_or(0.0, |n| (n.t - s.t).max(0.0))))
}

/// GPU-hours by billing, spend at the nodes' prices, uninterruptible jobs on spot, makespan.
fn usage(samples: &[Sample], by_name: &BTreeMap<&str, &JobOutcome>, node_of: &BTreeMap<&str, &BenchNode>, f: &mut Figures) {
    let mut on_spot = BTreeSet::new();
    let (mut begin, mut end) = (f64::INFINITY, 0.0_f64);
    for (sample, dt) in spans(samples) {
        for job in sample.jobs.iter().filter(|j| j.running) {
            let (Some(outcome), Some(node)) = (by_name.get(job.name.as_str()), job.node.as_deref().and_then(|n| node_of.get(n))) else { continue };
            let gpu_hours = f64::from(job.gpus) * dt / 3600.0;
            if node.spot {
                f.spot_gpu_hours += gpu_hours;
                if !outcome.checkpointable {
                    on_spot.insert(job.name.clone());
                }
            } else {
                f.on_demand_gpu_hours += gpu_hours;
            }
            f.spend += node.price_at(sample.t) * f64::from(job.gpus) / f64::from(node.gpus.max(1)) * dt / 3600.0;
            end = end.max(sample.t + dt);
        }
        for job in sample.jobs.iter().filter(|j| by_name.contains_key(j.name.as_str())) {
            begin = begin.min(job.submitted);
        }
    }
    f.uninterruptible_on_spot = on_spot.len();
    f.makespan = if begin.is_finite() { (end - begin).max(0.0) } else { 0.0 };
}

/// DRF: at each sample where GPU work waits, each account's share of the
/// cluster's GPUs against the max-min fair (water-filling) share of its
/// demand (what it runs plus what it waits for), equal weights.
fn fairness(samples: &[Sample], by_name: &BTreeMap<&str, &JobOutcome>, f: &mut Figures) {
    let accounts: BTreeSet<&str> = by_name.values().map(|o| o.account.as_str()).collect();
    let mut sums: BTreeMap<&str, (f64, f64)> = accounts.iter().map(|a| (*a, (0.0, 0.0))).collect();
    let (mut time, mut error) = (0.0, 0.0);
    for (sample, dt) in spans(samples) {
        let ours = || sample.jobs.iter().filter(|j| by_name.contains_key(j.name.as_str()));
        if dt <= 0.0 || sample.capacity == 0 || !ours().any(|j| !j.running) {
            continue;
        }
        let mut held: BTreeMap<&str, f64> = accounts.iter().map(|a| (*a, 0.0)).collect();
        let mut demand = held.clone();
        for job in ours() {
            let account = by_name[job.name.as_str()].account.as_str();
            *demand.entry(account).or_default() += f64::from(job.gpus);
            if job.running {
                *held.entry(account).or_default() += f64::from(job.gpus);
            }
        }
        let capacity = f64::from(sample.capacity);
        let fair = water_fill(&demand, capacity);
        let mut off = 0.0;
        for a in &accounts {
            let (h, d) = (held[a] / capacity, fair[a] / capacity);
            off += (h - d).abs();
            let s = sums.get_mut(a).expect("every account");
            s.0 += h * dt;
            s.1 += d * dt;
        }
        error += off / 2.0 * dt;
        time += dt;
    }
    f.contended_secs = time;
    if time > 0.0 {
        f.drf_error = error / time;
        f.shares = sums.into_iter().map(|(a, (h, d))| (a.to_string(), (h / time, d / time))).collect();
    }
}

/// Max-min fair shares of `capacity` for `demand`: every account gets the
/// same until its demand is met, what is left is shared again.
pub fn water_fill<'a>(demand: &BTreeMap<&'a str, f64>, capacity: f64) -> BTreeMap<&'a str, f64> {
    let mut fair: BTreeMap<&str, f64> = demand.keys().map(|a| (*a, 0.0)).collect();
    let mut left = capacity;
    let mut open: Vec<&str> = demand.iter().filter(|(_, d)| **d > 0.0).map(|(a, _)| *a).collect();
    while left > 1e-9 && !open.is_empty() {
        let each = left / open.len() as f64;
        let mut still = Vec::new();
        for a in open {
            let want = demand[a] - fair[a];
            let give = want.min(each);
            *fair.get_mut(a).expect("every account") += give;
            left -= give;
            if want > each {
                still.push(a);
            }
        }
        open = still;
    }
    fair
}

/// Kendall's tau of Slurm's start order against the room's intended one.
/// For each pair of jobs the room's plan listed together, its intent is
/// taken from the last sample that listed both (the plan is of the room's
/// newest snapshot, so it still lists a job Slurm started since, as it was
/// decided): the one its plan starts now goes first, else the better rank.
/// Pairs it started both at once, and pairs Slurm started in the same
/// second, are ties and left out.
fn kendall(samples: &[Sample]) -> (Option<f64>, usize) {
    // Per pair: whether the first-named should start first, or `None` when
    // the room started both at once (its plan placed both now).
    let mut intent: BTreeMap<(String, String), Option<bool>> = BTreeMap::new();
    let mut first_start: BTreeMap<&str, f64> = BTreeMap::new();
    for sample in samples {
        // The room's plan lists the jobs pending in its newest snapshot: a job
        // Slurm has just started is still there, with the decision behind it.
        // A job requeued after its first start is ranked again; its first
        // start is what is compared, so only the order before it counts.
        let planned: Vec<(&Seen, u32)> =
            sample.jobs.iter().filter(|j| !first_start.contains_key(j.name.as_str())).filter_map(|j| j.rank.map(|r| (j, r))).collect();
        for (i, (a, ra)) in planned.iter().enumerate() {
            for (b, rb) in &planned[i + 1..] {
                let a_first = if a.placed_now && b.placed_now { None } else { Some((!a.placed_now, *ra) < (!b.placed_now, *rb)) };
                let (x, y, x_first) = if a.name < b.name { (&a.name, &b.name, a_first) } else { (&b.name, &a.name, a_first.map(|f| !f)) };
                intent.insert((x.clone(), y.clone()), x_first);
            }
        }
        for job in sample.jobs.iter().filter(|j| j.running) {
            if let Some(started) = job.started {
                first_start.entry(job.name.as_str()).or_insert(started);
            }
        }
    }
    let (mut concordant, mut discordant) = (0_usize, 0_usize);
    for ((x, y), x_first) in &intent {
        let (Some(sx), Some(sy), Some(x_first)) = (first_start.get(x.as_str()), first_start.get(y.as_str()), x_first) else { continue };
        if (sx - sy).abs() < 1.0 {
            continue;
        }
        if (sx < sy) == *x_first {
            concordant += 1;
        } else {
            discordant += 1;
        }
    }
    let pairs = concordant + discordant;
    let tau = (pairs > 0).then(|| (concordant as f64 - discordant as f64) / pairs as f64);
    (tau, pairs)
}

#[cfg(test)]
#[path = "slurm_measure_tests.rs"]
mod tests;
