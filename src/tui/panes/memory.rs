//! Memory pane: GPU memory and its fragmentation, per GPU and for the
//! cluster. A cluster line (memory and GPU fragmentation, free memory,
//! largest free block anywhere), then, while most nodes get a row, one row
//! per node (a glyph per GPU for the allocated share, allocated/total,
//! measured use, largest free block, worst GPU fragmentation) and a bar per
//! shared GPU, where fragmentation lives. At scale (most nodes would not get
//! a row) it shows what still reads at 1,000 GPUs: how many GPUs have a
//! largest free block of each size, then the worst-fragmented GPUs first,
//! then the nodes with the most room. FGD's measure for the workload's
//! typical shapes (the share of free memory they cannot use, per node
//! `F(M)`) is in the cluster line, and a warning line names the typical
//! shapes that now fit nowhere.
//!
//! Draws from `View::cluster` and `View::nodes` only; percentages, counts
//! and bars are the only arithmetic here (the fragmentation figures come
//! with the `View`). Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::shared::{PaneProps, frame, widest};
use crate::domain::units::Mib;
use crate::room::View;
use crate::room::view::{GpuView, NodeView};
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

pub fn render(view: &View, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let c = &view.cluster;
    let extra = Line::from(Span::styled(format!(" {} / {} ", mib(c.mem_allocated), mib(c.mem_total)), t.dim));
    let inner = frame(PaneId::Memory, Some(extra), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let w = inner.width as usize;
    put(buf, inner, 0, cluster_line(view, t, w));
    let mut top = 1u16;
    // A short pane keeps its rows for nodes; F(M) in the cluster line still tells.
    if let Some(line) = unplaceable_line(view, t, w).filter(|_| inner.height >= UNPLACEABLE_MIN_HEIGHT) {
        put(buf, inner, top, line);
        top += 1;
    }
    let rows = inner.height.saturating_sub(top) as usize;
    let nodes: Vec<&NodeView> = view.nodes.iter().filter(|n| n.up).collect();
    let shared: Vec<(&NodeView, &GpuView)> = nodes.iter().flat_map(|n| n.gpus.iter().map(move |g| (*n, g))).filter(|(_, g)| is_shared(g)).collect();
    let name_w = widest(view.nodes.iter().map(|n| n.name.as_str()), 3, 10);
    let gpu_w = nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0);
    // Once most nodes would be left out, rows say less than a distribution.
    if nodes.len() + shared.len() > rows && nodes.len() > 2 * rows.saturating_sub(1) {
        at_scale(&nodes, name_w, t, inner, top, buf);
        return;
    }
    let (show_nodes, show_shared) = pick_rows(&nodes, shared.len(), rows);
    let mut row = top;
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

/// A cluster-wide amount: as `Mib` shows it, in tebibytes from 10T on
/// (`57.5T`, not `58860.0G`), and never wrapped past `u32`.
fn mib(m: u64) -> String {
    const T: u64 = 1024 * 1024;
    if m >= 10 * T { format!("{:.1}T", m as f64 / T as f64) } else { Mib(u32::try_from(m).unwrap_or(u32::MAX)).to_string() }
}

fn cluster_line<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let f = &view.cluster.fragmentation;
    let groups = |largest: &'static str| {
        vec![
            vec![Span::styled("frag mem ", t.dim), Span::styled(fmt::pct(f.memory), t.grade(f.memory, 0.25, 0.5))],
            vec![Span::styled(" gpu ", t.dim), Span::styled(fmt::pct(f.gpus), t.grade(f.gpus, 0.25, 0.5))],
            vec![Span::styled(" F(M) ", t.dim), Span::styled(fmt::pct(f.workload), t.grade(f.workload, 0.1, 0.3))],
            vec![Span::styled("  free ", t.dim), Span::styled(mib(f.free_memory), t.figure)],
            vec![Span::styled(largest, t.dim), Span::styled(f.largest_free_block.to_string(), t.figure)],
            vec![Span::styled(format!("  {} free GPUs", f.free_gpus), t.dim)],
        ]
    };
    // One name for the figure: "largest free", as `lf` (the rows' and the
    // legend's short form) where the line is tight.
    let long = groups("  largest free ");
    let width: usize = long.iter().flatten().map(Span::width).sum();
    fmt::fit_groups(if width <= w { long } else { groups("  lf ") }, w)
}

/// The least inner height that spends a row on what fits nowhere.
const UNPLACEABLE_MIN_HEIGHT: u16 = 8;

/// `fits nowhere: 8×GPU 1×40.0G`: typical shapes no node can take now.
fn unplaceable_line<'a>(view: &View, t: &Theme, w: usize) -> Option<Line<'a>> {
    let shapes = &view.cluster.fragmentation.unplaceable;
    if shapes.is_empty() {
        return None;
    }
    // A warning while work waits; with an empty queue it is only a fact.
    let style = if view.queue.depth > 0 { t.warn } else { t.dim };
    let mut groups = vec![vec![Span::styled("fits nowhere:", style)]];
    groups.extend(shapes.iter().map(|s| vec![Span::styled(format!(" {s}"), style)]));
    Some(fmt::fit_groups(groups, w))
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
    let mut head = vec![Span::styled(fmt::left_name(&node.name, name_w), t.text), Span::raw(" ")];
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
    let workload_frag = node.workload_frag.map(|f| f.to_string()).unwrap_or_else(|| "—".into());
    let groups = vec![
        head,
        vec![Span::styled(" frag ", t.dim), Span::styled(pad(fmt::pct(worst), 4), t.grade(worst, 0.25, 0.5))],
        vec![Span::styled(" lf ", t.dim), Span::styled(pad(largest.to_string(), 6), t.text)],
        vec![Span::styled(" used ", t.dim), Span::styled(pad(used_text, 6), t.text)],
        vec![Span::styled(" F(M) ", t.dim), Span::styled(pad(workload_frag, 6), t.text)],
    ];
    fmt::fit_groups(groups, w)
}

/// `n02:2 ███▓▓░░░ 8.0G/16.0G used 6.0G lf 4.3G frag 48% 2 jobs`: measured use
/// `█`, allocated but not in use `▓`, free `░`.
fn shared_line<'a>(node: &NodeView, g: &GpuView, name_w: usize, w: usize, t: &Theme) -> Line<'a> {
    // The name gives way, never the GPU's index.
    let index = g.index.to_string();
    let label = format!("{}:{index}", fmt::trunc_middle(&node.name, name_w));
    let bar_w = if w >= 60 { 16 } else { 8 };
    let mut head = vec![Span::styled(fmt::left(&label, name_w + 1 + index.len().max(1)), t.dim), Span::raw(" ")];
    head.extend(mem_bar(g, bar_w, t));
    head.push(Span::raw(" "));
    head.push(Span::styled(fmt::right(&g.mem_allocated.to_string(), 6), t.figure));
    let used = g.mem_used.map(|u| u.to_string()).unwrap_or_else(|| "—".into());
    let groups = vec![
        head,
        vec![Span::styled(" frag ", t.dim), Span::styled(fmt::pct(g.fragmentation), t.grade(g.fragmentation, 0.25, 0.5))],
        vec![Span::styled(" lf ", t.dim), Span::styled(g.largest_free.to_string(), t.text)],
        vec![Span::styled(" used ", t.dim), Span::styled(used, t.text)],
        vec![Span::styled(format!(" {} job{}", g.jobs.len(), if g.jobs.len() == 1 { "" } else { "s" }), t.dim)],
        vec![Span::styled(format!(" of {}", g.mem_total), t.dim)],
    ];
    fmt::fit_groups(groups, w)
}

/// `w` cells: measured use `█`, allocated but not in use `▓`, free `░`.
pub(super) fn mem_bar(g: &GpuView, w: usize, t: &Theme) -> Vec<Span<'static>> {
    let cells = |m: Mib| ((ratio(m, g.mem_total) * w as f64).round() as usize).min(w);
    let alloc = cells(g.mem_allocated);
    let used = g.mem_used.map(|u| cells(u).min(alloc)).unwrap_or(0);
    let part = |n: usize, c: &str, s: Style| Span::styled(c.repeat(n), s);
    vec![part(used, "█", t.mem_used), part(alloc - used, "▓", t.mem_alloc), part(w - alloc, "░", t.mem_free)]
}

/// How many GPUs of up nodes have a largest free block of ≥16G, 8–16G,
/// 4–8G, under 4G, and none at all (full, or held exclusively).
fn distribution(nodes: &[&NodeView]) -> [(&'static str, usize); 5] {
    const G: u32 = 1024;
    let mut out = [("≥16G", 0), ("8–16G", 0), ("4–8G", 0), ("<4G", 0), ("none", 0)];
    for g in nodes.iter().flat_map(|n| &n.gpus) {
        let slot = match if g.exclusive { 0 } else { g.largest_free.0 } {
            0 => 4,
            f if f >= 16 * G => 0,
            f if f >= 8 * G => 1,
            f if f >= 4 * G => 2,
            _ => 3,
        };
        out[slot].1 += 1;
    }
    out
}

/// The pane at many nodes: the distribution of largest free blocks (as bars
/// when there are rows for them), the worst-fragmented GPUs, the nodes with
/// the most free memory, and what did not fit.
fn at_scale(nodes: &[&NodeView], name_w: usize, t: &Theme, inner: Rect, top: u16, buf: &mut Buffer) {
    let w = inner.width as usize;
    let h = inner.height as usize;
    let mut row = top;
    let dist = distribution(nodes);
    let total: usize = dist.iter().map(|(_, n)| n).sum();
    let count_w = total.to_string().len();
    let bar_w = w.saturating_sub(6 + 1 + 1 + count_w + 5);
    let dist_lines: Vec<Line> = if h >= 1 + 5 + 4 && bar_w >= 4 {
        let mut lines = vec![Line::from(Span::styled("largest free block per GPU", t.heading))];
        for (label, n) in dist {
            let share = if total == 0 { 0.0 } else { n as f64 / total as f64 };
            let style = if label == "none" { t.mem_alloc } else { t.mem_free.patch(t.figure) };
            lines.push(Line::from(vec![
                Span::styled(fmt::left(label, 6), t.dim),
                Span::raw(" "),
                Span::styled(fmt::bar(share, bar_w), style),
                Span::raw(" "),
                Span::styled(fmt::right(&n.to_string(), count_w), t.figure),
                Span::styled(fmt::right(&fmt::pct(share), 5), t.dim),
            ]));
        }
        lines
    } else {
        let mut groups = vec![vec![Span::styled("lf/GPU", t.dim)]];
        for (label, n) in dist {
            groups.push(vec![Span::styled(format!("  {label} "), t.dim), Span::styled(n.to_string(), t.figure)]);
        }
        lay_groups(groups, w)
    };
    for line in dist_lines {
        if row as usize >= h {
            return;
        }
        put(buf, inner, row, line);
        row += 1;
    }
    let mut worst: Vec<(&NodeView, &GpuView)> = nodes.iter().flat_map(|n| n.gpus.iter().map(move |g| (*n, g))).filter(|(_, g)| g.fragmentation > 0.0).collect();
    worst.sort_by(|a, b| {
        b.1.fragmentation
            .total_cmp(&a.1.fragmentation)
            .then(a.1.largest_free.cmp(&b.1.largest_free))
            .then(a.0.name.cmp(&b.0.name))
            .then(a.1.index.cmp(&b.1.index))
    });
    let mut roomy: Vec<&&NodeView> = nodes.iter().filter(|n| n.gpus.iter().any(|g| !g.exclusive && g.largest_free.0 > 0)).collect();
    let free = |n: &NodeView| n.gpus.iter().filter(|g| !g.exclusive).map(|g| u64::from(g.mem_total.0.saturating_sub(g.mem_allocated.0))).sum::<u64>();
    roomy.sort_by(|a, b| largest(b).cmp(&largest(a)).then(free(b).cmp(&free(a))).then(a.name.cmp(&b.name)));
    let gpu_w = nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0);
    let left = |row: u16| h.saturating_sub(row as usize);
    // Both lists when there is room: a third of the rows (heading included)
    // for where a large job still fits, the rest for the worst fragmented.
    let roomy_rows = if roomy.is_empty() || left(row) < 6 { 0 } else { (roomy.len() + 1).min(left(row) / 3) };
    if !worst.is_empty() && left(row) >= 2 {
        put(buf, inner, row, Line::from(Span::styled(format!("{} fragmented GPUs, worst first", worst.len()), t.heading)));
        row += 1;
        let room = left(row).saturating_sub(roomy_rows);
        let fit = if worst.len() > room { room.saturating_sub(1) } else { worst.len() };
        for (node, gpu) in worst.iter().take(fit) {
            put(buf, inner, row, shared_line(node, gpu, name_w, w, t));
            row += 1;
        }
        if fit < worst.len() {
            put(buf, inner, row, Line::from(Span::styled(format!("+{} fragmented GPUs", worst.len() - fit), t.dim)));
            row += 1;
        }
    }
    if !roomy.is_empty() && left(row) >= 2 {
        put(buf, inner, row, Line::from(Span::styled("most free memory", t.heading)));
        row += 1;
        let fit = if roomy.len() > left(row) { left(row).saturating_sub(1) } else { roomy.len() };
        for node in roomy.iter().take(fit) {
            put(buf, inner, row, node_line(node, name_w, gpu_w, w, t));
            row += 1;
        }
        if fit < roomy.len() {
            put(buf, inner, row, Line::from(Span::styled(format!("+{} nodes with free memory", roomy.len() - fit), t.dim)));
        }
    }
}

/// The node's largest free block (0 when every GPU is full or exclusive).
fn largest(n: &NodeView) -> Mib {
    n.gpus.iter().filter(|g| !g.exclusive).map(|g| g.largest_free).max().unwrap_or_default()
}

/// Groups laid over as many lines as they need, each group whole.
fn lay_groups<'a>(groups: Vec<Vec<Span<'a>>>, w: usize) -> Vec<Line<'a>> {
    let mut lines: Vec<Line<'a>> = vec![Line::default()];
    for group in groups {
        let add: usize = group.iter().map(Span::width).sum();
        let line = lines.last_mut().expect("one line at least");
        if line.width() > 0 && line.width() + add > w {
            lines.push(Line::default());
        }
        lines.last_mut().expect("one line at least").spans.extend(group);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::fleet::tests::{SIZES, assert_inside, rows, thousand_gpus};
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn memory_pane_wide() {
        let view = demo_view();
        let terminal = draw_pane(60, 10, false, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn shapes_that_fit_nowhere_are_named_under_the_cluster_line() {
        let mut view = demo_view();
        view.cluster.fragmentation.unplaceable = vec!["8×GPU".into(), "1×40.0G".into()];
        let terminal = draw_pane(80, 12, false, |p, a, b| render(&view, p, a, b));
        let text = rows(&terminal);
        assert!(text[1].contains("F(M)"), "{text:?}");
        assert!(text[2].contains("fits nowhere: 8×GPU 1×40.0G"), "{text:?}");
        assert!(text.iter().skip(3).any(|r| r.contains(" F(M) ")), "per-node F(M) column: {text:?}");
        view.cluster.fragmentation.unplaceable.clear();
        let terminal = draw_pane(80, 12, false, |p, a, b| render(&view, p, a, b));
        assert!(!rows(&terminal).iter().any(|r| r.contains("fits nowhere")));
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

    #[test]
    fn memory_pane_1000_gpus_60x20() {
        let view = thousand_gpus();
        let terminal = draw_pane(60, 20, false, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("largest free block per GPU") && text.contains("fragmented GPUs, worst first"), "{text}");
        // Worst first: the first listed GPU is at the highest fragmentation.
        let first = rows(&terminal).into_iter().skip_while(|r| !r.contains("worst first")).nth(1).unwrap();
        assert!(first.contains("frag 60%"), "{first}");
    }

    #[test]
    fn memory_pane_1000_gpus_120x30() {
        let view = thousand_gpus();
        let terminal = draw_pane(120, 30, true, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn memory_pane_1000_gpus_58x8_compact() {
        let view = thousand_gpus();
        let terminal = draw_pane(58, 8, false, |p, a, b| render(&view, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        assert!(rows(&terminal).join("").contains("none"), "every bucket, on one or two lines");
    }

    #[test]
    fn the_distribution_counts_every_gpu_of_up_nodes_once() {
        let view = thousand_gpus();
        let up: Vec<&NodeView> = view.nodes.iter().filter(|n| n.up).collect();
        let dist = distribution(&up);
        assert_eq!(dist.iter().map(|(_, n)| n).sum::<usize>(), up.iter().map(|n| n.gpus.len()).sum::<usize>());
        let exclusive = up.iter().flat_map(|n| &n.gpus).filter(|g| g.exclusive).count();
        assert!(dist[4].1 >= exclusive, "an exclusive GPU has no free block to offer");
    }

    #[test]
    fn never_draws_outside_its_rect_nor_panics() {
        let mut zero_gpus = demo_view();
        zero_gpus.nodes[1].gpus.clear();
        let mut huge = thousand_gpus();
        let template = huge.nodes.clone();
        for k in 1..10u32 {
            huge.nodes.extend(template.iter().map(|n| NodeView { id: crate::domain::ids::NodeId(n.id.0 + 1000 * k), ..n.clone() }));
        }
        for view in [demo_view(), View::default(), zero_gpus, thousand_gpus(), huge] {
            for w in SIZES {
                for h in SIZES.into_iter().filter(|h| *h <= 100) {
                    assert_inside(w, h, |p, a, b| render(&view, p, a, b));
                }
            }
        }
    }
}
