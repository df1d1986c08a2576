//! Jobs as real traces record them: plain data that `sources::philly`
//! parses, the simulator samples and `predict::philly_eval` learns from.

use super::units::{At, Secs};

/// One job of Microsoft's Philly trace.
#[derive(Clone, Debug, PartialEq)]
pub struct PhillyJob {
    pub submitted: At,
    pub duration: Secs,
    pub gpus: u32,
    pub cluster: String,
}
