//! Plain-text reports of a run (for `gpuroom sim`, `gpuroom replay` and the
//! console's exit), computed from the same `View` the console draws.

use std::fmt::Write;

use crate::domain::cluster::BillingMode;
use crate::room::view::View;
use crate::sim::WorldStats;

pub fn summary(view: &View, world: Option<&WorldStats>) -> String {
    let mut out = String::new();
    let t = &view.totals;
    let s = &t.stats;
    let at = view.at.map(|a| a.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "gpuroom run summary at {at} ({} events, discipline {})", view.events, view.discipline);
    let _ = writeln!(
        out,
        "cluster   {} nodes up of {}, {} GPUs ({} busy now), mean utilization {:.0}%",
        view.cluster.nodes_up, view.cluster.nodes_total, view.cluster.gpus_total, view.cluster.gpus_busy, view.cluster.util_mean
    );
    let _ =
        writeln!(out, "jobs      {} submitted, {} done, {} failed, {} running, {} queued", s.submitted, s.done, s.failed, view.queue.running, view.queue.depth);
    let mean_wait = t.mean_wait.map(|w| w.to_string()).unwrap_or_else(|| "-".into());
    let oldest = view.queue.oldest_wait.map(|w| w.to_string()).unwrap_or_else(|| "-".into());
    let mean_jct = t.mean_jct.map(|w| w.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "waits     mean wait {mean_wait} over {} placements, oldest queued now {oldest}; mean JCT {mean_jct}", s.wait_count);
    // Why the queue waits, by reason ("quota", "no fit", …), most common first.
    let mut why: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for job in view.jobs.iter().filter(|j| j.phase == crate::domain::job::Phase::Queued) {
        let reason = job.waits_for.as_deref().unwrap_or("?");
        *why.entry(reason.split(':').next().unwrap_or(reason)).or_default() += 1;
    }
    if !why.is_empty() {
        let mut counts: Vec<(&str, usize)> = why.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let text: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let _ = writeln!(out, "queue     waiting for: {}", text.join(", "));
    }
    let _ = writeln!(
        out,
        "sched     {} preempted by the scheduler, {} escalated past their wait limit, {} released idle",
        s.preemptions_by_scheduler, s.escalations, s.idle_reclaims
    );
    let _ = writeln!(out, "gpu-hours {:>10} {:>10} {:>12} {:>12}", "allocated", "idle", "spend", "of it idle");
    for mode in BillingMode::ALL {
        let i = mode.index();
        let _ = writeln!(
            out,
            "  {:<9} {:>8.1} h {:>8.1} h {:>12} {:>12}",
            mode.label(),
            t.gpu_hours_allocated[i],
            t.gpu_hours_idle[i],
            t.spend_by_mode[i].to_string(),
            t.idle_by_mode[i].to_string()
        );
    }
    let forecast = t.forecast_rest_of_month.map(|m| format!("; forecast {m} more to month end")).unwrap_or_default();
    let _ = writeln!(out, "spend     {} in all, + {} storage & checkpoint I/O; fleet burn now {}{forecast}", t.spend, t.services, view.cluster.burn);
    for b in &view.budgets {
        let used = if b.budget.0 > 0 { 100.0 * b.month_to_date.as_f64() / b.budget.as_f64() } else { 0.0 };
        // Unit costs are fractions of a cent: four decimals.
        let fine = |m: crate::domain::units::Micros| format!("${:.4}", m.as_f64());
        let unit = match (b.per_1k_requests, b.per_1m_tokens) {
            (Some(r), Some(k)) => format!(", {} per 1k requests, {} per 1M tokens", fine(r), fine(k)),
            (Some(r), None) => format!(", {} per 1k requests", fine(r)),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  tenant {:<8} month to date {:>11} of {:>11} ({used:>5.1}%, {}), burn {}, projected {}{unit}",
            b.tenant,
            b.month_to_date.to_string(),
            b.budget.to_string(),
            b.level.label(),
            b.burn,
            b.projected
        );
    }
    let _ = writeln!(
        out,
        "spot      {} interruption notices, {} nodes lost, saves in time {} / missed {}, {} steps recomputed",
        s.notices, s.nodes_lost, s.notice_saves_in_time, s.notice_saves_missed, s.lost_steps
    );
    let _ = writeln!(
        out,
        "ckpt      {} checkpoints, {:.1} GiB written; {} requeues; {} operator actions; {} rejected events",
        s.checkpoints,
        s.checkpoint_bytes as f64 / f64::from(1u32 << 30),
        s.requeues,
        s.operator_actions,
        s.rejected
    );
    if let Some(c) = &view.capacity {
        let _ = writeln!(
            out,
            "capacity  {} mode: {} launches ({} nodes), {} failed, {} given back, {} consolidations; idle {:.1}% of instance spend; burn now {} elastic + {} fixed",
            c.mode,
            c.launch_requests,
            c.nodes_launched,
            c.launch_failures,
            c.releases,
            c.consolidations,
            100.0 * t.idle_share(),
            c.elastic_burn,
            c.fixed_burn
        );
    }
    if let Some(w) = world {
        let _ = writeln!(
            out,
            "world     {} arrivals, {} reclaims from the trace, {} from price, {} relaunches, {} instances launched ({} launches refused), {} terminated",
            w.arrivals, w.reclaims_by_trace, w.reclaims_by_price, w.relaunches, w.launched, w.launch_refusals, w.released
        );
        let spend = t.spend.as_f64() + t.services.as_f64();
        let per = if w.work_done_hours > 0.0 { format!("${:.3}", spend / w.work_done_hours) } else { "-".into() };
        let _ = writeln!(out, "world     {:.1} V100 GPU-hours of finished jobs: {per} per V100 GPU-hour of finished work, all costs in", w.work_done_hours);
    }
    out
}
