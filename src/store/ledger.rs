//! The ledger: append-only cost lines, one per GPU (or service) per job per
//! charge period, as the `Room` closes them. Read through the `ledger` view;
//! written as narrow rows naming their repeated words by number (see
//! `schema`). Triggers refuse UPDATE and DELETE, so a line once written
//! stays as written.
//!
//! Owns the ledger's SQL: appending, reading a month back, and roll-ups by
//! attribution level. Knows nothing of export formats.

use chrono::Datelike;
use rusqlite::params;

use super::db::{Store, StoreError, at_text};
use super::words::Word;
use crate::cost::ledger::{LedgerLine, LineKind};
use crate::domain::cluster::BillingMode;
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::job::Tags;
use crate::domain::units::{At, Micros};

/// An attribution level to roll up by.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Level {
    Tenant,
    Project,
    Env,
    Model,
    /// One GPU: node and unit.
    Gpu,
}

impl Level {
    fn key_sql(self) -> &'static str {
        match self {
            Level::Tenant => "COALESCE(tenant, '(idle)')",
            Level::Project => "COALESCE(tenant || '/' || project, '(idle)')",
            Level::Env => "COALESCE(tenant || '/' || project || '/' || env, '(idle)')",
            Level::Model => "COALESCE(tenant || '/' || project || '/' || env || '/' || model, '(idle)')",
            Level::Gpu => "node_name || ':' || COALESCE(unit, '-')",
        }
    }
}

fn billing_label(mode: BillingMode) -> &'static str {
    match mode {
        BillingMode::OnDemand => "on-demand",
        BillingMode::Reserved => "reserved",
        BillingMode::Spot => "spot",
    }
}

/// A time of whole seconds in years the `ledger` view can write back
/// exactly from its milliseconds is kept as those alone; any other, as text.
fn text_unless_whole_seconds(at: At) -> Option<String> {
    let whole = at.timestamp_subsec_nanos() == 0 && (1970..=9999).contains(&at.year());
    (!whole).then(|| at_text(at))
}

fn billing_of(text: &str) -> Option<BillingMode> {
    [BillingMode::OnDemand, BillingMode::Reserved, BillingMode::Spot].into_iter().find(|m| billing_label(*m) == text)
}

impl Store {
    /// Appends closed lines (inside the open transaction, if any). A log
    /// from before schema 6 is never written (it is migrated when resumed).
    pub fn append_ledger(&mut self, lines: &[LedgerLine]) -> Result<(), StoreError> {
        for l in lines {
            let kind = self.ledger_word(Word::Kind(l.kind.label()))?;
            let place = self.ledger_word(Word::Place(l.node.0, &l.node_name, billing_label(l.billing), &l.instance_type, &l.zone))?;
            let owner = match &l.tags {
                Some(t) => Some(self.ledger_word(Word::Owner([t.tenant.0.as_str(), &t.project, &t.env, &t.model]))?),
                None => None,
            };
            let (start_ms, end_ms) = (l.start.timestamp_millis(), l.end.timestamp_millis());
            self.conn
                .prepare_cached(
                    "INSERT INTO ledger_rows (start_ms, start_text, span_ms, end_text, kind, place, unit, job, owner, amount, list_amount, quantity)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        start_ms,
                        text_unless_whole_seconds(l.start),
                        end_ms - start_ms,
                        text_unless_whole_seconds(l.end),
                        kind,
                        place,
                        l.unit,
                        l.job.map(|j| j.0 as i64),
                        owner,
                        l.amount.0,
                        l.list_amount.0,
                        l.quantity,
                    ])
                })
                .map_err(|e| self.sql_err(e))?;
        }
        Ok(())
    }

    /// The number a repeated word of the ledger is filed under, filed now
    /// if it is new (remembered, so a line costs no lookup in the file).
    fn ledger_word(&mut self, word: Word) -> Result<i64, StoreError> {
        let key = word.key();
        if let Some(&id) = self.ledger_words.get(&key) {
            return Ok(id);
        }
        let (insert, find, args): (&str, &str, Vec<&dyn rusqlite::ToSql>) = match &word {
            Word::Kind(label) => ("INSERT OR IGNORE INTO ledger_kinds (label) VALUES (?1)", "SELECT id FROM ledger_kinds WHERE label = ?1", vec![label]),
            Word::Place(node, name, billing, instance_type, zone) => (
                "INSERT OR IGNORE INTO ledger_places (node, node_name, billing, instance_type, zone) VALUES (?1, ?2, ?3, ?4, ?5)",
                "SELECT id FROM ledger_places WHERE node = ?1 AND node_name = ?2 AND billing = ?3 AND instance_type = ?4 AND zone = ?5",
                vec![node, name, billing, instance_type, zone],
            ),
            Word::Owner([tenant, project, env, model]) => (
                "INSERT OR IGNORE INTO ledger_owners (tenant, project, env, model) VALUES (?1, ?2, ?3, ?4)",
                "SELECT id FROM ledger_owners WHERE tenant = ?1 AND project = ?2 AND env = ?3 AND model = ?4",
                vec![tenant, project, env, model],
            ),
        };
        let id = self
            .conn
            .prepare_cached(insert)
            .and_then(|mut stmt| stmt.execute(args.as_slice()))
            .and_then(|_| self.conn.prepare_cached(find)?.query_row(args.as_slice(), |r| r.get(0)))
            .map_err(|e| self.sql_err(e))?;
        self.ledger_words.insert(key, id);
        Ok(id)
    }

    /// When the first and the last line start, or `None` for an empty ledger:
    /// what an export for a month the run does not cover names instead.
    pub fn ledger_span(&self) -> Result<Option<(At, At)>, StoreError> {
        let (first, last): (Option<i64>, Option<i64>) =
            self.conn.query_row("SELECT min(start_ms), max(start_ms) FROM ledger_rows", [], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| self.sql_err(e))?;
        let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms);
        Ok(first.zip(last).and_then(|(f, l)| at(f).zip(at(l))))
    }

    /// Lines whose period starts in `[from, to)`, in order.
    pub fn ledger_lines(&self, from: At, to: At) -> Result<Vec<LedgerLine>, StoreError> {
        let path = self.path.display().to_string();
        let bad = |id: i64, what: String| StoreError::Format { path: path.clone(), message: format!("ledger line {id}: {what}") };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, start, end, kind, node, node_name, unit, job, tenant, project, env, model, billing, instance_type, zone, amount, list_amount, quantity
                 FROM ledger WHERE start_ms >= ?1 AND start_ms < ?2 ORDER BY id",
            )
            .map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map(params![from.timestamp_millis(), to.timestamp_millis()], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, u32>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<u8>>(6)?,
                    r.get::<_, Option<i64>>(7)?,
                    [r.get::<_, Option<String>>(8)?, r.get::<_, Option<String>>(9)?, r.get::<_, Option<String>>(10)?, r.get::<_, Option<String>>(11)?],
                    (r.get::<_, String>(12)?, r.get::<_, String>(13)?, r.get::<_, String>(14)?),
                    (r.get::<_, i64>(15)?, r.get::<_, i64>(16)?, r.get::<_, i64>(17)?),
                ))
            })
            .map_err(|e| self.sql_err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, start, end, kind, node, node_name, unit, job, [tenant, project, env, model], (billing, instance_type, zone), (amount, list, quantity)) =
                row.map_err(|e| self.sql_err(e))?;
            let time = |text: &str| chrono::DateTime::parse_from_rfc3339(text).map(|t| t.to_utc()).map_err(|e| bad(id, format!("time {text:?}: {e}")));
            let tags = match (tenant, project, env, model) {
                (Some(tenant), Some(project), Some(env), Some(model)) => Some(Tags { tenant: TenantId(tenant), project, env, model }),
                _ => None,
            };
            out.push(LedgerLine {
                start: time(&start)?,
                end: time(&end)?,
                kind: LineKind::parse(&kind).ok_or_else(|| bad(id, format!("kind {kind:?}")))?,
                node: NodeId(node),
                node_name,
                unit,
                job: job.map(|j| JobId(j as u64)),
                tags,
                billing: billing_of(&billing).ok_or_else(|| bad(id, format!("billing {billing:?}")))?,
                instance_type,
                zone,
                amount: Micros(amount),
                list_amount: Micros(list),
                quantity,
            });
        }
        Ok(out)
    }

    /// Spend in `[from, to)` rolled up by `level`, largest first.
    pub fn ledger_rollup(&self, level: Level, from: At, to: At) -> Result<Vec<(String, Micros)>, StoreError> {
        let sql = format!(
            "SELECT {key} AS k, SUM(amount) FROM ledger WHERE start_ms >= ?1 AND start_ms < ?2 GROUP BY k ORDER BY SUM(amount) DESC, k",
            key = level.key_sql()
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map(params![from.timestamp_millis(), to.timestamp_millis()], |r| Ok((r.get::<_, String>(0)?, Micros(r.get::<_, i64>(1)?))))
            .map_err(|e| self.sql_err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql_err(e))
    }

    pub fn ledger_total(&self) -> Result<Micros, StoreError> {
        self.conn.query_row("SELECT COALESCE(SUM(amount), 0) FROM ledger", [], |r| r.get(0)).map(Micros).map_err(|e| self.sql_err(e))
    }
}
