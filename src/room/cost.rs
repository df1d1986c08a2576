//! The `Room`'s cost accrual: every up node's price, charged to the jobs on
//! its GPUs (by memory share) or to idle, into the open hour of the ledger;
//! closing an hour turns it into lines. A node is charged when it is about
//! to change and at every settle point (see `accrue_until`), not on every
//! event, so an event's cost does not grow with the fleet.
//! The arithmetic lives in `cost/`; this is where it meets the cluster.
//!
//! Owns the money side of the room (`Costs`); reads the fleet and the
//! market it is handed, and writes only what jobs cost.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fleet::Fleet;
use crate::cost::budget::{Approval, BudgetPolicy};
use crate::cost::ledger::{LedgerLine, LineKind, OpenPeriod, add_to};
use crate::cost::{Accrual, Books, split_exact};
use crate::domain::cluster::{BillingMode, Node};
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::Tags;
use crate::domain::units::{At, Micros, MicrosPerHour};
use crate::market::Market;

/// The money: the books, the open charge period and how far each node is charged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    pub books: Books,
    /// The ledger's open charge period.
    #[serde(default)]
    pub period: OpenPeriod,
    /// One accrual per GPU (by index on its node): each GPU's share of its
    /// instance's price, with its own remainder.
    pub accruals: BTreeMap<NodeId, Vec<Accrual>>,
    /// Every up node is charged up to here (see `accrue_until`)…
    #[serde(default)]
    pub settled_at: Option<At>,
    /// …or up to here, for the nodes charged since, before they changed.
    #[serde(default)]
    pub accrued_to: BTreeMap<NodeId, At>,
    /// The fleet's hourly cost bound as of the last settle (budget checks).
    #[serde(default)]
    pub burn_bound: MicrosPerHour,
    /// The GPUs up since the last settle, counted with `burn_bound`: each may
    /// release one carried micro-unit.
    #[serde(default)]
    pub bound_gpus: i64,
    /// Who pays for the Slurm jobs holding GPUs (see `room::slurm_fleet`):
    /// kept until the charge period that saw them closes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slurm_tags: BTreeMap<JobId, Tags>,
}

/// The hourly price a node costs now: its contract, or the spot market.
pub fn node_rate(market: &Market, node: &Node) -> Option<MicrosPerHour> {
    rate_of(market, node)
}

impl Costs {
    /// A node came up at `at`: it costs from now; until the next settle, at most its bound.
    pub fn node_up(&mut self, at: At, fleet: &Fleet, market: &Market, id: NodeId, gpus: u8) {
        self.accrued_to.insert(id, at);
        self.burn_bound = MicrosPerHour(self.burn_bound.0.saturating_add(rate_bound(fleet, market, id)));
        self.bound_gpus += i64::from(gpus);
    }

    /// Moves the clock's money to `to`: attained service for the running jobs,
    /// and every hour that closes on the way settled and turned into ledger
    /// lines (returned). Nodes are not charged here otherwise: a node's price
    /// is constant while nothing about it changes, so it is charged lazily
    /// (`settle_node`) just before it changes, and every node at once
    /// (`settle_all`) at hour ends, price changes, ticks, operator actions and
    /// when a budget level could move. Totals are the same as charging on
    /// every event; this keeps an event's cost independent of fleet size.
    pub fn accrue_until(&mut self, now: Option<At>, to: At, fleet: &mut Fleet, market: &Market, storage_per_gib_month: Micros) -> Vec<LedgerLine> {
        let mut closed = Vec::new();
        let Some(mut from) = now else { return closed };
        if self.period.start.is_none() {
            self.period.start = Some(from);
        }
        if self.settled_at.is_none() {
            // A room restored from a snapshot of before lazy charging was
            // charged up to its clock.
            self.settled_at = Some(from);
        }
        while from < to {
            let next_hour = crate::domain::units::start_of_next_hour(from);
            if next_hour > to {
                break;
            }
            self.settle_all(next_hour, fleet, market);
            closed.extend(self.close_period(next_hour, fleet, storage_per_gib_month));
            from = next_hour;
        }
        closed
    }

    /// Charges one node up to the room's clock, before something about it
    /// (its allocations, its state) changes.
    pub fn settle_node(&mut self, now: Option<At>, fleet: &mut Fleet, market: &Market, id: NodeId) {
        let Some(at) = now else { return };
        let from = self.accrued_to.get(&id).copied().or(self.settled_at);
        if let Some(from) = from
            && from < at
            && fleet.nodes.get(&id).is_some_and(Node::is_up)
        {
            self.charge_node(fleet, market, id, from, at);
        }
        self.accrued_to.insert(id, at);
    }

    /// Charges every up node up to `at`, and measures the fleet's burn bound
    /// for `budgets_may_move`.
    pub fn settle_all(&mut self, at: At, fleet: &mut Fleet, market: &Market) {
        let ids: Vec<NodeId> = fleet.nodes.iter().filter(|(_, n)| n.is_up()).map(|(id, _)| *id).collect();
        let (mut bound, mut gpus) = (0i64, 0i64);
        for id in ids {
            gpus += fleet.nodes.get(&id).map_or(0, |n| i64::from(n.spec.gpu_count));
            let from = self.accrued_to.get(&id).copied().or(self.settled_at);
            if let Some(from) = from
                && from < at
            {
                self.charge_node(fleet, market, id, from, at);
            }
            bound = bound.saturating_add(rate_bound(fleet, market, id));
        }
        self.accrued_to.clear();
        self.settled_at = Some(at);
        self.burn_bound = MicrosPerHour(bound);
        self.bound_gpus = gpus;
    }

    /// Whether the money not yet charged could move some tenant's budget
    /// level: its spend plus an upper bound on what the fleet cost since the
    /// last settle lands in another level than its spend alone. Levels only
    /// rise with spend, so when this is false the stale figures give the
    /// levels the exact ones would.
    pub fn budgets_may_move(&self, at: At, fleet: &Fleet, approvals: &BTreeMap<TenantId, Approval>, policy: &BudgetPolicy) -> bool {
        let Some(since) = self.settled_at else { return false };
        let millis = (at - since).num_milliseconds().max(0);
        if millis == 0 || fleet.tenants.is_empty() {
            return false;
        }
        // Each GPU's carried remainder can add one micro-unit.
        let bound = Micros(((i128::from(self.burn_bound.0) * i128::from(millis) + 3_599_999) / 3_600_000) as i64 + self.bound_gpus + 1);
        fleet.tenants.iter().any(|(id, spec)| {
            let spent = self.books.month_to_date(id, at);
            let approval = approvals.get(id);
            policy.level(spec.monthly_budget, spent, approval, at) != policy.level(spec.monthly_budget, spent + bound, approval, at)
        })
    }

    /// Ends the open charge period at `end`: its lines, attributed, and a new
    /// period from `end`. Storage for the hour is priced here.
    pub fn close_period(&mut self, end: At, fleet: &mut Fleet, storage_per_gib_month: Micros) -> Vec<LedgerLine> {
        let start = self.period.start.unwrap_or(end);
        self.charge_storage(start, end, fleet, storage_per_gib_month);
        let period = std::mem::take(&mut self.period);
        self.period.start = Some(end);
        let mut lines = Vec::with_capacity(period.services.len() + 8 * period.instance.len());
        for ((node_id, unit, job), open) in period.lines() {
            let Some(node) = fleet.nodes.get(&node_id) else { continue };
            lines.push(LedgerLine {
                start,
                end,
                kind: if job.is_some() { LineKind::Compute } else { LineKind::Idle },
                node: node_id,
                node_name: node.spec.name.clone(),
                unit: Some(unit),
                job,
                tags: job.and_then(|id| fleet.jobs.get(&id).map(|j| j.spec.tags.clone()).or_else(|| tags_of_slurm_job(&self.slurm_tags, id).cloned())),
                billing: node.spec.billing,
                instance_type: node.spec.instance_type.clone(),
                zone: node.spec.zone.clone(),
                amount: open.amount,
                list_amount: Micros(open.list.round() as i64),
                quantity: open.gpu_ms,
            });
        }
        lines.extend(period.services.into_iter().map(|mut l| {
            l.start = start;
            l.end = end;
            l
        }));
        if !self.slurm_tags.is_empty() {
            let holding: std::collections::BTreeSet<JobId> =
                fleet.nodes.values().flat_map(|n| n.gpus.iter().filter_map(|g| g.slurm_job.map(JobId::slurm))).collect();
            self.slurm_tags.retain(|id, _| holding.contains(id));
        }
        lines
    }

    /// A service line (storage, checkpoint I/O, network) for `job` in the
    /// open period, charged to its tenant.
    pub fn charge_service(&mut self, at: At, fleet: &mut Fleet, job_id: JobId, kind: LineKind, bytes: u64, amount: Micros) {
        if amount.0 <= 0 {
            return;
        }
        let Some(job) = fleet.jobs.get_mut(&job_id) else { return };
        job.service_cost += amount;
        let tags = job.spec.tags.clone();
        let node = job.placement.as_ref().and_then(|p| fleet.nodes.get(&p.node));
        let (node_id, node_name, billing, instance_type, zone) = match node {
            Some(n) => (n.spec.id, n.spec.name.clone(), n.spec.billing, n.spec.instance_type.clone(), n.spec.zone.clone()),
            None => (NodeId(0), String::new(), BillingMode::OnDemand, String::new(), String::new()),
        };
        self.books.charge_tenant(&tags.tenant, at, amount);
        self.books.services += amount;
        self.period.services.push(LedgerLine {
            start: at,
            end: at,
            kind,
            node: node_id,
            node_name,
            unit: None,
            job: Some(job_id),
            tags: Some(tags),
            billing,
            instance_type,
            zone,
            amount,
            list_amount: amount,
            quantity: bytes as i64,
        });
    }

    /// Checkpoint storage held over `[start, end)`: each live job's full
    /// state, once it has saved, at the per-GiB-month price.
    fn charge_storage(&mut self, start: At, end: At, fleet: &mut Fleet, price: Micros) {
        let millis = (end - start).num_milliseconds();
        if price.0 <= 0 || millis <= 0 {
            return;
        }
        const MONTH_MS: i128 = 730 * 3_600_000;
        let held: Vec<(JobId, u64)> =
            fleet.active_jobs().filter(|j| j.checkpoints > 0).map(|j| (j.spec.id, u64::from(j.spec.checkpoint_size.0) << 20)).collect();
        for (id, bytes) in held {
            let per_month = crate::cost::ledger::per_gib(bytes, price);
            let amount = Micros((i128::from(per_month.0) * i128::from(millis) / MONTH_MS) as i64);
            self.charge_service(start, fleet, id, LineKind::Storage, bytes, amount);
        }
    }

    /// Charges one node over `[from, to)` (within one hour) at its current
    /// state: its GPUs' shares to the jobs on them by memory, the rest idle.
    fn charge_node(&mut self, fleet: &mut Fleet, market: &Market, id: NodeId, from: At, to: At) {
        let millis = (to - from).num_milliseconds();
        if millis <= 0 {
            return;
        }
        let Costs { accruals, period, books, slurm_tags, .. } = self;
        let Fleet { nodes, jobs, .. } = fleet;
        let Some(node) = nodes.get(&id) else { return };
        let mut charges: Vec<(JobId, i64)> = Vec::new();
        let mut weights: Vec<u64> = Vec::new();
        {
            let mode = node.spec.billing;
            let Some(rate) = rate_of(market, node) else {
                books.unpriced_ms += millis;
                return;
            };
            let gpu_count = i64::from(node.spec.gpu_count);
            let unit_accruals = accruals.entry(id).or_default();
            if unit_accruals.len() < node.gpus.len() {
                unit_accruals.resize(node.gpus.len(), Accrual::default());
            }
            let lines = period.instance.entry(id).or_default();
            let list_rate = node.spec.on_demand_price.0 as f64;
            // Each unit's share goes to the jobs on it by memory share; the rest is idle.
            charges.clear();
            let mut idle = 0i64;
            // GPU-milliseconds busy, a slice counting as its fraction of a GPU.
            let mut busy_ms: i128 = 0;
            for (gpu, accrual) in node.gpus.iter().zip(unit_accruals.iter_mut()) {
                let (num, den) = node.spec.share_of(gpu.memory, gpu.mig);
                let share = accrual.accrue_fraction(rate, millis, num, den).0;
                // The unit's share of GPU time and of the list price over the span.
                let unit_ms = (i128::from(millis) * i128::from(num) * i128::from(gpu_count) / i128::from(den.max(1))) as i64;
                let unit_list = list_rate * millis as f64 * num as f64 / den.max(1) as f64 / 3_600_000.0;
                if let Some(slurm) = gpu.slurm_job.filter(|_| gpu.allocations.is_empty()) {
                    // A Slurm job holds the whole GPU (GRES are not shared by memory).
                    let job = JobId::slurm(slurm);
                    busy_ms += i128::from(unit_ms);
                    charges.push((job, share));
                    add_to(lines, gpu.index, Some(job), Micros(share), unit_list, unit_ms);
                    continue;
                }
                if gpu.allocations.is_empty() {
                    idle += share;
                    add_to(lines, gpu.index, None, Micros(share), unit_list, unit_ms);
                    continue;
                }
                busy_ms += i128::from(unit_ms);
                weights.clear();
                weights.extend(gpu.allocations.iter().map(|a| u64::from(a.size.0)));
                let free = u64::from(gpu.memory.0).saturating_sub(weights.iter().sum());
                let exclusive = gpu.has_exclusive();
                weights.push(if exclusive { 0 } else { free });
                let total_weight = weights.iter().sum::<u64>().max(1) as f64;
                let parts = split_exact(share, &weights);
                for ((alloc, part), weight) in gpu.allocations.iter().zip(&parts).zip(&weights) {
                    charges.push((alloc.job, *part));
                    let w = *weight as f64 / total_weight;
                    add_to(lines, gpu.index, Some(alloc.job), Micros(*part), unit_list * w, (unit_ms as f64 * w).round() as i64);
                }
                let idle_part = parts.last().copied().unwrap_or(0);
                idle += idle_part;
                if idle_part > 0 || !exclusive && free > 0 {
                    let w = weights.last().copied().unwrap_or(0) as f64 / total_weight;
                    add_to(lines, gpu.index, None, Micros(idle_part), unit_list * w, (unit_ms as f64 * w).round() as i64);
                }
            }
            let allocated: i64 = charges.iter().map(|(_, c)| c).sum();
            books.charge_mode(mode, Micros(allocated), Micros(idle));
            books.gpu_ms_allocated[mode.index()] += busy_ms as i64;
            books.gpu_ms_idle[mode.index()] += gpu_count * millis - busy_ms as i64;
            for &(job_id, part) in &charges {
                if let Some(job) = jobs.get_mut(&job_id) {
                    job.cost += Micros(part);
                    books.charge_tenant(&job.spec.tags.tenant, from, Micros(part));
                } else if let Some(tags) = tags_of_slurm_job(slurm_tags, job_id) {
                    books.charge_tenant(&tags.tenant, from, Micros(part));
                }
            }
        }
    }
}

/// The most a node can cost an hour until the next `settle_all` (which
/// every price change causes): its rate, or its list price if higher.
pub fn rate_bound(fleet: &Fleet, market: &Market, id: NodeId) -> i64 {
    fleet.nodes.get(&id).map_or(0, |node| rate_of(market, node).map_or(0, |r| r.0).max(node.spec.on_demand_price.0).max(0))
}

/// A node's hourly price: its contract, or its pool's spot price. The pool
/// is found by a scan of the few pools, as building a `PoolKey` would
/// allocate, and this runs for every node at every settle.
fn rate_of(market: &Market, node: &Node) -> Option<MicrosPerHour> {
    match node.spec.billing {
        BillingMode::Spot => {
            market.pools.iter().find(|(key, _)| key.zone == node.spec.zone && key.instance_type == node.spec.instance_type).and_then(|(_, pool)| pool.price)
        }
        BillingMode::OnDemand | BillingMode::Reserved => Some(node.spec.contract_price),
    }
}

/// The attribution of a Slurm job's GPU time, if it is one (`room::slurm_fleet` keeps them).
fn tags_of_slurm_job(tags: &BTreeMap<JobId, Tags>, job: JobId) -> Option<&Tags> {
    job.slurm_id().and_then(|_| tags.get(&job))
}
