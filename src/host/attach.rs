//! A console on another engine's log: the link that feeds it the published
//! views (stamped with when, and by which engine, they were published) and,
//! for an operator, carries its actions into the log's command inbox and
//! the engine's answers back. Both open the log read-only; a wall display
//! gets no command path at all (and its actor is a viewer, so
//! the engine would refuse it anyway).
//!
//! Runs on its own thread: SQLite calls block, and the console must not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::now_ms;
use crate::domain::event::{Action, Actor};
use crate::room::view::{Publication, View};
use crate::store::{Attached, CommandState, Lease, Published, Store, StoreError};
use crate::tui::run::OperatorLink;

/// How often the link looks for a newer view and for answers.
const POLL: Duration = Duration::from_millis(200);
/// How long to wait for an engine's first view.
const FIRST_VIEW: Duration = Duration::from_secs(5);

/// What an attached console gets.
pub struct AttachedConsole {
    pub views: watch::Receiver<Arc<View>>,
    /// `None` for a wall display.
    pub operator: Option<OperatorLink>,
    stop: Arc<AtomicBool>,
}

impl Drop for AttachedConsole {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The two ways in: read-write for commands, or read-only.
enum Conn {
    Operator(Attached),
    Wall(Store),
}

impl Conn {
    fn latest_view(&self, after_ms: i64) -> Result<Option<Published>, StoreError> {
        match self {
            Conn::Operator(a) => a.latest_view(after_ms),
            Conn::Wall(s) => s.latest_view(after_ms),
        }
    }
    fn lease(&self) -> Result<Option<Lease>, StoreError> {
        match self {
            Conn::Operator(a) => a.lease(),
            Conn::Wall(s) => s.lease(),
        }
    }
}

/// Attaches to the log at `path`: as `actor` (an operator console), or read
/// only when `actor` is `None` (a wall). Waits for the engine's first view.
pub fn attach(path: &Path, actor: Option<Actor>) -> anyhow::Result<AttachedConsole> {
    let conn = match &actor {
        Some(_) => Conn::Operator(Attached::open(path)?),
        None => Conn::Wall(Store::open_read_only(path)?),
    };
    let lease = conn.lease()?;
    let deadline = Instant::now() + FIRST_VIEW;
    let first = loop {
        if let Some(published) = conn.latest_view(i64::MIN)? {
            break published;
        }
        if Instant::now() > deadline {
            let who = lease.as_ref().map_or_else(|| "no engine holds it".to_string(), |l| format!("its engine is {}", l.holder));
            anyhow::bail!("{}: no view has been published ({who}); is the engine running?", path.display());
        }
        std::thread::sleep(POLL);
    };
    let engine = engine_label(lease.as_ref());
    let (views_tx, views) = watch::channel(Arc::new(stamped(first.view, first.published_ms, &engine)));
    let stop = Arc::new(AtomicBool::new(false));
    let (operator, orders) = match actor {
        Some(actor) => {
            let (actions, actions_rx) = mpsc::channel(16);
            let (outcomes_tx, outcomes) = mpsc::channel(16);
            (Some(OperatorLink { actions, outcomes }), Some(Orders { actor, actions: actions_rx, outcomes: outcomes_tx, waiting: Vec::new() }))
        }
        None => (None, None),
    };
    let link = Link { conn, path: path.to_path_buf(), views: views_tx, last_ms: first.published_ms, engine, orders, stop: stop.clone() };
    std::thread::Builder::new().name("gpuroom-attach".into()).spawn(move || link.run())?;
    Ok(AttachedConsole { views, operator, stop })
}

/// "pid N" of the lease's holder, or "no engine" when none holds it.
fn engine_label(lease: Option<&Lease>) -> String {
    lease.map_or_else(|| "no engine".to_string(), |l| format!("pid {}", l.holder.pid))
}

/// The view with where it came from: its age counts from its publication,
/// not from when this console read it.
fn stamped(mut view: View, published_ms: i64, engine: &str) -> View {
    view.publication = Some(Publication { at_ms: published_ms, engine: engine.to_string() });
    view
}

/// An operator's actions in flight.
struct Orders {
    actor: Actor,
    actions: mpsc::Receiver<Action>,
    outcomes: mpsc::Sender<Result<String, String>>,
    /// Submitted commands (tickets) not yet answered.
    waiting: Vec<String>,
}

struct Link {
    conn: Conn,
    path: PathBuf,
    views: watch::Sender<Arc<View>>,
    last_ms: i64,
    /// The engine the header names; a new one after a takeover.
    engine: String,
    orders: Option<Orders>,
    stop: Arc<AtomicBool>,
}

impl Link {
    fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) && !self.views.is_closed() {
            // Another engine may have taken the log over since the last look.
            let engine = self.conn.lease().map(|l| engine_label(l.as_ref())).unwrap_or_else(|_| self.engine.clone());
            let changed_engine = engine != self.engine;
            self.engine = engine;
            match self.conn.latest_view(self.last_ms) {
                Ok(Some(published)) => {
                    self.last_ms = published.published_ms;
                    let _ = self.views.send(Arc::new(stamped(published.view, published.published_ms, &self.engine)));
                }
                Ok(None) if changed_engine => {
                    let mut view = (**self.views.borrow()).clone();
                    if let Some(p) = view.publication.as_mut() {
                        p.engine = self.engine.clone();
                    }
                    let _ = self.views.send(Arc::new(view));
                }
                Ok(None) => {}
                // A view that does not decode is skipped; the console shows the data aging.
                Err(_) => {}
            }
            if let (Some(orders), Conn::Operator(attached)) = (self.orders.as_mut(), &self.conn) {
                orders.exchange(attached, &self.path);
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Orders {
    /// Submits new actions and hands back the answers that arrived.
    fn exchange(&mut self, attached: &Attached, path: &Path) {
        while let Ok(action) = self.actions.try_recv() {
            match attached.submit(&self.actor, &action, now_ms()) {
                Ok(ticket) => self.waiting.push(ticket),
                Err(e) => {
                    let _ = self.outcomes.try_send(Err(format!("not queued for the engine: {e}")));
                }
            }
        }
        let outcomes = &self.outcomes;
        self.waiting.retain(|id| match attached.state(id) {
            Ok(Some(CommandState::Applied { detail, .. })) => {
                let _ = outcomes.try_send(Ok(detail));
                false
            }
            Ok(Some(CommandState::Refused { reason, .. })) => {
                let _ = outcomes.try_send(Err(reason));
                false
            }
            Ok(Some(CommandState::Pending)) => true,
            Ok(None) | Err(_) => {
                let _ = outcomes.try_send(Err(format!("command {id} is no longer in {}", path.display())));
                false
            }
        });
    }
}
