//! What passes over the engine's socket (`LOG.sock`) between the engine and
//! the consoles, walls and `gpuroom act` attached to it: frames of a 4-byte
//! big-endian length and that many bytes of JSON.
//!
//! A client opens with `Ask::Hello` (what it claims to be, whether it wants
//! views); the engine answers `Tell::Welcome` with the actor it recorded for
//! the connection's OS user (from the kernel, `SO_PEERCRED`), then streams
//! the newest view about once a second to those who asked for views, and
//! `Tell::Answer` for each command once its batch is on disk. A command
//! carries the client's ticket; the engine files it under the peer's uid,
//! so one user's ticket can never stand for another's, and a command sent
//! again under the same ticket (after a reconnect) is answered, not applied
//! twice.
//!
//! Owns the message shapes and the framing; the engine's side is `serve`,
//! the console's `client`.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::domain::event::{Action, Actor};
use crate::store::{CommandState, LeaseHolder};

/// The protocol this build speaks; a Hello of another is told goodbye.
pub const PROTOCOL: u32 = 1;
/// The most a client may send in one frame (a command is a few hundred bytes).
pub const MAX_ASK_BYTES: usize = 64 * 1024;
/// The most a client accepts in one frame (a view of 10,000 GPUs is a few MB).
pub const MAX_TELL_BYTES: usize = 512 * 1024 * 1024;

/// From a client to the engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Ask {
    /// The first frame: what the client says it is (the engine records the
    /// kernel's word for the user, this beside it), and whether it draws views.
    Hello { protocol: u32, claimed: Actor, views: bool },
    /// An operator action under the client's ticket (letters, digits, `.`,
    /// `_`, `-`; at most 64).
    Command { ticket: String, action: Action },
    /// How a command sent earlier (perhaps to an engine since replaced) ended.
    State { ticket: String },
}

/// From the engine to a client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Tell {
    /// The handshake's answer: which engine this is, whose log it writes,
    /// and the actor it records this connection's commands under.
    Welcome { engine: LeaseHolder, owner: String, actor: Actor },
    /// The newest view, current to event `seq`, published at `published_ms`.
    View { seq: i64, published_ms: i64, view: Box<crate::room::View> },
    /// What came of a command (`None`: no command under that ticket).
    Answer { ticket: String, state: Option<CommandState> },
    /// The engine closes this connection, and why.
    Goodbye { reason: String },
}

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("a frame over 4 GiB"))?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// A message as one frame's bytes.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// A view frame built around JSON already serialized (the engine serializes
/// each published view once, for the log and for every client).
pub fn view_frame(seq: i64, published_ms: i64, view_json: &str) -> Vec<u8> {
    let body = format!("{{\"View\":{{\"seq\":{seq},\"published_ms\":{published_ms},\"view\":{view_json}}}}}");
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body.as_bytes());
    frame
}

/// What reading a frame found.
#[derive(Debug)]
pub enum Frame {
    Body(Vec<u8>),
    /// The other side closed the connection between frames.
    Closed,
    /// A frame longer than allowed: the stream cannot be resynchronised.
    TooLong(usize),
}

/// Reads one frame of at most `max` bytes.
pub fn read_frame(r: &mut impl Read, max: usize) -> io::Result<Frame> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Frame::Closed),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Ok(Frame::TooLong(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Frame::Body(body))
}

/// Whether a client's ticket is one the engine files (plain, short).
pub fn ticket_ok(ticket: &str) -> bool {
    !ticket.is_empty() && ticket.len() <= 64 && ticket.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_lengths_are_named() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"{\"State\":{\"ticket\":\"t1\"}}").unwrap();
        let mut r = buf.as_slice();
        let Frame::Body(body) = read_frame(&mut r, 1024).unwrap() else { panic!() };
        assert!(matches!(serde_json::from_slice::<Ask>(&body).unwrap(), Ask::State { ticket } if ticket == "t1"));
        assert!(matches!(read_frame(&mut r, 1024).unwrap(), Frame::Closed));
        let huge = (u32::MAX).to_be_bytes();
        assert!(matches!(read_frame(&mut huge.as_slice(), 1024).unwrap(), Frame::TooLong(n) if n == u32::MAX as usize));
        assert!(read_frame(&mut [0u8, 0, 0, 9, b'{'].as_slice(), 1024).is_err(), "a frame cut short is an error");
    }

    #[test]
    fn a_view_frame_decodes_as_a_tell() {
        let view = crate::room::View::default();
        let frame = view_frame(7, 1234, &serde_json::to_string(&view).unwrap());
        let Frame::Body(body) = read_frame(&mut frame.as_slice(), MAX_TELL_BYTES).unwrap() else { panic!() };
        assert!(matches!(serde_json::from_slice::<Tell>(&body).unwrap(), Tell::View { seq: 7, published_ms: 1234, .. }));
    }

    #[test]
    fn tickets_are_plain() {
        assert!(ticket_ok("1733390000000-4242-7"));
        for bad in ["", "a/b", "a b", "é", &"x".repeat(65), "u1000:x"] {
            assert!(!ticket_ok(bad), "{bad:?}");
        }
    }
}
