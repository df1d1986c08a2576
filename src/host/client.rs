//! A console's, a wall's or `gpuroom act`'s side of the engine's socket: a
//! connection that keeps the newest view and every answer as they arrive
//! (a reader thread of its own, so the engine never waits on it), and sends
//! commands under tickets it makes.
//!
//! Before anything is sent it checks who answers: the socket's peer must be
//! the log file's owner (the kernel says who listens, `SO_PEERCRED`), so a
//! program someone else left under the socket's name is refused, not told
//! an operator's commands.
//!
//! Owns the client's connection only; what it does with views is the
//! console's.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::serve::socket_of;
use super::wire::{self, Ask, Frame, Tell};
use crate::domain::event::{Action, Actor};
use crate::domain::text::for_terminal;
use crate::store::file::user_name;
use crate::store::{CommandState, LeaseHolder, Published};

/// Why no connection was made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing listens: no engine runs on this log (or it has no socket).
    #[error("{0}")]
    NoEngine(String),
    /// Something listens that is not the log owner's, or said no.
    #[error("{0}")]
    Refused(String),
}

/// An open connection to an engine.
pub struct Client {
    stream: UnixStream,
    shared: Arc<(Mutex<Received>, Condvar)>,
    /// The engine, its owner, and the actor it records this connection under.
    pub engine: LeaseHolder,
    pub owner: String,
    pub actor: Actor,
    counter: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Received {
    view: Option<Published>,
    answers: HashMap<String, Option<CommandState>>,
    /// Why the connection ended, once it has.
    closed: Option<String>,
}

/// How long the handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(5);

impl Client {
    /// Connects to the engine of the log at `log` as `claimed`, asking for
    /// views when `views`.
    pub fn connect(log: &Path, claimed: &Actor, views: bool) -> Result<Client, ConnectError> {
        let socket = socket_of(log);
        let shown = for_terminal(&log.display().to_string());
        let stream = UnixStream::connect(&socket).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ConnectError::NoEngine(format!("{shown}: no engine is running on it ({}: {e})", for_terminal(&socket.display().to_string())))
            }
            _ => ConnectError::Refused(format!(
                "{}: {e} (is this user the log's owner or in its group? see README, Security)",
                for_terminal(&socket.display().to_string())
            )),
        })?;
        let owner_uid = std::fs::metadata(log)
            .map(|m| m.uid())
            .map_err(|e| ConnectError::Refused(format!("{shown}: cannot tell who owns the log ({e}), so not whom to trust")))?;
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let listener = getsockopt(&stream, PeerCredentials).map_err(|e| ConnectError::Refused(format!("{shown}: who listens cannot be told ({e})")))?.uid();
        if listener != owner_uid && listener != 0 {
            return Err(ConnectError::Refused(format!(
                "{shown}: its socket is served by {}, not by the log's owner {}: refusing to talk to it (someone else's program under the engine's name?)",
                user_name(listener),
                user_name(owner_uid)
            )));
        }
        let refused = |e: std::io::Error| ConnectError::Refused(format!("{shown}: the engine's socket: {e}"));
        stream.set_read_timeout(Some(HANDSHAKE)).map_err(refused)?;
        stream.set_write_timeout(Some(HANDSHAKE)).map_err(refused)?;
        let mut writer = &stream;
        std::io::Write::write_all(&mut writer, &wire::encode(&Ask::Hello { protocol: wire::PROTOCOL, claimed: claimed.clone(), views })).map_err(refused)?;
        let mut reader = &stream;
        let welcome = match wire::read_frame(&mut reader, wire::MAX_TELL_BYTES).map_err(refused)? {
            Frame::Body(body) => serde_json::from_slice::<Tell>(&body).map_err(|e| ConnectError::Refused(format!("{shown}: the engine's answer: {e}")))?,
            Frame::Closed | Frame::TooLong(_) => return Err(ConnectError::Refused(format!("{shown}: the engine closed the connection"))),
        };
        let (engine, owner, actor) = match welcome {
            Tell::Welcome { engine, owner, actor } => (engine, owner, actor),
            Tell::Goodbye { reason } => return Err(ConnectError::Refused(format!("{shown}: the engine refused this connection: {}", for_terminal(&reason)))),
            _ => return Err(ConnectError::Refused(format!("{shown}: the engine did not say welcome"))),
        };
        stream.set_read_timeout(None).map_err(refused)?;
        let shared = Arc::new((Mutex::new(Received::default()), Condvar::new()));
        let (reading, received) = (stream.try_clone().map_err(refused)?, shared.clone());
        std::thread::Builder::new().name("gpuroom-link".into()).spawn(move || read_loop(reading, &received)).map_err(refused)?;
        Ok(Client { stream, shared, engine, owner, actor, counter: Default::default() })
    }

    /// Sends `action` under a new ticket, which it returns.
    pub fn submit(&self, action: &Action) -> std::io::Result<String> {
        let n = self.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ticket = format!("{}-{}-{n}", chrono::Utc::now().timestamp_millis(), std::process::id());
        self.submit_as(&ticket, action)?;
        Ok(ticket)
    }

    /// Sends `action` under `ticket` (again, after a reconnect: the engine
    /// answers a ticket it knows instead of applying it twice).
    pub fn submit_as(&self, ticket: &str, action: &Action) -> std::io::Result<()> {
        self.send(&wire::encode(&Ask::Command { ticket: ticket.to_string(), action: action.clone() }))
    }

    /// Asks how the command under `ticket` ended; the answer arrives as any other.
    pub fn ask(&self, ticket: &str) -> std::io::Result<()> {
        self.send(&wire::encode(&Ask::State { ticket: ticket.to_string() }))
    }

    /// Sends a raw frame (bad input, for tests).
    pub fn send_frame(&self, body: &[u8]) -> std::io::Result<()> {
        let mut writer = &self.stream;
        wire::write_frame(&mut writer, body)
    }

    fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        let mut writer = &self.stream;
        std::io::Write::write_all(&mut writer, frame)
    }

    /// The answer for `ticket` if one arrived (taken).
    pub fn take_answer(&self, ticket: &str) -> Option<Option<CommandState>> {
        lock(&self.shared.0).answers.remove(ticket)
    }

    /// Waits up to `limit` for the answer for `ticket`.
    pub fn wait_answer(&self, ticket: &str, limit: Duration) -> Result<Option<CommandState>, String> {
        let deadline = Instant::now() + limit;
        let (received, arrived) = &*self.shared;
        let mut state = lock(received);
        loop {
            if let Some(answer) = state.answers.remove(ticket) {
                return Ok(answer);
            }
            if let Some(why) = &state.closed {
                return Err(format!("the connection to the engine ended before it answered ({why}); ask again after it is back (the ticket tells)"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no answer from the engine within {} s", limit.as_secs()));
            }
            state = arrived.wait_timeout(state, left).map(|(s, _)| s).unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The newest view if it was published after `after_ms`.
    pub fn latest_view(&self, after_ms: i64) -> Option<Published> {
        lock(&self.shared.0).view.as_ref().filter(|p| p.published_ms > after_ms).cloned()
    }

    /// Why the connection ended, if it has.
    pub fn closed(&self) -> Option<String> {
        lock(&self.shared.0).closed.clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read_loop(mut stream: UnixStream, shared: &(Mutex<Received>, Condvar)) {
    let why = loop {
        let body = match wire::read_frame(&mut stream, wire::MAX_TELL_BYTES) {
            Ok(Frame::Body(body)) => body,
            Ok(Frame::Closed) => break "the engine closed the connection".to_string(),
            Ok(Frame::TooLong(n)) => break format!("the engine sent a frame of {n} bytes"),
            Err(e) => break e.to_string(),
        };
        let mut received = lock(&shared.0);
        match serde_json::from_slice::<Tell>(&body) {
            Ok(Tell::View { seq, published_ms, view }) => received.view = Some(Published { seq, published_ms, view: *view }),
            Ok(Tell::Answer { ticket, state }) => {
                received.answers.insert(ticket, state);
            }
            Ok(Tell::Goodbye { reason }) => {
                received.closed = Some(for_terminal(&reason));
                shared.1.notify_all();
                return;
            }
            // A view of another version that does not decode is skipped: the console shows it aging.
            Ok(Tell::Welcome { .. }) | Err(_) => {}
        }
        shared.1.notify_all();
    };
    lock(&shared.0).closed.get_or_insert(why);
    shared.1.notify_all();
}
