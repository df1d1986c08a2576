//! A tenant as the configuration files declare it, before it becomes the
//! domain's `TenantSpec`.

use serde::Deserialize;

/// A tenant as a configuration file declares it (`[[tenant]]` of the live
/// configuration, `[[slurm.account]]` of a Slurm site).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantDecl {
    pub id: String,
    pub quota_gpus: u32,
    /// Dollars a month ("2000").
    pub monthly_budget: String,
    #[serde(default)]
    pub borrow_limit_gpus: u32,
}
