//! The IMDS poller against a metadata service of our own on 127.0.0.1 (moto
//! answers 500 on these paths): IMDSv2 tokens with the TTL header checked,
//! 401 for a missing or stale token, 404 until a notice is switched on.
//! Polls are counted by the server, so "within one poll" is a count, not a
//! wall-clock threshold.

#[path = "support/loopback.rs"]
mod loopback;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use gpuroom::sources::imds::{self, Imds, ImdsConfig};
use gpuroom::sources::report::{NoticeKind, Report};
use loopback::{Loopback, Reply, Seen};
use tokio::sync::mpsc;

const OK: u8 = 0;
const GARBAGE_ACTION: u8 = 1;
const STALL_ACTION: u8 = 2;
const GARBAGE_REBALANCE: u8 = 3;
const NO_TOKENS: u8 = 4;
const REDIRECT_ACTION: u8 = 5;

/// A generous cap on any wait: only a hang trips it.
const PATIENCE: Duration = Duration::from_secs(20);

struct Fake {
    expected_ttl: String,
    /// Only the newest token is valid, as if each PUT replaced the last.
    token: Mutex<String>,
    issued: AtomicUsize,
    puts: AtomicUsize,
    bad_ttl: AtomicUsize,
    missing_token: AtomicUsize,
    unauthorized: AtomicUsize,
    /// Authorized GETs of spot/instance-action: the polls.
    action_polls: AtomicUsize,
    notice: AtomicBool,
    deadline: Mutex<String>,
    rebalance: AtomicBool,
    mode: AtomicU8,
    /// Where REDIRECT_ACTION sends the poller.
    elsewhere: Mutex<String>,
}

impl Fake {
    fn new(expected_ttl: &str) -> Arc<Fake> {
        Arc::new(Fake {
            expected_ttl: expected_ttl.to_string(),
            token: Mutex::new(String::new()),
            issued: AtomicUsize::new(0),
            puts: AtomicUsize::new(0),
            bad_ttl: AtomicUsize::new(0),
            missing_token: AtomicUsize::new(0),
            unauthorized: AtomicUsize::new(0),
            action_polls: AtomicUsize::new(0),
            notice: AtomicBool::new(false),
            deadline: Mutex::new(String::new()),
            rebalance: AtomicBool::new(false),
            mode: AtomicU8::new(OK),
            elsewhere: Mutex::new(String::new()),
        })
    }

    fn serve(self: &Arc<Fake>) -> Loopback {
        let fake = self.clone();
        Loopback::start(move |seen| fake.answer(seen))
    }

    fn answer(&self, seen: &Seen) -> Reply {
        let mode = self.mode.load(SeqCst);
        if seen.method == "PUT" && seen.url == "/latest/api/token" {
            self.puts.fetch_add(1, SeqCst);
            if mode == NO_TOKENS {
                return Reply::status(503, "metadata service starting");
            }
            if seen.header("X-aws-ec2-metadata-token-ttl-seconds") != Some(self.expected_ttl.as_str()) {
                self.bad_ttl.fetch_add(1, SeqCst);
                return Reply::status(400, "bad TTL");
            }
            let token = format!("token-{}", self.issued.fetch_add(1, SeqCst));
            *self.token.lock().unwrap() = token.clone();
            return Reply::ok("text/plain", token);
        }
        if seen.method != "GET" {
            return Reply::status(405, "");
        }
        let Some(token) = seen.header("X-aws-ec2-metadata-token") else {
            self.missing_token.fetch_add(1, SeqCst);
            return Reply::status(401, "");
        };
        if token != *self.token.lock().unwrap() {
            self.unauthorized.fetch_add(1, SeqCst);
            return Reply::status(401, "");
        }
        match seen.url.as_str() {
            "/latest/meta-data/spot/instance-action" => {
                self.action_polls.fetch_add(1, SeqCst);
                match mode {
                    GARBAGE_ACTION => Reply::ok("text/plain", "{\"action\": <html>"),
                    STALL_ACTION => Reply::status(404, "").after(Duration::from_secs(4)),
                    REDIRECT_ACTION => Reply::redirect(&self.elsewhere.lock().unwrap()),
                    _ if self.notice.load(SeqCst) => {
                        let time = self.deadline.lock().unwrap().clone();
                        Reply::ok("text/plain", format!(r#"{{"action": "terminate", "time": "{time}"}}"#))
                    }
                    _ => Reply::status(404, "Not Found"),
                }
            }
            "/latest/meta-data/events/recommendations/rebalance" => match mode {
                GARBAGE_REBALANCE => Reply::ok("text/plain", "noticeTime=soon"),
                _ if self.rebalance.load(SeqCst) => Reply::ok("text/plain", r#"{"noticeTime": "2026-12-02T20:55:00Z"}"#),
                _ => Reply::status(404, "Not Found"),
            },
            _ => Reply::status(404, "Not Found"),
        }
    }

    /// Two minutes ahead, to the second, as IMDS writes it.
    fn announce_termination(&self) -> DateTime<Utc> {
        let deadline = DateTime::from_timestamp(Utc::now().timestamp() + 120, 0).unwrap();
        *self.deadline.lock().unwrap() = deadline.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        self.notice.store(true, SeqCst);
        deadline
    }

    /// The service forgets the token it handed out (what an expiry looks like).
    fn rotate(&self) {
        *self.token.lock().unwrap() = "revoked".to_string();
    }

    fn polls(&self) -> usize {
        self.action_polls.load(SeqCst)
    }

    async fn wait_polls(&self, n: usize) {
        let target = self.polls() + n;
        let waited = tokio::time::timeout(PATIENCE, async {
            while self.polls() < target {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        assert!(waited.await.is_ok(), "the server saw {} polls, waited for {target}", self.polls());
    }

    fn assert_clean_auth(&self) {
        assert_eq!(self.missing_token.load(SeqCst), 0, "every GET carries the token header");
        assert_eq!(self.bad_ttl.load(SeqCst), 0, "every PUT carries the TTL header");
    }
}

fn config(server: &Loopback, every_secs: u64, timeout_ms: u64) -> ImdsConfig {
    ImdsConfig { endpoint: server.url(""), every_secs, timeout_ms, ..ImdsConfig::default() }
}

struct Run {
    rx: mpsc::Receiver<Report>,
    handle: tokio::task::JoinHandle<()>,
}

impl Run {
    fn start(config: ImdsConfig) -> Run {
        let (tx, rx) = mpsc::channel(64);
        Run { rx, handle: imds::spawn(config, "gpu-a".to_string(), tx) }
    }

    /// Reports up to and including the first that matches.
    async fn until(&mut self, what: &str, pred: impl Fn(&Report) -> bool) -> Vec<Report> {
        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout(PATIENCE, self.rx.recv()).await {
                Ok(Some(report)) => {
                    let done = pred(&report);
                    seen.push(report);
                    if done {
                        return seen;
                    }
                }
                Ok(None) => panic!("the poller ended while waiting for {what}; seen {seen:?}"),
                Err(_) => panic!("no {what} within {PATIENCE:?}; seen {seen:?}"),
            }
        }
    }

    fn drain(&mut self) -> Vec<Report> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).collect()
    }
}

fn is_notice(r: &Report) -> bool {
    matches!(r, Report::Notice { .. })
}
fn is_failed(r: &Report) -> bool {
    matches!(r, Report::Failed { .. })
}
fn is_healthy(r: &Report) -> bool {
    matches!(r, Report::Healthy { .. })
}

#[tokio::test]
async fn a_termination_notice_arrives_within_one_poll_and_only_once() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    let first = run.until("the first Healthy", is_healthy).await;
    assert_eq!(first.len(), 1, "{first:?}");
    if let Report::Healthy { source, detail } = &first[0] {
        assert_eq!(source, "imds");
        assert!(detail.contains(&server.url("")) && detail.contains("no interruption"), "{detail}");
    }

    fake.wait_polls(3).await;
    let quiet = run.drain();
    assert!(quiet.is_empty(), "nothing while instance-action answers 404: {quiet:?}");

    let before = fake.polls();
    let deadline = fake.announce_termination();
    let got = run.until("the Notice", is_notice).await;
    let polls = fake.polls() - before;
    assert!(polls <= 2, "the notice took {polls} polls after the flip");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0], Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Terminate, deadline: Some(deadline) });

    fake.wait_polls(3).await;
    let later = run.drain();
    assert!(later.is_empty(), "the notice is not repeated: {later:?}");
    fake.assert_clean_auth();
    assert_eq!(fake.puts.load(SeqCst), 1, "one token for all polls");
    assert_eq!(fake.unauthorized.load(SeqCst), 0);
}

#[tokio::test]
async fn an_expired_token_is_replaced_without_a_failure() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    run.until("the first Healthy", is_healthy).await;
    fake.wait_polls(1).await;

    fake.rotate();
    fake.wait_polls(2).await;
    assert_eq!(fake.puts.load(SeqCst), 2, "one new token after the 401");
    assert!(fake.unauthorized.load(SeqCst) >= 1, "the stale token was refused");

    // Still hearing notices on the new token.
    let deadline = fake.announce_termination();
    let got = run.until("the Notice", is_notice).await;
    assert_eq!(got, vec![Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Terminate, deadline: Some(deadline) }]);
    fake.assert_clean_auth();
}

#[tokio::test]
async fn the_token_is_renewed_before_its_ttl_runs_out() {
    let fake = Fake::new("1");
    let server = fake.serve();
    let mut imds = Imds::new(&ImdsConfig { token_ttl_secs: 1, ..config(&server, 1, 1000) });
    assert_eq!(imds.poll_once().await, Ok(vec![]));
    assert_eq!(fake.puts.load(SeqCst), 1);

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let deadline = fake.announce_termination();
    fake.rebalance.store(true, SeqCst);
    let notices = imds.poll_once().await;
    assert_eq!(notices, Ok(vec![(NoticeKind::Terminate, Some(deadline)), (NoticeKind::Rebalance, None)]));
    // This server never expires a token: the second PUT can only be the renewal.
    assert_eq!(fake.puts.load(SeqCst), 2);
    assert_eq!(fake.unauthorized.load(SeqCst), 0);
    fake.assert_clean_auth();
}

#[tokio::test]
async fn a_rebalance_recommendation_arrives_as_rebalance_once() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    run.until("the first Healthy", is_healthy).await;

    fake.rebalance.store(true, SeqCst);
    let got = run.until("the Notice", is_notice).await;
    assert_eq!(got, vec![Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Rebalance, deadline: None }]);
    fake.wait_polls(3).await;
    assert_eq!(run.drain(), vec![]);
}

#[tokio::test]
async fn garbage_or_a_stall_is_failed_then_healthy_when_fixed() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    run.until("the first Healthy", is_healthy).await;

    fake.mode.store(GARBAGE_ACTION, SeqCst);
    let got = run.until("Failed on garbage", is_failed).await;
    let Some(Report::Failed { source, hosts, why }) = got.last() else { unreachable!() };
    assert_eq!((source.as_str(), hosts.as_slice()), ("imds", ["gpu-a".to_string()].as_slice()));
    let expected = format!("{}: spot/instance-action: line 1 column", server.url("/latest/meta-data/spot/instance-action"));
    assert!(why.starts_with(&expected), "{why}");
    fake.wait_polls(2).await;
    assert_eq!(run.drain(), vec![], "one Failed per outage, not one per poll");

    fake.mode.store(OK, SeqCst);
    let back = run.until("Healthy after the fix", is_healthy).await;
    assert_eq!(back.len(), 1, "{back:?}");

    fake.mode.store(STALL_ACTION, SeqCst);
    let got = run.until("Failed on a stall", is_failed).await;
    let Some(Report::Failed { why, .. }) = got.last() else { unreachable!() };
    assert!(why.contains("spot/instance-action: no answer within 1000 ms"), "{why}");
    fake.mode.store(OK, SeqCst);
    let back = run.until("Healthy after the stall", is_healthy).await;
    assert!(back.iter().all(|r| !is_notice(r)), "{back:?}");
}

#[tokio::test]
async fn a_broken_rebalance_path_does_not_hide_a_termination() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    run.until("the first Healthy", is_healthy).await;

    fake.mode.store(GARBAGE_REBALANCE, SeqCst);
    let deadline = fake.announce_termination();
    let got = run.until("the Notice", is_notice).await;
    assert_eq!(got.last(), Some(&Report::Notice { host: "gpu-a".into(), kind: NoticeKind::Terminate, deadline: Some(deadline) }));
    let failed: Vec<_> = got.iter().filter(|r| is_failed(r)).collect();
    assert!(matches!(failed.as_slice(), [Report::Failed { why, .. }] if why.contains("events/recommendations/rebalance")), "{got:?}");
}

#[tokio::test]
async fn the_first_poll_is_at_once_and_a_first_failure_is_reported() {
    let fake = Fake::new("21600");
    fake.mode.store(NO_TOKENS, SeqCst);
    let server = fake.serve();
    // An hour between polls: the first report can only come from the first poll.
    let mut run = Run::start(config(&server, 3600, 1000));
    let got = run.until("the first Failed", is_failed).await;
    assert_eq!(got.len(), 1, "Failed comes first, no Healthy before: {got:?}");
    let Report::Failed { why, .. } = &got[0] else { unreachable!() };
    assert_eq!(why, &format!("{}: HTTP 503: metadata service starting", server.url("/latest/api/token")));
    assert_eq!(fake.puts.load(SeqCst), 1, "no second token request for the second path of the same poll");

    // Closing the channel ends the poller at once, even mid-way through an hour's wait.
    drop(run.rx);
    let ended = tokio::time::timeout(PATIENCE, run.handle).await;
    assert!(matches!(ended, Ok(Ok(()))), "the poller ends when the channel closes: {ended:?}");
}

#[tokio::test]
async fn a_service_that_starts_late_turns_healthy() {
    let fake = Fake::new("21600");
    fake.mode.store(NO_TOKENS, SeqCst);
    let server = fake.serve();
    let mut run = Run::start(config(&server, 1, 1000));
    run.until("the first Failed", is_failed).await;
    fake.mode.store(OK, SeqCst);
    let got = run.until("Healthy", is_healthy).await;
    assert_eq!(got.len(), 1, "{got:?}");
    fake.assert_clean_auth();
}

/// Issue 33: a redirect from the metadata service is not followed, so the
/// session token never leaves for another host; the poll fails plainly.
#[tokio::test]
async fn a_redirect_is_not_followed_and_the_token_stays_home() {
    let fake = Fake::new("21600");
    let server = fake.serve();
    let stolen = Arc::new(Mutex::new(Vec::<String>::new()));
    let thief = {
        let stolen = stolen.clone();
        Loopback::start(move |seen| {
            stolen.lock().unwrap().push(format!("{} {} token={:?}", seen.method, seen.url, seen.header("X-aws-ec2-metadata-token")));
            Reply::status(404, "")
        })
    };
    *fake.elsewhere.lock().unwrap() = thief.url("/collect");
    fake.mode.store(REDIRECT_ACTION, SeqCst);
    let mut run = Run::start(config(&server, 1, 1000));
    let got = run.until("a Failed", is_failed).await;
    let Report::Failed { why, .. } = got.last().unwrap() else { unreachable!() };
    assert!(why.contains("HTTP 302"), "{why}");
    assert!(stolen.lock().unwrap().is_empty(), "the other host was asked: {:?}", stolen.lock().unwrap());
}
