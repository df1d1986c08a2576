//! The queue pane opened on one job (`Enter`, like `kubectl describe` or
//! `scontrol show job`): who it is, where it stands, what it has cost, its
//! last checkpoint and the work a stop would lose, why it waits pool by
//! pool, its max price against the market on spot, and what the recent log
//! and the audit trail say about it.
//!
//! Owns this picture only: `QueueList` owns which job and how to get out
//! (the title says `Esc back`). Reads only the `View`; what the view does not
//! hold (a history older than the recent log) is said to be missing, never
//! made up. Draws inside its `Rect` only.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::shared::{PaneProps, frame};
use crate::cost::budget::{AtLimit, BudgetLevel};
use crate::domain::cluster::BillingMode;
use crate::domain::ids::JobId;
use crate::domain::job::{Phase, PoolPreference};
use crate::domain::units::{At, Secs};
use crate::room::View;
use crate::room::view::{JobRow, PoolRow};
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

pub fn render(view: &View, id: JobId, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let job = view.jobs.iter().find(|j| j.id == id);
    let name = job.map_or_else(|| id.to_string(), |j| format!("{} {}", j.id, j.name));
    let extra = Line::from(vec![Span::styled(format!(" {} ", fmt::trunc(&name, 40)), t.figure), Span::styled("· ↑↓ next job · Esc back ", t.dim)]);
    let inner = frame(PaneId::Queue, Some(extra), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let Some(job) = job else {
        put(buf, inner, 0, Line::from(Span::styled(format!("{id} is no longer listed (it ended and was retired) — Esc back"), t.warn)));
        return;
    };
    let w = inner.width as usize;
    let mut lines = Vec::new();
    identity(job, t, &mut lines);
    standing(job, view, t, &mut lines);
    checkpoint(job, view, t, &mut lines);
    if job.phase == Phase::Queued {
        waits(job, view, t, w, &mut lines);
    }
    spot(job, view, t, &mut lines);
    history(job, view, t, w, &mut lines);
    for (row, line) in lines.into_iter().take(inner.height as usize).enumerate() {
        put(buf, inner, row as u16, line);
    }
}

fn label(text: &str, t: &Theme) -> Span<'static> {
    Span::styled(format!("{text:<10}"), t.dim)
}

fn pair(name: &str, value: String, style: Style, t: &Theme) -> Line<'static> {
    Line::from(vec![label(name, t), Span::styled(value, style)])
}

fn identity(job: &JobRow, t: &Theme, out: &mut Vec<Line<'static>>) {
    let tags = [("project", &job.project), ("env", &job.env), ("model", &job.model)]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(" · ");
    let who = if tags.is_empty() { job.tenant.clone() } else { format!("{} · {tags}", job.tenant) };
    out.push(pair("tenant", who, t.text, t));
    let pool = match job.pool {
        PoolPreference::Any => "any capacity, spot included",
        PoolPreference::NoSpot => "never spot",
        PoolPreference::SpotOnly if job.escalated => "spot only, widened to any after its wait limit",
        PoolPreference::SpotOnly => "spot only",
    };
    let asks = format!("{} GPU(s) × {} · {} job · {pool}", job.gpus, job.gpu_mem, job.class.label());
    out.push(pair("asks", asks, t.text, t));
}

fn standing(job: &JobRow, view: &View, t: &Theme, out: &mut Vec<Line<'static>>) {
    let mut state = job.state.clone();
    if let Some(node) = &job.node {
        let billing = job.billing.map(|b| format!(" ({})", b.label())).unwrap_or_default();
        state += &format!(" on {node}{billing}");
    }
    if let Some(target) = &job.target {
        state += &format!(" · sent to {target}");
    }
    if job.attempts > 1 {
        state += &format!(" · started {} times", job.attempts);
    }
    if job.borrowed {
        state += " · on borrowed quota";
    }
    let style = if job.escalated { t.alarm } else { t.text };
    out.push(pair("state", state, style, t));
    let eta = match (job.eta, job.predicted_runtime) {
        (Some(eta), _) => format!("ETA {eta}"),
        (None, Some(runtime)) => format!("predicted run time {runtime} once placed"),
        (None, None) => "no ETA yet".to_string(),
    };
    let waited = if job.phase == Phase::Queued { format!("waiting {} now", job.wait) } else { format!("waited {} before it started", job.wait) };
    out.push(pair("progress", format!("{:.0}% · {eta} · {waited}", job.progress * 100.0), t.text, t));
    let budget = view.budgets.iter().find(|b| b.tenant == job.tenant);
    let level = match budget.map(|b| (b.level, b.at_limit)) {
        Some((BudgetLevel::Blocked, _)) => " · its tenant is BLOCKED past its budget: nothing of it runs until an approval",
        Some((BudgetLevel::Limited, AtLimit::Queue)) => " · its tenant is over budget: new work waits for an approval",
        Some((BudgetLevel::Limited, AtLimit::Spot)) => " · its tenant is over budget: spot only",
        Some((BudgetLevel::Notify, _)) => " · its tenant is past 80% of its budget",
        _ => "",
    };
    let style = if level.contains("over") || level.contains("BLOCKED") { t.warn } else { t.text };
    out.push(pair("cost", format!("{} so far{level}", job.cost), style, t));
}

fn checkpoint(job: &JobRow, view: &View, t: &Theme, out: &mut Vec<Line<'static>>) {
    let last = match (job.last_save, view.at) {
        (Some(at), Some(now)) => format!("last saved {} ago ({})", Secs((now - at).num_seconds().max(0)), fmt::time_of_day(at)),
        (Some(at), None) => format!("last saved at {}", fmt::time_of_day(at)),
        (None, _) if job.progress > 0.0 => "never saved".to_string(),
        (None, _) => "nothing to save yet".to_string(),
    };
    let takes = match job.save_secs {
        Some(s) if s < 1.0 => " · a save takes under 1s".to_string(),
        Some(s) => format!(" · a save takes {}", Secs(s.round() as i64)),
        None => String::new(),
    };
    let at_risk = if job.unsaved > 0.0 {
        let recompute = job.eta.or(job.predicted_runtime).map(|total| {
            let rest = 1.0 - job.progress;
            let whole = if rest > 0.0 { total.0 as f64 / rest } else { 0.0 };
            format!(" (about {} of recompute)", Secs((whole * job.unsaved).round() as i64))
        });
        format!(" · at risk {:.0}% of the job{}", job.unsaved * 100.0, recompute.unwrap_or_default())
    } else {
        String::new()
    };
    let style = if job.unsaved > 0.1 { t.warn } else { t.text };
    out.push(pair("saved", format!("{last}{takes}{at_risk}"), style, t));
}

/// Why a queued job waits: the room's reason, then each pool's answer.
fn waits(job: &JobRow, view: &View, t: &Theme, w: usize, out: &mut Vec<Line<'static>>) {
    let why = job.waits_for.clone().unwrap_or_else(|| "its turn (the queue's order)".to_string());
    out.push(pair("waits for", why, t.warn, t));
    for pool in &view.pools {
        let (fits, answer) = pool_answer(job, pool, view);
        let price = pool.price.map(|p| format!(" {p}")).unwrap_or_default();
        let text = format!("  {:<28}{price} — {answer}", pool.target.to_string());
        out.push(Line::from(Span::styled(fmt::trunc(&text, w), if fits { t.ok } else { t.dim })));
    }
}

/// Whether the job could start in `pool` now, and why not.
fn pool_answer(job: &JobRow, pool: &PoolRow, view: &View) -> (bool, String) {
    let spot = pool.target.billing == BillingMode::Spot;
    let spot_only = job.pool == PoolPreference::SpotOnly && !job.escalated;
    if spot && job.pool == PoolPreference::NoSpot {
        return (false, "never spot".into());
    }
    if !spot && spot_only {
        return (false, "spot only (until its wait limit)".into());
    }
    if let Some(target) = &job.target
        && target != &pool.target
    {
        return (false, format!("sent to {target}"));
    }
    if let Some(b) = view.budgets.iter().find(|b| b.tenant == job.tenant)
        && !b.level.allows(b.at_limit, spot)
    {
        let why = match (b.level, b.at_limit) {
            (BudgetLevel::Blocked, _) => "budget blocked",
            (_, AtLimit::Spot) => "over budget: spot only",
            (_, AtLimit::Queue) => "over budget",
        };
        return (false, why.into());
    }
    if pool.nodes_up == 0 {
        return (false, "no node up".into());
    }
    let needs = u32::from(job.gpus);
    if !pool.fits(needs) {
        return (false, format!("needs {needs} on one node, ≤{} free", pool.gpus_free_one_node));
    }
    (true, format!("room now ({} free on a node)", pool.gpus_free_one_node))
}

fn spot(job: &JobRow, view: &View, t: &Theme, out: &mut Vec<Line<'static>>) {
    let Some(s) = view.spot_jobs.iter().find(|s| s.id == job.id) else { return };
    let (Some(cap), Some(market)) = (s.cap, s.market) else { return };
    let headroom = s.headroom.map(|h| format!(" · headroom {:+.1}%", h * 100.0)).unwrap_or_default();
    let curve = s.coefficient.map(|c| format!(" (×{c:.2} of its base at {:.0}% done)", job.progress * 100.0)).unwrap_or_default();
    let style = if s.headroom.is_some_and(|h| h < 0.0) { t.alarm } else { t.text };
    out.push(pair("max price", format!("{cap} vs market {market}{headroom}{curve}"), style, t));
    if let Some(p) = s.p_next_minute {
        let interval = s.interval.map(|i| format!(" · checkpoint every {i}{}", if s.shortened { " (shortened by the risk)" } else { "" })).unwrap_or_default();
        out.push(pair("risk", format!("{:.1}%/min of an interruption{interval}", p * 100.0), t.text, t));
    }
}

/// What the recent log and the audit trail say about it, newest last.
fn history(job: &JobRow, view: &View, t: &Theme, w: usize, out: &mut Vec<Line<'static>>) {
    let tag = format!("{} ", job.id);
    let named = |text: &str| text.starts_with(&tag) || text.contains(&format!(" {tag}")) || text.ends_with(&format!(" {}", job.id));
    let mut events: Vec<(At, String, Style)> = view.log.iter().filter(|l| named(&l.text)).map(|l| (l.at, l.text.clone(), t.text)).collect();
    for a in view.audit.iter().filter(|a| named(&a.what) || a.what.ends_with(&job.id.to_string())) {
        let (what, style) = match &a.refused {
            None => (format!("✓ {}@{}: {}", a.user, a.origin, a.what), t.key),
            Some(why) => (format!("▲ {}@{}: {} — refused: {why}", a.user, a.origin, a.what), t.alarm),
        };
        events.push((a.at, what, style));
    }
    events.sort_by_key(|(at, ..)| *at);
    out.push(Line::from(Span::styled("history (the recent log and the audit trail; older lines are in the event log)", t.heading)));
    if events.is_empty() {
        out.push(Line::from(Span::styled("  nothing about it in the recent log", t.dim)));
    }
    for (at, text, style) in events.into_iter().rev().take(12).collect::<Vec<_>>().into_iter().rev() {
        let line = format!("  {} {text}", fmt::time_of_day(at));
        out.push(Line::from(Span::styled(fmt::trunc(&line, w), style)));
    }
}
