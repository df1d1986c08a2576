//! The interactive loop: terminal setup and restore, a std thread reading
//! crossterm events into a tokio channel, and a `select!` over new views,
//! input, the engine's answers to operator actions and a 1 s timer (which
//! also turns the wall display's pages). Redraws only when something changed, at most
//! every `FRAME` (all pending input is drained first), each frame wrapped in
//! a synchronized update so SSH and tmux never show half a frame.
//!
//! Owns the terminal while it runs and nothing else: it never blocks the
//! (current-thread) runtime — blocking reads live on their own thread — and
//! it measures data age from the wall clock here, so `draw` stays pure.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use super::app::{App, Control};
use super::chrome::is_stale;
use super::context::DrawContext;
use super::status::Status;
use super::wall::{WALL_CYCLE, WallState};
use super::whatif::{WhatIfAsk, WhatIfLink, WhatIfUpdate};
use crate::domain::event::Action;
use crate::room::View;

/// The console's line to the engine: operator actions out, and for each one
/// the engine's answer back (what was done, or why it was refused).
pub struct OperatorLink {
    pub actions: mpsc::Sender<Action>,
    pub outcomes: mpsc::Receiver<Result<String, String>>,
    /// The simulated speed, where this console runs the simulation.
    pub speed: Option<watch::Sender<f64>>,
}

/// What the terminal shows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Screen {
    /// The interactive console.
    Console,
    /// The read-only wall display: pages cycle, no key but q does anything.
    Wall,
}

/// The shortest time between two frames (10 frames per second at most).
pub const FRAME: Duration = Duration::from_millis(100);

/// Runs the console until the user quits (q, Ctrl-C) or the engine drops the
/// sender of `views`. `ctx` carries the source label and the theme; the data
/// age in it is measured here. The terminal is restored on every way out,
/// panics included (`ratatui::init`'s hook).
pub async fn run_console(
    views: watch::Receiver<Arc<View>>,
    ctx: DrawContext,
    link: Option<OperatorLink>,
    whatif: Option<WhatIfLink>,
    screen: Screen,
) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init().context("cannot set up the terminal (raw mode, alternate screen)")?;
    let _restore = RestoreOnDrop;
    let (tx, events) = mpsc::channel(256);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = spawn_reader(tx, stop.clone()).context("cannot start the terminal input thread")?;
    let result = event_loop(&mut terminal, views, events, ctx, Links { operator: link, whatif }, screen, |backend, begin| {
        if begin { execute!(backend, BeginSynchronizedUpdate) } else { execute!(backend, EndSynchronizedUpdate) }
    })
    .await;
    // The reader notices within one poll interval; it is not joined so that
    // this never waits on the runtime thread.
    stop.store(true, Ordering::Relaxed);
    drop(reader);
    result
}

struct RestoreOnDrop;

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Reads terminal events on a plain thread (crossterm's read blocks) and
/// forwards them; stops when asked, when the receiver is gone, or on error.
fn spawn_reader(tx: mpsc::Sender<io::Result<Event>>, stop: Arc<AtomicBool>) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("gpuroom-input".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) && !tx.is_closed() {
            match event::poll(FRAME) {
                Ok(false) => continue,
                Ok(true) => {
                    let read = event::read();
                    let failed = read.is_err();
                    if tx.blocking_send(read).is_err() || failed {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    break;
                }
            }
        }
    })
}

/// The engine's next answer; never resolves without a link.
async fn next_outcome(link: &mut Option<OperatorLink>) -> Option<Result<String, String>> {
    match link.as_mut() {
        Some(l) => l.outcomes.recv().await,
        None => std::future::pending().await,
    }
}

/// The next word from the what-if thread; never resolves without one.
async fn next_whatif(link: &mut Option<WhatIfLink>) -> Option<WhatIfUpdate> {
    match link.as_mut() {
        Some(l) => l.updates.recv().await,
        None => std::future::pending().await,
    }
}

/// Asks the what-if thread for a comparison; without one, the pane says why.
fn ask_whatif(link: &Option<WhatIfLink>, words: Vec<String>, app: &mut App) {
    let sent = link.as_ref().is_some_and(|l| l.asks.send(WhatIfAsk { words }).is_ok());
    if !sent {
        app.whatif.update(WhatIfUpdate::Failed("this console cannot compare: it has no log to re-run (--no-log)".into()));
    }
}

/// The console's lines out: to the engine, and to the what-if thread.
pub struct Links {
    pub operator: Option<OperatorLink>,
    pub whatif: Option<WhatIfLink>,
}

/// Hands actions to the engine; without a link (or with it full) the console says so.
fn send(link: &Option<OperatorLink>, actions: Vec<Action>, app: &mut App) {
    let Some(link) = link else {
        app.on_outcome(Err("this console cannot act: no engine connection".into()));
        return;
    };
    for action in actions {
        if link.actions.try_send(action).is_err() {
            app.on_outcome(Err("the engine is busy or gone: action not sent".into()));
            return;
        }
    }
    app.status = Some(Status::hint("sent; waiting for the engine…"));
}

/// Applies one input event; `None` when it changes nothing on screen.
fn handle(event: Event, app: &mut App, view: &View) -> Option<Control> {
    match event {
        Event::Key(key) => Some(app.on_key(key, view)),
        Event::Resize(..) => Some(Control::Continue),
        _ => None,
    }
}

/// When the data in `view` was current, as an instant of this process: now
/// for a view from this process's engine; for one read from another's log,
/// its publication time, so a view published long ago shows its real age
/// (and STALE) from the first frame. The header names the engine it came from.
fn published_at(view: &View, ctx: &mut DrawContext, base_source: &str) -> Instant {
    let Some(publication) = &view.publication else { return Instant::now() };
    ctx.source = format!("{base_source} {}", publication.engine).trim().to_string();
    let age_ms = (chrono::Utc::now().timestamp_millis() - publication.at_ms).max(0);
    let age = Duration::from_millis(u64::try_from(age_ms).unwrap_or(0));
    Instant::now().checked_sub(age).unwrap_or_else(Instant::now)
}

/// The loop proper, generic over the backend so tests can drive it.
/// `sync(backend, begin)` brackets each frame (synchronized update).
pub(crate) async fn event_loop<B, S>(
    terminal: &mut Terminal<B>,
    mut views: watch::Receiver<Arc<View>>,
    mut events: mpsc::Receiver<io::Result<Event>>,
    mut ctx: DrawContext,
    links: Links,
    screen: Screen,
    mut sync: S,
) -> anyhow::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    S: FnMut(&mut B, bool) -> io::Result<()>,
{
    let Links { operator: mut link, whatif: mut whatif_link } = links;
    let mut app = match screen {
        Screen::Wall => App::read_only(),
        Screen::Console if ctx.owns_engine => ctx.speed.map_or_else(App::owning_engine, App::owning_simulation),
        Screen::Console => App::new(),
    };
    // Said on screen, not behind the alternate screen where nobody reads it.
    if let Some(words) = ctx.first_words.take() {
        app.status = Some(words);
    }
    let mut wall = WallState::default();
    let mut wall_since = Instant::now();
    let mut view = views.borrow_and_update().clone();
    // The newest view; `view` is what is shown, held back while paused.
    let mut latest = view.clone();
    let base_source = ctx.source.clone();
    let mut view_arrived = published_at(&view, &mut ctx, &base_source);
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut shown_stale = false;
    let mut timer = tokio::time::interval(Duration::from_secs(1));
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let now = Instant::now();
        let next_frame = last_draw.map_or(now, |t| t + FRAME);
        if dirty && now >= next_frame {
            ctx.data_age = Some(now.saturating_duration_since(view_arrived));
            ctx.paused = app.paused();
            wall.next_in = Some(WALL_CYCLE.saturating_sub(wall_since.elapsed()));
            sync(terminal.backend_mut(), true)?;
            let drawn = terminal
                .draw(|frame| match screen {
                    Screen::Console => super::draw(frame, &app, &view, &ctx),
                    Screen::Wall => {
                        let area = frame.area();
                        super::wall::draw_wall(&view, &wall, &ctx, area, frame.buffer_mut())
                    }
                })
                .map(|_| ());
            sync(terminal.backend_mut(), false)?;
            drawn.context("drawing the console")?;
            last_draw = Some(now);
            dirty = false;
            shown_stale = is_stale(&ctx);
        }
        let next_frame = last_draw.map_or(now, |t| t + FRAME);
        tokio::select! {
            changed = views.changed() => match changed {
                Ok(()) => {
                    latest = views.borrow_and_update().clone();
                    // STALE still says whether the engine is alive while the display is paused.
                    view_arrived = published_at(&latest, &mut ctx, &base_source);
                    if !app.paused() {
                        view = latest.clone();
                    }
                    dirty = true;
                }
                Err(_) => return Ok(()),
            },
            first = events.recv() => {
                let mut next = first;
                // Drain whatever else is queued before drawing once.
                while let Some(event) = next {
                    if let Some(control) = handle(event.context("reading terminal input")?, &mut app, &view) {
                        match control {
                            Control::Quit => return Ok(()),
                            Control::Send(actions) => send(&link, actions, &mut app),
                            Control::Speed(speed) => match link.as_ref().and_then(|l| l.speed.as_ref()) {
                                Some(tx) if tx.send(speed).is_ok() => ctx.speed = Some(speed),
                                _ => app.status = Some(Status::refused("the engine did not take the new speed (it has stopped)")),
                            },
                            Control::WhatIf(words) => ask_whatif(&whatif_link, words, &mut app),
                            Control::Continue => {}
                        }
                        dirty = true;
                    }
                    if !app.paused() && !Arc::ptr_eq(&view, &latest) {
                        view = latest.clone();
                    }
                    next = events.try_recv().ok();
                }
                if events.is_closed() && events.is_empty() {
                    anyhow::bail!("terminal input ended");
                }
            },
            outcome = next_outcome(&mut link) => match outcome {
                Some(outcome) => {
                    app.on_outcome(outcome);
                    dirty = true;
                }
                None => link = None,
            },
            update = next_whatif(&mut whatif_link) => match update {
                Some(update) => {
                    app.whatif.update(update);
                    dirty = true;
                }
                None => whatif_link = None,
            },
            _ = timer.tick() => {
                // Redraw each second while stale (the age counts up), and when it flips.
                let age = Instant::now().saturating_duration_since(view_arrived);
                let stale = age > ctx.stale_after;
                if stale || stale != shown_stale {
                    dirty = true;
                }
                if screen == Screen::Wall {
                    if wall_since.elapsed() >= WALL_CYCLE {
                        wall.advance();
                        wall_since = Instant::now();
                    }
                    // The countdown to the next page moves each second.
                    dirty = true;
                }
            },
            _ = tokio::time::sleep_until(next_frame.into()), if dirty => {},
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::*;
    use crate::tui::Theme;
    use crate::tui::fixture::demo_view;

    fn key(c: char) -> io::Result<Event> {
        Ok(Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
    }

    fn ctx() -> DrawContext {
        DrawContext { theme: Theme::dark(), ..DrawContext::new("TEST") }
    }

    #[tokio::test]
    async fn quits_on_q_after_drawing() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(8);
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let frames = AtomicUsize::new(0);
        tx.send(key('q')).await.unwrap();
        event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: None }, Screen::Console, |_, begin| {
            frames.fetch_add(usize::from(begin), Ordering::Relaxed);
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(frames.load(Ordering::Relaxed), 1, "one frame, bracketed");
        assert!(terminal.backend().buffer().content.iter().any(|c| c.symbol() == "▲"));
    }

    /// Issue 35, item 9: a bad theme's error is on screen, not lost behind
    /// the alternate screen.
    #[tokio::test]
    async fn the_first_words_are_on_the_first_frame() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(8);
        let mut terminal = Terminal::new(TestBackend::new(100, 24)).unwrap();
        tx.send(key('q')).await.unwrap();
        let said = DrawContext { first_words: Some(Status::refused("theme not used, falling back to dark: t.toml:2:1: text: no colour \"mauve\"")), ..ctx() };
        event_loop(&mut terminal, views, rx, said, Links { operator: None, whatif: None }, Screen::Console, |_, _| Ok(())).await.unwrap();
        let shown: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(shown.contains("theme not used, falling back to dark: t.toml:2:1"), "{shown}");
    }

    #[tokio::test]
    async fn returns_when_the_engine_goes_away() {
        let (views_tx, views) = watch::channel(Arc::new(View::default()));
        let (_tx, rx) = mpsc::channel(8);
        let mut terminal = Terminal::new(TestBackend::new(40, 10)).unwrap();
        drop(views_tx);
        event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: None }, Screen::Console, |_, _| Ok(())).await.unwrap();
    }

    #[tokio::test]
    async fn a_burst_of_views_costs_few_frames() {
        let (views_tx, views) = watch::channel(Arc::new(View::default()));
        let (tx, rx) = mpsc::channel(8);
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let frames = AtomicUsize::new(0);
        let demo = Arc::new(demo_view());
        let feeder = async {
            for _ in 0..200 {
                views_tx.send(demo.clone()).unwrap();
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(FRAME * 2).await;
            tx.send(key('x')).await.unwrap();
            tx.send(key('q')).await.unwrap();
        };
        let run = event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: None }, Screen::Console, |_, begin| {
            frames.fetch_add(usize::from(begin), Ordering::Relaxed);
            Ok(())
        });
        let started = Instant::now();
        let (result, ()) = tokio::join!(run, feeder);
        result.unwrap();
        let n = frames.load(Ordering::Relaxed);
        let most = (started.elapsed().as_millis() / FRAME.as_millis()) as usize + 2;
        assert!((1..=most).contains(&n), "{n} frames for 200 views; at most {most} allowed at one per {FRAME:?}");
        assert!(terminal.backend().buffer().content.iter().any(|c| c.symbol() == "▲"), "the last view is on screen");
    }

    /// Issue 35, item 7: Space freezes the display on the view it showed
    /// (PAUSED in the header) while newer views arrive; Space again shows the newest.
    #[tokio::test]
    async fn space_pauses_the_display_and_space_again_shows_the_newest_view() {
        let first = demo_view();
        let mut later = demo_view();
        later.at = first.at.map(|at| at + chrono::TimeDelta::hours(5));
        let clock = |v: &View| crate::tui::fmt::clock(v.at.unwrap());
        let (views_tx, views) = watch::channel(Arc::new(first.clone()));
        let (tx, rx) = mpsc::channel(8);
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let mut frames: Vec<String> = Vec::new();
        let driver = async {
            tx.send(key(' ')).await.unwrap();
            tokio::time::sleep(FRAME * 2).await;
            views_tx.send(Arc::new(later.clone())).unwrap();
            tokio::time::sleep(FRAME * 3).await;
            tx.send(key(' ')).await.unwrap();
            tokio::time::sleep(FRAME * 3).await;
            tx.send(key('q')).await.unwrap();
        };
        // Each finished frame, as text.
        let looped = event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: None }, Screen::Console, |backend, begin| {
            if !begin {
                frames.push(backend.buffer().content.iter().map(|c| c.symbol()).collect());
            }
            Ok(())
        });
        let (result, ()) = tokio::join!(looped, driver);
        result.unwrap();
        let paused: Vec<&String> = frames.iter().filter(|f| f.contains("PAUSED")).collect();
        assert!(!paused.is_empty(), "no frame said PAUSED");
        assert!(paused.iter().all(|f| f.contains(&clock(&first)) && !f.contains(&clock(&later))), "a paused frame moved on");
        let last = frames.last().unwrap();
        assert!(last.contains(&clock(&later)) && !last.contains("PAUSED"), "resumed on the newest view:\n{last}");
    }

    #[tokio::test]
    async fn a_confirmed_action_goes_to_the_engine_and_its_answer_is_shown() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(8);
        let (actions, mut engine_side) = mpsc::channel(4);
        let (answers, outcomes) = mpsc::channel(4);
        let link = OperatorLink { actions, outcomes, speed: None };
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let engine = async {
            for c in ['3', 'p', 'y'] {
                tx.send(key(c)).await.unwrap();
            }
            let action = engine_side.recv().await.expect("the action reaches the engine");
            answers.send(Ok(format!("{} done", action.verb()))).await.unwrap();
            tokio::time::sleep(FRAME * 3).await;
            tx.send(key('q')).await.unwrap();
            action
        };
        let run = event_loop(&mut terminal, views, rx, ctx(), Links { operator: Some(link), whatif: None }, Screen::Console, |_, _| Ok(()));
        let (result, action) = tokio::join!(run, engine);
        result.unwrap();
        assert!(matches!(action, Action::Preempt { .. }), "{action:?}");
        let screen: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(screen.contains("✓ preempt done"), "the engine's answer is on the status line");
    }

    #[tokio::test]
    async fn w_asks_the_whatif_thread_and_its_answer_fills_the_pane() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(8);
        let (asks, mut thread_side) = mpsc::unbounded_channel();
        let (updates_tx, updates) = mpsc::channel(8);
        let whatif = WhatIfLink { asks, updates };
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let thread = async {
            tx.send(key('W')).await.unwrap();
            let ask = thread_side.recv().await.expect("the ask reaches the thread");
            updates_tx.send(WhatIfUpdate::Progress { stage: "re-running under drf".into(), done: 0.4 }).await.unwrap();
            updates_tx.send(WhatIfUpdate::Done(Box::new(super::super::whatif_draw::demo_comparison()))).await.unwrap();
            tokio::time::sleep(FRAME * 3).await;
            tx.send(key('q')).await.unwrap();
            ask
        };
        let run = event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: Some(whatif) }, Screen::Console, |_, _| Ok(()));
        let (result, ask) = tokio::join!(run, thread);
        result.unwrap();
        assert_eq!(ask, WhatIfAsk { words: Vec::new() });
        let screen: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(screen.contains("What if: every discipline") && screen.contains("P95 queue wait"), "{screen}");
    }

    #[tokio::test]
    async fn without_a_log_the_pane_says_why_it_cannot_compare() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(8);
        for c in ['W'] {
            tx.send(key(c)).await.unwrap();
        }
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let quit = async {
            tokio::time::sleep(FRAME * 3).await;
            tx.send(key('q')).await.unwrap();
        };
        let run = event_loop(&mut terminal, views, rx, ctx(), Links { operator: None, whatif: None }, Screen::Console, |_, _| Ok(()));
        let (result, ()) = tokio::join!(run, quit);
        result.unwrap();
        let screen: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(screen.contains("no log to re-run"), "{screen}");
    }

    #[tokio::test]
    async fn the_wall_sends_nothing_whatever_is_typed() {
        let (_views_tx, views) = watch::channel(Arc::new(demo_view()));
        let (tx, rx) = mpsc::channel(16);
        let (actions, mut engine_side) = mpsc::channel(4);
        let (_answers, outcomes) = mpsc::channel(4);
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        for c in ['3', 'p', 'y', 'r', 'y', ':', 'X', 'y', 'q'] {
            tx.send(key(c)).await.unwrap();
        }
        let link = OperatorLink { actions, outcomes, speed: None };
        event_loop(&mut terminal, views, rx, ctx(), Links { operator: Some(link), whatif: None }, Screen::Wall, |_, _| Ok(())).await.unwrap();
        assert!(engine_side.try_recv().is_err(), "no action left the wall");
        let screen: String = terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect();
        assert!(screen.contains("read-only") && !screen.contains("Confirm"));
    }

    /// Runs the real console on the demo view in whatever terminal runs the
    /// test (for a look in tmux): `cargo test --lib tui::run::tests::live -- --ignored`.
    /// The view is republished every 100 ms, its clock moving one second each time.
    #[tokio::test(flavor = "current_thread")]
    #[ignore]
    async fn live_console_on_the_demo_view() {
        let demo = demo_view();
        let (tx, views) = watch::channel(Arc::new(demo.clone()));
        let feeder = tokio::spawn(async move {
            for i in 1..600 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let mut v = demo.clone();
                v.at = v.at.map(|a| a + chrono::TimeDelta::seconds(i));
                if tx.send(Arc::new(v)).is_err() {
                    break;
                }
            }
        });
        run_console(views, DrawContext::new("DEMO ×10"), None, None, Screen::Console).await.unwrap();
        feeder.abort();
    }
}
