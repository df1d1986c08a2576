//! Fleet pane: per-GPU utilization as a heat grid, one row per node (name,
//! billing mode, instance type, zone, price, state, one glyph per GPU, mean util),
//! under a cluster line (GPUs busy, mean util, burn, nodes up).
//!
//! Draws from `View::cluster` and `View::nodes` only. Each GPU's glyph and
//! colour both encode its utilization (`·` no sample, `░` idle, `▁`…`█`),
//! so the grid reads without colour. Must not draw outside its `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{PaneProps, frame, widest};
use crate::core::view::{GpuView, NodeView};
use crate::core::View;
use crate::tui::app::PaneId;
use crate::tui::fmt::{self, put};
use crate::tui::theme::Theme;

/// The fleet pane's UI state, held by `App`: which node is selected (↑↓
/// while the fleet pane has the focus) and which one is drilled into (Enter,
/// Esc leaves). Both follow the node by id as the view changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetUi {
    pub cursor: Option<crate::core::ids::NodeId>,
    pub drill: Option<crate::core::ids::NodeId>,
}

pub fn render(view: &View, _ui: &FleetUi, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let c = &view.cluster;
    let extra = Line::from(Span::styled(format!(" {}/{} nodes up ", c.nodes_up, c.nodes_total), t.dim));
    let inner = frame(PaneId::Fleet, Some(extra), props, area, buf);
    if inner.is_empty() {
        return;
    }
    put(buf, inner, 0, cluster_line(view, t, inner.width as usize));
    let rows = inner.height.saturating_sub(1) as usize;
    if rows == 0 {
        return;
    }
    if view.nodes.is_empty() {
        put(buf, inner, 1, Line::from(Span::styled("no nodes yet", t.dim)));
        return;
    }
    let shown = pick_rows(&view.nodes, rows);
    let cols = Columns::fit(&view.nodes, inner.width as usize);
    let mut row = 1u16;
    for (node, _) in view.nodes.iter().zip(&shown).filter(|(_, s)| **s) {
        put(buf, inner, row, node_line(node, &cols, t));
        row += 1;
    }
    let hidden: Vec<&NodeView> = view.nodes.iter().zip(&shown).filter(|(_, s)| !**s).map(|(n, _)| n).collect();
    if !hidden.is_empty() {
        put(buf, inner, row, more_line(&hidden, t));
    }
}

/// Which nodes get a row when not all fit: nodes in trouble (draining,
/// down) first, then the others in order; one row is kept for "+N more".
fn pick_rows(nodes: &[NodeView], rows: usize) -> Vec<bool> {
    if nodes.len() <= rows {
        return vec![true; nodes.len()];
    }
    let mut budget = rows.saturating_sub(1);
    let mut shown = vec![false; nodes.len()];
    let trouble = |n: &NodeView| !n.up || n.state != "up";
    for pass in [true, false] {
        for (i, n) in nodes.iter().enumerate() {
            if budget > 0 && !shown[i] && trouble(n) == pass {
                shown[i] = true;
                budget -= 1;
            }
        }
    }
    shown
}

fn cluster_line<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let c = &view.cluster;
    fmt::fit_groups(
        vec![
            vec![Span::styled(format!("{}/{}", c.gpus_busy, c.gpus_total), t.figure), Span::styled(" GPUs busy", t.dim)],
            vec![Span::styled("  util ", t.dim), Span::styled(fmt::util_pct(c.util_mean), t.util_level(fmt::ramp_level(c.util_mean)))],
            vec![Span::styled("  burn ", t.dim), Span::styled(c.burn.to_string(), t.figure)],
        ],
        w,
    )
}

/// Column widths for the node rows; instance type, zone and price only where they fit.
struct Columns {
    name: usize,
    itype: Option<usize>,
    zone: Option<usize>,
    price: Option<usize>,
    state: usize,
    /// Cells per GPU: 2 (glyph and a gap) when there is room, else 1.
    cell: usize,
    gpus: usize,
}

impl Columns {
    fn fit(nodes: &[NodeView], avail: usize) -> Columns {
        let name = widest(nodes.iter().map(|n| n.name.as_str()), 3, 12);
        let itype = widest(nodes.iter().map(|n| n.instance_type.as_str()), 4, 14);
        let zone = widest(nodes.iter().map(|n| n.zone.as_str()), 4, 12);
        let state = widest(nodes.iter().map(|n| n.state.as_str()), 4, 13);
        let gpus = nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0);
        // name mode state cells util, with a space after each but the last.
        let base = |cell: usize| name + 1 + 4 + 1 + state + 1 + gpus * cell + 1 + 4;
        let price = widest(nodes.iter().map(price_text).collect::<Vec<_>>().iter().map(String::as_str), 4, 12);
        let mut cols = Columns { name, itype: None, zone: None, price: None, state, cell: 1, gpus };
        let mut used = base(1);
        if used + itype < avail {
            cols.itype = Some(itype);
            used += itype + 1;
        }
        if used + gpus <= avail {
            cols.cell = 2;
            used += gpus;
        }
        if used + zone < avail {
            cols.zone = Some(zone);
            used += zone + 1;
        }
        if used + price < avail {
            cols.price = Some(price);
            used += price + 1;
        }
        if used > avail {
            // Too narrow even so: the name gives way, never the figures.
            cols.name = name.saturating_sub(used - avail).max(2);
        }
        cols
    }
}

fn node_line<'a>(node: &NodeView, cols: &Columns, t: &Theme) -> Line<'a> {
    let mut spans = vec![
        Span::styled(fmt::left(&node.name, cols.name), if node.up { t.text } else { t.dim }),
        Span::raw(" "),
        Span::styled(fmt::left(node.billing.short(), 4), t.billing(node.billing)),
        Span::raw(" "),
    ];
    if let Some(w) = cols.itype {
        spans.push(Span::styled(fmt::left(&node.instance_type, w), t.dim));
        spans.push(Span::raw(" "));
    }
    if let Some(w) = cols.zone {
        spans.push(Span::styled(fmt::left(&node.zone, w), t.dim));
        spans.push(Span::raw(" "));
    }
    if let Some(w) = cols.price {
        let over = matches!((node.price, node.max_price), (Some(p), Some(m)) if p > m);
        let style = if !node.up { t.dim } else if over { t.alarm } else { t.text };
        spans.push(Span::styled(fmt::right(&price_text(node), w), style));
        spans.push(Span::raw(" "));
    }
    let state_style = if !node.up {
        t.alarm
    } else if node.state == "up" {
        t.dim
    } else {
        t.warn
    };
    spans.push(Span::styled(fmt::left(&node.state, cols.state), state_style));
    spans.push(Span::raw(" "));
    for gpu in &node.gpus {
        let (glyph, style) = gpu_glyph(node, gpu, t);
        let mut cell = glyph.to_string();
        if cols.cell == 2 {
            cell.push(' ');
        }
        spans.push(Span::styled(cell, style));
    }
    let missing = cols.gpus.saturating_sub(node.gpus.len()) * cols.cell;
    spans.push(Span::raw(" ".repeat(missing + usize::from(cols.cell == 1))));
    let sampled: Vec<f64> = node.gpus.iter().filter_map(|g| g.util.map(f64::from)).collect();
    let mean = (!sampled.is_empty()).then(|| sampled.iter().sum::<f64>() / sampled.len() as f64);
    spans.push(match mean {
        Some(m) => Span::styled(fmt::right(&fmt::util_pct(m), 4), t.util_level(fmt::ramp_level(m))),
        None => Span::styled(fmt::right("—", 4), t.no_data),
    });
    Line::from(spans)
}

/// What the node costs per hour now; nothing for a node that is down.
fn price_text(node: &NodeView) -> String {
    match node.price {
        Some(p) if node.up => p.to_string(),
        _ => "—".into(),
    }
}

/// The glyph and style of one GPU: `✕` on a down node, `·` before the first
/// sample, else the ramp; an allocated GPU doing nothing is flagged as waste.
fn gpu_glyph(node: &NodeView, gpu: &GpuView, t: &Theme) -> (char, ratatui::style::Style) {
    if !node.up {
        return ('✕', t.no_data);
    }
    match gpu.util {
        None => ('·', t.no_data),
        Some(u) => {
            let u = f64::from(u);
            let level = fmt::ramp_level(u);
            let glyph = if level == 0 { '░' } else { fmt::RAMP[level] };
            let style = if !gpu.jobs.is_empty() && u < 5.0 { t.warn } else { t.util_level(level) };
            (glyph, style)
        }
    }
}

fn more_line<'a>(hidden: &[&NodeView], t: &Theme) -> Line<'a> {
    let down = hidden.iter().filter(|n| !n.up).count();
    let other = hidden.iter().filter(|n| n.up && n.state != "up").count();
    let mut text = format!("+{} more", hidden.len());
    let mut notes = Vec::new();
    if other > 0 {
        notes.push(format!("{other} draining"));
    }
    if down > 0 {
        notes.push(format!("{down} down"));
    }
    if !notes.is_empty() {
        text.push_str(&format!(" ({})", notes.join(", ")));
    }
    text.push_str(" — z to zoom");
    Line::from(Span::styled(text, if down + other > 0 { t.warn } else { t.dim }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn fleet_pane_wide() {
        let view = demo_view();
        let terminal = draw_pane(72, 9, true, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn fleet_pane_narrow_with_more_nodes_than_rows() {
        let view = demo_view();
        let terminal = draw_pane(44, 6, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn nodes_in_trouble_keep_their_row_and_every_gpu_state_has_a_glyph() {
        let view = demo_view();
        let shown = pick_rows(&view.nodes, 3);
        let names: Vec<&str> = view.nodes.iter().zip(&shown).filter(|(_, s)| **s).map(|(n, _)| n.name.as_str()).collect();
        assert_eq!(names, ["n04", "n05"], "draining and down first, one row left for +N");
        let terminal = draw_pane(72, 9, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        let rows: Vec<String> = (0..9)
            .map(|y| (0..72).map(|x| terminal.backend().buffer()[(x, y)].symbol().to_string()).collect())
            .collect();
        let row = |name: &str| rows.iter().find(|r| r.contains(name)).cloned().unwrap_or_default();
        assert!(row("n05").contains("✕") && row("n05").contains("down"));
        assert!(row("n06").contains("·"), "no sample yet");
        assert!(row("n04").contains("draining 87s"));
        assert!(row("n02").contains("░"), "an idle GPU is visible, not blank");
    }

    #[test]
    fn many_nodes_degrade_to_plus_n_more() {
        let mut view = demo_view();
        let template = view.nodes[0].clone();
        for i in 0..40 {
            view.nodes.push(NodeView { name: format!("x{i:02}"), ..template.clone() });
        }
        let terminal = draw_pane(60, 8, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        let text: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(text.contains("+42 more — z to zoom"), "{text}");
        assert!(text.contains("draining 87s") && text.contains("down"), "trouble stays on screen: {text}");
    }

    #[test]
    fn fleet_pane_empty_view() {
        let terminal = draw_pane(40, 4, false, |p, a, b| render(&View::default(), &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }
}
