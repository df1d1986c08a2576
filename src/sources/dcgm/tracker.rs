//! What the poller says about each URL's answer: readings, a `Healthy` line
//! when a URL answers for the first time or after failing, a `Failed` line
//! naming the hosts whose GPUs are now stale. No network here: the state
//! machine is fed answers and returns `Report`s.

use std::collections::HashMap;

use super::parse::Page;
use super::scrape::ScrapeError;
use crate::sources::report::Report;

/// The `Report::Gpus` source for every dcgm URL: readings carry their host.
pub const SOURCE: &str = "dcgm";

#[derive(Debug, Default)]
pub struct Tracker {
    urls: HashMap<String, UrlState>,
}

#[derive(Debug, Default)]
struct UrlState {
    /// Hostnames of the last good answer.
    hosts: Vec<String>,
    /// How the last round went: `None` before the first.
    up: Option<bool>,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// The reports for `url`'s answer this round, in the order to send them.
    pub fn on_answer(&mut self, url: &str, answer: Result<Page, ScrapeError>) -> Vec<Report> {
        let state = self.urls.entry(url.to_string()).or_default();
        let source = format!("{SOURCE} {url}");
        match answer {
            Ok(page) => {
                let mut hosts: Vec<String> = page.readings.iter().map(|r| r.host.clone()).collect();
                hosts.sort();
                hosts.dedup();
                let mut out = Vec::with_capacity(2);
                if state.up != Some(true) {
                    let again = if state.up == Some(false) { "recovered: " } else { "" };
                    out.push(Report::Healthy { source, detail: format!("{again}{}", describe(&page, &hosts)) });
                }
                *state = UrlState { hosts, up: Some(true) };
                out.push(Report::Gpus { source: SOURCE.to_string(), readings: page.readings });
                out
            }
            Err(e) => {
                state.up = Some(false);
                let hosts = if state.hosts.is_empty() { vec![super::parse::host_of(url)] } else { state.hosts.clone() };
                vec![Report::Failed { source, hosts, why: e.to_string() }]
            }
        }
    }

    /// The hosts a failure of `url` would name.
    pub fn hosts(&self, url: &str) -> Vec<String> {
        match self.urls.get(url) {
            Some(state) if !state.hosts.is_empty() => state.hosts.clone(),
            _ => vec![super::parse::host_of(url)],
        }
    }
}

fn describe(page: &Page, hosts: &[String]) -> String {
    let n = page.readings.len();
    let mut text = format!("{n} GPU reading{} from {}", if n == 1 { "" } else { "s" }, hosts.join(", "));
    if page.skipped_samples > 0 {
        text.push_str(&format!("; {} samples without a usable gpu label skipped", page.skipped_samples));
    }
    if page.bad_lines > 0 {
        text.push_str(&format!("; {} lines that are not Prometheus text skipped", page.bad_lines));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sources::report::GpuReading;

    const URL: &str = "http://gpu-a.internal:9400/metrics";

    fn page(hosts: &[&str]) -> Page {
        let readings = hosts.iter().map(|h| GpuReading { host: h.to_string(), ..GpuReading::default() }).collect();
        Page { readings, skipped_samples: 0, bad_lines: 0 }
    }

    fn timeout() -> ScrapeError {
        ScrapeError::Timeout { url: URL.into(), after: Duration::from_millis(500) }
    }

    #[test]
    fn first_answer_is_healthy_then_readings_and_later_answers_only_readings() {
        let mut t = Tracker::new();
        let out = t.on_answer(URL, Ok(page(&["node-a", "node-a"])));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], Report::Healthy { source: format!("dcgm {URL}"), detail: "2 GPU readings from node-a".into() });
        assert!(matches!(&out[1], Report::Gpus { source, readings } if source == "dcgm" && readings.len() == 2));
        let again = t.on_answer(URL, Ok(page(&["node-a"])));
        assert!(matches!(again.as_slice(), [Report::Gpus { .. }]), "{again:?}");
    }

    #[test]
    fn a_url_never_seen_fails_under_its_host_part() {
        let mut t = Tracker::new();
        let out = t.on_answer(URL, Err(timeout()));
        assert_eq!(
            out,
            [Report::Failed {
                source: format!("dcgm {URL}"),
                hosts: vec!["gpu-a.internal".into()],
                why: format!("{URL}: timeout: no complete answer within 500 ms"),
            }]
        );
        assert_eq!(t.hosts("http://[::1]:9400/metrics"), ["[::1]"]);
        assert_eq!(t.hosts("not a url"), ["not a url"]);
    }

    #[test]
    fn failure_names_the_hosts_last_seen_and_recovery_says_so() {
        let mut t = Tracker::new();
        t.on_answer(URL, Ok(page(&["node-b", "node-a", "node-b"])));
        for _ in 0..2 {
            // Every failed round is reported: a stale source stays visibly stale.
            let out = t.on_answer(URL, Err(timeout()));
            assert!(matches!(out.as_slice(), [Report::Failed { hosts, .. }] if hosts == &["node-a", "node-b"]), "{out:?}");
        }
        let mut back = page(&["node-a"]);
        back.skipped_samples = 3;
        let out = t.on_answer(URL, Ok(back));
        assert_eq!(
            out[0],
            Report::Healthy {
                source: format!("dcgm {URL}"),
                detail: "recovered: 1 GPU reading from node-a; 3 samples without a usable gpu label skipped".into()
            }
        );
        assert!(matches!(&out[1], Report::Gpus { readings, .. } if readings.len() == 1));
        // The hosts of the newest good answer are what a failure names now.
        assert_eq!(t.hosts(URL), ["node-a"]);
    }

    #[test]
    fn urls_are_tracked_apart() {
        let mut t = Tracker::new();
        let other = "http://gpu-b:9400/metrics";
        t.on_answer(URL, Ok(page(&["node-a"])));
        let out = t.on_answer(other, Err(ScrapeError::Status { url: other.into(), status: 503 }));
        assert!(
            matches!(out.as_slice(), [Report::Failed { source, hosts, why }]
                if source == "dcgm http://gpu-b:9400/metrics" && hosts == &["gpu-b"] && why.ends_with("HTTP status 503 Service Unavailable")),
            "{out:?}"
        );
        assert!(matches!(t.on_answer(URL, Ok(page(&["node-a"]))).as_slice(), [Report::Gpus { .. }]));
    }
}
