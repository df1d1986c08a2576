//! Elastic capacity on EC2, through the live engine and the real SDK:
//! against moto on 127.0.0.1 (started by `.ci/run`) the room buys an
//! instance for a job that nothing fits, sees it boot and run, and gives it
//! back once idle — and never terminates an instance it did not launch;
//! against a loopback server that answers RunInstances with EC2's
//! InsufficientInstanceCapacity error, the room learns `LaunchFailed` and
//! tries the other zone. Skipped without moto unless `GPUROOM_REQUIRE_MOTO`
//! is set (as `.ci/run` does).

#[path = "support/loopback.rs"]
mod loopback;
#[path = "support/moto.rs"]
mod moto;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::TimeDelta;
use gpuroom::capacity::CapacityMode;
use gpuroom::domain::units::{At, Secs};
use gpuroom::live::Live;
use gpuroom::live::catalogue::Catalogue;
use gpuroom::live::config::JobsFile;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sources::aws::{self, AwsConfig};
use gpuroom::sources::ec2_capacity::{self, PoolDecl};
use gpuroom::sources::report::Report;
use tokio::sync::mpsc;

use loopback::{Loopback, Reply};
use moto::{credentials, moto};

fn pool(zone: &str, billing: &str) -> PoolDecl {
    toml::from_str(&format!("instance_type = \"p3.8xlarge\"\nzone = \"{zone}\"\nbilling = \"{billing}\"\nmax_nodes = 2")).expect("a pool")
}

fn aws_config(url: String, image: Option<String>, pools: Vec<PoolDecl>) -> AwsConfig {
    credentials();
    AwsConfig { region: "us-east-1".into(), endpoint_url: Some(url), image_id: image, pools, timeout_ms: 2000, ..AwsConfig::default() }
}

const JOBS: &str = r#"
[[tenant]]
id = "nlp"
quota_gpus = 8
monthly_budget = "50000"

[[job]]
name = "finetune"
tenant = "nlp"
gpus = 4
gpu_mem_mib = 12000
steps = 1000
pool = "no-spot"
command = ["true"]
"#;

/// A live engine in control mode on `cfg`'s pools, its launcher running, and the launcher's reports.
fn live(cfg: &AwsConfig, start: At) -> (Live, mpsc::Receiver<Report>) {
    let mut room_config = RoomConfig::default();
    room_config.capacity.mode = CapacityMode::Control;
    room_config.capacity.idle_release = Secs(120);
    let (commands, inbox) = mpsc::channel(16);
    let (reports_tx, reports) = mpsc::channel(64);
    drop(ec2_capacity::spawn(cfg.clone(), inbox, reports_tx));
    let live = Live::new(Room::new(room_config), None, Catalogue::default(), "head".into(), start, None)
        .with_cloud(Some(commands), &cfg.pools)
        .expect("the pools are known types");
    (live, reports)
}

async fn next_report(reports: &mut mpsc::Receiver<Report>) -> Report {
    tokio::time::timeout(Duration::from_secs(30), reports.recv()).await.expect("the launcher answers in time").expect("the launcher runs")
}

fn log_has(live: &Live, needle: &str) -> bool {
    live.engine.room().view().log.iter().any(|l| l.text.contains(needle))
}

#[tokio::test]
async fn the_room_buys_an_instance_on_ec2_and_gives_it_back_but_never_one_it_did_not_launch() {
    let Some(url) = moto() else { return };
    let client = aws::client(&aws_config(url.clone(), None, Vec::new())).await;
    let images = client.describe_images().send().await.expect("moto answers DescribeImages");
    let image = images.images().iter().find_map(|i| i.image_id()).expect("moto ships images").to_string();
    // Someone else's instance in the same account: the room must leave it alone.
    let foreign = client
        .run_instances()
        .image_id(&image)
        .instance_type(aws_sdk_ec2::types::InstanceType::P38xlarge)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect("a foreign instance");
    let foreign_id = foreign.instances()[0].instance_id().expect("an id").to_string();

    let cfg = aws_config(url, Some(image), vec![pool("us-east-1a", "on-demand")]);
    let start = chrono::Utc::now();
    let at = |secs: i64| start + TimeDelta::seconds(secs);
    let (mut live, mut reports) = live(&cfg, start);
    let jobs = JobsFile::parse("jobs.toml", JOBS).expect("the jobs file");
    live.begin(at(0), Some(&jobs)).expect("begin");
    live.tick(at(60)).expect("a plan");
    let view = live.engine.room().view();
    let capacity = view.capacity.clone().expect("the room has pools");
    assert_eq!(capacity.launches.len(), 1, "one launch for the job: {:?}", view.log);

    let report = next_report(&mut reports).await;
    let Report::Launched { instances, .. } = &report else { panic!("{report:?}") };
    let ours = instances[0].id.clone();
    assert!(!instances[0].spot, "an on-demand pool launches on demand");
    live.report(at(62), report).expect("launched");
    assert!(live.engine.room().view().nodes.iter().any(|n| n.state.starts_with("booting")), "booting until EC2 says it runs");

    // EC2 tags it as ours, with the request it answers.
    let fleet = aws::describe_fleet(&client, Some(aws::OWNER_TAG)).await.expect("the fleet");
    let listed = fleet.iter().find(|i| i.id == ours).expect("tagged as ours");
    assert_eq!(listed.request, Some(1));
    assert!(!fleet.iter().any(|i| i.id == foreign_id), "the foreign instance carries no tag of ours");

    // The whole fleet, foreign instance included, as the poller reports it: ours is running now.
    let all = aws::describe_fleet(&client, None).await.expect("the fleet");
    live.report(at(120), Report::Fleet { instances: all }).expect("the fleet");
    let view = live.engine.room().view();
    assert!(log_has(&live, "ready: on-demand p3.8xlarge"), "{:?}", view.log);
    // No executor runs work on that machine here: the job is refused plainly and the node idles.
    assert!(log_has(&live, "no executor runs jobs on node"), "{:?}", view.log);

    let mut released = None;
    for minute in 3..=10 {
        live.tick(at(minute * 60)).expect("a tick");
        if let Ok(report) = tokio::time::timeout(Duration::from_millis(200), reports.recv()).await {
            released = report;
            break;
        }
    }
    let report = released.expect("the idle instance is given back");
    assert!(matches!(&report, Report::Released { instance, .. } if *instance == ours), "{report:?}");
    live.report(at(700), report).expect("released");
    assert!(log_has(&live, "given back (idle"), "{:?}", live.engine.room().view().log);

    let fleet = aws::describe_fleet(&client, None).await.expect("the fleet");
    let state = |id: &str| fleet.iter().find(|i| i.id == id).map(|i| i.state.clone()).unwrap_or_default();
    assert!(matches!(state(&ours).as_str(), "shutting-down" | "terminated"), "ours is going: {}", state(&ours));
    assert_eq!(state(&foreign_id), "running", "the foreign one runs on");
    // Asked directly, the adapter refuses to terminate an instance without our tag.
    let refused = aws::terminate_own(&client, &foreign_id).await.expect_err("not ours");
    assert!(refused.to_string().contains("did not launch it"), "{refused}");
    let fleet = aws::describe_fleet(&client, None).await.expect("the fleet");
    assert!(fleet.iter().any(|i| i.id == foreign_id && i.state == "running"));
    // The next fleet poll does not report our released instance as lost.
    live.report(at(760), Report::Fleet { instances: fleet }).expect("the fleet");
    assert!(!log_has(&live, "lost"), "{:?}", live.engine.room().view().log);
    aws::terminate(&client, &foreign_id).await.expect("clean up");
}

/// EC2's answer when a zone has none of the type to give (status 500, as EC2 sends it).
const ICE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code><Message>We currently do not have sufficient p3.8xlarge capacity in the Availability Zone you requested (us-east-1a). Our system will be working on provisioning additional capacity.</Message></Error></Errors><RequestID>3f2a4e0b-8d5c-4c51-9f8e-0c6b7a1d2e3f</RequestID></Response>"#;

#[tokio::test]
async fn insufficient_capacity_becomes_a_launch_failure_and_the_room_tries_the_other_zone() {
    if moto().is_none() {
        return;
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    let server = Loopback::start(move |request| {
        if request.body.contains("Action=RunInstances") {
            seen.fetch_add(1, Ordering::SeqCst);
            Reply { status: 500, content_type: "text/xml".into(), body: ICE.into(), delay: Duration::ZERO, headers: Vec::new() }
        } else {
            Reply::status(400, "unexpected call")
        }
    });
    let mut cfg = aws_config(
        format!("http://127.0.0.1:{}", server.port),
        Some("ami-12345678".into()),
        vec![pool("us-east-1a", "on-demand"), pool("us-east-1b", "on-demand")],
    );
    cfg.max_attempts = 1;
    let start = chrono::Utc::now();
    let at = |secs: i64| start + TimeDelta::seconds(secs);
    let (mut live, mut reports) = live(&cfg, start);
    live.begin(at(0), Some(&JobsFile::parse("jobs.toml", JOBS).expect("jobs"))).expect("begin");
    live.tick(at(60)).expect("a plan");

    let first = next_report(&mut reports).await;
    let Report::LaunchFailed { failure, message, .. } = &first else { panic!("{first:?}") };
    assert_eq!(*failure, gpuroom::domain::capacity::LaunchFailure::InsufficientCapacity, "{message}");
    assert!(message.contains("InsufficientInstanceCapacity"), "{message}");
    live.report(at(61), first).expect("failed");
    // At once, the other zone.
    let second = next_report(&mut reports).await;
    assert!(matches!(second, Report::LaunchFailed { .. }), "{second:?}");
    live.report(at(62), second).expect("failed");
    let view = live.engine.room().view();
    let launches: Vec<&str> = view.log.iter().filter(|l| l.text.starts_with("launching")).map(|l| l.text.as_str()).collect();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(launches[0].contains("us-east-1a") != launches[1].contains("us-east-1a"), "two zones: {launches:?}");
    assert!(log_has(&live, "insufficient capacity"), "{:?}", view.log);
    // Both zones left alone for the backoff: no third call within it.
    for minute in 2..=10 {
        live.tick(at(minute * 60)).expect("a tick");
    }
    assert!(tokio::time::timeout(Duration::from_millis(300), reports.recv()).await.is_err(), "nothing tried during the backoff");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let jobs = live.engine.room().view().jobs;
    let why: Vec<Option<String>> = jobs.iter().map(|j| j.waits_for.clone()).collect();
    assert!(why.iter().flatten().any(|w| w.contains("capacity")), "the job says why it waits: {why:?}");
}
