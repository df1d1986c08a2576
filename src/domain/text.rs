//! Text that came from outside (job names, tenants, tags) is cleaned before it
//! can reach an operator's terminal: control characters, escape sequences and
//! bidirectional overrides are dropped, so a job name cannot repaint the screen.
//!
//! Messages echoed to stderr (a bad configuration value, a path) are made safe
//! differently: there the controls are shown escaped rather than dropped, so
//! the user sees that something odd was there, and the text is bounded, so a
//! 50 MB value is not poured onto the terminal.

/// Removes C0/C1 controls (ESC included), DEL, and Unicode bidi/format controls.
pub fn clean(text: &str) -> String {
    // Printable ASCII has nothing to remove: copied whole, not char by char
    // (a view cleans every name of 100,000 jobs).
    if is_printable_ascii(text) {
        return text.to_string();
    }
    text.chars().filter(|c| !is_unsafe(*c)).collect()
}

/// Only printable ASCII (space to `~`): nothing to clean, one column a byte.
pub fn is_printable_ascii(text: &str) -> bool {
    text.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'   // zero-width and direction marks
            | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2069}' // word joiner, bidi isolates
            | '\u{FEFF}')
}

/// The longest line that `for_terminal` shows.
pub const ECHO_LINE_CHARS: usize = 400;
/// The most characters in all that `for_terminal` shows.
pub const ECHO_TOTAL_CHARS: usize = 4_000;

/// Text from anywhere made safe to print on a terminal: newlines kept, every
/// other control (C0, DEL, C1, ESC, BEL, bidi and format controls) written as
/// a visible escape (`\x1b`, `\u{202e}`), and each line and the whole cut
/// with a note of how many bytes were left out.
pub fn for_terminal(text: &str) -> String {
    bounded(text, ECHO_LINE_CHARS, ECHO_TOTAL_CHARS)
}

/// `for_terminal` with the bounds given (characters shown per line and in all).
pub fn bounded(text: &str, line_max: usize, total_max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(total_max + 64));
    let (mut total, mut line) = (0usize, 0usize);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\n' {
            out.push('\n');
            (total, line, rest) = (total + 1, 0, &rest[1..]);
        } else if line >= line_max {
            // Skip to the line's end; only its length is reported.
            let skipped = rest.find('\n').unwrap_or(rest.len());
            out.push_str(&format!(" … ({} more bytes on this line)", grouped(skipped as u64)));
            rest = &rest[skipped..];
            line = 0;
        } else {
            let shown = escaped(c);
            out.push_str(&shown);
            let width = shown.chars().count();
            (total, line, rest) = (total + width, line + width, &rest[c.len_utf8()..]);
        }
        if total >= total_max && !rest.is_empty() {
            out.push_str(&format!(" … ({} more bytes)", grouped(rest.len() as u64)));
            break;
        }
    }
    out
}

/// A character as it may be shown: itself, or its escape if it is a control.
fn escaped(c: char) -> String {
    if !(is_unsafe(c) || matches!(c, '\u{061C}' | '\u{2028}' | '\u{2029}')) {
        return c.to_string();
    }
    match c {
        '\t' => "\\t".into(),
        '\r' => "\\r".into(),
        c if (c as u32) < 0x80 => format!("\\x{:02x}", c as u32),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// 51234567 as "51,234,567".
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Shell-style `*` (any run) and `?` (one character) over the whole name, as
/// node patterns are written (`train-st-p4d-*`); no classes, since host names
/// need none. One backtrack point: linear in practice, never exponential.
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut i, mut j) = (0, 0);
    // Where the last * was, and where in the name it started matching.
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::{bounded, clean, for_terminal};

    #[test]
    fn escape_sequences_and_controls_are_dropped() {
        assert_eq!(clean("train\x1b[2J\x1b]0;pwned\x07-job"), "train[2J]0;pwned-job");
        assert_eq!(clean("a\r\nb\tc\x7f\u{9b}d"), "abcd");
        assert_eq!(clean("safe\u{202E}txt.exe"), "safetxt.exe");
        assert_eq!(clean("résumé-模型"), "résumé-模型");
    }

    #[test]
    fn echoed_controls_are_shown_escaped_not_dropped() {
        assert_eq!(for_terminal("bad\x1b[2J\x07 \u{9b}1m \u{202e}cba\x7f"), "bad\\x1b[2J\\x07 \\u{9b}1m \\u{202e}cba\\x7f");
        assert_eq!(for_terminal("a\tb\r\nc\u{2028}d"), "a\\tb\\r\nc\\u{2028}d");
        assert_eq!(for_terminal("résumé-模型\nline two"), "résumé-模型\nline two");
        for c in (0u32..0x20).chain(0x7f..0xa0).filter(|c| *c != 0x0a) {
            let shown = for_terminal(&char::from_u32(c).unwrap().to_string());
            assert!(shown.starts_with('\\') && shown.chars().all(|c| !c.is_control()), "{c:#x} shown as {shown:?}");
        }
    }

    #[test]
    fn echoed_text_is_bounded_per_line_and_in_all() {
        let long = "x".repeat(51_234_567);
        let shown = for_terminal(&format!("value {long}\nnext"));
        assert!(shown.len() < 1_000, "{}", shown.len());
        assert!(shown.contains(&format!(" … ({} more bytes on this line)\nnext", "51,234,173")), "{shown}");
        let many = "line\n".repeat(100_000);
        let shown = for_terminal(&many);
        assert!(shown.chars().count() < super::ECHO_TOTAL_CHARS + 100, "{}", shown.len());
        assert!(
            shown.ends_with(&format!(" … ({} more bytes)", super::grouped((many.len() - super::ECHO_TOTAL_CHARS) as u64))),
            "{}",
            &shown[shown.len() - 60..]
        );
        // An escape counts at its shown width, so escapes cannot blow the bound either.
        let shown = bounded(&"\x1b".repeat(1_000), 40, 100);
        assert!(shown.chars().count() < 200, "{shown}");
        assert_eq!(bounded("short", 40, 100), "short");
    }
}
