//! What the fleet pane's three pictures (table, grid, drill-down) share: the
//! cluster line, and how a node or a GPU looks — its glyph, state and price
//! styles, its mean util.
//!
//! Owns these small pieces only, so that `fleet`, `fleet_grid` and
//! `fleet_detail` import them and not each other. Reads the `View` it is
//! handed; draws nothing itself.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::room::View;
use crate::room::view::{GpuView, NodeView};
use crate::tui::fmt;
use crate::tui::theme::Theme;

/// GPUs busy, mean util and burn; with `trouble`, how many nodes are down or
/// draining (the table says it per row, the grid does not).
pub fn cluster_line<'a>(view: &View, t: &Theme, w: usize, trouble: bool) -> Line<'a> {
    let c = &view.cluster;
    let mut groups = vec![
        vec![Span::styled(format!("{}/{}", c.gpus_busy, c.gpus_total), t.figure), Span::styled(" GPUs busy", t.dim)],
        vec![Span::styled("  util ", t.dim), Span::styled(fmt::util_pct(c.util_mean), t.util_level(fmt::ramp_level(c.util_mean)))],
    ];
    if c.gpus_stale > 0 {
        groups.push(vec![Span::styled(format!("  ? {} stale", c.gpus_stale), t.warn)]);
    }
    // In the grid, trouble comes before the burn (the header has the burn).
    if trouble {
        groups.extend(trouble_groups(view, t));
    }
    groups.push(vec![Span::styled("  burn ", t.dim), Span::styled(c.burn.to_string(), t.figure)]);
    fmt::fit_groups(groups, w)
}

/// `  ✕ 3 down` and `  ↓ 2 draining`, each only when there are some.
pub fn trouble_groups<'a>(view: &View, t: &Theme) -> Vec<Vec<Span<'a>>> {
    let down = view.nodes.iter().filter(|n| !n.up).count();
    let draining = view.nodes.iter().filter(|n| is_draining(n)).count();
    let mut groups = Vec::new();
    if down > 0 {
        groups.push(vec![Span::styled(format!("  ✕ {down} down"), t.alarm)]);
    }
    if draining > 0 {
        groups.push(vec![Span::styled(format!("  ↓ {draining} draining"), t.warn)]);
    }
    groups
}

/// Up but on its way out (an interruption notice, a drain).
pub fn is_draining(node: &NodeView) -> bool {
    node.up && node.state != "up"
}

/// Mean utilization of the node's GPUs that have a sample (never a
/// negative zero, which would print as `-0%`).
pub fn node_mean(node: &NodeView) -> Option<f64> {
    let sampled: Vec<f64> = node.gpus.iter().filter_map(|g| g.util.map(f64::from)).collect();
    (!sampled.is_empty()).then(|| (sampled.iter().sum::<f64>() / sampled.len() as f64).max(0.0) + 0.0)
}

/// What the node costs per hour now; nothing for a node that is down.
pub fn price_text(node: &NodeView) -> String {
    match node.price {
        Some(p) if node.up => p.to_string(),
        _ => "—".into(),
    }
}

/// A price above the node's max price is the alarm the spot watcher acts on.
pub fn price_style(node: &NodeView, t: &Theme) -> Style {
    let over = matches!((node.price, node.max_price), (Some(p), Some(m)) if p > m);
    if !node.up {
        t.dim
    } else if over {
        t.alarm
    } else {
        t.text
    }
}

/// A Slurm node taking work ("slurm mixed"), not drained, down or failing.
fn slurm_in_service(state: &str) -> bool {
    state.strip_prefix("slurm ").is_some_and(|s| !["drain", "down", "fail", "not_responding", "maint", "reboot"].iter().any(|w| s.contains(w)))
}

pub fn state_style(node: &NodeView, t: &Theme) -> Style {
    if !node.up {
        t.alarm
    } else if node.state == "up" || slurm_in_service(&node.state) {
        t.dim
    } else {
        t.warn
    }
}

/// The glyph and style of one GPU: `✕` on a down node, `?` when its source
/// failed (stale), `·` before the first sample, else the ramp; an allocated GPU doing nothing is flagged as waste.
pub fn gpu_glyph(node: &NodeView, gpu: &GpuView, t: &Theme) -> (char, Style) {
    if !node.up {
        return ('✕', t.no_data);
    }
    if gpu.stale {
        return ('?', t.no_data);
    }
    match gpu.util {
        None => ('·', t.no_data),
        Some(u) => util_glyph(f64::from(u), !gpu.jobs.is_empty(), t),
    }
}

/// The ramp glyph of a utilization in percent (`░` for idle, so that idle
/// never looks blank); `allocated` and under 5% is waste, in the warn style.
pub fn util_glyph(u: f64, allocated: bool, t: &Theme) -> (char, Style) {
    let level = fmt::ramp_level(u);
    let glyph = if level == 0 { '░' } else { fmt::RAMP[level] };
    let style = if allocated && u < 5.0 { t.warn } else { t.util_level(level) };
    (glyph, style)
}
