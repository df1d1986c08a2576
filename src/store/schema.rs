//! Every table of a gpuroom log, in one place: what `Store::create` makes,
//! and the empty temporary tables an older log is read through.

/// 2 added the ledger table; a version-1 log opens with an empty ledger.
/// 3 added the audit table; older logs open with an empty one.
/// 4 added the lease, commands and views tables; older logs open read-only
/// with empty ones, and cannot be resumed or attached to.
/// 5 gave each command its inbox ticket and let only the engine's moves
/// through (`COMMANDS_GUARDS`); a version-4 log is brought up to it when
/// resumed (`MIGRATE_4_TO_5`).
/// 6 keeps telemetry as binary frames in `events.packed` (see `frames`); an
/// older log is read as it is, and resumed with the column added
/// (`MIGRATE_5_TO_6`), its older telemetry left as JSON.
pub(super) const SCHEMA_VERSION: i64 = 6;

/// The event log itself: the run's metadata, events and snapshots.
pub(super) const LOG: &str = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, at_ms INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, packed BLOB);
CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, room TEXT NOT NULL);";

const LEDGER_COLUMNS: &str = "(
    id INTEGER PRIMARY KEY,
    start TEXT NOT NULL, start_ms INTEGER NOT NULL, end TEXT NOT NULL,
    kind TEXT NOT NULL, node INTEGER NOT NULL, node_name TEXT NOT NULL, unit INTEGER,
    job INTEGER, tenant TEXT, project TEXT, env TEXT, model TEXT,
    billing TEXT NOT NULL, instance_type TEXT NOT NULL, zone TEXT NOT NULL,
    amount INTEGER NOT NULL, list_amount INTEGER NOT NULL, quantity INTEGER NOT NULL)";

pub(super) fn ledger() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS ledger {LEDGER_COLUMNS};
         CREATE INDEX IF NOT EXISTS ledger_start ON ledger (start_ms);
         CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
         CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;"
    )
}

/// A version-1 log has no ledger: reads see an empty temporary one.
pub(super) fn legacy_ledger() -> String {
    format!("CREATE TEMP TABLE IF NOT EXISTS ledger {LEDGER_COLUMNS};")
}

const AUDIT_COLUMNS: &str = "(
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL, user TEXT NOT NULL, origin TEXT NOT NULL, role TEXT NOT NULL,
    verb TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL)";

pub(super) fn audit() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS audit {AUDIT_COLUMNS};
         CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
         CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
    )
}

/// Logs from before the audit table: reads see an empty temporary one.
pub(super) fn legacy_audit() -> String {
    format!("CREATE TEMP TABLE IF NOT EXISTS audit {AUDIT_COLUMNS};")
}

pub(super) const LEASE: &str = "CREATE TABLE IF NOT EXISTS lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL, host TEXT NOT NULL, started_ms INTEGER NOT NULL, heartbeat_ms INTEGER NOT NULL);";

pub(super) const COMMANDS: &str = "
CREATE TABLE IF NOT EXISTS commands (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    submitted_ms INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'applied', 'refused')),
    outcome TEXT, event_seq INTEGER UNIQUE, done_ms INTEGER, ticket TEXT UNIQUE);
CREATE INDEX IF NOT EXISTS commands_pending ON commands (state, id);
CREATE TRIGGER IF NOT EXISTS commands_no_delete BEFORE DELETE ON commands
    BEGIN SELECT RAISE(ABORT, 'commands are kept'); END;
CREATE TRIGGER IF NOT EXISTS commands_done_once BEFORE UPDATE ON commands WHEN OLD.state != 'pending'
    BEGIN SELECT RAISE(ABORT, 'a command is applied once'); END;
CREATE TABLE IF NOT EXISTS views (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL, published_ms INTEGER NOT NULL, view TEXT NOT NULL);";

/// A command is born pending, and moves once, to applied (with its event)
/// or refused, with the time it was done; nothing else of it changes. These
/// keep a mistaken or hand-written statement from rewriting the trail; they
/// do not stop someone who may write the file at all (who can drop them),
/// which is why only the engine's user may write it (see `file`).
pub(super) const COMMANDS_GUARDS: &str = "
CREATE TRIGGER IF NOT EXISTS commands_born_pending BEFORE INSERT ON commands
    WHEN NEW.state != 'pending' OR NEW.outcome IS NOT NULL OR NEW.event_seq IS NOT NULL OR NEW.done_ms IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'a command is queued pending; only the engine decides it'); END;
CREATE TRIGGER IF NOT EXISTS commands_one_move BEFORE UPDATE ON commands
    WHEN NEW.state = 'pending' OR NEW.done_ms IS NULL OR NEW.outcome IS NULL
      OR (NEW.state = 'applied' AND NEW.event_seq IS NULL)
      OR NEW.id != OLD.id OR NEW.actor != OLD.actor OR NEW.action != OLD.action
      OR NEW.submitted_ms != OLD.submitted_ms OR NEW.ticket IS NOT OLD.ticket
    BEGIN SELECT RAISE(ABORT, 'a command moves once, from pending to applied or refused'); END;";

/// A version-4 log resumed by this version: tickets and guards added.
pub(super) const MIGRATE_4_TO_5: &str = "
ALTER TABLE commands ADD COLUMN ticket TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS commands_ticket ON commands (ticket);
UPDATE meta SET value = '5' WHERE key = 'schema_version';";

/// A version-5 log resumed by this version: telemetry from now on as frames.
pub(super) const MIGRATE_5_TO_6: &str = "
ALTER TABLE events ADD COLUMN packed BLOB;
UPDATE meta SET value = '6' WHERE key = 'schema_version';";

/// Logs from before version 4, opened read-only: empty temporary tables.
pub(super) const LEGACY_COMMANDS: &str = "
CREATE TEMP TABLE IF NOT EXISTS commands (id INTEGER PRIMARY KEY, submitted_ms INTEGER, actor TEXT, action TEXT, state TEXT, outcome TEXT, event_seq INTEGER, done_ms INTEGER);
CREATE TEMP TABLE IF NOT EXISTS views (id INTEGER PRIMARY KEY, seq INTEGER, published_ms INTEGER, view TEXT);";
