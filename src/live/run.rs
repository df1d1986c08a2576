//! Starting the live adapters, and the live world's half of the host's loop
//! (`LiveRunner`): each adapter is a task (NVML a thread: its calls block)
//! sending `Report`s down one channel; the loop (`host::driver`) applies
//! them at the wall-clock time. Nothing here blocks the console: adapters
//! wait on the network, the loop only on channels.

use tokio::sync::mpsc;

use super::config::SourcesConfig;
use super::{Live, LiveWorld};
use crate::engine::Engine;
use crate::host::driver::{Caught, Runner};
use crate::sources::local::ExecutorInput;
use crate::sources::report::Report;
use crate::sources::{aws, dcgm, ec2_capacity, imds, local, nvml, slurm};
use crate::store::StoreError;

/// The running adapters: one channel of reports from all of them, and the
/// local executor's inbox if it runs.
pub struct Adapters {
    pub reports: mpsc::Receiver<Report>,
    pub executor: Option<mpsc::Sender<ExecutorInput>>,
    /// The Slurm executor's inbox, if a Slurm cluster is configured.
    pub slurm: Option<mpsc::Sender<crate::domain::slurm::SlurmCommand>>,
    /// The EC2 launcher's inbox, when `[sources.aws]` declares pools.
    pub cloud: Option<mpsc::Sender<crate::sources::ec2_capacity::CloudCommand>>,
    /// What runs, for the header and the log ("nvml", "dcgm ×3", …).
    pub running: Vec<String>,
}

/// Starts every configured adapter. Call inside a tokio runtime.
pub fn spawn_sources(config: &SourcesConfig, host: &str) -> Adapters {
    let (tx, reports) = mpsc::channel(1024);
    let mut running = Vec::new();
    if config.nvml.enabled {
        let cfg = nvml::NvmlConfig { host: Some(host.to_string()), ..config.nvml.clone() };
        drop(nvml::spawn(cfg, tx.clone()));
        running.push("nvml".to_string());
    }
    if !config.dcgm.urls.is_empty() {
        drop(dcgm::spawn(config.dcgm.clone(), tx.clone()));
        running.push(format!("dcgm ×{}", config.dcgm.urls.len()));
    }
    let mut cloud = None;
    if let Some(cfg) = &config.aws {
        drop(aws::spawn(cfg.clone(), tx.clone()));
        running.push("ec2".to_string());
        if !cfg.pools.is_empty() {
            let (ctx, crx) = mpsc::channel(64);
            drop(ec2_capacity::spawn(cfg.clone(), crx, tx.clone()));
            running.push(format!("ec2 pools ×{}", cfg.pools.len()));
            cloud = Some(ctx);
        }
    }
    if let Some(cfg) = &config.imds {
        drop(imds::spawn(cfg.clone(), host.to_string(), tx.clone()));
        running.push("imds".to_string());
    }
    let executor = config.local.as_ref().map(|cfg| {
        let (etx, erx) = mpsc::channel(1024);
        drop(local::spawn(cfg.clone(), erx, tx.clone()));
        running.push("local".to_string());
        etx
    });
    let slurm = config.slurm.as_ref().map(|cfg| {
        running.push(format!("slurm {}", cfg.mode.label()));
        slurm::task::spawn(cfg.clone(), tx.clone())
    });
    Adapters { reports, executor, slurm, cloud, running }
}

/// A live engine on a Slurm site as `config` describes it, begun at `now`:
/// its adapters spawned, its catalogue and Slurm accounts from the same
/// table. For the headless runs that drive one themselves (the Slurm bench,
/// the tests on a real cluster); the console adds EC2 and the local executor.
pub fn start_on_slurm(
    config: &SourcesConfig,
    room: crate::room::RoomConfig,
    store: Option<crate::store::Store>,
    now: crate::domain::units::At,
) -> Result<(Live, mpsc::Receiver<Report>), String> {
    let accounts = config.slurm.as_ref().ok_or("no [slurm] table")?.accounts()?;
    let adapters = spawn_sources(config, "head");
    let catalogue = super::catalogue::Catalogue::new(config.instance_types.clone(), config.nodes.clone());
    let mut live = Live::new(crate::room::Room::new(room), store, catalogue, "head".into(), now, None).with_slurm(adapters.slurm, accounts);
    live.begin(now, None).map_err(|e| e.to_string())?;
    Ok((live, adapters.reports))
}

/// The live world as the host's loop drives it: the wall clock is "now",
/// and adapters' reports are applied as they come. The clock is moved
/// (`Live::tick`) when there was news, or once a second without any, since
/// each move may log a tick.
pub struct LiveRunner {
    pub live: Live,
    dirty: bool,
    quiet: u32,
}

impl LiveRunner {
    pub fn new(live: Live) -> LiveRunner {
        LiveRunner { live, dirty: true, quiet: 0 }
    }
}

impl Runner for LiveRunner {
    type World = LiveWorld;

    fn engine(&mut self) -> &mut Engine<LiveWorld> {
        &mut self.live.engine
    }

    fn catch_up(&mut self, force: bool) -> Result<Caught, StoreError> {
        self.quiet += 1;
        if !(self.dirty || force || self.quiet >= 4) {
            return Ok(Caught::default());
        }
        self.live.tick(chrono::Utc::now())?;
        self.dirty = false;
        self.quiet = 0;
        Ok(Caught { changed: true, over: false })
    }

    fn report(&mut self, report: Report) -> Result<(), StoreError> {
        self.live.report(chrono::Utc::now(), report)?;
        self.dirty = true;
        Ok(())
    }
}
