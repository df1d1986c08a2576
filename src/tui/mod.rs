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
//!
//! The modules import one way, never round a circle: plain values at the
//! bottom (`pane_id`, `selection`, `status`, `theme`, `palette`, `fmt`,
//! `input`), then the key table (`commands`), the command bar and the
//! confirmation wording, `request` and `modes`, the panes and their
//! components (`panes::*`), the `App` that owns the components and applies
//! their requests, and on top the drawing that reads the App (`draw`,
//! `chrome`, `dialog`, `help`, `layout`, `svg`, `wall`, `run`). This file
//! only declares modules and re-exports.

pub mod app;
mod chrome;
pub mod command_bar;
pub mod commands;
pub mod confirm;
pub mod confirm_slurm;
pub mod context;
mod dialog;
mod draw;
pub mod fixture;
pub mod fixture_large;
pub mod fixture_trace;
pub mod fmt;
mod help;
pub mod input;
pub mod job_order;
pub mod layout;
pub mod log;
pub mod modes;
pub mod palette;
pub mod pane_id;
pub mod panes;
pub mod request;
pub mod run;
pub mod selection;
pub mod slurm_keys;
pub mod status;
pub mod svg;
pub mod theme;
pub mod theme_depth;
pub mod theme_file;
pub mod wall;
mod wall_font;
pub mod whatif;
mod whatif_draw;

pub use app::{App, Control};
pub use context::DrawContext;
pub use draw::{draw, draw_buffer};
pub use pane_id::PaneId;
pub use run::run_console;
pub use status::Status;
pub use svg::{buffer_to_svg, render_to_buffer};
pub use theme::Theme;
