//! The dcgm-exporter poller against real HTTP servers on 127.0.0.1: a node
//! serving a recorded exporter page, one that stalls past the timeout, one
//! that answers an HTML error page, a port nobody listens on, and a node that
//! answers 503 until it recovers. The good node's readings must come through
//! first, every bad node must come back as a `Failed` naming its URL and why,
//! and the recovered node must say `Healthy` and then send its readings.

#[path = "support/loopback.rs"]
mod loopback;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpuroom::domain::units::Mib;
use gpuroom::sources::dcgm::{self, DcgmConfig, ScrapeError};
use gpuroom::sources::report::Report;
use loopback::{Loopback, Reply};

/// Far longer than any answer needs: only a hang trips it.
const PATIENCE: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_millis(500);

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/dcgm/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const PROM: &str = "text/plain; version=0.0.4; charset=utf-8";

struct Nodes {
    good: Loopback,
    stalled: Loopback,
    garbage: Loopback,
    recovering: Loopback,
    recovered: Arc<AtomicBool>,
    dead_url: String,
}

impl Nodes {
    fn start() -> Nodes {
        let page = fixture("a100-8gpu.prom");
        let good = Loopback::start(move |_| Reply::ok(PROM, page.clone()));
        let page = fixture("a100-8gpu.prom");
        let stalled = Loopback::start(move |_| Reply::ok(PROM, page.clone()).after(Duration::from_secs(5)));
        let html = fixture("proxy-502.html");
        let garbage = Loopback::start(move |_| Reply::ok("text/html", html.clone()));
        let recovered = Arc::new(AtomicBool::new(false));
        let (flag, page) = (recovered.clone(), fixture("a10g-4gpu-k8s.prom"));
        let recovering =
            Loopback::start(move |_| if flag.load(Ordering::SeqCst) { Reply::ok(PROM, page.clone()) } else { Reply::status(503, "exporter starting") });
        // A port that was just free: connecting to it is refused.
        let dead_url = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            let port = listener.local_addr().expect("its address").port();
            format!("http://127.0.0.1:{port}/metrics")
        };
        Nodes { good, stalled, garbage, recovering, recovered, dead_url }
    }

    fn urls(&self) -> Vec<String> {
        vec![self.stalled.url("/metrics"), self.good.url("/metrics"), self.garbage.url("/metrics"), self.dead_url.clone(), self.recovering.url("/metrics")]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_all_answers_every_node_first_answer_first() {
    let nodes = Nodes::start();
    let client = reqwest::Client::new();
    let answers = tokio::time::timeout(PATIENCE, dcgm::scrape_all(&client, &nodes.urls(), TIMEOUT)).await.expect("scrape_all returns");
    assert_eq!(answers.len(), 5);
    let answer = |url: &str| answers.iter().find(|(u, _)| u == url).map(|(_, r)| r).expect("an answer per URL");

    let good = answer(&nodes.good.url("/metrics")).as_ref().expect("the good node answers");
    assert_eq!(good.len(), 8);
    assert!(good.iter().all(|g| g.host == "node-a" && g.mem_total() == Some(Mib(40536))));
    assert_eq!(good, &dcgm::parse("recorded", &fixture("a100-8gpu.prom")).expect("the fixture parses"));

    // The stalled node is the last to be heard of, whatever its place in the list.
    let (last_url, last) = answers.last().expect("answers");
    assert_eq!(last_url, &nodes.stalled.url("/metrics"));
    assert!(matches!(last, Err(ScrapeError::Timeout { after, .. }) if *after == TIMEOUT), "{last:?}");

    let garbage = answer(&nodes.garbage.url("/metrics")).as_ref().expect_err("HTML is no exporter page");
    assert!(matches!(garbage, ScrapeError::Parse(e) if e.position == "line 1"), "{garbage:?}");
    let dead = answer(&nodes.dead_url).as_ref().expect_err("nobody listens");
    assert!(matches!(dead, ScrapeError::Connection { .. }), "{dead:?}");
    assert!(dead.to_string().to_lowercase().contains("connection refused"), "{dead}");
    let starting = answer(&nodes.recovering.url("/metrics")).as_ref().expect_err("503");
    assert_eq!(starting, &ScrapeError::Status { url: nodes.recovering.url("/metrics"), status: 503 });

    for (url, result) in &answers {
        if let Err(e) = result {
            assert!(e.to_string().starts_with(url.as_str()), "an error names its URL first: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fixture_scrapes_as_it_parses() {
    for (name, gpus) in [("a100-8gpu.prom", 8), ("a10g-4gpu-k8s.prom", 4), ("a100-mig.prom", 7)] {
        let page = fixture(name);
        let server = Loopback::start({
            let page = page.clone();
            move |_| Reply::ok(PROM, page.clone())
        });
        let url = server.url("/metrics");
        let scraped = dcgm::scrape(&reqwest::Client::new(), &url, Duration::from_secs(10)).await.expect("a good page");
        assert_eq!(scraped.len(), gpus, "{name}");
        assert_eq!(scraped, dcgm::parse(&url, &page).expect("parses"), "{name}");
    }
}

/// Reads reports until `done` says so, keeping all of them.
async fn collect(rx: &mut tokio::sync::mpsc::Receiver<Report>, seen: &mut Vec<Report>, mut done: impl FnMut(&[Report]) -> bool) {
    while !done(seen) {
        let report = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no report in {PATIENCE:?}; so far: {seen:#?}"))
            .unwrap_or_else(|| panic!("the poller stopped; so far: {seen:#?}"));
        seen.push(report);
    }
}

fn failed<'a>(seen: &'a [Report], url: &str) -> Option<(usize, &'a Vec<String>, &'a String)> {
    seen.iter().enumerate().find_map(|(i, r)| match r {
        Report::Failed { source, hosts, why } if source == &format!("dcgm {url}") => Some((i, hosts, why)),
        _ => None,
    })
}

fn healthy(seen: &[Report], url: &str) -> Option<usize> {
    seen.iter().position(|r| matches!(r, Report::Healthy { source, .. } if source == &format!("dcgm {url}")))
}

fn gpus_of(seen: &[Report], host: &str) -> Option<usize> {
    seen.iter().position(|r| matches!(r, Report::Gpus { source, readings } if source == "dcgm" && readings.first().is_some_and(|g| g.host == host)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poller_reports_each_node_and_a_recovery() {
    let nodes = Nodes::start();
    let config = DcgmConfig { urls: nodes.urls(), every_secs: 1, timeout_ms: TIMEOUT.as_millis() as u64 };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let poller = dcgm::spawn(config, tx);
    let (stalled, garbage, recovering) = (nodes.stalled.url("/metrics"), nodes.garbage.url("/metrics"), nodes.recovering.url("/metrics"));

    let mut seen = Vec::new();
    collect(&mut rx, &mut seen, |s| {
        gpus_of(s, "node-a").is_some() && [&stalled, &garbage, &nodes.dead_url, &recovering].iter().all(|u| failed(s, u).is_some())
    })
    .await;

    let good_healthy = healthy(&seen, &nodes.good.url("/metrics")).expect("the good node's first answer is Healthy");
    let good_gpus = gpus_of(&seen, "node-a").expect("readings");
    assert!(good_healthy < good_gpus, "Healthy comes before the readings: {seen:#?}");
    let Report::Gpus { readings, .. } = &seen[good_gpus] else { unreachable!() };
    assert_eq!(readings.iter().map(|g| g.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert_eq!(readings[0].uuid.as_deref(), Some("GPU-6513270e-269e-0d37-f2a7-4de452e6b438"));

    let (stalled_at, hosts, why) = failed(&seen, &stalled).expect("the stalled node fails");
    assert!(good_gpus < stalled_at, "the stalled node held up the good one: {seen:#?}");
    assert_eq!(hosts, &["127.0.0.1"], "never answered: named by the URL's host");
    assert!(why.starts_with(&stalled) && why.contains("timeout"), "{why}");
    let (_, _, why) = failed(&seen, &garbage).expect("the garbage node fails");
    assert!(why.starts_with(&garbage) && why.contains("parse error") && why.contains("not Prometheus"), "{why}");
    let (_, _, why) = failed(&seen, &nodes.dead_url).expect("the dead port fails");
    assert!(why.starts_with(&nodes.dead_url) && why.to_lowercase().contains("connection refused"), "{why}");
    let (_, _, why) = failed(&seen, &recovering).expect("the starting node fails");
    assert!(why.contains("HTTP status 503"), "{why}");

    nodes.recovered.store(true, Ordering::SeqCst);
    let from = seen.len();
    collect(&mut rx, &mut seen, |s| gpus_of(&s[from..], "node-b").is_some()).await;
    let later = &seen[from..];
    let back = healthy(later, &recovering).expect("the recovered node says Healthy");
    assert!(back < gpus_of(later, "node-b").expect("its readings"), "{later:#?}");
    let Report::Healthy { detail, .. } = &later[back] else { unreachable!() };
    assert_eq!(detail, "recovered: 4 GPU readings from node-b");
    // The good node stays up: its later answers are readings without a new Healthy.
    assert_eq!(healthy(later, &nodes.good.url("/metrics")), None, "{later:#?}");

    // Closing the channel ends the poller; failures never did.
    drop(rx);
    tokio::time::timeout(PATIENCE, poller).await.expect("the poller stops once nobody listens").expect("and did not panic");
}
