//! Invariants shared by the integration tests: checked after events of long
//! runs, they must hold whatever the discipline or the input.

use std::collections::BTreeSet;

use gpuroom::domain::ids::{GpuRef, JobId};
use gpuroom::domain::units::Micros;
use gpuroom::room::Room;

/// No GPU over-committed, allocations and placements agree, progress within
/// bounds, money reconciled, and every tenant within quota plus borrowing.
#[allow(dead_code)]
pub fn check(room: &Room, context: &str) {
    let mut placed_on: BTreeSet<(JobId, GpuRef)> = BTreeSet::new();
    for node in room.nodes() {
        for gpu in &node.gpus {
            let mut spans: Vec<(u32, u32)> = gpu.allocations.iter().map(|a| (a.offset.0, a.offset.0 + a.size.0)).collect();
            spans.sort_unstable();
            for pair in spans.windows(2) {
                assert!(pair[0].1 <= pair[1].0, "{context}: overlapping allocations on {} GPU {}: {spans:?}", node.spec.name, gpu.index);
            }
            assert!(spans.last().is_none_or(|s| s.1 <= gpu.memory.0), "{context}: allocation past the end of GPU memory");
            let owners = gpu.allocations.iter().filter(|a| a.exclusive).count();
            assert!(owners <= 1, "{context}: two exclusive jobs on one GPU");
            if owners == 1 && !room.config().sched.time_sharing {
                assert_eq!(gpu.allocations.len(), 1, "{context}: an exclusive GPU is shared without time-sharing");
            }
            if !node.is_up() {
                assert!(gpu.allocations.is_empty(), "{context}: work on a down node");
            }
            for a in &gpu.allocations {
                placed_on.insert((a.job, GpuRef { node: node.spec.id, index: gpu.index }));
            }
        }
    }
    let mut expected: BTreeSet<(JobId, GpuRef)> = BTreeSet::new();
    for job in room.jobs() {
        let phase = job.phase();
        assert!(job.steps_saved <= job.steps_done || phase.is_terminal(), "{context}: {} saved past done", job.spec.id);
        assert!(job.steps_done <= job.spec.steps_total, "{context}: {} past its total", job.spec.id);
        match (&job.placement, phase.holds_gpus()) {
            (Some(p), true) => {
                assert_eq!(p.gpus.len(), usize::from(job.spec.gpus), "{context}: {} has the wrong GPU count", job.spec.id);
                for g in &p.gpus {
                    expected.insert((job.spec.id, GpuRef { node: p.node, index: *g }));
                }
            }
            (None, false) => {}
            (placement, holds) => panic!("{context}: {} is {:?} with placement {placement:?} (holds GPUs: {holds})", job.spec.id, phase),
        }
    }
    assert_eq!(placed_on, expected, "{context}: allocations and placements disagree");
    let view = room.view();
    // Jobs retired from memory keep their share of the totals.
    let jobs: Micros = room.jobs().map(|j| j.cost).sum::<Micros>() + room.retired().cost;
    let idle: Micros = view.totals.idle_by_mode.iter().copied().sum();
    assert_eq!(jobs + idle, view.totals.spend, "{context}: spend does not reconcile");
    let tenants: Micros = room.books().tenants.values().map(|b| b.all_time).sum();
    let services: Micros = room.jobs().map(|j| j.service_cost).sum::<Micros>() + room.retired().service_cost;
    assert_eq!(tenants, jobs + services, "{context}: tenant books do not add up to job costs");
    assert_eq!(services, room.books().services, "{context}: service lines do not add up");
    for row in &view.queue.by_tenant {
        let limit = row.quota_gpus + room.tenant(&row.tenant).map_or(0, |t| t.borrow_limit_gpus);
        assert!(row.gpus_held <= limit, "{context}: tenant {} holds {} GPUs, quota {} + borrowing = {limit}", row.tenant, row.gpus_held, row.quota_gpus);
        assert!(row.borrowed_gpus <= row.gpus_held);
    }
}

/// The ledger reconciles: closed lines plus the open period add up, to the
/// micro-unit, to what the instances cost (compute + idle) and to the
/// services charged on top; each tenant's lines to its books.
#[allow(dead_code)]
pub fn check_ledger(room: &Room, closed: &[gpuroom::cost::ledger::LedgerLine], context: &str) {
    let open = room.open_period();
    let instance: Micros =
        closed.iter().filter(|l| l.kind.is_instance()).map(|l| l.amount).sum::<Micros>() + open.lines().map(|(_, l)| l.amount).sum::<Micros>();
    assert_eq!(instance, room.books().total(), "{context}: ledger instance lines do not add up to the instances' cost");
    let services: Micros =
        closed.iter().filter(|l| !l.kind.is_instance()).map(|l| l.amount).sum::<Micros>() + open.services.iter().map(|l| l.amount).sum::<Micros>();
    assert_eq!(services, room.books().services, "{context}: ledger service lines do not add up");
    let idle: Micros = closed.iter().filter(|l| l.kind == gpuroom::cost::ledger::LineKind::Idle).map(|l| l.amount).sum::<Micros>()
        + open.lines().filter(|(k, _)| k.2.is_none()).map(|(_, l)| l.amount).sum::<Micros>();
    assert_eq!(idle, room.books().idle_spend.iter().copied().sum::<Micros>(), "{context}: idle lines do not add up");
    for (tenant, book) in &room.books().tenants {
        let from_lines: Micros = closed.iter().filter(|l| l.tags.as_ref().is_some_and(|t| &t.tenant == tenant)).map(|l| l.amount).sum::<Micros>()
            + open.services.iter().filter(|l| l.tags.as_ref().is_some_and(|t| &t.tenant == tenant)).map(|l| l.amount).sum::<Micros>()
            + open.lines().filter(|(k, _)| k.2.and_then(|j| room.job(j)).is_some_and(|j| &j.spec.tags.tenant == tenant)).map(|(_, l)| l.amount).sum::<Micros>();
        assert_eq!(from_lines, book.all_time, "{context}: tenant {} lines do not add up to its books", tenant.0);
    }
}
