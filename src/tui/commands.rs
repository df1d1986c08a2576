//! The one list of console commands (gitui's `CommandInfo` idea): each entry
//! carries its key bindings, the label shown for them, its description and
//! where it applies. Key dispatch, the footer hints and the help overlay are
//! all generated from `COMMANDS`, so none of them can drift from the others.
//!
//! Owns the key table only. What a command does lives in `app.rs`; this file
//! must not touch the `View`.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, PaneId};

/// What a key does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Act {
    Quit,
    Help,
    Close,
    FocusNext,
    FocusPrev,
    Zoom,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

/// Where a command applies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Global,
    /// Only when the queue pane has the focus.
    Queue,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    /// Only `CONTROL` is matched; Shift is part of the character itself.
    pub ctrl: bool,
}

const fn key(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

pub struct Command {
    pub act: Act,
    /// How the keys are written in the help overlay.
    pub keys: &'static str,
    pub desc: &'static str,
    /// Footer hint `(keys, word)`; `None` keeps it out of the footer.
    pub hint: Option<(&'static str, &'static str)>,
    pub scope: Scope,
    pub bindings: &'static [Key],
}

pub const COMMANDS: &[Command] = &[
    Command {
        act: Act::FocusNext,
        keys: "Tab",
        desc: "focus the next pane",
        hint: Some(("Tab", "pane")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Tab)],
    },
    Command {
        act: Act::FocusPrev,
        keys: "Shift-Tab",
        desc: "focus the previous pane",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::BackTab)],
    },
    Command {
        act: Act::Down,
        keys: "↓ j",
        desc: "select the next job",
        hint: Some(("↑↓", "select")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Down), key(KeyCode::Char('j'))],
    },
    Command {
        act: Act::Up,
        keys: "↑ k",
        desc: "select the previous job",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Up), key(KeyCode::Char('k'))],
    },
    Command {
        act: Act::PageDown,
        keys: "PgDn",
        desc: "one page down the job table",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::PageDown)],
    },
    Command {
        act: Act::PageUp,
        keys: "PgUp",
        desc: "one page up the job table",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::PageUp)],
    },
    Command {
        act: Act::Top,
        keys: "Home g",
        desc: "first job",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Home), key(KeyCode::Char('g'))],
    },
    Command {
        act: Act::Bottom,
        keys: "End G",
        desc: "last job",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::End), key(KeyCode::Char('G'))],
    },
    Command {
        act: Act::Zoom,
        keys: "z",
        desc: "zoom the focused pane / back",
        hint: Some(("z", "zoom")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('z'))],
    },
    Command {
        act: Act::Help,
        keys: "?",
        desc: "show / hide this help",
        hint: Some(("?", "help")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('?'))],
    },
    Command {
        act: Act::Close,
        keys: "Esc",
        desc: "close help, leave zoom (never quits)",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::Esc)],
    },
    Command {
        act: Act::Quit,
        keys: "q Ctrl-C",
        desc: "quit the console",
        hint: Some(("q", "quit")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('q')), Key { code: KeyCode::Char('c'), ctrl: true }],
    },
];

impl Key {
    fn matches(&self, event: &KeyEvent) -> bool {
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl != self.ctrl || event.modifiers.contains(KeyModifiers::ALT) {
            return false;
        }
        match (self.code, event.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) if self.ctrl => a.eq_ignore_ascii_case(&b),
            (a, b) => a == b,
        }
    }
}

impl Command {
    /// Whether the command does something in the app's current state.
    pub fn enabled(&self, app: &App) -> bool {
        match self.scope {
            Scope::Global => true,
            Scope::Queue => app.focus == PaneId::Queue && !app.help,
        }
    }
}

/// The command a key is bound to, whatever its scope.
pub fn lookup(event: &KeyEvent) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.bindings.iter().any(|k| k.matches(event)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_key_is_bound_twice() {
        let all: Vec<Key> = COMMANDS.iter().flat_map(|c| c.bindings.iter().copied()).collect();
        for (i, a) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(a), "{a:?} bound twice");
        }
    }

    #[test]
    fn ctrl_c_is_quit_but_c_is_nothing() {
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&ctrl_c).map(|c| c.act), Some(Act::Quit));
        assert!(lookup(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE)).is_none());
        // Shift comes with some characters; it does not change the binding.
        let shift_g = KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT);
        assert_eq!(lookup(&shift_g).map(|c| c.act), Some(Act::Bottom));
        let back_tab = KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT);
        assert_eq!(lookup(&back_tab).map(|c| c.act), Some(Act::FocusPrev));
    }
}
