//! `gpuroom screenshot`: the console (or the wall) after a simulated
//! warm-up, rendered to an SVG file, with a pane zoomed or a dialog open as
//! the keys would leave it. The README's and `screenshots/`'s pictures are
//! made this way, so they are the code's own.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::settings::{self, Policy, WorldChoice};
use crate::room::View;
use crate::sim::Traces;
use crate::tui::{App, PaneId};

/// What to draw.
#[derive(Clone, Debug)]
pub struct Shot {
    pub width: u16,
    pub height: u16,
    pub hours: f64,
    pub theme: String,
    pub pane: Option<String>,
    pub wall: Option<usize>,
    pub dialog: Option<String>,
    /// A benchmark's room instead of the simulation (`--hours` does not apply).
    pub room: Option<crate::bench::Scale>,
}

/// The console as the keys would leave it: a pane zoomed, a dialog open.
fn app_for(view: &View, shot: &Shot) -> Result<App> {
    let mut app = App::new();
    if let Some(name) = &shot.pane {
        let pane = PaneId::ALL.into_iter().find(|p| p.command_name() == name).ok_or_else(|| anyhow::anyhow!("unknown pane {name:?}"))?;
        app.show(pane, true);
    }
    let Some(dialog) = &shot.dialog else { return Ok(app) };
    let press = |app: &mut App, c: KeyCode| {
        let _ = app.on_key(KeyEvent::new(c, KeyModifiers::NONE), view);
    };
    // The queue puts waiting jobs first: walk down to the first job that
    // matches (a running one for the job actions), if there is one.
    let select = |app: &mut App, wanted: &dyn Fn(&crate::room::view::JobRow) -> bool| {
        for _ in 0..view.jobs.len() {
            if app.selected_job(view).and_then(|id| view.jobs.iter().find(|j| j.id == id)).is_some_and(wanted) {
                return;
            }
            let _ = app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), view);
        }
    };
    let on_running = |app: &mut App| {
        app.show(PaneId::Queue, false);
        select(app, &|j| j.phase == crate::domain::job::Phase::Running);
    };
    match dialog.as_str() {
        "preempt" | "requeue" | "migrate" => {
            on_running(&mut app);
            let key = dialog.chars().next().unwrap_or('p');
            press(&mut app, KeyCode::Char(key));
        }
        "approve" => {
            app.focus_on(PaneId::Budget);
            press(&mut app, KeyCode::Char('a'));
            for c in "50".chars() {
                press(&mut app, KeyCode::Char(c));
            }
            press(&mut app, KeyCode::Tab);
            press(&mut app, KeyCode::Tab);
            for c in "paper deadline on Friday".chars() {
                press(&mut app, KeyCode::Char(c));
            }
        }
        "command" => {
            press(&mut app, KeyCode::Char(':'));
            for c in "migrate ".chars() {
                press(&mut app, KeyCode::Char(c));
            }
            press(&mut app, KeyCode::Tab);
        }
        // Filled in by `run_screenshot` once the comparison is made.
        "whatif" => {}
        // `Enter` on a job: the longest-waiting one, or one running on spot.
        "detail-waiting" | "detail-spot" => {
            app.show(PaneId::Queue, true);
            if dialog == "detail-spot" {
                select(&mut app, &|j| view.spot_jobs.iter().any(|s| s.id == j.id));
            }
            press(&mut app, KeyCode::Enter);
        }
        // The console that runs the engine asks before q stops it.
        "quit" => {
            app = App::owning_engine();
            press(&mut app, KeyCode::Char('q'));
        }
        other => bail!("unknown dialog {other:?} (preempt, requeue, migrate, approve, command, whatif, quit, detail-waiting, detail-spot)"),
    }
    Ok(app)
}

/// The what-if pane as `W` leaves it once done: the warm-up recorded to a
/// temporary log, re-run under every discipline.
fn whatif_pane(world: &WorldChoice, policy: &Policy, traces: &Traces, hours: f64) -> Result<(View, crate::tui::whatif::WhatIfPane)> {
    let dir = std::env::temp_dir().join(format!("gpuroom-shot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = dir.join("warmup.db");
    let made = (|| -> Result<_> {
        let mut engine = super::runs::build(world, policy, Some(&log), traces)?;
        let start = engine.world.config().start;
        engine.run_until(start + settings::hours(hours)?)?;
        let view = engine.room.view();
        drop(engine);
        let store = crate::store::Store::open_read_only(&log)?;
        let scenarios = super::whatif::scenarios(&store.meta()?.room_config, &[], &crate::sched::DisciplineKind::ALL, &[])?;
        let comparison =
            crate::whatif::compare(&store, &format!("sim-seed{}.db", world.seed), &scenarios, Default::default(), Default::default(), &mut |_| {})?;
        let state = crate::tui::whatif::PaneState::Done(Box::new(comparison));
        Ok((view, crate::tui::whatif::WhatIfPane { shown: true, asked: "every discipline".into(), state }))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    made
}

pub fn run_screenshot(world: &WorldChoice, policy: &Policy, out: &Path, shot: &Shot) -> Result<()> {
    let traces = Traces::embedded().context("parsing the embedded traces")?;
    let (view, whatif) = if let Some(scale) = shot.room {
        (scale.screenshot_room().view(), None)
    } else if shot.dialog.as_deref() == Some("whatif") {
        let (view, pane) = whatif_pane(world, policy, &traces, shot.hours)?;
        (view, Some(pane))
    } else {
        let mut engine = super::runs::build(world, policy, None, &traces)?;
        let start = engine.world.config().start;
        engine.run_until(start + settings::hours(shot.hours)?)?;
        (engine.room.view(), None)
    };
    // As the console that runs the simulation draws it (SIMULATED, seed, ×60).
    let label = match shot.room {
        Some(scale) => format!("{} room", scale.name()),
        None => format!("seed {}", world.seed),
    };
    let mut ctx = crate::tui::DrawContext::new(label);
    ctx.speed = Some(60.0);
    ctx.data_age = Some(Duration::from_millis(400));
    ctx.simulated = true;
    ctx.theme = crate::tui::theme_file::load(&shot.theme)?;
    let (width, height) = (shot.width, shot.height);
    let buffer = match shot.wall {
        Some(page) => {
            let mut buffer = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, width, height));
            let wall = crate::tui::wall::WallState { page, next_in: Some(Duration::from_secs(12)) };
            crate::tui::wall::draw_wall(&view, &wall, &ctx, buffer.area, &mut buffer);
            buffer
        }
        None => {
            let mut app = app_for(&view, shot)?;
            if let Some(pane) = whatif {
                app.set_whatif(pane);
            }
            crate::tui::render_to_buffer(&view, &app, &ctx, width, height)
        }
    };
    // The canvas is the terminal the theme is made for (dark unless it says).
    let hex = crate::tui::svg::color_hex;
    let bg = hex(ctx.theme.background, crate::tui::svg::DEFAULT_BG);
    let fg = hex(ctx.theme.text.fg.unwrap_or(ratatui::style::Color::Reset), crate::tui::svg::DEFAULT_FG);
    super::output::write_bytes(out, None, crate::tui::svg::buffer_to_svg_with(&buffer, &fg, &bg).as_bytes())?;
    match shot.room {
        Some(scale) => println!("wrote {} ({width}×{height}, the bench's {} room)", super::runs::shown(out), scale.name()),
        None => println!("wrote {} ({width}×{height}, after {} simulated hours)", super::runs::shown(out), shot.hours),
    }
    Ok(())
}
