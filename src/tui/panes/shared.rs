//! What the panes share: `PaneProps`, the bordered frame with the focus
//! highlight, and a column fitter that drops the least important columns
//! first when a pane is narrow.
//!
//! Owns these helpers only. It must not know any pane's content nor the
//! App: every pane imports it, so it imports no pane.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Widget};

use crate::tui::fmt;
use crate::tui::pane_id::PaneId;
use crate::tui::theme::Theme;

/// What every pane is drawn with besides the `View`.
#[derive(Copy, Clone, Debug)]
pub struct PaneProps<'a> {
    pub theme: &'a Theme,
    pub focused: bool,
}

/// Draws the pane's border and title (and `extra` on the right of the top
/// border) and returns the area inside.
pub fn frame(id: PaneId, extra: Option<Line<'_>>, props: PaneProps<'_>, area: Rect, buf: &mut Buffer) -> Rect {
    let t = props.theme;
    let (border, kind, title) = if props.focused { (t.border_focused, t.border_type_focused, t.title_focused) } else { (t.border, t.border_type, t.title) };
    let mut block = Block::bordered().border_type(kind).border_style(border).title(Line::from(Span::styled(format!(" {} ", id.title()), title)));
    if let Some(extra) = extra {
        block = block.title_top(extra.right_aligned());
    }
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// One column of a table: a header, a width, an alignment and a priority
/// (lower is kept longer). The flexible column takes what the others leave.
#[derive(Clone, Debug)]
pub struct Col {
    pub head: &'static str,
    pub width: usize,
    pub right: bool,
    pub priority: u8,
    /// Flexible: at least `width`, at most `max`.
    pub flex: Option<usize>,
}

impl Col {
    pub fn left(head: &'static str, width: usize, priority: u8) -> Col {
        Col { head, width: width.max(fmt::width(head)), right: false, priority, flex: None }
    }
    pub fn right(head: &'static str, width: usize, priority: u8) -> Col {
        Col { right: true, ..Col::left(head, width, priority) }
    }
    pub fn flex(head: &'static str, min: usize, max: usize, priority: u8) -> Col {
        Col { flex: Some(max.max(min)), ..Col::left(head, min, priority) }
    }
}

/// Which columns fit in `avail` cells (one space between columns), and the
/// final width of each kept one, in the original order.
pub fn fit_columns(cols: &[Col], avail: usize) -> Vec<Option<usize>> {
    let mut keep: Vec<bool> = vec![true; cols.len()];
    let total = |keep: &[bool]| -> usize {
        let kept: Vec<&Col> = cols.iter().zip(keep).filter(|(_, k)| **k).map(|(c, _)| c).collect();
        kept.iter().map(|c| c.width).sum::<usize>() + kept.len().saturating_sub(1)
    };
    while total(&keep) > avail {
        // Drop the least important column still kept (never the last one).
        let victim = (0..cols.len()).filter(|i| keep[*i]).max_by_key(|i| (cols[*i].priority, *i));
        match victim {
            Some(i) if keep.iter().filter(|k| **k).count() > 1 => keep[i] = false,
            _ => break,
        }
    }
    let mut spare = avail.saturating_sub(total(&keep));
    cols.iter()
        .zip(&keep)
        .map(|(c, k)| {
            k.then(|| match c.flex {
                Some(max) => {
                    let grow = spare.min(max.saturating_sub(c.width));
                    spare -= grow;
                    c.width + grow
                }
                None => c.width,
            })
        })
        .collect()
}

/// Lays cells out by the fitted widths: `cells[i]` goes in column `i`.
pub fn table_line<'a>(cols: &[Col], widths: &[Option<usize>], cells: Vec<Span<'a>>) -> Line<'a> {
    table_line_parts(cols, widths, cells.into_iter().map(|c| vec![c]).collect())
}

/// Like `table_line`, for cells made of several styled parts. A one-part
/// cell is fitted (names cut with `…`); a many-part cell is padded only.
pub fn table_line_parts<'a>(cols: &[Col], widths: &[Option<usize>], cells: Vec<Vec<Span<'a>>>) -> Line<'a> {
    let mut spans = Vec::new();
    let mut first = true;
    for ((col, width), mut parts) in cols.iter().zip(widths).zip(cells) {
        let Some(w) = *width else { continue };
        if !first {
            spans.push(Span::raw(" "));
        }
        first = false;
        if parts.len() == 1 {
            let cell = parts.remove(0);
            let text = if col.right { fmt::right(&cell.content, w) } else { fmt::left(&cell.content, w) };
            spans.push(Span::styled(text, cell.style));
            continue;
        }
        let pad = " ".repeat(w.saturating_sub(parts.iter().map(Span::width).sum()));
        if col.right {
            spans.push(Span::raw(pad));
            spans.extend(parts);
        } else {
            spans.extend(parts);
            spans.push(Span::raw(pad));
        }
    }
    Line::from(spans)
}

/// The header line of a table.
pub fn header_line<'a>(cols: &[Col], widths: &[Option<usize>], style: Style) -> Line<'a> {
    table_line(cols, widths, cols.iter().map(|c| Span::styled(c.head, style)).collect())
}

/// Widest display width among `items`, at least `min`, at most `max`.
pub fn widest<'a>(items: impl Iterator<Item = &'a str>, min: usize, max: usize) -> usize {
    let cap = max.max(min);
    let mut most = 0;
    // Past the cap nothing more can change the width: stop reading (a
    // queue of 100,000 rows is measured every frame).
    for item in items {
        most = most.max(fmt::width(item));
        if most >= cap {
            break;
        }
    }
    most.clamp(min, cap)
}

/// `widest` over what `shown` writes for each item, through one buffer
/// instead of a string per item.
pub fn widest_shown<T>(items: impl Iterator<Item = T>, shown: impl Fn(&mut String, T), min: usize, max: usize) -> usize {
    let mut text = String::new();
    let cap = max.max(min);
    let mut most = 0;
    for item in items {
        text.clear();
        shown(&mut text, item);
        most = most.max(fmt::width(&text));
        if most >= cap {
            break;
        }
    }
    most.clamp(min, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_drop_by_priority_and_flex_takes_the_rest() {
        let cols = [Col::left("ID", 3, 0), Col::flex("NAME", 6, 20, 0), Col::right("COST", 8, 2), Col::right("ETA", 5, 1)];
        assert_eq!(fit_columns(&cols, 80), vec![Some(3), Some(20), Some(8), Some(5)]);
        // 3+6+5 + 2 gaps = 16: COST (priority 2) goes first.
        assert_eq!(fit_columns(&cols, 17), vec![Some(3), Some(7), None, Some(5)]);
        assert_eq!(fit_columns(&cols, 2), vec![Some(3), None, None, None]);
    }
}
