//! Fleet pane: the cluster at a glance, from a handful of nodes to 1,000+
//! GPUs, and the drill-down into one node.
//!
//! Three pictures, chosen by what fits: while every node gets a row, a table
//! (name, billing mode, instance type, zone, price, state, a glyph per GPU,
//! mean util) under a cluster line; once they do not, the heat grid of
//! `fleet_grid` (a cell per GPU, or per node); drilled into a node, its GPUs
//! one per row (`fleet_detail`). The cursor and the drill-down are
//! `FleetUi`'s (`fleet_ui`), the pieces the three pictures share
//! `fleet_parts`'; this file only chooses the picture and draws the table.
//!
//! Draws from `View::cluster` and `View::nodes` (and `View::jobs`, for names
//! in the detail) only. Every GPU state has a glyph of its own (`·` no
//! sample, `░` idle, `▁`…`█`, `✕` down, `↓` draining in the grid), so the
//! pane reads without colour. Must not draw outside its `Rect` nor change the
//! `View`; the only thing written while drawing is the drawn shape in
//! `FleetUi`, so that paging moves by what is on screen.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::fleet_parts::{cluster_line, gpu_glyph, node_mean, price_style, price_text, state_style};
use super::fleet_ui::{Drawn, FleetUi};
use super::shared::{PaneProps, frame, widest};
use super::{fleet_detail, fleet_grid};
use crate::room::View;
use crate::room::view::NodeView;
use crate::tui::fmt::{self, put};
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

pub fn render(view: &View, ui: &FleetUi, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    if let Some(id) = ui.drill {
        ui.set_drawn(Drawn { per_line: 1, on_screen: 1 });
        fleet_detail::render(view, id, props, area, buf);
        return;
    }
    let cursor = if props.focused { ui.cursor_index(view) } else { None };
    let rows = area.height.saturating_sub(2) as usize;
    let drawn = if view.nodes.is_empty() || view.nodes.len() + capacity_lines(view, props.theme).len() < rows {
        table(view, cursor, props, area, buf)
    } else {
        fleet_grid::render(view, cursor, props, area, buf)
    };
    ui.set_drawn(drawn);
}

/// One row per node under the cluster line; only called when all rows fit.
fn table(view: &View, cursor: Option<usize>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) -> Drawn {
    let t = props.theme;
    let inner = frame(PaneId::Fleet, Some(fleet_grid::nodes_up(view, t)), props, area, buf);
    if inner.is_empty() {
        return Drawn::default();
    }
    put(buf, inner, 0, cluster_line(view, t, inner.width as usize, false));
    if inner.height < 2 {
        return Drawn::default();
    }
    // What elastic capacity is doing, under the cluster line.
    let mut top = 1u16;
    for line in capacity_lines(view, t) {
        if top + 1 >= inner.height && !view.nodes.is_empty() {
            break;
        }
        put(buf, inner, top, line);
        top += 1;
    }
    if view.nodes.is_empty() {
        // On a Slurm site the GPUs are Slurm's nodes: say where they are.
        let empty = match (&view.slurm, &view.capacity) {
            (Some(s), _) => format!("no nodes of gpuroom's own: Slurm's {} node(s) and {} GPUs are in the Slurm pane (7)", s.nodes.len(), s.totals().gpus),
            (None, Some(_)) => "no nodes yet: the room buys them from its pools when work waits".to_string(),
            (None, None) => "no nodes yet".to_string(),
        };
        put(buf, inner, top, Line::from(Span::styled(empty, t.dim)));
        return Drawn::default();
    }
    // A gutter for the cursor's `▶` only while it is drawn, so that an
    // unfocused table keeps every cell for the figures.
    let gutter = usize::from(props.focused);
    let cols = Columns::fit(&view.nodes, (inner.width as usize).saturating_sub(gutter));
    for (i, node) in view.nodes.iter().enumerate() {
        let mut line = node_line(node, &cols, t);
        if props.focused {
            let here = cursor == Some(i);
            line.spans.insert(0, Span::styled(if here { "▶" } else { " " }, t.figure));
            if here {
                line = line.style(t.selected);
            }
        }
        put(buf, inner, top + i as u16, line);
    }
    Drawn { per_line: 1, on_screen: view.nodes.len() }
}

/// Elastic capacity's news, a line each: proposals waiting for a yes (the
/// oldest is what `a` approves), launches on their way, nodes going back.
pub fn capacity_lines<'a>(view: &View, t: &Theme) -> Vec<Line<'a>> {
    let Some(cap) = &view.capacity else { return Vec::new() };
    let mut lines = Vec::new();
    for (i, p) in cap.proposals.iter().take(2).enumerate() {
        let key = if i == 0 { "  a approve" } else { "" };
        lines.push(Line::from(vec![
            Span::styled(format!("? #{} ", p.id), t.warn),
            Span::styled(format!("would {}", p.text), t.text),
            Span::styled(key, t.key),
        ]));
    }
    for l in cap.launches.iter().take(2) {
        let when = match (l.eta, l.booting, l.unanswered) {
            (Some(eta), _, _) => format!(", up in {eta}"),
            (None, _, n) if n > 0 => ", asked".to_string(),
            _ => String::new(),
        };
        let price = l.max_price.map(|p| format!(", max {p}")).unwrap_or_default();
        lines.push(Line::from(vec![Span::styled("↑ ", t.ok), Span::styled(format!("launching {} × {}{price} {}{when}", l.count, l.pool, l.reason), t.text)]));
    }
    if let Some((node, why)) = cap.releasing.first() {
        lines.push(Line::from(vec![Span::styled("↓ ", t.dim), Span::styled(format!("giving back {node} ({why})"), t.dim)]));
    }
    let more = cap.proposals.len().saturating_sub(2) + cap.launches.len().saturating_sub(2) + cap.releasing.len().saturating_sub(1);
    if more > 0 {
        lines.push(Line::from(Span::styled(format!("  +{more} more (:capacity approve N)"), t.dim)));
    }
    lines
}

/// The node's mean util as `61%` in four cells, `—` without samples.
fn mean_span<'a>(node: &NodeView, t: &Theme) -> Span<'a> {
    match node_mean(node) {
        Some(m) => Span::styled(fmt::right(&fmt::util_pct(m), 4), t.util_level(fmt::ramp_level(m))),
        None => Span::styled(fmt::right("—", 4), t.no_data),
    }
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
        Span::styled(fmt::left_name(&node.name, cols.name), if node.up { t.text } else { t.dim }),
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
        spans.push(Span::styled(fmt::right(&price_text(node), w), price_style(node, t)));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(fmt::left(&node.state, cols.state), state_style(node, t)));
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
    spans.push(mean_span(node, t));
    Line::from(spans)
}

#[cfg(test)]
pub(crate) mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::domain::cluster::BillingMode;
    use crate::domain::ids::{JobId, NodeId};
    use crate::domain::units::{Mib, MicrosPerHour};
    use crate::room::view::{ClusterView, GpuView};
    use crate::sched::fragmentation::ClusterFragmentation;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::fleet_parts::is_draining;
    use crate::tui::panes::testing::draw_pane;

    /// Every cell's symbol, row by row.
    pub(crate) fn rows(terminal: &Terminal<TestBackend>) -> Vec<String> {
        let buf = terminal.backend().buffer();
        (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect()).collect()
    }

    /// 1,000 GPUs on 160 nodes, deterministic: 120 nodes of 8 and 40 of 1
    /// (every fourth), billing modes in pairs, 5 nodes down, 4 draining, 6
    /// just joined (no sample), single GPUs without a sample here and there,
    /// GPUs exclusive, free, shared and fragmented in a fixed pattern.
    pub(crate) fn thousand_gpus() -> View {
        let mut nodes = Vec::new();
        for i in 0..160usize {
            let single = i % 4 == 3;
            let billing = [BillingMode::Reserved, BillingMode::OnDemand, BillingMode::Spot][(i / 2) % 3];
            let down = i % 37 == 11;
            let draining = !down && i % 41 == 20;
            let fresh = i % 29 == 7;
            let total = Mib(if single { 24 * 1024 } else { 80 * 1024 });
            let gpus = (0..if single { 1 } else { 8 })
                .map(|g: usize| {
                    let job = |k: u64| JobId((i * 10 + g) as u64 * 4 + k);
                    let (mut alloc, mut frag, mut jobs, exclusive) = match (i * 7 + g * 3) % 10 {
                        0..=5 => (total.0, 0.0, vec![job(0)], true),
                        6 => (0, 0.0, vec![], false),
                        7 | 8 => (total.0 / 2, 0.1 * ((i + g) % 6) as f64, vec![job(0), job(1)], false),
                        _ => (total.0 * 3 / 4, 0.6, vec![job(0), job(1), job(2)], false),
                    };
                    if down {
                        (alloc, frag, jobs) = (0, 0.0, vec![]);
                    }
                    let free = total.0 - alloc;
                    let largest = if exclusive { 0 } else { (f64::from(free) * (1.0 - frag)) as u32 };
                    let util = if down || fresh || (i + g).is_multiple_of(23) {
                        None
                    } else if jobs.is_empty() {
                        Some(0.0)
                    } else {
                        Some(((i * 13 + g * 7) % 61 + 39) as f32)
                    };
                    GpuView {
                        index: g as u8,
                        util,
                        mem_total: total,
                        mem_used: util.map(|_| Mib(alloc / 10 * 9)),
                        mem_allocated: Mib(alloc),
                        largest_free: Mib(largest),
                        fragmentation: frag,
                        jobs,
                        exclusive,
                        stale: false,
                        health: None,
                    }
                })
                .collect();
            let price = if single { 1_010_000 } else { [32_770_000, 98_320_000, 12_400_000][billing.index()] };
            nodes.push(NodeView {
                id: NodeId(i as u32 + 1),
                name: format!("n{i:03}"),
                instance_type: if single {
                    "g5.xlarge"
                } else if billing == BillingMode::Spot {
                    "p4d.24xlarge"
                } else {
                    "p5.48xlarge"
                }
                .into(),
                zone: format!("us-east-1{}", ['a', 'b', 'c', 'd'][i % 4]),
                billing,
                gpu_model: if single { "A10G" } else { "H100" }.into(),
                state: if down {
                    "down"
                } else if draining {
                    "draining 87s"
                } else {
                    "up"
                }
                .into(),
                up: !down,
                price: (!down).then_some(MicrosPerHour(price)),
                max_price: (billing == BillingMode::Spot).then_some(MicrosPerHour(price + 2_000_000)),
                gpus,
                workload_frag: None,
            });
        }
        let up: Vec<&NodeView> = nodes.iter().filter(|n| n.up).collect();
        let gpus: Vec<&GpuView> = up.iter().flat_map(|n| &n.gpus).collect();
        let sampled: Vec<f64> = gpus.iter().filter_map(|g| g.util.map(f64::from)).collect();
        let free: u64 = gpus.iter().filter(|g| !g.exclusive).map(|g| u64::from(g.mem_total.0 - g.mem_allocated.0)).sum();
        let largest_sum: u64 = gpus.iter().map(|g| u64::from(g.largest_free.0)).sum();
        let free_gpus = gpus.iter().filter(|g| g.jobs.is_empty()).count() as u32;
        let most = up.iter().map(|n| n.gpus.iter().filter(|g| g.jobs.is_empty()).count() as u32).max().unwrap_or(0);
        let cluster = ClusterView {
            nodes_up: up.len() as u32,
            nodes_total: nodes.len() as u32,
            gpus_total: gpus.len() as u32,
            gpus_busy: gpus.iter().filter(|g| !g.jobs.is_empty()).count() as u32,
            util_mean: sampled.iter().sum::<f64>() / sampled.len() as f64,
            mem_total: gpus.iter().map(|g| u64::from(g.mem_total.0)).sum(),
            mem_allocated: gpus.iter().map(|g| u64::from(g.mem_allocated.0)).sum(),
            fragmentation: ClusterFragmentation {
                free_memory: free,
                largest_free_block: gpus.iter().map(|g| g.largest_free).max().unwrap_or_default(),
                memory: 1.0 - largest_sum as f64 / free as f64,
                free_gpus,
                most_free_gpus_on_one_node: most,
                gpus: 1.0 - f64::from(most) / f64::from(free_gpus.max(1)),
                partial_free_share: 0.0,
                ..ClusterFragmentation::default()
            },
            burn: MicrosPerHour(up.iter().filter_map(|n| n.price.map(|p| p.0)).sum()),
            gpus_stale: 0,
        };
        View { nodes, cluster, ..View::default() }
    }

    #[test]
    fn the_generated_view_has_what_the_tests_need() {
        let v = thousand_gpus();
        assert_eq!(v.nodes.iter().map(|n| n.gpus.len()).sum::<usize>(), 1000);
        assert_eq!(v.nodes.iter().filter(|n| !n.up).count(), 5);
        assert_eq!(v.nodes.iter().filter(|n| is_draining(n)).count(), 4);
        assert!(v.nodes.iter().any(|n| n.up && n.gpus.iter().all(|g| g.util.is_none())), "a node without samples");
        assert!(v.nodes.iter().flat_map(|n| &n.gpus).any(|g| g.fragmentation >= 0.5), "fragmented GPUs");
    }

    /// The demo view with elastic capacity in advisory mode: a proposal, a
    /// launch booting, a node going back.
    fn elastic(mut view: View) -> View {
        use crate::domain::job::PoolTarget;
        use crate::room::view::{CapacityView, LaunchRow, ProposalRow};
        let pool = |billing, instance_type: &str| PoolTarget { billing, instance_type: instance_type.into(), zone: "us-west-2b".into() };
        view.capacity = Some(CapacityView {
            mode: "advisory".into(),
            pools: Vec::new(),
            launches: vec![LaunchRow {
                id: 4,
                pool: pool(BillingMode::Spot, "p3.8xlarge"),
                count: 1,
                unanswered: 0,
                booting: 1,
                eta: Some(crate::domain::units::Secs(75)),
                max_price: Some(MicrosPerHour(4_100_000)),
                reason: "for j261 (waited 3m)".into(),
            }],
            releasing: vec![("e12".into(), "idle 5m".into())],
            proposals: vec![ProposalRow {
                id: 3,
                since: crate::domain::testkit::t(0),
                text: "launch 1 × SPOT p3.8xlarge us-west-2b, max $4.10/h, for j265 (waited 12m)".into(),
            }],
            launch_requests: 4,
            nodes_launched: 3,
            launch_failures: 1,
            releases: 2,
            consolidations: 0,
            elastic_burn: MicrosPerHour(8_200_000),
            fixed_burn: MicrosPerHour(15_910_000),
        });
        view
    }

    #[test]
    fn fleet_pane_with_elastic_capacity_in_advisory_mode() {
        let view = elastic(demo_view());
        let terminal = draw_pane(110, 12, true, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
        let rows = rows(&terminal);
        assert!(rows[0].contains("capacity ADVISORY (a approves)"), "the mode in the title: {}", rows[0]);
        assert!(rows[2].contains("? #3 would launch 1 × SPOT p3.8xlarge") && rows[2].contains("a approve"), "{}", rows[2]);
        assert!(rows[3].contains("↑ launching 1 × SPOT p3.8xlarge") && rows[3].contains("up in 1m15s"), "{}", rows[3]);
        assert!(rows[4].contains("↓ giving back e12 (idle 5m)"), "{}", rows[4]);
        // With no node at all, the proposal still shows, and what the empty fleet means.
        let mut empty = elastic(demo_view());
        empty.nodes.clear();
        let terminal = draw_pane(110, 8, true, |p, a, b| render(&empty, &FleetUi::default(), p, a, b));
        let rows = super::tests::rows(&terminal);
        assert!(rows[2].contains("? #3 would launch"), "{rows:#?}");
        assert!(rows.iter().any(|r| r.contains("the room buys them from its pools when work waits")), "{rows:#?}");
    }

    #[test]
    fn fleet_pane_wide() {
        let view = demo_view();
        let terminal = draw_pane(72, 9, true, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
        assert!(rows(&terminal)[2].starts_with("┃▶n01"), "the focused table marks the cursor's row");
    }

    #[test]
    fn fleet_pane_narrow_with_more_nodes_than_rows() {
        let view = demo_view();
        let terminal = draw_pane(44, 6, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn every_gpu_state_has_a_glyph_in_the_table_and_the_grid() {
        let view = demo_view();
        let terminal = draw_pane(72, 9, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        let table = rows(&terminal);
        let row = |name: &str| table.iter().find(|r| r.contains(name)).cloned().unwrap_or_default();
        assert!(row("n05").contains("✕") && row("n05").contains("down"));
        assert!(row("n06").contains("·"), "no sample yet");
        assert!(row("n04").contains("draining 87s"));
        assert!(row("n02").contains("░"), "an idle GPU is visible, not blank");
        assert!(!table.iter().any(|r| r.contains('▶')), "no cursor without the focus");
        let grid = rows(&draw_pane(44, 6, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b))).join("\n");
        assert!(grid.contains("✕✕✕✕✕✕✕✕") && grid.contains("↓↓↓↓↓↓↓↓") && grid.contains("····"), "{grid}");
        assert!(grid.contains("1 cell = 1 GPU"), "{grid}");
    }

    #[test]
    fn many_nodes_become_a_grid_not_plus_n_more() {
        let mut view = demo_view();
        let template = view.nodes[0].clone();
        for i in 0..40 {
            view.nodes.push(NodeView { name: format!("x{i:02}"), id: NodeId(100 + i), ..template.clone() });
        }
        let terminal = draw_pane(60, 8, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        let text = rows(&terminal).join("\n");
        assert!(!text.contains("more"), "{text}");
        assert!(text.contains("1 cell = 1 node") && text.contains('✕') && text.contains('↓'), "trouble stays on screen: {text}");
    }

    #[test]
    fn fleet_pane_empty_view() {
        let terminal = draw_pane(40, 4, false, |p, a, b| render(&View::default(), &FleetUi::default(), p, a, b));
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn an_empty_fleet_on_a_slurm_site_points_at_the_slurm_pane() {
        let view = View { slurm: Some(crate::tui::fixture::slurm_cluster(None)), ..View::default() };
        let terminal = draw_pane(100, 4, false, |p, a, b| render(&view, &FleetUi::default(), p, a, b));
        let text: String = terminal.backend().buffer().content().iter().map(|c| c.symbol()).collect();
        assert!(text.contains("Slurm's 2 node(s) and 8 GPUs are in the Slurm pane (7)"), "{text}");
    }

    fn ids(view: &View) -> Vec<u32> {
        view.nodes.iter().map(|n| n.id.0).collect()
    }

    #[test]
    fn the_cursor_follows_its_node_and_falls_back_to_the_nearest() {
        let mut view = demo_view();
        assert_eq!(ids(&view), [1, 2, 3, 4, 5, 6]);
        let mut ui = FleetUi::default();
        assert_eq!(ui.selected_node(&view).map(|n| n.id), Some(NodeId(1)), "the first node before any move");
        ui.move_by(&view, 2);
        assert_eq!(ui.cursor, Some(NodeId(3)));
        // A node before it leaves: the cursor stays on n03.
        view.nodes.remove(0);
        assert_eq!(ui.selected_node(&view).map(|n| n.name.as_str()), Some("n03"));
        ui.move_by(&view, 1);
        assert_eq!(ui.cursor, Some(NodeId(4)));
        // Its own node leaves: the one now at its place.
        view.nodes.retain(|n| n.id != NodeId(4));
        assert_eq!(ui.selected_node(&view).map(|n| n.id), Some(NodeId(5)));
        ui.move_by(&view, 100);
        assert_eq!(ui.cursor, Some(NodeId(6)), "stops at the end");
        view.nodes.truncate(2);
        assert_eq!(ui.selected_node(&view).map(|n| n.id), Some(NodeId(3)), "nearest index when the tail is gone");
        ui.move_by(&view, -100);
        assert_eq!(ui.cursor, Some(NodeId(2)), "stops at the start");
        let empty = View::default();
        assert!(ui.selected_node(&empty).is_none());
        ui.move_by(&empty, 1);
        ui.enter(&empty);
        assert_eq!(ui.drill, None, "nothing to drill into");
    }

    #[test]
    fn enter_and_leave_the_drill_down() {
        let mut view = demo_view();
        let mut ui = FleetUi::default();
        assert!(!ui.leave(), "not drilled: Esc is free for something else");
        ui.move_by(&view, 1);
        ui.enter(&view);
        assert_eq!(ui.drill, Some(NodeId(2)));
        ui.move_by(&view, 1);
        assert_eq!(ui.drill, Some(NodeId(3)), "drilled in, moving pages through nodes");
        view.nodes.retain(|n| n.id != NodeId(3));
        let terminal = draw_pane(50, 6, true, |p, a, b| render(&view, &ui, p, a, b));
        assert!(rows(&terminal).join("").contains("node #3 has left the fleet — Esc back"));
        ui.move_by(&view, 0);
        assert_eq!(ui.drill, Some(NodeId(4)), "moving again lands on the neighbour");
        assert!(ui.leave());
        assert_eq!(ui.drill, None);
        assert_eq!(ui.cursor, Some(NodeId(4)), "leaving keeps the cursor");
        assert!(!ui.leave());
    }

    /// Draws into a larger buffer around `area` and checks that nothing
    /// outside it changed.
    pub(crate) fn assert_inside(w: u16, h: u16, draw: impl FnOnce(PaneProps<'_>, Rect, &mut Buffer)) {
        let theme = Theme::dark();
        let outer = Rect::new(0, 0, w + 6, h + 4);
        let mut buf = Buffer::filled(outer, ratatui::buffer::Cell::new("@"));
        let area = Rect::new(3, 2, w, h);
        draw(PaneProps { theme: &theme, focused: true }, area, &mut buf);
        for y in 0..outer.height {
            for x in 0..outer.width {
                if !area.contains((x, y).into()) {
                    assert_eq!(buf[(x, y)].symbol(), "@", "drew outside {area:?} at ({x},{y})");
                }
            }
        }
    }

    pub(crate) const SIZES: [u16; 10] = [0, 1, 2, 3, 5, 8, 20, 58, 100, 300];

    #[test]
    fn never_draws_outside_its_rect_nor_panics() {
        let mut zero_gpus = demo_view();
        zero_gpus.nodes[1].gpus.clear();
        zero_gpus.nodes[4].gpus.clear();
        let mut huge = thousand_gpus();
        let template = huge.nodes.clone();
        for k in 1..30u32 {
            huge.nodes.extend(template.iter().map(|n| NodeView { id: NodeId(n.id.0 + 1000 * k), ..n.clone() }));
        }
        let views = [demo_view(), View::default(), zero_gpus, thousand_gpus(), huge];
        for view in &views {
            let mut last = FleetUi::default();
            last.move_by(view, isize::MAX);
            let mut drilled = last.clone();
            drilled.enter(view);
            let mut zero = FleetUi::default();
            zero.enter(view);
            for ui in [FleetUi::default(), last, drilled, zero] {
                for w in SIZES {
                    for h in SIZES.into_iter().filter(|h| *h <= 100) {
                        assert_inside(w, h, |p, a, b| render(view, &ui, p, a, b));
                    }
                }
            }
        }
    }
}
