//! The read-only wall display (`gpuroom --wall`): a large, legible layout for
//! the operations room that cycles through the panes on a timer, with alarms
//! shown prominently, a clock and the data's age.
//!
//! Pure drawing, like `draw`: it reads the `View`, the `WallState` (which page)
//! and the `DrawContext`, and never a clock. It has no keys: the run loop
//! ignores every action key in wall mode and the engine refuses actions from
//! a viewer anyway.

use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::DrawContext;
use crate::core::View;

/// How long each page stays on the wall before the next one.
pub const WALL_CYCLE: Duration = Duration::from_secs(15);

/// Which page the wall shows; the run loop advances it every `WALL_CYCLE`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WallState {
    pub page: usize,
}

/// Draws the wall display into `buf`.
pub fn draw_wall(view: &View, wall: &WallState, ctx: &DrawContext, area: Rect, buf: &mut Buffer) {
    let _ = (view, wall, ctx, area, buf);
}
