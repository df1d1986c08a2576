//! The scheduler's policies, as pure functions over the core's data:
//!
//! * `discipline` — in which order queued jobs are considered (FIFO,
//!   priority with aging, DRF across tenants, multi-level feedback on
//!   attained service), behind one trait, switchable at run time;
//! * `placement` — where a job goes (best or first fit on GPU memory, one
//!   node per job, MIG slices as units, time-sharing of spare memory);
//! * `quota` — tenant quotas, what is borrowed beyond them;
//! * `preempt` — which running jobs to stop to make room for one;
//! * `backfill` — the head job's reservation and who may jump ahead of it;
//! * `fragmentation` — how fragmented the free memory is;
//! * `frag_gradient` — a node's expected fragmentation for the workload's
//!   typical shapes, and placement where it grows least (FGD);
//! * `frag_measure` — that measure over a whole fleet at once (the console's);
//! * `slurm_advice` — the quota policy applied to a Slurm cluster's jobs.
//! * `slurm_plan` — the room's order and placement for Slurm's pending GPU jobs.
//! * `slurm_priorities` — the room's order as Slurm priorities, renumbering only what is out of place.
//! * `slurm_shards` — what a Slurm node has free, GPU by GPU: whole, in shards, CPUs.
//!
//! They never touch IO, the clock, the TUI or the `Room` itself: the `Room`
//! calls them and applies the result.

pub mod backfill;
pub mod config;
pub mod discipline;
pub mod frag_gradient;
pub mod frag_measure;
pub mod fragmentation;
pub mod placement;
pub mod preempt;
pub mod quota;
pub mod slurm_advice;
pub mod slurm_plan;
pub mod slurm_priorities;
pub mod slurm_shards;

pub use config::{FitPolicy, MaxWait, Resources, SchedConfig};
pub use discipline::{Discipline, DisciplineKind, OrderContext};
