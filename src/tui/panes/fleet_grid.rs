//! The fleet pane's heat grid, drawn once nodes outnumber the pane's rows:
//! one cell per GPU, a node's GPUs kept together as a run, runs wrapped
//! across the width and told apart by a gap (or, when the gaps do not fit,
//! by alternating underlay); one cell per node (its mean util) when even
//! that does not fit, then a window of nodes around the cursor. The border
//! says which it is (`1 cell = 1 GPU`), and the cursor's node by name.
//!
//! Owns the grid's geometry and what a cell means; `fleet` decides when the
//! grid is drawn and `FleetUi` owns the cursor. Rows left under the grid name the
//! nodes in trouble, then sum up each billing mode, then explain the glyphs.
//! Draws inside its `Rect` only (its notes go on the pane's own borders).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::fleet_parts;
use super::fleet_ui::Drawn;
use super::shared::{PaneProps, frame};
use crate::domain::cluster::BillingMode;
use crate::room::View;
use crate::room::view::NodeView;
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

/// What one cell stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Grain {
    Gpu,
    Node,
}

/// A node's cells on one line: its index in `view.nodes`, the column it
/// starts at, and which of its cells (a node wider than the grid is split).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Run {
    node: usize,
    x: usize,
    from: usize,
    len: usize,
}

/// The chosen picture: grain, gaps, whether the cluster line keeps its row
/// (else its figures go on the top border), and the lines of runs.
struct Pick {
    grain: Grain,
    gap: bool,
    cluster_row: bool,
    lines: Vec<Vec<Run>>,
}

/// Cells a node takes: one per GPU (one for a node without GPUs, so that it
/// stays visible and can be selected), or one.
fn cells(node: &NodeView, grain: Grain) -> usize {
    match grain {
        Grain::Gpu => node.gpus.len().max(1),
        Grain::Node => 1,
    }
}

/// Lays the nodes out in lines of `width` cells, with a gap between nodes if
/// `gap`; `None` past `max_lines` (then only the fact matters) or for no width.
fn lay_out(nodes: &[NodeView], width: usize, grain: Grain, gap: bool, max_lines: usize) -> Option<Vec<Vec<Run>>> {
    if width == 0 {
        return nodes.is_empty().then(Vec::new);
    }
    let mut lines = Vec::new();
    let mut line: Vec<Run> = Vec::new();
    let mut x = 0;
    for (i, node) in nodes.iter().enumerate() {
        let size = cells(node, grain);
        if !line.is_empty() && x + usize::from(gap) + size > width {
            lines.push(std::mem::take(&mut line));
            x = 0;
        }
        if !line.is_empty() {
            x += usize::from(gap);
        }
        let mut from = 0;
        while from < size {
            if x == width {
                lines.push(std::mem::take(&mut line));
                x = 0;
            }
            let len = (size - from).min(width - x);
            line.push(Run { node: i, x, from, len });
            x += len;
            from += len;
        }
        if lines.len() + 1 > max_lines {
            return None;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    Some(lines)
}

/// The densest picture that shows every node, preferring a cell per GPU,
/// then gaps between nodes, then the cluster line in its own row. In a tall
/// pane, a cell per GPU that leaves `summary` rows for the lines under the
/// grid (nodes in trouble, a line per billing mode, the glyphs) goes before one that takes
/// them: at 10,000 GPUs the grid would fill the pane and hide them.
fn choose(nodes: &[NodeView], w: usize, h: usize, summary: usize) -> Pick {
    let tall = h >= 4 * summary;
    let reserves: &[usize] = if tall { &[summary, 0] } else { &[0] };
    for &reserve in reserves {
        for (gap, cluster_row) in [(true, true), (true, false), (false, true), (false, false)] {
            let rows = h.saturating_sub(usize::from(cluster_row) + reserve);
            if rows == 0 {
                continue;
            }
            if let Some(lines) = lay_out(nodes, w, Grain::Gpu, gap, rows) {
                return Pick { grain: Grain::Gpu, gap, cluster_row, lines };
            }
        }
    }
    let lines = lay_out(nodes, w, Grain::Node, false, usize::MAX).unwrap_or_default();
    // The cluster row goes to the top border only when that makes every node fit.
    let cluster_row = h >= 2 && lines.len() != h;
    Pick { grain: Grain::Node, gap: false, cluster_row, lines }
}

/// The title's figures: nodes up, and how the room buys capacity when it does.
pub(super) fn nodes_up<'a>(view: &View, t: &Theme) -> Line<'a> {
    let c = &view.cluster;
    let mode = match view.capacity.as_ref().map(|cap| cap.mode.as_str()) {
        Some("advisory") => " · capacity ADVISORY (a approves)",
        Some("control") => " · elastic",
        _ => "",
    };
    Line::from(Span::styled(format!(" {}/{} nodes up{mode} ", c.nodes_up, c.nodes_total), t.dim))
}

pub(super) fn render(view: &View, cursor: Option<usize>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) -> Drawn {
    let t = props.theme;
    let (w, h) = (area.width.saturating_sub(2) as usize, area.height.saturating_sub(2) as usize);
    // The lines under the grid: down and draining nodes, a line per billing mode, the glyphs.
    let modes = BillingMode::ALL.into_iter().filter(|m| view.nodes.iter().any(|n| n.billing == *m)).count();
    let trouble = usize::from(view.nodes.iter().any(|n| !n.up)) + usize::from(view.nodes.iter().any(fleet_parts::is_draining));
    let pick = choose(&view.nodes, w, h, trouble + modes + 1);
    let extra = if pick.cluster_row { nodes_up(view, t) } else { top_figures(view, t, w.saturating_sub(PaneId::Fleet.title().len() + 4)) };
    let inner = frame(PaneId::Fleet, Some(extra), props, area, buf);
    if inner.is_empty() {
        return Drawn::default();
    }
    let mut row = 0u16;
    if pick.cluster_row {
        put(buf, inner, 0, fleet_parts::cluster_line(view, t, w, true));
        row = 1;
    }
    let rows = (inner.height - row) as usize;
    let at = cursor.and_then(|i| pick.lines.iter().position(|l| l.iter().any(|r| r.node == i))).unwrap_or(0);
    let start = if pick.lines.len() > rows { at / rows.max(1) * rows } else { 0 };
    let shown = &pick.lines[start.min(pick.lines.len())..(start + rows).min(pick.lines.len())];
    let alt = (pick.grain == Grain::Gpu && !pick.gap).then(|| underlay(t));
    for line in shown {
        put(buf, inner, row, grid_line(view, line, pick.grain, alt, cursor, t));
        row += 1;
    }
    for line in spare_lines(view, t, w, (inner.height - row) as usize) {
        if row >= inner.height {
            break;
        }
        put(buf, inner, row, line);
        row += 1;
    }
    let first = shown.first().and_then(|l| l.first()).map(|r| r.node);
    let last = shown.last().and_then(|l| l.last()).map(|r| r.node);
    let on_screen = match (first, last) {
        (Some(a), Some(b)) => b + 1 - a,
        _ => 0,
    };
    let mut notes = vec![match pick.grain {
        Grain::Gpu => "1 cell = 1 GPU".to_string(),
        Grain::Node => "1 cell = 1 node".to_string(),
    }];
    if let (Some(a), Some(b)) = (first, last)
        && on_screen < view.nodes.len()
    {
        notes.push(format!("nodes {}–{}/{}", a + 1, b + 1, view.nodes.len()));
    }
    let cursor_spans = cursor.and_then(|i| view.nodes.get(i)).map(|n| cursor_note(n, t)).unwrap_or_default();
    bottom_notes(notes, cursor_spans, props, area, buf);
    Drawn { per_line: on_screen.div_ceil(shown.len().max(1)).max(1), on_screen }
}

/// Alternate nodes' underlay when there is no room for gaps. The theme has no
/// style of its own for it, so it borrows the header's background, or
/// underlines where the theme has no colours.
fn underlay(t: &Theme) -> Style {
    match t.header.bg {
        Some(bg) => Style::new().bg(bg),
        None => Style::new().add_modifier(Modifier::UNDERLINED),
    }
}

/// The glyph and style of cell `k` of a node: a down node is `✕` and a
/// draining one `↓` throughout (what it is about to do matters more than its
/// load); a node without GPUs is `-`.
fn cell(node: &NodeView, k: usize, grain: Grain, t: &Theme) -> (char, Style) {
    if !node.up {
        return ('✕', t.alarm);
    }
    if fleet_parts::is_draining(node) {
        return ('↓', t.warn);
    }
    match (grain, node.gpus.get(k)) {
        _ if node.gpus.is_empty() => ('-', t.dim),
        (Grain::Gpu, Some(g)) => fleet_parts::gpu_glyph(node, g, t),
        (Grain::Gpu, None) => ('-', t.dim),
        (Grain::Node, _) => match fleet_parts::node_mean(node) {
            None => ('·', t.no_data),
            Some(m) => fleet_parts::util_glyph(m, node.gpus.iter().any(|g| !g.jobs.is_empty()), t),
        },
    }
}

fn grid_line<'a>(view: &View, line: &[Run], grain: Grain, alt: Option<Style>, cursor: Option<usize>, t: &Theme) -> Line<'a> {
    let mut spans = Vec::new();
    let mut x = 0;
    for run in line {
        if run.x > x {
            spans.push(Span::raw(" ".repeat(run.x - x)));
        }
        let node = &view.nodes[run.node];
        let base = match alt {
            Some(s) if run.node % 2 == 1 => s,
            _ => Style::new(),
        };
        for k in run.from..run.from + run.len {
            let (glyph, style) = cell(node, k, grain, t);
            let mut style = base.patch(style);
            if cursor == Some(run.node) {
                style = style.patch(t.selected);
            }
            spans.push(Span::styled(glyph.to_string(), style));
        }
        x = run.x + run.len;
    }
    Line::from(spans)
}

/// The cluster's figures for the top border, when the grid needs every row:
/// trouble before the node count and the burn (the header has the burn).
fn top_figures<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let c = &view.cluster;
    let down = view.nodes.iter().filter(|n| !n.up).count();
    let draining = view.nodes.iter().filter(|n| fleet_parts::is_draining(n)).count();
    let mut groups = vec![
        vec![Span::styled(format!(" {}/{}", c.gpus_busy, c.gpus_total), t.figure), Span::styled(" busy", t.dim)],
        vec![Span::styled("  util ", t.dim), Span::styled(fmt::util_pct(c.util_mean), t.util_level(fmt::ramp_level(c.util_mean)))],
    ];
    if down > 0 {
        groups.push(vec![Span::styled(format!("  ✕{down} down"), t.alarm)]);
    }
    if draining > 0 {
        groups.push(vec![Span::styled(format!("  ↓{draining} draining"), t.warn)]);
    }
    groups.push(vec![Span::styled(format!("  {}/{} up", c.nodes_up, c.nodes_total), t.dim)]);
    groups.push(vec![Span::styled("  ", t.dim), Span::styled(c.burn.to_string(), t.figure)]);
    let mut line = fmt::fit_groups(groups, w.saturating_sub(1));
    line.spans.push(Span::raw(" "));
    line
}

/// `▶ n042 SPOT draining 87s 61%`: the cursor's node, since cells have no names.
fn cursor_note<'a>(node: &NodeView, t: &Theme) -> Vec<Span<'a>> {
    let mean = fleet_parts::node_mean(node).map(fmt::util_pct).unwrap_or_else(|| "—".into());
    vec![
        Span::styled(format!("▶ {} ", node.name), t.figure),
        Span::styled(node.billing.short(), t.billing(node.billing)),
        Span::styled(format!(" {} ", node.state), fleet_parts::state_style(node, t)),
        Span::styled(format!("{} GPU{} {mean}", node.gpus.len(), if node.gpus.len() == 1 { "" } else { "s" }), t.dim),
    ]
}

/// Notes on the bottom border, between its lines: which grain, which nodes
/// when windowed, then the cursor's node (by name alone when the rest does
/// not fit); a note that does not fit is dropped whole.
fn bottom_notes(notes: Vec<String>, cursor: Vec<Span<'_>>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    if area.height < 3 || area.width < 6 {
        return;
    }
    let t = props.theme;
    let y = area.y + area.height - 1;
    let rule = buf[(area.x + 1, y)].symbol().to_string();
    let style = if props.focused { t.border_focused } else { t.border };
    let w = (area.width - 4) as usize;
    let mut groups: Vec<Vec<Span<'_>>> = Vec::new();
    for (i, note) in notes.into_iter().enumerate() {
        let mut g = if i > 0 { vec![Span::styled(rule.clone(), style)] } else { Vec::new() };
        g.push(Span::styled(format!(" {note} "), t.dim));
        groups.push(g);
    }
    let used: usize = groups.iter().flatten().map(Span::width).sum();
    if let Some(name) = cursor.first().cloned() {
        let full = 1 + cursor.iter().map(Span::width).sum::<usize>() + 2;
        let mut g = vec![Span::styled(rule, style), Span::raw(" ")];
        if used + full <= w {
            g.extend(cursor);
        } else {
            g.push(Span { content: name.content.trim_end().to_string().into(), ..name });
        }
        g.push(Span::raw(" "));
        groups.push(g);
    }
    let line = fmt::fit_groups(groups, w);
    if line.width() <= w {
        put(buf, Rect { x: area.x + 2, y, width: w as u16, height: 1 }, 0, line);
    }
}

/// What goes under the grid while rows are left: nodes in trouble by name,
/// a line per billing mode, the glyphs' meaning, then (a fleet of several
/// GPU models) a line per model, the first to go when rows run out. With
/// fewer than `rows` for all that, the billing modes share one line.
fn spare_lines<'a>(view: &View, t: &Theme, w: usize, rows: usize) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let down: Vec<String> = view.nodes.iter().filter(|n| !n.up).map(|n| n.name.clone()).collect();
    if !down.is_empty() {
        lines.push(names_line("✕ down ", &down, " ", t.alarm, t, w));
    }
    let draining: Vec<String> = view.nodes.iter().filter(|n| fleet_parts::is_draining(n)).map(|n| format!("{} {}", n.name, n.state)).collect();
    if !draining.is_empty() {
        lines.push(names_line("↓ ", &draining, ", ", t.warn, t, w));
    }
    let billing = billing_lines(view, t, w);
    if lines.len() + billing.len() + 1 > rows && billing.len() > 1 {
        lines.push(billing_line(view, t, w));
    } else {
        lines.extend(billing);
    }
    lines.push(fmt::fit_groups(
        vec![
            vec![Span::styled("░", t.util_level(0)), Span::styled(" idle", t.dim)],
            vec![Span::styled("  ▁▄█", t.util_level(8)), Span::styled(" util", t.dim)],
            vec![Span::styled("  ·", t.no_data), Span::styled(" no sample", t.dim)],
            vec![Span::styled("  ✕", t.alarm), Span::styled(" down", t.dim)],
            vec![Span::styled("  ↓", t.warn), Span::styled(" draining", t.dim)],
        ],
        w,
    ));
    lines.extend(model_lines(view, t, w));
    lines
}

/// `✕ down n005 n042 +3`: as many whole names as fit, then how many more.
fn names_line<'a>(label: &str, names: &[String], sep: &str, style: Style, t: &Theme, w: usize) -> Line<'a> {
    let mut spans = vec![Span::styled(label.to_string(), style)];
    let mut used = fmt::width(label);
    for (i, name) in names.iter().enumerate() {
        let sep = if i > 0 { sep } else { "" };
        let rest = names.len() - i - 1;
        let tail = if rest > 0 { format!("{sep}+{rest}").len() } else { 0 };
        let add = fmt::width(sep) + fmt::width(name);
        if used + add + tail > w {
            let more = format!("{sep}+{}", names.len() - i);
            if used + fmt::width(&more) <= w {
                spans.push(Span::styled(more, t.dim));
            }
            break;
        }
        spans.push(Span::styled(format!("{sep}{name}"), t.text));
        used += add;
    }
    Line::from(spans)
}

/// The count columns' widths: nodes and GPUs of the whole fleet.
fn count_widths(view: &View) -> (usize, usize) {
    (view.nodes.len().to_string().len(), view.nodes.iter().map(|n| n.gpus.len()).sum::<usize>().to_string().len())
}

/// `SPOT  52 nodes  416 GPUs  busy 380  util 71%  ✕ 2  ↓ 1` per billing mode.
fn billing_lines<'a>(view: &View, t: &Theme, w: usize) -> Vec<Line<'a>> {
    let widths = count_widths(view);
    BillingMode::ALL
        .into_iter()
        .map(|m| (m, view.nodes.iter().filter(|n| n.billing == m).collect::<Vec<_>>()))
        .filter(|(_, nodes)| !nodes.is_empty())
        .map(|(mode, nodes)| group_line(Span::styled(fmt::left(mode.short(), 4), t.billing(mode)), &nodes, widths, t, w))
        .collect()
}

/// `RES 3647/3664 busy 77%  OD 2109/2112 77%  SPOT …`: every billing mode
/// on one line, for a pane whose grid leaves few rows.
fn billing_line<'a>(view: &View, t: &Theme, w: usize) -> Line<'a> {
    let mut groups = Vec::new();
    for mode in BillingMode::ALL {
        let nodes: Vec<&NodeView> = view.nodes.iter().filter(|n| n.billing == mode).collect();
        if nodes.is_empty() {
            continue;
        }
        let c = GroupCounts::of(&nodes);
        let first = groups.is_empty();
        let mut group = vec![
            Span::styled(format!("{}{}", if first { "" } else { "  " }, mode.short()), t.billing(mode)),
            Span::styled(format!(" {}/{}", c.busy, c.gpus), t.figure),
            Span::styled(if first { " busy" } else { "" }, t.dim),
        ];
        if let Some(u) = c.util {
            group.push(Span::styled(format!(" {}", fmt::util_pct(u)), t.util_level(fmt::ramp_level(u))));
        }
        groups.push(group);
    }
    fmt::fit_groups(groups, w)
}

/// The same per GPU model, on a fleet of several (the grid's colours do
/// not tell a T4 from an A100); nothing on a fleet of one model.
fn model_lines<'a>(view: &View, t: &Theme, w: usize) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let mut models: Vec<&str> = view.nodes.iter().map(|n| n.gpu_model.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    if models.len() > 1 {
        let label_w = models.iter().map(|m| fmt::width(m)).max().unwrap_or(4).clamp(4, 12);
        let widths = count_widths(view);
        for model in models {
            let nodes: Vec<&NodeView> = view.nodes.iter().filter(|n| n.gpu_model == model).collect();
            lines.push(group_line(Span::styled(fmt::left(model, label_w), t.text), &nodes, widths, t, w));
        }
    }
    lines
}

/// What a group of nodes adds up to: GPUs on its up nodes, those busy,
/// their mean utilization where sampled, nodes down and draining.
struct GroupCounts {
    gpus: usize,
    busy: usize,
    util: Option<f64>,
    down: usize,
    draining: usize,
}

impl GroupCounts {
    fn of(nodes: &[&NodeView]) -> GroupCounts {
        let up: Vec<&&NodeView> = nodes.iter().filter(|n| n.up).collect();
        let sampled: Vec<f64> = up.iter().flat_map(|n| &n.gpus).filter_map(|g| g.util.map(f64::from)).collect();
        GroupCounts {
            gpus: up.iter().map(|n| n.gpus.len()).sum(),
            busy: up.iter().flat_map(|n| &n.gpus).filter(|g| !g.jobs.is_empty()).count(),
            util: (!sampled.is_empty()).then(|| sampled.iter().sum::<f64>() / sampled.len() as f64),
            down: nodes.len() - up.len(),
            draining: up.iter().filter(|n| fleet_parts::is_draining(n)).count(),
        }
    }
}

/// One group's line: nodes, GPUs up, mean utilization, GPUs busy, nodes
/// down and draining; `widths` are the node and GPU counts' columns.
fn group_line<'a>(label: Span<'a>, nodes: &[&NodeView], widths: (usize, usize), t: &Theme, w: usize) -> Line<'a> {
    let (node_w, gpu_w) = widths;
    let c = GroupCounts::of(nodes);
    let mut groups = vec![
        vec![label, Span::styled(format!(" {} nodes", fmt::right(&nodes.len().to_string(), node_w)), t.dim)],
        vec![Span::styled(format!("  {} GPUs", fmt::right(&c.gpus.to_string(), gpu_w)), t.dim)],
        vec![
            Span::styled("  util ", t.dim),
            match c.util {
                Some(u) => Span::styled(fmt::right(&fmt::util_pct(u), 4), t.util_level(fmt::ramp_level(u))),
                None => Span::styled(fmt::right("—", 4), t.no_data),
            },
        ],
        vec![Span::styled(format!("  busy {}", fmt::right(&c.busy.to_string(), gpu_w)), t.dim)],
    ];
    if c.down > 0 {
        groups.push(vec![Span::styled(format!("  ✕ {}", c.down), t.alarm)]);
    }
    if c.draining > 0 {
        groups.push(vec![Span::styled(format!("  ↓ {}", c.draining), t.warn)]);
    }
    fmt::fit_groups(groups, w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::NodeId;
    use crate::tui::panes::fleet::render as fleet;
    use crate::tui::panes::fleet::tests::{rows, thousand_gpus};
    use crate::tui::panes::fleet_ui::FleetUi;
    use crate::tui::panes::testing::draw_pane;

    const GLYPHS: &str = "·░▁▂▃▄▅▆▇█✕↓-";

    #[test]
    fn fleet_grid_1000_gpus_60x20() {
        let view = thousand_gpus();
        let terminal = draw_pane(60, 20, false, |p, a, b| fleet(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let rows = rows(&terminal);
        let text = rows.join("\n");
        assert!(!text.contains("more"), "no +N more when a cell per GPU fits: {text}");
        assert!(text.contains("1 cell = 1 GPU"), "{text}");
        // Every GPU has its cell: the inner rows hold exactly 1,000 glyphs.
        let cells: usize = rows[1..19].iter().map(|r| r.chars().skip(1).take(58).filter(|c| GLYPHS.contains(*c)).count()).sum();
        assert_eq!(cells, 1000);
        // And every node's first cell is where the layout put it, with its glyph.
        let pick = choose(&view.nodes, 58, 18, 4);
        assert_eq!((pick.grain, pick.gap, pick.cluster_row), (Grain::Gpu, false, false), "packed, figures on the border");
        let t = Theme::dark();
        for (i, node) in view.nodes.iter().enumerate() {
            let (y, run) = pick.lines.iter().enumerate().find_map(|(y, l)| l.iter().find(|r| r.node == i).map(|r| (y, r))).expect("placed");
            let shown: char = rows[1 + y].chars().nth(1 + run.x).unwrap();
            assert_eq!(shown, cell(node, 0, Grain::Gpu, &t).0, "{}'s first GPU", node.name);
        }
        assert_eq!(rows[1..19].iter().map(|r| r.matches('✕').count()).sum::<usize>(), 8 * 3 + 2, "five down nodes");
        assert!(rows[0].contains("✕5 down") && rows[0].contains("↓4 draining"), "{}", rows[0]);
    }

    #[test]
    fn fleet_grid_1000_gpus_120x30() {
        let view = thousand_gpus();
        let mut ui = FleetUi::default();
        ui.move_by(&view, 42);
        let terminal = draw_pane(120, 30, true, |p, a, b| fleet(&view, &ui, p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("✕ down n011 n048 n085 n122 n159"), "{text}");
        assert!(text.contains("▶ n042 RES up 8 GPUs"), "the cursor's node by name: {text}");
        // The cursor's cells are highlighted, so it is visible without colour in the mono theme too.
        let buf = terminal.backend().buffer();
        let highlighted = buf.content.iter().filter(|c| c.bg == t_selected_bg()).count();
        assert_eq!(highlighted, 8, "n042's eight cells");
        assert!(ui.line_len() > 4, "a line of the grid holds several nodes: {}", ui.line_len());
    }

    fn t_selected_bg() -> ratatui::style::Color {
        Theme::dark().selected.bg.unwrap()
    }

    #[test]
    fn fleet_grid_1000_gpus_58x12_one_cell_per_node() {
        let view = thousand_gpus();
        let terminal = draw_pane(58, 12, false, |p, a, b| fleet(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let text = rows(&terminal).join("\n");
        assert!(text.contains("1 cell = 1 node") && !text.contains("nodes 1–"), "all 160 nodes, no window: {text}");
    }

    /// `thousand_gpus` ten times over, the copies' names suffixed `-1` … `-9`.
    fn ten_thousand_gpus() -> View {
        let base = thousand_gpus();
        let mut view = base.clone();
        for k in 1..10u32 {
            view.nodes.extend(base.nodes.iter().map(|n| NodeView { id: NodeId(n.id.0 + 1000 * k), name: format!("{}-{k}", n.name), ..n.clone() }));
        }
        view
    }

    /// Ten thousand GPUs in a tall zoomed pane: a cell per GPU still fits,
    /// packed, and the grid leaves the rows that say what it is made of
    /// rather than spend them on gaps between nodes.
    #[test]
    fn at_10000_gpus_the_grid_leaves_room_for_its_summary() {
        let view = ten_thousand_gpus();
        assert_eq!(view.nodes.iter().map(|n| n.gpus.len()).sum::<usize>(), 10_000);
        let terminal = draw_pane(200, 64, true, |p, a, b| fleet(&view, &FleetUi::default(), p, a, b));
        let text = rows(&terminal).join("\n");
        assert!(text.contains("1 cell = 1 GPU"), "{text}");
        for line in ["RES ", "OD ", "SPOT ", " idle", "A10G ", "H100 "] {
            assert!(text.contains(line), "{line:?} under the grid: {text}");
        }
    }

    /// The same fleet in a 200×60 console's pane: the grid leaves a row,
    /// and the billing modes share it.
    #[test]
    fn at_10000_gpus_in_a_short_pane_the_billing_modes_share_a_line() {
        let mut view = ten_thousand_gpus();
        // No node in trouble: those lines would come first.
        for node in &mut view.nodes {
            node.up = true;
            node.state = "up".into();
        }
        let terminal = draw_pane(200, 57, true, |p, a, b| fleet(&view, &FleetUi::default(), p, a, b));
        let rows = rows(&terminal);
        let line = rows.iter().find(|r| r.contains("RES ")).expect("a billing line");
        assert!(line.contains(" busy") && line.contains("OD ") && line.contains("SPOT "), "{line}");
    }

    #[test]
    fn past_one_cell_per_node_a_window_follows_the_cursor() {
        let base = thousand_gpus();
        let mut view = base.clone();
        for k in 1..30u32 {
            view.nodes.extend(base.nodes.iter().map(|n| NodeView { id: NodeId(n.id.0 + 1000 * k), ..n.clone() }));
        }
        let mut ui = FleetUi::default();
        let text = rows(&draw_pane(60, 20, true, |p, a, b| fleet(&view, &ui, p, a, b))).join("\n");
        assert!(text.contains("1 cell = 1 node") && text.contains("nodes 1–986/4800"), "{text}");
        ui.move_by(&view, isize::MAX);
        let text = rows(&draw_pane(60, 20, true, |p, a, b| fleet(&view, &ui, p, a, b))).join("\n");
        assert!(text.contains("–4800/4800") && text.contains("▶ n159"), "the window moved to the cursor: {text}");
        assert_eq!(ui.page_len(), 4800 - 4 * 986, "the last page holds what is left");
    }

    #[test]
    fn layout_keeps_a_node_together_and_splits_only_what_is_wider_than_the_grid() {
        let view = thousand_gpus();
        let lines = lay_out(&view.nodes[..4], 10, Grain::Gpu, true, usize::MAX).unwrap();
        let runs: Vec<Vec<(usize, usize, usize)>> = lines.iter().map(|l| l.iter().map(|r| (r.node, r.x, r.len)).collect()).collect();
        assert_eq!(runs, [vec![(0, 0, 8)], vec![(1, 0, 8)], vec![(2, 0, 8), (3, 9, 1)]]);
        let lines = lay_out(&view.nodes[..2], 5, Grain::Gpu, false, usize::MAX).unwrap();
        assert_eq!(lines.len(), 4, "8-GPU nodes in 5 columns: split");
        assert!(lay_out(&view.nodes, 58, Grain::Gpu, true, 19).is_none(), "20 lines with gaps");
        assert_eq!(lay_out(&view.nodes, 58, Grain::Gpu, true, 20).map(|l| l.len()), Some(20));
        assert!(lay_out(&view.nodes, 0, Grain::Node, false, usize::MAX).is_none());
    }

    #[test]
    fn the_grid_reads_without_colour() {
        let view = thousand_gpus();
        let mono = Theme::mono();
        let mut ui = FleetUi::default();
        ui.move_by(&view, 5);
        let area = Rect::new(0, 0, 60, 20);
        let mut buf = Buffer::empty(area);
        fleet(&view, &ui, PaneProps { theme: &mono, focused: true }, area, &mut buf);
        use ratatui::style::Color;
        assert!(buf.content.iter().all(|c| (c.fg, c.bg) == (Color::Reset, Color::Reset)), "no colour in mono");
        let reversed = buf.content.iter().filter(|c| c.modifier.contains(Modifier::REVERSED)).count();
        assert_eq!(reversed, 8, "n005's eight cells in reverse video");
        let underlined = buf.content.iter().filter(|c| c.modifier.contains(Modifier::UNDERLINED) && GLYPHS.contains(c.symbol())).count();
        assert!(underlined >= 360, "every other node (80 of them, 360 GPUs) underlaid, so packed nodes stay apart: {underlined}");
    }
}
