//! What the engine keeps of the consoles attached to it:
//!
//! * `commands` — operator actions that came over the engine's socket
//!   (`host::serve`), under the actor the engine derived and the ticket it
//!   filed them by, applied by the engine in id order, each exactly once: a row goes from `pending` to
//!   `applied` or `refused` in the same transaction that appends its
//!   `Event::Operator`, and records that event's sequence number. A crash
//!   before that commit leaves it pending (applied after the restart); after
//!   it, the row and the event are both on disk. Triggers refuse deleting a
//!   row and changing one that is done.
//! * `views` — the newest `View` the engine published, as JSON: what a
//!   wall shows of a log whose engine has stopped (a running engine's views
//!   go to consoles over its socket).
//!
//! Owns this SQL. Whether an action is allowed is the room's decision.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::db::{Store, StoreError};
use crate::domain::event::{Action, Actor};
use crate::room::view::View;

/// How far a command has got.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CommandState {
    Pending,
    /// Carried out: what was done, and the sequence number of its event.
    Applied {
        detail: String,
        event_seq: i64,
    },
    /// Refused by the engine: why (the event, if it got that far).
    Refused {
        reason: String,
        event_seq: Option<i64>,
    },
}

/// A command waiting for the engine. `action` is `Err` when the row does not
/// decode (a console of another version, a hand-written row): the engine
/// refuses it with that reason instead of stopping.
#[derive(Clone, Debug)]
pub struct PendingCommand {
    pub id: i64,
    pub actor: Result<Actor, String>,
    pub action: Result<Action, String>,
}

/// A command as the table holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandRow {
    pub ticket: String,
    /// The actor the engine derived, as JSON.
    pub actor: String,
    /// The action as JSON (`null` for an unreadable command).
    pub action: String,
    pub state: CommandState,
}

/// A view as published, with the event it is current to.
#[derive(Clone, Debug)]
pub struct Published {
    pub seq: i64,
    pub published_ms: i64,
    pub view: View,
}

fn state_of(state: &str, outcome: Option<String>, event_seq: Option<i64>) -> CommandState {
    match (state, event_seq) {
        ("applied", Some(event_seq)) => CommandState::Applied { detail: outcome.unwrap_or_default(), event_seq },
        ("refused", seq) => CommandState::Refused { reason: outcome.unwrap_or_default(), event_seq: seq },
        _ => CommandState::Pending,
    }
}

fn command_state_by_ticket(conn: &Connection, ticket: &str) -> rusqlite::Result<Option<CommandState>> {
    conn.query_row("SELECT state, outcome, event_seq FROM commands WHERE ticket = ?1", params![ticket], |r| {
        Ok(state_of(&r.get::<_, String>(0)?, r.get(1)?, r.get(2)?))
    })
    .optional()
}

/// The newest view if it is newer than `after_ms`.
fn latest_view(conn: &Connection, path: &Path, after_ms: i64) -> Result<Option<Published>, StoreError> {
    let row: Option<(i64, i64, String)> = conn
        .query_row("SELECT seq, published_ms, view FROM views WHERE id = 1 AND published_ms > ?1", params![after_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
        .map_err(|e| Store::wrap(path, e))?;
    row.map(|(seq, published_ms, json)| {
        serde_json::from_str(&json)
            .map(|view| Published { seq, published_ms, view })
            .map_err(|e| StoreError::Format { path: path.display().to_string(), message: format!("published view: {e}") })
    })
    .transpose()
}

/// What filing a command found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Queued {
    /// Filed, pending, under this id.
    New(i64),
    /// The ticket was filed before (a command sent again after a
    /// reconnect, or taken twice around a crash): not filed again.
    Known(i64, CommandState),
}

impl Store {
    /// Files a command under `ticket` (inside the open batch), pending, or
    /// says it is known. An `Err` action (a frame that did not decode) is
    /// filed refused at once, with an audit row, and never applied.
    pub fn queue_command(
        &mut self,
        at: crate::domain::units::At,
        ticket: &str,
        now_ms: i64,
        actor: &Actor,
        action: Result<&Action, &str>,
    ) -> Result<Queued, StoreError> {
        let known: Option<(i64, String, Option<String>, Option<i64>)> = self
            .conn
            .query_row("SELECT id, state, outcome, event_seq FROM commands WHERE ticket = ?1", params![ticket], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
            .map_err(|e| self.sql_err(e))?;
        if let Some((id, state, outcome, seq)) = known {
            return Ok(Queued::Known(id, state_of(&state, outcome, seq)));
        }
        let fmt = |e: serde_json::Error| StoreError::Format { path: self.path.display().to_string(), message: e.to_string() };
        let actor_json = serde_json::to_string(actor).map_err(fmt)?;
        let action_json = match action {
            Ok(action) => serde_json::to_string(action).map_err(fmt)?,
            Err(_) => "null".to_string(),
        };
        self.conn
            .execute("INSERT INTO commands (ticket, submitted_ms, actor, action) VALUES (?1, ?2, ?3, ?4)", params![ticket, now_ms, actor_json, action_json])
            .map_err(|e| self.sql_err(e))?;
        let id = self.conn.last_insert_rowid();
        match action {
            Ok(_) => Ok(Queued::New(id)),
            Err(why) => {
                let reason = format!("command {}: {why}", crate::domain::text::clean(ticket));
                self.finish_command(id, None, &Err(reason.clone()), now_ms)?;
                self.append_audit_unreadable(at, actor, &reason)?;
                Ok(Queued::Known(id, CommandState::Refused { reason, event_seq: None }))
            }
        }
    }

    /// The commands waiting, oldest first.
    pub fn pending_commands(&self, limit: usize) -> Result<Vec<PendingCommand>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached("SELECT id, actor, action FROM commands WHERE state = 'pending' ORDER BY id LIMIT ?1").map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map(params![limit as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
            .map_err(|e| self.sql_err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, actor, action) = row.map_err(|e| self.sql_err(e))?;
            out.push(PendingCommand {
                id,
                actor: serde_json::from_str(&actor).map_err(|e| format!("command {id}: unreadable actor ({e})")),
                action: serde_json::from_str(&action).map_err(|e| format!("command {id}: unreadable action ({e})")),
            });
        }
        Ok(out)
    }

    /// Marks a command done (inside the batch that appended its event).
    pub fn finish_command(&mut self, id: i64, event_seq: Option<i64>, outcome: &Result<String, String>, now_ms: i64) -> Result<(), StoreError> {
        let (state, text) = match outcome {
            Ok(done) => ("applied", done),
            Err(why) => ("refused", why),
        };
        self.conn
            .prepare_cached("UPDATE commands SET state = ?1, outcome = ?2, event_seq = ?3, done_ms = ?4 WHERE id = ?5 AND state = 'pending'")
            .and_then(|mut stmt| stmt.execute(params![state, text, event_seq, now_ms, id]))
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Publishes the view for attached consoles (inside the open batch, if any).
    pub fn publish_view(&mut self, seq: i64, view: &View, now_ms: i64) -> Result<(), StoreError> {
        let json = serde_json::to_string(view).map_err(|e| StoreError::Format { path: self.path.display().to_string(), message: e.to_string() })?;
        self.publish_view_json(seq, &json, now_ms)
    }

    /// `publish_view` with the view already serialized.
    pub fn publish_view_json(&mut self, seq: i64, json: &str, now_ms: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO views (id, seq, published_ms, view) VALUES (1, ?1, ?2, ?3)")
            .and_then(|mut stmt| stmt.execute(params![seq, now_ms, json]))
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// The newest published view if newer than `after_ms` (the wall display's read).
    pub fn latest_view(&self, after_ms: i64) -> Result<Option<Published>, StoreError> {
        latest_view(&self.conn, &self.path, after_ms)
    }

    /// A command's state by its ticket.
    pub fn command_state(&self, ticket: &str) -> Result<Option<CommandState>, StoreError> {
        command_state_by_ticket(&self.conn, ticket).map_err(|e| self.sql_err(e))
    }

    /// A command's id and state by its ticket.
    pub fn command_by_ticket(&self, ticket: &str) -> Result<Option<(i64, CommandState)>, StoreError> {
        self.conn
            .query_row("SELECT id, state, outcome, event_seq FROM commands WHERE ticket = ?1", params![ticket], |r| {
                Ok((r.get(0)?, state_of(&r.get::<_, String>(1)?, r.get(2)?, r.get(3)?)))
            })
            .optional()
            .map_err(|e| self.sql_err(e))
    }

    /// Every command, oldest first: its ticket (`#id` for a row from before
    /// tickets), the actor the engine recorded (JSON), and its state.
    pub fn commands(&self) -> Result<Vec<CommandRow>, StoreError> {
        let mut stmt =
            self.conn.prepare("SELECT id, ticket, actor, action, state, outcome, event_seq FROM commands ORDER BY id").map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let id: i64 = r.get(0)?;
                Ok(CommandRow {
                    ticket: r.get::<_, Option<String>>(1)?.unwrap_or_else(|| format!("#{id}")),
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    state: state_of(&r.get::<_, String>(4)?, r.get(5)?, r.get(6)?),
                })
            })
            .map_err(|e| self.sql_err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql_err(e))
    }
}
