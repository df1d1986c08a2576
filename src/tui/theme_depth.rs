//! Colour depth: how many colours the terminal shows (truecolor, 256, 16,
//! none), `Theme::at_depth` to fit a theme to it (and `Theme::from_env`, the
//! default theme fitted to this terminal), and the WCAG contrast arithmetic
//! the theme checks use. The xterm palette itself is `palette`'s.
//!
//! Owns colour arithmetic only. Detection is a pure function of the
//! environment's values; only `ColorDepth::from_env` reads the environment.
//! It must not change what a style means: a converted theme keeps its
//! modifiers, and the monochrome one is designed (`themes/mono.toml`), not
//! derived by deleting colours.

use ratatui::style::{Color, Style};

use super::palette::{ANSI16, indexed_rgb};
use super::theme::Theme;

/// What the terminal can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColorDepth {
    /// Any `#rrggbb`.
    TrueColor,
    /// The xterm 256-colour palette.
    Palette256,
    /// The 16 ANSI colours (whatever the terminal's palette makes of them).
    Basic16,
    /// No colour: `NO_COLOR` or a dumb terminal.
    Mono,
}

/// Parts of `TERM` that say how many colours, first match wins. Anything
/// else that is not `dumb` (linux, vt100, xterm, screen, an unset TERM) is
/// taken for 16 colours: every colour terminal has those, so guessing low
/// costs some shades while guessing high shows wrong colours.
const TERM_DEPTHS: [(&str, ColorDepth); 4] =
    [("-direct", ColorDepth::TrueColor), ("truecolor", ColorDepth::TrueColor), ("24bit", ColorDepth::TrueColor), ("256color", ColorDepth::Palette256)];

impl ColorDepth {
    pub const ALL: [ColorDepth; 4] = [ColorDepth::TrueColor, ColorDepth::Palette256, ColorDepth::Basic16, ColorDepth::Mono];

    /// From the values of `NO_COLOR`, `COLORTERM` and `TERM` (`None` when
    /// unset). `NO_COLOR` wins when non-empty (<https://no-color.org>), then a
    /// dumb terminal, then `COLORTERM=truecolor|24bit` (which terminals set
    /// even where TERM says less, e.g. inside tmux), then `TERM`.
    pub fn detect(no_color: Option<&str>, colorterm: Option<&str>, term: Option<&str>) -> ColorDepth {
        if no_color.is_some_and(|v| !v.is_empty()) {
            return ColorDepth::Mono;
        }
        let term = term.unwrap_or_default().trim().to_ascii_lowercase();
        if term == "dumb" {
            return ColorDepth::Mono;
        }
        let colorterm = colorterm.unwrap_or_default().trim().to_ascii_lowercase();
        if colorterm == "truecolor" || colorterm == "24bit" {
            return ColorDepth::TrueColor;
        }
        TERM_DEPTHS.iter().find(|(part, _)| term.contains(part)).map_or(ColorDepth::Basic16, |&(_, depth)| depth)
    }

    /// `detect` on this process's environment.
    pub fn from_env() -> ColorDepth {
        let var = |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        ColorDepth::detect(var("NO_COLOR").as_deref(), var("COLORTERM").as_deref(), var("TERM").as_deref())
    }
}

impl Theme {
    /// The dark theme fitted to the terminal (`ColorDepth::from_env`): with
    /// `NO_COLOR` set (<https://no-color.org>) or `TERM=dumb` that is the
    /// monochrome theme.
    pub fn from_env() -> Theme {
        Theme::dark().at_depth(ColorDepth::from_env())
    }

    /// This theme as a terminal of `depth` can show it. At `Mono` that is the
    /// monochrome theme's styles (deleting colours from a coloured theme
    /// would leave ok, warn and alarm alike), keeping this theme's name and,
    /// when they differ, its border types.
    pub fn at_depth(&self, depth: ColorDepth) -> Theme {
        match depth {
            ColorDepth::TrueColor => self.clone(),
            ColorDepth::Mono => {
                let mono = Theme::mono();
                let (border_type, border_type_focused) = if self.border_type != self.border_type_focused {
                    (self.border_type, self.border_type_focused)
                } else {
                    (mono.border_type, mono.border_type_focused)
                };
                Theme { name: self.name.clone(), background: Color::Reset, border_type, border_type_focused, ..mono }
            }
            ColorDepth::Palette256 | ColorDepth::Basic16 => {
                let fit_style = |s: Style| Style { fg: s.fg.map(|c| fit(c, depth)), bg: s.bg.map(|c| fit(c, depth)), ..s };
                Theme { background: fit(self.background, depth), ..self.map_styles(fit_style) }
            }
        }
    }
}

/// `c` as a terminal of `depth` can show it: at `Mono` every colour becomes
/// `Reset` (the terminal's own); otherwise `Reset` and colours the depth has
/// are left alone.
pub fn fit(c: Color, depth: ColorDepth) -> Color {
    match (depth, c) {
        (ColorDepth::TrueColor, c) => c,
        (ColorDepth::Mono, _) => Color::Reset,
        (ColorDepth::Palette256, Color::Rgb(r, g, b)) => Color::Indexed(nearest_256((r, g, b))),
        (ColorDepth::Basic16, Color::Indexed(i)) if i < 16 => ANSI16[usize::from(i)],
        (ColorDepth::Basic16, Color::Indexed(i)) => nearest_16(indexed_rgb(i)),
        (ColorDepth::Basic16, Color::Rgb(r, g, b)) => nearest_16((r, g, b)),
        (ColorDepth::Palette256 | ColorDepth::Basic16, c) => c,
    }
}

/// The nearest palette entry from 16 up, by CIELAB distance: plain RGB
/// distance ties and misses on exactly the colours that matter (it sends
/// Okabe–Ito's bluish green to a plain green and its yellow to a pale
/// orange). Entries 0-15 are left out because terminals and users redefine
/// them, so they approximate no particular `#rrggbb`; the cube and the grey
/// ramp are fixed.
pub fn nearest_256(rgb: (u8, u8, u8)) -> u8 {
    let want = lab(rgb);
    let distance = |i: &u8| delta_e(lab(indexed_rgb(*i)), want);
    (16..=255).min_by(|a, b| distance(a).total_cmp(&distance(b))).unwrap_or(16)
}

/// CIELAB (D65) of an sRGB colour.
pub fn lab((r, g, b): (u8, u8, u8)) -> [f64; 3] {
    lab_of_linear(linear(r), linear(g), linear(b))
}

fn lab_of_linear(r: f64, g: f64, b: f64) -> [f64; 3] {
    let (x, y, z) = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883);
    let f = |t: f64| if t > 216.0 / 24389.0 { t.cbrt() } else { (24389.0 / 27.0 * t + 16.0) / 116.0 };
    [116.0 * f(y) - 16.0, 500.0 * (f(x) - f(y)), 200.0 * (f(y) - f(z))]
}

/// CIE76 colour difference: about 2 is just noticeable, 10 plainly
/// different side by side, 30 unmistakable.
pub fn delta_e(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// Below this spread between the largest and smallest channel a colour is
/// taken for a grey: #87afaf (a grey-cyan heading) still counts as cyan.
const GREY_SPREAD: u8 = 30;

/// Greys by lightness ((max+min)/2): up to this value, this colour. Dark
/// greys used as backgrounds (236-243) become DarkGray rather than Black so
/// that a header bar or an unfocused selection stays visible on a black
/// terminal.
const GREYS: [(u8, Color); 4] = [(0x2f, Color::Black), (0x9f, Color::DarkGray), (0xdf, Color::Gray), (0xff, Color::White)];

/// Hue sectors in degrees (upper bound, exclusive) and their normal and
/// bright colour. Not equal sextants: chosen by eye against xterm's colours
/// so that orange (214) goes to yellow but vermillion (#D55E00) to red, cyan
/// 81 to cyan but steel blue 24 to blue, and lavender 141 to magenta, which
/// keeps the built-in themes' ok/warn/alarm and billing colours apart at 16
/// colours (tested).
const HUES: [(f64, Color, Color); 7] = [
    (30.0, Color::Red, Color::LightRed),
    (75.0, Color::Yellow, Color::LightYellow),
    (165.0, Color::Green, Color::LightGreen),
    (196.0, Color::Cyan, Color::LightCyan),
    (255.0, Color::Blue, Color::LightBlue),
    (345.0, Color::Magenta, Color::LightMagenta),
    (360.0, Color::Red, Color::LightRed),
];

/// The nearest of the 16 ANSI colours by hue first, then brightness. Plain
/// RGB distance is not used because it sends pastels to grey (dark's pale
/// green ok, #87d787, is nearer xterm's Gray than its Green), which would
/// make ok look like plain text.
pub fn nearest_16((r, g, b): (u8, u8, u8)) -> Color {
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    if max - min < GREY_SPREAD {
        let lightness = ((u16::from(max) + u16::from(min)) / 2) as u8;
        return GREYS.iter().find(|&&(upto, _)| lightness <= upto).map_or(Color::White, |&(_, c)| c);
    }
    let (rf, gf, bf, spread) = (f64::from(r), f64::from(g), f64::from(b), f64::from(max - min));
    let hue = if max == r {
        60.0 * ((gf - bf) / spread)
    } else if max == g {
        60.0 * (2.0 + (bf - rf) / spread)
    } else {
        60.0 * (4.0 + (rf - gf) / spread)
    }
    .rem_euclid(360.0);
    // Bright when near full intensity or pale: xterm's normal colours are
    // at most #cd, its bright ones #ff.
    let bright = max >= 0xe6 || u16::from(max) + u16::from(min) >= 300;
    let &(_, normal, light) = HUES.iter().find(|&&(upto, _, _)| hue < upto).unwrap_or(&HUES[0]);
    if bright { light } else { normal }
}

/// The RGB a colour stands for (xterm's palette for indexed and named
/// colours); `None` for `Reset`, which is whatever the terminal uses.
pub fn rgb(c: Color) -> Option<(u8, u8, u8)> {
    match c {
        Color::Reset => None,
        Color::Rgb(r, g, b) => Some((r, g, b)),
        Color::Indexed(i) => Some(indexed_rgb(i)),
        named => ANSI16.iter().position(|&a| a == named).map(|i| indexed_rgb(i as u8)),
    }
}

/// WCAG 2 relative luminance, 0 (black) to 1 (white).
pub fn relative_luminance((r, g, b): (u8, u8, u8)) -> f64 {
    0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

/// An sRGB channel as linear light.
fn linear(c: u8) -> f64 {
    let c = f64::from(c) / 255.0;
    if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
}

/// WCAG 2 contrast ratio, 1 to 21; `None` when either colour is `Reset`.
/// 4.5 is the AA level for body text, 7 the AAA level.
pub fn contrast_ratio(a: Color, b: Color) -> Option<f64> {
    let (la, lb) = (relative_luminance(rgb(a)?), relative_luminance(rgb(b)?));
    Some((la.max(lb) + 0.05) / (la.min(lb) + 0.05))
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::Modifier;

    use super::*;
    use crate::tui::app::App;
    use crate::tui::context::DrawContext;

    #[test]
    fn detection_follows_no_color_then_colorterm_then_term() {
        use ColorDepth::*;
        let cases = [
            (None, Some("truecolor"), Some("xterm-256color"), TrueColor),
            (None, Some("24bit"), Some("xterm"), TrueColor),
            (None, Some("TrueColor"), Some("screen"), TrueColor),
            (None, None, Some("xterm-direct"), TrueColor),
            (None, None, Some("xterm-256color"), Palette256),
            (None, None, Some("screen-256color"), Palette256),
            (None, None, Some("tmux-256color"), Palette256),
            (None, Some("yes"), Some("rxvt-unicode-256color"), Palette256),
            (None, None, Some("xterm"), Basic16),
            (None, None, Some("linux"), Basic16),
            (None, None, Some("vt100"), Basic16),
            (None, None, None, Basic16),
            (None, None, Some("dumb"), Mono),
            (None, Some("truecolor"), Some("dumb"), Mono),
            (Some("1"), Some("truecolor"), Some("xterm-256color"), Mono),
            // An empty NO_COLOR does not count (no-color.org).
            (Some(""), None, Some("xterm-256color"), Palette256),
            (Some(""), None, Some("dumb"), Mono),
        ];
        for (no_color, colorterm, term, want) in cases {
            assert_eq!(ColorDepth::detect(no_color, colorterm, term), want, "NO_COLOR={no_color:?} COLORTERM={colorterm:?} TERM={term:?}");
        }
    }

    #[test]
    fn known_colours_map_where_expected() {
        use Color::*;
        let to16 = [
            (Indexed(196), LightRed),
            (Indexed(124), Red),
            (Indexed(231), White),
            (Indexed(16), Black),
            (Indexed(232), Black),
            (Indexed(244), DarkGray),
            (Indexed(250), Gray),
            (Indexed(21), LightBlue),
            (Indexed(46), LightGreen),
            (Indexed(28), Green),
            (Indexed(226), LightYellow),
            (Indexed(51), LightCyan),
            (Indexed(201), LightMagenta),
            (Indexed(9), LightRed),
            (Indexed(0), Black),
            (Indexed(114), LightGreen),
            (Indexed(214), LightYellow),
            (Indexed(203), LightRed),
            (Rgb(0, 0, 0), Black),
            (Rgb(255, 255, 255), White),
            (Rgb(0xd5, 0x5e, 0x00), Red),
            (Rgb(0xe6, 0x9f, 0x00), LightYellow),
            (Rgb(0x56, 0xb4, 0xe9), LightBlue),
            (LightRed, LightRed),
            (Reset, Reset),
        ];
        for (from, want) in to16 {
            assert_eq!(fit(from, ColorDepth::Basic16), want, "{from:?} at 16 colours");
        }
        let to256 = [((0, 0, 0), 16), ((255, 255, 255), 231), ((255, 0, 0), 196), ((128, 128, 128), 244), ((0xd5, 0x5e, 0x00), 166), ((0x1c, 0x1c, 0x1c), 234)];
        for (from, want) in to256 {
            assert_eq!(nearest_256(from), want, "{from:?}");
        }
        assert_eq!(fit(Rgb(255, 0, 0), ColorDepth::Palette256), Indexed(196));
        assert_eq!(fit(Indexed(3), ColorDepth::Palette256), Indexed(3));
        assert_eq!(fit(Rgb(1, 2, 3), ColorDepth::TrueColor), Rgb(1, 2, 3));
        assert_eq!(fit(Indexed(81), ColorDepth::Mono), Reset);
    }

    #[test]
    fn every_palette_entry_maps_to_itself_at_256_and_to_a_named_colour_at_16() {
        for i in 16..=255u8 {
            assert_eq!(nearest_256(indexed_rgb(i)), i);
            assert!(ANSI16.contains(&fit(Color::Indexed(i), ColorDepth::Basic16)));
        }
    }

    /// The 256→16 mapping at a glance: k r g y b m c w are black … white
    /// (w is Gray), capitals the bright ones (K is DarkGray, W White).
    #[test]
    fn palette_256_to_16() {
        let code = |c: Color| {
            let i = ANSI16.iter().position(|&a| a == c).expect("a named colour");
            ['k', 'r', 'g', 'y', 'b', 'm', 'c', 'w', 'K', 'R', 'G', 'Y', 'B', 'M', 'C', 'W'][i]
        };
        let mut grid = String::new();
        for (i, c) in (0..=255u8).map(|i| (i, fit(Color::Indexed(i), ColorDepth::Basic16))) {
            if i % 16 == 0 {
                let _ = write!(grid, "{}{i:3}:", if i == 0 { "" } else { "\n" });
            }
            let _ = write!(grid, " {}", code(c));
        }
        insta::assert_snapshot!(grid);
    }

    #[test]
    fn contrast_matches_the_wcag_examples() {
        let ratio = |a, b| contrast_ratio(a, b).unwrap();
        assert!((ratio(Color::Rgb(0, 0, 0), Color::Rgb(255, 255, 255)) - 21.0).abs() < 1e-9);
        assert!((ratio(Color::Indexed(231), Color::Indexed(231)) - 1.0).abs() < 1e-9);
        // #767676 on white is the well-known smallest grey that passes AA.
        assert!(ratio(Color::Rgb(0x76, 0x76, 0x76), Color::Rgb(255, 255, 255)) >= 4.5);
        assert!(ratio(Color::Rgb(0x77, 0x77, 0x77), Color::Rgb(255, 255, 255)) < 4.5);
        assert_eq!(contrast_ratio(Color::Reset, Color::Black), None);
    }

    /// The foregrounds whose contrast matters most, and each style drawn on
    /// its own background with the text colour when it gives none.
    fn contrast_failures(t: &Theme, min: f64, every_style: bool) -> Vec<String> {
        let mut failures = Vec::new();
        let main = ["text", "figure", "heading", "ok", "warn", "alarm", "key", "chart_over", "billing[0]", "billing[1]", "billing[2]"];
        for (name, s) in t.styles() {
            let (fg, bg) = match (s.fg, s.bg) {
                (fg, Some(bg)) => (fg.or(t.text.fg), bg),
                (Some(fg), None) if every_style || main.contains(&name.as_str()) => (Some(fg), t.background),
                _ => continue,
            };
            let Some(fg) = fg else { continue };
            match contrast_ratio(fg, bg) {
                Some(r) if r >= min => {}
                r => failures.push(format!("{} {name}: {fg:?} on {bg:?} is {r:.2?}:1, under {min}:1", t.name)),
            }
        }
        failures
    }

    #[test]
    fn text_figures_and_alarms_are_readable_on_the_themes_background() {
        let themes = [(Theme::dark(), 4.5, false), (Theme::light(), 4.5, false), (Theme::colour_blind(), 4.5, false), (Theme::high_contrast(), 7.0, true)];
        let mut failures = Vec::new();
        for (t, min, every_style) in themes {
            failures.extend(contrast_failures(&t, min, every_style));
            // Most terminals over SSH show the 256-colour version.
            failures.extend(contrast_failures(&t.at_depth(ColorDepth::Palette256), min, every_style));
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// A selected row keeps its cells' own colours (the selection style is
    /// patched under them), so they must stay readable on the selection bar.
    /// Reverse video keeps every contrast as it is on the background (the
    /// ratio is symmetric), so it passes as long as it adds no colour.
    fn selection_failures(t: &Theme, min: f64) -> Vec<String> {
        let mut failures = Vec::new();
        let row = [("text", t.text), ("figure", t.figure), ("ok", t.ok), ("warn", t.warn), ("alarm", t.alarm), ("key", t.key), ("dim", t.dim)];
        let billing = t.billing.iter().enumerate().map(|(i, s)| (["reserved", "on-demand", "spot"][i], *s));
        // The focused selection is the one being read; the unfocused one only
        // marks the place, so it needs WCAG's 3:1 floor for large text and
        // controls. Dim text is secondary everywhere and gets that floor too.
        for (sel_name, sel, min) in [("selected", t.selected, min), ("selected_unfocused", t.selected_unfocused, 3.0)] {
            if sel.add_modifier.contains(Modifier::REVERSED) {
                if sel.fg.is_some() || sel.bg.is_some() {
                    failures.push(format!("{} {sel_name}: reverse video with a colour breaks the symmetry", t.name));
                }
                continue;
            }
            let Some(bar) = sel.bg else { continue };
            for (name, s) in row.into_iter().chain(billing.clone()) {
                let min = if name == "dim" { min.min(3.0) } else { min };
                let Some(fg) = s.fg else { continue };
                match contrast_ratio(fg, bar) {
                    Some(r) if r >= min => {}
                    r => failures.push(format!("{} {name} on {sel_name}: {fg:?} on {bar:?} is {r:.2?}:1, under {min}:1", t.name)),
                }
            }
        }
        failures
    }

    #[test]
    fn a_selected_row_stays_readable() {
        let themes = [(Theme::dark(), 4.5), (Theme::light(), 4.5), (Theme::colour_blind(), 4.5), (Theme::high_contrast(), 7.0)];
        let mut failures = Vec::new();
        for (t, min) in themes {
            failures.extend(selection_failures(&t, min));
            failures.extend(selection_failures(&t.at_depth(ColorDepth::Palette256), min));
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        // The check bites: the yellow bar this theme once had hid its warnings.
        let mut t = Theme::high_contrast();
        t.selected = Style::new().fg(Color::Indexed(16)).bg(Color::Indexed(226));
        assert!(selection_failures(&t, 7.0).iter().any(|f| f.contains("warn on selected")));
    }

    #[test]
    fn the_contrast_check_can_fail() {
        let mut t = Theme::dark();
        t.alarm = t.alarm.fg(Color::Indexed(236));
        assert_eq!(contrast_failures(&t, 4.5, false).len(), 1);
    }

    /// Machado, Oliveira & Fernandes (2009), severity 1, on linear RGB.
    const VISION: [(&str, [[f64; 3]; 3]); 4] = [
        ("normal", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ("protanopia", [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]),
        ("deuteranopia", [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]),
        ("tritanopia", [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]),
    ];

    /// CIE76 ΔE between two colours as seen with `m`.
    fn seen_apart(m: &[[f64; 3]; 3], a: Color, b: Color) -> f64 {
        let seen = |c: Color| {
            let (r, g, b) = rgb(c).expect("a colour");
            let l = [linear(r), linear(g), linear(b)];
            let row = |i: usize| (m[i][0] * l[0] + m[i][1] * l[1] + m[i][2] * l[2]).clamp(0.0, 1.0);
            lab_of_linear(row(0), row(1), row(2))
        };
        delta_e(seen(a), seen(b))
    }

    fn too_close(t: &Theme, group: &[(&str, Style)], min: f64) -> Vec<String> {
        let mut failures = Vec::new();
        for (vision, m) in &VISION {
            for (i, (a, x)) in group.iter().enumerate() {
                for (b, y) in &group[i + 1..] {
                    let d = seen_apart(m, x.fg.unwrap(), y.fg.unwrap());
                    if d < min {
                        failures.push(format!("{}: {a} and {b} are ΔE {d:.1} apart with {vision}, under {min}", t.name));
                    }
                }
            }
        }
        failures
    }

    #[test]
    fn the_colour_blind_theme_keeps_states_and_billing_apart_in_every_deficiency() {
        // ΔE 30 is unmistakable even in a one-cell glyph; billing modes also
        // carry their letter, so 15 (clearly distinct side by side) is enough.
        for t in [Theme::colour_blind(), Theme::colour_blind().at_depth(ColorDepth::Palette256)] {
            let mut failures = too_close(&t, &[("ok", t.ok), ("warn", t.warn), ("alarm", t.alarm)], 30.0);
            let [r, o, s] = t.billing;
            failures.extend(too_close(&t, &[("reserved", r), ("on-demand", o), ("spot", s)], 15.0));
            assert!(failures.is_empty(), "{}", failures.join("\n"));
        }
        // The check bites: dark's green ok and red alarm are what it exists for.
        let dark = Theme::dark();
        assert!(!too_close(&dark, &[("ok", dark.ok), ("alarm", dark.alarm)], 30.0).is_empty());
    }

    #[test]
    fn every_theme_at_every_depth_draws_the_demo_console() {
        let view = crate::tui::fixture::demo_view();
        let app = App::new();
        for theme in Theme::built_ins() {
            for depth in ColorDepth::ALL {
                let ctx = DrawContext { theme: theme.at_depth(depth), ..DrawContext::new("SIM seed 1 ×60") };
                let mut buf = Buffer::empty(Rect::new(0, 0, 120, 40));
                crate::tui::draw_buffer(&app, &view, &ctx, buf.area, &mut buf);
                let at = format!("{} at {depth:?}", theme.name);
                assert!(buf.content.iter().any(|c| c.symbol() != " "), "{at}: nothing drawn");
                for cell in &buf.content {
                    let colours = [cell.fg, cell.bg];
                    match depth {
                        ColorDepth::TrueColor => {}
                        ColorDepth::Palette256 => assert!(!colours.iter().any(|c| matches!(c, Color::Rgb(..))), "{at}: {cell:?}"),
                        ColorDepth::Basic16 => assert!(!colours.iter().any(|c| matches!(c, Color::Rgb(..) | Color::Indexed(_))), "{at}: {cell:?}"),
                        ColorDepth::Mono => assert_eq!(colours, [Color::Reset; 2], "{at}: {cell:?}"),
                    }
                }
            }
        }
    }
}
