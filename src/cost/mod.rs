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

pub use accrual::{split_exact, Accrual};
pub use books::{Books, TenantBook};
