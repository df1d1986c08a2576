//! The wall display's block font: digits, the punctuation of clocks and
//! figures, and the letters of STALE, drawn large enough to read across a
//! room.
//!
//! One 3×5 bitmap per glyph, drawn at two scales that both keep pixels square
//! on a terminal's 1:2 cells: `Full` (a pixel is `██`, 5 rows, for the clock)
//! and `Half` (a pixel is half a cell, `▀▄█`, 3 rows, for the key figures).
//! Owns only glyph shapes; it draws where it is told, clipped to a `Rect`.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

/// Pixel rows of every glyph.
const PIXEL_ROWS: usize = 5;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scale {
    /// A pixel is two full cells side by side: 5 rows tall.
    Full,
    /// A pixel is half a cell: 3 rows tall, half the width of `Full`.
    Half,
}

impl Scale {
    /// Cell rows a line of text takes.
    pub fn height(self) -> u16 {
        match self {
            Scale::Full => PIXEL_ROWS as u16,
            Scale::Half => PIXEL_ROWS.div_ceil(2) as u16,
        }
    }

    fn pixel_width(self) -> u32 {
        match self {
            Scale::Full => 2,
            Scale::Half => 1,
        }
    }
}

/// `#` is ink. Narrow glyphs (`:` `.` `,` and space) are one pixel wide so
/// that `12:34` and `58.02` do not spread out.
fn glyph(c: char) -> Option<[&'static str; PIXEL_ROWS]> {
    Some(match c {
        '0' => ["###", "#.#", "#.#", "#.#", "###"],
        '1' => ["##.", ".#.", ".#.", ".#.", "###"],
        '2' => ["###", "..#", "###", "#..", "###"],
        '3' => ["###", "..#", "###", "..#", "###"],
        '4' => ["#.#", "#.#", "###", "..#", "..#"],
        '5' => ["###", "#..", "###", "..#", "###"],
        '6' => ["###", "#..", "###", "#.#", "###"],
        '7' => ["###", "..#", "..#", "..#", "..#"],
        '8' => ["###", "#.#", "###", "#.#", "###"],
        '9' => ["###", "#.#", "###", "..#", "###"],
        ':' => [".", "#", ".", "#", "."],
        '.' => [".", ".", ".", ".", "#"],
        ',' => [".", ".", ".", "#", "#"],
        ' ' => [".", ".", ".", ".", "."],
        '/' => ["..#", "..#", ".#.", "#..", "#.."],
        '-' => ["...", "...", "###", "...", "..."],
        '%' => ["#.#", "..#", ".#.", "#..", "#.#"],
        // S is not the 5 above: "5TALE" must not be a possible reading.
        'S' => [".##", "#..", ".#.", "..#", "##."],
        'T' => ["###", ".#.", ".#.", ".#.", ".#."],
        'A' => [".#.", "#.#", "###", "#.#", "#.#"],
        'L' => ["#..", "#..", "#..", "#..", "###"],
        'E' => ["###", "#..", "##.", "#..", "###"],
        _ => return None,
    })
}

fn ink(g: &[&str; PIXEL_ROWS], row: usize, col: usize) -> bool {
    g.get(row).and_then(|r| r.as_bytes().get(col)) == Some(&b'#')
}

/// Cells `text` takes across, one blank pixel between glyphs; `None` if the
/// font lacks one of its characters (the caller then writes plain text).
pub fn width(text: &str, scale: Scale) -> Option<u16> {
    let mut pixels = 0u32;
    for (i, c) in text.chars().enumerate() {
        pixels += glyph(c)?[0].len() as u32 + u32::from(i > 0);
    }
    u16::try_from(pixels * scale.pixel_width()).ok()
}

/// Draws `text` with its top-left corner at `at`, only on cells inside
/// `clip`. Draws nothing and returns `None` if a character is missing;
/// returns the width drawn otherwise. Blank pixels are left untouched, so a
/// banner's background shows through.
pub fn draw(text: &str, scale: Scale, at: Position, clip: Rect, style: Style, buf: &mut Buffer) -> Option<u16> {
    let total = width(text, scale)?;
    let mut x = u32::from(at.x);
    let pw = scale.pixel_width();
    for c in text.chars() {
        let g = glyph(c)?;
        let cols = g[0].len();
        for col in 0..cols {
            for row in 0..scale.height() as usize {
                let symbol = match scale {
                    Scale::Full => ink(&g, row, col).then_some("█"),
                    Scale::Half => match (ink(&g, 2 * row, col), ink(&g, 2 * row + 1, col)) {
                        (true, true) => Some("█"),
                        (true, false) => Some("▀"),
                        (false, true) => Some("▄"),
                        (false, false) => None,
                    },
                };
                let Some(symbol) = symbol else { continue };
                for dx in 0..pw {
                    put_cell(x + col as u32 * pw + dx, u32::from(at.y) + row as u32, symbol, clip, style, buf);
                }
            }
        }
        x += (cols as u32 + 1) * pw;
    }
    Some(total)
}

fn put_cell(x: u32, y: u32, symbol: &str, clip: Rect, style: Style, buf: &mut Buffer) {
    let (Ok(x), Ok(y)) = (u16::try_from(x), u16::try_from(y)) else { return };
    let p = Position::new(x, y);
    if !clip.contains(p) {
        return;
    }
    if let Some(cell) = buf.cell_mut(p) {
        cell.set_symbol(symbol).set_style(style);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, scale: Scale) -> Vec<String> {
        let w = width(text, scale).unwrap();
        let area = Rect::new(0, 0, w, scale.height());
        let mut buf = Buffer::empty(area);
        draw(text, scale, Position::new(0, 0), area, Style::new(), &mut buf);
        (0..area.height).map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect()).collect()
    }

    #[test]
    fn every_glyph_is_a_full_rectangle() {
        for c in "0123456789:.,/-% STALE".chars() {
            let g = glyph(c).unwrap();
            assert!(g.iter().all(|r| r.len() == g[0].len()), "{c:?} has ragged rows");
            assert!(g.iter().all(|r| r.bytes().all(|b| b == b'#' || b == b'.')), "{c:?} has a stray byte");
        }
        assert_eq!(glyph('x'), None);
        assert_eq!(width("12:x", Scale::Full), None, "a missing glyph means plain text");
    }

    #[test]
    fn both_scales_draw_the_same_shapes() {
        assert_eq!(width("12:34", Scale::Full), Some(34));
        assert_eq!(rows("08", Scale::Half), ["█▀█ █▀█", "█ █ █▀█", "▀▀▀ ▀▀▀"]);
        assert_eq!(rows("1", Scale::Full), ["████  ", "  ██  ", "  ██  ", "  ██  ", "██████"]);
        assert_eq!(rows("STALE", Scale::Half)[0], "▄▀▀ ▀█▀ ▄▀▄ █   █▀▀");
    }

    #[test]
    fn nothing_is_drawn_outside_the_clip() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 3));
        let clip = Rect::new(2, 0, 3, 2);
        draw("888", Scale::Half, Position::new(0, 0), clip, Style::new(), &mut buf);
        for (i, cell) in buf.content.iter().enumerate() {
            let p = Position::new(i as u16 % 10, i as u16 / 10);
            if !clip.contains(p) {
                assert_eq!(cell.symbol(), " ", "ink at {p:?}");
            }
        }
        // Far off to the right and bottom: no overflow, no panic.
        draw("88", Scale::Full, Position::new(u16::MAX - 1, u16::MAX - 1), clip, Style::new(), &mut buf);
    }
}
