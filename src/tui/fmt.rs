//! Presentation helpers shared by the panes: fitting text to a width (names
//! are truncated with `…`, figures are never cut), percentages, glyph ramps,
//! bars and clock/age formatting.
//!
//! Pure string work on values already in the `View`; no business rules here
//! (amounts and durations are formatted by the Display impls in `domain::units`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::domain::units::{At, Micros, Secs};

/// The utilization ramp, index 0 = idle.
pub const RAMP: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Display width of a string in terminal cells.
pub fn width(s: &str) -> usize {
    // Printable ASCII is one column a byte: most of what a table measures
    // (ids, names, figures), skipping the Unicode tables per character.
    if crate::domain::text::is_printable_ascii(s) {
        return s.len();
    }
    Span::raw(s).width()
}

fn char_width(c: char) -> usize {
    let mut b = [0u8; 4];
    Span::raw(&*c.encode_utf8(&mut b)).width()
}

/// Cuts `s` to at most `max` cells, ending in `…` when something was cut.
pub fn trunc(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = char_width(c);
        if used + w > max - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// Cuts a name to at most `max` cells by its middle (`openb…e-0123`):
/// the names of a fleet share their start and differ at their end, so the
/// end is what must stay readable.
pub fn trunc_middle(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max < 5 {
        return trunc(s, max);
    }
    let head_max = (max - 1) / 3;
    let mut head = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = char_width(c);
        if used + w > head_max {
            break;
        }
        head.push(c);
        used += w;
    }
    let tail_max = max - 1 - used;
    let mut tail: Vec<char> = Vec::new();
    let mut tail_used = 0;
    for c in s.chars().rev() {
        let w = char_width(c);
        if tail_used + w > tail_max {
            break;
        }
        tail.push(c);
        tail_used += w;
    }
    head.push('…');
    head.extend(tail.into_iter().rev());
    head
}

/// A name left-aligned in exactly `w` cells, cut by its middle when longer.
pub fn left_name(s: &str, w: usize) -> String {
    pad_right(trunc_middle(s, w), w)
}

/// Left-aligned in exactly `w` cells (truncated with `…` when longer).
pub fn left(s: &str, w: usize) -> String {
    pad_right(trunc(s, w), w)
}

/// `s`, already at most `w` cells, padded with spaces to exactly `w`.
fn pad_right(s: String, w: usize) -> String {
    let pad = w.saturating_sub(width(&s));
    format!("{s}{}", " ".repeat(pad))
}

/// Right-aligned in at least `w` cells; never cut (for figures).
pub fn right(s: &str, w: usize) -> String {
    let pad = w.saturating_sub(width(s));
    format!("{}{s}", " ".repeat(pad))
}

/// A ratio as a whole percentage: `0.62` → `62%`.
pub fn pct(ratio: f64) -> String {
    if ratio.is_finite() { format!("{:.0}%", ratio * 100.0) } else { "—".into() }
}

/// A utilization in percent (0–100) as `62%`.
pub fn util_pct(util: f64) -> String {
    if util.is_finite() { format!("{:.0}%", util) } else { "—".into() }
}

/// Ramp level 0..=8 for a value in percent; 1 from the smallest positive value
/// so that "a little" never looks like "nothing".
pub fn ramp_level(percent: f64) -> usize {
    if !percent.is_finite() || percent <= 0.0 {
        return 0;
    }
    let level = (percent.clamp(0.0, 100.0) / 100.0 * 8.0).round() as usize;
    level.clamp(1, 8)
}

/// A signed amount: `+$1.02`, `-$0.40`, `$0.00`.
pub fn signed_money(micros: i64) -> String {
    match micros.signum() {
        1 => format!("+{}", Micros(micros)),
        _ => Micros(micros).to_string(),
    }
}

/// Money without cents, for tight columns: `$1,235`.
pub fn money_whole(m: Micros) -> String {
    let s = Micros((m.0 + 500_000).div_euclid(1_000_000) * 1_000_000).to_string();
    s.strip_suffix(".00").map(str::to_string).unwrap_or(s)
}

/// `2020-01-06 01:23:45` (UTC).
pub fn clock(at: At) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// `01:23:45` (UTC), for log lines.
pub fn time_of_day(at: At) -> String {
    at.format("%H:%M:%S").to_string()
}

/// Seconds from `then` to `now`, never negative.
pub fn since(now: Option<At>, then: At) -> Option<Secs> {
    now.map(|now| Secs((now - then).num_seconds().max(0)))
}

/// A horizontal bar of `w` cells filled to `ratio`, with eighths at its edge.
pub fn bar(ratio: f64, w: usize) -> String {
    const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let ratio = if ratio.is_finite() { ratio.clamp(0.0, 1.0) } else { 0.0 };
    let eighths = (ratio * w as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if eighths / 8 < w {
        s.push(EIGHTHS[eighths % 8]);
        s.push_str(&" ".repeat(w - eighths / 8 - 1));
    }
    s
}

/// Splits `text` into lines of at most `w` cells, at spaces where it can.
pub fn wrap(text: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let sep = usize::from(!line.is_empty());
        if width(&line) + sep + width(word) <= w {
            if sep == 1 {
                line.push(' ');
            }
            line.push_str(word);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        let mut rest = word;
        while width(rest) > w {
            let cut: String = {
                let mut used = 0;
                rest.chars()
                    .take_while(|c| {
                        used += char_width(*c);
                        used <= w
                    })
                    .collect()
            };
            if cut.is_empty() {
                break;
            }
            rest = &rest[cut.len()..];
            lines.push(cut);
        }
        line.push_str(rest);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Draws `line` on row `row` of `area`, clipped to it; rows past the bottom are dropped.
pub fn put(buf: &mut Buffer, area: Rect, row: u16, line: Line<'_>) {
    if row < area.height {
        line.render(Rect { y: area.y + row, height: 1, ..area }, buf);
    }
}

/// A line of groups of spans, keeping whole groups while they fit in `w`
/// cells (the first always), so that a figure is dropped, never cut.
pub fn fit_groups<'a>(groups: Vec<Vec<Span<'a>>>, w: usize) -> Line<'a> {
    let mut spans = Vec::new();
    let mut used = 0;
    for (i, group) in groups.into_iter().enumerate() {
        let add: usize = group.iter().map(Span::width).sum();
        if i > 0 && used + add > w {
            continue;
        }
        used += add;
        spans.extend(group);
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_takes_the_ascii_shortcut_only_where_it_agrees_with_unicode() {
        for s in ["", "j12345", "$1,234.56", "nlp-llama 7b", "tab\there", "bell\x07", "日本語", "café", "🚀 go", "\u{200b}zero"] {
            assert_eq!(width(s), Span::raw(s).width(), "{s:?}");
        }
    }

    #[test]
    fn node_names_keep_their_distinguishing_end() {
        assert_eq!(trunc_middle("openb-node-0123", 10), "ope…e-0123");
        assert_eq!(width(&trunc_middle("openb-node-0123", 10)), 10);
        assert_eq!(trunc_middle("n042", 10), "n042");
        assert_eq!(trunc_middle("openb-node-0123", 3), "op…");
        // Wide characters are measured, never split.
        let cut = trunc_middle("ノード-東京-0001", 9);
        assert!(width(&cut) <= 9 && cut.ends_with("0001"), "{cut}");
        assert_eq!(left_name("openb-node-0123", 12), "ope…ode-0123");
        assert_eq!(left_name("n1", 4), "n1  ");
    }

    #[test]
    fn truncates_names_by_display_width() {
        assert_eq!(trunc("resnet50-imagenet", 8), "resnet5…");
        assert_eq!(trunc("short", 8), "short");
        assert_eq!(trunc("模型模型", 5), "模型…");
        assert_eq!(left("ab", 4), "ab  ");
        assert_eq!(right("$1.00", 7), "  $1.00");
        assert_eq!(right("$1,000.00", 4), "$1,000.00", "figures are never cut");
    }

    #[test]
    fn bars_and_ramps() {
        assert_eq!(bar(0.5, 4), "██  ");
        assert_eq!(bar(1.0, 3), "███");
        assert_eq!(bar(0.0, 3), "   ");
        assert_eq!(bar(f64::NAN, 2), "  ");
        assert_eq!(width(&bar(0.33, 10)), 10);
        assert_eq!(ramp_level(0.0), 0);
        assert_eq!(ramp_level(0.4), 1);
        assert_eq!(ramp_level(100.0), 8);
    }

    #[test]
    fn wraps_at_spaces_and_splits_long_words() {
        assert_eq!(wrap("saving 3 job(s) now", 10), ["saving 3", "job(s) now"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
    }

    #[test]
    fn money_helpers() {
        assert_eq!(signed_money(1_020_000), "+$1.02");
        assert_eq!(signed_money(-400_000), "-$0.40");
        assert_eq!(money_whole(Micros(1_234_567_891)), "$1,235");
    }
}
