//! Starting the live adapters and driving the engine from their reports:
//! each adapter is a task (NVML a thread: its calls block) sending `Report`s
//! down one channel; the driver applies them at the wall-clock time, runs
//! the operator's actions, and publishes views. Nothing here blocks the
//! console: adapters wait on the network, the driver only on channels.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::config::SourcesConfig;
use super::Live;
use crate::domain::event::{Action, Actor};
use crate::room::View;
use crate::host::{self, Duty};
use crate::sources::local::ExecutorInput;
use crate::sources::report::Report;
use crate::sources::{aws, dcgm, imds, local, nvml, slurm};

/// The running adapters: one channel of reports from all of them, and the
/// local executor's inbox if it runs.
pub struct Adapters {
    pub reports: mpsc::Receiver<Report>,
    pub executor: Option<mpsc::Sender<ExecutorInput>>,
    /// The Slurm executor's inbox, if a Slurm cluster is configured.
    pub slurm: Option<mpsc::Sender<crate::domain::slurm::SlurmCommand>>,
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
    if let Some(cfg) = &config.aws {
        drop(aws::spawn(cfg.clone(), tx.clone()));
        running.push("ec2".to_string());
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
    Adapters { reports, executor, slurm, running }
}

/// What the console and the driver share.
pub struct Links {
    pub views: watch::Sender<Arc<View>>,
    pub actions: mpsc::Receiver<Action>,
    pub outcomes: mpsc::Sender<Result<String, String>>,
    pub stopped: oneshot::Receiver<()>,
}

/// Applies reports as they come, ticks the clock every second (budgets,
/// alarms, checkpoints fall due without news), carries out actions, and
/// publishes a view at most every 250 ms. With a `duty` (the engine owns a
/// log) each tick also beats the lease's heartbeat, applies the attached
/// consoles' commands and publishes their view, in the tick's one batch.
/// Returns the engine when the console closes; the caller finishes the duty.
pub async fn drive(mut live: Live, mut reports: mpsc::Receiver<Report>, mut links: Links, actor: Actor, mut duty: Option<Duty>) -> anyhow::Result<(Live, Option<Duty>)> {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let mut quiet_ticks = 0u32;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                quiet_ticks += 1;
                if let Some(duty) = duty.as_mut() {
                    dirty |= owner_tick(&mut live, duty)?;
                }
                if dirty || quiet_ticks >= 4 {
                    live.tick(chrono::Utc::now())?;
                    if links.views.send(Arc::new(live.engine.room.view())).is_err() {
                        break;
                    }
                    dirty = false;
                    quiet_ticks = 0;
                }
            }
            Some(report) = reports.recv() => {
                live.report(chrono::Utc::now(), report)?;
                dirty = true;
            }
            Some(action) = links.actions.recv() => {
                let outcome = live.engine.operate(&actor, action)?;
                let _ = links.outcomes.send(outcome).await;
                let _ = links.views.send(Arc::new(live.engine.room.view()));
            }
            _ = &mut links.stopped => break,
        }
    }
    Ok((live, duty))
}

/// The owner's share of a tick, as one batch: heartbeat, commands, the view
/// for attached consoles when due. Returns whether a command was applied.
fn owner_tick(live: &mut Live, duty: &mut Duty) -> anyhow::Result<bool> {
    let now_ms = host::now_ms();
    let own_batch = live.engine.begin_batch()?;
    // No tick here: the loop ticks when there is news (or each second), and
    // a tick every 250 ms would log four needless events a second.
    let applied = duty.intake(&mut live.engine, now_ms)?;
    if duty.publish_due(now_ms) || applied > 0 {
        let view = live.engine.room.view();
        duty.publish(&mut live.engine, &view, now_ms)?;
    }
    if own_batch {
        live.engine.end_batch()?;
    }
    Ok(applied > 0)
}
