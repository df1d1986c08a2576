//! The `Room`'s cost accrual: every up node's price, from the last event to
//! this one, charged to the jobs on its GPUs (by memory share) or to idle,
//! into the open hour of the ledger; closing an hour turns it into lines.
//! The arithmetic lives in `cost/`; this is where it meets the cluster.

use super::cluster::{BillingMode, Node};
use super::ids::{JobId, NodeId};
use super::job::Phase;
use super::room::Room;
use super::units::{At, Micros, MicrosPerHour};
use crate::cost::ledger::{LedgerLine, LineKind};
use crate::cost::{split_exact, Accrual};

impl Room {
    /// The hourly price a node costs now: its contract, or the spot market.
    pub(crate) fn node_rate(&self, node: &Node) -> Option<MicrosPerHour> {
        match node.spec.billing {
            BillingMode::Spot => self.market.price(&node.spec.pool()),
            BillingMode::OnDemand | BillingMode::Reserved => Some(node.spec.contract_price),
        }
    }

    /// Charges every up node from the last event to `to`, split at month starts
    /// so that month-to-date figures are exact, and adds attained service to
    /// the running jobs.
    /// Returns the ledger lines of every hour that closed on the way.
    pub(crate) fn accrue_until(&mut self, to: At) -> Vec<LedgerLine> {
        let mut closed = Vec::new();
        let Some(mut from) = self.now else { return closed };
        if self.period.start.is_none() {
            self.period.start = Some(from);
        }
        while from < to {
            let next_hour = super::units::start_of_next_hour(from);
            let end = super::units::start_of_next_month(from).min(next_hour).min(to);
            self.accrue_span(from, end);
            if end == next_hour {
                closed.extend(self.close_period(end));
            }
            from = end;
        }
        closed
    }

    /// Ends the open charge period at `end`: its lines, attributed, and a new
    /// period from `end`. Storage for the hour is priced here.
    pub(crate) fn close_period(&mut self, end: At) -> Vec<LedgerLine> {
        let start = self.period.start.unwrap_or(end);
        self.charge_storage(start, end);
        let period = std::mem::take(&mut self.period);
        self.period.start = Some(end);
        let mut lines = Vec::with_capacity(period.services.len() + 8 * period.instance.len());
        for ((node_id, unit, job), open) in period.lines() {
            let Some(node) = self.nodes.get(&node_id) else { continue };
            lines.push(LedgerLine {
                start,
                end,
                kind: if job.is_some() { LineKind::Compute } else { LineKind::Idle },
                node: node_id,
                node_name: node.spec.name.clone(),
                unit: Some(unit),
                job,
                tags: job.and_then(|id| self.jobs.get(&id)).map(|j| j.spec.tags.clone()),
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
        lines
    }

    /// A service line (storage, checkpoint I/O, network) for `job` in the
    /// open period, charged to its tenant.
    pub(crate) fn charge_service(&mut self, at: At, job_id: JobId, kind: LineKind, bytes: u64, amount: Micros) {
        if amount.0 <= 0 {
            return;
        }
        let Some(job) = self.jobs.get_mut(&job_id) else { return };
        job.service_cost += amount;
        let tags = job.spec.tags.clone();
        let node = job.placement.as_ref().and_then(|p| self.nodes.get(&p.node));
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
    fn charge_storage(&mut self, start: At, end: At) {
        let price = self.config.cost.storage_per_gib_month;
        let millis = (end - start).num_milliseconds();
        if price.0 <= 0 || millis <= 0 {
            return;
        }
        const MONTH_MS: i128 = 730 * 3_600_000;
        let held: Vec<(JobId, u64)> = self
            .active
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|j| j.checkpoints > 0)
            .map(|j| (j.spec.id, u64::from(j.spec.checkpoint_size.0) << 20))
            .collect();
        for (id, bytes) in held {
            let per_month = crate::cost::ledger::per_gib(bytes, price);
            let amount = Micros((i128::from(per_month.0) * i128::from(millis) / MONTH_MS) as i64);
            self.charge_service(start, id, LineKind::Storage, bytes, amount);
        }
    }

    fn accrue_span(&mut self, from: At, to: At) {
        let millis = (to - from).num_milliseconds();
        if millis <= 0 {
            return;
        }
        for id in &self.holding {
            if let Some(job) = self.jobs.get_mut(id)
                && job.phase() == Phase::Running
            {
                job.service_gpu_ms += i64::from(job.spec.gpus) * millis;
            }
        }
        let ids: Vec<NodeId> = self.nodes.iter().filter(|(_, n)| n.is_up()).map(|(id, _)| *id).collect();
        for id in ids {
            let node = &self.nodes[&id];
            let mode = node.spec.billing;
            let Some(rate) = self.node_rate(node) else {
                self.books.unpriced_ms += millis;
                continue;
            };
            let gpu_count = i64::from(node.spec.gpu_count);
            let shares: Vec<(u64, u64)> = node.gpus.iter().map(|g| node.spec.share_of(g.memory, g.mig)).collect();
            let accruals = self.accruals.entry(id).or_default();
            accruals.resize(shares.len().max(accruals.len()), Accrual::default());
            let per_unit: Vec<(i64, (u64, u64))> = shares
                .into_iter()
                .zip(accruals.iter_mut())
                .map(|((num, den), accrual)| (accrual.accrue_fraction(rate, millis, num, den).0, (num, den)))
                .collect();
            let node = &self.nodes[&id];
            let list_rate = node.spec.on_demand_price.0 as f64;
            // Each unit's share goes to the jobs on it by memory share; the rest is idle.
            let mut charges: Vec<(JobId, i64)> = Vec::new();
            let mut idle = 0i64;
            // GPU-milliseconds busy, a slice counting as its fraction of a GPU.
            let mut busy_ms: i128 = 0;
            for (gpu, (share, (num, den))) in node.gpus.iter().zip(per_unit) {
                // The unit's share of GPU time and of the list price over the span.
                let unit_ms = (i128::from(millis) * i128::from(num) * i128::from(gpu_count) / i128::from(den.max(1))) as i64;
                let unit_list = list_rate * millis as f64 * num as f64 / den.max(1) as f64 / 3_600_000.0;
                if gpu.allocations.is_empty() {
                    idle += share;
                    self.period.add((id, gpu.index, None), Micros(share), unit_list, unit_ms);
                    continue;
                }
                busy_ms += i128::from(unit_ms);
                let mut weights: Vec<u64> = gpu.allocations.iter().map(|a| u64::from(a.size.0)).collect();
                let free = u64::from(gpu.memory.0).saturating_sub(weights.iter().sum());
                let exclusive = gpu.has_exclusive();
                weights.push(if exclusive { 0 } else { free });
                let total_weight = weights.iter().sum::<u64>().max(1) as f64;
                let parts = split_exact(share, &weights);
                for ((alloc, part), weight) in gpu.allocations.iter().zip(&parts).zip(&weights) {
                    charges.push((alloc.job, *part));
                    let w = *weight as f64 / total_weight;
                    self.period.add((id, gpu.index, Some(alloc.job)), Micros(*part), unit_list * w, (unit_ms as f64 * w).round() as i64);
                }
                let idle_part = parts.last().copied().unwrap_or(0);
                idle += idle_part;
                if idle_part > 0 || !exclusive && free > 0 {
                    let w = weights.last().copied().unwrap_or(0) as f64 / total_weight;
                    self.period.add((id, gpu.index, None), Micros(idle_part), unit_list * w, (unit_ms as f64 * w).round() as i64);
                }
            }
            let allocated: i64 = charges.iter().map(|(_, c)| c).sum();
            self.books.charge_mode(mode, Micros(allocated), Micros(idle));
            self.books.gpu_ms_allocated[mode.index()] += busy_ms as i64;
            self.books.gpu_ms_idle[mode.index()] += gpu_count * millis - busy_ms as i64;
            for (job_id, part) in charges {
                if let Some(job) = self.jobs.get_mut(&job_id) {
                    job.cost += Micros(part);
                    let tenant = job.spec.tags.tenant.clone();
                    self.books.charge_tenant(&tenant, from, Micros(part));
                }
            }
        }
    }
}
