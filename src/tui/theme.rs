//! Named styles for the console: the util ramp, billing modes, ok/warn/alarm,
//! borders, dim text, header. A dark 256-colour theme and a monochrome one for
//! `NO_COLOR`.
//!
//! Owns only styles. It must not decide what is drawn: every pane draws the
//! same glyphs whatever the theme, so meaning never rests on colour alone and
//! the monochrome theme stays readable (bold, reverse, underline instead).
//! The built-in themes are TOML files in `themes/` (see `theme_file`).

use ratatui::style::Style;
use ratatui::widgets::BorderType;

use crate::core::cluster::BillingMode;

/// Levels of the utilization ramp (` ▁▂▃▄▅▆▇█`).
pub const RAMP_LEVELS: usize = 9;

#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    /// Plain text.
    pub text: Style,
    /// Secondary text: labels, units, column headers' neighbours.
    pub dim: Style,
    /// Column headers inside panes.
    pub heading: Style,
    /// Figures worth reading first (the number a row is about).
    pub figure: Style,
    /// The one-line header bar.
    pub header: Style,
    /// The product name in the header.
    pub brand: Style,
    pub border: Style,
    pub border_focused: Style,
    pub border_type: BorderType,
    pub border_type_focused: BorderType,
    pub title: Style,
    pub title_focused: Style,
    pub ok: Style,
    pub warn: Style,
    pub alarm: Style,
    /// The alarm strip when an alarm is active.
    pub alarm_banner: Style,
    /// The selected row of a table.
    pub selected: Style,
    /// The selected row when its pane does not have the focus.
    pub selected_unfocused: Style,
    /// Utilization ramp, from idle to saturated.
    pub util: [Style; RAMP_LEVELS],
    /// No sample yet, or the node is down.
    pub no_data: Style,
    /// Indexed by `BillingMode::index()`: reserved, on-demand, spot.
    pub billing: [Style; 3],
    /// Memory bars: measured use, allocated but not measured in use, free.
    pub mem_used: Style,
    pub mem_alloc: Style,
    pub mem_free: Style,
    /// Price chart and its part above a max price.
    pub chart: Style,
    pub chart_over: Style,
    /// Key names in the footer and the help overlay.
    pub key: Style,
    /// Commands that exist but do nothing here (greyed).
    pub key_disabled: Style,
}

impl Default for Theme {
    fn default() -> Self {
        Theme::dark()
    }
}


impl Theme {
    /// `NO_COLOR` set to anything non-empty selects the monochrome theme
    /// (<https://no-color.org>), otherwise the dark 256-colour one.
    pub fn from_env() -> Theme {
        match std::env::var_os("NO_COLOR") {
            Some(v) if !v.is_empty() => Theme::mono(),
            _ => Theme::dark(),
        }
    }

    /// Dark background, 256-colour palette (works over SSH without truecolor),
    /// from `themes/dark.toml`.
    pub fn dark() -> Theme {
        let (file, text) = super::theme_file::DARK;
        super::theme_file::parse(file, text).expect("themes/dark.toml is valid (tested)")
    }

    /// No colour at all: emphasis by bold, reverse, underline and glyphs,
    /// from `themes/mono.toml`.
    pub fn mono() -> Theme {
        let (file, text) = super::theme_file::MONO;
        super::theme_file::parse(file, text).expect("themes/mono.toml is valid (tested)")
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Modifier;

    #[test]
    fn mono_theme_uses_no_colour() {
        let t = Theme::mono();
        let styles = [t.text, t.dim, t.header, t.alarm, t.alarm_banner, t.selected, t.key, t.chart_over, t.warn];
        for s in styles.iter().chain(t.util.iter()).chain(t.billing.iter()) {
            assert!(s.fg.is_none() && s.bg.is_none(), "{s:?} carries a colour");
        }
        // Emphasis survives without colour.
        assert!(t.alarm_banner.add_modifier.contains(Modifier::REVERSED));
        assert!(t.selected.add_modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn focus_is_visible_without_colour() {
        for t in [Theme::dark(), Theme::mono()] {
            assert_ne!(t.border_type, t.border_type_focused);
        }
    }
}
