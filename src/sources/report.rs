//! What live adapters say about the outside world, before it becomes core
//! `Event`s: readings keyed by the names the outside world uses (a host name,
//! an EC2 instance id), which `live::Translator` maps to the core's ids.
//!
//! Adapters build these and send them down a channel; they never see the
//! `Room`. Everything here is plain data, so the conversion code of each
//! adapter is unit-tested with recorded values.

use crate::domain::event::Event;
use crate::domain::units::{At, Mib, MicrosPerHour};

/// One GPU (or MIG instance) as a sampler saw it. Every figure is optional:
/// exporters and drivers leave fields out, and a missing figure is shown as
/// unknown rather than as zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuReading {
    /// The machine the GPU is in (dcgm-exporter's `Hostname`, or this host).
    pub host: String,
    /// Device index on the host (dcgm-exporter's `gpu`, NVML's index).
    pub index: u8,
    pub uuid: Option<String>,
    pub model: Option<String>,
    /// MIG: the GPU instance id (`GPU_I_ID`) when this reading is one slice.
    pub mig_instance: Option<u32>,
    /// Percent, 0–100.
    pub util_pct: Option<f32>,
    pub mem_used: Option<Mib>,
    pub mem_free: Option<Mib>,
    pub temp_c: Option<f32>,
    pub power_w: Option<f32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// Compute processes on the GPU (NVML only; dcgm-exporter does not list them).
    pub processes: Vec<GpuProcess>,
}

impl GpuReading {
    /// Framebuffer size when both halves were reported.
    pub fn mem_total(&self) -> Option<Mib> {
        Some(Mib(self.mem_used?.0.saturating_add(self.mem_free?.0)))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuProcess {
    pub pid: u32,
    pub used: Option<Mib>,
}

/// An EC2 instance as DescribeInstances reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// true for spot (InstanceLifecycle = spot).
    pub spot: bool,
    /// pending, running, stopping, stopped, shutting-down, terminated.
    pub state: String,
    pub launched: Option<At>,
    /// The spot request's max price, when known.
    pub max_price: Option<MicrosPerHour>,
    pub private_dns: Option<String>,
    /// The room's launch request it came from (our `gpuroom-request` tag).
    pub request: Option<u64>,
}

/// One point of spot price history.
#[derive(Clone, Debug, PartialEq)]
pub struct PricePoint {
    pub zone: String,
    pub instance_type: String,
    pub at: At,
    pub price: MicrosPerHour,
}

/// What the instance metadata service announced for this instance.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// `spot/instance-action`: stop, terminate or hibernate at the deadline.
    Stop,
    Terminate,
    Hibernate,
    /// `events/recommendations/rebalance`: an elevated risk, no deadline yet.
    Rebalance,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Report {
    /// A source's readings; GPUs of the hosts it covers that are missing from
    /// it are left as they were.
    Gpus {
        source: String,
        readings: Vec<GpuReading>,
    },
    /// A source (or the part of it covering `hosts`) could not be read:
    /// those hosts' GPUs are stale until the next good reading.
    Failed {
        source: String,
        hosts: Vec<String>,
        why: String,
    },
    /// A source that had failed answers again (or answered for the first time).
    Healthy {
        source: String,
        detail: String,
    },
    Prices {
        points: Vec<PricePoint>,
    },
    Fleet {
        instances: Vec<Instance>,
    },
    /// The metadata service of `host` announced an interruption or rebalance.
    Notice {
        host: String,
        kind: NoticeKind,
        deadline: Option<At>,
    },
    /// What a Slurm cluster reported, all at once.
    Slurm {
        snapshot: crate::domain::slurm::SlurmSnapshot,
    },
    /// The room's launch `request` got these instances (all it asked for).
    Launched {
        request: u64,
        instances: Vec<Instance>,
    },
    LaunchFailed {
        request: u64,
        count: u32,
        failure: crate::domain::capacity::LaunchFailure,
        message: String,
    },
    /// The instance behind `node` was terminated as the room asked.
    Released {
        node: crate::domain::ids::NodeId,
        instance: String,
    },
    ReleaseFailed {
        node: crate::domain::ids::NodeId,
        message: String,
    },
    /// Already a core event (the local executor speaks in job ids).
    Core(Event),
}
