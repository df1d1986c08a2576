//! The cost engine: what every GPU-second cost and whom it is charged to.
//!
//! Accrual is exact: an instance's hourly price is divided down to the
//! millisecond with the remainder carried, then split over its GPUs and the
//! jobs on them with the largest-remainder method, so the parts always add up
//! to the whole. What no job holds is idle cost, kept on its own line per
//! billing mode. Money is integer micro-units throughout.
//!
//! No IO here: the ledger's persistence belongs to `store/`.

pub mod accrual;
pub mod books;
pub mod budget;
pub mod forecast;
pub mod ledger;
pub mod mix;

pub use accrual::{Accrual, split_exact};
pub use books::{Books, TenantBook};

use serde::{Deserialize, Serialize};

use crate::domain::units::Micros;

/// Prices of what comes on top of instance time, and the budget policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostConfig {
    /// Writing a checkpoint (requests and transfer), per GiB written.
    pub checkpoint_io_per_gib: Micros,
    /// Keeping a job's checkpoint, per GiB-month (S3 standard: $0.023).
    pub storage_per_gib_month: Micros,
    /// Reading a checkpoint back to resume, per GiB (inter-zone: $0.01).
    pub network_per_gib: Micros,
    pub budget: budget::BudgetPolicy,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            checkpoint_io_per_gib: Micros(5_000),
            storage_per_gib_month: Micros(23_000),
            network_per_gib: Micros(10_000),
            budget: budget::BudgetPolicy::default(),
        }
    }
}
