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
//! Owns the events' and snapshots' SQL; knows nothing of what events mean.

use rusqlite::{params, OptionalExtension};

use super::db::{at_text, Store, StoreError};
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
        // Only a schema-6 log is ever written: an older one is brought up to it when resumed.
        let frame = packed.as_ref().map(|(frame, _)| frame.as_slice());
        self.conn
            .prepare_cached("INSERT INTO events (seq, at, at_ms, kind, body, packed) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .and_then(|mut stmt| stmt.execute(params![seq, text_unless_whole_millis(at), at.timestamp_millis(), event.kind(), body, frame]))
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
        self.conn
            .execute("INSERT OR REPLACE INTO snapshots (seq, at, room) VALUES (?1, ?2, ?3)", params![seq, at, deflated])
            .map_err(|e| self.sql_err(e))?;
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
        let row: Option<(i64, rusqlite::types::Value)> = self
            .conn
            .query_row("SELECT seq, room FROM snapshots ORDER BY seq DESC LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.sql_err(e))?;
        let Some((seq, saved)) = row else { return Ok(None) };
        let room = match saved {
            rusqlite::types::Value::Blob(deflated) => {
                let mut json = Vec::with_capacity(deflated.len() * 8);
                std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(deflated.as_slice()), &mut json)
                    .map_err(|e| self.format_err(format!("snapshot {seq}: {e}")))?;
                serde_json::from_slice(&json)
            }
            rusqlite::types::Value::Text(json) => serde_json::from_str(&json),
            other => return Err(self.format_err(format!("snapshot {seq}: a {:?}, not a room", other.data_type()))),
        };
        room.map(|room| Some((seq, room))).map_err(|e| self.format_err(format!("snapshot {seq}: {e}")))
    }

    /// Calls `f` for every event after `after_seq`, in order, reading in pages.
    pub fn for_each_event(&self, after_seq: i64, f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let sql = format!("SELECT seq, at, body, {}, at_ms FROM events WHERE seq > ?1 ORDER BY seq", self.packed_column());
        self.each_event(&sql, params![after_seq], f)
    }

    /// Calls `f` for every event of these kinds (`Event::kind`), in order;
    /// the others are not read.
    pub fn for_each_event_of_kinds(&self, kinds: &[&str], f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let kinds = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        let sql = format!("SELECT seq, at, body, {}, at_ms FROM events WHERE kind IN (SELECT value FROM json_each(?1)) ORDER BY seq", self.packed_column());
        self.each_event(&sql, params![kinds], f)
    }

    /// The time of the last event before `until` (of all, when `None`).
    pub fn last_event_before(&self, until: Option<At>) -> Result<Option<At>, StoreError> {
        let until_ms = until.map(|u| u.timestamp_millis());
        let row: Option<(String, i64)> = self
            .conn
            .query_row("SELECT at, at_ms FROM events WHERE ?1 IS NULL OR at_ms < ?1 ORDER BY seq DESC LIMIT 1", params![until_ms], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.sql_err(e))?;
        row.map(|(text, ms)| event_time(&text, ms).map_err(|e| self.format_err(e))).transpose()
    }

    /// Logs before schema 6 have no `packed` column: read it as empty.
    fn packed_column(&self) -> &'static str {
        if self.packs_telemetry { "packed" } else { "NULL" }
    }

    fn each_event(&self, sql: &str, args: impl rusqlite::Params, mut f: impl FnMut(i64, At, Event)) -> Result<u64, StoreError> {
        let path = self.path.display().to_string();
        let bad = |seq, message| StoreError::BadEvent { path: path.clone(), seq, message };
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.sql_err(e))?;
        let mut rows = stmt.query(args).map_err(|e| Self::wrap(&self.path, e))?;
        let mut telemetry: Option<Basis> = None;
        let mut count = 0;
        while let Some(row) = rows.next().map_err(|e| Self::wrap(&self.path, e))? {
            let seq: i64 = row.get(0).map_err(|e| Self::wrap(&self.path, e))?;
            let at: String = row.get(1).map_err(|e| Self::wrap(&self.path, e))?;
            let at_ms: i64 = row.get(4).map_err(|e| Self::wrap(&self.path, e))?;
            let at = event_time(&at, at_ms).map_err(|e| bad(seq, e))?;
            let frame: Option<Vec<u8>> = row.get(3).map_err(|e| Self::wrap(&self.path, e))?;
            let event = match frame {
                Some(frame) => self.decode_frame(seq, &frame, &mut telemetry)?,
                None => {
                    let body: String = row.get(2).map_err(|e| Self::wrap(&self.path, e))?;
                    serde_json::from_str(&body).map_err(|e| bad(seq, format!("body: {e}")))?
                }
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
        loop {
            let frame: Option<Option<Vec<u8>>> = self
                .conn
                .query_row("SELECT packed FROM events WHERE seq = ?1", params![at], |r| r.get(0))
                .optional()
                .map_err(|e| Self::wrap(&self.path, e))?;
            let frame = frame.flatten().ok_or_else(|| self.frame_err(seq, FrameError::Malformed("the telemetry a frame is coded against is missing")))?;
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
