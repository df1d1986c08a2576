//! The log's file: opening and creating it, batches (one transaction each),
//! events and snapshots. The tables' own parts of `Store` live beside it
//! (`ledger`, `audit`, `lease`, `commands`).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::file::{self, Access, FileError};
use super::frames::FrameBases;
use super::schema;
use crate::domain::units::At;
use crate::room::RoomConfig;

/// What started a recorded run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub room_config: RoomConfig,
    /// e.g. "sim seed=1 config=fixtures/sim/default.toml".
    pub source: String,
    pub created_with: String,
    /// The simulated world, exactly, so a crashed run can be resumed.
    #[serde(default)]
    pub world: Option<SimWorld>,
}

/// A simulated world as it was started: its seed and configuration text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimWorld {
    pub seed: u64,
    /// Where the configuration came from ("default" or a path), for messages.
    pub config_name: String,
    pub config_toml: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {message}")]
    Sqlite { path: String, message: String },
    #[error("{path}: event {seq}: {message}")]
    BadEvent { path: String, seq: i64, message: String },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    #[error("{path}: held by the engine {holder}")]
    Leased { path: String, holder: String },
    #[error("{path}: another engine created this log at the same moment")]
    Raced { path: String },
    /// The log's write lock could not be had (someone holds a lock on the
    /// log or its `-shm`): nothing was begun; try again later.
    #[error("{path}: {message}")]
    Busy { path: String, message: String },
}

impl StoreError {
    /// Whether the log was only locked for now (try again), not broken.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }
}

impl From<FileError> for StoreError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Raced(path) => StoreError::Raced { path: path.display().to_string() },
            FileError::At { path, message } => StoreError::Format { path: path.display().to_string(), message },
        }
    }
}

/// SQLite's error in words an operator can act on, with its own text after.
pub(super) fn explain(e: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode::*;
    let hint = match e.sqlite_error_code() {
        Some(DiskFull) => "the disk is full (or the file reached its size limit): the batch being written was not saved, everything before it is intact",
        Some(ReadOnly) => "the database is read-only here: gpuroom cannot write its log (open it with --wall to view it)",
        Some(CannotOpen) => "cannot open the file (does its folder exist, may this user write there?)",
        Some(NotADatabase) => "not an SQLite database: not a gpuroom log, or a corrupt one",
        Some(DatabaseCorrupt) => "the database file is corrupt; nothing was written to it",
        Some(DatabaseBusy) | Some(DatabaseLocked) => "another process holds the database locked",
        _ => return e.to_string(),
    };
    format!("{hint} ({e})")
}

/// What a checkpoint of the WAL found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WalState {
    /// The checkpoint could not run (its lock is held).
    pub blocked: bool,
    pub frames: u64,
    pub checkpointed: u64,
    pub bytes: u64,
}

pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) in_tx: bool,
    pub(super) next_seq: i64,
    /// A write failed: the open batch is rolled back, never committed.
    pub(super) failed: std::cell::Cell<bool>,
    /// What a read-only open could not show.
    note: Option<String>,
    /// Whether the log has `events.packed` (schema 6 on): every log this
    /// version writes does; an older one is only read.
    pub(super) packs_telemetry: bool,
    /// Whether the log has `events.sum` (schema 7 on): events are written
    /// with their checksum and every one that has it is verified on reading.
    pub(super) sums_events: bool,
    /// Whether the log has `audit.wall` (schema 8 on).
    pub(super) walls_audit: bool,
    pub(super) frames: FrameBases,
    /// The ledger's repeated words and the numbers they are filed under.
    pub(super) ledger_words: std::collections::HashMap<super::words::WordKey, i64>,
}

/// The SQL that brings a log of `version` up to this one (empty when it is
/// current), or why it cannot be resumed.
fn migration_for(version: i64) -> Result<String, String> {
    Ok(match version {
        schema::SCHEMA_VERSION => String::new(),
        7 => schema::MIGRATE_7_TO_8.to_string(),
        6 => format!("{} {}", schema::MIGRATE_6_TO_7, schema::MIGRATE_7_TO_8),
        5 => format!("{} {} {}", schema::migrate_5_to_6(), schema::MIGRATE_6_TO_7, schema::MIGRATE_7_TO_8),
        4 => format!("{} {} {} {}", schema::MIGRATE_4_TO_5, schema::migrate_5_to_6(), schema::MIGRATE_6_TO_7, schema::MIGRATE_7_TO_8),
        1..=3 => return Err(format!("schema version {version} was written by an older gpuroom and cannot be resumed (replay or view it instead)")),
        other => return Err(unknown_version(other)),
    })
}

/// A version this gpuroom does not know: newer (the usual case) or nonsense.
fn unknown_version(version: i64) -> String {
    if version > schema::SCHEMA_VERSION {
        format!("schema version {version} was written by a newer gpuroom (this one reads versions 1 to {}): open it with that version", schema::SCHEMA_VERSION)
    } else {
        format!("unsupported schema version {version}")
    }
}

pub(super) fn at_text(at: At) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

impl Store {
    pub(super) fn sql_err(&self, e: rusqlite::Error) -> StoreError {
        self.failed.set(true);
        Self::wrap(&self.path, e)
    }

    pub(super) fn wrap(path: &Path, e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite { path: path.display().to_string(), message: explain(&e) }
    }

    /// Creates a new event log, private to this user, with no lease taken.
    /// Refuses to touch an existing file, so no recorded run is ever overwritten.
    pub fn create(path: &Path, meta: &RunMeta) -> Result<Store, StoreError> {
        Self::create_with_access(path, meta, &Access::private())
    }

    /// Creates a new event log shared as `access` says, with no lease taken.
    pub fn create_with_access(path: &Path, meta: &RunMeta, access: &Access) -> Result<Store, StoreError> {
        Self::create_with(path, meta, access, &|_| Ok(()))
    }

    /// Creates a new event log shared as `access` says, with `seed` writing
    /// what must be in it from the first moment anyone can see it (the
    /// creator's lease; see `file`: built aside, linked into place whole).
    /// `StoreError::Raced` when another process created `path` first.
    pub(super) fn create_with(path: &Path, meta: &RunMeta, access: &Access, seed: &dyn Fn(&Connection) -> rusqlite::Result<()>) -> Result<Store, StoreError> {
        if path.exists() {
            return Err(StoreError::Format { path: path.display().to_string(), message: "already exists; refusing to overwrite a recorded run".into() });
        }
        file::refuse_orphans(path)?;
        let meta_json = serde_json::to_string(meta).map_err(|e| StoreError::Format { path: path.display().to_string(), message: e.to_string() })?;
        let tmp = file::temporary_for(path);
        file::make_private_file(&tmp, access)?;
        let built = Self::build(&tmp, &meta_json, access, seed);
        if let Err(e) = built {
            for side in ["", "-wal", "-shm", "-journal"] {
                let _ = std::fs::remove_file(file::sibling(&tmp, side));
            }
            return Err(match e {
                StoreError::Sqlite { message, .. } => StoreError::Sqlite { path: path.display().to_string(), message },
                other => other,
            });
        }
        file::publish(&tmp, path)?;
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| Self::wrap(path, e))?;
        let mut store = Store::with_conn(conn, path, 1);
        store.packs_telemetry = true;
        store.sums_events = true;
        store.walls_audit = true;
        store.pragmas()?;
        Ok(store)
    }

    /// Every table, the metadata and the lease, in the file at `tmp`.
    fn build(tmp: &Path, meta_json: &str, access: &Access, seed: &dyn Fn(&Connection) -> rusqlite::Result<()>) -> Result<(), StoreError> {
        let wrap = |e| Self::wrap(tmp, e);
        let conn = Connection::open_with_flags(tmp, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(wrap)?;
        let tables =
            [schema::LOG.to_string(), schema::ledger(), schema::audit(), schema::LEASE.into(), schema::COMMANDS.into(), schema::COMMANDS_GUARDS.into()];
        conn.execute_batch(&format!("BEGIN; {}; COMMIT;", tables.join(";\n"))).map_err(wrap)?;
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?1), ('run', ?2)", params![schema::SCHEMA_VERSION.to_string(), meta_json])
            .map_err(wrap)?;
        if let Some(group) = access.group {
            conn.execute("INSERT INTO meta (key, value) VALUES ('log_group', ?1)", params![group.to_string()]).map_err(wrap)?;
        }
        seed(&conn).map_err(wrap)?;
        // WAL is a property of the file: every later open finds it.
        conn.pragma_update(None, "journal_mode", "WAL").map_err(wrap)?;
        conn.close().map_err(|(_, e)| wrap(e))
    }

    pub(super) fn with_conn(conn: Connection, path: &Path, next_seq: i64) -> Store {
        Store {
            conn,
            path: path.to_path_buf(),
            in_tx: false,
            next_seq,
            failed: Default::default(),
            note: None,
            packs_telemetry: false,
            sums_events: false,
            walls_audit: false,
            frames: FrameBases::default(),
            ledger_words: Default::default(),
        }
    }

    /// Opens an existing log for reading only (replay, wall display). Writes
    /// nothing, not even SQLite's side files: a log no engine has open is
    /// read as an immutable file; one an engine has open is read through its
    /// WAL, or, where that cannot be (a read-only mount), as it stands on
    /// disk, with `note()` saying what is not shown.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Format { path: path.display().to_string(), message: "no such file".into() });
        }
        file::refuse_hot_journal(path)?;
        let mut store = match file::read_only_mode(path) {
            file::ReadOnlyOpen::Immutable => Self::open_immutable(path)?,
            file::ReadOnlyOpen::Shared => {
                let shared = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| Self::wrap(path, e));
                match shared.map(|conn| Store::with_conn(conn, path, 0)) {
                    Ok(store) if store.schema_version().is_ok() => store,
                    Ok(_) | Err(_) => {
                        let mut store = Self::open_immutable(path)?;
                        store.note =
                            Some(format!("{} cannot be read here (read-only): the newest commits in it are not shown", file::sibling(path, "-wal").display()));
                        store
                    }
                }
            }
        };
        match store.schema_version()? {
            schema::SCHEMA_VERSION => {
                store.packs_telemetry = true;
                store.sums_events = true;
                store.walls_audit = true;
                Ok(store)
            }
            7 => {
                store.packs_telemetry = true;
                store.sums_events = true;
                Ok(store)
            }
            6 => {
                store.packs_telemetry = true;
                Ok(store)
            }
            5 => Ok(store.with_legacy_tables(5)),
            4 => Ok(store.with_legacy_tables(4)),
            3 => Ok(store.with_legacy_tables(3)),
            2 => Ok(store.with_legacy_tables(2)),
            1 => Ok(store.with_legacy_tables(1)),
            other => Err(StoreError::Format { path: path.display().to_string(), message: unknown_version(other) }),
        }
    }

    fn open_immutable(path: &Path) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(file::uri(path, "mode=ro&immutable=1"), flags).map_err(|e| Self::wrap(path, e))?;
        Ok(Store::with_conn(conn, path, 0))
    }

    /// What a read-only open could not show, if anything.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Opens an existing log to go on writing it: the engine resuming a run
    /// whose engine died. The lease is the caller's next step.
    pub fn open_for_writing(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let metadata = std::fs::metadata(path).map_err(|e| StoreError::Format { path: shown.clone(), message: e.to_string() })?;
        // Checked here as well as by SQLite: as root, SQLite would write a file marked read-only.
        if metadata.permissions().readonly() {
            return Err(StoreError::Format {
                path: shown,
                message: "the file is read-only: gpuroom cannot go on writing its log (open it with --wall to view it)".into(),
            });
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| Self::wrap(path, e))?;
        // Another engine may be upgrading the same old log this instant.
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| Self::wrap(path, e))?;
        let mut store = Store::with_conn(conn, path, 0);
        migration_for(store.schema_version()?).map_err(|message| StoreError::Format { path: shown.clone(), message })?;
        // Nothing is written to a damaged file, not even the lease.
        store.check_integrity()?;
        // WAL before any migration: a migration killed half-way then leaves
        // a WAL that any reader sees past, never a hot rollback journal that
        // read-only tools cannot open.
        store.pragmas()?;
        store.migrate()?;
        store.packs_telemetry = true;
        store.sums_events = true;
        store.walls_audit = true;
        // A log an older gpuroom shared by its mode: the group is kept in
        // meta, and the file made the owner's alone (see `file`).
        if let Some(group) = store.log_group()? {
            store.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('log_group', ?1)", params![group.to_string()]).map_err(|e| store.sql_err(e))?;
        }
        if file::make_owner_only(path) {
            store.note = Some(format!(
                "{shown} was readable by its group (an older gpuroom's sharing); it is its owner's alone now, and the group attaches through the engine's socket"
            ));
        }
        store.conn.execute_batch(schema::COMMANDS_GUARDS).map_err(|e| store.sql_err(e))?;
        let last: Option<i64> = store.conn.query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0)).map_err(|e| store.sql_err(e))?;
        store.next_seq = last.unwrap_or(0) + 1;
        Ok(store)
    }

    /// Runs `f` inside one read transaction: every query it makes sees the
    /// log as it was when `f` began, however much an engine appends
    /// meanwhile (a what-if on a log still being written compares figures
    /// over one and the same span). Inside an open batch, `f` just runs.
    pub fn consistently<T>(&self, f: impl FnOnce() -> T) -> Result<T, StoreError> {
        if self.in_tx || !self.conn.is_autocommit() {
            return Ok(f());
        }
        self.conn.execute_batch("BEGIN DEFERRED").map_err(|e| Self::wrap(&self.path, e))?;
        // A deferred transaction takes its snapshot at its first read.
        if let Err(e) = self.conn.query_row("SELECT COUNT(*) FROM meta", [], |r| r.get::<_, i64>(0)) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(Self::wrap(&self.path, e));
        }
        let out = f();
        let _ = self.conn.execute_batch("COMMIT");
        Ok(out)
    }

    /// Brings an older log up to this version, in one transaction that
    /// re-reads the version under the write lock: of two engines resuming
    /// one old log, the second finds it migrated and does nothing.
    fn migrate(&mut self) -> Result<(), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.sql_err(e))?;
        let migrated = self.schema_version().and_then(|version| {
            let sql = migration_for(version).map_err(|message| StoreError::Format { path: self.path.display().to_string(), message })?;
            self.conn.execute_batch(&sql).map_err(|e| self.sql_err(e))
        });
        match migrated {
            Ok(()) => self.conn.execute_batch("COMMIT").map_err(|e| self.sql_err(e)),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// SQLite's quick check of every page: a damaged file is named as such
    /// before anything reads half of it or writes to it.
    pub fn check_integrity(&self) -> Result<(), StoreError> {
        let first: String = self.conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)).map_err(|e| self.sql_err(e))?;
        if first == "ok" {
            return Ok(());
        }
        Err(StoreError::Format { path: self.path.display().to_string(), message: format!("the database file is corrupt ({first}); nothing was written to it") })
    }

    fn schema_version(&self) -> Result<i64, StoreError> {
        let format = |message: String| StoreError::Format { path: self.path.display().to_string(), message };
        let version: Option<String> = self.conn.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional().map_err(|e| {
            use rusqlite::ErrorCode::*;
            match e.sqlite_error_code() {
                // It could not be read at all: say why, not what it is.
                Some(CannotOpen | ReadOnly | PermissionDenied | DatabaseBusy | DatabaseLocked | SystemIoFailure) => format(explain(&e)),
                // It opened but holds no gpuroom tables: that is what it is.
                _ => format(format!("not a gpuroom event log: {}", explain(&e))),
            }
        })?;
        let version = version.ok_or_else(|| format("not a gpuroom event log (no schema version)".into()))?;
        version.parse().map_err(|_| format(format!("unsupported schema version {version:?}")))
    }

    /// Older logs lack tables added since: read them through empty temporary ones.
    fn with_legacy_tables(self, version: i64) -> Store {
        if version < 2 {
            let _ = self.conn.execute_batch(&schema::legacy_ledger());
        }
        if version < 3 {
            let _ = self.conn.execute_batch(&schema::legacy_audit());
        }
        // A temporary table would hide a real one of the same name.
        if version < 4 {
            let _ = self.conn.execute_batch(&schema::LEASE.replace("CREATE TABLE", "CREATE TEMP TABLE"));
            let _ = self.conn.execute_batch(schema::LEGACY_COMMANDS);
        }
        self
    }

    fn pragmas(&mut self) -> Result<(), StoreError> {
        self.conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| self.sql_err(e))?;
        // Switching an older file to WAL needs it alone for an instant, and
        // SQLite answers "busy" at once, not after its timeout, while another
        // engine upgrading the same log has it open: try again for as long.
        let mut tries = 0;
        while let Err(e) = self.conn.pragma_update(None, "journal_mode", "WAL") {
            let busy = matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy));
            tries += 1;
            if !busy || tries >= 100 {
                return Err(self.sql_err(e));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The WAL and its index exist once something is read: share them as the log is shared.
        self.conn.query_row("SELECT COUNT(*) FROM meta", [], |r| r.get::<_, i64>(0)).map_err(|e| self.sql_err(e))?;
        file::match_side_files(&self.path);
        self.conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| self.sql_err(e))?;
        // After a WAL that grew while something held checkpoints back is
        // checkpointed, it is cut back to this size.
        self.conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024).map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Caps the file at `pages` pages (a disk that fills up, for tests).
    pub fn limit_pages(&mut self, pages: i64) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "max_page_count", pages).map_err(|e| self.sql_err(e))
    }

    /// Whether a batch is open.
    pub fn in_batch(&self) -> bool {
        self.in_tx
    }

    /// The sequence number of the newest event (0 when there is none).
    pub fn last_seq(&self) -> i64 {
        self.next_seq - 1
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The group of operators the run is shared with (`--log-group`), if
    /// any: they attach through the engine's socket. A log an older gpuroom
    /// shared says so by its mode (0640) and group instead.
    pub fn log_group(&self) -> Result<Option<u32>, StoreError> {
        let recorded: Option<String> =
            self.conn.query_row("SELECT value FROM meta WHERE key = 'log_group'", [], |r| r.get(0)).optional().map_err(|e| self.sql_err(e))?;
        if let Some(group) = recorded {
            return group
                .parse()
                .map(Some)
                .map_err(|_| StoreError::Format { path: self.path.display().to_string(), message: format!("meta log_group: {group:?} is not a group id") });
        }
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        Ok(std::fs::metadata(&self.path).ok().filter(|m| m.permissions().mode() & 0o040 != 0).map(|m| m.gid()))
    }

    pub fn meta(&self) -> Result<RunMeta, StoreError> {
        let text: String = self.conn.query_row("SELECT value FROM meta WHERE key = 'run'", [], |r| r.get(0)).map_err(|e| self.sql_err(e))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Format { path: self.path.display().to_string(), message: format!("meta: {e}") })
    }

    /// Opens a batch (the write lock, `BEGIN IMMEDIATE`). A lock someone
    /// else holds is waited on briefly and then answered `Busy`, with
    /// nothing begun: the caller keeps what it would have written and tries
    /// again, rather than sit, or stop, on another process's lock.
    pub fn begin(&mut self) -> Result<(), StoreError> {
        if !self.in_tx {
            let _ = self.conn.busy_timeout(std::time::Duration::from_millis(250));
            let begun = self.conn.execute_batch("BEGIN IMMEDIATE");
            let _ = self.conn.busy_timeout(std::time::Duration::from_secs(5));
            match begun {
                Ok(()) => self.in_tx = true,
                Err(e) if matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)) => {
                    return Err(StoreError::Busy { path: self.path.display().to_string(), message: explain(&e) });
                }
                Err(e) => return Err(self.sql_err(e)),
            }
        }
        Ok(())
    }

    /// A passive checkpoint of the WAL (it waits for no one) and what it
    /// found: the WAL's frames and how many are now in the log, and the
    /// WAL file's size. Frames that stay unchecked mean a reader (or a
    /// lock) holds the WAL back, and the file grows.
    pub fn checkpoint_wal(&self) -> Result<WalState, StoreError> {
        let (busy, frames, done): (i64, i64, i64) =
            self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(|e| Self::wrap(&self.path, e))?;
        let bytes = std::fs::metadata(file::sibling(&self.path, "-wal")).map(|m| m.len()).unwrap_or(0);
        // A checkpoint that could not start at all (its lock held) says -1.
        Ok(WalState { blocked: busy != 0 || frames < 0, frames: frames.max(0) as u64, checkpointed: done.max(0) as u64, bytes })
    }

    pub fn commit(&mut self) -> Result<(), StoreError> {
        if self.in_tx {
            if let Err(e) = self.conn.execute_batch("COMMIT") {
                // A failed commit (disk full) leaves nothing half-written: roll the batch back.
                let _ = self.conn.execute_batch("ROLLBACK");
                self.in_tx = false;
                // Nor did anything the batch filed.
                self.frames.rolled_back();
                self.ledger_words.clear();
                return Err(self.sql_err(e));
            }
            self.in_tx = false;
            self.frames.committed();
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // An open batch is committed on a clean shutdown; a crash loses only
        // it; after a failed write it is rolled back whole, so no event is
        // kept without its ledger lines or acknowledgements.
        if self.failed.get() && self.in_tx {
            let _ = self.conn.execute_batch("ROLLBACK");
        } else {
            let _ = self.commit();
        }
    }
}
