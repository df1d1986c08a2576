//! `Request`: what a key asks the App to do once the mode or the focused
//! pane's component has handled it — send actions, propose one for
//! confirmation, run a command-bar `Intent`, open the command bar on a line,
//! set the job filter, show a status, quit.
//!
//! Owns this vocabulary only. Modes and components return a `Request` and
//! never touch the App; the App applies it (`App::apply`). It must not grow
//! a variant that carries the App's own state.

use super::command_bar::Intent;
use super::status::Status;
use crate::domain::event::Action;

#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Nothing more than what the handler already did to its own state.
    Nothing,
    /// Operator actions for the engine, as they are: confirmed, or needing
    /// no confirmation.
    Send(Vec<Action>),
    /// An action from a key or a form: shown in the confirmation dialog
    /// first where it must be (`modes::propose`).
    Propose(Action),
    /// What a command-bar line asks for; keys that open a form or the pool
    /// picker ask in the same words.
    Run(Intent),
    /// Opens the command bar with this line typed.
    Command(String),
    /// The job table's filter, as typed so far (or restored).
    Filter(String),
    /// A line under the panes.
    Status(Status),
    Quit,
}

impl Request {
    /// A hint on the status line.
    pub fn hint(text: impl Into<String>) -> Request {
        Request::Status(Status::hint(text))
    }
}
