//! Themes as TOML files (`themes/*.toml`): the built-in ones are compiled in
//! from there, and `--theme FILE` loads another. A bad file gives an error
//! naming the file, line, column and key (`my.toml:36:8: styles.warn: ...`);
//! the caller falls back to the default theme.
//!
//! Owns the file format, and the built-in themes' constructors
//! (`Theme::dark()` …) since they are these files; `Theme` is the plain data
//! the panes use, and fitting it to the terminal's colours is `theme_depth`'s.

use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::BorderType;
use serde::Deserialize;

use super::theme::{RAMP_LEVELS, Theme};

pub const DARK: (&str, &str) = ("themes/dark.toml", include_str!("../../themes/dark.toml"));
pub const LIGHT: (&str, &str) = ("themes/light.toml", include_str!("../../themes/light.toml"));
pub const HIGH_CONTRAST: (&str, &str) = ("themes/high-contrast.toml", include_str!("../../themes/high-contrast.toml"));
pub const COLOUR_BLIND: (&str, &str) = ("themes/colour-blind.toml", include_str!("../../themes/colour-blind.toml"));
pub const MONO: (&str, &str) = ("themes/mono.toml", include_str!("../../themes/mono.toml"));

/// The names `load` knows, each with its file; the default first.
pub const BUILT_IN: [(&str, (&str, &str)); 5] =
    [("dark", DARK), ("light", LIGHT), ("high-contrast", HIGH_CONTRAST), ("colour-blind", COLOUR_BLIND), ("mono", MONO)];

/// Other spellings `load` accepts for a built-in name.
const ALIASES: [(&str, &str); 1] = [("color-blind", "colour-blind")];

/// A theme file that could not be used, with where: shown as
/// `file:line:column: key: message`, as compilers do, so that editors and
/// terminals can jump to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.location())]
pub struct ThemeError {
    pub file: String,
    /// 1-based, where the file could be read and parsing placed the error.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    /// The key the error is about (`styles.warn`), where known.
    pub key: Option<String>,
    pub message: String,
}

impl ThemeError {
    fn location(&self) -> String {
        let mut at = self.file.clone();
        for n in [self.line, self.column].into_iter().map_while(|n| n) {
            at.push_str(&format!(":{n}"));
        }
        match &self.key {
            Some(key) => format!("{at}: {key}: {}", self.message),
            None => format!("{at}: {}", self.message),
        }
    }

    /// An error from the toml crate, placed by its span.
    fn from_toml(file: &str, text: &str, err: &toml::de::Error) -> ThemeError {
        let start = err.span().map(|s| s.start.min(text.len()));
        let (line, column, key) = match start {
            Some(start) => {
                let before = &text[..start];
                let line = before.matches('\n').count() + 1;
                let column = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().count() + 1;
                (Some(line), Some(column), key_at(text, line))
            }
            None => (None, None, None),
        };
        ThemeError { file: file.to_string(), line, column, key, message: err.message().trim_end().to_string() }
    }
}

/// The dotted key that line `line` (1-based) belongs to: the nearest
/// `key =` at or above it (so a value inside a multi-line array finds its
/// key) under the nearest `[table]` header; a header line itself names the
/// table. The toml crate knows the key path but does not expose it.
fn key_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().take(line).collect();
    let mut key = None;
    for l in lines.iter().rev() {
        let l = l.trim();
        if let Some(table) = l.strip_prefix('[').and_then(|t| t.split(']').next()) {
            let table = table.trim();
            return Some(match key {
                Some(k) => format!("{table}.{k}"),
                None => table.to_string(),
            });
        }
        if key.is_none()
            && let Some((k, _)) = l.split_once('=')
            && !k.trim().is_empty()
            && k.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            key = Some(k.trim().to_string());
        }
    }
    key
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

/// A single colour word, as `background` takes.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
struct ColorSpec(Color);

impl TryFrom<String> for ColorSpec {
    type Error = String;

    fn try_from(text: String) -> Result<ColorSpec, String> {
        parse_color(text.trim()).map(ColorSpec)
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
    /// The terminal background the theme is made for; unknown if absent.
    background: Option<ColorSpec>,
    border_type: Border,
    border_type_focused: Border,
    styles: Styles,
}

/// How a style field is written in a file: a style's words, or an array
/// of them for the ramp and the billing modes.
trait FileForm: Sized {
    type Spec;
    fn read(spec: Self::Spec) -> Self;
}

impl FileForm for Style {
    type Spec = StyleSpec;
    fn read(spec: StyleSpec) -> Style {
        spec.0
    }
}

impl<const N: usize> FileForm for [Style; N] {
    type Spec = [StyleSpec; N];
    fn read(spec: [StyleSpec; N]) -> Self {
        spec.map(|s| s.0)
    }
}

/// The `[styles]` table and the theme it makes, from the one list of styles.
macro_rules! read_styles {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty ),* $(,)?) => {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Styles {
            $( $field: <$ty as FileForm>::Spec, )*
        }

        pub fn parse(file: &str, text: &str) -> Result<Theme, ThemeError> {
            let f: ThemeFile = toml::from_str(text).map_err(|e| ThemeError::from_toml(file, text, &e))?;
            let s = f.styles;
            Ok(Theme {
                name: f.name,
                background: f.background.map_or(Color::Reset, |c| c.0),
                border_type: f.border_type.into(),
                border_type_focused: f.border_type_focused.into(),
                $( $field: <$ty as FileForm>::read(s.$field), )*
            })
        }
    };
}

super::theme::theme_styles!(read_styles);

/// The built-in theme file called `name` (or one of its other spellings).
pub fn built_in(name: &str) -> Option<(&'static str, &'static str)> {
    let name = ALIASES.iter().find(|&&(alias, _)| alias == name).map_or(name, |&(_, to)| to);
    BUILT_IN.iter().find(|&&(n, _)| n == name).map(|&(_, file)| file)
}

/// A built-in theme by name, or a theme file by path. A built-in name wins
/// over a file of that name in the current directory (`./dark` for that).
pub fn load(name_or_path: &str) -> Result<Theme, ThemeError> {
    if let Some((file, text)) = built_in(name_or_path) {
        return parse(file, text);
    }
    let path = name_or_path;
    let text = std::fs::read_to_string(path).map_err(|e| {
        let names: Vec<&str> = BUILT_IN.iter().map(|&(n, _)| n).collect();
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            format!("no such theme file, and not a built-in theme ({})", names.join(", "))
        } else {
            format!("cannot read the theme file: {e}")
        };
        ThemeError { file: path.to_string(), line: None, column: None, key: None, message }
    })?;
    parse(path, &text)
}

/// The built-in themes, each from its file compiled in. They live here, not
/// beside `Theme`, so that `theme.rs` need not import the file format.
impl Theme {
    /// Dark background, 256-colour palette (works over SSH without truecolor),
    /// from `themes/dark.toml`.
    pub fn dark() -> Theme {
        compiled_in(DARK)
    }

    /// Light background, from `themes/light.toml`.
    pub fn light() -> Theme {
        compiled_in(LIGHT)
    }

    /// Wall displays: 7:1 contrast, bold figures, no dim grey, from
    /// `themes/high-contrast.toml`.
    pub fn high_contrast() -> Theme {
        compiled_in(HIGH_CONTRAST)
    }

    /// Okabe–Ito colours, apart under protan, deutan and tritan vision, from
    /// `themes/colour-blind.toml`.
    pub fn colour_blind() -> Theme {
        compiled_in(COLOUR_BLIND)
    }

    /// No colour at all: emphasis by bold, reverse, underline and glyphs,
    /// from `themes/mono.toml`.
    pub fn mono() -> Theme {
        compiled_in(MONO)
    }

    /// Every built-in theme, the default first.
    pub fn built_ins() -> Vec<Theme> {
        BUILT_IN.iter().map(|&(_, file)| compiled_in(file)).collect()
    }
}

fn compiled_in((file, text): (&str, &str)) -> Theme {
    parse(file, text).unwrap_or_else(|e| panic!("built-in theme is valid (tested): {e}"))
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
    fn every_built_in_parses_and_is_named_after_its_file() {
        for (name, (file, text)) in BUILT_IN {
            let theme = parse(file, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(theme.name, name);
            assert_eq!(file, format!("themes/{name}.toml"));
            assert_eq!(load(name), Ok(theme));
        }
        assert_eq!(load("color-blind").unwrap().name, "colour-blind");
        assert_eq!(load("dark").unwrap().background, Color::Indexed(234));
        assert_eq!(load("mono").unwrap().background, Color::Reset, "mono assumes no background");
    }

    #[test]
    fn the_built_in_files_on_disk_are_the_compiled_in_ones() {
        // `--theme themes/light.toml` and `--theme light` must agree.
        for (name, (file, _)) in BUILT_IN {
            let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
            assert_eq!(load(&path).map(|t| t.name), Ok(name.to_string()));
        }
    }

    #[test]
    fn an_unknown_name_lists_the_built_in_ones() {
        let err = load("solarized").unwrap_err();
        assert_eq!(err.file, "solarized");
        for (name, _) in BUILT_IN {
            assert!(err.message.contains(name), "{err}");
        }
        assert!(load("/no/such/theme.toml").unwrap_err().to_string().starts_with("/no/such/theme.toml: "));
    }

    /// Line (1-based) of the first line of `text` that starts with `prefix`.
    fn line_of(text: &str, prefix: &str) -> usize {
        text.lines().position(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line {prefix:?}")) + 1
    }

    /// Each way a file can be wrong: the broken text, the line the error
    /// must point at, the key it must name, and a word the message must say.
    fn broken_files() -> Vec<(&'static str, String, usize, Option<&'static str>, &'static str)> {
        let dark = DARK.1;
        let edit = |from: &str, to: &str| {
            assert!(dark.contains(from), "dark.toml lacks {from:?}");
            dark.replacen(from, to, 1)
        };
        let sparkle = format!("{dark}sparkle = \"1\"\n");
        let sparkle_line = sparkle.lines().count();
        let missing = edit("chart = \"116\"\n", "");
        vec![
            ("syntax", edit("warn = \"214 bold\"", "warn = \"214 bold"), line_of(dark, "warn ="), None, "string"),
            ("colour word", edit("warn = \"214 bold\"", "warn = \"214 blod\""), line_of(dark, "warn ="), Some("styles.warn"), "blod"),
            ("colour number", edit("ok = \"114\"", "ok = \"314\""), line_of(dark, "ok ="), Some("styles.ok"), "314"),
            ("unknown key", sparkle, sparkle_line, Some("styles.sparkle"), "sparkle"),
            ("missing style", missing.clone(), line_of(&missing, "[styles]"), Some("styles"), "chart"),
            ("wrong type", edit("warn = \"214 bold\"", "warn = 214"), line_of(dark, "warn ="), Some("styles.warn"), "string"),
            ("ramp length", edit("\"238\", \"25\",", "\"25\","), line_of(dark, "util ="), Some("styles.util"), "9"),
            ("border type", edit("border_type = \"plain\"", "border_type = \"wavy\""), line_of(dark, "border_type ="), Some("border_type"), "wavy"),
            ("background", edit("background = \"234\"", "background = \"234 bold\""), line_of(dark, "background ="), Some("background"), "234 bold"),
        ]
    }

    #[test]
    fn a_bad_theme_names_the_file_line_and_key() {
        for (case, text, line, key, word) in broken_files() {
            let err = parse("my.toml", &text).expect_err(case);
            assert_eq!(err.file, "my.toml", "{case}");
            assert_eq!(err.line, Some(line), "{case}: {err}");
            assert_eq!(err.key.as_deref(), key.or(err.key.as_deref()), "{case}: {err}");
            assert!(err.message.contains(word), "{case}: {err}");
            let shown = err.to_string();
            assert!(shown.starts_with(&format!("my.toml:{line}:")), "{case}: {shown}");
            assert!(!shown.contains('\n'), "{case}: one line, for stderr and the log: {shown}");
        }
    }

    #[test]
    fn a_bad_theme_file_on_disk_is_named_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wall.toml");
        std::fs::write(&path, DARK.1.replacen("alarm = \"203 bold\"", "alarm = \"203 bold blink\"", 1)).unwrap();
        let path = path.to_string_lossy().into_owned();
        let err = load(&path).unwrap_err();
        let line = line_of(DARK.1, "alarm =");
        assert!(err.to_string().starts_with(&format!("{path}:{line}:")), "{err}");
        assert!(err.message.contains("blink"), "{err}");
    }

    /// Every error message as the user sees it, to read.
    #[test]
    fn theme_error_messages() {
        let mut shown: Vec<String> = broken_files().into_iter().map(|(case, text, ..)| format!("{case}: {}", parse("my.toml", &text).unwrap_err())).collect();
        shown.push(format!("unknown name: {}", load("solarized").unwrap_err()));
        insta::assert_snapshot!(shown.join("\n"));
    }
}
