//! Named styles for the console: the util ramp, billing modes, ok/warn/alarm,
//! borders, dim text, header. Built-in themes: dark (the default), light,
//! high-contrast (wall displays), colour-blind (Okabe–Ito) and mono (`NO_COLOR`).
//!
//! Owns only styles. It must not decide what is drawn: every pane draws the
//! same glyphs whatever the theme, so meaning never rests on colour alone and
//! the monochrome theme stays readable (bold, reverse, underline instead).
//! The built-in themes are TOML files in `themes/`, and `Theme::dark()` and
//! its siblings are built from them in `theme_file`; fitting a theme to what
//! the terminal can show (`Theme::from_env`, `at_depth`) is `theme_depth`'s
//! business. This file imports neither, so both can build on it.

use ratatui::style::{Color, Style};
use ratatui::widgets::BorderType;

use crate::domain::cluster::BillingMode;

/// Levels of the utilization ramp (` ▁▂▃▄▅▆▇█`).
pub const RAMP_LEVELS: usize = 9;

/// Every style of a theme, in one list: `Theme`'s fields, the theme file's
/// `[styles]` table, reading a file and `map_named` are all made from it,
/// so a new style is one line here (a forgotten place would not compile).
macro_rules! theme_styles {
    ($then:ident) => {
        $then! {
            /// Plain text.
            text: Style,
            /// Secondary text: labels, units, column headers' neighbours.
            dim: Style,
            /// Column headers inside panes.
            heading: Style,
            /// Figures worth reading first (the number a row is about).
            figure: Style,
            /// The one-line header bar.
            header: Style,
            /// The product name in the header.
            brand: Style,
            border: Style,
            border_focused: Style,
            title: Style,
            title_focused: Style,
            ok: Style,
            warn: Style,
            alarm: Style,
            /// The alarm strip when an alarm is active.
            alarm_banner: Style,
            /// The selected row of a table.
            selected: Style,
            /// The selected row when its pane does not have the focus.
            selected_unfocused: Style,
            /// Utilization ramp, from idle to saturated.
            util: [Style; RAMP_LEVELS],
            /// No sample yet, or the node is down.
            no_data: Style,
            /// Indexed by `BillingMode::index()`: reserved, on-demand, spot.
            billing: [Style; 3],
            /// Memory bars: measured use, allocated but not measured in use, free.
            mem_used: Style,
            mem_alloc: Style,
            mem_free: Style,
            /// Price chart and its part above a max price.
            chart: Style,
            chart_over: Style,
            /// Key names in the footer and the help overlay.
            key: Style,
            /// Commands that exist but do nothing here (greyed).
            key_disabled: Style,
        }
    };
}
pub(crate) use theme_styles;

/// A style field's value, named for checks over the whole theme: one
/// style, or each of an array's (`util[3]`).
pub(crate) trait Named: Sized {
    fn named(&self, name: &str, f: &mut dyn FnMut(&str, Style) -> Style) -> Self;
}

impl Named for Style {
    fn named(&self, name: &str, f: &mut dyn FnMut(&str, Style) -> Style) -> Style {
        f(name, *self)
    }
}

impl<const N: usize> Named for [Style; N] {
    fn named(&self, name: &str, f: &mut dyn FnMut(&str, Style) -> Style) -> Self {
        std::array::from_fn(|i| f(&format!("{name}[{i}]"), self[i]))
    }
}

macro_rules! define_theme {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty ),* $(,)?) => {
        #[derive(Clone, Debug, PartialEq)]
        pub struct Theme {
    pub name: String,
    /// The terminal background the theme is designed for; `Reset` when it
    /// assumes none. Not painted by the console (the terminal keeps its own):
    /// it is what contrast is judged against.
    pub background: Color,
    pub border_type: BorderType,
    pub border_type_focused: BorderType,
            $( $(#[$doc])* pub $field: $ty, )*
        }

        impl Theme {
            /// `f(name, style)` over every style, in the list's order.
            fn map_named(&self, mut f: impl FnMut(&str, Style) -> Style) -> Theme {
                Theme {
                    name: self.name.clone(),
                    background: self.background,
                    border_type: self.border_type,
                    border_type_focused: self.border_type_focused,
                    $( $field: Named::named(&self.$field, stringify!($field), &mut f), )*
                }
            }
        }
    };
}

theme_styles!(define_theme);

impl Default for Theme {
    fn default() -> Self {
        Theme::dark()
    }
}

impl Theme {
    pub fn billing(&self, mode: BillingMode) -> Style {
        self.billing[mode.index()]
    }

    /// Style for a utilization level `0..RAMP_LEVELS`.
    pub fn util_level(&self, level: usize) -> Style {
        self.util[level.min(RAMP_LEVELS - 1)]
    }

    /// ok below `warn_at`, warn below `alarm_at`, alarm from there.
    pub fn grade(&self, value: f64, warn_at: f64, alarm_at: f64) -> Style {
        if value >= alarm_at {
            self.alarm
        } else if value >= warn_at {
            self.warn
        } else {
            self.ok
        }
    }

    /// The same theme with `f` applied to every style.
    pub fn map_styles(&self, mut f: impl FnMut(Style) -> Style) -> Theme {
        self.map_named(|_, s| f(s))
    }

    /// Every style with its name (`util[3]`, `billing[0]`), for checks over
    /// the whole theme.
    pub fn styles(&self) -> Vec<(String, Style)> {
        let mut all = Vec::new();
        self.map_named(|name, s| {
            all.push((name.to_string(), s));
            s
        });
        all
    }
}

#[cfg(test)]
mod tests {
    use ratatui::style::Modifier;

    use super::*;
    use crate::tui::theme_depth::ColorDepth;

    fn coloured() -> [Theme; 4] {
        [Theme::dark(), Theme::light(), Theme::high_contrast(), Theme::colour_blind()]
    }

    #[test]
    fn mono_theme_uses_no_colour() {
        let t = Theme::mono();
        for (name, s) in t.styles() {
            assert!(s.fg.is_none() && s.bg.is_none(), "{name} carries a colour: {s:?}");
        }
        assert_eq!(t.background, Color::Reset);
        // Emphasis survives without colour.
        assert!(t.alarm_banner.add_modifier.contains(Modifier::REVERSED));
        assert!(t.selected.add_modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn built_ins_are_the_five_in_order_with_their_names() {
        let names: Vec<String> = Theme::built_ins().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["dark", "light", "high-contrast", "colour-blind", "mono"]);
        assert_eq!(Theme::default(), Theme::dark());
    }

    #[test]
    fn coloured_themes_say_which_background_they_are_for() {
        for t in coloured() {
            assert_ne!(t.background, Color::Reset, "{} names no background, so its contrast cannot be checked", t.name);
        }
    }

    #[test]
    fn styles_lists_every_style_once() {
        let styles = Theme::dark().styles();
        let mut names: Vec<&str> = styles.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.len(), 24 + RAMP_LEVELS + 3);
        assert!(names.contains(&"util[8]") && names.contains(&"billing[2]") && names.contains(&"key_disabled"));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 24 + RAMP_LEVELS + 3, "a name is repeated");
    }

    #[test]
    fn focus_is_visible_without_colour() {
        for t in Theme::built_ins() {
            for depth in ColorDepth::ALL {
                let t = t.at_depth(depth);
                assert_ne!(t.border_type, t.border_type_focused, "{} at {depth:?}", t.name);
            }
        }
    }

    #[test]
    fn ok_warn_and_alarm_differ_from_each_other_and_from_text() {
        for t in coloured() {
            for depth in [ColorDepth::TrueColor, ColorDepth::Palette256, ColorDepth::Basic16] {
                let t = t.at_depth(depth);
                let at = format!("{} at {depth:?}", t.name);
                // By colour, not only by modifier: the colour is what is seen first.
                let fg = [("text", t.text.fg), ("ok", t.ok.fg), ("warn", t.warn.fg), ("alarm", t.alarm.fg)];
                for (i, (a, x)) in fg.iter().enumerate() {
                    assert!(x.is_some(), "{at}: {a} has no colour");
                    for (b, y) in &fg[i + 1..] {
                        assert_ne!(x, y, "{at}: {a} and {b} look alike");
                    }
                }
                let [r, o, s] = t.billing.map(|s| s.fg);
                assert!(r != o && o != s && r != s, "{at}: billing modes look alike: {:?}", t.billing);
                assert_ne!(t.alarm_banner, t.header, "{at}");
            }
        }
    }

    #[test]
    fn without_colour_warn_and_alarm_still_stand_out() {
        for t in Theme::built_ins() {
            let t = t.at_depth(ColorDepth::Mono);
            let styles = [t.text, t.warn, t.alarm];
            assert!(styles[0] != styles[1] && styles[1] != styles[2] && styles[0] != styles[2], "{}: {styles:?}", t.name);
            assert_ne!(t.selected, t.text, "{}", t.name);
        }
    }

    #[test]
    fn high_contrast_is_bold_and_never_dim() {
        let t = Theme::high_contrast();
        for s in [t.figure, t.warn, t.alarm, t.alarm_banner, t.header, t.selected, t.title_focused] {
            assert!(s.add_modifier.contains(Modifier::BOLD), "{s:?} is not bold");
        }
        for (name, s) in t.styles() {
            assert!(!s.add_modifier.contains(Modifier::DIM), "{name} is dim");
        }
    }

    #[test]
    fn grade_follows_the_thresholds() {
        let t = Theme::dark();
        assert_eq!(t.grade(0.1, 0.5, 0.9), t.ok);
        assert_eq!(t.grade(0.5, 0.5, 0.9), t.warn);
        assert_eq!(t.grade(0.95, 0.5, 0.9), t.alarm);
        assert_eq!(t.util_level(99), t.util[RAMP_LEVELS - 1]);
    }
}
