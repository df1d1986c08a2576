//! A console on another engine's log: the link that feeds it the published
//! views (stamped with when, and by which engine, they were published) and,
//! for an operator, carries its actions to the engine and the engine's
//! answers back, through the engine's socket (`client`); it never opens
//! the log while an engine runs. A wall display asks for views only, and
//! its actor is a viewer, so the engine would refuse it anyway.
//!
//! When the engine goes away the link keeps the last view (the console
//! shows it aging, then STALE) and connects again to whichever engine takes
//! the log over, asking how the commands it was waiting for ended. A wall
//! on a log no engine runs reads the last view the log holds, where it may
//! read the log at all (its owner).
//!
//! Runs on its own thread: the console must not wait on a socket or a file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::client::{Client, ConnectError};
use crate::domain::event::{Action, Actor, Role};
use crate::room::view::{Publication, View};
use crate::store::{CommandState, Published, Store};
use crate::tui::run::OperatorLink;

/// How often the link looks for a newer view and for answers.
const POLL: Duration = Duration::from_millis(200);
/// How long to wait for an engine's first view.
const FIRST_VIEW: Duration = Duration::from_secs(5);
/// How often a link whose engine went away tries again.
const RECONNECT: Duration = Duration::from_secs(1);

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

/// Where the views come from.
enum Source {
    Engine(Client),
    /// No engine answers: the last view the log holds (a wall of its owner's).
    Log(Box<Store>),
    None,
}

/// Attaches to the engine of the log at `path`: as `actor` (an operator
/// console), or for views only when `actor` is `None` (a wall). Waits for
/// the engine's first view.
pub fn attach(path: &Path, actor: Option<Actor>) -> anyhow::Result<AttachedConsole> {
    let wall = actor.is_none();
    let claimed = actor.clone().unwrap_or_else(|| crate::operator::actor_from_env(Role::Viewer));
    let (source, engine) = match Client::connect(path, &claimed, true) {
        Ok(client) => {
            let engine = engine_label(&client);
            (Source::Engine(client), engine)
        }
        Err(ConnectError::NoEngine(why)) if wall => match Store::open_read_only(path) {
            Ok(store) => (Source::Log(Box::new(store)), "no engine".to_string()),
            Err(e) => anyhow::bail!("{why}; and the log cannot be read here ({e})"),
        },
        Err(e) => return Err(e.into()),
    };
    let deadline = Instant::now() + FIRST_VIEW;
    let first = loop {
        if let Some(published) = latest(&source, i64::MIN) {
            break published;
        }
        if let Source::Engine(c) = &source
            && let Some(why) = c.closed()
        {
            anyhow::bail!("{}: the engine closed the connection: {why}", path.display());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{}: no view has been published (its engine is {engine}); is the engine running?", path.display());
        }
        std::thread::sleep(POLL);
    };
    let (views_tx, views) = watch::channel(Arc::new(stamped(first.view, first.published_ms, &engine)));
    let stop = Arc::new(AtomicBool::new(false));
    let (operator, orders) = match actor {
        Some(_) => {
            let (actions, actions_rx) = mpsc::channel(16);
            let (outcomes_tx, outcomes) = mpsc::channel(16);
            (Some(OperatorLink { actions, outcomes, speed: None }), Some(Orders { actions: actions_rx, outcomes: outcomes_tx, waiting: HashMap::new() }))
        }
        None => (None, None),
    };
    let link = Link {
        source,
        claimed,
        path: path.to_path_buf(),
        views: views_tx,
        last_ms: first.published_ms,
        engine,
        orders,
        stop: stop.clone(),
        last_try: Instant::now(),
    };
    std::thread::Builder::new().name("gpuroom-attach".into()).spawn(move || link.run())?;
    Ok(AttachedConsole { views, operator, stop })
}

fn latest(source: &Source, after_ms: i64) -> Option<Published> {
    match source {
        Source::Engine(c) => c.latest_view(after_ms),
        Source::Log(s) => s.latest_view(after_ms).ok().flatten(),
        Source::None => None,
    }
}

/// "pid N" of the engine a client talks to.
fn engine_label(client: &Client) -> String {
    format!("pid {}", client.engine.pid)
}

/// The view with where it came from: its age counts from its publication,
/// not from when this console read it.
fn stamped(mut view: View, published_ms: i64, engine: &str) -> View {
    view.publication = Some(Publication { at_ms: published_ms, engine: engine.to_string() });
    view
}

/// An operator's actions in flight.
struct Orders {
    actions: mpsc::Receiver<Action>,
    outcomes: mpsc::Sender<Result<String, String>>,
    /// Sent commands not yet answered, by ticket, with the action (sent
    /// again under the same ticket to an engine that took over: applied
    /// once, whichever engine had it).
    waiting: HashMap<String, Action>,
}

struct Link {
    source: Source,
    claimed: Actor,
    path: PathBuf,
    views: watch::Sender<Arc<View>>,
    last_ms: i64,
    /// The engine the header names; a new one after a takeover.
    engine: String,
    orders: Option<Orders>,
    stop: Arc<AtomicBool>,
    last_try: Instant,
}

impl Link {
    fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) && !self.views.is_closed() {
            self.keep_connected();
            if let Some(published) = latest(&self.source, self.last_ms) {
                self.last_ms = published.published_ms;
                let _ = self.views.send(Arc::new(stamped(published.view, published.published_ms, &self.engine)));
            }
            if let (Some(orders), Source::Engine(client)) = (self.orders.as_mut(), &self.source) {
                orders.exchange(client);
            } else if let Some(orders) = self.orders.as_mut() {
                orders.refuse_while_away(&self.path);
            }
            std::thread::sleep(POLL);
        }
    }

    /// A connection that ended is tried again every second; the header
    /// names the engine (or none) as it changes.
    fn keep_connected(&mut self) {
        let gone = match &self.source {
            Source::Engine(c) => c.closed().is_some(),
            Source::Log(_) | Source::None => true,
        };
        if !gone || self.last_try.elapsed() < RECONNECT {
            return;
        }
        self.last_try = Instant::now();
        let was = self.engine.clone();
        match Client::connect(&self.path, &self.claimed, true) {
            Ok(client) => {
                self.engine = engine_label(&client);
                if let Some(orders) = self.orders.as_ref() {
                    for (ticket, action) in &orders.waiting {
                        let _ = client.submit_as(ticket, action);
                    }
                }
                self.source = Source::Engine(client);
            }
            Err(_) if matches!(self.source, Source::Engine(_)) => {
                self.source = Source::None;
                self.engine = "no engine".to_string();
            }
            Err(_) => {}
        }
        if self.engine != was {
            let mut view = (**self.views.borrow()).clone();
            if let Some(p) = view.publication.as_mut() {
                p.engine = self.engine.clone();
            }
            let _ = self.views.send(Arc::new(view));
        }
    }
}

impl Orders {
    /// Sends new actions and hands back the answers that arrived.
    fn exchange(&mut self, client: &Client) {
        while let Ok(action) = self.actions.try_recv() {
            match client.submit(&action) {
                Ok(ticket) => {
                    self.waiting.insert(ticket, action);
                }
                Err(e) => {
                    let _ = self.outcomes.try_send(Err(format!("not sent to the engine: {e}")));
                }
            }
        }
        let outcomes = &self.outcomes;
        self.waiting.retain(|ticket, _| match client.take_answer(ticket) {
            Some(Some(CommandState::Applied { detail, .. })) => {
                let _ = outcomes.try_send(Ok(detail));
                false
            }
            Some(Some(CommandState::Refused { reason, .. })) => {
                let _ = outcomes.try_send(Err(reason));
                false
            }
            Some(None) => {
                let _ = outcomes.try_send(Err(format!("the engine has no command {ticket}")));
                false
            }
            Some(Some(CommandState::Pending)) | None => true,
        });
    }

    /// No engine to send to: a new action is refused at once, plainly.
    fn refuse_while_away(&mut self, path: &Path) {
        while let Ok(_action) = self.actions.try_recv() {
            let _ = self.outcomes.try_send(Err(format!("not sent: no engine is running on {} right now (waiting for one to take it over)", path.display())));
        }
    }
}
