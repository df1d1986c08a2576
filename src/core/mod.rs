//! The deterministic core: the `Room` state machine, its `Event`s and
//! `Effect`s, the domain types and the `View` the console draws.
//!
//! Owns the control-plane state. Must not touch IO, clocks, randomness, tokio
//! or SQLite (a test scans these modules for such imports); time and
//! randomness come in with events.

pub mod cluster;
pub mod event;
pub mod ids;
pub mod job;
pub mod room;
mod room_budget;
mod room_cost;
mod room_ops;
pub mod room_sources;
pub mod room_forecast;
pub mod room_predict;
pub mod room_spot;
pub(crate) mod room_sched;
pub mod room_slurm;
#[cfg(test)]
mod room_slurm_tests;
pub mod serde_pairs;
pub mod slurm;
pub mod testkit;
pub mod text;
pub mod units;
pub mod view;
pub mod view_slurm;

pub use event::{Action, Actor, Effect, Event, Role};
pub use room::{Room, RoomConfig};
pub use view::View;
