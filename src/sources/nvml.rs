//! NVML: this machine's GPUs, read through nvml-wrapper: utilization, memory
//! used and free, temperature, power, SM and memory clocks, compute
//! processes, and MIG instances where MIG is on.
//!
//! The NVML calls sit behind the small `GpuDriver` trait, so the conversion
//! to `GpuReading`s is tested with recorded values on machines without a GPU.
//! Without an NVIDIA driver (`libnvidia-ml.so.1` cannot be loaded) the
//! sampler reports that once as a failed source, in words, and keeps trying
//! every minute; nothing else depends on it. Owns no state of the room.

use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use serde::Deserialize;

use super::report::{GpuProcess, GpuReading, Report};
use crate::domain::units::Mib;

/// Figures of one device as the driver gives them, in its units (bytes,
/// milliwatts). `None`: the device does not support that query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawGpu {
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub util_pct: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_free_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub power_mw: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// (pid, bytes used if the driver says).
    pub processes: Vec<(u32, Option<u64>)>,
    /// MIG devices of this GPU, in index order, when MIG is on.
    pub mig: Vec<RawGpu>,
}

/// What the sampler needs from a driver: the device count and one device's figures.
pub trait GpuDriver {
    fn count(&self) -> Result<u32, String>;
    fn raw(&self, index: u32) -> Result<RawGpu, String>;
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NvmlConfig {
    pub enabled: bool,
    pub every_secs: u64,
    /// The node name this machine's GPUs are shown under; default: the host name.
    pub host: Option<String>,
}

impl Default for NvmlConfig {
    fn default() -> NvmlConfig {
        NvmlConfig { enabled: true, every_secs: 5, host: None }
    }
}

fn mib(bytes: u64) -> Mib {
    Mib(u32::try_from(bytes / (1024 * 1024)).unwrap_or(u32::MAX))
}

fn to_reading(host: &str, index: u8, raw: &RawGpu, mig_instance: Option<u32>) -> GpuReading {
    GpuReading {
        host: host.to_string(),
        index,
        uuid: raw.uuid.clone(),
        model: raw.name.clone(),
        mig_instance,
        util_pct: raw.util_pct.map(|u| u.min(100) as f32),
        mem_used: raw.mem_used_bytes.map(mib),
        mem_free: raw.mem_free_bytes.map(mib),
        temp_c: raw.temp_c.map(|t| t as f32),
        power_w: raw.power_mw.map(|mw| mw as f32 / 1000.0),
        sm_clock_mhz: raw.sm_clock_mhz,
        mem_clock_mhz: raw.mem_clock_mhz,
        processes: raw.processes.iter().map(|(pid, used)| GpuProcess { pid: *pid, used: used.map(mib) }).collect(),
    }
}

/// Every GPU of the driver as readings: one per GPU, then one per MIG
/// instance of it (`mig_instance` set, same `index`). A GPU that cannot be
/// read is left out and named in the second value; no GPU at all is an error.
pub fn readings(host: &str, driver: &dyn GpuDriver) -> Result<(Vec<GpuReading>, Vec<String>), String> {
    let count = driver.count()?;
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for i in 0..count.min(u32::from(u8::MAX)) {
        match driver.raw(i) {
            Ok(raw) => {
                let index = i as u8;
                out.push(to_reading(host, index, &raw, None));
                out.extend(raw.mig.iter().enumerate().map(|(m, slice)| to_reading(host, index, slice, Some(m as u32))));
            }
            Err(why) => problems.push(format!("GPU {i}: {why}")),
        }
    }
    if out.is_empty() && count > 0 {
        return Err(problems.join("; "));
    }
    Ok((out, problems))
}

/// The words for an NVML failure, "no NVIDIA driver" when the library is absent.
pub fn describe(err: &NvmlError) -> String {
    match err {
        NvmlError::LibloadingError(e) => format!("no NVIDIA driver (libnvidia-ml.so.1 could not be loaded: {e})"),
        NvmlError::FailedToLoadSymbol(s) => format!("NVIDIA driver too old for NVML symbol {s}"),
        NvmlError::DriverNotLoaded => "no NVIDIA driver loaded (the kernel module is not running)".to_string(),
        NvmlError::NoPermission => "no permission to query the NVIDIA driver".to_string(),
        other => format!("NVML: {other}"),
    }
}

/// nvml-wrapper as a `GpuDriver`.
pub struct NvmlDriver(Nvml);

impl NvmlDriver {
    pub fn open() -> Result<NvmlDriver, String> {
        Nvml::init().map(NvmlDriver).map_err(|e| describe(&e))
    }

    pub fn driver_version(&self) -> Option<String> {
        self.0.sys_driver_version().ok()
    }
}

fn device_raw(device: &nvml_wrapper::Device<'_>) -> RawGpu {
    let mem = device.memory_info().ok();
    RawGpu {
        name: device.name().ok(),
        uuid: device.uuid().ok(),
        util_pct: device.utilization_rates().ok().map(|u| u.gpu),
        mem_used_bytes: mem.as_ref().map(|m| m.used),
        mem_free_bytes: mem.as_ref().map(|m| m.free),
        temp_c: device.temperature(TemperatureSensor::Gpu).ok(),
        power_mw: device.power_usage().ok(),
        sm_clock_mhz: device.clock_info(Clock::SM).ok(),
        mem_clock_mhz: device.clock_info(Clock::Memory).ok(),
        processes: device
            .running_compute_processes()
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        (
                            p.pid,
                            match p.used_gpu_memory {
                                UsedGpuMemory::Used(b) => Some(b),
                                UsedGpuMemory::Unavailable => None,
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        mig: Vec::new(),
    }
}

impl GpuDriver for NvmlDriver {
    fn count(&self) -> Result<u32, String> {
        self.0.device_count().map_err(|e| describe(&e))
    }

    fn raw(&self, index: u32) -> Result<RawGpu, String> {
        let device = self.0.device_by_index(index).map_err(|e| describe(&e))?;
        let mut raw = device_raw(&device);
        if device.mig_mode().is_ok_and(|m| m.current == 1) {
            let slices = device.mig_device_count().unwrap_or(0);
            raw.mig = (0..slices).filter_map(|m| device.mig_device_by_index(m).ok()).map(|d| device_raw(&d)).collect();
        }
        Ok(raw)
    }
}

/// This machine's name: the node its GPUs are shown under.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// How often to try loading the driver again after it was absent.
const RETRY_OPEN: Duration = Duration::from_secs(60);

/// Samples this machine's GPUs on a thread of its own (NVML calls block),
/// sending readings every `every_secs`, and one `Failed` report (not one per
/// poll) while the driver is absent or failing. Ends when `reports` closes.
pub fn spawn(config: NvmlConfig, reports: tokio::sync::mpsc::Sender<Report>) -> std::thread::JoinHandle<()> {
    let host = config.host.clone().unwrap_or_else(host_name);
    let every = Duration::from_secs(config.every_secs.max(1));
    std::thread::spawn(move || {
        let mut failing: Option<String> = None;
        let mut announced = false;
        let mut driver: Option<NvmlDriver> = None;
        loop {
            if driver.is_none() {
                driver = match NvmlDriver::open() {
                    Ok(d) => Some(d),
                    Err(why) => {
                        if failing.as_deref() != Some(why.as_str()) {
                            let report = Report::Failed { source: "nvml".into(), hosts: vec![host.clone()], why: why.clone() };
                            if reports.blocking_send(report).is_err() {
                                return;
                            }
                            failing = Some(why);
                        }
                        std::thread::sleep(RETRY_OPEN);
                        continue;
                    }
                };
            }
            let Some(d) = driver.as_ref() else { continue };
            let sent = match readings(&host, d) {
                Ok((readings, problems)) => {
                    let recovered = failing.take().is_some() || !announced;
                    announced = true;
                    let detail = format!(
                        "{} GPUs on {host}{}",
                        readings.iter().filter(|r| r.mig_instance.is_none()).count(),
                        d.driver_version().map(|v| format!(", driver {v}")).unwrap_or_default()
                    );
                    let healthy = (recovered || !problems.is_empty()).then(|| {
                        let extra = if problems.is_empty() { String::new() } else { format!("; {}", problems.join("; ")) };
                        Report::Healthy { source: "nvml".into(), detail: format!("{detail}{extra}") }
                    });
                    healthy.is_none_or(|h| reports.blocking_send(h).is_ok()) && reports.blocking_send(Report::Gpus { source: "nvml".into(), readings }).is_ok()
                }
                Err(why) => {
                    let changed = failing.as_deref() != Some(why.as_str());
                    failing = Some(why.clone());
                    !changed || reports.blocking_send(Report::Failed { source: "nvml".into(), hosts: vec![host.clone()], why }).is_ok()
                }
            };
            if !sent {
                return;
            }
            std::thread::sleep(every);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures recorded from `nvidia-smi -q` on an A100-SXM4-40GB node (two
    /// GPUs kept) and a MIG-enabled A100 with two 3g.20gb instances.
    struct Recorded(Vec<Result<RawGpu, String>>);

    impl GpuDriver for Recorded {
        fn count(&self) -> Result<u32, String> {
            Ok(self.0.len() as u32)
        }
        fn raw(&self, index: u32) -> Result<RawGpu, String> {
            self.0.get(index as usize).cloned().unwrap_or_else(|| Err("no such GPU".into()))
        }
    }

    fn a100(util: u32, used_mib: u64) -> RawGpu {
        RawGpu {
            name: Some("NVIDIA A100-SXM4-40GB".into()),
            uuid: Some("GPU-5c1a7c1e-0b0e-2d9b-8f5e-1d2a3b4c5d6e".into()),
            util_pct: Some(util),
            mem_used_bytes: Some(used_mib * 1024 * 1024),
            mem_free_bytes: Some((40_960 - used_mib) * 1024 * 1024),
            temp_c: Some(61),
            power_mw: Some(312_457),
            sm_clock_mhz: Some(1410),
            mem_clock_mhz: Some(1215),
            processes: vec![(48_211, Some(used_mib * 1024 * 1024))],
            mig: Vec::new(),
        }
    }

    #[test]
    fn recorded_figures_become_readings_in_our_units() {
        let driver = Recorded(vec![Ok(a100(97, 31_744)), Ok(a100(0, 4))]);
        let (readings, problems) = readings("gpu-node-7", &driver).unwrap();
        assert!(problems.is_empty());
        assert_eq!(readings.len(), 2);
        let r = &readings[0];
        assert_eq!((r.host.as_str(), r.index, r.mig_instance), ("gpu-node-7", 0, None));
        assert_eq!(r.util_pct, Some(97.0));
        assert_eq!((r.mem_used, r.mem_free, r.mem_total()), (Some(Mib(31_744)), Some(Mib(9_216)), Some(Mib(40_960))));
        assert_eq!(r.power_w, Some(312.457));
        assert_eq!((r.sm_clock_mhz, r.mem_clock_mhz, r.temp_c), (Some(1410), Some(1215), Some(61.0)));
        assert_eq!(r.processes, vec![GpuProcess { pid: 48_211, used: Some(Mib(31_744)) }]);
        assert_eq!(readings[1].index, 1);
    }

    #[test]
    fn mig_instances_follow_their_gpu_and_missing_figures_stay_unknown() {
        let mut gpu = a100(0, 0);
        gpu.util_pct = None; // not reported for a GPU in MIG mode
        let slice = RawGpu { mem_used_bytes: Some(13 << 20), mem_free_bytes: Some((20_096 - 13) << 20), ..RawGpu::default() };
        gpu.mig = vec![slice.clone(), slice];
        let (readings, _) = readings("h", &Recorded(vec![Ok(gpu)])).unwrap();
        let ids: Vec<_> = readings.iter().map(|r| (r.index, r.mig_instance)).collect();
        assert_eq!(ids, vec![(0, None), (0, Some(0)), (0, Some(1))]);
        assert_eq!(readings[0].util_pct, None);
        assert_eq!(readings[1].mem_total(), Some(Mib(20_096)));
        assert_eq!(readings[1].power_w, None);
    }

    #[test]
    fn a_gpu_that_fails_is_named_and_the_others_still_read() {
        let driver = Recorded(vec![Err("GPU is lost".into()), Ok(a100(50, 100))]);
        let (readings, problems) = readings("h", &driver).unwrap();
        assert_eq!(readings.len(), 1);
        assert_eq!(problems, vec!["GPU 0: GPU is lost".to_string()]);
        let all_bad = Recorded(vec![Err("GPU is lost".into())]);
        assert_eq!(super::readings("h", &all_bad).unwrap_err(), "GPU 0: GPU is lost");
    }

    #[test]
    fn utilization_above_100_is_clamped() {
        let (readings, _) = readings("h", &Recorded(vec![Ok(a100(250, 1))])).unwrap();
        assert_eq!(readings[0].util_pct, Some(100.0));
    }

    /// Here (no GPU, no driver) opening NVML fails with words, not a panic.
    #[test]
    fn without_a_driver_opening_says_so() {
        match NvmlDriver::open() {
            Ok(d) => assert!(d.count().is_ok()),
            Err(why) => assert!(why.contains("NVIDIA driver") || why.starts_with("NVML"), "{why}"),
        }
    }

    #[test]
    fn the_sampler_reports_an_absent_driver_once() {
        if NvmlDriver::open().is_ok() {
            return; // a machine with a driver: the readings path is tested above
        }
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let _thread = spawn(NvmlConfig { host: Some("here".into()), ..NvmlConfig::default() }, tx);
        match rx.blocking_recv() {
            Some(Report::Failed { source, hosts, why }) => {
                assert_eq!((source.as_str(), hosts), ("nvml", vec!["here".to_string()]));
                assert!(why.starts_with("no NVIDIA driver"), "{why}");
            }
            other => panic!("expected a failure report, got {other:?}"),
        }
        assert!(rx.try_recv().is_err(), "one report, not one per poll");
    }
}
