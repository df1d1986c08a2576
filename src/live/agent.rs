//! `gpuroom agent`: the node side of spot interruptions on a Slurm cluster
//! whose compute nodes are EC2 spot instances. Runs on each compute node,
//! polls the instance metadata service (IMDSv2, every 5 s as AWS
//! recommends) and, on a stop / terminate / hibernate notice, drains its own
//! node through Slurm (`scontrol update nodename=… state=drain reason=…`,
//! the reason in `domain::spot_drain`'s format). Slurm carries the news to
//! the head node, where the room reads the reason and signals or requeues
//! the node's jobs.
//!
//! Owns: the IMDS session (`sources::imds::Imds`), the memory of which drain
//! it already made (one per notice, retried on the next poll while Slurm
//! refuses), and the lines it prints. Must not touch: any other node, any
//! job (no cancel, requeue or signal: that is the head's decision), the
//! node's return to service (it never resumes a node: an operator or the
//! head does), the room or an event log.
//!
//! A rebalance recommendation is printed, not acted on: it carries no
//! deadline and often comes to nothing, and draining on it would take the
//! node out of service early; the head's hazard model sees a node through
//! Slurm only once it is drained, i.e. on the interruption notice itself.

use std::path::PathBuf;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::domain::spot_drain;
use crate::domain::text::for_terminal;
use crate::domain::units::At;
use crate::sources::imds::{Imds, ImdsConfig, ImdsError};
use crate::sources::report::NoticeKind;
use crate::sources::slurm::SlurmConfig;
use crate::sources::slurm::cli::SlurmCli;

/// The command line's options.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The Slurm node to drain; `None`: this machine's short host name.
    pub node: Option<String>,
    /// The metadata service's base URL.
    pub imds: String,
    pub every_secs: u64,
    pub slurm_conf: Option<PathBuf>,
    pub slurm_bin: Option<PathBuf>,
    pub timeout_secs: u64,
    /// Poll once, act, return: failures (IMDS silent, Slurm refusing) are the error.
    pub once: bool,
}

/// This machine's short host name, which is how Slurm usually names its
/// node: the kernel's host name (`/proc/sys/kernel/hostname`, what
/// gethostname(2) returns on Linux), else `$HOSTNAME`, else the output of
/// `hostname`; cut at the first dot. `None` when none of them gives one.
pub fn short_host_name() -> Option<String> {
    let short = |name: String| Some(super::translate::short_host(name.trim()).to_string()).filter(|n| !n.is_empty());
    let command =
        || std::process::Command::new("hostname").output().ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .and_then(short)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(short))
        .or_else(|| command().and_then(short))
}

fn action(kind: NoticeKind) -> Option<&'static str> {
    match kind {
        NoticeKind::Stop => Some("stop"),
        NoticeKind::Terminate => Some("terminate"),
        NoticeKind::Hibernate => Some("hibernate"),
        NoticeKind::Rebalance => None,
    }
}

/// What a poll calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// A line for stdout.
    Say(String),
    /// A line for stderr.
    Warn(String),
    /// Drain the node with this reason.
    Drain(String),
}

/// What the agent saw and did, apart from IO: unit-tested.
#[derive(Debug)]
pub struct Watch {
    node: String,
    endpoint: String,
    /// The reason the node is drained with, by this agent or found so in
    /// Slurm: the same notice is not drained again.
    drained: Option<String>,
    /// None before the first poll; Some(None) answering; Some(Some(why)) failing.
    health: Option<Option<String>>,
    rebalance: bool,
}

impl Watch {
    pub fn new(node: &str, endpoint: &str) -> Watch {
        Watch { node: node.to_string(), endpoint: endpoint.to_string(), drained: None, health: None, rebalance: false }
    }

    /// A poll's result: what to print, and the drain to make if one is due.
    pub fn polled(&mut self, polled: &Result<Vec<(NoticeKind, Option<At>)>, ImdsError>) -> Vec<Act> {
        let mut out = Vec::new();
        let notices = match polled {
            Err(e) => {
                let why = e.to_string();
                if self.health.as_ref().and_then(|h| h.as_ref()) != Some(&why) {
                    out.push(Act::Warn(format!("imds: {why}")));
                }
                self.health = Some(Some(why));
                return out;
            }
            Ok(notices) => notices,
        };
        if matches!(self.health, Some(Some(_))) {
            out.push(Act::Warn(format!("imds: {} answers again", self.endpoint)));
        }
        self.health = Some(None);
        let rebalance = notices.iter().any(|(k, _)| *k == NoticeKind::Rebalance);
        if rebalance && !self.rebalance {
            out.push(Act::Say(format!("rebalance recommended for {}: not drained (no deadline yet; the interruption notice drains it)", self.node)));
        }
        self.rebalance = rebalance;
        if let Some((kind, deadline)) = notices.iter().find_map(|(k, d)| action(*k).map(|a| (a, *d))) {
            let reason = spot_drain::reason(kind, deadline);
            if self.drained.as_deref() != Some(reason.as_str()) {
                out.push(Act::Drain(reason));
            }
        }
        out
    }

    /// The node is drained with `reason` (by us, or found so): not again.
    pub fn drained(&mut self, reason: &str) {
        self.drained = Some(reason.to_string());
    }
}

/// Drains the node unless Slurm already shows it drained for this very
/// notice; the line to print, or why it failed (to retry at the next poll).
async fn drain(slurm: &SlurmCli, node: &str, reason: &str) -> Result<String, String> {
    let before = slurm.node_state(node).await.ok();
    let mut replaced = String::new();
    if let Some((state, Some(was))) = &before {
        if state.contains("DRAIN") && spot_drain::parse(was).is_some() && spot_drain::parse(was) == spot_drain::parse(reason) {
            return Ok(format!("already drained {node}: {was}"));
        }
        if state.contains("DRAIN") {
            replaced = format!("; it was drained for: {was}");
        }
    }
    let answer = slurm.drain_node(node, reason).await.map_err(|e| format!("could not drain {node}: {e}"))?;
    // Read back: scontrol (22.05) answers an unknown node name with silence and status 0.
    let state = match slurm.node_state(node).await {
        Ok((state, _)) if state.contains("DRAIN") => state,
        Ok((state, _)) => return Err(format!("could not drain {node}: Slurm took the drain but shows it {state}")),
        Err(e) => return Err(format!("could not drain {node}: Slurm took the drain but does not show the node ({e})")),
    };
    let said = if answer.is_empty() { String::new() } else { format!("{answer}; ") };
    Ok(format!("drained {node}: {reason} (Slurm: {said}state {state}{replaced})"))
}

/// One poll and what it calls for; what failed, if anything (already printed in full).
async fn cycle(watch: &mut Watch, imds: &mut Imds, slurm: &SlurmCli) -> Vec<String> {
    let polled = imds.poll_once().await;
    // Each failure is printed as it happens; these are the summaries.
    let mut failures: Vec<String> = polled.as_ref().err().map(|_| format!("the metadata service at {} did not answer", watch.endpoint)).into_iter().collect();
    for act in watch.polled(&polled) {
        match act {
            Act::Say(line) => println!("{}", for_terminal(&line)),
            Act::Warn(line) => eprintln!("{}", for_terminal(&line)),
            Act::Drain(reason) => match drain(slurm, &watch.node, &reason).await {
                Ok(line) => {
                    watch.drained(&reason);
                    println!("{}", for_terminal(&line));
                }
                Err(line) => {
                    eprintln!("{}", for_terminal(&line));
                    failures.push(format!("{} was not drained", watch.node));
                }
            },
        }
    }
    failures
}

/// SIGTERM or ctrl-c (SIGINT). The listeners live as long as the loop, so
/// a signal that comes while a poll runs is not missed.
async fn stop_signal(signals: &mut [Option<tokio::signal::unix::Signal>; 2]) {
    let [term, int] = signals;
    tokio::select! {
        _ = one_signal(term) => {}
        _ = one_signal(int) => {}
    }
}

async fn one_signal(signal: &mut Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// `gpuroom agent`: polls until SIGTERM / ctrl-c (or once, with `once`).
pub fn run(options: &AgentOptions) -> Result<(), String> {
    let node = match &options.node {
        Some(n) if !n.trim().is_empty() => n.trim().to_string(),
        Some(_) => return Err("--node is empty".to_string()),
        None => short_host_name().ok_or("cannot tell this machine's host name; name the Slurm node with --node")?,
    };
    let config = ImdsConfig { endpoint: options.imds.clone(), every_secs: options.every_secs.max(1), ..ImdsConfig::default() };
    let slurm =
        SlurmConfig { bin_dir: options.slurm_bin.clone(), conf: options.slurm_conf.clone(), timeout_secs: options.timeout_secs, ..SlurmConfig::default() }
            .cli();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let mut imds = Imds::new(&config);
        let mut watch = Watch::new(&node, config.endpoint.trim_end_matches('/'));
        if options.once {
            let failures = cycle(&mut watch, &mut imds, &slurm).await;
            return if failures.is_empty() { Ok(()) } else { Err(failures.join("; ")) };
        }
        println!(
            "{}",
            for_terminal(&format!(
                "watching {node}: the metadata service at {} every {} s; a spot interruption notice drains it in Slurm",
                config.endpoint, config.every_secs
            ))
        );
        let mut signals = [signal(SignalKind::terminate()).ok(), signal(SignalKind::interrupt()).ok()];
        let mut ticks = tokio::time::interval(Duration::from_secs(config.every_secs));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop_signal(&mut signals) => break,
                _ = ticks.tick() => {}
            }
            tokio::select! {
                _ = stop_signal(&mut signals) => break,
                _ = cycle(&mut watch, &mut imds, &slurm) => {}
            }
        }
        eprintln!("agent for {node}: stopped");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> At {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn a_notice_is_drained_once_and_a_failed_drain_again() {
        let mut w = Watch::new("gpu-7", "http://imds");
        assert_eq!(w.polled(&Ok(vec![])), vec![], "quiet while nothing is announced");
        let notice = Ok(vec![(NoticeKind::Terminate, Some(at("2026-12-04T22:10:00Z")))]);
        let reason = "spot interruption: terminate at 2026-12-04T22:10:00Z (gpuroom agent)".to_string();
        assert_eq!(w.polled(&notice), vec![Act::Drain(reason.clone())]);
        // Slurm refused: the next poll asks again.
        assert_eq!(w.polled(&notice), vec![Act::Drain(reason.clone())]);
        w.drained(&reason);
        assert_eq!(w.polled(&notice), vec![], "drained: not again");
        let moved = Ok(vec![(NoticeKind::Stop, Some(at("2026-12-04T22:12:00Z")))]);
        assert_eq!(
            w.polled(&moved),
            vec![Act::Drain("spot interruption: stop at 2026-12-04T22:12:00Z (gpuroom agent)".into())],
            "a new notice is drained anew"
        );
    }

    #[test]
    fn a_rebalance_is_told_once_and_never_drains() {
        let mut w = Watch::new("gpu-7", "http://imds");
        let rebalance = Ok(vec![(NoticeKind::Rebalance, None)]);
        let told = w.polled(&rebalance);
        assert!(matches!(&told[..], [Act::Say(line)] if line.starts_with("rebalance recommended for gpu-7")), "{told:?}");
        assert_eq!(w.polled(&rebalance), vec![]);
        assert_eq!(w.polled(&Ok(vec![])), vec![]);
        assert_eq!(w.polled(&rebalance).len(), 1, "a new recommendation is told");
        let both = Ok(vec![(NoticeKind::Terminate, Some(at("2026-12-04T22:10:00Z"))), (NoticeKind::Rebalance, None)]);
        assert!(matches!(&w.polled(&both)[..], [Act::Drain(_)]));
    }

    #[test]
    fn health_is_told_on_each_change() {
        let mut w = Watch::new("gpu-7", "http://imds");
        let down = Err(ImdsError::Connect { url: "http://imds/latest/api/token".into(), why: "connection refused".into() });
        let told = w.polled(&down);
        assert!(matches!(&told[..], [Act::Warn(line)] if line.contains("connection refused")), "{told:?}");
        assert_eq!(w.polled(&down), vec![], "once per change");
        assert_eq!(w.polled(&Ok(vec![])), vec![Act::Warn("imds: http://imds answers again".into())]);
        assert_eq!(w.polled(&Ok(vec![])), vec![]);
    }

    #[test]
    fn the_host_name_is_short() {
        if let Some(name) = short_host_name() {
            assert!(!name.is_empty() && !name.contains('.'), "{name:?}");
        }
    }
}
