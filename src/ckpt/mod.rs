//! The checkpoint controller: when a running job should save its state.
//!
//! Jobs on spot capacity save more often than jobs on on-demand or reserved
//! capacity, because losing them is more likely; an interruption notice or an
//! operator's preempt asks for a save at once (handled by the `Room`). This
//! module decides "is a checkpoint due", nothing else: it does no IO and does
//! not know how the executor writes the checkpoint.

use serde::{Deserialize, Serialize};

use crate::core::cluster::BillingMode;
use crate::core::job::Job;
use crate::core::units::{At, Secs};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointPolicy {
    /// Interval for jobs on spot instances.
    pub spot_interval: Secs,
    /// Interval for jobs on on-demand or reserved instances.
    pub stable_interval: Secs,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy { spot_interval: Secs(30 * 60), stable_interval: Secs(2 * 3600) }
    }
}

impl CheckpointPolicy {
    pub fn interval(&self, billing: BillingMode) -> Secs {
        match billing {
            BillingMode::Spot => self.spot_interval,
            BillingMode::OnDemand | BillingMode::Reserved => self.stable_interval,
        }
    }

    /// Due when the interval has passed since the last save, or since the start
    /// of this attempt if it has not saved yet.
    pub fn is_due(&self, job: &Job, billing: BillingMode, now: At) -> bool {
        let since = match (job.last_checkpoint_at, job.started_at) {
            (Some(saved), Some(started)) => saved.max(started),
            (Some(saved), None) => saved,
            (None, Some(started)) => started,
            (None, None) => return false,
        };
        now - since >= self.interval(billing).delta() && job.steps_done > job.steps_saved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testkit::{job_spec, t};

    #[test]
    fn spot_jobs_save_sooner_and_only_with_new_progress() {
        let policy = CheckpointPolicy::default();
        let mut job = Job::new(job_spec(1, "a", 1), t(0));
        job.started_at = Some(t(0));
        job.steps_done = 10;
        assert!(!policy.is_due(&job, BillingMode::Spot, t(29 * 60)));
        assert!(policy.is_due(&job, BillingMode::Spot, t(30 * 60)));
        assert!(!policy.is_due(&job, BillingMode::Reserved, t(30 * 60)));
        job.steps_saved = 10;
        assert!(!policy.is_due(&job, BillingMode::Spot, t(3 * 3600)), "nothing new to save");
    }
}
