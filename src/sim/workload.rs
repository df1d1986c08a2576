//! Arriving jobs: durations and GPU counts sampled from the real Philly trace,
//! dressed with tenants, tags, memory asks and a per-step time. What only the
//! simulated world knows (true speed, how busy the job keeps its GPU, whether
//! it will crash) stays in `SimJob` and never reaches the `Room`.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

use super::config::SimConfig;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{JobClass, JobSpec, PoolPreference, Tags};
use crate::domain::units::{At, Mib, Secs};
use crate::sources::philly::PhillyJob;

/// The simulated world's private facts about a job.
#[derive(Clone, Debug)]
pub struct SimJob {
    pub spec: JobSpec,
    /// Seconds per step on a V100 (speed 1.0).
    pub step_secs: f64,
    /// Mean GPU utilization while computing, percent.
    pub util: f64,
    /// The step it fails at, whatever the failure rate (a what-if replays a
    /// recorded failure so); `None`: drawn with the failure rate.
    pub fails_at_step: Option<u64>,
}

pub struct Workload {
    samples: Vec<(Secs, u32)>,
    arrivals: Exp<f64>,
    pub mean_gpu_secs: f64,
    pub jobs_per_hour: f64,
}

impl Workload {
    pub fn new(config: &SimConfig, philly: &[PhillyJob]) -> Result<Workload, String> {
        let w = &config.workload;
        let samples: Vec<(Secs, u32)> = philly
            .iter()
            .filter(|j| j.gpus <= w.max_gpus && (w.min_duration_secs..=w.max_duration_secs).contains(&j.duration.0))
            .map(|j| (j.duration, j.gpus))
            .collect();
        if samples.is_empty() {
            return Err("no Philly job fits the workload bounds".into());
        }
        let mean_gpu_secs = samples.iter().map(|(d, g)| d.0 as f64 * f64::from(*g)).sum::<f64>() / samples.len() as f64;
        let capacity = config.load_basis_gpus();
        let per_sec = config.target_load * capacity / mean_gpu_secs;
        let arrivals = Exp::new(per_sec).map_err(|e| format!("arrival rate {per_sec}: {e}"))?;
        Ok(Workload { samples, arrivals, mean_gpu_secs, jobs_per_hour: per_sec * 3600.0 })
    }

    /// Seconds until the next arrival (Poisson process).
    pub fn next_gap(&self, rng: &mut ChaCha8Rng) -> f64 {
        self.arrivals.sample(rng)
    }

    fn pick<'a>(rng: &mut ChaCha8Rng, items: &'a [String]) -> &'a str {
        &items[rng.random_range(0..items.len())]
    }

    /// The trace's first `trace_jobs` rows (file order), as (arrival, job),
    /// arrival times shifted so the first one is at the simulation's start.
    pub fn from_trace(config: &SimConfig, philly: &[PhillyJob], rng: &mut ChaCha8Rng) -> Vec<(At, SimJob)> {
        let rows = &philly[..config.workload.trace_jobs.min(philly.len())];
        let Some(first) = rows.iter().map(|r| r.submitted).min() else { return Vec::new() };
        let mut jobs: Vec<(At, SimJob)> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let id = JobId(i as u64 + 1);
                let at = config.start + (row.submitted - first);
                (at, Self::dress(config, id, (Secs(row.duration.0.max(1)), row.gpus), rng))
            })
            .collect();
        jobs.sort_by_key(|(at, job)| (*at, job.spec.id));
        jobs
    }

    pub fn make_job(&self, config: &SimConfig, id: JobId, rng: &mut ChaCha8Rng) -> SimJob {
        let sample = self.samples[rng.random_range(0..self.samples.len())];
        Self::dress(config, id, sample, rng)
    }

    /// A job of this duration and GPU count, with tenant, tags, memory,
    /// host resources, class and time limit drawn from the configuration.
    fn dress(config: &SimConfig, id: JobId, (duration, gpus): (Secs, u32), rng: &mut ChaCha8Rng) -> SimJob {
        let w = &config.workload;
        let total: f64 = config.tenants.iter().map(|t| t.share).sum();
        let mut roll = rng.random::<f64>() * total;
        let mut tenant = &config.tenants[0];
        for (t, weight) in config.tenants.iter().map(|t| (t, &t.share)) {
            if roll < *weight {
                tenant = t;
                break;
            }
            roll -= weight;
        }
        let shared = gpus == 1 && rng.random::<f64>() < w.shared_fraction;
        let class = match (shared, gpus) {
            (true, _) if rng.random::<f64>() < 0.5 => JobClass::Eval,
            (true, _) => JobClass::BatchInference,
            (false, 1) if rng.random::<f64>() < 0.4 => JobClass::FineTune,
            _ => JobClass::Training,
        };
        let gpu_mem = if shared { Mib(rng.random_range(1024..6144)) } else { Mib(rng.random_range(6144..15_872)) };
        let step_secs = rng.random_range(0.4..2.5);
        let steps_total = ((duration.0 as f64 / step_secs).round() as u64).max(1);
        let util = match class {
            JobClass::Training | JobClass::FineTune => rng.random_range(78.0..97.0),
            JobClass::Eval => rng.random_range(25.0..60.0),
            JobClass::BatchInference => rng.random_range(20.0..50.0),
        };
        let checkpoint_size = match class {
            JobClass::Training => Mib(rng.random_range(2048..24_576) * gpus.min(4)),
            JobClass::FineTune => Mib(rng.random_range(1024..8192)),
            JobClass::Eval | JobClass::BatchInference => Mib(rng.random_range(128..1024)),
        };
        let project = Self::pick(rng, &tenant.projects).to_string();
        let model = Self::pick(rng, &tenant.models).to_string();
        let env = Self::pick(rng, &tenant.envs).to_string();
        // SPEC §1: interruptible batch and evaluation on spot; some work never on spot.
        let pool = if shared && rng.random::<f64>() < w.spot_only_fraction {
            PoolPreference::SpotOnly
        } else if rng.random::<f64>() < w.no_spot_fraction {
            PoolPreference::NoSpot
        } else {
            PoolPreference::Any
        };
        let (cpus, host_mem) = if shared {
            (rng.random_range(1..=2), Mib(rng.random_range(4..=16) * 1024))
        } else {
            (gpus * rng.random_range(2..=4), Mib(gpus * rng.random_range(16..=48) * 1024))
        };
        // Submitters over-estimate: a time limit of 1.2-3x the run, in quarter hours.
        let est_runtime = Some(Secs(((duration.0 as f64 * rng.random_range(1.2..3.0)) / 900.0).ceil() as i64 * 900));
        SimJob {
            spec: JobSpec {
                id,
                name: format!("{project}-{}-{}", class.label(), id.0),
                tags: Tags { tenant: TenantId(tenant.name.clone()), project, env, model },
                class,
                gpus: gpus as u8,
                gpu_mem,
                exclusive: !shared,
                steps_total,
                priority: 0,
                pool,
                checkpoint_size,
                cpus,
                host_mem,
                est_runtime,
                gpu_models: Vec::new(),
            },
            step_secs,
            util,
            fails_at_step: None,
        }
    }
}
