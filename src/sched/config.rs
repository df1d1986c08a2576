//! The scheduler's settings (part of `RoomConfig`, so of every snapshot)
//! and the resources DRF shares.

use serde::{Deserialize, Serialize};

use crate::domain::discipline::DisciplineKind;
use crate::domain::job::{JobClass, JobSpec};
use crate::domain::units::Secs;

/// Resources a job asks or a tenant holds, in the four dimensions DRF shares.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub gpus: f64,
    /// MiB.
    pub gpu_mem: f64,
    pub cpus: f64,
    /// MiB.
    pub host_mem: f64,
}

impl Resources {
    pub fn of(spec: &JobSpec) -> Resources {
        Resources {
            gpus: f64::from(spec.gpus),
            gpu_mem: f64::from(spec.gpus) * f64::from(spec.gpu_mem.0),
            cpus: f64::from(spec.cpus),
            host_mem: f64::from(spec.host_mem.0),
        }
    }

    pub fn add(&mut self, other: Resources) {
        self.gpus += other.gpus;
        self.gpu_mem += other.gpu_mem;
        self.cpus += other.cpus;
        self.host_mem += other.host_mem;
    }

    /// The largest share of `capacity` this holds, over the dimensions the
    /// cluster has (a dimension of zero capacity does not count).
    pub fn dominant_share(&self, capacity: &Resources) -> f64 {
        let share = |used: f64, cap: f64| if cap > 0.0 { used / cap } else { 0.0 };
        share(self.gpus, capacity.gpus)
            .max(share(self.gpu_mem, capacity.gpu_mem))
            .max(share(self.cpus, capacity.cpus))
            .max(share(self.host_mem, capacity.host_mem))
    }
}

/// How placement picks among the places a job fits.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FitPolicy {
    /// The place with the least left over (keeps large blocks free).
    #[default]
    BestFit,
    /// The first place that fits, in node and GPU order (the baseline).
    FirstFit,
    /// Within a price tier, where the node's expected fragmentation for the
    /// typical shapes of the queued and running jobs grows least (FGD,
    /// Weng et al. ATC'23), then the node left fullest.
    Fragmentation,
}

/// The longest a job of each class should wait before it is escalated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaxWait {
    pub training: Secs,
    pub fine_tune: Secs,
    pub eval: Secs,
    pub batch_inference: Secs,
}

impl Default for MaxWait {
    fn default() -> Self {
        MaxWait { training: Secs(4 * 3600), fine_tune: Secs(2 * 3600), eval: Secs(45 * 60), batch_inference: Secs(45 * 60) }
    }
}

impl MaxWait {
    pub fn of(&self, class: JobClass) -> Secs {
        match class {
            JobClass::Training => self.training,
            JobClass::FineTune => self.fine_tune,
            JobClass::Eval => self.eval,
            JobClass::BatchInference => self.batch_inference,
        }
    }
}

/// Scheduler settings: part of `RoomConfig`, so part of every snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedConfig {
    pub discipline: DisciplineKind,
    /// Priority discipline: priority points gained per hour of waiting.
    pub aging_per_hour: f64,
    /// MLFQ: attained-service thresholds (GPU-seconds) between the queues.
    pub mlfq_thresholds: Vec<i64>,
    /// MLFQ: a job waiting this long is promoted one queue (no starvation).
    pub mlfq_promote_after: Secs,
    /// MLFQ: a job must have run this long before a higher queue preempts it.
    pub mlfq_quantum: Secs,
    /// EASY backfill: the blocked head job gets a reservation; others may only
    /// jump ahead if they do not delay it.
    pub backfill: bool,
    pub fit: FitPolicy,
    /// Small shareable jobs may use the memory an exclusive job did not ask for.
    pub time_sharing: bool,
    pub max_wait: MaxWait,
    /// Idle reclaim: utilization below this (percent) ...
    pub idle_util_pct: f32,
    /// ... for this long releases the GPU. `Secs(0)` turns reclaim off.
    pub idle_window: Secs,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            discipline: DisciplineKind::Fifo,
            aging_per_hour: 1.0,
            mlfq_thresholds: vec![3600, 10 * 3600],
            mlfq_promote_after: Secs(6 * 3600),
            mlfq_quantum: Secs(15 * 60),
            backfill: true,
            fit: FitPolicy::BestFit,
            time_sharing: false,
            max_wait: MaxWait::default(),
            idle_util_pct: 5.0,
            idle_window: Secs(5 * 60),
        }
    }
}
