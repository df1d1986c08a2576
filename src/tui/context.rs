//! `DrawContext`: what a frame is drawn with besides the `View` and the
//! `App` (source label, data age, staleness threshold, theme).
//!
//! Owns this plain value only, so that every drawing module can take it
//! without importing the console's root. It must not read clocks or the
//! environment itself, except `Theme::from_env` in `new`.

use std::time::Duration;

use super::theme::Theme;

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
    /// This console runs the engine (not attached to another's): quitting
    /// stops it, so `q` asks first.
    pub owns_engine: bool,
    /// The display is frozen on an older view (the header says PAUSED).
    pub paused: bool,
    /// The data is a simulated cluster's (the header says SIMULATED); an
    /// attached console also learns it from each view's `world`.
    pub simulated: bool,
    /// The event log this console's engine writes or reads, for `?`.
    pub log_path: Option<String>,
    /// The simulated speed of the engine this console runs (the header
    /// says `×60`; `+` and `-` change it); `None` elsewhere.
    pub speed: Option<f64>,
    /// Said on the status line when the console opens (a theme file that
    /// could not be used), until the first key.
    pub first_words: Option<super::status::Status>,
}

impl DrawContext {
    /// Whether what is drawn is a simulated cluster's: this console's own
    /// engine says so, or the view does.
    pub fn shows_simulation(&self, view: &crate::room::View) -> bool {
        self.simulated || view.world.as_deref() == Some("sim")
    }
}

impl DrawContext {
    /// Fresh data, STALE after 10 s, theme from the environment (`NO_COLOR`).
    pub fn new(source: impl Into<String>) -> DrawContext {
        DrawContext {
            source: source.into(),
            data_age: None,
            stale_after: Duration::from_secs(10),
            theme: Theme::from_env(),
            owns_engine: false,
            paused: false,
            simulated: false,
            log_path: None,
            speed: None,
            first_words: None,
        }
    }
}
