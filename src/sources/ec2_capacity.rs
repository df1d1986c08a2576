//! The room's elastic capacity on EC2: the pools it may buy from (the
//! `[[sources.aws.pools]]` tables) and the task that carries out its
//! launches and releases. Each launch is one RunInstances call (all of the
//! count or none); each release is a TerminateInstances of an instance that
//! carries our tag, refused otherwise. Every answer goes back as a
//! `Report` (`Launched`, `LaunchFailed`, `Released`, `ReleaseFailed`) so the
//! room learns of it through its log, like any other outcome.
//!
//! Owns no state of the room; knows nothing of node ids beyond passing them
//! back with the answer.

use tokio::sync::mpsc;

pub use super::aws::PoolDecl;
use super::aws::{self, AwsConfig, AwsError, LaunchSpec};
use super::report::Report;
use crate::domain::capacity::LaunchFailure;
use crate::domain::cluster::BillingMode;
use crate::domain::ids::NodeId;
use crate::domain::units::MicrosPerHour;

/// What the live world asks of EC2 for the room.
#[derive(Clone, Debug, PartialEq)]
pub enum CloudCommand {
    Launch { request: u64, spec: LaunchSpec },
    Release { node: NodeId, instance: String },
}

/// What an EC2 error means for a launch: the capacity policy tries another
/// zone or on-demand after the first three, and only reports the last.
pub fn launch_failure(err: &AwsError) -> LaunchFailure {
    let AwsError::Service { code, .. } = err else { return LaunchFailure::Other };
    match code.as_str() {
        "InsufficientInstanceCapacity" | "InsufficientCapacity" | "InsufficientHostCapacity" | "Unsupported" | "SpotCapacityNotAvailable" => {
            LaunchFailure::InsufficientCapacity
        }
        "SpotMaxPriceTooLow" => LaunchFailure::PriceAboveMax,
        "InstanceLimitExceeded" | "VcpuLimitExceeded" | "MaxSpotInstanceCountExceeded" => LaunchFailure::Limit,
        _ => LaunchFailure::Other,
    }
}

/// The tags a launch carries besides ours: which request and pool it was.
pub fn request_tags(request: u64, billing: BillingMode) -> Vec<(String, String)> {
    vec![(aws::REQUEST_TAG.into(), request.to_string()), ("gpuroom-billing".into(), billing.label().to_string())]
}

/// Carries out commands one at a time, in order; stops when either channel closes.
pub fn spawn(config: AwsConfig, mut commands: mpsc::Receiver<CloudCommand>, reports: mpsc::Sender<Report>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = aws::client(&config).await;
        while let Some(command) = commands.recv().await {
            let report = carry_out(&client, &config, command).await;
            if reports.send(report).await.is_err() {
                return;
            }
        }
    })
}

async fn carry_out(client: &aws_sdk_ec2::Client, config: &AwsConfig, command: CloudCommand) -> Report {
    match command {
        CloudCommand::Launch { request, spec } => match aws::launch(client, config, &spec).await {
            Ok(instances) => Report::Launched { request, instances },
            Err(err) => Report::LaunchFailed { request, count: spec.count, failure: launch_failure(&err), message: err.to_string() },
        },
        CloudCommand::Release { node, instance } => match aws::terminate_own(client, &instance).await {
            Ok(()) => Report::Released { node, instance },
            Err(err) => Report::ReleaseFailed { node, message: err.to_string() },
        },
    }
}

/// The spot price a launch asks for: the room's max price, or on-demand's
/// as the backstop when it gave none.
pub fn spot_price(billing: BillingMode, asked: Option<MicrosPerHour>, on_demand: MicrosPerHour) -> Option<MicrosPerHour> {
    (billing == BillingMode::Spot).then(|| asked.unwrap_or(on_demand))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(code: &str) -> AwsError {
        AwsError::Service { call: "RunInstances", code: code.into(), message: "m".into() }
    }

    #[test]
    fn ec2_codes_become_launch_failures() {
        assert_eq!(launch_failure(&service("InsufficientInstanceCapacity")), LaunchFailure::InsufficientCapacity);
        assert_eq!(launch_failure(&service("SpotMaxPriceTooLow")), LaunchFailure::PriceAboveMax);
        assert_eq!(launch_failure(&service("VcpuLimitExceeded")), LaunchFailure::Limit);
        assert_eq!(launch_failure(&service("InvalidAMIID.NotFound")), LaunchFailure::Other);
        assert_eq!(launch_failure(&AwsError::Timeout { call: "RunInstances", why: "w".into() }), LaunchFailure::Other);
    }

    #[test]
    fn pools_parse_with_defaults_and_refuse_nonsense() {
        let p: PoolDecl = toml::from_str("instance_type = \"p3.8xlarge\"\nzone = \"us-east-1a\"\nbilling = \"spot\"").unwrap();
        assert_eq!((p.max_nodes, p.warm_min, p.billing), (4, 0, BillingMode::Spot));
        assert!(toml::from_str::<PoolDecl>("instance_type = \"p3.8xlarge\"\nzone = \"a\"\nbilling = \"cheap\"").is_err());
        assert!(toml::from_str::<PoolDecl>("instance_type = \"p3.8xlarge\"\nzone = \"a\"\nbilling = \"spot\"\nmax = 3").is_err());
    }

    #[test]
    fn spot_launches_always_carry_a_price() {
        let od = MicrosPerHour(12_240_000);
        assert_eq!(spot_price(BillingMode::Spot, Some(MicrosPerHour(4_100_000)), od), Some(MicrosPerHour(4_100_000)));
        assert_eq!(spot_price(BillingMode::Spot, None, od), Some(od));
        assert_eq!(spot_price(BillingMode::OnDemand, Some(MicrosPerHour(1)), od), None);
    }
}
