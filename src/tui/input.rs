//! A one-line text input for the `:` command bar, the `/` filter and the
//! fields of the approval form, with the editing keys fingers know from a
//! shell: ←/→, Home/End, Backspace/Delete, Ctrl-A/E, Ctrl-U (to start),
//! Ctrl-W (word back).
//!
//! Owns only the text and the cursor. Control characters never get in, so
//! what is typed can be drawn as it is.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Longest input kept: a reason or a filter, not an essay.
pub const MAX_CHARS: usize = 240;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineInput {
    chars: Vec<char>,
    /// Position in `chars`, 0..=len.
    cursor: usize,
}

impl LineInput {
    pub fn new(text: &str) -> LineInput {
        let mut input = LineInput::default();
        input.set(text);
        input
    }

    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The cursor, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Replaces the text; the cursor goes to the end.
    pub fn set(&mut self, text: &str) {
        self.chars = text.chars().filter(|c| !c.is_control()).take(MAX_CHARS).collect();
        self.cursor = self.chars.len();
    }

    fn insert(&mut self, c: char) {
        if c.is_control() || self.chars.len() >= MAX_CHARS {
            return;
        }
        self.chars.insert(self.cursor, c);
        self.cursor += 1;
    }

    fn delete_word_back(&mut self) {
        let mut start = self.cursor;
        while start > 0 && self.chars[start - 1] == ' ' {
            start -= 1;
        }
        while start > 0 && self.chars[start - 1] != ' ' {
            start -= 1;
        }
        self.chars.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Applies an editing key; false if the key is not one (Enter, Esc, Tab, …).
    pub fn edit(&mut self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = self.chars.len(),
            KeyCode::Char('u') if ctrl => {
                self.chars.drain(..self.cursor);
                self.cursor = 0;
            }
            KeyCode::Char('w') if ctrl => self.delete_word_back(),
            KeyCode::Char(_) if ctrl || key.modifiers.contains(KeyModifiers::ALT) => return false,
            KeyCode::Char(c) => self.insert(c),
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.chars.remove(self.cursor);
            }
            KeyCode::Backspace => {}
            KeyCode::Delete if self.cursor < self.chars.len() => {
                self.chars.remove(self.cursor);
            }
            KeyCode::Delete => {}
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(self.chars.len()),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = self.chars.len(),
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn typed(s: &str) -> LineInput {
        let mut input = LineInput::default();
        for c in s.chars() {
            input.edit(&key(KeyCode::Char(c)));
        }
        input
    }

    #[test]
    fn typing_moving_and_deleting() {
        let mut input = typed("preempt j4");
        assert_eq!((input.text().as_str(), input.cursor()), ("preempt j4", 10));
        input.edit(&key(KeyCode::Left));
        input.edit(&key(KeyCode::Backspace));
        assert_eq!(input.text(), "preempt 4");
        input.edit(&key(KeyCode::Home));
        input.edit(&key(KeyCode::Delete));
        assert_eq!(input.text(), "reempt 4");
        input.edit(&ctrl('e'));
        input.edit(&ctrl('w'));
        assert_eq!(input.text(), "reempt ");
        input.edit(&ctrl('u'));
        assert!(input.is_empty());
        assert!(!input.edit(&key(KeyCode::Enter)));
        assert!(!input.edit(&key(KeyCode::Tab)));
    }

    #[test]
    fn control_characters_and_overlong_text_stay_out() {
        let mut input = LineInput::new("a\x1b[2Jb\u{9b}c");
        assert_eq!(input.text(), "a[2Jbc");
        input.edit(&key(KeyCode::Char('\x07')));
        assert_eq!(input.text(), "a[2Jbc");
        let long = "x".repeat(1000);
        assert_eq!(LineInput::new(&long).text().len(), MAX_CHARS);
        // Ctrl with another letter is not text.
        assert!(!input.edit(&ctrl('x')));
        assert_eq!(input.text(), "a[2Jbc");
    }
}
