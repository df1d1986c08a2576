//! Text that came from outside (job names, tenants, tags) is cleaned before it
//! can reach an operator's terminal: control characters, escape sequences and
//! bidirectional overrides are dropped, so a job name cannot repaint the screen.

/// Removes C0/C1 controls (ESC included), DEL, and Unicode bidi/format controls.
pub fn clean(text: &str) -> String {
    text.chars().filter(|c| !is_unsafe(*c)).collect()
}

fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'   // zero-width and direction marks
            | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2069}' // word joiner, bidi isolates
            | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn escape_sequences_and_controls_are_dropped() {
        assert_eq!(clean("train\x1b[2J\x1b]0;pwned\x07-job"), "train[2J]0;pwned-job");
        assert_eq!(clean("a\r\nb\tc\x7f\u{9b}d"), "abcd");
        assert_eq!(clean("safe\u{202E}txt.exe"), "safetxt.exe");
        assert_eq!(clean("résumé-模型"), "résumé-模型");
    }
}
