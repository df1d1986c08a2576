//! The ground floor: the plain data of the domain — ids, units, text, the
//! cluster, jobs, tenants, Slurm's snapshot — and the vocabulary the room
//! speaks (`Event` in, `Effect` out, operator `Action`s).
//!
//! Imports nothing of the crate (a test, `tests/layers.rs`, keeps it so).
//! Must not touch IO, clocks, randomness, tokio or SQLite (`tests/core_purity.rs`).

pub mod capacity;
pub mod cluster;
pub mod discipline;
pub mod event;
pub mod hostlist;
pub mod ids;
pub mod job;
pub mod ledger;
pub mod serde_pairs;
pub mod slurm;
pub mod spot;
pub mod spot_drain;
pub mod testkit;
pub mod text;
pub mod trace;
pub mod units;

pub use event::{Action, Actor, Effect, Event, Role};
