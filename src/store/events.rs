//! The `events` and `snapshots` tables: appending events, reading them back
//! in order, and the room saved every so often.
//!
//! From schema 6 a telemetry event is kept as a binary frame in `packed`
//! (its `body` is empty; see `frames`), every other event as JSON in `body`.
//! A reader decodes a frame against the telemetry before it, fetching that
//! chain back to its key frame when it starts in the middle (after a
//! snapshot); a writer codes each frame against the last one it wrote that
//! is, or will be, committed with it.
//!
//! From schema 7 each event row carries `sum`, a CRC-32 of its columns
//! (`checksum`), checked on every read: a flipped bit in a body or a frame
//! is named by its event, never replayed as a slightly different run.
//!
//! Owns the events' and snapshots' SQL; knows nothing of what events mean.

use rusqlite::{OptionalExtension, params};

use super::db::{Store, StoreError, at_text};
use super::frames::{self, Basis, FrameError};
use crate::domain::event::Event;
use crate::domain::units::At;
use crate::room::Room;

impl Store {
    fn format_err(&self, message: String) -> StoreError {
        StoreError::Format { path: self.path.display().to_string(), message }
    }

    fn frame_err(&self, seq: i64, e: FrameError) -> StoreError {
        StoreError::BadEvent { path: self.path.display().to_string(), seq, message: e.to_string() }
    }

    /// Appends one event (inside the open transaction, if any) and returns its sequence number.
    pub fn append(&mut self, at: At, event: &Event) -> Result<i64, StoreError> {
        let seq = self.next_seq;
        let (body, packed) = match event {
            Event::Telemetry { gpus, progress } => {
                let base = self.frames.next();
                let frame = frames::encode(base, seq, gpus, progress);
                let basis = Basis::after(base, seq, base.is_none(), gpus, progress);
                (String::new(), Some((frame, basis)))
            }
            _ => (serde_json::to_string(event).map_err(|e| self.format_err(e.to_string()))?, None),
        };
        // Only a current log is ever written: an older one is brought up to it when resumed.
        let frame = packed.as_ref().map(|(frame, _)| frame.as_slice());
        let row = Row { seq, at: text_unless_whole_millis(at), at_ms: at.timestamp_millis(), kind: event.kind(), body: body.as_bytes(), packed: frame };
        let sum = self.sums_events.then(|| row.checksum());
        self.conn
            .prepare_cached("INSERT INTO events (seq, at, at_ms, kind, body, packed, sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
            .and_then(|mut stmt| stmt.execute(params![seq, row.at, row.at_ms, row.kind, body, frame, sum]))
            .map_err(|e| self.sql_err(e))?;
        if let Some((_, basis)) = packed {
            self.frames.wrote(basis);
            if !self.in_tx {
                self.frames.committed();
            }
        }
        self.next_seq += 1;
        Ok(seq)
    }

    /// Saves the whole room as of event `seq`: its JSON, deflated (from
    /// schema 6; an older log's snapshots are JSON text, read as such).
    /// Returns the JSON's length, what the next one will cost to make.
    pub fn snapshot(&mut self, seq: i64, room: &Room) -> Result<usize, StoreError> {
        let json = serde_json::to_vec(room).map_err(|e| self.format_err(e.to_string()))?;
        // Whole, not as serde writes it: deflating its many small writes one by one is slow.
        let mut deflated = flate2::write::ZlibEncoder::new(Vec::with_capacity(json.len() / 8), flate2::Compression::fast());
        let deflated = std::io::Write::write_all(&mut deflated, &json).and_then(|_| deflated.finish()).map_err(|e| self.format_err(e.to_string()))?;
        let at = room.now().map(at_text).unwrap_or_default();
        self.conn.execute("INSERT OR REPLACE INTO snapshots (seq, at, room) VALUES (?1, ?2, ?3)", params![seq, at, deflated]).map_err(|e| self.sql_err(e))?;
        // Only the newest snapshot is ever read, and the log rebuilds any
        // other; keeping every one grew a simulated month's log by gigabytes
        // (the room holds every job it has seen). The one before stays too.
        self.conn
            .execute("DELETE FROM snapshots WHERE seq < (SELECT MIN(seq) FROM (SELECT seq FROM snapshots ORDER BY seq DESC LIMIT 2))", [])
            .map_err(|e| self.sql_err(e))?;
        Ok(json.len())
    }

    /// When the first event happened, if there is one.
    pub fn first_event_at(&self) -> Result<Option<At>, StoreError> {
        let row: Option<(String, i64)> = self
            .conn
            .query_row("SELECT at, at_ms FROM events ORDER BY seq LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.sql_err(e))?;
        row.map(|(text, ms)| event_time(&text, ms).map_err(|e| self.format_err(format!("first event time: {e}")))).transpose()
    }

    pub fn event_count(&self) -> Result<i64, StoreError> {
        self.conn.query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0)).map_err(|e| self.sql_err(e))
    }

    /// The latest snapshot and the sequence number it covers.
    pub fn latest_snapshot(&self) -> Result<Option<(i64, Room)>, StoreError> {
        let Some(&seq) = self.snapshot_seqs()?.last() else { return Ok(None) };
        let json = self.snapshot_json(seq)?;
        serde_json::from_slice(&json).map(|room| Some((seq, room))).map_err(|e| self.format_err(format!("snapshot {seq}: {e}")))
    }

    /// The events the kept snapshots were taken after, oldest first.
    pub fn snapshot_seqs(&self) -> Result<Vec<i64>, StoreError> {
        let mut stmt = self.conn.prepare("SELECT seq FROM snapshots ORDER BY seq").map_err(|e| self.sql_err(e))?;
        stmt.query_map([], |r| r.get(0)).and_then(|rows| rows.collect()).map_err(|e| Self::wrap(&self.path, e))
    }

    /// The room's JSON as the engine saved it after event `seq` (inflated).
    pub fn snapshot_json(&self, seq: i64) -> Result<Vec<u8>, StoreError> {
        let saved: rusqlite::types::Value =
            self.conn.query_row("SELECT room FROM snapshots WHERE seq = ?1", params![seq], |r| r.get(0)).map_err(|e| Self::wrap(&self.path, e))?;
        match saved {
            rusqlite::types::Value::Blob(deflated) => {
                let mut json = Vec::with_capacity(deflated.len() * 8);
                std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(deflated.as_slice()), &mut json)
                    .map_err(|e| self.format_err(format!("snapshot {seq}: {e}")))?;
                Ok(json)
            }
            rusqlite::types::Value::Text(json) => Ok(json.into_bytes()),
            other => Err(self.format_err(format!("snapshot {seq}: a {:?}, not a room", other.data_type()))),
        }
    }

    /// Calls `f` for every event after `after_seq`, in order, reading in pages.
    pub fn for_each_event(&self, after_seq: i64, f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let sql = format!("SELECT {} FROM events WHERE seq > ?1 ORDER BY seq", self.row_columns());
        self.each_event(&sql, params![after_seq], f)
    }

    /// Calls `f` for every event after `after_seq` up to `through_seq`, in order.
    pub fn for_each_event_through(&self, after_seq: i64, through_seq: i64, f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let sql = format!("SELECT {} FROM events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq", self.row_columns());
        self.each_event(&sql, params![after_seq, through_seq], f)
    }

    /// Calls `f` for every event of these kinds (`Event::kind`), in order;
    /// the others are not read.
    pub fn for_each_event_of_kinds(&self, kinds: &[&str], f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let kinds = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        let sql = format!("SELECT {} FROM events WHERE kind IN (SELECT value FROM json_each(?1)) ORDER BY seq", self.row_columns());
        self.each_event(&sql, params![kinds], f)
    }

    /// The time of the last event before `until` (of all, when `None`).
    pub fn last_event_before(&self, until: Option<At>) -> Result<Option<At>, StoreError> {
        let until_ms = until.map(|u| u.timestamp_millis());
        let row: Option<(String, i64)> = self
            .conn
            .query_row("SELECT at, at_ms FROM events WHERE ?1 IS NULL OR at_ms < ?1 ORDER BY seq DESC LIMIT 1", params![until_ms], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(|e| self.sql_err(e))?;
        row.map(|(text, ms)| event_time(&text, ms).map_err(|e| self.format_err(e))).transpose()
    }

    /// An event row's columns in `RowRead`'s order. Logs before schema 6
    /// have no `packed` column, before 7 no `sum`: read them as empty.
    fn row_columns(&self) -> String {
        let packed = if self.packs_telemetry { "packed" } else { "NULL" };
        let sum = if self.sums_events { "sum" } else { "NULL" };
        format!("seq, at, at_ms, kind, body, {packed}, {sum}")
    }

    /// One row as `row_columns` selects it, its checksum verified.
    fn read_row(&self, row: &rusqlite::Row<'_>) -> Result<RowRead, StoreError> {
        let get = |e| Self::wrap(&self.path, e);
        let read = RowRead {
            seq: row.get(0).map_err(get)?,
            at: row.get(1).map_err(get)?,
            at_ms: row.get(2).map_err(get)?,
            kind: row.get(3).map_err(get)?,
            // As bytes: a damaged body need not be UTF-8, and is named by its checksum.
            body: match row.get_ref(4).map_err(get)? {
                rusqlite::types::ValueRef::Text(bytes) | rusqlite::types::ValueRef::Blob(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            },
            packed: row.get(5).map_err(get)?,
        };
        let sum: Option<i64> = row.get(6).map_err(get)?;
        let found =
            Row { seq: read.seq, at: read.at.clone(), at_ms: read.at_ms, kind: &read.kind, body: &read.body, packed: read.packed.as_deref() }.checksum();
        match sum {
            Some(sum) if sum != found => Err(StoreError::BadEvent {
                path: self.path.display().to_string(),
                seq: read.seq,
                message: format!(
                    "its checksum does not match ({sum:08x} recorded, {found:08x} now): the row was changed or damaged after the engine wrote it; \
                     nothing after it is replayed"
                ),
            }),
            // A row of an older log, or a file whose checksums were removed
            // by hand: it is read unchecked, as before schema 7.
            _ => Ok(read),
        }
    }

    fn each_event(&self, sql: &str, args: impl rusqlite::Params, mut f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let path = self.path.display().to_string();
        let bad = |seq, message| StoreError::BadEvent { path: path.clone(), seq, message };
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.sql_err(e))?;
        let mut rows = stmt.query(args).map_err(|e| Self::wrap(&self.path, e))?;
        let mut telemetry: Option<Basis> = None;
        let mut count = 0;
        while let Some(row) = rows.next().map_err(|e| Self::wrap(&self.path, e))? {
            let RowRead { seq, at, at_ms, body, packed, .. } = self.read_row(row)?;
            let at = event_time(&at, at_ms).map_err(|e| bad(seq, e))?;
            let event = match packed {
                Some(frame) => self.decode_frame(seq, &frame, &mut telemetry)?,
                None => serde_json::from_slice(&body).map_err(|e| bad(seq, format!("body: {e}")))?,
            };
            f(seq, at, event);
            count += 1;
        }
        Ok(count)
    }

    /// Decodes frame `seq`, `last` being the telemetry read before it (if
    /// any), which it then becomes.
    fn decode_frame(&self, seq: i64, frame: &[u8], last: &mut Option<Basis>) -> Result<Event, StoreError> {
        let wanted = frames::base_of(frame, seq).map_err(|e| self.frame_err(seq, e))?;
        if let Some(wanted) = wanted
            && last.as_ref().map(|b| b.seq) != Some(wanted)
        {
            *last = Some(self.basis_at(wanted)?);
        }
        let base = wanted.and(last.as_ref());
        let (gpus, progress) = frames::decode(base, seq, frame).map_err(|e| self.frame_err(seq, e))?;
        *last = Some(Basis::after(base, seq, wanted.is_none(), &gpus, &progress));
        Ok(Event::Telemetry { gpus, progress })
    }

    /// The basis after telemetry event `seq`: its chain of frames read back
    /// to a key frame (at most `KEY_EVERY` of them), then decoded forward.
    fn basis_at(&self, seq: i64) -> Result<Basis, StoreError> {
        let mut chain = Vec::new();
        let mut at = seq;
        let sql = format!("SELECT {} FROM events WHERE seq = ?1", self.row_columns());
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| Self::wrap(&self.path, e))?;
        loop {
            let mut rows = stmt.query(params![at]).map_err(|e| Self::wrap(&self.path, e))?;
            let frame = match rows.next().map_err(|e| Self::wrap(&self.path, e))? {
                Some(row) => self.read_row(row)?.packed,
                None => None,
            };
            let frame = frame.ok_or_else(|| self.frame_err(seq, FrameError::Malformed("the telemetry a frame is coded against is missing")))?;
            let base = frames::base_of(&frame, at).map_err(|e| self.frame_err(at, e))?;
            chain.push((at, frame));
            match base {
                Some(base) => at = base,
                None => break,
            }
        }
        // The chain ends at its key frame; each frame after is coded against the one before.
        let mut basis: Option<Basis> = None;
        for (at, frame) in chain.iter().rev() {
            let (gpus, progress) = frames::decode(basis.as_ref(), *at, frame).map_err(|e| self.frame_err(*at, e))?;
            basis = Some(Basis::after(basis.as_ref(), *at, basis.is_none(), &gpus, &progress));
        }
        basis.ok_or_else(|| self.frame_err(seq, FrameError::Malformed("no telemetry frame")))
    }
}

/// An event row's columns as they are written and checksummed.
struct Row<'a> {
    seq: i64,
    at: String,
    at_ms: i64,
    kind: &'a str,
    body: &'a [u8],
    packed: Option<&'a [u8]>,
}

/// An event row as read, before its body or frame is decoded.
struct RowRead {
    seq: i64,
    at: String,
    at_ms: i64,
    kind: String,
    body: Vec<u8>,
    packed: Option<Vec<u8>>,
}

impl Row<'_> {
    /// CRC-32 (crc32fast, already in the tree for the snapshots' deflate) of
    /// every column, each with its length, so no two rows share a text. It
    /// catches every single-bit flip and every burst up to 32 bits; what it
    /// guards against is damage and a casual edit, not someone who may write
    /// the file (they could recompute it), which is why only the owner may.
    fn checksum(&self) -> i64 {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.seq.to_le_bytes());
        crc.update(&self.at_ms.to_le_bytes());
        for part in [self.at.as_bytes(), self.kind.as_bytes(), self.body] {
            crc.update(&(part.len() as u64).to_le_bytes());
            crc.update(part);
        }
        match self.packed {
            Some(frame) => {
                crc.update(&[1]);
                crc.update(&(frame.len() as u64).to_le_bytes());
                crc.update(frame);
            }
            None => crc.update(&[0]),
        }
        i64::from(crc.finalize())
    }
}

/// From schema 6 an event at a whole millisecond (every simulated one) keeps
/// its time as `at_ms` alone, with `at` empty; any other keeps it as text
/// too, to the nanosecond. (22 of a simulated event's ~70 bytes of columns.)
fn text_unless_whole_millis(at: At) -> String {
    if at.timestamp_subsec_nanos().is_multiple_of(1_000_000) { String::new() } else { at_text(at) }
}

fn event_time(text: &str, at_ms: i64) -> Result<At, String> {
    if text.is_empty() {
        return chrono::DateTime::from_timestamp_millis(at_ms).ok_or_else(|| format!("time {at_ms} ms out of range"));
    }
    chrono::DateTime::parse_from_rfc3339(text).map(|at| at.to_utc()).map_err(|e| format!("time {text:?}: {e}"))
}
