//! The fleet pane drilled into one node: a header (name, billing mode,
//! instance type, zone, price and max price, state, GPU model), then one row
//! per GPU: util as a bar and %, memory as a bar (used `█`, allocated but
//! not in use `▓`, free `░`) with used/allocated/total, largest free block,
//! fragmentation, and its jobs by id and name; then the node's totals.
//!
//! Owns this picture only: `FleetUi` owns which node and how to get out (the
//! title says `Esc back`). Reads the node from `View::nodes` and job names
//! from `View::jobs`; a node that has left the fleet is said so, not guessed.
//! Draws inside its `Rect` only.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::fleet_parts;
use super::memory::mem_bar;
use super::shared::{Col, PaneProps, fit_columns, frame, header_line, table_line_parts};
use crate::domain::ids::NodeId;
use crate::domain::units::Mib;
use crate::room::View;
use crate::room::view::{GpuView, NodeView};
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

/// Cells of the util bar; the `%` follows in four more.
const UTIL_BAR: usize = 5;

pub(super) fn render(view: &View, id: NodeId, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let node = view.nodes.iter().find(|n| n.id == id);
    let name = node.map_or_else(|| format!("node #{}", id.0), |n| n.name.clone());
    let extra = Line::from(vec![Span::styled(format!(" {name} "), t.figure), Span::styled("· Esc back ", t.dim)]);
    let inner = frame(PaneId::Fleet, Some(extra), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let Some(node) = node else {
        put(buf, inner, 0, Line::from(Span::styled(format!("{name} has left the fleet — Esc back"), t.warn)));
        return;
    };
    let w = inner.width as usize;
    let h = inner.height as usize;
    let mut row = 0u16;
    let head_lines = if h >= node.gpus.len() + 4 { 2 } else { 1 };
    for line in wrap_groups(header_groups(node, t), w, head_lines) {
        put(buf, inner, row, line);
        row += 1;
    }
    if node.gpus.is_empty() {
        put(buf, inner, row, Line::from(Span::styled("no GPUs on this node", t.dim)));
        return;
    }
    let mut cols = vec![
        Col::right("GPU", 3, 0),
        Col::left("UTIL", UTIL_BAR + 5, 0),
        Col::flex("MEMORY", 6, 16, 3),
        Col::right("USED/ALLOC/TOTAL", 17, 5),
        Col::right("LFREE", 6, 1),
        Col::right("FRAG", 4, 4),
        Col::flex("JOBS", 6, 80, 2),
    ];
    // Live sources say more (temperature, power, clock) and can go stale.
    if node.gpus.iter().any(|g| g.health.is_some() || g.stale) {
        cols.push(Col::left("HEALTH", 26, 6));
    }
    let widths = fit_columns(&cols, w);
    put(buf, inner, row, header_line(&cols, &widths, t.heading));
    row += 1;
    let rows = h.saturating_sub(row as usize);
    let hidden = node.gpus.len().saturating_sub(rows);
    let shown = if hidden > 0 { rows.saturating_sub(1) } else { node.gpus.len() };
    for gpu in node.gpus.iter().take(shown) {
        put(buf, inner, row, table_line_parts(&cols, &widths, gpu_cells(view, node, gpu, &widths, t)));
        row += 1;
    }
    if hidden > 0 {
        let more = node.gpus.len() - shown;
        put(buf, inner, row, Line::from(Span::styled(format!("+{more} GPUs — z to zoom"), t.dim)));
    } else {
        put(buf, inner, row, totals_line(node, t, w));
    }
}

/// Most telling first, since what does not fit is dropped: the price against
/// the max price and the state before where the node is.
fn header_groups<'a>(node: &NodeView, t: &Theme) -> Vec<Vec<Span<'a>>> {
    let mut price = vec![Span::styled("  ", t.dim), Span::styled(fleet_parts::price_text(node), fleet_parts::price_style(node, t))];
    if let Some(max) = node.max_price {
        if node.up && node.price.is_some_and(|p| p > max) {
            price.push(Span::styled(format!(" ▲ over max {max}"), t.alarm));
        } else {
            price.push(Span::styled(format!(" (max {max})"), t.dim));
        }
    }
    vec![
        vec![Span::styled(node.name.clone(), t.figure)],
        vec![Span::styled("  ", t.dim), Span::styled(node.billing.label(), t.billing(node.billing))],
        price,
        vec![Span::styled("  ", t.dim), Span::styled(node.state.clone(), fleet_parts::state_style(node, t))],
        vec![Span::styled(format!("  {}", node.instance_type), t.text)],
        vec![Span::styled(format!("  {}", node.zone), t.dim)],
        vec![Span::styled(format!("  {}× {}", node.gpus.len(), node.gpu_model), t.dim)],
    ]
}

/// Groups laid over up to `max_lines` lines, each group whole; a group that
/// fits on no line is dropped (a figure is never cut).
fn wrap_groups<'a>(groups: Vec<Vec<Span<'a>>>, w: usize, max_lines: usize) -> Vec<Line<'a>> {
    let mut lines: Vec<(Vec<Span<'a>>, usize)> = vec![(Vec::new(), 0)];
    for mut group in groups {
        let add: usize = group.iter().map(Span::width).sum();
        let (line, used) = lines.last_mut().expect("one line at least");
        if *used == 0 || *used + add <= w {
            *used += add;
            line.append(&mut group);
            continue;
        }
        if lines.len() == max_lines {
            continue;
        }
        // A new line does not start with the gap that separated the group.
        if let Some(first) = group.first_mut() {
            first.content = first.content.trim_start().to_string().into();
        }
        let add = group.iter().map(Span::width).sum();
        lines.push((group, add));
    }
    lines.into_iter().map(|(spans, _)| Line::from(spans)).collect()
}

fn gpu_cells<'a>(view: &View, node: &NodeView, g: &GpuView, widths: &[Option<usize>], t: &Theme) -> Vec<Vec<Span<'a>>> {
    let util = match g.util {
        Some(u) if node.up => {
            // `+ 0.0` turns a negative zero into `0%`, not `-0%`.
            let u = f64::from(u).max(0.0) + 0.0;
            let (_, style) = fleet_parts::util_glyph(u, !g.jobs.is_empty(), t);
            // The last figure of a stale GPU is kept but shown as old.
            let style = if g.stale { t.no_data } else { style };
            vec![Span::styled(fmt::bar(u / 100.0, UTIL_BAR).replace(' ', "░"), style), Span::styled(fmt::right(&fmt::util_pct(u), 5), style)]
        }
        _ => {
            let (glyph, style) = if node.up { ('·', t.no_data) } else { ('✕', t.alarm) };
            vec![Span::styled(fmt::left(&glyph.to_string(), UTIL_BAR), style), Span::styled(fmt::right("—", 5), t.no_data)]
        }
    };
    let used = g.mem_used.map_or_else(|| "—".to_string(), |m| m.to_string());
    let figures = format!("{used}/{}/{}", g.mem_allocated, g.mem_total);
    let jobs_w = widths.get(6).copied().flatten().unwrap_or(0);
    vec![
        vec![Span::styled(g.index.to_string(), t.dim)],
        util,
        mem_bar(g, widths.get(2).copied().flatten().unwrap_or(0), t),
        vec![Span::styled(figures, t.text)],
        vec![Span::styled(free_text(node, g), t.figure)],
        vec![Span::styled(fmt::pct(g.fragmentation), t.grade(g.fragmentation, 0.25, 0.5))],
        vec![Span::styled(jobs_text(view, g, jobs_w), t.text)],
        health_cell(g, t),
    ]
}

/// `61°C 312W 1410MHz 2p`, what of it the source reported; `stale` first
/// when the source failed after the last sample.
fn health_cell<'a>(g: &GpuView, t: &Theme) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    if g.stale {
        spans.push(Span::styled("stale ", t.warn));
    }
    if let Some(h) = &g.health {
        let mut parts = Vec::new();
        if let Some(c) = h.temp_c {
            parts.push(format!("{c:.0}°C"));
        }
        if let Some(w) = h.power_w {
            parts.push(format!("{w:.0}W"));
        }
        if let Some(mhz) = h.sm_clock_mhz {
            parts.push(format!("{mhz}MHz"));
        }
        if let Some(p) = h.processes {
            parts.push(format!("{p}p"));
        }
        if h.mig_instances > 0 {
            parts.push(format!("MIG×{}", h.mig_instances));
        }
        let hot = h.temp_c.is_some_and(|c| c >= 85.0);
        spans.push(Span::styled(parts.join(" "), if hot { t.warn } else { t.text }));
    }
    spans
}

/// The largest free block; `—` where nothing can be placed (a GPU held
/// exclusively, a node that is down).
fn free_text(node: &NodeView, g: &GpuView) -> String {
    if g.exclusive || !node.up { "—".into() } else { g.largest_free.to_string() }
}

/// `j6 tokenizer-bench, j7 embed-batch` when it fits in `w`; else one job's
/// name cut, or the ids alone, as many as fit and `+N`: an id is never cut.
fn jobs_text(view: &View, g: &GpuView, w: usize) -> String {
    let name = |id: crate::domain::ids::JobId| -> Option<String> {
        match id.slurm_id() {
            // A Slurm job: its name and account, from the Slurm mirror.
            Some(slurm) => view.slurm.as_ref()?.jobs.iter().find(|j| j.id == slurm).map(|j| format!("{} ({})", j.name, j.account)),
            None => view.jobs.iter().find(|j| j.id == id).map(|j| j.name.clone()),
        }
    };
    let full: Vec<String> = g
        .jobs
        .iter()
        .map(|id| match name(*id) {
            Some(n) => format!("{id} {n}"),
            None => id.to_string(),
        })
        .collect();
    let joined = full.join(", ");
    if fmt::width(&joined) <= w {
        return joined;
    }
    if let [id] = g.jobs.as_slice() {
        let id_text = id.to_string();
        return match name(*id) {
            Some(n) if w >= id_text.len() + 3 => format!("{id_text} {}", fmt::trunc(&n, w - id_text.len() - 1)),
            _ => id_text,
        };
    }
    let mut out = String::new();
    for (i, id) in g.jobs.iter().enumerate() {
        let piece = if i > 0 { format!(" {id}") } else { id.to_string() };
        let rest = g.jobs.len() - i - 1;
        let tail = if rest > 0 { format!(" +{rest}").len() } else { 0 };
        if out.len() + piece.len() + tail > w {
            let more = format!("{}+{}", if i > 0 { " " } else { "" }, g.jobs.len() - i);
            if out.len() + more.len() <= w {
                out.push_str(&more);
            }
            break;
        }
        out.push_str(&piece);
    }
    out
}

/// `6/8 GPUs busy  util 61%  mem 96.0G/128.0G  largest free 16.0G`.
fn totals_line<'a>(node: &NodeView, t: &Theme, w: usize) -> Line<'a> {
    let busy = node.gpus.iter().filter(|g| !g.jobs.is_empty()).count();
    let alloc = Mib(node.gpus.iter().map(|g| g.mem_allocated.0).sum());
    let total = Mib(node.gpus.iter().map(|g| g.mem_total.0).sum());
    let largest = node.gpus.iter().filter(|g| !g.exclusive && node.up).map(|g| g.largest_free).max();
    let mut groups = vec![
        vec![Span::styled(format!("{busy}/{}", node.gpus.len()), t.figure), Span::styled(" GPUs busy", t.dim)],
        vec![
            Span::styled("  util ", t.dim),
            match fleet_parts::node_mean(node) {
                Some(m) => Span::styled(fmt::util_pct(m), t.util_level(fmt::ramp_level(m))),
                None => Span::styled("—", t.no_data),
            },
        ],
        vec![Span::styled("  mem ", t.dim), Span::styled(format!("{alloc}/{total}"), t.figure)],
    ];
    if let Some(l) = largest {
        groups.push(vec![Span::styled("  largest free ", t.dim), Span::styled(l.to_string(), t.figure)]);
    }
    fmt::fit_groups(groups, w)
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::domain::ids::NodeId;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::fleet::render as fleet;
    use crate::tui::panes::fleet::tests::{rows, thousand_gpus};
    use crate::tui::panes::fleet_ui::FleetUi;
    use crate::tui::panes::testing::draw_pane;

    fn drilled(view: &crate::room::View, id: u32) -> FleetUi {
        let mut ui = FleetUi::default();
        let i = view.nodes.iter().position(|n| n.id == NodeId(id)).unwrap();
        ui.move_by(view, i as isize);
        ui.enter(view);
        ui
    }

    /// The demo room as live sources leave it: node n01's health read by
    /// NVML, then its dcgm endpoint timing out (GPUs 0–3 stale).
    pub(crate) fn live_view() -> crate::room::View {
        use crate::domain::event::{Event, GpuHealth};
        use crate::domain::ids::GpuRef;
        let mut room = crate::tui::fixture::demo_room();
        let at = room.now().unwrap_or_default();
        let gpu = |index| GpuRef { node: NodeId(1), index };
        let readings = (0..8)
            .map(|i| GpuHealth {
                gpu: gpu(i),
                temp_c: Some(if i == 5 { 88.0 } else { 61.0 + f32::from(i) }),
                power_w: Some(290.0 + 3.0 * f32::from(i)),
                sm_clock_mhz: Some(1410),
                mem_clock_mhz: Some(877),
                processes: Some(1),
                mig_instances: 0,
            })
            .collect();
        room.apply(at, &Event::GpuHealth { readings });
        room.apply(at, &Event::SourceStatus { source: "nvml n01".into(), ok: true, detail: "8 GPUs".into(), stale: vec![] });
        let stale = (0..4).map(gpu).collect();
        let down = Event::SourceStatus { source: "dcgm http://n01:9400/metrics".into(), ok: false, detail: "timed out after 2 s".into(), stale };
        room.apply(at, &down);
        room.view()
    }

    #[test]
    fn fleet_drill_down_live_node_with_stale_gpus() {
        let view = live_view();
        let ui = drilled(&view, 1);
        let terminal = draw_pane(120, 12, true, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("HEALTH") && text.contains("stale 61°C 290W 1410MHz 1p"), "{text}");
        assert!(text.contains("68°C 311W"), "a fresh GPU's health: {text}");
        let fleet_rows = draw_pane(80, 12, true, |p, a, b| fleet(&view, &FleetUi::default(), p, a, b));
        let text = rows(&fleet_rows).join("\n");
        assert!(text.contains("? 4 stale"), "the cluster line counts stale GPUs: {text}");
    }

    #[test]
    fn fleet_drill_down_shared_node_wide() {
        let view = demo_view();
        let ui = drilled(&view, 2);
        let terminal = draw_pane(100, 9, true, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("n02 · Esc back"), "{text}");
        assert!(text.contains("j6 tokenizer-bench"), "jobs by name: {text}");
    }

    #[test]
    fn fleet_drill_down_narrow_spot_node() {
        let view = demo_view();
        let ui = drilled(&view, 4);
        let terminal = draw_pane(58, 12, true, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("draining 87s") && text.contains("$8.45/h ▲ over max $8.00/h"), "{text}");
    }

    #[test]
    fn fleet_drill_down_down_node_and_too_many_gpus() {
        let view = demo_view();
        let ui = drilled(&view, 5);
        let terminal = draw_pane(60, 7, false, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains('✕') && text.contains("down") && text.contains("+6 GPUs"), "{text}");
    }

    #[test]
    fn fleet_drill_down_ids_without_names_never_cut() {
        let view = thousand_gpus();
        let ui = drilled(&view, 10);
        let terminal = draw_pane(72, 12, true, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        for w in [30u16, 44, 58] {
            let text = rows(&draw_pane(w, 12, true, |p, a, b| fleet(&view, &ui, p, a, b))).join("\n");
            assert!(!text.contains("j…") && !text.contains("…"), "nothing cut at {w}: {text}");
        }
    }
}
