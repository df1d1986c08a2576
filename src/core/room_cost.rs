//! The `Room`'s cost accrual: every up node's price, from the last event to
//! this one, charged to the jobs on its GPUs (by memory share) or to idle.
//! The arithmetic lives in `cost/`; this is where it meets the cluster.

use super::cluster::{BillingMode, Node};
use super::ids::{JobId, NodeId};
use super::job::Phase;
use super::room::Room;
use super::units::{At, Micros, MicrosPerHour};
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
    pub(crate) fn accrue_until(&mut self, to: At) {
        let Some(mut from) = self.now else { return };
        while from < to {
            let next_month = super::units::start_of_next_month(from);
            let end = next_month.min(to);
            self.accrue_span(from, end);
            from = end;
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
            // Each unit's share goes to the jobs on it by memory share; the rest is idle.
            let mut charges: Vec<(JobId, i64)> = Vec::new();
            let mut idle = 0i64;
            // GPU-milliseconds busy, a slice counting as its fraction of a GPU.
            let mut busy_ms: i128 = 0;
            for (gpu, (share, (num, den))) in node.gpus.iter().zip(per_unit) {
                if gpu.allocations.is_empty() {
                    idle += share;
                    continue;
                }
                busy_ms += i128::from(millis) * i128::from(num) * i128::from(gpu_count) / i128::from(den.max(1));
                let mut weights: Vec<u64> = gpu.allocations.iter().map(|a| u64::from(a.size.0)).collect();
                let free = u64::from(gpu.memory.0).saturating_sub(weights.iter().sum());
                let exclusive = gpu.has_exclusive();
                weights.push(if exclusive { 0 } else { free });
                let parts = split_exact(share, &weights);
                for (alloc, part) in gpu.allocations.iter().zip(&parts) {
                    charges.push((alloc.job, *part));
                }
                idle += parts.last().copied().unwrap_or(0);
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
