//! The help overlay (`?`): every command of `COMMANDS` with its keys, greyed
//! where it does not apply now, and a legend of the glyphs the panes use.
//!
//! Generated from the command list so it cannot drift from the keys; draws a
//! centred popup over whatever is below, inside the area it is given.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Widget};

use super::app::App;
use super::commands::{COMMANDS, Scope};
use super::fmt::{self, put};
use super::theme::Theme;

const LEGEND: &[(&str, &str)] = &[
    ("· ░ ▁▄█", "GPU: no sample, idle, utilization"),
    ("✕", "node down"),
    ("█ ▓ ░", "memory: in use, allocated, free"),
    ("↻", "requeued job (ran before)"),
    ("▲", "over: max price, budget, quota"),
    ("│", "budget marks at 80 / 100 / 120%"),
    ("╌", "max price across the price chart"),
];

pub fn render(app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
    let key_w = COMMANDS.iter().map(|c| fmt::width(c.keys)).chain(LEGEND.iter().map(|(g, _)| fmt::width(g))).max().unwrap_or(0);
    let mut lines: Vec<Line> = vec![Line::from(Span::styled("Keys", t.heading))];
    for c in COMMANDS {
        let on = c.enabled(app);
        let scope = match c.scope {
            Scope::Global => "",
            Scope::Queue => " (queue pane)",
        };
        lines.push(Line::from(vec![
            Span::styled(format!("  {} ", fmt::left(c.keys, key_w)), if on { t.key } else { t.key_disabled }),
            Span::styled(c.desc, if on { t.text } else { t.key_disabled }),
            Span::styled(scope, t.dim),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled("Legend", t.heading)));
    for (glyph, meaning) in LEGEND {
        lines.push(Line::from(vec![
            Span::styled(format!("  {} ", fmt::left(glyph, key_w)), t.figure),
            Span::styled(*meaning, t.text),
        ]));
    }
    let want_w = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 4;
    let want_h = lines.len() as u16 + 2;
    let popup = area.centered(Constraint::Length(want_w.min(area.width)), Constraint::Length(want_h.min(area.height)));
    Clear.render(popup, buf);
    let block = Block::bordered()
        .border_type(t.border_type_focused)
        .border_style(t.border_focused)
        .title(Line::from(Span::styled(" Help ", t.title_focused)))
        .title_bottom(Line::from(Span::styled(" Esc or ? closes ", t.dim)).right_aligned());
    let inner = block.inner(popup).inner(ratatui::layout::Margin { horizontal: 1, vertical: 0 });
    block.render(popup, buf);
    for (i, line) in lines.into_iter().enumerate() {
        put(buf, inner, i as u16, line);
    }
}
