//! NVIDIA dcgm-exporter on each node (`http://node:9400/metrics`, Prometheus
//! text) polled by the head node: `parse` turns a page into `GpuReading`s,
//! `scrape`/`scrape_all` fetch pages, `spawn` runs the poller that sends
//! `Report`s, and `Tracker` is its state machine (what to say about each
//! URL's answer). Owns only this: it never touches the `Room`, and what the
//! reports mean to the core is `live::Translator`'s business.
//!
//! A node that fails is reported and polled again next round; nothing a node
//! sends (or does not send) can end the poller.

mod parse;
mod scrape;
mod tracker;

use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

pub use parse::{Page, parse, parse_page};
pub use scrape::{ScrapeError, scrape, scrape_all, scrape_page};
pub use tracker::{SOURCE, Tracker};

use crate::sources::report::Report;

/// `[sources.dcgm]`: the exporter URLs and how often and how patiently to poll.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DcgmConfig {
    pub urls: Vec<String>,
    /// Seconds between rounds (0 is taken as 1).
    pub every_secs: u64,
    /// How long one URL may take, connecting to last byte (0 is taken as 1).
    pub timeout_ms: u64,
}

impl Default for DcgmConfig {
    fn default() -> DcgmConfig {
        DcgmConfig { urls: Vec::new(), every_secs: 5, timeout_ms: 2000 }
    }
}

impl DcgmConfig {
    pub fn every(&self) -> Duration {
        Duration::from_secs(self.every_secs.max(1))
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}

/// Polls every URL each `every_secs` until `reports` is closed. Each URL's
/// reports go out as soon as its answer is in (a stalled node is reported
/// when its timeout runs out, after the others).
pub fn spawn(config: DcgmConfig, reports: mpsc::Sender<Report>) -> JoinHandle<()> {
    tokio::spawn(poll(config, reports))
}

async fn poll(config: DcgmConfig, reports: mpsc::Sender<Report>) {
    let timeout = config.timeout();
    let mut ticks = tokio::time::interval(config.every());
    // A round that ran long is followed by a full pause, not a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tracker = Tracker::new();
    let mut client: Option<reqwest::Client> = None;
    loop {
        tokio::select! {
            _ = reports.closed() => return,
            _ = ticks.tick() => {}
        }
        if client.is_none() {
            match reqwest::Client::builder().build() {
                Ok(http) => client = Some(http),
                Err(e) => {
                    // Not the nodes' fault, but their GPUs are unknown all the same; try again next round.
                    for url in &config.urls {
                        let why = format!("no HTTP client: {e}");
                        for report in tracker.on_answer(url, Err(ScrapeError::Connection { url: url.clone(), why })) {
                            if reports.send(report).await.is_err() {
                                return;
                            }
                        }
                    }
                    continue;
                }
            }
        }
        let Some(http) = &client else { continue };
        let mut round = scrape::Round::start(http, &config.urls, timeout);
        loop {
            let answer = tokio::select! {
                _ = reports.closed() => return,
                answer = round.next() => answer,
            };
            let Some((url, result)) = answer else { break };
            for report in tracker.on_answer(&url, result) {
                if reports.send(report).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_refuses_unknown_keys() {
        let empty: DcgmConfig = toml::from_str("").unwrap();
        assert_eq!(empty, DcgmConfig { urls: vec![], every_secs: 5, timeout_ms: 2000 });
        let set: DcgmConfig = toml::from_str("urls = [\"http://a:9400/metrics\"]\ntimeout_ms = 500").unwrap();
        assert_eq!((set.urls.len(), set.every_secs, set.timeout()), (1, 5, Duration::from_millis(500)));
        let err = toml::from_str::<DcgmConfig>("url = \"http://a:9400/metrics\"").unwrap_err();
        assert!(err.to_string().contains("unknown field `url`"), "{err}");
        let zero = DcgmConfig { every_secs: 0, timeout_ms: 0, ..DcgmConfig::default() };
        assert_eq!((zero.every(), zero.timeout()), (Duration::from_secs(1), Duration::from_millis(1)));
    }
}
