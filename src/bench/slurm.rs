//! `gpuroom bench slurm`: the same set of real `sbatch` jobs on the
//! multi-node cluster of `.ci/slurm-multi-up`, twice — Slurm alone (its own
//! priority/basic order and node selection; the room only watching), then
//! Slurm governed by the room (DRF, placement by price tier, checkpoints at
//! the room's risk, max price) — with the same scripted price rise on one
//! spot pool and the same spot interruption, and the figures side by side
//! (issue 39): wait, DRF share error, GPU-hours by billing, uninterruptible
//! jobs on spot, recompute, spend, and how closely Slurm followed the room.
//!
//! Owns the two runs' order and the report; the run is `slurm_run`'s, the
//! figures `slurm_measure`'s. It asserts nothing about time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;

use super::progress::progress;
use super::slurm_measure::{Figures, measure};
use super::slurm_run::{RISEN_PRICE, RunRecord, SPOT_PRICE, Script, nodes, one_run, preflight, reset, work_dir};
use super::slurm_workload::{BenchJob, draw};

#[derive(Clone, Debug)]
pub struct SlurmBenchOptions {
    pub conf: PathBuf,
    pub seed: u64,
    pub jobs: usize,
    /// Short jobs and events (a smoke run).
    pub quick: bool,
    pub work_dir: Option<PathBuf>,
}

/// Both runs and their figures.
#[derive(Clone, Debug)]
pub struct SlurmBench {
    pub options: SlurmBenchOptions,
    pub jobs: Vec<BenchJob>,
    pub script: Script,
    pub alone: (RunRecord, Figures),
    pub governed: (RunRecord, Figures),
}

pub fn run(options: &SlurmBenchOptions) -> anyhow::Result<SlurmBench> {
    let conf = &options.conf;
    preflight(conf)?;
    let jobs = draw(options.seed, options.jobs, options.quick)?;
    let script = Script::new(options.quick);
    let dir = work_dir(options.work_dir.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("a runtime")?;
    let mut runs = Vec::new();
    for (governed, name) in [(false, "alone"), (true, "governed")] {
        progress(format_args!("slurm bench: {} jobs, {name}", jobs.len()));
        let record = runtime.block_on(one_run(conf, &jobs, &script, governed, &dir.join(name)));
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                // Leave the cluster as found, then say why.
                let _ = reset(conf, &[]);
                return Err(e.context(format!("the {name} run")));
            }
        };
        let figures = measure(&record.outcomes, &nodes(&script), &record.samples);
        progress(format_args!("slurm bench: {name}: {} of {} started, mean wait {:.1} s", figures.started, figures.jobs, figures.mean_pending));
        runs.push((record, figures));
    }
    runtime.shutdown_background();
    let governed = runs.pop().context("the governed run")?;
    let alone = runs.pop().context("the run of Slurm alone")?;
    Ok(SlurmBench { options: options.clone(), jobs, script, alone, governed })
}

impl SlurmBench {
    /// The side-by-side table, as Markdown (also read on a terminal).
    pub fn markdown(&self) -> String {
        let (a, g) = (&self.alone.1, &self.governed.1);
        let s = &self.script;
        let mut out = String::new();
        let checkpointless = self.jobs.iter().filter(|j| !j.checkpointable).count();
        let _ = writeln!(out, "# gpuroom bench slurm\n");
        let _ = writeln!(
            out,
            "{} real `sbatch` jobs (Philly's 1/2/4-GPU mix, seed {}, durations compressed to {}–{} s; {checkpointless} cannot checkpoint) for \
             accounts a, b, c arriving in turn, on `.ci/slurm-multi-up`'s cluster: n1, n2 spot (4 A10G each, two pools), n3 on demand (4 A10G), \
             n4 on demand (4 L4). Scripted: n1's pool ${SPOT_PRICE:.2} → ${RISEN_PRICE:.2}/h at {} s; a spot notice on n2 at {} s \
             (reclaimed at {} s, back at {} s). Jobs save on their own every {} s in both runs.\n",
            self.jobs.len(),
            self.options.seed,
            self.jobs.iter().map(|j| j.work_secs).min().unwrap_or(0),
            self.jobs.iter().map(|j| j.work_secs).max().unwrap_or(0),
            s.rise_at,
            s.notice_at,
            s.reclaim_at,
            s.back_at,
            s.own_every,
        );
        let _ = writeln!(out, "| | Slurm alone | governed by the room (DRF) | goal |");
        let _ = writeln!(out, "|---|---:|---:|---|");
        let row = |out: &mut String, what: &str, x: String, y: String, goal: String| {
            let _ = writeln!(out, "| {what} | {x} | {y} | {goal} |");
        };
        row(
            &mut out,
            "jobs started / finished",
            format!("{} / {}", a.started, done(&self.alone.0)),
            format!("{} / {}", g.started, done(&self.governed.0)),
            String::new(),
        );
        row(
            &mut out,
            "mean wait, every wait (requeued ones too)",
            secs(a.mean_pending),
            secs(g.mean_pending),
            verdict(g.mean_pending <= a.mean_pending, format!("not worse ({})", ratio(g.mean_pending, a.mean_pending))),
        );
        row(&mut out, "mean wait to first start", secs(a.mean_wait), secs(g.mean_wait), ratio(g.mean_wait, a.mean_wait));
        row(&mut out, "P95 wait to first start", secs(a.p95_wait), secs(g.p95_wait), ratio(g.p95_wait, a.p95_wait));
        row(&mut out, "mean completion time", secs(a.mean_completion), secs(g.mean_completion), ratio(g.mean_completion, a.mean_completion));
        row(
            &mut out,
            "DRF share error (mean GPU share held away from DRF, contended time)",
            format!("{:.3} over {:.0} s", a.drf_error, a.contended_secs),
            format!("{:.3} over {:.0} s", g.drf_error, g.contended_secs),
            verdict(g.drf_error * 2.0 <= a.drf_error, format!("at least halved ({})", ratio(g.drf_error, a.drf_error))),
        );
        let accounts: Vec<&String> = a.shares.keys().chain(g.shares.keys()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        for account in accounts {
            let share = |f: &Figures| f.shares.get(account).map_or("–".to_string(), |(held, fair)| format!("{:.2} (DRF {:.2})", held, fair));
            row(&mut out, &format!("account {account}: GPU share (its DRF share)"), share(a), share(g), String::new());
        }
        row(&mut out, "GPU-hours on spot / on demand", hours(a), hours(g), String::new());
        row(
            &mut out,
            "jobs that cannot checkpoint, run on spot",
            a.uninterruptible_on_spot.to_string(),
            g.uninterruptible_on_spot.to_string(),
            verdict(g.uninterruptible_on_spot == 0, "0".into()),
        );
        row(
            &mut out,
            "recomputed after interruptions (GPU-s, jobs)",
            format!("{:.0} ({})", a.recompute_gpu_secs, a.interrupted_jobs),
            format!("{:.0} ({})", g.recompute_gpu_secs, g.interrupted_jobs),
            String::new(),
        );
        row(&mut out, "spend at the declared prices", format!("${:.3}", a.spend), format!("${:.3}", g.spend), ratio(g.spend, a.spend));
        row(&mut out, "start order against the room's (Kendall tau, pairs)", tau(a), tau(g), verdict(g.tau.is_some_and(|t| t >= 0.9), "≥ 0.9".into()));
        row(
            &mut out,
            "starts checked by the room: followed / out of order",
            format!("{} / {}", self.alone.0.followed, self.alone.0.out_of_order),
            format!("{} / {}", self.governed.0.followed, self.governed.0.out_of_order),
            String::new(),
        );
        row(&mut out, "makespan", secs(a.makespan), secs(g.makespan), ratio(g.makespan, a.makespan));
        row(&mut out, "commands the room sent (done; failed)", commands(&self.alone.0), commands(&self.governed.0), String::new());
        let _ = writeln!(
            out,
            "\nWait: every second a job of the set was seen pending, a requeued job's waits included, over the set; to first start: \
             Slurm's first start less its submit time (a preempted job's later waits are not in it). Completion: submission to the \
             last second it was seen running. DRF share: at each second some job of the set waits, each account's GPUs \
             against the max-min fair split of the cluster's GPUs up then over what it runs and waits for (equal weights); the error is \
             half the summed absolute difference, as a share of the cluster, averaged over that time. Recompute: the work each job \
             counted again after a restart (its progress less its last save). Spend: each job's share of its node's price while it ran \
             there. Kendall tau: pairs of the set the room's plan listed together, its intent taken from the last sample listing both \
             (the plan is of the room's newest snapshot, so it still lists a job Slurm has just started, as decided: a job it starts \
             now before one it does not, else by rank), against the order Slurm first started them; pairs the room started at once \
             or Slurm started in the same second are ties, left out. In the run of Slurm alone the room only watched (advisory), so its order there is what it \
             would have done."
        );
        out
    }
}

fn done(record: &RunRecord) -> String {
    if record.finished { "all".into() } else { "not all (stopped at the time limit)".into() }
}

fn secs(s: f64) -> String {
    format!("{s:.1} s")
}

fn ratio(x: f64, base: f64) -> String {
    if base > 0.0 { format!("×{:.2}", x / base) } else { "–".into() }
}

fn verdict(ok: bool, goal: String) -> String {
    format!("{} {goal}", if ok { "✓" } else { "✗" })
}

fn hours(f: &Figures) -> String {
    format!("{:.3} / {:.3}", f.spot_gpu_hours, f.on_demand_gpu_hours)
}

fn tau(f: &Figures) -> String {
    f.tau.map_or("– (no contended pair)".into(), |t| format!("{t:.2} ({})", f.tau_pairs))
}

fn commands(record: &RunRecord) -> String {
    if record.commands.is_empty() && record.refused.is_empty() {
        return "none".into();
    }
    let done: BTreeMap<&str, usize> = record.commands.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let list: Vec<String> = done.iter().map(|(verb, n)| format!("{verb} {n}")).collect();
    format!("{}; {}", list.join(", "), record.refused.len())
}
