//! The alarms & log pane (full layout): every active alarm first, then the
//! tail of `View::log`, newest at the bottom, each entry wrapped so that no
//! figure at the end of a message is cut.
//!
//! Draws from `View::alarms` and `View::log` only. Not focusable.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Widget};

use super::chrome::{severity_style, severity_tag};
use super::fmt::{self, put};
use super::theme::Theme;
use crate::core::room::Severity;
use crate::core::units::At;
use crate::core::View;

pub fn render(view: &View, t: &Theme, area: Rect, buf: &mut Buffer) {
    let mut block = Block::bordered()
        .border_type(t.border_type)
        .border_style(t.border)
        .title(Line::from(Span::styled(" Alarms & log ", t.title)));
    if !view.alarms.is_empty() {
        block = block.title_top(Line::from(Span::styled(format!(" ▲ {} active ", view.alarms.len()), t.alarm)).right_aligned());
    }
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.is_empty() {
        return;
    }
    let w = inner.width as usize;
    let rows = inner.height as usize;
    let mut top: Vec<Line> = Vec::new();
    for alarm in &view.alarms {
        top.extend(entry(alarm.raised_at, "▲", &alarm.text, t.alarm, t.alarm, w));
    }
    top.truncate(rows);
    let mut tail: Vec<Line> = Vec::new();
    // An active alarm is already at the top: its log line would repeat it.
    let active = |at: At, text: &str| view.alarms.iter().any(|a| a.raised_at == at && a.text == text);
    for line in view.log.iter().rev().filter(|l| !(l.severity == Severity::Alarm && active(l.at, &l.text))) {
        let style = severity_style(line.severity, t);
        let lead = if line.severity == Severity::Info { t.dim } else { style };
        let mut lines = entry(line.at, severity_tag(line.severity), &line.text, style, lead, w);
        if tail.len() + lines.len() + top.len() > rows {
            break;
        }
        lines.append(&mut tail);
        tail = lines;
    }
    if view.alarms.is_empty() && view.log.is_empty() {
        top.push(Line::from(Span::styled("nothing yet", t.dim)));
    }
    for (i, line) in top.into_iter().chain(tail).enumerate() {
        put(buf, inner, i as u16, line);
    }
}

/// `01:23:45 WARN text…` wrapped under the text column.
fn entry<'a>(at: At, tag: &str, text: &str, style: Style, tag_style: Style, w: usize) -> Vec<Line<'a>> {
    let lead = format!("{} {tag} ", fmt::time_of_day(at));
    let indent = fmt::width(&lead);
    let body_w = w.saturating_sub(indent).max(10);
    fmt::wrap(text, body_w)
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let head = if i == 0 { Span::styled(lead.clone(), tag_style) } else { Span::raw(" ".repeat(indent)) };
            Line::from(vec![head, Span::styled(part, style)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::demo_view;
    use crate::tui::panes::testing::draw_pane;

    #[test]
    fn log_pane() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(44, 9, false, |p, a, b| render(&view, p.theme, a, b)).backend());
    }
}
