//! The alarms & log pane: every active alarm first, newest first, each
//! marked `▲` or, once acknowledged, `✓` with who did it; then either the
//! tail of `View::log` (newest at the bottom) or, toggled with `l`, the
//! audit trail of operator actions (who, from where, what). Entries wrap so
//! that no figure at the end of a message is cut.
//!
//! Draws from `View::alarms`, `View::log` and `View::audit`, and the
//! `AlarmsUi` it is handed; the selection and the keys (↑↓ select an alarm,
//! `a` acknowledges) are `panes::alarm_list`'s. Also owns how a log line of
//! each severity looks, which the alarm strip uses too. Must not import the
//! App or the chrome.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::fmt::{self, put};
use super::pane_id::PaneId;
use super::panes::alarm_list::AlarmsUi;
use super::panes::shared::{PaneProps, frame};
use super::theme::Theme;
use crate::domain::units::At;
use crate::room::Severity;
use crate::room::View;
use crate::room::view::{AlarmCounts, AlarmSeverity};

/// The pane unfocused, nothing selected, the event log under the alarms.
pub fn render(view: &View, t: &Theme, area: Rect, buf: &mut Buffer) {
    render_pane(view, &AlarmsUi::default(), PaneProps { theme: t, focused: false }, area, buf);
}

pub fn render_pane(view: &View, ui: &AlarmsUi, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) {
    let t = props.theme;
    let AlarmCounts { open, acked, unread, .. } = AlarmCounts::of(&view.alarms);
    let mut flags = Vec::new();
    if ui.audit {
        flags.push(Span::styled(" audit ", t.key));
    }
    if !view.alarms.is_empty() {
        let mut text = format!(" ▲ {open} active");
        if acked > 0 {
            text += &format!(", ✓ {acked} acked");
        }
        if unread > 0 {
            text += &format!(", ◌ {unread} cleared unread");
        }
        flags.push(Span::styled(text + " ", if open > 0 { t.alarm } else { t.dim }));
    }
    let inner = frame(PaneId::Alarms, (!flags.is_empty()).then(|| Line::from(flags)), props, area, buf);
    if inner.is_empty() {
        return;
    }
    let w = inner.width as usize;
    let rows = inner.height as usize;
    let mut top: Vec<Line> = Vec::new();
    // Keep the selected alarm on screen: start the list where it fits.
    let first = ui.selected.map_or(0, |s| s.saturating_sub(rows.saturating_sub(2)));
    for (i, alarm) in view.alarms.iter().enumerate().skip(first) {
        // Thousands of alarms: wrap only what can show.
        if top.len() >= rows {
            break;
        }
        let critical = if alarm.severity == AlarmSeverity::Critical { "CRITICAL " } else { "" };
        let (mark, style, text) = match (&alarm.acked_by, alarm.cleared_at) {
            // Fired and cleared while nobody looked: kept until someone acknowledges it.
            (_, Some(cleared)) => ("◌", t.warn, format!("{critical}{} — cleared {}, unread", alarm.text, fmt::time_of_day(cleared))),
            (Some(user), None) => ("✓", t.dim, format!("{} (acked by {user})", alarm.text)),
            (None, None) => ("▲", t.alarm, format!("{critical}{}", alarm.text)),
        };
        let mut lines = entry(alarm.raised_at, mark, &text, style, style, w);
        if ui.selected == Some(i) {
            let sel = if props.focused { t.selected } else { t.selected_unfocused };
            lines = lines.into_iter().map(|l| l.patch_style(sel)).collect();
        }
        top.extend(lines);
    }
    top.truncate(rows);
    let room = rows.saturating_sub(top.len());
    let tail = if ui.audit {
        let entries = view.audit.iter().rev().map(|a| match &a.refused {
            None => entry(a.at, "act ", &format!("✓ {}@{}: {}", a.user, a.origin, a.what), t.key, t.key, w),
            Some(why) => entry(a.at, "act ", &format!("▲ {}@{}: {} — refused: {why}", a.user, a.origin, a.what), t.alarm, t.alarm, w),
        });
        let mut tail = newest_that_fit(entries, room);
        if view.audit.is_empty() && room > 0 {
            tail.push(Line::from(Span::styled("no operator actions yet", t.dim)));
        }
        tail
    } else {
        // An active alarm is already at the top: its log line would repeat it.
        let alarmed: std::collections::HashSet<(At, &str)> = view.alarms.iter().map(|a| (a.raised_at, a.text.as_str())).collect();
        let entries = view.log.iter().rev().filter(|l| !(l.severity == Severity::Alarm && alarmed.contains(&(l.at, l.text.as_str())))).map(|line| {
            let style = severity_style(line.severity, t);
            let lead = if line.severity == Severity::Info { t.dim } else { style };
            entry(line.at, severity_tag(line.severity), &line.text, style, lead, w)
        });
        let tail = newest_that_fit(entries, room);
        if view.alarms.is_empty() && view.log.is_empty() {
            top.push(Line::from(Span::styled("nothing yet", t.dim)));
        }
        tail
    };
    for (i, line) in top.into_iter().chain(tail).enumerate() {
        put(buf, inner, i as u16, line);
    }
}

/// The style of a log line of this severity (the alarm strip uses it too).
pub fn severity_style(s: Severity, t: &Theme) -> Style {
    match s {
        Severity::Info => t.text,
        Severity::Warn => t.warn,
        Severity::Alarm => t.alarm,
        Severity::Action => t.key,
    }
}

/// The four-letter tag before a log line.
pub fn severity_tag(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warn => "WARN",
        Severity::Alarm => "ALRM",
        Severity::Action => "act ",
    }
}

/// Entries given newest first, kept while they fit in `room` rows, returned
/// oldest first (newest at the bottom).
fn newest_that_fit<'a>(entries: impl Iterator<Item = Vec<Line<'a>>>, room: usize) -> Vec<Line<'a>> {
    let mut tail: Vec<Line> = Vec::new();
    for mut lines in entries {
        if tail.len() + lines.len() > room {
            break;
        }
        lines.append(&mut tail);
        tail = lines;
    }
    tail
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

    fn text(t: &ratatui::Terminal<ratatui::backend::TestBackend>) -> String {
        t.backend().buffer().content.iter().map(|c| c.symbol()).collect()
    }

    #[test]
    fn log_pane() {
        let view = demo_view();
        insta::assert_snapshot!(draw_pane(44, 9, false, |p, a, b| render(&view, p.theme, a, b)).backend());
    }

    #[test]
    fn an_acknowledged_alarm_says_by_whom_and_the_audit_view_shows_actions() {
        let mut view = demo_view();
        view.alarms[0].acked_by = Some("ana".into());
        let ui = AlarmsUi { selected: Some(0), audit: true };
        let terminal = draw_pane(60, 14, true, |p, a, b| render_pane(&view, &ui, p, a, b));
        let shown = text(&terminal);
        assert!(shown.contains("acked by ana") && shown.contains("✓ 1 acked"), "{shown}");
        assert!(!view.audit.is_empty());
        assert!(shown.contains(&view.audit.last().unwrap().user), "the newest audit entry is shown");
        insta::assert_snapshot!(terminal.backend());
    }

    /// Issue 35, item 8: each action's outcome: a refusal says so, and why.
    #[test]
    fn the_audit_view_says_which_actions_were_refused_and_why() {
        let mut view = demo_view();
        let mut refused = view.audit.last().unwrap().clone();
        refused.what = "preempt j999".into();
        refused.refused = Some("no job j999".into());
        view.audit.push(refused);
        let ui = AlarmsUi { selected: None, audit: true };
        let shown = text(&draw_pane(90, 14, true, |p, a, b| render_pane(&view, &ui, p, a, b)));
        assert!(shown.contains("▲ ") && shown.contains("preempt j999 — refused: no job j999"), "{shown}");
        assert!(shown.contains("✓ "), "the carried-out ones are marked done: {shown}");
    }
}
