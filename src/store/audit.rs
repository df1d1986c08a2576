//! The audit table: one row per operator action the engine received, done
//! or refused, with who asked, from where, in which role, and the outcome.
//! Triggers refuse UPDATE and DELETE: what an operator did stays written.
//!
//! The event log already holds every accepted and refused `Event::Operator`
//! (it is the source of truth for replay); this table is the same trail in
//! columns a person or a script can query without decoding JSON.
//!
//! Each row has the room's time (`at`: simulated in a simulation) and,
//! from schema 8 on, the wall-clock time it was written (`wall`): who did
//! what at 03:12 on the night, whatever the simulated clock said.
//!
//! Owns the audit SQL only.

use rusqlite::params;

use super::db::{Store, StoreError, at_text};
use crate::domain::event::{Action, Actor, Role};
use crate::domain::units::At;

/// One row of the audit table.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    pub at: At,
    pub user: String,
    pub origin: String,
    pub role: Role,
    pub verb: String,
    /// The action as JSON, exactly as the event log holds it.
    pub action: String,
    /// "done" or "refused".
    pub outcome: String,
    /// What was done, or why it was refused.
    pub detail: String,
    /// When it was written, by the wall clock (`None` in logs before schema 8).
    pub wall: Option<chrono::DateTime<chrono::Utc>>,
}

fn role_text(role: Role) -> &'static str {
    match role {
        Role::Operator => "operator",
        Role::Viewer => "viewer",
    }
}

impl Store {
    /// The wall-clock time for a new row, where the log has the column.
    fn wall_now(&self) -> Option<String> {
        self.walls_audit.then(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    }

    /// Records an operator action and what came of it (`Err` = refused, with the reason).
    pub fn append_audit(&mut self, at: At, actor: &Actor, action: &Action, outcome: &Result<String, String>) -> Result<(), StoreError> {
        let json = serde_json::to_string(action).map_err(|e| StoreError::Format { path: self.path.display().to_string(), message: e.to_string() })?;
        let (outcome, detail) = match outcome {
            Ok(done) => ("done", done.as_str()),
            Err(why) => ("refused", why.as_str()),
        };
        self.conn
            .execute(
                "INSERT INTO audit (at, user, origin, role, verb, action, outcome, detail, wall) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![at_text(at), actor.user, actor.origin, role_text(actor.role), action.verb(), json, outcome, detail, self.wall_now()],
            )
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Records a command that could not be read (no action to name): refused.
    pub fn append_audit_unreadable(&mut self, at: At, actor: &Actor, reason: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO audit (at, user, origin, role, verb, action, outcome, detail, wall) VALUES (?1, ?2, ?3, ?4, 'unreadable', 'null', 'refused', ?5, ?6)",
                params![at_text(at), actor.user, actor.origin, role_text(actor.role), reason, self.wall_now()],
            )
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Records something the engine refused that is no action of the room's
    /// (a user's commands refused for their number): `verb` names it.
    pub fn append_audit_note(&mut self, at: At, actor: &Actor, verb: &str, detail: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO audit (at, user, origin, role, verb, action, outcome, detail, wall) VALUES (?1, ?2, ?3, ?4, ?5, 'null', 'refused', ?6, ?7)",
                params![at_text(at), actor.user, actor.origin, role_text(actor.role), verb, detail, self.wall_now()],
            )
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Every audit row, oldest first.
    pub fn audit_records(&self) -> Result<Vec<AuditRecord>, StoreError> {
        // Logs before schema 8 have no wall column: their rows read without one.
        let wall = if self.walls_audit { "wall" } else { "NULL" };
        let sql = format!("SELECT at, user, origin, role, verb, action, outcome, detail, {wall} FROM audit ORDER BY id");
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let head = (r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?);
                Ok((head, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get::<_, Option<String>>(8)?))
            })
            .map_err(|e| self.sql_err(e))?;
        let time = |what: &str, text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|e| StoreError::Format { path: self.path.display().to_string(), message: format!("audit {what} {text:?}: {e}") })
        };
        let mut out = Vec::new();
        for row in rows {
            let ((at, user, origin, role), verb, action, outcome, detail, wall) = row.map_err(|e| self.sql_err(e))?;
            let at = time("time", &at)?;
            let wall = wall.map(|w| time("wall time", &w)).transpose()?;
            let role = if role == "viewer" { Role::Viewer } else { Role::Operator };
            out.push(AuditRecord { at, user, origin, role, verb, action, outcome, detail, wall });
        }
        Ok(out)
    }
}
