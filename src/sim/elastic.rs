//! The simulated cloud's side of elastic capacity: it carries out the room's
//! `Effect::Launch` and `Effect::Release` the way EC2 would.
//!
//! * A spot launch gets instances only where the zone's real availability
//!   trace says one could be had at that time (`fixtures/spot-traces/
//!   availability/`, a V100 launch tried every 195 s for 45 days; zones
//!   without a trace always have capacity), and only while the market is at
//!   or under the max price asked. Otherwise the whole launch fails, as
//!   RunInstances does, with `InsufficientCapacity` or `PriceAboveMax`.
//! * An instance exists (and is billed) a second after the call
//!   (`Launched`), and takes work after its pool's boot time (`NodeUp`).
//!   A spot one then lives its pool's preemption trace; lost, it is gone.
//! * A release terminates the instance a second after the call (`Released`).

use super::executor::after;
use super::{Pending, Simulation, SpotNode, SpotStep};
use crate::domain::capacity::{LaunchFailure, LaunchRequest};
use crate::domain::cluster::BillingMode;
use crate::domain::event::Event;
use crate::domain::ids::NodeId;
use crate::domain::units::At;

/// The API's answer time: the instance exists this long after the call.
const API_SECS: f64 = 1.0;

impl Simulation {
    pub(super) fn launch(&mut self, at: At, request: &LaunchRequest) {
        let answered = after(at, API_SECS);
        let fail = |failure: LaunchFailure, message: String| Event::LaunchFailed { request: request.id, count: request.count, failure, message };
        let Some(pool) = self.pools.get(&request.pool).cloned() else {
            self.schedule(answered, Pending::Emit(fail(LaunchFailure::Other, format!("no pool {} in this cloud", request.pool))));
            return;
        };
        if pool.node.billing == BillingMode::Spot {
            let key = pool.node.pool();
            let market = self.market.get(&key).copied();
            let max = request.max_price.unwrap_or(pool.node.on_demand_price);
            if let Some(market) = market
                && market > max
            {
                self.stats.launch_refusals += 1;
                self.schedule(answered, Pending::Emit(fail(LaunchFailure::PriceAboveMax, format!("spot price {market} is above the max price {max}"))));
                return;
            }
            let obtainable = self.availability.get(&key.zone).is_none_or(|a| a.obtainable(self.config.start, at));
            if !obtainable {
                self.stats.launch_refusals += 1;
                let text = format!("InsufficientInstanceCapacity: no {} spot capacity in {} now", key.instance_type, key.zone);
                self.schedule(answered, Pending::Emit(fail(LaunchFailure::InsufficientCapacity, text)));
                return;
            }
        }
        for _ in 0..request.count {
            let id = NodeId(self.next_node);
            self.next_node += 1;
            let mut spec = pool.node.clone();
            spec.id = id;
            spec.name = format!("e{}", id.0);
            if spec.billing == BillingMode::Spot {
                spec.max_price = Some(request.max_price.unwrap_or(spec.on_demand_price));
            }
            let life = if spec.billing == BillingMode::Spot { self.pool_lives.get(&spec.pool()).cloned() } else { None };
            self.nodes.insert(id, SpotNode { spec: spec.clone(), life, up: false, draining: false, epoch: 0, priced_out: false, elastic: true });
            self.executor.set_speed(id, pool.speed);
            self.stats.launched += 1;
            self.schedule(answered, Pending::Emit(Event::Launched { request: request.id, spec }));
            self.schedule(after(at, API_SECS + pool.boot.0 as f64), Pending::Spot { node: id, epoch: 0, what: SpotStep::Ready });
        }
    }

    pub(super) fn release(&mut self, at: At, id: NodeId) {
        let Some(node) = self.nodes.get_mut(&id) else { return };
        if !node.elastic {
            return;
        }
        node.up = false;
        node.draining = false;
        // Steps planned for its old life (a reclaim, the end of its boot) no longer apply.
        node.epoch += 1;
        self.executor.node_lost(id);
        self.stats.released += 1;
        self.schedule(after(at, API_SECS), Pending::Emit(Event::Released { node: id }));
    }
}
