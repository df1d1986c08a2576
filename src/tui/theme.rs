//! Named styles for the console: the util ramp, billing modes, ok/warn/alarm,
//! borders, dim text, header. A dark 256-colour theme and a monochrome one for
//! `NO_COLOR`.
//!
//! Owns only styles. It must not decide what is drawn: every pane draws the
//! same glyphs whatever the theme, so meaning never rests on colour alone and
//! the monochrome theme stays readable (bold, reverse, underline instead).
//! Loading themes from TOML files comes later; keep the struct plain data.

use ratatui::style::{Color, Modifier, Style};
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

fn fg(index: u8) -> Style {
    Style::new().fg(Color::Indexed(index))
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

    /// Dark background, 256-colour palette (works over SSH without truecolor).
    pub fn dark() -> Theme {
        let bold = Modifier::BOLD;
        Theme {
            name: "dark".into(),
            text: fg(252),
            dim: fg(244),
            heading: fg(109).add_modifier(bold),
            figure: fg(255).add_modifier(bold),
            header: Style::new().fg(Color::Indexed(252)).bg(Color::Indexed(236)),
            brand: Style::new().fg(Color::Indexed(81)).bg(Color::Indexed(236)).add_modifier(bold),
            border: fg(240),
            border_focused: fg(81),
            border_type: BorderType::Plain,
            border_type_focused: BorderType::Thick,
            title: fg(250).add_modifier(bold),
            title_focused: fg(81).add_modifier(bold),
            ok: fg(114),
            warn: fg(214).add_modifier(bold),
            alarm: fg(203).add_modifier(bold),
            alarm_banner: Style::new().fg(Color::Indexed(231)).bg(Color::Indexed(124)).add_modifier(bold),
            selected: Style::new().fg(Color::Indexed(231)).bg(Color::Indexed(24)).add_modifier(bold),
            selected_unfocused: Style::new().bg(Color::Indexed(237)),
            // Cool (idle) to bright (saturated); red is kept for alarms.
            util: [fg(238), fg(25), fg(31), fg(37), fg(36), fg(71), fg(113), fg(149), fg(226)],
            no_data: fg(240),
            billing: [fg(141), fg(75), fg(215)],
            mem_used: fg(45),
            mem_alloc: fg(31),
            mem_free: fg(238),
            chart: fg(116),
            chart_over: fg(203).add_modifier(bold),
            key: fg(81).add_modifier(bold),
            key_disabled: fg(240),
        }
    }

    /// No colour at all: emphasis by bold, reverse, underline and glyphs.
    pub fn mono() -> Theme {
        let plain = Style::new();
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let dim = Style::new().add_modifier(Modifier::DIM);
        let reversed = Style::new().add_modifier(Modifier::REVERSED);
        Theme {
            name: "mono".into(),
            text: plain,
            dim,
            heading: Style::new().add_modifier(Modifier::UNDERLINED),
            figure: bold,
            header: reversed,
            brand: reversed.add_modifier(Modifier::BOLD),
            border: plain,
            border_focused: bold,
            border_type: BorderType::Plain,
            border_type_focused: BorderType::Thick,
            title: plain,
            title_focused: bold.add_modifier(Modifier::UNDERLINED),
            ok: plain,
            warn: bold,
            alarm: bold.add_modifier(Modifier::UNDERLINED),
            alarm_banner: reversed.add_modifier(Modifier::BOLD),
            selected: reversed,
            selected_unfocused: Style::new().add_modifier(Modifier::UNDERLINED),
            util: [dim, plain, plain, plain, plain, plain, plain, plain, bold],
            no_data: dim,
            billing: [plain, plain, bold],
            mem_used: plain,
            mem_alloc: plain,
            mem_free: dim,
            chart: plain,
            chart_over: bold,
            key: bold,
            key_disabled: dim,
        }
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
