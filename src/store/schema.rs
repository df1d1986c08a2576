//! Every table of a gpuroom log, in one place: what `Store::create` makes,
//! and the empty temporary tables an older log is read through.

/// 2 added the ledger table; a version-1 log opens with an empty ledger.
/// 3 added the audit table; older logs open with an empty one.
/// 4 added the lease, commands and views tables; older logs open read-only
/// with empty ones, and cannot be resumed or attached to.
pub(super) const SCHEMA_VERSION: i64 = 4;

/// The event log itself: the run's metadata, events and snapshots.
pub(super) const LOG: &str = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, at_ms INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
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
    outcome TEXT, event_seq INTEGER UNIQUE, done_ms INTEGER);
CREATE INDEX IF NOT EXISTS commands_pending ON commands (state, id);
CREATE TRIGGER IF NOT EXISTS commands_no_delete BEFORE DELETE ON commands
    BEGIN SELECT RAISE(ABORT, 'commands are kept'); END;
CREATE TRIGGER IF NOT EXISTS commands_done_once BEFORE UPDATE ON commands WHEN OLD.state != 'pending'
    BEGIN SELECT RAISE(ABORT, 'a command is applied once'); END;
CREATE TABLE IF NOT EXISTS views (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL, published_ms INTEGER NOT NULL, view TEXT NOT NULL);";

/// Logs from before version 4, opened read-only: empty temporary tables.
pub(super) const LEGACY_COMMANDS: &str = "
CREATE TEMP TABLE IF NOT EXISTS commands (id INTEGER PRIMARY KEY, submitted_ms INTEGER, actor TEXT, action TEXT, state TEXT, outcome TEXT, event_seq INTEGER, done_ms INTEGER);
CREATE TEMP TABLE IF NOT EXISTS views (id INTEGER PRIMARY KEY, seq INTEGER, published_ms INTEGER, view TEXT);";
