//! The panes (fleet, memory, queue, market, budget, Slurm), what they share
//! (`shared`: the bordered frame, the column fitter) and their components:
//! the UI state each list keeps (selection, scroll window, drill-down) with
//! what its keys do to it, handing back a `Request` for the App.
//!
//! A pane reads the `View` and UI state it is handed, and draws only inside
//! the `Rect` it is given. It must not compute business figures (those come
//! with the `View`) nor read clocks, files or the environment; nothing here
//! imports the App. This file only declares and re-exports.

pub mod alarm_list;
pub mod budget;
pub mod budget_list;
pub mod fleet;
pub(crate) mod fleet_detail;
mod fleet_grid;
mod fleet_parts;
pub mod fleet_ui;
pub mod job_detail;
pub mod keys;
pub mod market;
pub mod memory;
pub mod queue;
pub mod queue_list;
pub mod shared;
pub mod slurm;
pub mod slurm_list;
mod slurm_nodes;
#[cfg(test)]
pub(crate) mod testing;

pub use fleet_ui::FleetUi;
pub use keys::{KeyInput, KeyPane};
pub use shared::{PaneProps, frame};
