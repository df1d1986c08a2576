//! AWS EC2 through aws-sdk-ec2: spot price history (paginated) for the
//! configured instance types and zones, the fleet (DescribeInstances), and
//! the fleet effects: launch a spot instance with a max price, replace it to
//! change that price, terminate. Credentials come from the SDK's default
//! chain (environment, `~/.aws`, SSO-less profiles, instance profile); no
//! file of ours ever holds them.
//!
//! # How the max-price curve is applied
//!
//! AWS does not let a running spot instance's max price change. gpuroom
//! applies each job's progress-tied max price in the room: when the market
//! passes a job's current cap, the room checkpoints the job and moves it
//! (`judge` in `room/spot.rs`, the curve in `market/bid.rs`). An
//! instance is launched with the curve's ceiling (the on-demand price) as
//! its own max price, a backstop AWS enforces. Raising an instance's max
//! price is a replacement (`replace_with_max_price`): launch the new one in
//! the same pool, and only once it is launched terminate the old one; its
//! job is checkpointed and restarted on the new instance.
//!
//! Errors are classified (throttled, timeout, service error with the AWS
//! code) so the poller backs off and the console shows stale data instead of
//! failing. Owns no state of the room.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{
    Filter, InstanceInterruptionBehavior, InstanceLifecycleType, InstanceMarketOptionsRequest, InstanceType, MarketType, Placement, ResourceType,
    SpotInstanceType, SpotMarketOptions, Tag, TagSpecification,
};
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::report::{Instance, PricePoint, Report};
use crate::domain::cluster::BillingMode;
use crate::domain::units::{At, Micros, MicrosPerHour};

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AwsConfig {
    pub region: String,
    /// Another endpoint (moto, LocalStack); none: the real AWS.
    pub endpoint_url: Option<String>,
    pub instance_types: Vec<String>,
    pub zones: Vec<String>,
    pub prices_every_secs: u64,
    pub fleet_every_secs: u64,
    /// Per attempt; the whole call may take `max_attempts` of them.
    pub timeout_ms: u64,
    /// The AMI spot instances are launched from.
    pub image_id: Option<String>,
    pub max_attempts: u32,
    /// The pools the room may launch into (elastic capacity).
    pub pools: Vec<PoolDecl>,
}

impl Default for AwsConfig {
    fn default() -> AwsConfig {
        AwsConfig {
            region: "us-east-1".into(),
            endpoint_url: None,
            instance_types: Vec::new(),
            zones: Vec::new(),
            prices_every_secs: 300,
            fleet_every_secs: 60,
            timeout_ms: 5000,
            image_id: None,
            max_attempts: 3,
            pools: Vec::new(),
        }
    }
}

/// A pool of `[sources.aws]` the room may launch into.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolDecl {
    pub instance_type: String,
    pub zone: String,
    /// "spot" or "on-demand".
    pub billing: BillingMode,
    #[serde(default = "default_max_nodes")]
    pub max_nodes: u32,
    #[serde(default)]
    pub warm_min: u32,
    /// From RunInstances to a node that takes work (`DEFAULT_BOOT` when not
    /// given): the console's estimate; the node takes work once EC2 says
    /// the instance is running.
    #[serde(default = "default_boot")]
    pub boot_secs: i64,
    /// Throughput relative to a V100, for pricing work across types.
    #[serde(default = "one")]
    pub speed: f64,
}

fn one() -> f64 {
    1.0
}

fn default_max_nodes() -> u32 {
    4
}

fn default_boot() -> i64 {
    crate::domain::capacity::DEFAULT_BOOT.0
}

/// The tag gpuroom puts on the instances it launches.
pub const OWNER_TAG: (&str, &str) = ("gpuroom", "managed");
/// The tag naming the room's launch request an instance answers.
pub const REQUEST_TAG: &str = "gpuroom-request";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsError {
    #[error("{call}: throttled by EC2 ({code}); backing off")]
    Throttled { call: &'static str, code: String },
    #[error("{call}: no answer in time ({why})")]
    Timeout { call: &'static str, why: String },
    #[error("{call}: {code}: {message}")]
    Service { call: &'static str, code: String, message: String },
    #[error("{call}: {why}")]
    Other { call: &'static str, why: String },
    #[error("{call}: bad answer: {why}")]
    BadData { call: &'static str, why: String },
}

impl AwsError {
    fn of<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(call: &'static str, err: SdkError<E, R>) -> AwsError {
        let code = err.code().map(str::to_string);
        let message = err.message().unwrap_or_default().to_string();
        match &err {
            SdkError::TimeoutError(_) => return AwsError::Timeout { call, why: "the attempt timed out".into() },
            SdkError::DispatchFailure(d) if d.is_timeout() => return AwsError::Timeout { call, why: "connecting timed out".into() },
            _ => {}
        }
        match code {
            Some(c) if ["RequestLimitExceeded", "Throttling", "ThrottlingException", "SlowDown", "ServiceUnavailable", "Unavailable"].contains(&c.as_str()) => {
                AwsError::Throttled { call, code: c }
            }
            Some(code) => AwsError::Service { call, code, message },
            None => {
                // The full chain: "dispatch failure: io error: Connection refused" says more than the top.
                let mut why = err.to_string();
                let mut source = std::error::Error::source(&err);
                while let Some(s) = source {
                    why = format!("{why}: {s}");
                    source = s.source();
                }
                AwsError::Other { call, why }
            }
        }
    }

    pub fn is_throttled(&self) -> bool {
        matches!(self, AwsError::Throttled { .. } | AwsError::Timeout { .. })
    }
}

/// A client on the default credential chain, with retries (standard mode:
/// exponential backoff with jitter) and per-attempt and per-call timeouts.
pub async fn client(config: &AwsConfig) -> aws_sdk_ec2::Client {
    let attempt = Duration::from_millis(config.timeout_ms.max(1));
    let attempts = config.max_attempts.max(1);
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(config.region.clone()))
        .retry_config(RetryConfig::standard().with_max_attempts(attempts).with_initial_backoff(Duration::from_millis(100)))
        .timeout_config(
            TimeoutConfig::builder().connect_timeout(attempt).operation_attempt_timeout(attempt).operation_timeout(attempt * (attempts + 1)).build(),
        );
    if let Some(url) = &config.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    // HTTPS on rustls with ring, for the client and the credential chain alike (see Cargo.toml).
    let https = aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https();
    aws_sdk_ec2::Client::new(&loader.http_client(https).load().await)
}

/// EC2 quotes dollars per hour as a decimal string ("3.672000").
pub fn parse_price(text: &str) -> Option<MicrosPerHour> {
    Micros::parse_decimal(text.trim()).ok().map(|m| MicrosPerHour(m.0)).filter(|p| p.0 >= 0)
}

/// Dollars per hour as EC2 takes them.
pub fn price_text(price: MicrosPerHour) -> String {
    format!("{}.{:06}", price.0 / 1_000_000, price.0 % 1_000_000)
}

fn at(t: &aws_sdk_ec2::primitives::DateTime) -> Option<At> {
    chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// Every Linux price point since `since` for those types and zones, all
/// pages. A point with an unreadable price is skipped (counted in the second value).
pub async fn spot_price_history(client: &aws_sdk_ec2::Client, types: &[String], zones: &[String], since: At) -> Result<Vec<PricePoint>, AwsError> {
    spot_price_history_counted(client, types, zones, since).await.map(|(points, _)| points)
}

pub async fn spot_price_history_counted(
    client: &aws_sdk_ec2::Client,
    types: &[String],
    zones: &[String],
    since: At,
) -> Result<(Vec<PricePoint>, usize), AwsError> {
    const CALL: &str = "DescribeSpotPriceHistory";
    let mut request = client
        .describe_spot_price_history()
        .product_descriptions("Linux/UNIX")
        .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(since.timestamp()))
        .set_instance_types(Some(types.iter().map(|t| InstanceType::from(t.as_str())).collect()));
    if !zones.is_empty() {
        request = request.filters(Filter::builder().name("availability-zone").set_values(Some(zones.to_vec())).build());
    }
    let mut pages = request.into_paginator().send();
    let mut points = Vec::new();
    let mut skipped = 0;
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::of(CALL, e))?;
        for p in page.spot_price_history() {
            let point = (|| {
                Some(PricePoint {
                    zone: p.availability_zone()?.to_string(),
                    instance_type: p.instance_type()?.as_str().to_string(),
                    at: at(p.timestamp()?)?,
                    price: parse_price(p.spot_price()?)?,
                })
            })();
            match point {
                Some(point) => points.push(point),
                None => skipped += 1,
            }
        }
    }
    Ok((points, skipped))
}

/// An instance as EC2 describes it, in the adapter's terms.
fn instance(i: &aws_sdk_ec2::types::Instance, max_price: Option<MicrosPerHour>) -> Option<Instance> {
    Some(Instance {
        id: i.instance_id()?.to_string(),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone: i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
        spot: i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) || max_price.is_some(),
        state: i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_else(|| "unknown".into()),
        launched: i.launch_time().and_then(at),
        max_price,
        private_dns: i.private_dns_name().filter(|d| !d.is_empty()).map(str::to_string),
        request: i.tags().iter().find(|t| t.key() == Some(REQUEST_TAG)).and_then(|t| t.value()?.parse().ok()),
    })
}

/// The fleet: every instance (optionally only those with a tag), all pages.
pub async fn describe_fleet(client: &aws_sdk_ec2::Client, filter_tag: Option<(&str, &str)>) -> Result<Vec<Instance>, AwsError> {
    const CALL: &str = "DescribeInstances";
    let mut request = client.describe_instances();
    if let Some((key, value)) = filter_tag {
        request = request.filters(Filter::builder().name(format!("tag:{key}")).values(value).build());
    }
    let mut pages = request.into_paginator().send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::of(CALL, e))?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| instance(i, None)));
    }
    Ok(out)
}

/// What to launch: `count` instances of a type in a zone, on spot with a
/// max price or on demand, tagged as ours plus `tags`.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchSpec {
    pub instance_type: String,
    pub zone: String,
    /// `Some(max price)`: a one-time spot request, terminated on interruption.
    pub spot_max_price: Option<MicrosPerHour>,
    pub count: u32,
    pub tags: Vec<(String, String)>,
}

/// Launches all of `spec.count` instances or none (EC2's MinCount =
/// MaxCount), tagged as ours; returns them as EC2 describes them.
pub async fn launch(client: &aws_sdk_ec2::Client, config: &AwsConfig, spec: &LaunchSpec) -> Result<Vec<Instance>, AwsError> {
    const CALL: &str = "RunInstances";
    let image = config.image_id.clone().ok_or(AwsError::Other { call: CALL, why: "no image_id in [sources.aws]: which AMI to launch?".into() })?;
    let count = i32::try_from(spec.count.max(1)).unwrap_or(i32::MAX);
    let mut tag_spec = TagSpecification::builder().resource_type(ResourceType::Instance).tags(Tag::builder().key(OWNER_TAG.0).value(OWNER_TAG.1).build());
    for (k, v) in &spec.tags {
        tag_spec = tag_spec.tags(Tag::builder().key(k).value(v).build());
    }
    let mut request = client
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::from(spec.instance_type.as_str()))
        .min_count(count)
        .max_count(count)
        .placement(Placement::builder().availability_zone(&spec.zone).build())
        .tag_specifications(tag_spec.build());
    if let Some(max_price) = spec.spot_max_price {
        let spot = SpotMarketOptions::builder()
            .max_price(price_text(max_price))
            .spot_instance_type(SpotInstanceType::OneTime)
            .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate)
            .build();
        request = request.instance_market_options(InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).spot_options(spot).build());
    }
    let out = request.send().await.map_err(|e| AwsError::of(CALL, e))?;
    let instances: Vec<Instance> = out.instances().iter().filter_map(|i| instance(i, spec.spot_max_price)).collect();
    if instances.is_empty() {
        return Err(AwsError::BadData { call: CALL, why: "no instance in the answer".into() });
    }
    Ok(instances)
}

/// Launches one spot instance with `max_price` (one-time request,
/// terminated on interruption), tagged as ours; returns its id.
pub async fn launch_spot(
    client: &aws_sdk_ec2::Client,
    config: &AwsConfig,
    instance_type: &str,
    zone: &str,
    max_price: MicrosPerHour,
    tags: &[(String, String)],
) -> Result<String, AwsError> {
    let spec = LaunchSpec { instance_type: instance_type.into(), zone: zone.into(), spot_max_price: Some(max_price), count: 1, tags: tags.to_vec() };
    Ok(launch(client, config, &spec).await?.remove(0).id)
}

/// Terminates `id` only if it carries our tag: an instance gpuroom did
/// not launch is never terminated by it, whatever the room asks.
pub async fn terminate_own(client: &aws_sdk_ec2::Client, id: &str) -> Result<(), AwsError> {
    const CALL: &str = "DescribeInstances";
    let out = client.describe_instances().instance_ids(id).send().await.map_err(|e| AwsError::of(CALL, e))?;
    let found = out.reservations().iter().flat_map(|r| r.instances()).find(|i| i.instance_id() == Some(id));
    let Some(found) = found else {
        return Err(AwsError::BadData { call: CALL, why: format!("{id} is not listed") });
    };
    let ours = found.tags().iter().any(|t| t.key() == Some(OWNER_TAG.0) && t.value() == Some(OWNER_TAG.1));
    if !ours {
        let why = format!("{id} has no {}={} tag: gpuroom did not launch it and leaves it running", OWNER_TAG.0, OWNER_TAG.1);
        return Err(AwsError::Other { call: "TerminateInstances", why });
    }
    terminate(client, id).await
}

pub async fn terminate(client: &aws_sdk_ec2::Client, id: &str) -> Result<(), AwsError> {
    client.terminate_instances().instance_ids(id).send().await.map_err(|e| AwsError::of("TerminateInstances", e))?;
    Ok(())
}

/// A new instance in `old`'s pool with `max_price`, then `old` terminated
/// (only once the new one is launched: a failed launch leaves the old one).
pub async fn replace_with_max_price(client: &aws_sdk_ec2::Client, config: &AwsConfig, old: &Instance, max_price: MicrosPerHour) -> Result<String, AwsError> {
    let tags = vec![("gpuroom-replaces".to_string(), old.id.clone())];
    let new = launch_spot(client, config, &old.instance_type, &old.zone, max_price, &tags).await?;
    terminate(client, &old.id).await?;
    Ok(new)
}

/// The wait after `failures` failures in a row: the normal period, doubled
/// per failure, at most 10 minutes.
pub fn backoff(every: Duration, failures: u32) -> Duration {
    const CAP: Duration = Duration::from_secs(600);
    if failures == 0 {
        return every;
    }
    every.saturating_mul(2u32.saturating_pow(failures.min(16))).min(CAP.max(every))
}

/// Polls prices and the fleet; a failure is one `Failed` report (the data
/// goes stale) and a doubled wait; the first success after is `Healthy`.
pub fn spawn(config: AwsConfig, reports: mpsc::Sender<Report>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = client(&config).await;
        let prices_every = Duration::from_secs(config.prices_every_secs.max(1));
        let fleet_every = Duration::from_secs(config.fleet_every_secs.max(1));
        let mut since = chrono::Utc::now() - chrono::TimeDelta::hours(24);
        let mut failures = 0u32;
        let mut healthy = false;
        let mut next_prices = tokio::time::Instant::now();
        let mut next_fleet = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            let mut result: Result<Option<Report>, AwsError> = Ok(None);
            let prices_due = now >= next_prices && !config.instance_types.is_empty();
            if prices_due {
                result = spot_price_history(&client, &config.instance_types, &config.zones, since).await.map(|points| {
                    if let Some(newest) = points.iter().map(|p| p.at).max() {
                        since = newest;
                    }
                    Some(Report::Prices { points })
                });
            } else if now >= next_fleet {
                result = describe_fleet(&client, None).await.map(|instances| Some(Report::Fleet { instances }));
            }
            let sent = match result {
                Ok(report) => {
                    failures = 0;
                    if prices_due {
                        next_prices = tokio::time::Instant::now() + prices_every;
                    } else {
                        next_fleet = tokio::time::Instant::now() + fleet_every;
                    }
                    let mut ok = true;
                    if !healthy {
                        healthy = true;
                        ok = reports.send(Report::Healthy { source: "aws ec2".into(), detail: format!("EC2 {} answers", config.region) }).await.is_ok();
                    }
                    ok && match report {
                        Some(r) => reports.send(r).await.is_ok(),
                        None => true,
                    }
                }
                Err(e) => {
                    failures += 1;
                    let wait = backoff(prices_every.min(fleet_every), failures);
                    next_prices = tokio::time::Instant::now() + wait;
                    next_fleet = next_prices;
                    let first = healthy || failures == 1;
                    healthy = false;
                    !first
                        || reports
                            .send(Report::Failed { source: "aws ec2".into(), hosts: Vec::new(), why: format!("{e}; next try in {}s", wait.as_secs()) })
                            .await
                            .is_ok()
                }
            };
            if !sent {
                return;
            }
            let wake = next_prices.min(next_fleet);
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = reports.closed() => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_convert_exactly_both_ways() {
        assert_eq!(parse_price("3.672000"), Some(MicrosPerHour(3_672_000)));
        assert_eq!(parse_price("0.00001"), Some(MicrosPerHour(10)));
        assert_eq!(parse_price("12.24"), Some(MicrosPerHour(12_240_000)));
        assert_eq!(parse_price("n/a"), None);
        assert_eq!(parse_price("-1"), None);
        assert_eq!(price_text(MicrosPerHour(12_240_000)), "12.240000");
        assert_eq!(price_text(MicrosPerHour(10)), "0.000010");
    }

    #[test]
    fn backoff_doubles_per_failure_and_stops_at_ten_minutes() {
        let every = Duration::from_secs(60);
        assert_eq!(backoff(every, 0), every);
        assert_eq!(backoff(every, 1), Duration::from_secs(120));
        assert_eq!(backoff(every, 3), Duration::from_secs(480));
        assert_eq!(backoff(every, 4), Duration::from_secs(600));
        assert_eq!(backoff(every, 40), Duration::from_secs(600));
        // A period longer than the cap is never shortened by a failure.
        assert_eq!(backoff(Duration::from_secs(900), 2), Duration::from_secs(900));
    }

    #[test]
    fn the_config_has_defaults_and_refuses_unknown_keys() {
        let c: AwsConfig = toml::from_str("region = \"eu-west-1\"\ninstance_types = [\"p3.8xlarge\"]").unwrap();
        assert_eq!((c.region.as_str(), c.max_attempts, c.prices_every_secs), ("eu-west-1", 3, 300));
        assert!(toml::from_str::<AwsConfig>("regoin = \"x\"").is_err());
    }
}
