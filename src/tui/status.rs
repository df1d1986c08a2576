//! The status line's value: what came of the last action, or a hint, and
//! its tone.
//!
//! Owns this plain value only; the App sets it and `dialog` draws it. It
//! must not know where a status comes from.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tone {
    Done,
    Refused,
    Hint,
}

/// One line under the panes: what the engine did with the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub text: String,
    pub tone: Tone,
}

impl Status {
    pub fn done(text: impl Into<String>) -> Status {
        Status { text: text.into(), tone: Tone::Done }
    }
    pub fn refused(text: impl Into<String>) -> Status {
        Status { text: text.into(), tone: Tone::Refused }
    }
    pub fn hint(text: impl Into<String>) -> Status {
        Status { text: text.into(), tone: Tone::Hint }
    }
}
