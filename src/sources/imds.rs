//! EC2 instance metadata (IMDSv2) on a spot instance: the two-minute
//! interruption notice (`spot/instance-action`) and the rebalance
//! recommendation (`events/recommendations/rebalance`), polled every 5 s as
//! AWS recommends.
//!
//! Owns the session token (one `PUT /latest/api/token`, reused until shortly
//! before its TTL runs out, fetched again on a 401) and the memory of which
//! notices were already announced, so that the room hears each one once.
//! Sends `Report`s only; never touches the `Room`, and never ends on an
//! error: the metadata service is the one thing a spot instance must keep
//! hearing.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::DateTime;
use serde::Deserialize;
use tokio::sync::mpsc::Sender;
use tokio::time::Instant;

use super::ParseError;
use super::report::{NoticeKind, Report};
use crate::domain::units::At;

const TOKEN_PATH: &str = "/latest/api/token";
const ACTION_PATH: &str = "/latest/meta-data/spot/instance-action";
const REBALANCE_PATH: &str = "/latest/meta-data/events/recommendations/rebalance";
const TTL_HEADER: &str = "X-aws-ec2-metadata-token-ttl-seconds";
const TOKEN_HEADER: &str = "X-aws-ec2-metadata-token";
/// IMDS refuses a TTL outside 1 s to 6 h with a 400.
const MAX_TTL_SECS: u64 = 21_600;
/// Metadata answers are a few dozen bytes; anything this large is not IMDS.
const MAX_BODY: usize = 64 * 1024;
/// Distinct notices remembered; a server inventing a new time every poll
/// must not grow memory without bound.
const REMEMBERED: usize = 64;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImdsConfig {
    pub endpoint: String,
    pub every_secs: u64,
    /// Per request, connecting to reading the body: off EC2 (or with a hop
    /// limit of 1 inside a container) the service never answers.
    pub timeout_ms: u64,
    pub token_ttl_secs: u64,
}

impl Default for ImdsConfig {
    fn default() -> ImdsConfig {
        ImdsConfig { endpoint: "http://169.254.169.254".into(), every_secs: 5, timeout_ms: 1000, token_ttl_secs: MAX_TTL_SECS }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImdsError {
    #[error("{url}: no answer within {ms} ms (not on EC2, or the metadata hop limit is too low for a container?)")]
    Timeout { url: String, ms: u64 },
    #[error("{url}: cannot connect: {why}")]
    Connect { url: String, why: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("{url}: {error}")]
    Parse { url: String, error: ParseError },
}

impl ImdsError {
    /// The URL that failed.
    pub fn url(&self) -> &str {
        match self {
            ImdsError::Timeout { url, .. } | ImdsError::Connect { url, .. } | ImdsError::Status { url, .. } | ImdsError::Parse { url, .. } => url,
        }
    }
}

#[derive(Deserialize)]
struct InstanceAction {
    action: String,
    time: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rebalance {
    notice_time: String,
}

fn parse_time(source: &str, field: &str, text: &str) -> Result<At, ParseError> {
    DateTime::parse_from_rfc3339(text).map(|t| t.to_utc()).map_err(|e| ParseError::new(source, field, format!("{text:?} is not an RFC 3339 time: {e}")))
}

/// `spot/instance-action`: `{"action": "terminate", "time": "2026-12-02T21:00:00Z"}`.
pub fn parse_instance_action(body: &str) -> Result<(NoticeKind, At), ParseError> {
    const SOURCE: &str = "spot/instance-action";
    let parsed: InstanceAction = serde_json::from_str(body).map_err(|e| ParseError::from_json(SOURCE, &e))?;
    let kind = match parsed.action.to_ascii_lowercase().as_str() {
        "terminate" => NoticeKind::Terminate,
        "stop" => NoticeKind::Stop,
        "hibernate" => NoticeKind::Hibernate,
        _ => {
            let why = format!("unknown action {:?} (expected terminate, stop or hibernate)", parsed.action);
            return Err(ParseError::new(SOURCE, "action", why));
        }
    };
    Ok((kind, parse_time(SOURCE, "time", &parsed.time)?))
}

/// `events/recommendations/rebalance`: `{"noticeTime": "2026-12-02T20:55:00Z"}`.
pub fn parse_rebalance(body: &str) -> Result<At, ParseError> {
    const SOURCE: &str = "events/recommendations/rebalance";
    let parsed: Rebalance = serde_json::from_str(body).map_err(|e| ParseError::from_json(SOURCE, &e))?;
    parse_time(SOURCE, "noticeTime", &parsed.notice_time)
}

/// A notice with the time that identifies it: the deadline of an
/// instance-action, the notice time of a rebalance (which has no deadline).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Notice {
    kind: NoticeKind,
    deadline: Option<At>,
    at: At,
}

/// An IMDSv2 client that keeps its session token between polls.
pub struct Imds {
    endpoint: String,
    timeout: Duration,
    ttl: Duration,
    client: Result<reqwest::Client, String>,
    /// The token and when to fetch the next one.
    token: Option<(String, Instant)>,
}

impl Imds {
    pub fn new(config: &ImdsConfig) -> Imds {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        // The metadata address is link-local: an HTTP_PROXY would never reach
        // it. A redirect is never followed: the session token would go with
        // the request to wherever the answer pointed.
        let client = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).timeout(timeout).build().map_err(|e| chain(&e));
        Imds {
            endpoint: config.endpoint.trim_end_matches('/').to_string(),
            timeout,
            ttl: Duration::from_secs(config.token_ttl_secs.clamp(1, MAX_TTL_SECS)),
            client,
            token: None,
        }
    }

    /// One look at both paths. An empty list: nothing planned.
    pub async fn poll_once(&mut self) -> Result<Vec<(NoticeKind, Option<At>)>, ImdsError> {
        let (notices, error) = self.poll().await;
        match error {
            Some(e) => Err(e),
            None => Ok(notices.iter().map(|n| (n.kind, n.deadline)).collect()),
        }
    }

    /// Both paths, each tried even when the other failed: a broken rebalance
    /// path must not hide a termination notice. The first error, if any.
    async fn poll(&mut self) -> (Vec<Notice>, Option<ImdsError>) {
        let mut notices = Vec::new();
        let mut error = None;
        match self.get(ACTION_PATH).await.and_then(|body| self.parse_body(ACTION_PATH, body, parse_instance_action)) {
            Ok(Some((kind, at))) => notices.push(Notice { kind, deadline: Some(at), at }),
            Ok(None) => {}
            // Without a token the second path cannot work either: one timeout, not two.
            Err(e) if e.url() == self.url(TOKEN_PATH) => return (notices, Some(e)),
            Err(e) => error = Some(e),
        }
        match self.get(REBALANCE_PATH).await.and_then(|body| self.parse_body(REBALANCE_PATH, body, parse_rebalance)) {
            Ok(Some(at)) => notices.push(Notice { kind: NoticeKind::Rebalance, deadline: None, at }),
            Ok(None) => {}
            Err(e) => error = error.or(Some(e)),
        }
        (notices, error)
    }

    fn parse_body<T>(&self, path: &str, body: Option<String>, parse: fn(&str) -> Result<T, ParseError>) -> Result<Option<T>, ImdsError> {
        body.map(|b| parse(&b)).transpose().map_err(|error| ImdsError::Parse { url: self.url(path), error })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    fn client(&self, url: &str) -> Result<&reqwest::Client, ImdsError> {
        self.client.as_ref().map_err(|why| ImdsError::Connect { url: url.to_string(), why: why.clone() })
    }

    /// The body on 200, `None` on 404 (nothing announced).
    async fn get(&mut self, path: &str) -> Result<Option<String>, ImdsError> {
        let url = self.url(path);
        let token = self.token().await?;
        let mut response = self.send(self.client(&url)?.get(&url).header(TOKEN_HEADER, token), &url).await?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            // Expired or revoked early (the service restarted): once more with a fresh one.
            self.token = None;
            let token = self.token().await?;
            response = self.send(self.client(&url)?.get(&url).header(TOKEN_HEADER, token), &url).await?;
        }
        match response.status().as_u16() {
            200 => Ok(Some(self.body(response, &url).await?)),
            404 => Ok(None),
            status => Err(self.status_error(response, &url, status).await),
        }
    }

    async fn token(&mut self) -> Result<String, ImdsError> {
        if let Some((token, refresh_at)) = &self.token
            && Instant::now() < *refresh_at
        {
            return Ok(token.clone());
        }
        let url = self.url(TOKEN_PATH);
        let request = self.client(&url)?.put(&url).header(TTL_HEADER, self.ttl.as_secs().to_string());
        let asked = Instant::now();
        let response = self.send(request, &url).await?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(self.status_error(response, &url, status).await);
        }
        let token = self.body(response, &url).await?.trim().to_string();
        let bad = |message: &str| ImdsError::Parse { url: url.clone(), error: ParseError::new(&url, "body", message) };
        if token.is_empty() {
            return Err(bad("empty token"));
        }
        if reqwest::header::HeaderValue::from_str(&token).is_err() {
            return Err(bad("the token is not a valid header value"));
        }
        // Counted from the request, not the answer, and a margin before the
        // end: a token used in its last instant may expire on the way.
        let margin = (self.ttl / 10).min(Duration::from_secs(60));
        self.token = Some((token.clone(), asked + self.ttl - margin));
        Ok(token)
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: &str) -> Result<reqwest::Response, ImdsError> {
        request.send().await.map_err(|e| self.transport_error(&e, url))
    }

    fn transport_error(&self, e: &reqwest::Error, url: &str) -> ImdsError {
        if e.is_timeout() {
            ImdsError::Timeout { url: url.to_string(), ms: self.timeout.as_millis() as u64 }
        } else {
            ImdsError::Connect { url: url.to_string(), why: chain(e) }
        }
    }

    async fn body(&self, mut response: reqwest::Response, url: &str) -> Result<String, ImdsError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e, url))? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > MAX_BODY {
                let message = format!("answer longer than {MAX_BODY} bytes");
                return Err(ImdsError::Parse { url: url.to_string(), error: ParseError::new(url, "body", message) });
            }
        }
        String::from_utf8(bytes)
            .map_err(|e| ImdsError::Parse { url: url.to_string(), error: ParseError::new(url, format!("byte {}", e.utf8_error().valid_up_to()), "not UTF-8") })
    }

    async fn status_error(&self, response: reqwest::Response, url: &str, status: u16) -> ImdsError {
        let body = match self.body(response, url).await {
            Ok(text) => text.trim().chars().take(200).collect(),
            Err(_) => String::new(),
        };
        let body = if body.is_empty() { "(no body)".to_string() } else { body };
        ImdsError::Status { url: url.to_string(), status, body }
    }
}

/// The error and its causes on one line: reqwest's own text omits them
/// ("error sending request" says nothing of "connection refused").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// What a poll result means for the room: notices not yet announced, and a
/// `Failed` / `Healthy` on each change of state. Pure, so it is unit-tested.
struct Announcer {
    host: String,
    endpoint: String,
    announced: VecDeque<(NoticeKind, At)>,
    /// None before the first poll; Some(None) working; Some(Some(why)) failing.
    state: Option<Option<String>>,
}

impl Announcer {
    fn new(host: String, endpoint: String) -> Announcer {
        Announcer { host, endpoint, announced: VecDeque::new(), state: None }
    }

    fn reports(&mut self, notices: &[Notice], error: Option<&ImdsError>) -> Vec<Report> {
        let mut out = Vec::new();
        match error {
            Some(e) => {
                let why = e.to_string();
                if self.state.as_ref().and_then(|s| s.as_ref()) != Some(&why) {
                    out.push(Report::Failed { source: "imds".into(), hosts: vec![self.host.clone()], why: why.clone() });
                }
                self.state = Some(Some(why));
            }
            None => {
                if self.state != Some(None) {
                    let now = match notices.len() {
                        0 => "no interruption or rebalance notice".to_string(),
                        n => format!("{n} notice(s) in force"),
                    };
                    out.push(Report::Healthy { source: "imds".into(), detail: format!("{} answers; {now}", self.endpoint) });
                }
                self.state = Some(None);
            }
        }
        for n in notices {
            if self.announced.contains(&(n.kind, n.at)) {
                continue;
            }
            if self.announced.len() == REMEMBERED {
                self.announced.pop_front();
            }
            self.announced.push_back((n.kind, n.at));
            out.push(Report::Notice { host: self.host.clone(), kind: n.kind, deadline: n.deadline });
        }
        out
    }
}

/// Polls at once, then every `every_secs`, until `reports` closes.
pub fn spawn(config: ImdsConfig, host: String, reports: Sender<Report>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut imds = Imds::new(&config);
        let mut announcer = Announcer::new(host, imds.endpoint.clone());
        let mut ticks = tokio::time::interval(Duration::from_secs(config.every_secs.max(1)));
        // A slow poll (a stalled service) must not be followed by a burst.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let polled = tokio::select! {
                _ = reports.closed() => return,
                _ = ticks.tick() => tokio::select! {
                    _ = reports.closed() => return,
                    polled = imds.poll() => polled,
                },
            };
            let (notices, error) = polled;
            for report in announcer.reports(&notices, error.as_ref()) {
                if reports.send(report).await.is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> At {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn parses_the_documented_bodies() {
        let body = r#"{"action": "terminate", "time": "2017-09-18T08:22:00Z"}"#;
        assert_eq!(parse_instance_action(body), Ok((NoticeKind::Terminate, at("2017-09-18T08:22:00Z"))));
        let stop = r#"{"action":"stop","time":"2026-12-02T21:00:00Z"}"#;
        assert_eq!(parse_instance_action(stop).unwrap().0, NoticeKind::Stop);
        let hibernate = r#"{"action":"hibernate","time":"2026-12-02T21:00:00Z","extra":1}"#;
        assert_eq!(parse_instance_action(hibernate).unwrap().0, NoticeKind::Hibernate, "unknown fields tolerated");
        assert_eq!(parse_rebalance(r#"{"noticeTime": "2020-10-27T08:22:00Z"}"#), Ok(at("2020-10-27T08:22:00Z")));
    }

    #[test]
    fn bad_bodies_name_the_path_and_the_field() {
        let err = parse_instance_action("{\"action\": ").unwrap_err();
        assert_eq!(err.source_name, "spot/instance-action");
        assert!(err.position.starts_with("line 1 column"), "{err}");

        let err = parse_instance_action(r#"{"action": "reboot", "time": "2026-12-02T21:00:00Z"}"#).unwrap_err();
        assert_eq!(err.position, "action");
        assert_eq!(err.to_string(), r#"spot/instance-action: action: unknown action "reboot" (expected terminate, stop or hibernate)"#);

        let err = parse_instance_action(r#"{"action": "stop", "time": "in two minutes"}"#).unwrap_err();
        assert_eq!(err.position, "time");
        assert!(err.message.contains("\"in two minutes\""), "{err}");

        let err = parse_instance_action(r#"{"action": "stop"}"#).unwrap_err();
        assert!(err.message.contains("time"), "{err}");
        assert!(parse_instance_action("").is_err());
        assert!(parse_instance_action("[]").is_err());

        let err = parse_rebalance(r#"{"noticeTime": "2020-13-45T99:00:00Z"}"#).unwrap_err();
        assert_eq!((err.source_name.as_str(), err.position.as_str()), ("events/recommendations/rebalance", "noticeTime"));
        let err = parse_rebalance(r#"{"notice_time": "2020-10-27T08:22:00Z"}"#).unwrap_err();
        assert!(err.message.contains("noticeTime"), "{err}");
    }

    #[test]
    fn config_defaults_and_refuses_unknown_keys() {
        let config: ImdsConfig = toml::from_str("").unwrap();
        assert_eq!(config, ImdsConfig::default());
        assert_eq!(config.endpoint, "http://169.254.169.254");
        assert_eq!((config.every_secs, config.timeout_ms, config.token_ttl_secs), (5, 1000, 21_600));
        let config: ImdsConfig = toml::from_str("every_secs = 2\nendpoint = \"http://127.0.0.1:1338\"").unwrap();
        assert_eq!((config.every_secs, config.timeout_ms), (2, 1000));
        let err = toml::from_str::<ImdsConfig>("every_sec = 2").unwrap_err();
        assert!(err.to_string().contains("every_sec"), "{err}");
    }

    fn notice(kind: NoticeKind, time: &str) -> Notice {
        let t = at(time);
        Notice { kind, deadline: (kind != NoticeKind::Rebalance).then_some(t), at: t }
    }

    #[test]
    fn announces_each_notice_once_and_each_change_of_health() {
        let mut a = Announcer::new("gpu-a".into(), "http://imds".into());
        let healthy = |r: &Report| matches!(r, Report::Healthy { .. });
        let first = a.reports(&[], None);
        assert!(first.len() == 1 && healthy(&first[0]), "{first:?}");
        assert_eq!(a.reports(&[], None), vec![]);

        let term = notice(NoticeKind::Terminate, "2026-12-02T21:00:00Z");
        let expected = Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Terminate, deadline: term.deadline };
        assert_eq!(a.reports(&[term], None), vec![expected]);
        assert_eq!(a.reports(&[term], None), vec![], "not repeated");

        // A failure in between does not make the same notice new.
        let down = ImdsError::Timeout { url: "http://imds/x".into(), ms: 1000 };
        let failed = a.reports(&[term], Some(&down));
        assert!(matches!(&failed[..], [Report::Failed { hosts, .. }] if hosts == &["gpu-a".to_string()]), "{failed:?}");
        assert_eq!(a.reports(&[], Some(&down)), vec![], "same failure told once");
        let other = ImdsError::Status { url: "http://imds/x".into(), status: 500, body: "boom".into() };
        assert_eq!(a.reports(&[], Some(&other)).len(), 1, "a new reason is told");
        let back = a.reports(&[term], None);
        assert!(back.len() == 1 && healthy(&back[0]), "{back:?}");

        let moved = notice(NoticeKind::Terminate, "2026-12-02T21:05:00Z");
        assert_eq!(a.reports(&[moved], None).len(), 1, "a changed time is a new notice");
        let rebalance = notice(NoticeKind::Rebalance, "2026-12-02T20:55:00Z");
        let got = a.reports(&[moved, rebalance], None);
        assert_eq!(got, vec![Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Rebalance, deadline: None }]);
    }

    #[test]
    fn memory_of_notices_is_bounded() {
        let mut a = Announcer::new("h".into(), "e".into());
        let base = at("2026-01-01T00:00:00Z");
        for i in 0..(REMEMBERED as i64 * 3) {
            let t = base + chrono::TimeDelta::seconds(i);
            a.reports(&[Notice { kind: NoticeKind::Stop, deadline: Some(t), at: t }], None);
        }
        assert_eq!(a.announced.len(), REMEMBERED);
    }

    #[tokio::test]
    async fn an_unreachable_service_is_an_error_naming_the_url() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = ImdsConfig { endpoint: format!("http://127.0.0.1:{port}/"), ..ImdsConfig::default() };
        let err = Imds::new(&config).poll_once().await.unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(&format!("http://127.0.0.1:{port}/latest/api/token: ")), "{text}");
        assert!(matches!(err, ImdsError::Connect { .. } | ImdsError::Timeout { .. }), "{err:?}");
    }
}
