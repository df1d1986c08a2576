//! The ledger's lines: what one GPU (or one job's storage, I/O, network)
//! cost over one charge period, with everything attribution needs (tenant,
//! project, environment, model; node and GPU; billing mode).
//!
//! The `Room` accrues per millisecond and closes a period every hour; the
//! closed lines leave it as an effect and `store/` appends them to SQLite.
//! Compute and idle lines of a period add up, exactly, to what the instances
//! cost; storage, checkpoint I/O and network lines come on top.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::ids::{JobId, NodeId};
pub use crate::domain::ledger::{LedgerLine, LineKind};
use crate::domain::units::{At, Micros};

/// Where one instance line's money goes while its period is open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenLine {
    pub amount: Micros,
    /// List-price equivalent, in micro-units, unrounded until the period closes.
    pub list: f64,
    pub gpu_ms: i64,
}

/// One unit's open lines: a job (or idle, `None`) and what it accrued.
pub type UnitLines = Vec<(Option<JobId>, OpenLine)>;

/// The charge period being accrued: one hour.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenPeriod {
    pub start: Option<At>,
    /// Per node, per unit: (job or idle, accrued so far). A unit holds one
    /// to a few jobs, so a short vector beats a map on the accrual's hot path.
    #[serde(with = "crate::domain::serde_pairs")]
    pub instance: BTreeMap<NodeId, Vec<UnitLines>>,
    /// Storage, I/O and network lines already priced in this period.
    pub services: Vec<LedgerLine>,
}

impl OpenPeriod {
    pub fn add(&mut self, key: (NodeId, u8, Option<JobId>), amount: Micros, list: f64, gpu_ms: i64) {
        let (node, unit, job) = key;
        add_to(self.instance.entry(node).or_default(), unit, job, amount, list, gpu_ms);
    }

    /// Every open instance line with its (node, unit, job or idle).
    pub fn lines(&self) -> impl Iterator<Item = ((NodeId, u8, Option<JobId>), &OpenLine)> {
        self.instance
            .iter()
            .flat_map(|(node, units)| units.iter().enumerate().flat_map(move |(u, lines)| lines.iter().map(move |(job, line)| ((*node, u as u8, *job), line))))
    }

    /// Everything accrued in the open period, instance lines included.
    pub fn total(&self) -> Micros {
        self.lines().map(|(_, l)| l.amount).sum::<Micros>() + self.services.iter().map(|l| l.amount).sum::<Micros>()
    }
}

/// `OpenPeriod::add` on one node's units, found once for all its GPUs.
pub fn add_to(units: &mut Vec<UnitLines>, unit: u8, job: Option<JobId>, amount: Micros, list: f64, gpu_ms: i64) {
    let unit = usize::from(unit);
    if units.len() <= unit {
        units.resize_with(unit + 1, Vec::new);
    }
    let lines = &mut units[unit];
    let i = match lines.iter().position(|(j, _)| *j == job) {
        Some(i) => i,
        None => {
            lines.push((job, OpenLine::default()));
            lines.len() - 1
        }
    };
    let line = &mut lines[i].1;
    line.amount += amount;
    line.list += list;
    line.gpu_ms += gpu_ms;
}

/// `bytes` at `per_gib` a GiB, rounded to the micro-unit.
pub fn per_gib(bytes: u64, per_gib: Micros) -> Micros {
    Micros(((i128::from(bytes) * i128::from(per_gib.0) + (1 << 29)) >> 30) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_bytes_are_priced_per_gib() {
        for kind in [LineKind::Compute, LineKind::Idle, LineKind::CheckpointIo, LineKind::Storage, LineKind::Network] {
            assert_eq!(LineKind::parse(kind.label()), Some(kind));
        }
        assert_eq!(LineKind::parse("tax"), None);
        assert_eq!(per_gib(1 << 30, Micros(10_000)), Micros(10_000));
        assert_eq!(per_gib(3 << 29, Micros(10_000)), Micros(15_000));
        assert_eq!(per_gib(0, Micros(10_000)), Micros(0));
    }

    #[test]
    fn an_open_period_sums_what_it_holds() {
        let mut p = OpenPeriod::default();
        p.add((NodeId(1), 0, Some(JobId(1))), Micros(5), 7.5, 100);
        p.add((NodeId(1), 0, Some(JobId(1))), Micros(5), 7.5, 100);
        p.add((NodeId(1), 1, None), Micros(3), 3.0, 50);
        assert_eq!(p.total(), Micros(13));
        let lines: Vec<_> = p.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].0, lines[0].1.gpu_ms), ((NodeId(1), 0, Some(JobId(1))), 200));
    }
}
