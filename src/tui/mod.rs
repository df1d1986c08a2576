//! The console: ratatui + crossterm. Renders a `View` (and nothing else) and
//! turns keys into UI state changes; holds no business logic.
//!
//! Public surface for the caller (`main.rs`):
//! * `run_console(views, ctx)` — the interactive loop on a tokio runtime;
//! * `App`, `Control`, `draw(frame, app, view, ctx)`, `DrawContext` — to embed
//!   the console elsewhere (tests, a wall display);
//! * `svg::buffer_to_svg`, `svg::render_to_buffer` — screenshots;
//! * `fixture::demo_view()` — a realistic `View` built through the real core.
//!
//! Owns `src/tui/` only. It must not mutate the `View`, read clocks (the run
//! loop measures data age and passes it in), or decide anything about jobs.

pub mod app;
mod chrome;
pub mod command_bar;
pub mod commands;
pub mod confirm;
pub mod confirm_slurm;
mod dialog;
mod draw;
pub mod fixture;
pub mod fixture_large;
pub mod fmt;
mod help;
pub mod input;
pub mod job_order;
pub mod layout;
pub mod log;
pub mod modes;
pub mod panes;
pub mod run;
pub mod slurm_keys;
pub mod svg;
pub mod theme;
pub mod theme_depth;
pub mod theme_file;
pub mod wall;
mod wall_font;

use std::time::Duration;

pub use app::{App, Control, PaneId};
pub use draw::{draw, draw_buffer};
pub use run::run_console;
pub use svg::{buffer_to_svg, render_to_buffer};
pub use theme::Theme;

/// What a frame is drawn with besides the `View` and the `App`: measured or
/// chosen by the caller, so drawing itself stays pure.
#[derive(Clone, Debug)]
pub struct DrawContext {
    /// Where the data comes from, e.g. `SIM seed 1 ×60` or `LIVE dcgm`.
    pub source: String,
    /// Wall-clock time since the last `View` arrived; `None` if unknown.
    pub data_age: Option<Duration>,
    /// Past this age the header shows STALE.
    pub stale_after: Duration,
    pub theme: Theme,
}

impl DrawContext {
    /// Fresh data, STALE after 10 s, theme from the environment (`NO_COLOR`).
    pub fn new(source: impl Into<String>) -> DrawContext {
        DrawContext { source: source.into(), data_age: None, stale_after: Duration::from_secs(10), theme: Theme::from_env() }
    }
}
