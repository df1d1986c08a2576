//! Telemetry stored as compact frames. Telemetry is nearly all of a log (one
//! sample per GPU per tick: 76% of a 1,000-GPU cluster's log as JSON), yet
//! between two ticks most samples repeat and progress advances at a steady
//! rate. So a telemetry event is stored as a binary frame, most of them a
//! delta from the telemetry event before it (its *base*), with a key frame
//! (no base) every `KEY_EVERY` frames and whenever the writer has no base.
//!
//! Lossless: decoding gives back the event exactly (a utilization that is
//! not a whole number of tenths is kept as its raw bits), so a replay applies
//! the very events the engine applied and rebuilds the identical room.
//!
//! Decoding never panics on bad bytes: it returns `FrameError`.
//!
//! Owns the frame format and which frame a writer codes against
//! (`FrameBases`); knows nothing of SQL.

use std::collections::HashMap;

use crate::domain::event::GpuSample;
use crate::domain::ids::{GpuRef, JobId, NodeId};
use crate::domain::units::Mib;

/// A telemetry event's contents: GPU samples, and each job's progress.
pub type Telemetry = (Vec<GpuSample>, Vec<(JobId, u64)>);

/// A key frame at least this often, so that reading from the middle of a log
/// (after a snapshot) decodes at most this many frames before its first one
/// (one hour of 30-second ticks).
pub const KEY_EVERY: u32 = 120;

const KEY: u8 = 1;
const DELTA: u8 = 2;

/// A frame's utilization code: its raw bits follow.
const UTIL_RAW: u64 = 0;
/// Codes from here on are a change in tenths of a percent (zigzag), offset by this.
const UTIL_TENTHS: u64 = 1;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("telemetry frame: {0}")]
    Malformed(&'static str),
    #[error("telemetry frame: a delta from event {wanted}, but the telemetry before it is {had:?}")]
    WrongBase { wanted: i64, had: Option<i64> },
}

/// What a frame is coded against: the telemetry event `seq` as decoded, with
/// each GPU's last memory move and each job's last step and pace (what the
/// next are predicted from).
#[derive(Clone, Debug, Default)]
pub struct Basis {
    pub seq: i64,
    /// Frames since the last key frame (0 for a key frame).
    pub since_key: u32,
    gpus: Vec<GpuSample>,
    /// How far each GPU's memory moved in this frame (its trend).
    mem_moves: Vec<i64>,
    progress: Vec<Progressed>,
}

/// A job's progress in a frame, and how far it moved since the frame before.
#[derive(Clone, Debug)]
struct Progressed {
    job: JobId,
    step: u64,
    moved: i64,
}

impl Progressed {
    /// The next step if the job keeps its pace.
    fn predicted(&self) -> u64 {
        self.step.wrapping_add(self.moved as u64)
    }
}

/// For each job of `now`, the base's entry it continues, if any: the
/// base's next one when it is the same job (nearly always), else the job's
/// place further on in the base's list; none for a job new to the list or
/// one that moved back in it. The edits a frame stores are this match, so
/// encoder, decoder and the next basis all agree on it.
fn match_jobs(before: &[Progressed], now: &[(JobId, u64)]) -> Vec<Option<usize>> {
    let mut position: Option<HashMap<JobId, usize>> = None;
    let mut cursor = 0usize;
    now.iter()
        .map(|(job, _)| {
            let at = if before.get(cursor).is_some_and(|b| b.job == *job) {
                Some(cursor)
            } else {
                let position = position.get_or_insert_with(|| before.iter().enumerate().map(|(i, b)| (b.job, i)).collect());
                position.get(job).copied().filter(|&at| at >= cursor)
            };
            if let Some(at) = at {
                cursor = at + 1;
            }
            at
        })
        .collect()
}

impl Basis {
    /// The basis after frame `seq` decoded (or encoded) to these values.
    pub fn after(previous: Option<&Basis>, seq: i64, key: bool, gpus: &[GpuSample], progress: &[(JobId, u64)]) -> Basis {
        let before = previous.map_or(&[][..], |p| &p.progress);
        let progress = match_jobs(before, progress)
            .into_iter()
            .zip(progress)
            .map(|(at, &(job, step))| Progressed { job, step, moved: at.map_or(0, |at| step.wrapping_sub(before[at].step) as i64) })
            .collect();
        let mem_moves = match previous {
            Some(p) if same_gpus(&p.gpus, gpus) => gpus.iter().zip(&p.gpus).map(|(now, before)| i64::from(now.2.0) - i64::from(before.2.0)).collect(),
            Some(p) => {
                let slots = p.slots();
                gpus.iter().map(|now| slots.get(&now.0).map_or(0, |&j| i64::from(now.2.0) - i64::from(p.gpus[j].2.0))).collect()
            }
            None => vec![0; gpus.len()],
        };
        Basis { seq, since_key: if key { 0 } else { previous.map_or(0, |p| p.since_key + 1) }, gpus: gpus.to_vec(), mem_moves, progress }
    }

    /// Where each GPU is in the base's list: needed only when a frame's list
    /// differs from its base's (a node came or went), so built only then.
    fn slots(&self) -> HashMap<GpuRef, usize> {
        self.gpus.iter().enumerate().map(|(i, s)| (s.0, i)).collect()
    }
}

/// What the next telemetry frame is coded against: the last frame committed,
/// and the last one written in the open batch (which a rollback discards).
#[derive(Default)]
pub(super) struct FrameBases {
    committed: Option<Basis>,
    open: Option<Basis>,
}

impl FrameBases {
    /// The base for the next frame, or none when it must be a key frame.
    pub(super) fn next(&self) -> Option<&Basis> {
        self.open.as_ref().or(self.committed.as_ref()).filter(|b| b.since_key + 1 < KEY_EVERY)
    }

    /// Frame `basis.seq` was written in the open batch.
    pub(super) fn wrote(&mut self, basis: Basis) {
        self.open = Some(basis);
    }

    /// The open batch is on disk: its last frame is the base from now on.
    pub(super) fn committed(&mut self) {
        if let Some(open) = self.open.take() {
            self.committed = Some(open);
        }
    }

    /// The open batch is gone: its frames never happened.
    pub(super) fn rolled_back(&mut self) {
        self.open = None;
    }
}

/// Whether the frame's header says it is a key frame, and if not, the
/// sequence number of its base.
pub fn base_of(frame: &[u8], seq: i64) -> Result<Option<i64>, FrameError> {
    let mut r = Reader { bytes: frame, at: 0 };
    match r.byte()? {
        KEY => Ok(None),
        DELTA => {
            let back = r.varint()? as i64;
            if back <= 0 || back >= seq {
                return Err(FrameError::Malformed("base out of range"));
            }
            Ok(Some(seq - back))
        }
        _ => Err(FrameError::Malformed("unknown frame type")),
    }
}

/// Encodes telemetry event `seq` against `base` (a key frame when `None`).
pub fn encode(base: Option<&Basis>, seq: i64, gpus: &[GpuSample], progress: &[(JobId, u64)]) -> Vec<u8> {
    let mut w = Vec::with_capacity(64 + gpus.len());
    match base {
        None => w.push(KEY),
        Some(b) => {
            w.push(DELTA);
            put_varint(&mut w, (seq - b.seq) as u64);
        }
    }
    encode_gpus(&mut w, base, gpus);
    encode_progress(&mut w, base, progress);
    w
}

/// Decodes telemetry event `seq`; `base` must be the basis its header names.
pub fn decode(base: Option<&Basis>, seq: i64, frame: &[u8]) -> Result<Telemetry, FrameError> {
    let wanted = base_of(frame, seq)?;
    let base = match (wanted, base) {
        (None, _) => None,
        (Some(wanted), Some(b)) if b.seq == wanted => Some(b),
        (Some(wanted), had) => return Err(FrameError::WrongBase { wanted, had: had.map(|b| b.seq) }),
    };
    let mut r = Reader { bytes: frame, at: 1 };
    if base.is_some() {
        r.varint()?;
    }
    let gpus = decode_gpus(&mut r, base)?;
    let progress = decode_progress(&mut r, base)?;
    if r.at != frame.len() {
        return Err(FrameError::Malformed("bytes after the end"));
    }
    Ok((gpus, progress))
}

// ---- GPUs: the list of GPUs, then runs of changed samples ----
//
// A run is consecutive samples that changed since the base and share one
// value (a job's GPUs report alike): one byte for where it starts and how
// long it is, the utilization as its change in tenths of a percent from the
// base's first sample, and the memory as its miss from that sample's trend
// (its last move repeated). Most runs take three or four bytes.

/// Run lengths up to this fit the run's first byte with its gap.
const SHORT_RUN: usize = 8;

fn same_gpus(a: &[GpuSample], b: &[GpuSample]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0)
}

/// What a sample of this frame was in the base, and how far its memory moved
/// then: `None` for a GPU new to the frame (coded against zero).
fn before_each<'b>(base: Option<&'b Basis>, gpus: &[GpuSample], same_list: bool) -> Vec<Option<(&'b GpuSample, i64)>> {
    let Some(b) = base else { return vec![None; gpus.len()] };
    if same_list {
        return b.gpus.iter().zip(&b.mem_moves).map(|(s, m)| Some((s, *m))).collect();
    }
    let slots = b.slots();
    gpus.iter().map(|s| slots.get(&s.0).map(|&j| (&b.gpus[j], b.mem_moves[j]))).collect()
}

fn encode_gpus(w: &mut Vec<u8>, base: Option<&Basis>, gpus: &[GpuSample]) {
    let same_list = base.is_some_and(|b| same_gpus(&b.gpus, gpus));
    if same_list {
        w.push(0);
    } else {
        w.push(1);
        put_varint(w, gpus.len() as u64);
        let mut node = 0i64;
        for s in gpus {
            put_varint(w, zigzag(i64::from(s.0.node.0) - node));
            node = i64::from(s.0.node.0);
            w.push(s.0.index);
        }
    }
    let before = before_each(base, gpus, same_list);
    // Runs of consecutive changed samples that share one value: (first, length).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, s) in gpus.iter().enumerate() {
        if before[i].is_some_and(|(p, _)| same_value(p, s)) {
            continue;
        }
        match runs.last_mut() {
            Some((first, len)) if *first + *len == i && same_value(&gpus[*first], s) => *len += 1,
            _ => runs.push((i, 1)),
        }
    }
    put_varint(w, runs.len() as u64);
    let mut next = 0;
    for (first, len) in runs {
        let gap = (first - next) as u64;
        put_varint(w, gap * SHORT_RUN as u64 + (len - 1).min(SHORT_RUN - 1) as u64);
        if len >= SHORT_RUN {
            put_varint(w, (len - SHORT_RUN) as u64);
        }
        let s = &gpus[first];
        let (util_before, mem_predicted) = prediction(before[first]);
        put_util(w, s.1, util_before);
        put_varint(w, zigzag(i64::from(s.2.0) - mem_predicted));
        next = first + len;
    }
}

fn decode_gpus(r: &mut Reader, base: Option<&Basis>) -> Result<Vec<GpuSample>, FrameError> {
    let (mut gpus, same_list): (Vec<GpuSample>, bool) = match r.byte()? {
        0 => (base.ok_or(FrameError::Malformed("a key frame cannot repeat a GPU list"))?.gpus.clone(), true),
        1 => {
            let n = r.count(2)?;
            let mut list = Vec::with_capacity(n);
            let mut node = 0i64;
            for _ in 0..n {
                node += unzigzag(r.varint()?);
                let node = u32::try_from(node).map_err(|_| FrameError::Malformed("node id out of range"))?;
                list.push(GpuSample(GpuRef { node: NodeId(node), index: r.byte()? }, 0.0, Mib(0)));
            }
            (list, false)
        }
        _ => return Err(FrameError::Malformed("unknown GPU list form")),
    };
    let before = before_each(base, &gpus, same_list);
    // A GPU the run does not touch keeps its value from the base.
    if !same_list {
        for (s, b) in gpus.iter_mut().zip(&before) {
            if let Some((p, _)) = b {
                s.1 = p.1;
                s.2 = p.2;
            }
        }
    }
    let runs = r.count(3)?;
    let mut next = 0usize;
    for _ in 0..runs {
        let head = r.varint()?;
        let gap = usize::try_from(head / SHORT_RUN as u64).map_err(|_| FrameError::Malformed("run out of range"))?;
        let mut len = (head % SHORT_RUN as u64) as usize + 1;
        if len == SHORT_RUN {
            len = len.checked_add(r.varint_usize()?).ok_or(FrameError::Malformed("run out of range"))?;
        }
        let first = next.checked_add(gap).ok_or(FrameError::Malformed("run out of range"))?;
        let end = first.checked_add(len).filter(|&end| end <= gpus.len()).ok_or(FrameError::Malformed("run past the last GPU"))?;
        let (util_before, mem_predicted) = prediction(before[first]);
        let util = r.util(util_before)?;
        let mem = mem_predicted.checked_add(unzigzag(r.varint()?)).ok_or(FrameError::Malformed("memory out of range"))?;
        let mem = Mib(u32::try_from(mem).map_err(|_| FrameError::Malformed("memory out of range"))?);
        for s in &mut gpus[first..end] {
            s.1 = util;
            s.2 = mem;
        }
        next = end;
    }
    Ok(gpus)
}

/// What a changed sample is coded against: the base's utilization in
/// tenths (0 where it was not whole tenths, or the GPU is new), and its
/// memory moved once more as it last moved.
fn prediction(before: Option<(&GpuSample, i64)>) -> (u64, i64) {
    match before {
        Some((p, moved)) => (exact_tenths(p.1).unwrap_or(0), i64::from(p.2.0) + moved),
        None => (0, 0),
    }
}

fn same_value(a: &GpuSample, b: &GpuSample) -> bool {
    a.1.to_bits() == b.1.to_bits() && a.2 == b.2
}

/// Utilization as its change in whole tenths of a percent from `before`
/// where that is exact (what every source reports), its raw bits otherwise.
fn put_util(w: &mut Vec<u8>, util: f32, before: u64) {
    match exact_tenths(util) {
        Some(tenths) => put_varint(w, zigzag(tenths as i64 - before as i64) + UTIL_TENTHS),
        None => {
            put_varint(w, UTIL_RAW);
            w.extend_from_slice(&util.to_bits().to_le_bytes());
        }
    }
}

/// The utilization as whole tenths, when it is exactly that many.
fn exact_tenths(util: f32) -> Option<u64> {
    let tenths = (f64::from(util) * 10.0).round();
    ((0.0..=1e6).contains(&tenths) && tenths_to_util(tenths as u64).to_bits() == util.to_bits()).then_some(tenths as u64)
}

fn tenths_to_util(tenths: u64) -> f32 {
    tenths as f32 / 10.0
}

// ---- progress: the job list as edits of the base's, steps as misses of a prediction ----

/// Edits turning the base's job list into this frame's, in order.
const COPY: u64 = 0;
const SKIP: u64 = 1;
const INSERT: u64 = 2;

fn encode_progress(w: &mut Vec<u8>, base: Option<&Basis>, progress: &[(JobId, u64)]) {
    let before = base.map_or(&[][..], |b| &b.progress);
    let matches = match_jobs(before, progress);
    let mut edits: Vec<(u64, u64)> = Vec::new();
    let mut push = |op: u64, n: u64| match edits.last_mut() {
        Some((last, count)) if *last == op && op != INSERT => *count += n,
        _ => edits.push((op, n)),
    };
    let mut cursor = 0usize;
    for (&(job, _), at) in progress.iter().zip(&matches) {
        match *at {
            Some(at) => {
                if at > cursor {
                    push(SKIP, (at - cursor) as u64);
                }
                push(COPY, 1);
                cursor = at + 1;
            }
            None => push(INSERT, job.0),
        }
    }
    put_varint(w, edits.len() as u64);
    for (op, n) in edits {
        if op == INSERT {
            // A job id may use all 64 bits: it follows the edit on its own.
            put_varint(w, op);
            put_varint(w, n);
        } else {
            put_varint(w, (n << 2) | op);
        }
    }
    // Each step against its prediction (the last step plus the last move):
    // misses of -1, 0 and +1 take two bits, others an escape and a varint.
    let mut bits = BitWriter::default();
    let mut escapes = Vec::new();
    for (&(_, step), at) in progress.iter().zip(&matches) {
        match at {
            Some(at) => match step.wrapping_sub(before[*at].predicted()) as i64 {
                0 => bits.push(0),
                1 => bits.push(1),
                -1 => bits.push(2),
                miss => {
                    bits.push(3);
                    put_varint(&mut escapes, zigzag(miss));
                }
            },
            None => put_varint(&mut escapes, step),
        }
    }
    w.extend_from_slice(&bits.bytes);
    w.extend_from_slice(&escapes);
}

fn decode_progress(r: &mut Reader, base: Option<&Basis>) -> Result<Vec<(JobId, u64)>, FrameError> {
    let before = base.map_or(&[][..], |b| &b.progress);
    let edits = r.count(1)?;
    // Each job, and the base's entry it continues.
    let mut jobs: Vec<(JobId, Option<usize>)> = Vec::new();
    let mut cursor = 0usize;
    for _ in 0..edits {
        let edit = r.varint()?;
        let n = edit >> 2;
        match edit & 3 {
            COPY => {
                let end = usize::try_from(n).ok().and_then(|n| cursor.checked_add(n)).filter(|&e| e <= before.len());
                let end = end.ok_or(FrameError::Malformed("copies past the base's jobs"))?;
                jobs.extend((cursor..end).map(|at| (before[at].job, Some(at))));
                cursor = end;
            }
            SKIP => {
                let end = usize::try_from(n).ok().and_then(|n| cursor.checked_add(n)).filter(|&e| e <= before.len());
                cursor = end.ok_or(FrameError::Malformed("skips past the base's jobs"))?;
            }
            INSERT => jobs.push((JobId(r.varint()?), None)),
            _ => return Err(FrameError::Malformed("unknown progress edit")),
        }
    }
    let coded = jobs.iter().filter(|(_, at)| at.is_some()).count();
    let bit_bytes = r.take(coded.div_ceil(4))?.to_vec();
    let mut codes = (0..coded).map(|i| (bit_bytes[i / 4] >> ((i % 4) * 2)) & 3);
    let mut progress = Vec::with_capacity(jobs.len());
    for (job, at) in jobs {
        let step = match at {
            Some(at) => {
                let p = before[at].predicted();
                match codes.next() {
                    Some(0) => p,
                    Some(1) => p.wrapping_add(1),
                    Some(2) => p.wrapping_sub(1),
                    _ => p.wrapping_add(unzigzag(r.varint()?) as u64),
                }
            }
            None => r.varint()?,
        };
        progress.push((job, step));
    }
    Ok(progress)
}

#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    used: usize,
}

impl BitWriter {
    /// Two bits, four to a byte, low bits first.
    fn push(&mut self, code: u8) {
        if self.used.is_multiple_of(4) {
            self.bytes.push(0);
        }
        let last = self.bytes.len() - 1;
        self.bytes[last] |= (code & 3) << ((self.used % 4) * 2);
        self.used += 1;
    }
}

// ---- bytes ----

fn put_varint(w: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        w.push((n as u8) | 0x80);
        n >>= 7;
    }
    w.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, FrameError> {
        let b = *self.bytes.get(self.at).ok_or(FrameError::Malformed("cut short"))?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], FrameError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(FrameError::Malformed("cut short"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn varint(&mut self) -> Result<u64, FrameError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(FrameError::Malformed("varint too long"))
    }

    fn varint_usize(&mut self) -> Result<usize, FrameError> {
        usize::try_from(self.varint()?).map_err(|_| FrameError::Malformed("count out of range"))
    }

    /// A count of items each taking at least `min_bytes`: no more than the
    /// rest of the frame could hold, so bad bytes never allocate much.
    fn count(&mut self, min_bytes: usize) -> Result<usize, FrameError> {
        let n = self.varint_usize()?;
        if n.saturating_mul(min_bytes) > self.bytes.len() - self.at {
            return Err(FrameError::Malformed("a count larger than the frame"));
        }
        Ok(n)
    }

    fn util(&mut self, before: u64) -> Result<f32, FrameError> {
        match self.varint()? {
            UTIL_RAW => {
                let raw = self.take(4)?;
                Ok(f32::from_bits(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]])))
            }
            code => {
                let tenths = (before as i64).checked_add(unzigzag(code - UTIL_TENTHS)).filter(|t| (0..=1_000_000).contains(t));
                Ok(tenths_to_util(tenths.ok_or(FrameError::Malformed("utilization out of range"))? as u64))
            }
        }
    }
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
