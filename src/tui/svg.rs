//! Screenshots: a ratatui `Buffer` as an SVG of monospace text (each run of
//! same-style cells one `<text>`, each run of same background one `<rect>`),
//! with the xterm 256-colour palette; and `render_to_buffer` to draw the
//! console off-screen at any size.
//!
//! Pure string building; writing files is the caller's business.

use std::fmt::Write as _;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::style::{Color, Modifier};
use ratatui::text::Span;

use super::app::App;
use super::context::DrawContext;
use super::palette::{SYSTEM, indexed_rgb};
use crate::room::View;

/// What `Color::Reset` stands for: the dark theme's terminal.
pub const DEFAULT_FG: &str = "#d0d0d0";
pub const DEFAULT_BG: &str = "#1c1c1c";
pub const CELL_W: f64 = 8.4;
pub const CELL_H: f64 = 17.0;
pub const FONT_SIZE: f64 = 14.0;
pub const FONT_FAMILY: &str = "DejaVu Sans Mono, Menlo, Consolas, monospace";

/// The console drawn off-screen at `width`×`height`.
pub fn render_to_buffer(view: &View, app: &App, ctx: &DrawContext, width: u16, height: u16) -> Buffer {
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(t) => t,
        Err(never) => match never {},
    };
    if let Err(never) = terminal.draw(|frame| super::draw(frame, app, view, ctx)) {
        match never {}
    }
    terminal.backend().buffer().clone()
}

/// A colour as `#rrggbb`; `Reset` is `default`.
pub fn color_hex(c: Color, default: &str) -> String {
    let (r, g, b) = match c {
        Color::Reset => return default.to_string(),
        Color::Black => SYSTEM[0],
        Color::Red => SYSTEM[1],
        Color::Green => SYSTEM[2],
        Color::Yellow => SYSTEM[3],
        Color::Blue => SYSTEM[4],
        Color::Magenta => SYSTEM[5],
        Color::Cyan => SYSTEM[6],
        Color::Gray => SYSTEM[7],
        Color::DarkGray => SYSTEM[8],
        Color::LightRed => SYSTEM[9],
        Color::LightGreen => SYSTEM[10],
        Color::LightYellow => SYSTEM[11],
        Color::LightBlue => SYSTEM[12],
        Color::LightMagenta => SYSTEM[13],
        Color::LightCyan => SYSTEM[14],
        Color::White => SYSTEM[15],
        Color::Indexed(i) => indexed_rgb(i),
        Color::Rgb(r, g, b) => (r, g, b),
    };
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Text safe inside an XML element or attribute.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// How one cell looks once reverse video is applied.
#[derive(Clone, PartialEq)]
struct Look {
    fg: String,
    bg: String,
    bold: bool,
    italic: bool,
    underline: bool,
    crossed: bool,
    dim: bool,
    hidden: bool,
}

fn look(cell: &Cell, fg: &str, bg: &str) -> Look {
    let m = cell.modifier;
    let (mut f, mut b) = (color_hex(cell.fg, fg), color_hex(cell.bg, bg));
    if m.contains(Modifier::REVERSED) {
        std::mem::swap(&mut f, &mut b);
    }
    Look {
        fg: f,
        bg: b,
        bold: m.contains(Modifier::BOLD),
        italic: m.contains(Modifier::ITALIC),
        underline: m.contains(Modifier::UNDERLINED),
        crossed: m.contains(Modifier::CROSSED_OUT),
        dim: m.contains(Modifier::DIM),
        hidden: m.contains(Modifier::HIDDEN),
    }
}

/// The buffer as an SVG with the default colours.
pub fn buffer_to_svg(buf: &Buffer) -> String {
    buffer_to_svg_with(buf, DEFAULT_FG, DEFAULT_BG)
}

/// The buffer as an SVG; `Reset` colours become `fg` and `bg`.
pub fn buffer_to_svg_with(buf: &Buffer, fg: &str, bg: &str) -> String {
    let area = buf.area;
    let (w, h) = (f64::from(area.width) * CELL_W, f64::from(area.height) * CELL_H);
    let mut out = String::new();
    let _ = writeln!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.1}" height="{h:.1}" viewBox="0 0 {w:.1} {h:.1}">"#);
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="{}"/>"#, xml_escape(bg));
    let _ = writeln!(out, r#"<g font-family="{}" font-size="{FONT_SIZE}" xml:space="preserve" style="white-space:pre">"#, xml_escape(FONT_FAMILY));
    for y in 0..area.height {
        let row: Vec<(&Cell, Look)> = (0..area.width).filter_map(|x| buf.cell((area.x + x, area.y + y))).map(|c| (c, look(c, fg, bg))).collect();
        backgrounds(&mut out, &row, y, bg);
        texts(&mut out, &row, y);
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// Runs of the same background colour other than the canvas.
fn backgrounds(out: &mut String, row: &[(&Cell, Look)], y: u16, canvas: &str) {
    let mut x = 0;
    while x < row.len() {
        let bg = &row[x].1.bg;
        let end = (x..row.len()).find(|i| row[*i].1.bg != *bg).unwrap_or(row.len());
        if bg != canvas {
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{CELL_H}" fill="{}"/>"#,
                x as f64 * CELL_W,
                f64::from(y) * CELL_H,
                (end - x) as f64 * CELL_W,
                xml_escape(bg)
            );
        }
        x = end;
    }
}

/// Runs of the same text style; wide glyphs hide the cell after them.
fn texts(out: &mut String, row: &[(&Cell, Look)], y: u16) {
    let same = |a: &Look, b: &Look| {
        (a.fg.as_str(), a.bold, a.italic, a.underline, a.crossed, a.dim, a.hidden) == (b.fg.as_str(), b.bold, b.italic, b.underline, b.crossed, b.dim, b.hidden)
    };
    let mut x = 0;
    while x < row.len() {
        let first = &row[x].1;
        let end = (x..row.len()).find(|i| !same(&row[*i].1, first)).unwrap_or(row.len());
        let mut text = String::new();
        let mut hide = 0usize;
        for (cell, _) in &row[x..end] {
            if hide > 0 {
                hide -= 1;
                continue;
            }
            let sym = if first.hidden { " " } else { cell.symbol() };
            hide = Span::raw(sym).width().saturating_sub(1);
            text.push_str(sym);
        }
        let trimmed = text.trim_end();
        if !trimmed.trim().is_empty() || first.underline {
            let cells = if first.underline { end - x } else { fmt_width(trimmed) };
            let mut attrs = format!(r#" fill="{}""#, xml_escape(&first.fg));
            if first.bold {
                attrs.push_str(r#" font-weight="bold""#);
            }
            if first.italic {
                attrs.push_str(r#" font-style="italic""#);
            }
            match (first.underline, first.crossed) {
                (true, true) => attrs.push_str(r#" text-decoration="underline line-through""#),
                (true, false) => attrs.push_str(r#" text-decoration="underline""#),
                (false, true) => attrs.push_str(r#" text-decoration="line-through""#),
                _ => {}
            }
            if first.dim {
                attrs.push_str(r#" fill-opacity="0.6""#);
            }
            let body = if first.underline { text.as_str() } else { trimmed };
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" textLength="{:.1}" lengthAdjust="spacingAndGlyphs"{attrs}>{}</text>"#,
                x as f64 * CELL_W,
                f64::from(y) * CELL_H + CELL_H * 0.78,
                cells as f64 * CELL_W,
                xml_escape(body)
            );
        }
        x = end;
    }
}

fn fmt_width(s: &str) -> usize {
    Span::raw(s).width()
}

#[cfg(test)]
mod tests {
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    use super::*;

    #[test]
    fn maps_named_indexed_and_rgb_colours() {
        assert_eq!(color_hex(Color::Reset, "#123456"), "#123456");
        assert_eq!(color_hex(Color::Red, "#000000"), "#cd0000");
        assert_eq!(color_hex(Color::White, "#000000"), "#ffffff");
        assert_eq!(color_hex(Color::Indexed(1), "#000000"), "#cd0000");
        assert_eq!(color_hex(Color::Indexed(16), "#000000"), "#000000");
        assert_eq!(color_hex(Color::Indexed(17), "#000000"), "#00005f");
        assert_eq!(color_hex(Color::Indexed(81), "#000000"), "#5fd7ff");
        assert_eq!(color_hex(Color::Indexed(196), "#000000"), "#ff0000");
        assert_eq!(color_hex(Color::Indexed(231), "#000000"), "#ffffff");
        assert_eq!(color_hex(Color::Indexed(232), "#000000"), "#080808");
        assert_eq!(color_hex(Color::Indexed(255), "#000000"), "#eeeeee");
        assert_eq!(color_hex(Color::Rgb(1, 2, 254), "#000000"), "#0102fe");
    }

    #[test]
    fn escapes_xml() {
        assert_eq!(xml_escape(r#"<a href="x">&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;");
        assert_eq!(xml_escape("ok\x1b[2J"), "ok[2J");
    }

    #[test]
    fn merges_runs_and_draws_backgrounds() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
        buf.set_string(0, 0, "ab", Style::new().fg(Color::Indexed(196)));
        buf.set_string(2, 0, "<c", Style::new().fg(Color::Indexed(196)).bg(Color::Indexed(24)));
        buf.set_string(4, 0, "d", Style::new().add_modifier(Modifier::REVERSED));
        let svg = buffer_to_svg(&buf);
        assert_eq!(svg.matches("<text").count(), 2, "{svg}");
        assert!(svg.contains(">ab&lt;c</text>"), "{svg}");
        assert!(svg.contains(r##"fill="#005f87""##), "background of <c: {svg}");
        // Reverse video: default fg becomes the background.
        assert!(svg.contains(&format!(r#"fill="{DEFAULT_FG}"/>"#)), "{svg}");
        assert!(svg.contains(FONT_FAMILY));
    }

    #[test]
    fn renders_the_console_off_screen() {
        let view = crate::tui::fixture::demo_view();
        let ctx = DrawContext { theme: crate::tui::Theme::dark(), ..DrawContext::new("SIM") };
        let buf = render_to_buffer(&view, &App::default(), &ctx, 80, 24);
        assert_eq!(buf.area, Rect::new(0, 0, 80, 24));
        let svg = buffer_to_svg(&buf);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("gpuroom"));
    }
}

/// Writes screenshots of the demo view for eyeballing:
/// `cargo test --lib tui::svg::shots -- --ignored`, into `$TUI_SHOTS` or `/tmp/tui-shots`.
#[cfg(test)]
mod shots {
    use super::*;
    use crate::tui::pane_id::PaneId;

    #[test]
    #[ignore]
    fn write_demo_screenshots() {
        let dir = std::env::var("TUI_SHOTS").unwrap_or_else(|_| "/tmp/tui-shots".into());
        std::fs::create_dir_all(&dir).unwrap();
        let view = crate::tui::fixture::demo_view();
        let app = App::with_focus(PaneId::Queue);
        for (w, h) in [(120, 40), (80, 24), (200, 60)] {
            for (name, theme) in [("dark", crate::tui::Theme::dark()), ("mono", crate::tui::Theme::mono())] {
                let ctx = DrawContext { theme, ..DrawContext::new("SIM seed 1 ×60") };
                let buf = render_to_buffer(&view, &app, &ctx, w, h);
                std::fs::write(format!("{dir}/console-{w}x{h}-{name}.svg"), buffer_to_svg(&buf)).unwrap();
            }
        }
        let mut help = App::new();
        help.help = true;
        let ctx = DrawContext { theme: crate::tui::Theme::dark(), ..DrawContext::new("SIM seed 1 ×60") };
        std::fs::write(format!("{dir}/help-80x24.svg"), buffer_to_svg(&render_to_buffer(&view, &help, &ctx, 80, 24))).unwrap();
    }

    /// The Slurm pane on the fixture cluster, drawn the way `gpuroom
    /// screenshot` draws (its context and canvas), since the simulated world
    /// has no Slurm: `TUI_SHOTS=screenshots cargo test --release --lib
    /// tui::svg::shots::write_slurm_screenshots -- --ignored`.
    #[test]
    #[ignore]
    fn write_slurm_screenshots() {
        let dir = std::env::var("TUI_SHOTS").unwrap_or_else(|_| "/tmp/tui-shots".into());
        std::fs::create_dir_all(&dir).unwrap();
        let view = crate::tui::fixture::slurm_view();
        let mut ctx = DrawContext::new("SIM ×60 seed 1");
        ctx.data_age = Some(std::time::Duration::from_millis(400));
        ctx.theme = crate::tui::theme_file::load("dark").unwrap();
        let bg = color_hex(ctx.theme.background, DEFAULT_BG);
        let fg = color_hex(ctx.theme.text.fg.unwrap_or(Color::Reset), DEFAULT_FG);
        let console = App::with_focus(PaneId::Slurm);
        let mut zoomed = console.clone();
        zoomed.zoom = true;
        for (name, app, w, h) in [("console-slurm-160x48", &console, 160, 48), ("console-slurm-120x40", &console, 120, 40), ("pane-slurm", &zoomed, 120, 40)] {
            let buf = render_to_buffer(&view, app, &ctx, w, h);
            std::fs::write(format!("{dir}/{name}.svg"), buffer_to_svg_with(&buf, &fg, &bg)).unwrap();
        }
        // The wall of a site that is only a Slurm cluster: its page first, Slurm's figures.
        let mut only = View { at: view.at, ..View::default() };
        only.slurm = view.slurm.clone();
        ctx.theme = crate::tui::theme_file::load("high-contrast").unwrap();
        let bg = color_hex(ctx.theme.background, DEFAULT_BG);
        let fg = color_hex(ctx.theme.text.fg.unwrap_or(Color::Reset), DEFAULT_FG);
        for (name, w, h) in [("wall-slurm-120x40", 120, 40), ("wall-slurm-200x60", 200, 60)] {
            let wall = crate::tui::wall::WallState { page: 0, next_in: Some(std::time::Duration::from_secs(12)) };
            let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, w, h));
            crate::tui::wall::draw_wall(&only, &wall, &ctx, buf.area, &mut buf);
            std::fs::write(format!("{dir}/{name}.svg"), buffer_to_svg_with(&buf, &fg, &bg)).unwrap();
        }
    }
}
