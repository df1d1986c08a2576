//! Every table of a gpuroom log, in one place: what `Store::create` makes,
//! and the empty temporary tables an older log is read through.

/// 2 added the ledger table; a version-1 log opens with an empty ledger.
/// 3 added the audit table; older logs open with an empty one.
/// 4 added the lease, commands and views tables; older logs open read-only
/// with empty ones, and cannot be resumed or attached to.
/// 5 gave each command its inbox ticket and let only the engine's moves
/// through (`COMMANDS_GUARDS`); a version-4 log is brought up to it when
/// resumed (`MIGRATE_4_TO_5`).
/// 6 keeps a log's telemetry as binary frames in `events.packed` (see
/// `frames`), its ledger as lines naming their repeated words by number
/// (`ledger`) and its snapshots as deflated JSON; an event at a whole
/// millisecond has an empty `at` (its `at_ms` is exact). An older log is
/// read as it is, and brought up to 6 when resumed (`migrate_5_to_6`), its
/// older telemetry left as JSON.
/// 7 gives each event a checksum (`events.sum`, CRC-32 of its columns; see
/// `events::checksum`), verified on every read; an older log's events are
/// read unchecked, and a resumed one checks the events written from then on.
/// 8 gives each audit row its wall-clock time (`audit.wall`) beside the
/// room's time (`audit.at`, simulated in a simulation); older rows have none.
pub(super) const SCHEMA_VERSION: i64 = 8;

/// The event log itself: the run's metadata, events and snapshots.
pub(super) const LOG: &str = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, at_ms INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, packed BLOB, sum INTEGER);
CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, room TEXT NOT NULL);";

const LEDGER_COLUMNS: &str = "(
    id INTEGER PRIMARY KEY,
    start TEXT NOT NULL, start_ms INTEGER NOT NULL, end TEXT NOT NULL,
    kind TEXT NOT NULL, node INTEGER NOT NULL, node_name TEXT NOT NULL, unit INTEGER,
    job INTEGER, tenant TEXT, project TEXT, env TEXT, model TEXT,
    billing TEXT NOT NULL, instance_type TEXT NOT NULL, zone TEXT NOT NULL,
    amount INTEGER NOT NULL, list_amount INTEGER NOT NULL, quantity INTEGER NOT NULL)";

/// The ledger from schema 6: each line's repeated words (its kind, where it
/// ran and at what price, whom it is charged to) kept once in a small table
/// and named by number, and a time that is whole seconds kept only as its
/// milliseconds. The `ledger` view shows the lines with every column of the
/// version-5 table, so every reader reads it as it did; inserting into it
/// (the migration, a hand-written line) files the words, and the engine
/// files them itself (`Store::append_ledger`). A month of the 1,000-GPU
/// cluster's lines took 211 MB as one wide table.
const LEDGER_TABLES: &str = "
CREATE TABLE IF NOT EXISTS ledger_kinds (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS ledger_places (
    id INTEGER PRIMARY KEY, node INTEGER NOT NULL, node_name TEXT NOT NULL,
    billing TEXT NOT NULL, instance_type TEXT NOT NULL, zone TEXT NOT NULL,
    UNIQUE (node, node_name, billing, instance_type, zone));
CREATE TABLE IF NOT EXISTS ledger_owners (id INTEGER PRIMARY KEY, tenant TEXT, project TEXT, env TEXT, model TEXT, UNIQUE (tenant, project, env, model));
CREATE TABLE IF NOT EXISTS ledger_rows (
    id INTEGER PRIMARY KEY,
    start_ms INTEGER NOT NULL, start_text TEXT, span_ms INTEGER NOT NULL, end_text TEXT,
    kind INTEGER NOT NULL, place INTEGER NOT NULL, unit INTEGER, job INTEGER, owner INTEGER,
    amount INTEGER NOT NULL, list_amount INTEGER NOT NULL, quantity INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_rows_start ON ledger_rows (start_ms);
CREATE VIEW IF NOT EXISTS ledger AS SELECT
    r.id AS id,
    COALESCE(r.start_text, strftime('%Y-%m-%dT%H:%M:%SZ', r.start_ms / 1000, 'unixepoch')) AS start,
    r.start_ms AS start_ms,
    COALESCE(r.end_text, strftime('%Y-%m-%dT%H:%M:%SZ', (r.start_ms + r.span_ms) / 1000, 'unixepoch')) AS end,
    k.label AS kind, p.node AS node, p.node_name AS node_name, r.unit AS unit, r.job AS job,
    o.tenant AS tenant, o.project AS project, o.env AS env, o.model AS model,
    p.billing AS billing, p.instance_type AS instance_type, p.zone AS zone,
    r.amount AS amount, r.list_amount AS list_amount, r.quantity AS quantity
    FROM ledger_rows r
    LEFT JOIN ledger_kinds k ON k.id = r.kind
    LEFT JOIN ledger_places p ON p.id = r.place
    LEFT JOIN ledger_owners o ON o.id = r.owner;
CREATE TRIGGER IF NOT EXISTS ledger_insert INSTEAD OF INSERT ON ledger BEGIN
    INSERT OR IGNORE INTO ledger_kinds (label) VALUES (NEW.kind);
    INSERT OR IGNORE INTO ledger_places (node, node_name, billing, instance_type, zone) VALUES (NEW.node, NEW.node_name, NEW.billing, NEW.instance_type, NEW.zone);
    INSERT INTO ledger_owners (tenant, project, env, model)
        SELECT NEW.tenant, NEW.project, NEW.env, NEW.model
        WHERE NOT (NEW.tenant IS NULL AND NEW.project IS NULL AND NEW.env IS NULL AND NEW.model IS NULL)
          AND NOT EXISTS (SELECT 1 FROM ledger_owners WHERE tenant IS NEW.tenant AND project IS NEW.project AND env IS NEW.env AND model IS NEW.model);
    INSERT INTO ledger_rows (id, start_ms, start_text, span_ms, end_text, kind, place, unit, job, owner, amount, list_amount, quantity) VALUES (
        NEW.id, NEW.start_ms, NEW.start, 0, NEW.end,
        (SELECT id FROM ledger_kinds WHERE label = NEW.kind),
        (SELECT id FROM ledger_places WHERE node = NEW.node AND node_name = NEW.node_name AND billing = NEW.billing AND instance_type = NEW.instance_type AND zone = NEW.zone),
        NEW.unit, NEW.job,
        (SELECT id FROM ledger_owners WHERE tenant IS NEW.tenant AND project IS NEW.project AND env IS NEW.env AND model IS NEW.model),
        NEW.amount, NEW.list_amount, NEW.quantity);
END;
CREATE TRIGGER IF NOT EXISTS ledger_no_update INSTEAD OF UPDATE ON ledger BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete INSTEAD OF DELETE ON ledger BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;";

/// Each of the ledger's tables refuses UPDATE and DELETE.
fn ledger_guards() -> String {
    ["ledger_kinds", "ledger_places", "ledger_owners", "ledger_rows"]
        .iter()
        .map(|t| {
            format!(
                "CREATE TRIGGER IF NOT EXISTS {t}_no_update BEFORE UPDATE ON {t} BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
                 CREATE TRIGGER IF NOT EXISTS {t}_no_delete BEFORE DELETE ON {t} BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;"
            )
        })
        .collect()
}

pub(super) fn ledger() -> String {
    format!("{LEDGER_TABLES}\n{}", ledger_guards())
}

/// A version-5 log resumed by this version: telemetry from now on as frames,
/// and the ledger's lines moved, as they are, into the schema-6 tables.
pub(super) fn migrate_5_to_6() -> String {
    format!(
        "ALTER TABLE events ADD COLUMN packed BLOB;
         DROP TRIGGER IF EXISTS ledger_no_update;
         DROP TRIGGER IF EXISTS ledger_no_delete;
         DROP INDEX IF EXISTS ledger_start;
         ALTER TABLE ledger RENAME TO ledger_v5;
         {}
         INSERT INTO ledger (id, start, start_ms, end, kind, node, node_name, unit, job, tenant, project, env, model, billing, instance_type, zone, amount, list_amount, quantity)
             SELECT id, start, start_ms, end, kind, node, node_name, unit, job, tenant, project, env, model, billing, instance_type, zone, amount, list_amount, quantity
             FROM ledger_v5 ORDER BY id;
         DROP TABLE ledger_v5;
         UPDATE meta SET value = '6' WHERE key = 'schema_version';",
        ledger()
    )
}

/// A version-6 log resumed by this version: its events from now on carry a checksum.
pub(super) const MIGRATE_6_TO_7: &str = "
ALTER TABLE events ADD COLUMN sum INTEGER;
UPDATE meta SET value = '7' WHERE key = 'schema_version';";

/// A version-7 log resumed by this version: its audit rows from now on carry
/// the wall-clock time.
pub(super) const MIGRATE_7_TO_8: &str = "
ALTER TABLE audit ADD COLUMN wall TEXT;
UPDATE meta SET value = '8' WHERE key = 'schema_version';";

/// A version-1 log has no ledger: reads see an empty temporary one.
pub(super) fn legacy_ledger() -> String {
    format!("CREATE TEMP TABLE IF NOT EXISTS ledger {LEDGER_COLUMNS};")
}

const AUDIT_COLUMNS: &str = "(
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL, user TEXT NOT NULL, origin TEXT NOT NULL, role TEXT NOT NULL,
    verb TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL, wall TEXT)";

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

/// Logs from before version 4, opened read-only: empty temporary tables.
pub(super) const LEGACY_COMMANDS: &str = "
CREATE TEMP TABLE IF NOT EXISTS commands (id INTEGER PRIMARY KEY, submitted_ms INTEGER, actor TEXT, action TEXT, state TEXT, outcome TEXT, event_seq INTEGER, done_ms INTEGER);
CREATE TEMP TABLE IF NOT EXISTS views (id INTEGER PRIMARY KEY, seq INTEGER, published_ms INTEGER, view TEXT);";
