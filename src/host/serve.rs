//! The engine's side of its socket (`LOG.sock`): how consoles, walls and
//! `gpuroom act` reach a running engine without ever opening its log.
//!
//! * **Who.** The kernel names each peer (`SO_PEERCRED`); the engine records
//!   that user, with the name the console claimed beside it, never in its
//!   place. The socket is the owner's alone, or its log group's (mode 0660,
//!   made in a private folder and moved into place, so it is never open to
//!   others even for an instant), and the engine checks the peer's groups
//!   again itself.
//! * **Fair.** Commands wait in one queue per user and are taken in turn, one
//!   from each user, so no user's flood delays another's command by more
//!   than a turn. A user may send a burst of `Limits::burst` commands and
//!   `Limits::rate` a second after it, and have `Limits::waiting` waiting;
//!   past that a command is refused at once with the reason, is not filed,
//!   and the refusals are counted for the engine's flood alarm.
//! * **Never in the engine's way.** Each client has a reader and a writer
//!   thread of its own. The engine hands the newest view to every writer
//!   (a slow client skips views, and one that reads nothing for 10 s is
//!   dropped); nothing a client does blocks a batch.
//!
//! Owns the socket, its threads and the queues; what a command does is the
//! room's, filing and answering it the duty's (`host::Duty`).

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::wire::{self, Ask, Frame, Tell};
use crate::domain::event::{Action, Actor, OsAccount, Role};
use crate::domain::text;
use crate::store::file::{self, sibling, user_name};
use crate::store::{CommandState, LeaseHolder};

/// How much one user may ask of the engine.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Commands a user may send at once.
    pub burst: f64,
    /// Commands a second a user may send after a burst.
    pub rate: f64,
    /// Commands of one user waiting for the engine at most.
    pub waiting: usize,
    /// Connections of one user at most, and of everyone.
    pub per_user_connections: usize,
    pub connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { burst: 64.0, rate: 16.0, waiting: 256, per_user_connections: 16, connections: 256 }
    }
}

/// Where a log's engine listens.
pub fn socket_of(log: &Path) -> PathBuf {
    sibling(log, ".sock")
}

/// The longest path a Unix socket can have (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;
/// How long a client has to say hello.
const HELLO_WITHIN: Duration = Duration::from_secs(5);
/// A client that takes no bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Answers queued for a client that reads none, before it is dropped.
const MAX_QUEUED_MESSAGES: usize = 4096;

/// A command taken from a connection, for the duty to file and apply.
#[derive(Debug)]
pub struct Incoming {
    pub conn: u64,
    /// As the log files it: the client's, under the peer's uid.
    pub ticket: String,
    /// As the client sent it (what its answer names).
    pub client_ticket: String,
    pub actor: Actor,
    /// `Err`: the frame did not decode (refused and audited, unread).
    pub action: Result<Action, String>,
}

/// A client asking how one of its commands ended.
#[derive(Debug)]
pub struct Question {
    pub conn: u64,
    pub ticket: String,
    pub client_ticket: String,
}

/// A user whose commands were refused for their number since the last look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flood {
    pub uid: u32,
    pub user: String,
    pub refused: u64,
    /// One refusal's reason, for the alarm.
    pub why: String,
}

/// The running socket. Dropping it stops listening and removes the socket.
pub struct Server {
    shared: Arc<Shared>,
    socket: PathBuf,
    inode: u64,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    engine: LeaseHolder,
    owner: String,
    owner_uid: u32,
    group: Option<u32>,
    limits: Limits,
    intake: Mutex<Intake>,
    clients: Mutex<BTreeMap<u64, Client>>,
    next_conn: AtomicU64,
}

struct Client {
    uid: u32,
    views: bool,
    outbox: Arc<Outbox>,
}

#[derive(Default)]
struct Intake {
    queues: BTreeMap<u32, VecDeque<Incoming>>,
    /// The user served last: the next turn starts after them.
    last_served: Option<u32>,
    buckets: BTreeMap<u32, (f64, Instant)>,
    refused: BTreeMap<u32, (u64, String)>,
    questions: Vec<Question>,
}

impl Server {
    /// Listens beside `log` for the engine `engine`, open to the owner and
    /// to `group`'s members. A socket left by a dead engine is replaced
    /// (the caller holds the lease); anything else under that name is not.
    pub fn start(log: &Path, engine: LeaseHolder, group: Option<u32>, limits: Limits) -> Result<Server, String> {
        let socket = socket_of(log);
        let shown = text::for_terminal(&socket.display().to_string());
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!("{shown}: a socket's path may have at most {MAX_SOCKET_PATH} bytes; keep the log in a shorter path for consoles to attach"));
        }
        match std::fs::symlink_metadata(&socket) {
            Ok(meta) if std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) => {
                std::fs::remove_file(&socket).map_err(|e| format!("{shown}: removing the socket a stopped engine left: {e}"))?;
            }
            Ok(_) => return Err(format!("{shown} exists and is not a socket: refusing to replace it (remove it if it is yours)")),
            Err(_) => {}
        }
        let listener = bind_private(&socket, group).map_err(|e| format!("{shown}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("{shown}: {e}"))?;
        let inode = std::fs::symlink_metadata(&socket).map(|m| m.ino()).unwrap_or(0);
        let owner_uid = file::nix_uid();
        let shared = Arc::new(Shared {
            engine,
            owner: user_name(owner_uid),
            owner_uid,
            group,
            limits,
            intake: Mutex::new(Intake::default()),
            clients: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU64::new(1),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s, flag) = (shared.clone(), stop.clone());
        let accept = std::thread::Builder::new().name("gpuroom-socket".into()).spawn(move || accept_loop(listener, s, flag)).map_err(|e| e.to_string())?;
        Ok(Server { shared, socket, inode, stop, accept: Some(accept) })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Up to `max` commands, one from each waiting user in turn.
    pub fn take(&self, max: usize) -> Vec<Incoming> {
        let mut intake = lock(&self.shared.intake);
        let mut out = Vec::new();
        while out.len() < max {
            let start = intake.last_served;
            let next = intake
                .queues
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .map(|(uid, _)| *uid)
                .find(|uid| start.is_none_or(|s| *uid > s))
                .or_else(|| intake.queues.iter().find(|(_, q)| !q.is_empty()).map(|(uid, _)| *uid));
            let Some(uid) = next else { break };
            if let Some(command) = intake.queues.get_mut(&uid).and_then(VecDeque::pop_front) {
                out.push(command);
            }
            intake.last_served = Some(uid);
        }
        intake.queues.retain(|_, q| !q.is_empty());
        out
    }

    /// The questions asked since the last look.
    pub fn questions(&self) -> Vec<Question> {
        std::mem::take(&mut lock(&self.shared.intake).questions)
    }

    /// Users refused for the number of their commands since the last look.
    pub fn floods(&self) -> Vec<Flood> {
        let refused = std::mem::take(&mut lock(&self.shared.intake).refused);
        refused.into_iter().map(|(uid, (refused, why))| Flood { uid, user: user_name(uid), refused, why }).collect()
    }

    /// Tells connection `conn` how its command `client_ticket` ended.
    pub fn answer(&self, conn: u64, client_ticket: &str, state: Option<CommandState>) {
        let clients = lock(&self.shared.clients);
        if let Some(client) = clients.get(&conn) {
            client.outbox.push(wire::encode(&Tell::Answer { ticket: client_ticket.to_string(), state }));
        }
    }

    /// The newest view, already framed, for every client that draws views.
    pub fn publish(&self, frame: Arc<Vec<u8>>) {
        for client in lock(&self.shared.clients).values().filter(|c| c.views) {
            client.outbox.set_view(frame.clone());
        }
    }

    /// Connected clients, by user: for the engine's own health line.
    pub fn connected(&self) -> BTreeMap<u32, usize> {
        let mut by_user = BTreeMap::new();
        for client in lock(&self.shared.clients).values() {
            *by_user.entry(client.uid).or_insert(0) += 1;
        }
        by_user
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        for client in lock(&self.shared.clients).values() {
            client.outbox.push(wire::encode(&Tell::Goodbye { reason: "the engine stopped".into() }));
            client.outbox.close_after_sending();
        }
        // Only our own socket: a later engine may already have put its own here.
        if std::fs::symlink_metadata(&self.socket).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Binds the socket in a folder only this user can enter, gives it its
/// mode and group there, then moves it into place: at no moment can anyone
/// else connect to it with looser rights.
fn bind_private(socket: &Path, group: Option<u32>) -> std::io::Result<UnixListener> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let name = socket.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let private = socket.with_file_name(format!(".{name}.{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let inside = private.join("s");
    let made = (|| {
        let listener = UnixListener::bind(&inside)?;
        if let Some(gid) = group {
            std::os::unix::fs::chown(&inside, None, Some(gid)).map_err(|e| {
                std::io::Error::new(e.kind(), format!("giving the socket to group {gid}: {e} (the engine's user must be a member of the log's group)"))
            })?;
        }
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(if group.is_some() { 0o660 } else { 0o600 }))?;
        std::fs::rename(&inside, socket)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&inside);
    let _ = std::fs::remove_dir(&private);
    made
}

use std::os::unix::fs::DirBuilderExt as _;

fn accept_loop(listener: UnixListener, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
                let _ = std::thread::Builder::new().name(format!("gpuroom-conn-{conn}")).spawn(move || serve_connection(&shared, stream, conn));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The peer's uid and whether it may use this engine at all.
fn peer(shared: &Shared, stream: &UnixStream) -> Result<u32, String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let creds = getsockopt(stream, PeerCredentials).map_err(|e| format!("who is connecting cannot be told ({e})"))?;
    let uid = creds.uid();
    if uid == shared.owner_uid || uid == 0 {
        return Ok(uid);
    }
    let member = shared.group.is_some_and(|g| creds.gid() == g || process_groups(creds.pid()).contains(&g));
    if member { Ok(uid) } else { Err(format!("{} is not the log's owner nor in its group", user_name(uid))) }
}

/// A process's supplementary groups, from /proc.
fn process_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Groups:").map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())))
        .unwrap_or_default()
}

/// The actor the engine records for `uid`: the kernel's name for the user;
/// a different name the client claimed is kept beside it, never in its place.
pub fn derived_actor(uid: u32, claimed: &Actor) -> Actor {
    let user = user_name(uid);
    let account = Some(OsAccount { name: user.clone(), engine: uid == file::nix_uid() });
    let says = text::clean(&claimed.user);
    let shown = if says == user || says.is_empty() { user } else { format!("{user} (says {})", bounded(&says, 64)) };
    Actor { user: shown, origin: bounded(&text::clean(&claimed.origin), 128), role: claimed.role, account }
}

fn bounded(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

fn goodbye(mut stream: &UnixStream, reason: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = std::io::Write::write_all(&mut stream, &wire::encode(&Tell::Goodbye { reason: reason.to_string() }));
}

fn serve_connection(shared: &Arc<Shared>, stream: UnixStream, conn: u64) {
    let _ = stream.set_nonblocking(false);
    let uid = match peer(shared, &stream) {
        Ok(uid) => uid,
        Err(why) => return goodbye(&stream, &why),
    };
    {
        let clients = lock(&shared.clients);
        let mine = clients.values().filter(|c| c.uid == uid).count();
        if mine >= shared.limits.per_user_connections || clients.len() >= shared.limits.connections {
            let why = format!("too many connections ({mine} of {}'s, {} in all); close some", user_name(uid), clients.len());
            drop(clients);
            return goodbye(&stream, &why);
        }
    }
    let _ = stream.set_read_timeout(Some(HELLO_WITHIN));
    let mut reader = &stream;
    let (claimed, views) = match wire::read_frame(&mut reader, wire::MAX_ASK_BYTES).map(|f| match f {
        Frame::Body(body) => serde_json::from_slice::<Ask>(&body).ok(),
        _ => None,
    }) {
        Ok(Some(Ask::Hello { protocol, claimed, views })) if protocol == wire::PROTOCOL => (claimed, views),
        Ok(Some(Ask::Hello { protocol, .. })) => {
            return goodbye(&stream, &format!("protocol {protocol} is not this engine's ({}): use the same gpuroom as the engine", wire::PROTOCOL));
        }
        _ => return goodbye(&stream, "a connection opens with a hello, within 5 s"),
    };
    let actor = derived_actor(uid, &claimed);
    let Ok(writer) = stream.try_clone() else { return };
    let outbox = Arc::new(Outbox::default());
    let _ = writer.set_write_timeout(Some(WRITE_TIMEOUT));
    let out = outbox.clone();
    if std::thread::Builder::new().name(format!("gpuroom-conn-{conn}-out")).spawn(move || write_loop(writer, &out)).is_err() {
        return;
    }
    outbox.push(wire::encode(&Tell::Welcome { engine: shared.engine.clone(), owner: shared.owner.clone(), actor: actor.clone() }));
    lock(&shared.clients).insert(conn, Client { uid, views, outbox: outbox.clone() });
    let _ = stream.set_read_timeout(None);
    let mut unreadable = 0u64;
    loop {
        let frame = match wire::read_frame(&mut reader, wire::MAX_ASK_BYTES) {
            Ok(Frame::Body(body)) => body,
            Ok(Frame::TooLong(n)) => {
                outbox.push(wire::encode(&Tell::Goodbye { reason: format!("a frame of {n} bytes; a command has at most {} (closing)", wire::MAX_ASK_BYTES) }));
                break;
            }
            Ok(Frame::Closed) | Err(_) => break,
        };
        let incoming = match serde_json::from_slice::<Ask>(&frame) {
            Ok(Ask::Command { ticket, action }) if wire::ticket_ok(&ticket) => {
                Incoming { conn, ticket: filed_ticket(uid, &ticket), client_ticket: ticket, actor: actor.clone(), action: Ok(action) }
            }
            Ok(Ask::Command { ticket, .. }) => {
                let reason = "a ticket is 1 to 64 letters, digits, '.', '_' or '-'".to_string();
                outbox.push(wire::encode(&Tell::Answer {
                    ticket: bounded(&text::clean(&ticket), 64),
                    state: Some(CommandState::Refused { reason, event_seq: None }),
                }));
                continue;
            }
            Ok(Ask::State { ticket }) => {
                if wire::ticket_ok(&ticket) {
                    lock(&shared.intake).questions.push(Question { conn, ticket: filed_ticket(uid, &ticket), client_ticket: ticket });
                }
                continue;
            }
            Ok(Ask::Hello { .. }) => continue,
            Err(e) => {
                unreadable += 1;
                let ticket = format!("unreadable-{conn}-{unreadable}");
                let why = format!("unreadable command ({})", bounded(&text::clean(&e.to_string()), 200));
                let actor = Actor { role: Role::Viewer, ..actor.clone() };
                Incoming { conn, ticket: filed_ticket(uid, &ticket), client_ticket: ticket, actor, action: Err(why) }
            }
        };
        if let Err(reason) = admit(shared, uid, incoming) {
            outbox.push(wire::encode(&Tell::Answer { ticket: reason.0, state: Some(CommandState::Refused { reason: reason.1, event_seq: None }) }));
        }
    }
    lock(&shared.clients).remove(&conn);
    outbox.close_after_sending();
}

/// A client's ticket as the log files it: under the peer's uid, so one
/// user's ticket never names another's command.
fn filed_ticket(uid: u32, ticket: &str) -> String {
    format!("u{uid}-{ticket}")
}

/// Queues the command, or says why not (its client ticket and the reason).
fn admit(shared: &Shared, uid: u32, incoming: Incoming) -> Result<(), (String, String)> {
    let limits = &shared.limits;
    let mut intake = lock(&shared.intake);
    let now = Instant::now();
    let (tokens, at) = intake.buckets.get(&uid).copied().unwrap_or((limits.burst, now));
    let tokens = (tokens + now.duration_since(at).as_secs_f64() * limits.rate).min(limits.burst);
    let waiting = intake.queues.get(&uid).map_or(0, VecDeque::len);
    let refusal = if tokens < 1.0 {
        Some(format!(
            "refused: {} sent more than {} commands at once and {} a second; the engine takes every user's commands in turn (try again shortly)",
            user_name(uid),
            limits.burst,
            limits.rate
        ))
    } else if waiting >= limits.waiting {
        Some(format!("refused: {} has {waiting} commands waiting for the engine already, the most one user may", user_name(uid)))
    } else {
        None
    };
    if let Some(why) = refusal {
        intake.buckets.insert(uid, (tokens, now));
        let entry = intake.refused.entry(uid).or_insert((0, why.clone()));
        entry.0 += 1;
        return Err((incoming.client_ticket, why));
    }
    intake.buckets.insert(uid, (tokens - 1.0, now));
    intake.queues.entry(uid).or_default().push_back(incoming);
    Ok(())
}

/// A published view, framed once and shared by every client's writer.
type ViewFrame = Arc<Vec<u8>>;

/// What the writer thread of one client has to send.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutState>,
    ready: Condvar,
}

#[derive(Default)]
struct OutState {
    messages: VecDeque<Vec<u8>>,
    /// Only the newest view is kept: a slow client skips the ones between.
    view: Option<Arc<Vec<u8>>>,
    /// Send what is queued, then stop.
    closing: bool,
    /// Stop now.
    closed: bool,
}

impl Outbox {
    fn push(&self, frame: Vec<u8>) {
        let mut state = lock(&self.state);
        if state.messages.len() >= MAX_QUEUED_MESSAGES {
            // It reads nothing: drop it rather than hold its answers forever.
            state.closed = true;
        } else {
            state.messages.push_back(frame);
        }
        self.ready.notify_one();
    }

    fn set_view(&self, frame: Arc<Vec<u8>>) {
        lock(&self.state).view = Some(frame);
        self.ready.notify_one();
    }

    fn close_after_sending(&self) {
        lock(&self.state).closing = true;
        self.ready.notify_one();
    }

    /// The next frames to send (answers, then the newest view), or `None` when done.
    fn next(&self) -> Option<(Vec<Vec<u8>>, Option<ViewFrame>)> {
        let mut state = lock(&self.state);
        loop {
            if state.closed {
                return None;
            }
            if !state.messages.is_empty() || state.view.is_some() {
                let messages = state.messages.drain(..).collect();
                return Some((messages, state.view.take()));
            }
            if state.closing {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

fn write_loop(mut stream: UnixStream, outbox: &Outbox) {
    while let Some((messages, view)) = outbox.next() {
        let sent = messages.iter().chain(view.as_deref()).try_for_each(|frame| std::io::Write::write_all(&mut stream, frame));
        if sent.is_err() {
            lock(&outbox.state).closed = true;
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(limits: Limits) -> Shared {
        Shared {
            engine: LeaseHolder { pid: 1, host: "h".into(), started_ms: 0 },
            owner: "eng".into(),
            owner_uid: 1,
            group: None,
            limits,
            intake: Mutex::new(Intake::default()),
            clients: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU64::new(1),
        }
    }

    fn command(uid: u32, n: usize) -> Incoming {
        let actor = Actor { user: format!("u{uid}"), origin: "t".into(), role: Role::Operator, account: None };
        Incoming { conn: uid as u64, ticket: filed_ticket(uid, &n.to_string()), client_ticket: n.to_string(), actor, action: Err(String::new()) }
    }

    /// Issue 33, item 1: a flood of one user's commands cannot put another's
    /// behind it: each turn takes one command from each user waiting.
    #[test]
    fn commands_are_taken_one_user_at_a_time_and_a_flood_is_refused_and_counted() {
        let shared = shared(Limits { burst: 100.0, rate: 0.0, waiting: 50, ..Limits::default() });
        let mut refused = 0;
        for n in 0..80 {
            refused += admit(&shared, 7, command(7, n)).is_err() as usize;
        }
        assert_eq!(refused, 30, "50 may wait");
        admit(&shared, 3, command(3, 0)).unwrap();
        admit(&shared, 9, command(9, 0)).unwrap();
        let server = Server { shared: Arc::new(shared), socket: PathBuf::new(), inode: 0, stop: Arc::new(AtomicBool::new(true)), accept: None };
        let first: Vec<u32> = server.take(4).iter().map(|c| c.conn as u32).collect();
        assert_eq!(first, [3, 7, 9, 7], "alice's and bob's commands come in the first turn");
        let floods = server.floods();
        assert_eq!((floods.len(), floods[0].uid, floods[0].refused), (1, 7, 30));
        assert!(floods[0].why.contains("commands waiting"), "{}", floods[0].why);
        assert!(server.floods().is_empty(), "counted once");
        assert_eq!(server.take(1000).len(), 48);
    }

    #[test]
    fn a_burst_is_refused_past_its_size_and_the_rate_refills_it() {
        let shared = shared(Limits { burst: 3.0, rate: 2.0, ..Limits::default() });
        for n in 0..3 {
            admit(&shared, 5, command(5, n)).unwrap();
        }
        lock(&shared.intake).buckets.insert(5, (0.0, Instant::now()));
        let (ticket, why) = admit(&shared, 5, command(5, 3)).unwrap_err();
        assert_eq!(ticket, "3");
        assert!(why.contains("more than 3 commands at once and 2 a second"), "{why}");
        // A second later, two more.
        lock(&shared.intake).buckets.insert(5, (0.0, Instant::now() - Duration::from_millis(1_050)));
        admit(&shared, 5, command(5, 4)).unwrap();
        admit(&shared, 5, command(5, 5)).unwrap();
        assert!(admit(&shared, 5, command(5, 6)).is_err());
    }

    #[test]
    fn the_recorded_actor_is_the_kernels_user_with_the_claim_beside_it() {
        let me = file::nix_uid();
        let claimed = Actor { user: "root-admin\u{1b}[2J".into(), origin: "ssh 6.6.6.6".into(), role: Role::Operator, account: None };
        let actor = derived_actor(me, &claimed);
        assert_eq!(actor.user, format!("{} (says root-admin[2J)", user_name(me)));
        assert_eq!(actor.account, Some(OsAccount { name: user_name(me), engine: true }));
        assert!(!derived_actor(me + 1, &claimed).account.unwrap().engine);
    }
}
