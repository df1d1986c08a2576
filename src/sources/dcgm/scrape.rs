//! Fetching exporter pages over plain HTTP: one URL with a deadline, or a
//! round over all URLs at once in which each answer is handed on as soon as
//! it is in, so that one stalled node never holds up the others.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::{Id, JoinSet};

use super::parse::{Page, parse_page};
use crate::sources::ParseError;
use crate::sources::report::GpuReading;

/// Past this a body is not an exporter page (8 GPUs with the default
/// counters is ~50 KiB): stop reading rather than buffer whatever a wrong port sends.
const MAX_BODY: usize = 16 << 20;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScrapeError {
    #[error("{url}: timeout: no complete answer within {} ms", .after.as_millis())]
    Timeout { url: String, after: Duration },
    #[error("{url}: connection failed: {why}")]
    Connection { url: String, why: String },
    #[error("{url}: HTTP status {status}{}", reason(*.status))]
    Status { url: String, status: u16 },
    /// The `ParseError`'s source is the URL.
    #[error("{}: parse error: {}: {}", .0.source_name, .0.position, .0.message)]
    Parse(ParseError),
    /// The task scraping `url` ended without an answer (it panicked or was
    /// cancelled): reported like any failure, never taken down the poller.
    #[error("{url}: scrape task ended without an answer: {why}")]
    Task { url: String, why: String },
}

fn reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).map(|r| format!(" {r}")).unwrap_or_default()
}

/// One page's readings, within `timeout` from connecting to the last byte.
pub async fn scrape(client: &reqwest::Client, url: &str, timeout: Duration) -> Result<Vec<GpuReading>, ScrapeError> {
    scrape_page(client, url, timeout).await.map(|page| page.readings)
}

/// Like `scrape`, keeping what the page had to skip.
pub async fn scrape_page(client: &reqwest::Client, url: &str, timeout: Duration) -> Result<Page, ScrapeError> {
    let body = match tokio::time::timeout(timeout, fetch(client, url)).await {
        Err(_elapsed) => return Err(ScrapeError::Timeout { url: url.to_string(), after: timeout }),
        Ok(body) => body?,
    };
    parse_page(url, &String::from_utf8_lossy(&body)).map_err(ScrapeError::Parse)
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, ScrapeError> {
    let transport = |what: &str, e: reqwest::Error| ScrapeError::Connection { url: url.to_string(), why: format!("{what}{}", chain(&e)) };
    let mut response = client.get(url).send().await.map_err(|e| transport("", e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(ScrapeError::Status { url: url.to_string(), status: status.as_u16() });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport("reading the body: ", e))? {
        if body.len() + chunk.len() > MAX_BODY {
            let message = format!("body over {} MiB: not a dcgm-exporter page", MAX_BODY >> 20);
            return Err(ScrapeError::Parse(ParseError::new(url, "body", message)));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// reqwest's own message only repeats the URL ("error sending request for
/// url …"); the cause ("Connection refused", "dns error") is in its sources.
fn chain(err: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = std::error::Error::source(err);
    while let Some(cause) = next {
        let text = cause.to_string();
        // Layers often wrap with "outer: inner": keep only what adds something.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.retain(|p| !text.contains(p.as_str()));
            parts.push(text);
        }
        next = cause.source();
    }
    if parts.is_empty() { err.to_string() } else { parts.join(": ") }
}

/// Every URL's answer, in the order they came in (first answer first).
pub async fn scrape_all(client: &reqwest::Client, urls: &[String], timeout: Duration) -> Vec<(String, Result<Vec<GpuReading>, ScrapeError>)> {
    let mut round = Round::start(client, urls, timeout);
    let mut out = Vec::with_capacity(urls.len());
    while let Some((url, result)) = round.next().await {
        out.push((url, result.map(|page| page.readings)));
    }
    out
}

/// One poll of all URLs, each on its own task; `next` yields answers as
/// they complete. Dropping a round aborts what is still in flight.
pub(super) struct Round {
    tasks: JoinSet<(String, Result<Page, ScrapeError>)>,
    urls: HashMap<Id, String>,
}

impl Round {
    /// A URL listed twice is polled once: twice would report it twice.
    pub(super) fn start(client: &reqwest::Client, urls: &[String], timeout: Duration) -> Round {
        let mut round = Round { tasks: JoinSet::new(), urls: HashMap::new() };
        for url in urls {
            if round.urls.values().any(|u| u == url) {
                continue;
            }
            let (client, task_url) = (client.clone(), url.clone());
            let handle = round.tasks.spawn(async move {
                let result = scrape_page(&client, &task_url, timeout).await;
                (task_url, result)
            });
            round.urls.insert(handle.id(), url.clone());
        }
        round
    }

    pub(super) async fn next(&mut self) -> Option<(String, Result<Page, ScrapeError>)> {
        Some(match self.tasks.join_next_with_id().await? {
            Ok((_, answer)) => answer,
            Err(e) => {
                let url = self.urls.get(&e.id()).cloned().unwrap_or_default();
                let why = if e.is_panic() { "it panicked".to_string() } else { e.to_string() };
                (url.clone(), Err(ScrapeError::Task { url, why }))
            }
        })
    }
}
