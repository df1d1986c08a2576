//! Draws the what-if pane over the console: the progress bar while the
//! comparison runs, then its table (the recorded run first, each change
//! coloured better or worse), or why it could not be made.
//!
//! Reads the pane's state (`whatif::WhatIfPane`); changes nothing.

use std::cmp::Ordering;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::fmt;
use super::theme::Theme;
use super::whatif::{PaneState, WhatIfPane};
use crate::whatif::Comparison;

fn table_lines<'a>(c: &Comparison, t: &Theme, width: usize) -> Vec<Line<'a>> {
    let grid = c.grid();
    let (label_w, col_w) = grid.widths(fmt::width);
    let mut lines = Vec::new();
    let wrapped = |text: &str, style, lines: &mut Vec<Line<'a>>| {
        for part in fmt::wrap(text, width.max(20)) {
            lines.push(Line::from(Span::styled(part, style)));
        }
    };
    let span = format!("{} events, {}", c.events, c.model);
    wrapped(&span, t.dim, &mut lines);
    let mut head = vec![Span::raw(" ".repeat(label_w))];
    for (name, w) in grid.names.iter().zip(&col_w) {
        head.push(Span::styled(format!("  {}", fmt::right(name, *w)), t.heading));
    }
    lines.push(Line::from(head));
    for (label, cells) in &grid.rows {
        let mut spans = vec![Span::styled(fmt::left(label, label_w), t.text)];
        for (cell, w) in cells.iter().zip(&col_w) {
            // Better or worse than what happened.
            let style = match cell.moved {
                Some(Ordering::Less) => t.ok,
                Some(Ordering::Greater) => t.warn,
                _ => t.figure,
            };
            spans.push(Span::styled(format!("  {}", fmt::right(&cell.text, *w)), style));
        }
        lines.push(Line::from(spans));
    }
    for note in &c.notes {
        wrapped(&format!("note: {note}"), t.dim, &mut lines);
    }
    lines
}

pub fn render(pane: &WhatIfPane, t: &Theme, area: Rect, buf: &mut Buffer) {
    let width = area.width.saturating_sub(6) as usize;
    let lines: Vec<Line> = match &pane.state {
        PaneState::Idle => vec![Line::from(Span::styled("Nothing compared yet: W compares every discipline, :whatif FILE… configurations.", t.text))],
        PaneState::Running { stage, done } => {
            let bar_w = width.saturating_sub(8).clamp(10, 60);
            vec![
                Line::from(Span::styled(format!("Re-running the recorded run: {stage}"), t.text)),
                Line::from(vec![Span::styled(fmt::bar(*done, bar_w), t.chart), Span::styled(format!(" {:>3.0}%", done * 100.0), t.figure)]),
                Line::from(Span::styled("The engine goes on meanwhile; this pane may be closed and opened again.", t.dim)),
            ]
        }
        PaneState::Done(c) => table_lines(c, t, width),
        PaneState::Failed(why) => {
            fmt::wrap(&format!("No comparison: {why}"), width.max(20)).into_iter().map(|l| Line::from(Span::styled(l, t.alarm))).collect()
        }
    };
    let bottom = Line::from(Span::styled(" W or Esc closes · :whatif FILE|DISCIPLINE… ", t.dim));
    super::dialog::popup(&format!("What if: {}", pane.asked), lines, bottom, area.width, t, area, buf);
}

/// A comparison as the re-runs would give it, for the pane's tests and pictures.
#[cfg(test)]
pub(crate) fn demo_comparison() -> Comparison {
    use crate::domain::units::Micros;
    use crate::whatif::{Column, Outcome};
    let outcome = |spend: i64, idle: i64, waits: Vec<i64>, finished: u64, requeues: u64| Outcome {
        spend_by_mode: [Micros(381_840_000), Micros(spend * 6 / 10), Micros(spend * 4 / 10)],
        idle: Micros(idle),
        services: Micros(12_730_000),
        spend_by_tenant: [("nlp".to_string(), Micros(327_590_000)), ("vision".to_string(), Micros(196_860_000))].into_iter().collect(),
        gpu_hours: 536.5,
        gpu_hours_busy: 464.8,
        submitted: 351,
        finished,
        failed: 11,
        waits,
        jct_secs_sum: 2735 * finished as i64,
        jct_count: finished,
        requeues,
        interruptions: 23,
        nodes_lost: 23,
        recomputed_steps: 14_574,
        checkpoint_bytes: 1881 << 30,
        ..Outcome::default()
    };
    let columns = vec![
        Column { name: "recorded".into(), outcome: outcome(319_600_000, 119_000_000, vec![30, 60, 90, 144], 320, 34), wall_secs: 0.9 },
        Column { name: "fifo".into(), outcome: outcome(319_600_000, 119_000_000, vec![30, 60, 90, 144], 320, 34), wall_secs: 0.7 },
        Column { name: "drf".into(), outcome: outcome(318_710_000, 125_000_000, vec![31, 61, 92, 147], 321, 27), wall_secs: 0.8 },
    ];
    Comparison {
        log: "sim-seed1.db".into(),
        model: "the simulated world (seed 1) re-run exactly".into(),
        from: None,
        until: None,
        events: 5104,
        columns,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::tui::app::App;
    use crate::tui::context::DrawContext;
    use crate::tui::fixture::demo_view;
    use crate::tui::whatif::WhatIfUpdate;

    fn screen(app: &App) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let ctx = DrawContext::new("SIM seed 1 ×60");
        terminal.draw(|f| super::super::draw::draw(f, app, &demo_view(), &ctx)).unwrap();
        terminal
    }

    fn text(terminal: &Terminal<TestBackend>) -> String {
        let buf = terminal.backend().buffer();
        (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n").collect()
    }

    #[test]
    fn the_table_stands_over_the_console_with_each_change_marked() {
        let mut app = App::new();
        app.whatif = WhatIfPane { shown: true, asked: "every discipline".into(), state: PaneState::Done(Box::new(demo_comparison())) };
        let terminal = screen(&app);
        insta::assert_snapshot!(terminal.backend());
        let shown = text(&terminal);
        assert!(shown.contains("What if: every discipline"), "{shown}");
        for want in ["recorded", "fifo", "drf", "instance spend", "P95 queue wait", "mean JCT", "requeues", "budget crossings", "(=)", "(-21%)"] {
            assert!(shown.contains(want), "no {want:?} in\n{shown}");
        }
    }

    #[test]
    fn a_running_comparison_shows_its_stage_and_bar_and_a_failed_one_why() {
        let mut app = App::new();
        app.whatif.start(&["drf".to_string()]);
        app.whatif.update(WhatIfUpdate::Progress { stage: "re-running under drf".into(), done: 0.5 });
        let shown = text(&screen(&app));
        assert!(shown.contains("What if: drf") && shown.contains("re-running under drf") && shown.contains(" 50%") && shown.contains("████"), "{shown}");
        app.whatif.update(WhatIfUpdate::Failed("reading nope.toml: No such file or directory (os error 2)".into()));
        let shown = text(&screen(&app));
        assert!(shown.contains("No comparison: reading nope.toml"), "{shown}");
        app.whatif.shown = false;
        assert!(!text(&screen(&app)).contains("What if"));
    }
}
