//! Themes as TOML files (`themes/*.toml`): the built-in ones are compiled in
//! from there, and `--theme FILE` loads another. A bad file gives an error
//! naming the file and line; the caller falls back to the default theme.
//!
//! Owns the file format only; `Theme` is the plain data the panes use.

use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::BorderType;
use serde::Deserialize;

use super::theme::{Theme, RAMP_LEVELS};

pub const DARK: (&str, &str) = ("themes/dark.toml", include_str!("../../themes/dark.toml"));
pub const MONO: (&str, &str) = ("themes/mono.toml", include_str!("../../themes/mono.toml"));

/// A theme file that could not be used, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ThemeError {
    pub file: String,
    pub message: String,
}

/// `"81 on 236 bold"`: a foreground colour, `on` a background colour, modifiers.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
struct StyleSpec(Style);

impl TryFrom<String> for StyleSpec {
    type Error = String;

    fn try_from(text: String) -> Result<StyleSpec, String> {
        parse_style(&text).map(StyleSpec)
    }
}

fn parse_color(word: &str) -> Result<Color, String> {
    Color::from_str(word).map_err(|_| format!("{word:?} is not a colour (a number 0-255, a name such as bright-white, or #rrggbb)"))
}

pub fn parse_style(text: &str) -> Result<Style, String> {
    let mut style = Style::new();
    let mut words = text.split_whitespace();
    let mut fg_set = false;
    while let Some(word) = words.next() {
        let modifier = match word {
            "bold" => Some(Modifier::BOLD),
            "dim" => Some(Modifier::DIM),
            "italic" => Some(Modifier::ITALIC),
            "underlined" => Some(Modifier::UNDERLINED),
            "reversed" => Some(Modifier::REVERSED),
            _ => None,
        };
        if let Some(m) = modifier {
            style = style.add_modifier(m);
        } else if word == "on" {
            let bg = words.next().ok_or_else(|| format!("{text:?}: `on` needs a background colour"))?;
            style = style.bg(parse_color(bg)?);
        } else if !fg_set {
            style = style.fg(parse_color(word)?);
            fg_set = true;
        } else {
            return Err(format!("{text:?}: unexpected {word:?} (one text colour, `on COLOUR`, and bold/dim/italic/underlined/reversed)"));
        }
    }
    Ok(style)
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Border {
    Plain,
    Rounded,
    Double,
    Thick,
}

impl From<Border> for BorderType {
    fn from(b: Border) -> BorderType {
        match b {
            Border::Plain => BorderType::Plain,
            Border::Rounded => BorderType::Rounded,
            Border::Double => BorderType::Double,
            Border::Thick => BorderType::Thick,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    border_type: Border,
    border_type_focused: Border,
    styles: Styles,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Styles {
    text: StyleSpec,
    dim: StyleSpec,
    heading: StyleSpec,
    figure: StyleSpec,
    header: StyleSpec,
    brand: StyleSpec,
    border: StyleSpec,
    border_focused: StyleSpec,
    title: StyleSpec,
    title_focused: StyleSpec,
    ok: StyleSpec,
    warn: StyleSpec,
    alarm: StyleSpec,
    alarm_banner: StyleSpec,
    selected: StyleSpec,
    selected_unfocused: StyleSpec,
    util: [StyleSpec; RAMP_LEVELS],
    no_data: StyleSpec,
    billing: [StyleSpec; 3],
    mem_used: StyleSpec,
    mem_alloc: StyleSpec,
    mem_free: StyleSpec,
    chart: StyleSpec,
    chart_over: StyleSpec,
    key: StyleSpec,
    key_disabled: StyleSpec,
}

pub fn parse(file: &str, text: &str) -> Result<Theme, ThemeError> {
    let f: ThemeFile = toml::from_str(text)
        .map_err(|e| ThemeError { file: file.to_string(), message: crate::sources::toml_message(text, &e) })?;
    let s = f.styles;
    Ok(Theme {
        name: f.name,
        text: s.text.0,
        dim: s.dim.0,
        heading: s.heading.0,
        figure: s.figure.0,
        header: s.header.0,
        brand: s.brand.0,
        border: s.border.0,
        border_focused: s.border_focused.0,
        border_type: f.border_type.into(),
        border_type_focused: f.border_type_focused.into(),
        title: s.title.0,
        title_focused: s.title_focused.0,
        ok: s.ok.0,
        warn: s.warn.0,
        alarm: s.alarm.0,
        alarm_banner: s.alarm_banner.0,
        selected: s.selected.0,
        selected_unfocused: s.selected_unfocused.0,
        util: s.util.map(|x| x.0),
        no_data: s.no_data.0,
        billing: s.billing.map(|x| x.0),
        mem_used: s.mem_used.0,
        mem_alloc: s.mem_alloc.0,
        mem_free: s.mem_free.0,
        chart: s.chart.0,
        chart_over: s.chart_over.0,
        key: s.key.0,
        key_disabled: s.key_disabled.0,
    })
}

/// A built-in theme by name, or a theme file by path.
pub fn load(name_or_path: &str) -> Result<Theme, ThemeError> {
    match name_or_path {
        "dark" => parse(DARK.0, DARK.1),
        "mono" => parse(MONO.0, MONO.1),
        path => {
            let text = std::fs::read_to_string(path).map_err(|e| ThemeError { file: path.to_string(), message: e.to_string() })?;
            parse(path, &text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_words_cover_colours_backgrounds_and_modifiers() {
        assert_eq!(parse_style("81 on 236 bold"), Ok(Style::new().fg(Color::Indexed(81)).bg(Color::Indexed(236)).add_modifier(Modifier::BOLD)));
        assert_eq!(parse_style("#00ff00"), Ok(Style::new().fg(Color::Rgb(0, 255, 0))));
        assert_eq!(parse_style("bright-white underlined"), Ok(Style::new().fg(Color::White).add_modifier(Modifier::UNDERLINED)));
        assert_eq!(parse_style(""), Ok(Style::new()));
        assert!(parse_style("81 82").unwrap_err().contains("unexpected"));
        assert!(parse_style("on").unwrap_err().contains("background"));
        assert!(parse_style("chartreuse-ish").unwrap_err().contains("not a colour"));
    }

    #[test]
    fn the_built_in_themes_parse() {
        assert_eq!(parse(DARK.0, DARK.1).unwrap().name, "dark");
        assert_eq!(parse(MONO.0, MONO.1).unwrap().name, "mono");
    }

    #[test]
    fn a_bad_theme_names_the_file_and_line() {
        let broken = DARK.1.replacen("warn = \"214 bold\"", "warn = \"214 blod\"", 1);
        let err = parse("my.toml", &broken).unwrap_err();
        let line = broken.lines().position(|l| l.starts_with("warn =")).unwrap() + 1;
        assert_eq!(err.file, "my.toml");
        assert!(err.message.starts_with(&format!("line {line}:")) && err.message.contains("blod"), "{err}");

        let missing = DARK.1.replacen("chart = \"116\"\n", "", 1);
        assert!(parse("my.toml", &missing).unwrap_err().message.contains("chart"));
        let unknown = format!("{}\nsparkle = \"1\"\n", DARK.1);
        assert!(parse("my.toml", &unknown).unwrap_err().message.contains("sparkle"));
        assert!(load("/no/such/theme.toml").unwrap_err().file.contains("/no/such/theme.toml"));
    }
}
