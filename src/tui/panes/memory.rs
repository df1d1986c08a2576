//! Memory pane: GPU memory and its fragmentation. A cluster line (memory and
//! GPU fragmentation, free memory, largest free block), one row per node (a
//! glyph per GPU for the allocated share, allocated/total, measured use,
//! largest free block, worst GPU fragmentation), then a bar per shared GPU —
//! where fragmentation lives — as space allows.
//!
//! Draws from `View::cluster` and `View::nodes` only; percentages and bars are
//! the only arithmetic here. Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{PaneProps, frame, widest};
use crate::core::units::Mib;
use crate::core::view::{GpuView, NodeView};
use crate::core::View;
use crate::tui::app::PaneId;
use crate::tui::fmt::{self, put};
use crate::tui::theme::Theme;

pub fn render(view: &View, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let c = &view.cluster;
    let extra = Line::from(Span::styled(
        format!(" {} / {} ", mib(c.mem_allocated), mib(c.mem_total)),
        t.dim,
    ));
    let inner = frame(PaneId::Memory, Some(extra), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let w = inner.width as usize;
    put(buf, inner, 0, cluster_line(view, t, w));
    let rows = inner.height.saturating_sub(1) as usize;
    let nodes: Vec<&NodeView> = view.nodes.iter().filter(|n| n.up).collect();
    let shared: Vec<(&NodeView, &GpuView)> =
        nodes.iter().flat_map(|n| n.gpus.iter().map(move |g| (*n, g))).filter(|(_, g)| is_shared(g)).collect();
    let name_w = widest(view.nodes.iter().map(|n| n.name.as_str()), 3, 10);
    let gpu_w = nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0);
    let (show_nodes, show_shared) = pick_rows(&nodes, shared.len(), rows);
    let mut row = 1u16;
    for (node, _) in nodes.iter().zip(&show_nodes).filter(|(_, s)| **s) {
        put(buf, inner, row, node_line(node, name_w, gpu_w, w, t));
        row += 1;
    }
    for (node, gpu) in shared.iter().take(show_shared) {
        put(buf, inner, row, shared_line(node, gpu, name_w, w, t));
        row += 1;
    }
    let hidden_nodes = show_nodes.iter().filter(|s| !**s).count();
    let hidden_shared = shared.len() - show_shared;
    if hidden_nodes + hidden_shared > 0 {
        let mut parts = Vec::new();
        if hidden_nodes > 0 {
            let full = nodes.iter().zip(&show_nodes).filter(|(n, s)| !**s && is_full(n)).count();
            parts.push(if full == hidden_nodes { format!("+{hidden_nodes} full nodes") } else { format!("+{hidden_nodes} nodes") });
        }
        if hidden_shared > 0 {
            parts.push(format!("+{hidden_shared} shared GPUs"));
        }
        put(buf, inner, row, Line::from(Span::styled(parts.join(", "), t.dim)));
    }
}

/// Every GPU fully allocated: nothing to place there, nothing fragmented.
fn is_full(n: &NodeView) -> bool {
    n.gpus.iter().all(|g| g.mem_allocated >= g.mem_total)
}

/// Rows for nodes and shared GPUs when not all fit: shared GPUs (where the
/// fragmentation is) first, then nodes with free memory, then full nodes;
/// one row is kept for the "+N" line. Returns (node shown?, shared shown).
fn pick_rows(nodes: &[&NodeView], shared: usize, rows: usize) -> (Vec<bool>, usize) {
    if nodes.len() + shared <= rows {
        return (vec![true; nodes.len()], shared);
    }
    let mut budget = rows.saturating_sub(1);
    let show_shared = shared.min(budget);
    budget -= show_shared;
    let mut shown = vec![false; nodes.len()];
    for full in [false, true] {
        for (i, n) in nodes.iter().enumerate() {
            if budget > 0 && !shown[i] && is_full(n) == full {
                shown[i] = true;
                budget -= 1;
            }
        }
    }
    (shown, show_shared)
}

/// A GPU holding non-exclusive allocations: the ones that can fragment.
fn is_shared(g: &GpuView) -> bool {
    !g.exclusive && !g.jobs.is_empty()
}

fn mib(m: u64) -> Mib {
    Mib(u32::try_from(m).unwrap_or(u32::MAX))
}

fn cluster_line<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let f = &view.cluster.fragmentation;
    fmt::fit_groups(
        vec![
            vec![Span::styled("frag mem ", t.dim), Span::styled(fmt::pct(f.memory), t.grade(f.memory, 0.25, 0.5))],
            vec![Span::styled(" gpu ", t.dim), Span::styled(fmt::pct(f.gpus), t.grade(f.gpus, 0.25, 0.5))],
            vec![Span::styled("  free ", t.dim), Span::styled(mib(f.free_memory).to_string(), t.figure)],
            vec![Span::styled("  largest ", t.dim), Span::styled(f.largest_free_block.to_string(), t.figure)],
            vec![Span::styled(format!("  {} free GPUs", f.free_gpus), t.dim)],
        ],
        w,
    )
}

/// Allocated share of a GPU as a ramp glyph: `░` free, `▁`…`█`.
fn alloc_glyph(g: &GpuView, t: &Theme) -> Span<'static> {
    let share = ratio(g.mem_allocated, g.mem_total);
    let level = fmt::ramp_level(share * 100.0);
    let glyph = if level == 0 { '░' } else { fmt::RAMP[level] };
    let style = if level == 0 {
        t.mem_free
    } else if g.exclusive {
        t.mem_alloc
    } else {
        t.mem_used
    };
    Span::styled(glyph.to_string(), style)
}

fn ratio(a: Mib, b: Mib) -> f64 {
    if b.0 == 0 { 0.0 } else { f64::from(a.0) / f64::from(b.0) }
}

fn node_line<'a>(node: &NodeView, name_w: usize, gpu_w: usize, w: usize, t: &Theme) -> Line<'a> {
    let total = Mib(node.gpus.iter().map(|g| g.mem_total.0).sum());
    let alloc = Mib(node.gpus.iter().map(|g| g.mem_allocated.0).sum());
    let used: Option<Mib> = node.gpus.iter().map(|g| g.mem_used.map(|m| m.0)).sum::<Option<u32>>().map(Mib);
    let largest = node.gpus.iter().map(|g| g.largest_free).max().unwrap_or_default();
    let worst = node.gpus.iter().map(|g| g.fragmentation).fold(0.0, f64::max);
    let mut head = vec![Span::styled(fmt::left(&node.name, name_w), t.text), Span::raw(" ")];
    head.extend(node.gpus.iter().map(|g| alloc_glyph(g, t)));
    head.push(Span::raw(" ".repeat(gpu_w.saturating_sub(node.gpus.len()) + 1)));
    head.push(Span::styled(fmt::right(&alloc.to_string(), 6), t.figure));
    // Wide: `/total` and aligned figures; middle: aligned; narrow: figures only.
    let base = name_w + 1 + gpu_w + 1 + 6;
    let aligned = w >= base + 20;
    if w >= base + 7 + 32 {
        head.push(Span::styled(format!("/{}", fmt::left(&total.to_string(), 6)), t.dim));
    }
    let used_text = used.map(|u| u.to_string()).unwrap_or_else(|| "—".into());
    let pad = |s: String, n: usize| if aligned { fmt::right(&s, n) } else { s };
    let groups = vec![
        head,
        vec![Span::styled(" frag ", t.dim), Span::styled(pad(fmt::pct(worst), 4), t.grade(worst, 0.25, 0.5))],
        vec![Span::styled(" lf ", t.dim), Span::styled(pad(largest.to_string(), 6), t.text)],
        vec![Span::styled(" used ", t.dim), Span::styled(pad(used_text, 6), t.text)],
    ];
    fmt::fit_groups(groups, w)
}

/// `n02:2 ███▓▓░░░ 8.0G/16.0G used 6.0G lf 4.3G frag 48% 2 jobs`: measured use
/// `█`, allocated but not in use `▓`, free `░`.
fn shared_line<'a>(node: &NodeView, g: &GpuView, name_w: usize, w: usize, t: &Theme) -> Line<'a> {
    let label = format!("{}:{}", fmt::trunc(&node.name, name_w), g.index);
    let bar_w = if w >= 60 { 16 } else { 8 };
    let mut head = vec![Span::styled(fmt::left(&label, name_w + 2), t.dim), Span::raw(" ")];
    head.extend(mem_bar(g, bar_w, t));
    head.push(Span::raw(" "));
    head.push(Span::styled(fmt::right(&g.mem_allocated.to_string(), 6), t.figure));
    let used = g.mem_used.map(|u| u.to_string()).unwrap_or_else(|| "—".into());
    let groups = vec![
        head,
        vec![Span::styled(" frag ", t.dim), Span::styled(fmt::pct(g.fragmentation), t.grade(g.fragmentation, 0.25, 0.5))],
        vec![Span::styled(" lf ", t.dim), Span::styled(g.largest_free.to_string(), t.text)],
        vec![Span::styled(" used ", t.dim), Span::styled(used, t.text)],
        vec![Span::styled(format!(" {} jobs", g.jobs.len()), t.dim)],
        vec![Span::styled(format!(" of {}", g.mem_total), t.dim)],
    ];
    fmt::fit_groups(groups, w)
}

fn mem_bar(g: &GpuView, w: usize, t: &Theme) -> Vec<Span<'static>> {
    let cells = |m: Mib| ((ratio(m, g.mem_total) * w as f64).round() as usize).min(w);
    let alloc = cells(g.mem_allocated);
    let used = g.mem_used.map(|u| cells(u).min(alloc)).unwrap_or(0);
    let part = |n: usize, c: &str, s: Style| Span::styled(c.repeat(n), s);
    vec![
        part(used, "█", t.mem_used),
        part(alloc - used, "▓", t.mem_alloc),
        part(w - alloc, "░", t.mem_free),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn memory_pane_wide() {
        let view = demo_view();
        let terminal = draw_pane(60, 10, false, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn shared_gpus_win_rows_over_full_nodes() {
        let view = demo_view();
        let nodes: Vec<&NodeView> = view.nodes.iter().filter(|n| n.up).collect();
        let (shown, shared) = pick_rows(&nodes, 1, 3);
        assert_eq!(shared, 1);
        let names: Vec<&str> = nodes.iter().zip(&shown).filter(|(_, s)| **s).map(|(n, _)| n.name.as_str()).collect();
        assert_eq!(names, ["n02"], "the node with free memory, not a full one");
    }

    #[test]
    fn memory_pane_narrow() {
        let view = demo_view();
        let terminal = draw_pane(36, 7, true, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }
}
