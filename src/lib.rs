//! gpuroom: a terminal control room for GPU clusters bought by the hour.
//!
//! The crate is a house whose floors only look down (`tests/layers.rs`
//! keeps it so): the plain data of the `domain`; the policies above it
//! (`sched`, `market`, `ckpt`, `cost`, `predict`), each on its
//! own; the deterministic `room` that applies them; and the edges on top
//! (`engine`, `store`, `sim`, `sources`, `live`, `host`, `tui`, `bench`, …),
//! where all IO happens. See the README's "What runs where".

pub mod bench;
pub mod capacity;
pub mod ckpt;
pub mod config;
pub mod cost;
pub mod domain;
pub mod efficiency;
pub mod engine;
pub mod export;
pub mod host;
pub mod live;
pub mod market;
pub mod metrics;
pub mod mix_report;
pub mod operator;
pub mod predict;
pub mod report;
pub mod room;
pub mod sched;
pub mod sim;
pub mod sources;
pub mod store;
pub mod tui;
pub mod whatif;
