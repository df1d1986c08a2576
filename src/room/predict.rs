//! Run-time prediction inside the `Room`: the lifetime predictor learns from
//! every job that finishes (its running time, queue excluded) and predicts
//! each job's run time from what its spec says, before it has run a step.
//! The max-price curve uses it until the job's own progress rate takes over,
//! and the queue shows it for waiting jobs.
//!
//! The model lives in `predict::lifetime`.

use chrono::{Datelike, Timelike};
use serde::{Deserialize, Serialize};

use super::fleet::Fleet;
use crate::domain::ids::JobId;
use crate::domain::job::{Job, JobClass};
use crate::predict::lifetime::{JobFeatures, LifetimePredictor, Prediction, RecentDurations};

/// What the Room keeps for prediction (part of its state and snapshots).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Predictor {
    pub model: LifetimePredictor,
    /// Recent run times per model tag: the strongest single feature.
    pub recent: RecentDurations,
}

impl Default for Predictor {
    fn default() -> Self {
        Predictor { model: LifetimePredictor::default(), recent: RecentDurations::new(16, 512) }
    }
}

/// What `Predictor::predict` reads of a job: two jobs alike in these get
/// the same prediction, so a view of 100,000 queued jobs predicts each
/// likeness once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Likeness<'j> {
    gpus: u8,
    class: JobClass,
    model: &'j str,
    hour: u32,
    weekday: u32,
}

impl Predictor {
    /// The job's likeness: exactly the fields `features` reads.
    pub fn likeness(job: &Job) -> Likeness<'_> {
        let at = job.submitted_at;
        Likeness { gpus: job.spec.gpus, class: job.spec.class, model: &job.spec.tags.model, hour: at.hour(), weekday: at.weekday().num_days_from_monday() }
    }

    fn features(&self, job: &Job) -> JobFeatures {
        let at = job.submitted_at;
        JobFeatures {
            gpus: Some(u32::from(job.spec.gpus)),
            class: Some(job.spec.class.label().to_string()),
            recent_similar_secs: self.recent.median(&job.spec.tags.model),
            hour_of_day: Some(at.hour() as u8),
            day_of_week: Some(at.weekday().num_days_from_monday() as u8),
            ..JobFeatures::default()
        }
    }

    pub fn predict(&self, job: &Job) -> Option<Prediction> {
        self.model.predict(&self.features(job))
    }
}

impl Predictor {
    /// A job finished on its own: learn its running time.
    pub fn learn(&mut self, job: &Job) {
        let secs = job.service_gpu_ms as f64 / 1000.0 / f64::from(job.spec.gpus.max(1));
        if secs < 1.0 {
            return;
        }
        let features = self.features(job);
        let model = job.spec.tags.model.clone();
        // A refused sample (non-finite feature) changes nothing; nothing to report.
        let _ = self.model.observe_total(&features, secs);
        self.recent.record(&model, secs);
    }

    /// Remaining seconds (mean, std): the job's own rate once it has one,
    /// else the predicted run time scaled by the work left.
    pub fn remaining(&self, fleet: &Fleet, id: JobId) -> Option<(f64, f64)> {
        let job = fleet.jobs.get(&id)?;
        let left = job.spec.steps_total.saturating_sub(job.steps_done);
        if let Some(r) = fleet.rates.get(&id).and_then(|r| r.remaining_secs(left)) {
            return Some(r);
        }
        let p = self.predict(job)?;
        let share = left as f64 / job.spec.steps_total.max(1) as f64;
        Some((p.mean_secs * share, p.std_secs * share))
    }
}
