//! The engine's process side: who owns a log, and what the owner does for
//! the consoles attached to it. One engine per database (the lease); every
//! batch it commits also refreshes the lease, applies the commands attached
//! consoles queued, and (about once a second) publishes the view they draw.
//!
//! * `open_sim` decides what `gpuroom --db FILE` means: a new file starts a
//!   new run; a file whose engine is alive is attached to; a file whose
//!   engine died is resumed from its log (`Engine::resume`).
//! * `Duty` is the owner's share of each batch, for the simulated and the
//!   live engine alike.
//! * `attach` is the other side: an attached console's or a wall's link.
//! * `driver` is the one loop that owns an engine (sources → events →
//!   engine → effects → executors and store → views), for the console on the
//!   simulated cluster or on live sources and for the headless engine;
//! * `console`, `headless`, `runs`, `screenshot` are the runners `main.rs`
//!   calls, one per subcommand, with their settings from `settings`.
//!
//! Reads the wall clock (for heartbeats) and the process table (is a lease's
//! holder alive?), so it lives here, outside the core.

use std::path::Path;

use crate::room::Room;
use crate::room::view::View;
use crate::engine::{Engine, Recovery, World};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};
use crate::store::{Access, Acquired, Lease, LeaseBeat, LeaseHolder, Liveness, RunMeta, SimWorld, Store, StoreError};

pub mod attach;
pub mod console;
pub mod driver;
pub mod headless;
pub mod output;
pub mod runs;
pub mod screenshot;
pub mod settings;
pub mod whatif;

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

/// The owner's share of each batch: the lease's heartbeat, the commands, and
/// the published view.
pub struct Duty {
    pub holder: LeaseHolder,
    last_publish_ms: i64,
    /// Between batches; `None` for an engine with no log.
    heartbeat: Option<Heartbeat>,
}

impl Duty {
    pub fn new(holder: LeaseHolder) -> Duty {
        Duty { holder, last_publish_ms: i64::MIN, heartbeat: None }
    }

    /// The duty of the engine holding the log at `path`, with its heartbeat thread.
    pub fn owning(holder: LeaseHolder, path: &Path) -> Duty {
        let heartbeat = Heartbeat::start(path, &holder);
        Duty { heartbeat: Some(heartbeat), ..Duty::new(holder) }
    }

    /// Heartbeat, the inbox's new commands queued, then the pending ones
    /// applied (inside the open batch). Returns how many were applied.
    pub fn intake<W: World>(&mut self, engine: &mut Engine<W>, now_ms: i64) -> Result<usize, StoreError> {
        let at = engine.room.now().unwrap_or_else(|| engine.world.start());
        let Some(store) = engine.store.as_mut() else { return Ok(0) };
        store.heartbeat(&self.holder, now_ms)?;
        store.take_inbox(at, now_ms)?;
        Ok(engine.apply_commands(now_ms)?.len())
    }

    /// Whether a view is due for the attached consoles.
    pub fn publish_due(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_publish_ms) >= PUBLISH_EVERY_MS
    }

    pub fn publish<W: World>(&mut self, engine: &mut Engine<W>, view: &View, now_ms: i64) -> Result<(), StoreError> {
        let Some(store) = engine.store.as_mut() else { return Ok(()) };
        store.publish_view(store.last_seq(), view, now_ms)?;
        self.last_publish_ms = now_ms;
        Ok(())
    }

    /// A clean stop: the open batch committed, a snapshot, the lease released.
    pub fn finish<W: World>(&mut self, engine: &mut Engine<W>) -> Result<(), StoreError> {
        engine.end_batch()?;
        if let Some(store) = engine.store.as_mut() {
            store.snapshot(store.last_seq(), &engine.room)?;
            store.release_lease(&self.holder)?;
        }
        // Its connection closes now, so the engine's is the log's last.
        self.heartbeat = None;
        Ok(())
    }
}

/// What `--db FILE` opened.
pub enum Opened {
    /// A new run (`resumed: None`), or an earlier one resumed.
    /// (Boxed: an engine is kilobytes, an attach is a lease row.)
    Owner { engine: Box<Engine<Simulation>>, duty: Duty, resumed: Option<Resumed> },
    /// An engine is alive on this file: attach to it.
    Attach { lease: Lease },
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
        format!(
            "resuming {} ({how}): {} events re-applied, {} queued commands to apply",
            path.display(),
            self.recovery.events,
            self.recovery.pending_commands
        )
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

/// A new event log at `path`, its folder made if needed, shared as
/// `access` says and owned by `owner` from its first moment.
pub fn create_log(path: &Path, meta: &RunMeta, access: &Access, owner: Option<&LeaseHolder>) -> Result<Store, CreateError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CreateError::Other(anyhow::anyhow!("creating {}: {e}", dir.display())))?;
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
                let duty = Duty::owning(me, path);
                return Ok(Opened::Owner { engine: Box::new(Engine::new(new.room, sim, Some(store))), duty, resumed: None });
            }
            // The winner's log is complete and leased: attach to it, as to any live engine's.
            Err(CreateError::Raced) => {}
            Err(CreateError::Other(e)) => return Err(e),
        }
    }
    // A live engine's log is attached to without opening it for writing:
    // an operator of the log's group may read it, never write it.
    if let Ok(Some(lease)) = Store::open_read_only(path).and_then(|s| s.lease())
        && !lease.is_stale(now_ms(), &is_alive)
    {
        return Ok(Opened::Attach { lease });
    }
    let mut store = Store::open_for_writing(path)?;
    let old = match store.acquire_lease(&me, now_ms(), &is_alive) {
        Ok(Acquired::Free) => None,
        Ok(Acquired::TakenOver(lease)) => Some(lease),
        Err(StoreError::Leased { .. }) => {
            let lease = store.lease()?.context("the lease vanished while checking it")?;
            return Ok(Opened::Attach { lease });
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
    let duty = Duty::owning(me, path);
    let (engine, recovery) = Engine::resume(Room::new(meta.room_config), sim, store)?;
    Ok(Opened::Owner { engine: Box::new(engine), duty, resumed: Some(Resumed { from: old, recovery }) })
}
