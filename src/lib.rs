//! gpuroom: a terminal control room for GPU clusters bought by the hour.
//!
//! The crate is laid out as DESIGN.md describes: a deterministic core
//! (`core`, with the policy engines `sched`, `market`, `ckpt`, `cost`,
//! `predict`) that never does IO, and adapters at its edges (`sim`, `sources`,
//! `store`, `tui`, `engine`, and `live` for real sources).

pub mod bench;
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
pub mod mix_report;
pub mod operator;
pub mod predict;
pub mod room;
pub mod report;
pub mod sched;
pub mod sim;
pub mod sources;
pub mod store;
pub mod tui;
