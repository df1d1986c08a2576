//! The command inbox: how an attached console's action reaches the engine
//! with an identity the engine can check instead of believe.
//!
//! A console never writes the log. It drops one file per command into the
//! folder beside the log (`LOG.inbox/`), and the kernel records who made it:
//! the file's owner is the console's OS user, which no one but root can fake,
//! and the folder is sticky, so no one can remove or replace another's file.
//! The engine takes each file in a batch: it writes the `commands` row under
//! the actor it derives (the OS user; the name the console claimed is kept
//! beside it, never in its place), refuses what does not decode with an
//! audit row, and removes the file once that batch is on disk. A file taken
//! twice (a crash between the commit and the removal) is recognised by its
//! name, the command's ticket, and not queued again.
//!
//! Owns the inbox's files and their rows; whether an action is allowed is
//! the room's decision.

use std::fs;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::db::{Store, StoreError};
use super::file::{inbox_of, user_name};
use crate::domain::event::{Action, Actor};
use crate::domain::text;

/// A command file larger than this is not read: it is refused unread.
pub const MAX_COMMAND_BYTES: u64 = 64 * 1024;
/// Files taken per batch, so a flood cannot stall the engine.
const TAKE_PER_BATCH: usize = 256;

/// What a console writes: the action, and who it says it is.
#[derive(Serialize, Deserialize)]
struct Dropped {
    claimed: Actor,
    action: Action,
}

/// The console's side: drops commands into a log's inbox.
pub struct Inbox {
    dir: PathBuf,
    counter: std::cell::Cell<u64>,
}

impl Inbox {
    pub fn of(log: &Path) -> Inbox {
        Inbox { dir: inbox_of(log), counter: Default::default() }
    }

    /// Queues `action` for the engine; returns its ticket (the file's name).
    pub fn submit(&self, claimed: &Actor, action: &Action, now_ms: i64) -> Result<String, StoreError> {
        let body = serde_json::to_vec(&Dropped { claimed: claimed.clone(), action: action.clone() }).map_err(|e| self.err(e.to_string()))?;
        self.submit_bytes(&body, now_ms)
    }

    /// Queues raw bytes as a command file (a console of another version, or a test of bad input).
    pub fn submit_bytes(&self, body: &[u8], now_ms: i64) -> Result<String, StoreError> {
        let n = self.counter.get();
        self.counter.set(n + 1);
        let ticket = format!("{now_ms:013}-{}-{n}-{:08x}.cmd", std::process::id(), rand::random::<u32>());
        let part = self.dir.join(format!(".{ticket}.part"));
        let write = || -> std::io::Result<()> {
            // Readable by the engine's user, whatever groups it is in; the
            // inbox (no access for anyone outside the log's group) keeps it from others.
            let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&part)?;
            std::io::Write::write_all(&mut file, body)?;
            file.sync_all()?;
            // The engine takes only complete files: the rename makes it appear whole.
            fs::rename(&part, self.dir.join(&ticket))
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&part);
            self.err(format!("queueing a command: {e} (is this user allowed to act on the log? see README, Security)"))
        })?;
        Ok(ticket)
    }

    fn err(&self, message: String) -> StoreError {
        StoreError::Format { path: self.dir.display().to_string(), message }
    }
}

/// The actor the engine records: the OS user who made the file; a different
/// name the console claimed is kept as what it said, never in its place.
fn derived_actor(uid: u32, claimed: Option<&Actor>) -> Actor {
    let user = user_name(uid);
    let account = Some(crate::domain::event::OsAccount { name: user.clone(), engine: uid == super::file::nix_uid() });
    match claimed {
        Some(c) => {
            let says = text::clean(&c.user);
            let user = if says == user || says.is_empty() { user } else { format!("{user} (says {})", bounded(&says, 64)) };
            Actor { user, origin: bounded(&text::clean(&c.origin), 128), role: c.role, account }
        }
        None => Actor { user, origin: "unreadable command".into(), role: crate::domain::event::Role::Viewer, account },
    }
}

fn bounded(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

impl Store {
    /// Moves the inbox's complete command files into the `commands` table
    /// (inside the open batch), oldest first. Unreadable files become
    /// refused rows with an audit row. Returns how many were queued.
    pub fn take_inbox(&mut self, at: crate::domain::units::At, now_ms: i64) -> Result<usize, StoreError> {
        let dir = inbox_of(&self.path);
        let Ok(entries) = fs::read_dir(&dir) else { return Ok(0) };
        let mut names: Vec<String> =
            entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.ends_with(".cmd") && !n.starts_with('.')).collect();
        names.sort();
        names.truncate(TAKE_PER_BATCH);
        let mut queued = 0;
        for name in names {
            let file = dir.join(&name);
            self.taken.push(file.clone());
            // Already queued by a batch that committed before a crash.
            let known: bool = self
                .conn
                .query_row("SELECT EXISTS (SELECT 1 FROM commands WHERE ticket = ?1)", params![name], |r| r.get(0))
                .map_err(|e| self.sql_err(e))?;
            if known {
                continue;
            }
            let decoded = read_owned(&file).and_then(|(uid, bytes)| {
                serde_json::from_slice::<Dropped>(&bytes).map(|d| (uid, d)).map_err(|e| (Some(uid), format!("unreadable command ({e})")))
            });
            match decoded {
                Ok((uid, Dropped { claimed, action })) => {
                    let actor = derived_actor(uid, Some(&claimed));
                    self.insert_command(&name, now_ms, &actor, &action)?;
                    queued += 1;
                }
                Err((uid, why)) => {
                    // No owner known (it vanished or is a link): nobody's, so nobody's role.
                    let actor = derived_actor(uid.unwrap_or(u32::MAX), None);
                    let reason = format!("command {}: {}", text::clean(&name), bounded(&text::clean(&why), 300));
                    self.refuse_unreadable(&name, now_ms, &actor, &reason)?;
                    self.append_audit_unreadable(at, &actor, &reason)?;
                }
            }
        }
        Ok(queued)
    }

    fn insert_command(&mut self, ticket: &str, now_ms: i64, actor: &Actor, action: &Action) -> Result<(), StoreError> {
        let fmt = |e: serde_json::Error| StoreError::Format { path: self.path.display().to_string(), message: e.to_string() };
        let (actor, action) = (serde_json::to_string(actor).map_err(fmt)?, serde_json::to_string(action).map_err(fmt)?);
        self.conn
            .execute("INSERT INTO commands (ticket, submitted_ms, actor, action) VALUES (?1, ?2, ?3, ?4)", params![ticket, now_ms, actor, action])
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// An unreadable command: queued and refused in one step (as pending, then done).
    fn refuse_unreadable(&mut self, ticket: &str, now_ms: i64, actor: &Actor, reason: &str) -> Result<(), StoreError> {
        let actor = serde_json::to_string(actor).unwrap_or_default();
        self.conn
            .execute("INSERT INTO commands (ticket, submitted_ms, actor, action) VALUES (?1, ?2, ?3, 'null')", params![ticket, now_ms, actor])
            .map_err(|e| self.sql_err(e))?;
        let id = self.conn.last_insert_rowid();
        self.finish_command(id, None, &Err(reason.to_string()), now_ms)
    }

    /// Removes the files whose commands the last commit saved.
    pub(super) fn clear_taken(&mut self) {
        for file in self.taken.drain(..) {
            let _ = fs::remove_file(file);
        }
    }
}

/// The file's owner and bytes, if it is a plain file within the size bound.
/// Opened without following links and without blocking on a pipe, then
/// checked through the open descriptor, so what is read is what was checked.
fn read_owned(file: &Path) -> Result<(u32, Vec<u8>), (Option<u32>, String)> {
    let flags = (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits();
    let opened = fs::OpenOptions::new().read(true).custom_flags(flags).open(file);
    let handle = opened.map_err(|e| (None, format!("cannot be opened as a plain file ({e}); links are never followed")))?;
    let meta = handle.metadata().map_err(|e| (None, e.to_string()))?;
    let uid = meta.uid();
    if !meta.file_type().is_file() {
        return Err((Some(uid), "not a plain file".into()));
    }
    if meta.len() > MAX_COMMAND_BYTES {
        return Err((Some(uid), format!("{} bytes, more than the {MAX_COMMAND_BYTES} a command may hold; not read", meta.len())));
    }
    let mut bytes = Vec::new();
    handle.take(MAX_COMMAND_BYTES + 1).read_to_end(&mut bytes).map_err(|e| (Some(uid), format!("cannot be read: {e}")))?;
    Ok((uid, bytes))
}
