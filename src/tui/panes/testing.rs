//! Test helpers for the panes: one pane drawn alone.

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::shared::PaneProps;
use crate::tui::theme::Theme;

/// Draws one pane alone into a test terminal of `w`×`h`.
pub fn draw_pane(w: u16, h: u16, focused: bool, f: impl FnOnce(PaneProps<'_>, ratatui::layout::Rect, &mut ratatui::buffer::Buffer)) -> Terminal<TestBackend> {
    let theme = Theme::dark();
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|frame| {
            let area = frame.area();
            f(PaneProps { theme: &theme, focused }, area, frame.buffer_mut())
        })
        .unwrap();
    terminal
}
