//! Scale down: which idle nodes to give back.
//!
//! A node the room bought is given back once it has held no job for the
//! idle time, longest idle first, as long as its pool keeps its warm
//! minimum. Reserved nodes and nodes configured by hand are never given back;
//! nor is a node in a pool the same plan is buying in (that would be paying
//! twice for the same boot).

use std::collections::BTreeMap;

use crate::domain::capacity::PoolSpec;
use crate::domain::cluster::BillingMode;
use crate::domain::ids::NodeId;
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, Secs};

use super::CapacityConfig;

/// A node as the release rule sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeNow {
    pub id: NodeId,
    pub pool: PoolTarget,
    /// Bought by the room (only those are given back).
    pub elastic: bool,
    /// Up and taking work (not booting, draining or retiring).
    pub takes_work: bool,
    /// Since when it has held no job; `None` while it holds one.
    pub idle_since: Option<At>,
}

/// Nodes to give back now, with how long each has been idle.
pub fn scale_down(now: At, config: &CapacityConfig, nodes: &[NodeNow], pools: &[PoolSpec], buying_in: &[PoolTarget]) -> Vec<(NodeId, Secs)> {
    let mut in_pool: BTreeMap<&PoolTarget, u32> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.elastic) {
        *in_pool.entry(&n.pool).or_default() += 1;
    }
    let mut idle: Vec<(&NodeNow, At)> = nodes
        .iter()
        .filter(|n| n.elastic && n.takes_work && n.pool.billing != BillingMode::Reserved && !buying_in.contains(&n.pool))
        .filter_map(|n| n.idle_since.filter(|since| now - *since >= config.idle_release.delta()).map(|since| (n, since)))
        .collect();
    idle.sort_by_key(|(n, since)| (*since, n.id));
    let mut out = Vec::new();
    for (node, since) in idle {
        let warm = pools.iter().find(|p| p.target() == node.pool).map_or(0, |p| p.warm_min);
        let count = in_pool.entry(&node.pool).or_default();
        if *count > warm {
            *count -= 1;
            out.push((node.id, Secs((now - since).num_seconds())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::{node_spec, t};

    fn target(billing: BillingMode) -> PoolTarget {
        PoolTarget { billing, instance_type: "p3.2xlarge".into(), zone: "z1".into() }
    }

    fn node(id: u32, billing: BillingMode, idle_since: Option<i64>) -> NodeNow {
        NodeNow { id: NodeId(id), pool: target(billing), elastic: true, takes_work: true, idle_since: idle_since.map(t) }
    }

    fn pool(billing: BillingMode, warm_min: u32) -> PoolSpec {
        let mut node = node_spec(0, billing, 1);
        node.instance_type = "p3.2xlarge".into();
        node.zone = "z1".into();
        PoolSpec { node, speed: 1.0, max_nodes: 10, warm_min, boot: Secs(90) }
    }

    #[test]
    fn idle_past_the_time_is_given_back_longest_idle_first_keeping_the_warm_minimum() {
        let cfg = CapacityConfig { idle_release: Secs(300), ..CapacityConfig::default() };
        let nodes = [node(1, BillingMode::OnDemand, Some(0)), node(2, BillingMode::OnDemand, Some(100)), node(3, BillingMode::OnDemand, None)];
        let now = t(100 + cfg.idle_release.0);
        let pools = [pool(BillingMode::OnDemand, 0)];
        assert_eq!(scale_down(now, &cfg, &nodes, &pools, &[]), [(NodeId(1), Secs(400)), (NodeId(2), Secs(300))]);
        // A shorter idle never releases.
        assert_eq!(scale_down(t(299), &cfg, &nodes, &pools, &[]), []);
        // The warm minimum of two keeps two of the three.
        let warm = [pool(BillingMode::OnDemand, 2)];
        assert_eq!(scale_down(now, &cfg, &nodes, &warm, &[]), [(NodeId(1), Secs(400))]);
    }

    #[test]
    fn never_a_node_with_a_job_a_reserved_or_hand_configured_one_or_one_in_a_pool_being_bought() {
        let cfg = CapacityConfig::default();
        let now = t(10_000);
        let busy = node(1, BillingMode::OnDemand, None);
        let reserved = node(2, BillingMode::Reserved, Some(0));
        let configured = NodeNow { elastic: false, ..node(3, BillingMode::OnDemand, Some(0)) };
        let booting = NodeNow { takes_work: false, ..node(4, BillingMode::OnDemand, Some(0)) };
        let pools = [pool(BillingMode::OnDemand, 0)];
        assert_eq!(scale_down(now, &cfg, &[busy, reserved, configured, booting], &pools, &[]), []);
        let idle = node(5, BillingMode::Spot, Some(0));
        assert_eq!(scale_down(now, &cfg, std::slice::from_ref(&idle), &pools, &[target(BillingMode::Spot)]), []);
        assert_eq!(scale_down(now, &cfg, &[idle], &pools, &[]).len(), 1);
    }
}
