//! gpuroom as Slurm's power-saving programs on a cloud cluster:
//! `gpuroom slurm-resume HOSTLIST` (ResumeProgram) launches one EC2 instance
//! per node and tells Slurm its address; `gpuroom slurm-suspend HOSTLIST`
//! (SuspendProgram) terminates them.
//!
//! Resume chooses, per node, spot or on-demand, the zone and the max price
//! with the room's elastic-capacity policy (`capacity::plan::scale_up`): the
//! node's `[[sources.slurm.power.nodes]]` entry gives the pools (its instance
//! type in each of its zones, on spot and/or on demand); on-demand is priced
//! at its list price, spot at its market price with the expected cost of
//! interruptions priced in as the room prices it (hazard, checkpoint
//! interval, restart: `cost::mix::effective_spot`), its max price from the
//! max-price curve (`market::bid`, capped by the entry's `max_price`); the
//! fleet that counts for the stable floor and the account limit is the
//! cluster's instances gpuroom launched for Slurm. A launch that fails for
//! capacity, price or a limit is retried in the next pool the policy
//! chooses (another zone, or on-demand). The launch goes through the EC2
//! adapter (`aws::launch`, tagged as gpuroom's plus `gpuroom-slurm-node` and
//! `gpuroom-slurm-cluster`); then `scontrol update nodename=N nodeaddr=IP
//! nodehostname=HOST`. A node that cannot be launched is set DOWN with
//! `reason="launch failed: …"` (Slurm requeues its jobs; ResumeProgram's
//! contract) and the program exits non-zero after trying every node. An
//! instance already running for the node (Slurm runs ResumeProgram again
//! after a controller restart) is used, not launched twice.
//!
//! Suspend terminates only instances carrying gpuroom's tag
//! (`aws::terminate_own`); a node without one is said and is not an error.
//!
//! Owns the choice and the calls for these two commands only. It must not
//! touch the room, the engine or the store, and never terminates an
//! instance that is not gpuroom's.

mod choose;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{Filter, InstanceLifecycleType};

use super::catalogue::Catalogue;
use crate::config::EngineConfig;
use crate::domain::cluster::BillingMode;
use crate::domain::hostlist;
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, MicrosPerHour};
use crate::sources::aws::{self, AwsConfig, LaunchSpec};
use crate::sources::ec2_capacity;
use crate::sources::slurm::SlurmConfig;
use crate::sources::slurm::cli::SlurmCli;
use crate::sources::slurm::power::{PowerBilling, PowerConfig};

pub use choose::*;

/// The tag naming the Slurm node an instance is.
pub const NODE_TAG: &str = "gpuroom-slurm-node";
/// The tag naming the Slurm cluster it belongs to.
pub const CLUSTER_TAG: &str = "gpuroom-slurm-cluster";
/// The tag the engine's launches carry too: how the instance is billed.
pub const BILLING_TAG: &str = "gpuroom-billing";

/// An SDK error in a line: EC2's code and message, else the chain of causes.
fn sdk_error<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(call: &str, err: SdkError<E, R>) -> String {
    if let Some(code) = err.code() {
        return format!("{call}: {code}: {}", err.message().unwrap_or_default());
    }
    let mut why = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    format!("{call}: {why}")
}

fn tag<'a>(i: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    i.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

fn node_instance(i: &aws_sdk_ec2::types::Instance) -> Option<NodeInstance> {
    Some(NodeInstance {
        id: i.instance_id()?.to_string(),
        node: tag(i, NODE_TAG)?.to_string(),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone: i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
        billing: if i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) { BillingMode::Spot } else { BillingMode::OnDemand },
        state: i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_else(|| "unknown".into()),
        private_ip: i.private_ip_address().filter(|a| !a.is_empty()).map(str::to_string),
        private_dns: i.private_dns_name().filter(|d| !d.is_empty()).map(str::to_string),
    })
}

/// The instances gpuroom launched for the cluster's nodes and not yet
/// terminated, all pages.
pub async fn cluster_instances(client: &aws_sdk_ec2::Client, cluster: &str) -> Result<Vec<NodeInstance>, String> {
    let states = ["pending", "running", "stopping", "stopped"].map(String::from).to_vec();
    let mut pages = client
        .describe_instances()
        .filters(Filter::builder().name(format!("tag:{}", aws::OWNER_TAG.0)).values(aws::OWNER_TAG.1).build())
        .filters(Filter::builder().name(format!("tag:{CLUSTER_TAG}")).values(cluster).build())
        .filters(Filter::builder().name("instance-state-name").set_values(Some(states)).build())
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sdk_error("DescribeInstances", e))?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(node_instance));
    }
    Ok(out)
}

/// The new instance's private address and short host name (EC2 may not
/// list an instance for a moment after launching it: a few tries).
async fn address(client: &aws_sdk_ec2::Client, id: &str) -> Result<(String, String), String> {
    let mut last = String::new();
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let out = match client.describe_instances().instance_ids(id).send().await {
            Ok(out) => out,
            Err(e) => {
                last = sdk_error("DescribeInstances", e);
                continue;
            }
        };
        let found = out.reservations().iter().flat_map(|r| r.instances()).find(|i| i.instance_id() == Some(id));
        let Some(ip) = found.and_then(|i| i.private_ip_address()).filter(|a| !a.is_empty()) else {
            last = format!("{id} has no private address yet");
            continue;
        };
        let dns = found.and_then(|i| i.private_dns_name()).unwrap_or_default();
        let host = dns.split('.').next().filter(|h| !h.is_empty()).map_or_else(|| format!("ip-{}", ip.replace('.', "-")), str::to_string);
        return Ok((ip.to_string(), host));
    }
    Err(last)
}

/// Newest spot price per zone of `instance_type` in `zones`.
async fn spot_prices(client: &aws_sdk_ec2::Client, instance_type: &str, zones: &[String], now: At) -> Result<BTreeMap<String, MicrosPerHour>, String> {
    let since = now - chrono::TimeDelta::hours(3);
    let points = aws::spot_price_history(client, &[instance_type.to_string()], zones, since).await.map_err(|e| e.to_string())?;
    let mut newest: BTreeMap<String, (At, MicrosPerHour)> = BTreeMap::new();
    for p in points.into_iter().filter(|p| p.instance_type == instance_type && zones.contains(&p.zone)) {
        let e = newest.entry(p.zone.clone()).or_insert((p.at, p.price));
        if p.at >= e.0 {
            *e = (p.at, p.price);
        }
    }
    Ok(newest.into_iter().map(|(z, (_, p))| (z, p)).collect())
}

/// Slurm's reason text: one line, plain, bounded.
fn reason_text(why: &str) -> String {
    let clean = crate::domain::text::clean(&why.replace(['\n', '\r', '\t'], " "));
    let mut reason: String = clean.chars().take(240).collect();
    if clean.chars().count() > 240 {
        reason.push('…');
    }
    reason
}

/// What the commands need from the configuration.
struct Setup<'a> {
    aws: &'a AwsConfig,
    slurm: SlurmCli,
    power: Option<&'a PowerConfig>,
}

fn setup(config: &EngineConfig, what: Power) -> Result<Setup<'_>, String> {
    let aws = config.sources.aws.as_ref().ok_or("no [sources.aws] table in the configuration: which EC2 region (and endpoint) to use?")?;
    let slurm = config.sources.slurm.as_ref();
    let power = slurm.and_then(|s| s.power.as_ref());
    if what == Power::Resume {
        let power = power.ok_or("no [sources.slurm.power] table in the configuration: nothing says what to launch for a node")?;
        if let Some(problem) = power.problem() {
            return Err(problem);
        }
    }
    let cli = slurm.map_or_else(|| SlurmConfig::default().cli(), SlurmConfig::cli);
    Ok(Setup { aws, slurm: cli, power })
}

async fn cluster_name(setup: &Setup<'_>) -> Result<String, String> {
    if let Some(c) = setup.power.and_then(|p| p.cluster.clone()) {
        return Ok(c);
    }
    let name = setup
        .slurm
        .cluster_name()
        .await
        .map_err(|e| format!("the cluster's name (for the instances' {CLUSTER_TAG} tag): {e}; or set cluster in [sources.slurm.power]"))?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Err(format!("Slurm's ClusterName {name:?} cannot be a tag here; set cluster in [sources.slurm.power]"));
    }
    Ok(name)
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", crate::domain::text::for_terminal(line));
    let _ = out.flush();
}

/// Runs `slurm-resume` or `slurm-suspend` for `hostlist`; `Err` (after every
/// node was tried) says which nodes failed.
pub fn run(what: Power, hostlist: &str, config: &EngineConfig) -> Result<(), String> {
    let names = hostlist::expand(hostlist).map_err(|e| e.to_string())?;
    let setup = setup(config, what)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("starting tokio: {e}"))?;
    let failed = runtime.block_on(async {
        match what {
            Power::Resume => resume(&names, config, &setup).await,
            Power::Suspend => suspend(&names, &setup).await,
        }
    })?;
    if failed.is_empty() {
        return Ok(());
    }
    let verb = if what == Power::Resume { "resumed" } else { "suspended" };
    Err(format!("{} of {} nodes not {verb}: {}", failed.len(), names.len(), failed.join(",")))
}

/// Sets the node DOWN with the reason (Slurm requeues its jobs) and says so.
async fn fail_node(slurm: &SlurmCli, node: &str, why: &str, failed: &mut Vec<String>) {
    let reason = reason_text(&format!("launch failed: {why}"));
    let told = match slurm.update_node(node, &[("state", "down"), ("reason", &reason)]).await {
        Ok(_) => "set DOWN in Slurm".to_string(),
        Err(e) => format!("and Slurm was not told ({e})"),
    };
    say(&format!("{node}: NOT launched: {why}; {told}"));
    failed.push(node.to_string());
}

async fn resume(names: &[String], config: &EngineConfig, setup: &Setup<'_>) -> Result<Vec<String>, String> {
    let power = setup.power.ok_or("no [sources.slurm.power] table")?;
    let cluster = cluster_name(setup).await?;
    let catalogue = Catalogue::new(config.sources.instance_types.clone(), config.sources.nodes.clone());
    let policy = PowerPolicy::of(config);
    let client = aws::client(setup.aws).await;
    let slurm = &setup.slurm;
    let mut failed = Vec::new();
    let mut instances = match cluster_instances(&client, &cluster).await {
        Ok(found) => found,
        Err(e) => {
            for node in names {
                fail_node(slurm, node, &format!("EC2 does not answer: {e}"), &mut failed).await;
            }
            return Ok(failed);
        }
    };
    let now = chrono::Utc::now();
    let mut markets: BTreeMap<usize, Result<BTreeMap<String, MicrosPerHour>, String>> = BTreeMap::new();
    for node in names {
        if let Some(i) = instances.iter().find(|i| &i.node == node && i.is_live()).cloned() {
            let (Some(ip), Some(dns)) = (i.private_ip.clone(), i.private_dns.clone()) else {
                fail_node(slurm, node, &format!("{} is already its instance but has no private address", i.id), &mut failed).await;
                continue;
            };
            let host = dns.split('.').next().unwrap_or(&dns).to_string();
            match slurm.update_node(node, &[("nodeaddr", &ip), ("nodehostname", &host)]).await {
                Ok(_) => say(&format!(
                    "{node}: already has {} ({} {} in {}), not launched again; Slurm: nodeaddr={ip} nodehostname={host}",
                    i.id,
                    i.instance_type,
                    i.billing.label(),
                    i.zone
                )),
                Err(e) => fail_node(slurm, node, &format!("{} is its instance, but scontrol failed: {e}", i.id), &mut failed).await,
            }
            continue;
        }
        let Some((number, entry)) = power.template_for(node) else {
            fail_node(slurm, node, "no [[sources.slurm.power.nodes]] pattern matches its name", &mut failed).await;
            continue;
        };
        let Some(shape) = catalogue.instance_type(&entry.instance_type) else {
            let why = format!(
                "[[sources.slurm.power.nodes]] {number}: {} is not an instance type gpuroom knows; add it to [[sources.instance_types]]",
                entry.instance_type
            );
            fail_node(slurm, node, &why, &mut failed).await;
            continue;
        };
        if entry.billing != PowerBilling::OnDemand && !markets.contains_key(&number) {
            markets.insert(number, spot_prices(&client, &entry.instance_type, &entry.zones, now).await);
        }
        let (prices, price_problem) = match markets.get(&number) {
            Some(Ok(p)) => (p.clone(), None),
            Some(Err(e)) => (BTreeMap::new(), Some(e.as_str())),
            None => (BTreeMap::new(), None),
        };
        let mut tried: BTreeMap<PoolTarget, String> = BTreeMap::new();
        loop {
            let (fleet, up) = fleet_of(&instances, &catalogue);
            let choice = match choose(now, &policy, entry, shape, &catalogue, &prices, price_problem, fleet, &up, &tried) {
                Ok(c) => c,
                Err(why) => {
                    fail_node(slurm, node, &why, &mut failed).await;
                    break;
                }
            };
            let pool = &choice.pool;
            let tags = vec![
                (NODE_TAG.to_string(), node.clone()),
                (CLUSTER_TAG.to_string(), cluster.clone()),
                (BILLING_TAG.to_string(), pool.billing.label().to_string()),
                ("Name".to_string(), format!("{cluster}-{node}")),
            ];
            let spec = LaunchSpec {
                instance_type: pool.instance_type.clone(),
                zone: pool.zone.clone(),
                spot_max_price: ec2_capacity::spot_price(pool.billing, choice.max_price, shape.on_demand),
                count: 1,
                tags,
            };
            let image = AwsConfig { image_id: Some(entry.image.clone()), ..setup.aws.clone() };
            let launched = match aws::launch(&client, &image, &spec).await {
                Ok(mut launched) => launched.remove(0),
                Err(e) => {
                    let failure = ec2_capacity::launch_failure(&e);
                    if failure.backs_off() && tried.len() + 1 < MAX_ATTEMPTS {
                        // Another zone, or on-demand: the policy chooses again without this pool.
                        tried.insert(pool.clone(), format!("{} ({e})", failure.label()));
                        continue;
                    }
                    fail_node(slurm, node, &format!("{pool}: {e}"), &mut failed).await;
                    break;
                }
            };
            let max = spec.spot_max_price.map_or_else(|| "no max price".to_string(), |p| format!("max price {}", dollars(p)));
            let what = format!("{} {} {} in {}, {max}", launched.id, pool.instance_type, pool.billing.label(), pool.zone);
            let retried = if tried.is_empty() {
                String::new()
            } else {
                format!(" (after {})", tried.iter().map(|(p, why)| format!("{p}: {why}")).collect::<Vec<_>>().join("; "))
            };
            let (ip, host) = match address(&client, &launched.id).await {
                Ok(a) => a,
                Err(e) => {
                    let gone = aws::terminate_own(&client, &launched.id)
                        .await
                        .map_or_else(|t| format!("and terminating it failed: {t}"), |_| "terminated it".to_string());
                    fail_node(slurm, node, &format!("launched {what} but its address is unknown ({e}); {gone}"), &mut failed).await;
                    break;
                }
            };
            instances.push(NodeInstance {
                id: launched.id.clone(),
                node: node.clone(),
                instance_type: pool.instance_type.clone(),
                zone: pool.zone.clone(),
                billing: pool.billing,
                state: "pending".into(),
                private_ip: Some(ip.clone()),
                private_dns: Some(host.clone()),
            });
            match slurm.update_node(node, &[("nodeaddr", &ip), ("nodehostname", &host)]).await {
                Ok(_) => say(&format!("{node}: launched {what}: {}{retried}; Slurm: nodeaddr={ip} nodehostname={host}", choice.why)),
                Err(e) => {
                    // Slurm cannot reach an instance it has no address for: give it back.
                    let gone =
                        aws::terminate_own(&client, &launched.id).await.map_or_else(|t| format!("terminating it failed: {t}"), |_| "terminated it".to_string());
                    instances.retain(|i| i.id != launched.id);
                    fail_node(slurm, node, &format!("launched {what} but scontrol failed ({e}); {gone}"), &mut failed).await;
                }
            }
            break;
        }
    }
    Ok(failed)
}

async fn suspend(names: &[String], setup: &Setup<'_>) -> Result<Vec<String>, String> {
    let cluster = cluster_name(setup).await?;
    let client = aws::client(setup.aws).await;
    let instances = cluster_instances(&client, &cluster).await?;
    let mut failed = Vec::new();
    for node in names {
        let mine: Vec<&NodeInstance> = instances.iter().filter(|i| &i.node == node).collect();
        if mine.is_empty() {
            say(&format!("{node}: no instance of gpuroom's for it in cluster {cluster}; nothing to terminate"));
            continue;
        }
        for i in mine {
            match aws::terminate_own(&client, &i.id).await {
                Ok(()) => say(&format!("{node}: terminated {} ({} {} in {}, was {})", i.id, i.instance_type, i.billing.label(), i.zone, i.state)),
                Err(e) => {
                    say(&format!("{node}: could NOT terminate {}: {e}", i.id));
                    failed.push(node.clone());
                }
            }
        }
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::CapacityConfig;
    use crate::capacity::plan::FleetGpus;
    use crate::ckpt::CheckpointPolicy;
    use crate::domain::testkit::t;
    use crate::market::bid::BidPolicy;
    use crate::market::hazard::HazardConfig;
    use crate::sources::slurm::power::{PowerBilling, PowerNode};

    fn entry(billing: PowerBilling, zones: &[&str], max_price: Option<i64>) -> PowerNode {
        PowerNode {
            pattern: "cloud-*".into(),
            instance_type: "g4dn.xlarge".into(),
            image: "ami-1".into(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            billing,
            max_price: max_price.map(MicrosPerHour),
        }
    }

    fn policy(min_stable_share: f64) -> PowerPolicy {
        let capacity = CapacityConfig { min_stable_share, ..CapacityConfig::default() };
        PowerPolicy { capacity, hazard: HazardConfig::default(), checkpoint: CheckpointPolicy::default(), bids: BidPolicy::default(), degraded_bids: false }
    }

    fn prices(list: &[(&str, i64)]) -> BTreeMap<String, MicrosPerHour> {
        list.iter().map(|(z, p)| (z.to_string(), MicrosPerHour(*p))).collect()
    }

    fn pick(
        policy: &PowerPolicy,
        e: &PowerNode,
        market: &BTreeMap<String, MicrosPerHour>,
        fleet: FleetGpus,
        failed: &BTreeMap<PoolTarget, String>,
    ) -> Result<Choice, String> {
        let catalogue = Catalogue::default();
        let shape = catalogue.instance_type(&e.instance_type).unwrap().clone();
        choose(t(0), policy, e, &shape, &catalogue, market, None, fleet, &BTreeMap::new(), failed)
    }

    const NONE_FAILED: BTreeMap<PoolTarget, String> = BTreeMap::new();

    #[test]
    fn the_cheapest_pool_with_risk_priced_in_and_the_max_price_curve() {
        // g4dn.xlarge lists at $0.526/h; spot at $0.20 in b, $0.25 in a.
        let market = prices(&[("us-east-1a", 250_000), ("us-east-1b", 200_000)]);
        let c = pick(&policy(0.0), &entry(PowerBilling::Auto, &["us-east-1a", "us-east-1b"], None), &market, FleetGpus::default(), &NONE_FAILED).unwrap();
        assert_eq!((c.pool.billing, c.pool.zone.as_str()), (BillingMode::Spot, "us-east-1b"), "{c:?}");
        // A fresh launch asks the curve's start: 1.10 × the market.
        assert_eq!(c.max_price, Some(MicrosPerHour(220_000)));
        assert!(c.per_hour > 0.20 && c.per_hour < 0.526, "interruptions cost something: {}", c.per_hour);
        assert!(c.why.contains("spot at") && c.why.contains("market $0.200000/h"), "{}", c.why);
        // The entry's max_price caps the curve; a market at or above it shuts spot.
        let capped = pick(&policy(0.0), &entry(PowerBilling::Auto, &["us-east-1b"], Some(210_000)), &market, FleetGpus::default(), &NONE_FAILED).unwrap();
        assert_eq!(capped.max_price, Some(MicrosPerHour(210_000)));
        let shut = pick(&policy(0.0), &entry(PowerBilling::Auto, &["us-east-1b"], Some(150_000)), &market, FleetGpus::default(), &NONE_FAILED).unwrap();
        assert_eq!((shut.pool.billing, shut.max_price), (BillingMode::OnDemand, None));
        assert!(shut.why.contains("at or above max_price"), "{}", shut.why);
        let spot_only =
            pick(&policy(0.0), &entry(PowerBilling::Spot, &["us-east-1b"], Some(150_000)), &market, FleetGpus::default(), &NONE_FAILED).unwrap_err();
        assert!(spot_only.contains("at or above max_price $0.150000/h"), "{spot_only}");
        // A market at on-demand is never spot.
        let dear = prices(&[("us-east-1a", 600_000)]);
        assert_eq!(
            pick(&policy(0.0), &entry(PowerBilling::Auto, &["us-east-1a"], None), &dear, FleetGpus::default(), &NONE_FAILED).unwrap().pool.billing,
            BillingMode::OnDemand
        );
    }

    #[test]
    fn the_stable_floor_the_billing_asked_failures_and_the_account_limit() {
        let market = prices(&[("us-east-1a", 200_000)]);
        let auto = entry(PowerBilling::Auto, &["us-east-1a"], None);
        // An empty fleet is below a 20% floor: the first node is on-demand, and says why.
        let c = pick(&policy(0.2), &auto, &market, FleetGpus::default(), &NONE_FAILED).unwrap();
        assert_eq!((c.pool.billing, c.max_price), (BillingMode::OnDemand, None));
        assert!(c.why.contains("stable floor") && c.why.contains("0 of 0 GPUs"), "{}", c.why);
        // Four stable GPUs of four: a spot one keeps 80% stable.
        let held = FleetGpus { stable: 4, total: 4, elastic: 4 };
        assert_eq!(pick(&policy(0.2), &auto, &market, held, &NONE_FAILED).unwrap().pool.billing, BillingMode::Spot);
        // Spot asked for: spot, floor or not; on-demand asked for: on-demand, however cheap spot is.
        assert_eq!(
            pick(&policy(0.2), &entry(PowerBilling::Spot, &["us-east-1a"], None), &market, FleetGpus::default(), &NONE_FAILED).unwrap().pool.billing,
            BillingMode::Spot
        );
        let od = pick(&policy(0.0), &entry(PowerBilling::OnDemand, &["us-east-1a"], None), &market, FleetGpus::default(), &NONE_FAILED).unwrap();
        assert_eq!(od.pool.billing, BillingMode::OnDemand);
        assert!(od.why.contains("billing = \"on-demand\""), "{}", od.why);
        // A pool whose launch just failed is passed over: the other zone, then on-demand.
        let two = entry(PowerBilling::Auto, &["us-east-1a", "us-east-1b"], None);
        let market2 = prices(&[("us-east-1a", 200_000), ("us-east-1b", 210_000)]);
        let spot_a = PoolTarget { billing: BillingMode::Spot, instance_type: "g4dn.xlarge".into(), zone: "us-east-1a".into() };
        let mut failed = BTreeMap::from([(spot_a.clone(), "insufficient capacity".to_string())]);
        let next = pick(&policy(0.0), &two, &market2, FleetGpus::default(), &failed).unwrap();
        assert_eq!((next.pool.billing, next.pool.zone.as_str()), (BillingMode::Spot, "us-east-1b"));
        assert!(next.why.contains("launch failed: insufficient capacity"), "{}", next.why);
        failed.insert(PoolTarget { zone: "us-east-1b".into(), ..spot_a }, "insufficient capacity".into());
        assert_eq!(pick(&policy(0.0), &two, &market2, FleetGpus::default(), &failed).unwrap().pool.billing, BillingMode::OnDemand);
        // No spot price at all: on-demand for auto, an error naming it for spot.
        let none = BTreeMap::new();
        assert_eq!(pick(&policy(0.0), &auto, &none, FleetGpus::default(), &NONE_FAILED).unwrap().pool.billing, BillingMode::OnDemand);
        assert!(
            pick(&policy(0.0), &entry(PowerBilling::Spot, &["us-east-1a"], None), &none, FleetGpus::default(), &NONE_FAILED)
                .unwrap_err()
                .contains("no spot price")
        );
        // The account's GPU limit.
        let mut limited = policy(0.0);
        limited.capacity.account_gpu_limit = 4;
        let full = FleetGpus { stable: 4, total: 4, elastic: 4 };
        assert!(pick(&limited, &auto, &market, full, &NONE_FAILED).unwrap_err().contains("account_gpu_limit = 4"));
    }

    #[test]
    fn the_fleet_counts_live_instances_by_billing() {
        let i = |id: &str, billing: BillingMode, state: &str| NodeInstance {
            id: id.into(),
            node: id.into(),
            instance_type: "g4dn.12xlarge".into(),
            zone: "z".into(),
            billing,
            state: state.into(),
            private_ip: None,
            private_dns: None,
        };
        let (fleet, up) = fleet_of(
            &[i("a", BillingMode::OnDemand, "running"), i("b", BillingMode::Spot, "pending"), i("c", BillingMode::Spot, "stopped")],
            &Catalogue::default(),
        );
        assert_eq!(fleet, FleetGpus { stable: 4, total: 8, elastic: 8 });
        assert_eq!(up.values().sum::<u32>(), 2);
    }

    #[test]
    fn reasons_are_one_plain_bounded_line() {
        assert_eq!(reason_text("a\nb\u{1b}[31m"), "a b[31m");
        assert_eq!(reason_text(&"x".repeat(300)).chars().count(), 241);
    }
}
