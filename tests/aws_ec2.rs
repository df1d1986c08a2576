//! The EC2 adapter through the real SDK against moto's EC2 server on
//! 127.0.0.1 (started by `.ci/run`, address in `GPUROOM_MOTO_URL`): launch a
//! spot instance with a max price, find it in the fleet, replace it with a
//! higher max price, terminate it, read price history, and get a clear AWS
//! error for an instance that does not exist. Skipped with a message when
//! moto is not running, unless `GPUROOM_REQUIRE_MOTO` is set (as `.ci/run`
//! does), where a missing server fails the run.

use gpuroom::domain::units::MicrosPerHour;
use gpuroom::sources::aws::{self, AwsConfig, AwsError};

fn moto() -> Option<String> {
    let url = std::env::var("GPUROOM_MOTO_URL").ok();
    let required = std::env::var_os("GPUROOM_REQUIRE_MOTO").is_some();
    match url {
        Some(url) => Some(url),
        None => {
            assert!(!required, "moto is required (GPUROOM_REQUIRE_MOTO is set) but GPUROOM_MOTO_URL is not");
            eprintln!("SKIPPED: no moto server; set GPUROOM_MOTO_URL (see .ci/run) to run the EC2 round trips");
            None
        }
    }
}

#[allow(unsafe_code)]
fn config(url: String) -> AwsConfig {
    // moto accepts any credentials; the SDK's default chain finds these.
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
    }
    AwsConfig {
        region: "us-east-1".into(),
        endpoint_url: Some(url),
        instance_types: vec!["p3.8xlarge".into()],
        zones: vec!["us-east-1a".into()],
        image_id: None,
        ..AwsConfig::default()
    }
}

#[tokio::test]
async fn spot_instances_launch_show_in_the_fleet_are_replaced_and_terminated() {
    let Some(url) = moto() else { return };
    let mut cfg = config(url);
    let client = aws::client(&cfg).await;
    let images = client.describe_images().send().await.expect("moto answers DescribeImages");
    let image = images.images().iter().find_map(|i| i.image_id()).expect("moto ships images").to_string();

    let none = aws::launch_spot(&client, &cfg, "p3.8xlarge", "us-east-1a", MicrosPerHour(4_000_000), &[]).await;
    assert!(matches!(&none, Err(AwsError::Other { why, .. }) if why.contains("image_id")), "{none:?}");
    cfg.image_id = Some(image);

    let id = aws::launch_spot(&client, &cfg, "p3.8xlarge", "us-east-1a", MicrosPerHour(4_000_000), &[("team".into(), "nlp".into())]).await.expect("launch");
    let fleet = aws::describe_fleet(&client, Some(aws::OWNER_TAG)).await.expect("the fleet");
    let ours = fleet.iter().find(|i| i.id == id).expect("the new instance is listed as ours");
    assert_eq!((ours.instance_type.as_str(), ours.zone.as_str(), ours.spot), ("p3.8xlarge", "us-east-1a", true));
    assert!(matches!(ours.state.as_str(), "pending" | "running"), "{}", ours.state);

    let new = aws::replace_with_max_price(&client, &cfg, ours, MicrosPerHour(6_500_000)).await.expect("replace");
    assert_ne!(new, id);
    let fleet = aws::describe_fleet(&client, None).await.expect("the fleet");
    let state = |id: &str| fleet.iter().find(|i| i.id == id).map(|i| i.state.clone()).unwrap_or_default();
    assert!(matches!(state(&id).as_str(), "shutting-down" | "terminated"), "the old one is going: {}", state(&id));
    assert!(matches!(state(&new).as_str(), "pending" | "running"), "{}", state(&new));

    aws::terminate(&client, &new).await.expect("terminate");
    let fleet = aws::describe_fleet(&client, None).await.expect("the fleet");
    assert!(fleet.iter().any(|i| i.id == new && matches!(i.state.as_str(), "shutting-down" | "terminated")));
}

#[tokio::test]
async fn price_history_parses_and_bad_ids_are_clear_aws_errors() {
    let Some(url) = moto() else { return };
    let cfg = config(url);
    let client = aws::client(&cfg).await;
    let since = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    // moto answers with made-up points (PLATFORM-NOTES); that they parse is the check.
    let points = aws::spot_price_history(&client, &cfg.instance_types, &cfg.zones, since).await.expect("price history");
    assert!(points.iter().all(|p| p.instance_type == "p3.8xlarge" && p.price.0 >= 0), "{points:?}");
    let err = aws::terminate(&client, "i-0123456789abcdef0").await.expect_err("no such instance");
    match &err {
        AwsError::Service { call, code, .. } => assert_eq!((*call, code.as_str()), ("TerminateInstances", "InvalidInstanceID.NotFound")),
        other => panic!("expected the AWS error code, got {other:?}"),
    }
    assert!(err.to_string().starts_with("TerminateInstances: InvalidInstanceID.NotFound"), "{err}");
}

#[tokio::test]
async fn a_dead_endpoint_is_an_error_not_a_hang() {
    if moto().is_none() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let cfg = AwsConfig { timeout_ms: 500, max_attempts: 2, ..config(format!("http://127.0.0.1:{port}")) };
    let client = aws::client(&cfg).await;
    let err = aws::describe_fleet(&client, None).await.expect_err("nobody listens");
    assert!(err.to_string().starts_with("DescribeInstances"), "{err}");
}
