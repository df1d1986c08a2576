//! The EC2 adapter's price history against a loopback server of ours that
//! speaks EC2's query protocol (moto ignores paging): real points from the
//! AWS dumps (`fixtures/spot-prices/`, copied from `data/spot-prices/`) over several pages, then a server
//! that throttles (503 RequestLimitExceeded) or stalls past the timeout, and
//! recovers — the data goes stale and comes back, nothing crashes.

#[path = "support/loopback.rs"]
mod loopback;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gpuroom::sources::aws::{self, AwsConfig, AwsError};
use gpuroom::sources::price_history::{self, PricePoint};
use gpuroom::sources::report::Report;
use loopback::{Loopback, Reply, Seen};

const DUMP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/spot-prices/aws/us-west-2/2020-03-05.p3.8xlarge.json");
const PAGE: usize = 40;

fn real_points() -> Vec<PricePoint> {
    let text = std::fs::read_to_string(DUMP).expect("the real price dump");
    let points = price_history::parse(DUMP, &text).expect("a price page").points;
    points.into_iter().filter(|p| p.product == "Linux/UNIX").collect()
}

fn xml_page(points: &[PricePoint], next: Option<usize>) -> String {
    let items: String = points
        .iter()
        .map(|p| {
            format!(
                "<item><instanceType>{}</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>{}</spotPrice>\
                 <timestamp>{}</timestamp><availabilityZone>{}</availabilityZone></item>",
                p.instance_type,
                aws::price_text(p.price),
                p.at.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
                p.zone
            )
        })
        .collect();
    let next = next.map(|n| format!("<nextToken>page-{n}</nextToken>")).unwrap_or_default();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
         <requestId>r-1</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>{next}</DescribeSpotPriceHistoryResponse>"
    )
}

fn token(seen: &Seen) -> usize {
    seen.body.split('&').find_map(|kv| kv.strip_prefix("NextToken=page-")).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[allow(unsafe_code)]
fn config(url: String, timeout_ms: u64) -> AwsConfig {
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
    }
    AwsConfig {
        region: "us-west-2".into(),
        endpoint_url: Some(url),
        instance_types: vec!["p3.8xlarge".into()],
        timeout_ms,
        max_attempts: 3,
        ..AwsConfig::default()
    }
}

fn since() -> gpuroom::domain::units::At {
    chrono::DateTime::from_timestamp(0, 0).expect("epoch")
}

#[tokio::test]
async fn every_page_of_real_prices_arrives_once_and_exactly() {
    let points = real_points();
    assert!(points.len() > 2 * PAGE, "the dump has {} points", points.len());
    let pages = points.len().div_ceil(PAGE);
    let served = Arc::new(points.clone());
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let server = Loopback::start(move |seen| {
        counter.fetch_add(1, Ordering::SeqCst);
        assert!(seen.body.contains("Action=DescribeSpotPriceHistory"), "{}", seen.body);
        let page = token(seen);
        let chunk = &served[(page * PAGE).min(served.len())..((page + 1) * PAGE).min(served.len())];
        let next = (page + 1 < served.len().div_ceil(PAGE)).then_some(page + 1);
        Reply::ok("text/xml", xml_page(chunk, next))
    });
    let client = aws::client(&config(server.url("/"), 5000)).await;
    let got = aws::spot_price_history(&client, &["p3.8xlarge".into()], &[], since()).await.expect("the prices");
    assert_eq!(calls.load(Ordering::SeqCst), pages, "one call per page");
    assert_eq!(got.len(), points.len());
    for (g, p) in got.iter().zip(&points) {
        assert_eq!((g.at, &g.zone, &g.instance_type, g.price), (p.at, &p.zone, &p.instance_type, p.price));
    }
}

#[tokio::test]
async fn throttling_and_stalls_are_retried_then_reported_stale_and_recover() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(AtomicUsize::new(0)); // 0: throttle, 1: stall, 2: answer
    let (a, m) = (attempts.clone(), mode.clone());
    let point = real_points().into_iter().take(3).collect::<Vec<_>>();
    let server = Loopback::start(move |_| {
        a.fetch_add(1, Ordering::SeqCst);
        match m.load(Ordering::SeqCst) {
            0 => Reply::status(
                503,
                "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>r</RequestID></Response>",
            ),
            1 => Reply::ok("text/xml", xml_page(&point, None)).after(Duration::from_secs(3)),
            _ => Reply::ok("text/xml", xml_page(&point, None)),
        }
    });
    let cfg = config(server.url("/"), 500);
    let client = aws::client(&cfg).await;
    let err = aws::spot_price_history(&client, &cfg.instance_types, &[], since()).await.expect_err("throttled");
    assert!(matches!(err, AwsError::Throttled { ref code, .. } if code == "RequestLimitExceeded"), "{err:?}");
    assert!(err.to_string().contains("DescribeSpotPriceHistory"), "{err}");
    assert_eq!(attempts.swap(0, Ordering::SeqCst), 3, "the SDK retried up to max_attempts");

    mode.store(1, Ordering::SeqCst);
    let err = aws::spot_price_history(&client, &cfg.instance_types, &[], since()).await.expect_err("stalled");
    assert!(err.is_throttled(), "a timeout backs off like throttling: {err:?}");

    // The poller: Failed (stale) while it stalls, then Healthy and prices once it answers.
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let poller = aws::spawn(AwsConfig { prices_every_secs: 1, fleet_every_secs: 3600, ..cfg.clone() }, tx);
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("a report").expect("open");
    assert!(matches!(&first, Report::Failed { source, why, .. } if source == "aws ec2" && why.contains("next try in")), "{first:?}");
    mode.store(2, Ordering::SeqCst);
    let mut healthy = false;
    let prices = loop {
        match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("a report").expect("open") {
            Report::Healthy { .. } => healthy = true,
            Report::Prices { points } => break points,
            _ => {}
        }
    };
    assert!(healthy, "recovery is announced before the data");
    assert_eq!(prices.len(), 3);
    drop(rx);
    tokio::time::timeout(Duration::from_secs(30), poller).await.expect("the poller ends when nobody listens").expect("no panic");
}
