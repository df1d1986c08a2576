//! The engine's process side: who owns a log, and what the owner does for
//! the consoles attached to it. One engine per database (the lease); every
//! batch it commits also refreshes the lease, applies the commands attached
//! consoles queued, and (about once a second) publishes the view they draw.
//!
//! * `open_sim` decides what `gpuroom --db FILE` means: a new file starts a
//!   new run; a file whose engine is alive is attached to; a file whose
//!   engine died is resumed from its log (`Engine::resume`).
//! * `Duty` is the owner's share of each batch, for the simulated and the
//!   live engine alike: the lease's heartbeat, the commands that came over
//!   the engine's socket (`serve`, framed by `wire`) filed, applied and
//!   answered once on disk, the view published, and the engine's own
//!   alarms (a user flooding it).
//! * `attach` and `client` are the other side: an attached console's or a
//!   wall's link, over the socket.
//! * `driver` is the one loop that owns an engine (sources → events →
//!   engine → effects → executors and store → views), for the console on the
//!   simulated cluster or on live sources and for the headless engine;
//! * `console`, `headless`, `runs`, `screenshot` are the runners `main.rs`
//!   calls, one per subcommand, with their settings from `settings`.
//!
//! Reads the wall clock (for heartbeats) and the process table (is a lease's
//! holder alive?), so it lives here, outside the core.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::domain::event::{Actor, Role};
use crate::domain::units::At;
use crate::engine::{Engine, Recovery, World};
use crate::room::Room;
use crate::room::view::{AlarmRow, View};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};
use crate::store::{self, Access, Acquired, CommandState, Lease, LeaseBeat, LeaseHolder, Liveness, Queued, RunMeta, SimWorld, Store, StoreError};

pub mod act;
pub mod attach;
pub mod client;
pub mod console;
pub mod driver;
pub mod headless;
pub mod locks;
pub mod output;
pub mod runs;
pub mod screenshot;
pub mod serve;
pub mod settings;
pub mod whatif;
pub mod wire;

/// How often the view is published for attached consoles.
pub const PUBLISH_EVERY_MS: i64 = 1_000;

/// Milliseconds since the epoch, from the wall clock.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// This process, as a lease holder.
pub fn this_process() -> LeaseHolder {
    LeaseHolder { pid: std::process::id(), host: crate::sources::nvml::host_name(), started_ms: now_ms() }
}

/// Whether a lease's holder still runs. Only a process on this host can be
/// checked; another host's holder is judged by its heartbeat.
pub fn is_alive(holder: &LeaseHolder) -> Liveness {
    if holder.host != crate::sources::nvml::host_name() {
        return Liveness::Unknown;
    }
    let Ok(pid) = i32::try_from(holder.pid) else { return Liveness::Dead };
    // Signal 0 checks without sending; EPERM means it exists as another user.
    if matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(nix::errno::Errno::ESRCH)) {
        return Liveness::Dead;
    }
    // The holder noted when it took the lease; a process under its pid that
    // started after that is another one that reuses the pid.
    match process_started_ms(holder.pid) {
        Some(started) if started > holder.started_ms + 2_000 => Liveness::Dead,
        _ => Liveness::Alive,
    }
}

/// When process `pid` started (ms since the epoch), from /proc on Linux.
fn process_started_ms(pid: u32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    let ticks: i64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten()? as i64;
    let boot_s: i64 = std::fs::read_to_string("/proc/stat").ok()?.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    Some(boot_s * 1000 + ticks * 1000 / per_sec.max(1))
}

/// Keeps the lease's heartbeat fresh from its own connection while the
/// engine is busy between batches (a long resume replays the whole log
/// before its first batch). Stops when dropped.
pub struct Heartbeat {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(path: &Path, holder: &LeaseHolder) -> Heartbeat {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, path, holder) = (stop.clone(), path.to_path_buf(), holder.clone());
        let beat = move || {
            let Ok(lease) = LeaseBeat::open(&path) else { return };
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                lease.beat(&holder, now_ms());
                for _ in 0..20 {
                    if flag.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        };
        let thread = std::thread::Builder::new().name("gpuroom-heartbeat".into()).spawn(beat).ok();
        Heartbeat { stop, thread }
    }
}

impl Drop for Heartbeat {
    /// Waits for the thread to close its connection: the engine's own
    /// connection must be the log's last, so that closing it folds the WAL
    /// back into the file and leaves no `-wal`/`-shm` behind.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Commands taken from the socket per batch, one user at a time.
const TAKE_PER_BATCH: usize = 256;
/// A flood alarm stays this long after a user's last refused command.
const FLOOD_QUIET_MS: i64 = 60_000;
/// How often the WAL is looked at, and the size past which a WAL that a
/// checkpoint cannot fold back is an alarm (the engine's own checkpoints
/// keep it near 4 MB).
const WAL_LOOK_EVERY_MS: i64 = 5_000;
const WAL_ALARM_BYTES: u64 = 16 * 1024 * 1024;

/// The owner's share of each batch: the lease's heartbeat, the commands, and
/// the published view.
pub struct Duty {
    pub holder: LeaseHolder,
    last_publish_ms: i64,
    /// Between batches; `None` for an engine with no log.
    heartbeat: Option<Heartbeat>,
    /// Where consoles attach; `None` with no log, or where it could not be
    /// opened (`socket_error` says why).
    server: Option<serve::Server>,
    pub socket_error: Option<String>,
    /// Commands filed and not yet applied: id → (connection, filed ticket, client's).
    awaiting: HashMap<i64, (u64, String, String)>,
    /// Answers to send once the batch that holds them is on disk.
    due: Vec<(u64, String, String)>,
    floods: BTreeMap<u32, FloodEpisode>,
    /// The engine's own alarms, shown beside the room's.
    alarms: BTreeMap<String, AlarmRow>,
    /// Since when the log's write lock could not be had, and when to try again.
    blocked: Option<Blocked>,
    last_wal_look_ms: i64,
    /// `/metrics`, when asked for (`--metrics`), and the world it reports.
    exporter: Option<crate::metrics::http::Exporter>,
    world: &'static str,
}

/// The log locked by someone else: the engine writes nothing and retries.
struct Blocked {
    since_ms: i64,
    tries: u32,
    next_try: std::time::Instant,
    raised_at: At,
}

/// One user's commands being refused for their number.
struct FloodEpisode {
    user: String,
    refused: u64,
    since_ms: i64,
    last_ms: i64,
    audited_ms: i64,
    raised_at: At,
}

impl Duty {
    pub fn new(holder: LeaseHolder) -> Duty {
        Duty {
            holder,
            last_publish_ms: i64::MIN,
            heartbeat: None,
            server: None,
            socket_error: None,
            awaiting: HashMap::new(),
            due: Vec::new(),
            floods: BTreeMap::new(),
            alarms: BTreeMap::new(),
            blocked: None,
            last_wal_look_ms: i64::MIN,
            exporter: None,
            world: "sim",
        }
    }

    /// Serves `/metrics` at `addr` from now on (`world`: "sim" or "live");
    /// returns where it listens.
    pub fn serve_metrics(&mut self, addr: &str, world: &'static str) -> Result<std::net::SocketAddr, String> {
        let exporter = crate::metrics::http::Exporter::start(addr)?;
        let at = exporter.addr();
        self.exporter = Some(exporter);
        self.world = world;
        Ok(at)
    }

    /// Whether views are published for someone: the log's consoles or `/metrics`.
    pub fn publishes(&self, has_log: bool) -> bool {
        has_log || self.exporter.is_some()
    }

    /// The newest view and the engine's health for the next scrape.
    fn export<W: World>(&self, engine: &Engine<W>, view: &View, now_ms: i64) {
        let Some(exporter) = &self.exporter else { return };
        let size = |side: &str| engine.store.as_ref().and_then(|s| std::fs::metadata(store::file::sibling(s.path(), side)).ok()).map(|m| m.len());
        let consoles = self.server.as_ref().map(|s| s.connected().into_iter().map(|(uid, n)| (store::file::user_name(uid), n)).collect()).unwrap_or_default();
        let health = crate::metrics::Health { world: self.world.to_string(), published_ms: now_ms, log_bytes: size(""), wal_bytes: size("-wal"), consoles };
        exporter.update(crate::metrics::Snapshot { view: Arc::new(view.clone()), health });
    }

    /// The duty of the engine holding the log at `path`, with its heartbeat
    /// thread and its socket (open to `group` too, when the run is shared).
    pub fn owning(holder: LeaseHolder, path: &Path, group: Option<u32>) -> Duty {
        let heartbeat = Heartbeat::start(path, &holder);
        let (server, socket_error) = match serve::Server::start(path, holder.clone(), group, serve::Limits::default()) {
            Ok(server) => (Some(server), None),
            Err(why) => (None, Some(why)),
        };
        Duty { heartbeat: Some(heartbeat), server, socket_error, ..Duty::new(holder) }
    }

    /// Where consoles attach, when they can.
    pub fn socket(&self) -> Option<&Path> {
        self.server.as_ref().map(|s| s.socket())
    }

    /// Heartbeat, the socket's new commands filed (one user at a time), then
    /// the pending ones applied (inside the open batch). Returns how many
    /// were applied.
    pub fn intake<W: World>(&mut self, engine: &mut Engine<W>, now_ms: i64) -> Result<usize, StoreError> {
        let at = engine.room.now().unwrap_or_else(|| engine.world.start());
        let Some(store) = engine.store.as_mut() else { return Ok(0) };
        store.heartbeat(&self.holder, now_ms)?;
        if let Some(server) = &self.server {
            for c in server.take(TAKE_PER_BATCH) {
                let action = c.action.as_ref().map_err(String::as_str);
                match store.queue_command(at, &c.ticket, now_ms, &c.actor, action)? {
                    Queued::New(id) | Queued::Known(id, CommandState::Pending) => {
                        self.awaiting.insert(id, (c.conn, c.ticket, c.client_ticket));
                    }
                    Queued::Known(..) => self.due.push((c.conn, c.ticket, c.client_ticket)),
                }
            }
            for q in server.questions() {
                match store.command_by_ticket(&q.ticket)? {
                    Some((id, CommandState::Pending)) => {
                        self.awaiting.insert(id, (q.conn, q.ticket, q.client_ticket));
                    }
                    _ => self.due.push((q.conn, q.ticket, q.client_ticket)),
                }
            }
            let floods = server.floods();
            self.watch_floods(store, floods, at, now_ms)?;
        }
        let applied = engine.apply_commands(now_ms)?;
        for (id, _) in &applied {
            if let Some(waiting) = self.awaiting.remove(id) {
                self.due.push(waiting);
            }
        }
        Ok(applied.len())
    }

    /// A user whose commands are refused for their number: one audit row a
    /// minute while it lasts, and an alarm until a minute after the last.
    fn watch_floods(&mut self, store: &mut Store, floods: Vec<serve::Flood>, at: At, now_ms: i64) -> Result<(), StoreError> {
        for flood in floods {
            let episode = self.floods.entry(flood.uid).or_insert(FloodEpisode {
                user: flood.user.clone(),
                refused: 0,
                since_ms: now_ms,
                last_ms: now_ms,
                audited_ms: i64::MIN,
                raised_at: at,
            });
            episode.refused += flood.refused;
            episode.last_ms = now_ms;
            let secs = ((now_ms - episode.since_ms) / 1000).max(1);
            let text = format!("{} is flooding the engine: {} commands refused in {secs} s ({})", episode.user, episode.refused, flood.why);
            if now_ms.saturating_sub(episode.audited_ms) >= FLOOD_QUIET_MS {
                let actor = Actor { user: episode.user.clone(), origin: "engine socket".into(), role: Role::Viewer, account: None };
                store.append_audit_note(at, &actor, "flood", &text)?;
                episode.audited_ms = now_ms;
            }
            let id = format!("engine:flood:{}", episode.user);
            self.alarms.insert(id.clone(), AlarmRow::raised(id, episode.raised_at, text));
        }
        let alarms = &mut self.alarms;
        self.floods.retain(|_, e| {
            let over = now_ms - e.last_ms > FLOOD_QUIET_MS;
            if over {
                alarms.remove(&format!("engine:flood:{}", e.user));
            }
            !over
        });
        Ok(())
    }

    /// After a batch is on disk: the answers it holds go to their clients,
    /// and now and then a look at the WAL.
    pub fn after_commit<W: World>(&mut self, engine: &mut Engine<W>) {
        let at = engine.room.now().unwrap_or_else(|| engine.world.start());
        let Some(store) = engine.store.as_mut() else {
            self.due.clear();
            return;
        };
        if let Some(blocked) = self.blocked.take() {
            let secs = (now_ms() - blocked.since_ms) / 1000;
            self.alarms.remove("engine:blocked");
            let note = format!("the log was locked for {secs} s ({} tries); nothing was lost: the engine wrote what it had held back", blocked.tries);
            let actor = Actor { user: "gpuroom".into(), origin: "engine".into(), role: Role::Viewer, account: None };
            let _ = store.append_audit_note(at, &actor, "blocked", &note);
        }
        if let Some(server) = &self.server {
            for (conn, ticket, client_ticket) in self.due.drain(..) {
                let state = store.command_state(&ticket).ok().flatten();
                server.answer(conn, &client_ticket, state);
            }
        }
        self.due.clear();
        let now = now_ms();
        if now.saturating_sub(self.last_wal_look_ms) >= WAL_LOOK_EVERY_MS {
            self.last_wal_look_ms = now;
            self.look_at_wal(store, at);
        }
    }

    /// A WAL past `WAL_ALARM_BYTES` that a checkpoint cannot fold back into
    /// the log is an alarm naming what holds it; it clears once a
    /// checkpoint goes through.
    fn look_at_wal(&mut self, store: &Store, at: At) {
        let Ok(wal) = store.checkpoint_wal() else { return };
        let stuck = (wal.blocked || wal.checkpointed < wal.frames) && wal.bytes > WAL_ALARM_BYTES;
        if !stuck {
            self.alarms.remove("engine:wal");
            return;
        }
        let blockers = locks::describe(&locks::holders(store.path()));
        let text = format!(
            "the log's WAL is {:.0} MB and cannot be checkpointed ({}): held by {blockers}",
            wal.bytes as f64 / 1e6,
            if wal.blocked { "the checkpoint could not start".to_string() } else { format!("{} of {} pages folded back", wal.checkpointed, wal.frames) }
        );
        let raised_at = self.alarms.get("engine:wal").map_or(at, |a| a.raised_at);
        self.alarms.insert("engine:wal".into(), AlarmRow::raised("engine:wal".into(), raised_at, text));
    }

    /// The log's write lock could not be had: nothing was written. The
    /// alarm names who holds a lock on it, the view goes to the consoles
    /// over the socket (the log cannot take it), and the next try waits a
    /// little longer each time, up to 5 s.
    pub fn blocked<W: World>(&mut self, engine: &Engine<W>, why: &StoreError) -> View {
        let at = engine.room.now().unwrap_or_else(|| engine.world.start());
        let now = now_ms();
        let blocked = self.blocked.get_or_insert(Blocked { since_ms: now, tries: 0, next_try: std::time::Instant::now(), raised_at: at });
        blocked.tries += 1;
        let wait = std::time::Duration::from_millis((250u64 << blocked.tries.min(5)).min(5_000));
        blocked.next_try = std::time::Instant::now() + wait;
        let secs = (now - blocked.since_ms) / 1000;
        let blockers = engine.store.as_ref().map(|s| locks::describe(&locks::holders(s.path()))).unwrap_or_default();
        let text = format!("the log is locked: the engine has written nothing for {secs} s and retries; held by {blockers} ({why})");
        self.alarms.insert("engine:blocked".into(), AlarmRow::raised("engine:blocked".into(), blocked.raised_at, text));
        let mut view = engine.room.view();
        self.decorate(&mut view);
        self.export(engine, &view, now);
        if let (Some(server), Ok(json)) = (&self.server, serde_json::to_string(&view)) {
            let seq = engine.store.as_ref().map_or(0, |s| s.last_seq());
            server.publish(Arc::new(wire::view_frame(seq, now, &json)));
        }
        view
    }

    /// Whether the engine waits before trying the log again.
    pub fn backing_off(&self) -> bool {
        self.blocked.as_ref().is_some_and(|b| std::time::Instant::now() < b.next_try)
    }

    /// The world this engine runs on ("sim" or "live"), said in each view
    /// (an attached console and a wall mark a simulated one) and to `/metrics`.
    pub fn set_world(&mut self, world: &'static str) {
        self.world = world;
    }

    /// The engine's own alarms (and its world) added to a view of the room.
    pub fn decorate(&self, view: &mut View) {
        view.world = Some(self.world.to_string());
        view.alarms.extend(self.alarms.values().cloned());
        if let Some(why) = &self.socket_error {
            let raised_at = view.at.unwrap_or(chrono::DateTime::UNIX_EPOCH);
            view.alarms.push(AlarmRow::raised("engine:socket".into(), raised_at, format!("consoles cannot attach: {why}")));
        }
        crate::room::view::sort_alarms(&mut view.alarms);
    }

    /// Whether a view is due for the attached consoles.
    pub fn publish_due(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_publish_ms) >= PUBLISH_EVERY_MS
    }

    /// The view, once serialized: into the log (a wall of a stopped
    /// engine's log shows the last) and to every client of the socket.
    pub fn publish<W: World>(&mut self, engine: &mut Engine<W>, view: &View, now_ms: i64) -> Result<(), StoreError> {
        self.export(engine, view, now_ms);
        self.last_publish_ms = now_ms;
        let Some(store) = engine.store.as_mut() else { return Ok(()) };
        let json = serde_json::to_string(view).map_err(|e| StoreError::Format { path: store.path().display().to_string(), message: e.to_string() })?;
        let seq = store.last_seq();
        store.publish_view_json(seq, &json, now_ms)?;
        if let Some(server) = &self.server {
            server.publish(Arc::new(wire::view_frame(seq, now_ms, &json)));
        }
        self.last_publish_ms = now_ms;
        Ok(())
    }

    /// A clean stop: the open batch committed, a snapshot, the lease released.
    pub fn finish<W: World>(&mut self, engine: &mut Engine<W>) -> Result<(), StoreError> {
        engine.end_batch()?;
        self.after_commit(engine);
        if let Some(store) = engine.store.as_mut() {
            store.snapshot(store.last_seq(), &engine.room)?;
            store.release_lease(&self.holder)?;
        }
        // Consoles are told goodbye; the next engine opens its own socket.
        self.server = None;
        // Its connection closes now, so the engine's is the log's last.
        self.heartbeat = None;
        Ok(())
    }
}

/// What `--db FILE` opened.
pub enum Opened {
    /// A new run (`resumed: None`), or an earlier one resumed.
    /// (Boxed: an engine is kilobytes, an attach is a lease row.)
    Owner { engine: Box<Engine<Simulation>>, duty: Box<Duty>, resumed: Option<Resumed> },
    /// An engine is alive on this file: attach to it (through its socket).
    Attach { engine: LeaseHolder },
}

/// An earlier run taken up again from its log.
pub struct Resumed {
    /// The engine that died holding the lease; `None` if it stopped cleanly.
    pub from: Option<Lease>,
    pub recovery: Recovery,
}

impl Resumed {
    /// One line for the operator.
    pub fn describe(&self, path: &Path) -> String {
        let how = match &self.from {
            Some(lease) => format!("its engine ({}) stopped without releasing it", lease.holder),
            None => "its engine stopped cleanly".to_string(),
        };
        format!("resuming {} ({how}): {} events re-applied, {} queued commands to apply", path.display(), self.recovery.events, self.recovery.pending_commands)
    }
}

/// A simulated world to start a new run with.
pub struct NewSim<'a> {
    pub config: SimConfig,
    pub config_name: String,
    pub config_toml: String,
    pub seed: u64,
    pub traces: &'a Traces,
    pub room: Room,
}

/// A new event log at `path`, shared as `access` says and owned by `owner`
/// from its first moment. Its folder must exist: a mistyped `--db` folder
/// is an error, not a new tree with a look-alike run in it (the default
/// path's folder is made by `settings::default_log_path`).
pub fn create_log(path: &Path, meta: &RunMeta, access: &Access, owner: Option<&LeaseHolder>) -> Result<Store, CreateError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(CreateError::Other(anyhow::anyhow!(
            "{}: the folder {} does not exist (gpuroom makes no folders for --db: create it, or check the path)",
            path.display(),
            dir.display()
        )));
    }
    let created = match owner {
        Some(me) => Store::create_leased(path, meta, access, me, now_ms()),
        None => Store::create_with_access(path, meta, access),
    };
    match created {
        Ok(store) => Ok(store),
        Err(StoreError::Raced { .. }) => Err(CreateError::Raced),
        Err(e) => Err(CreateError::Other(e.into())),
    }
}

/// Why a new log was not made.
#[derive(Debug)]
pub enum CreateError {
    /// Another process made it first: open theirs instead.
    Raced,
    Other(anyhow::Error),
}

impl From<CreateError> for anyhow::Error {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::Raced => anyhow::anyhow!("another engine created this log at the same moment"),
            CreateError::Other(e) => e,
        }
    }
}

/// Opens `path` for a simulated engine: creates it with `new` if it does not
/// exist, attaches if its engine lives, resumes the run if its engine died.
pub fn open_sim(path: &Path, new: NewSim<'_>, created_with: &str, access: &Access) -> anyhow::Result<Opened> {
    use anyhow::Context as _;
    let me = this_process();
    if !path.exists() {
        let world = SimWorld { seed: new.seed, config_name: new.config_name.clone(), config_toml: new.config_toml.clone() };
        let meta = RunMeta {
            room_config: new.room.config().clone(),
            source: format!("sim seed={} config={}", new.seed, new.config_name),
            created_with: created_with.to_string(),
            world: Some(world),
        };
        match create_log(path, &meta, access, Some(&me)) {
            Ok(store) => {
                let sim = Simulation::new(new.config, new.traces, new.seed)?;
                let duty = Duty::owning(me, path, access.group);
                return Ok(Opened::Owner { engine: Box::new(Engine::new(new.room, sim, Some(store))), duty: Box::new(duty), resumed: None });
            }
            // The winner's log is complete and leased: attach to it, as to any live engine's.
            Err(CreateError::Raced) => {}
            Err(CreateError::Other(e)) => return Err(e),
        }
    }
    // A live engine is attached to through its socket: a member of the
    // log's group never opens the log, and the owner need not.
    if let Some(engine) = live_engine(path) {
        return Ok(Opened::Attach { engine });
    }
    let mut store = Store::open_for_writing(path).map_err(|e| owner_only_hint(path, e))?;
    let old = match store.acquire_lease(&me, now_ms(), &is_alive) {
        Ok(Acquired::Free) => None,
        Ok(Acquired::TakenOver(lease)) => Some(lease),
        Err(StoreError::Leased { .. }) => {
            let lease = store.lease()?.context("the lease vanished while checking it")?;
            return Ok(Opened::Attach { engine: lease.holder });
        }
        Err(e) => return Err(e.into()),
    };
    let meta = store.meta()?;
    let Some(world) = meta.world.clone() else {
        anyhow::bail!("{}: this log was not written by a simulated engine ({}); it cannot be resumed here", path.display(), meta.source);
    };
    let config = SimConfig::parse(&world.config_name, &world.config_toml)?;
    let sim = Simulation::new(config, new.traces, world.seed)?;
    // The heartbeat runs through the resume, however long the log.
    let duty = Duty::owning(me, path, store.log_group()?);
    let (engine, recovery) = Engine::resume(Room::new(meta.room_config), sim, store)?;
    Ok(Opened::Owner { engine: Box::new(engine), duty: Box::new(duty), resumed: Some(Resumed { from: old, recovery }) })
}

/// The engine that answers on `path`'s socket, if one does.
/// The engine that runs on the log at `path` now, if one does: it answers
/// on the log's socket, or holds a lease that is not stale.
pub fn live_engine(path: &Path) -> Option<LeaseHolder> {
    engine_answering(path).or_else(|| {
        let lease = Store::open_read_only(path).and_then(|s| s.lease()).ok().flatten()?;
        (!lease.is_stale(now_ms(), &is_alive)).then_some(lease.holder)
    })
}

pub fn engine_answering(path: &Path) -> Option<LeaseHolder> {
    let me = crate::operator::actor_from_env(Role::Viewer);
    client::Client::connect(path, &me, false).ok().map(|c| c.engine.clone())
}

/// A log this user may not open, with no engine answering: say whose it is
/// and how members reach it, rather than SQLite's "unable to open".
fn owner_only_hint(path: &Path, e: StoreError) -> anyhow::Error {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) if meta.uid() != store::file::nix_uid() && store::file::nix_uid() != 0 => anyhow::anyhow!(
            "{}: the log is {}'s alone and no engine is running on it: members of its group attach to a running engine \
             (gpuroom --db, --wall, gpuroom act); only its owner can resume it ({e})",
            path.display(),
            store::file::user_name(meta.uid())
        ),
        _ => e.into(),
    }
}
