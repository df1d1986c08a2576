//! What the experiment is run with (`ExperimentConfig`), the strategies it
//! compares and what each one yields (`Outcome`).

use serde::Deserialize;

use crate::domain::units::{At, Micros, MicrosPerHour};

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Where the experiment's clock starts in the price history.
    pub start: At,
    pub instance_type: String,
    pub on_demand_per_hour: f64,
    /// Reserved (1-year, no upfront) as a share of on-demand.
    pub reserved_share: f64,
    pub bursts: usize,
    pub burst_secs: f64,
    pub peak_factor: f64,
    pub baseline_jobs_per_hour: f64,
    /// No arrivals in the last stretch, so every job ends inside the traces.
    pub drain_secs: f64,
    pub layer_choices: Vec<usize>,
    pub layer_secs_mean: f64,
    pub layer_secs_cv_between_jobs: f64,
    pub steady_layer_cv: f64,
    pub erratic_share: f64,
    pub erratic_layer_cv: f64,
    /// Full checkpoint size, GiB (uniform between the two).
    pub state_gib: (f64, f64),
    /// Share of the state one layer changes (what an incremental save writes).
    pub changed_share_per_layer: f64,
    pub incremental: bool,
    pub write_bytes_per_sec: f64,
    pub read_bytes_per_sec: f64,
    /// Instance boot, then loading the model.
    pub launch_secs: f64,
    pub load_secs: f64,
    pub naive_every_layers: usize,
    /// Naive max price: this factor × the mean market at the start.
    pub naive_max_over_market: f64,
    /// Credibility of the long-run hazard against the last 5 minutes.
    pub prior_exposure_secs: f64,
    pub checkpoint_secs_guess: f64,
    pub trend_window_secs: f64,
    pub trend_horizon_secs: f64,
    pub min_layers_to_predict: usize,
    /// Checkpoint storage and requests, dollars per GiB written.
    pub storage_per_gib: f64,
    #[serde(skip)]
    pub(super) naive_max: MicrosPerHour,
}

impl Default for ExperimentConfig {
    fn default() -> Self {
        ExperimentConfig {
            start: chrono::DateTime::parse_from_rfc3339("2020-01-20T00:00:00Z").map(|t| t.to_utc()).unwrap_or_default(),
            instance_type: "p3.2xlarge".into(),
            on_demand_per_hour: 3.06,
            reserved_share: 0.65,
            bursts: 120,
            burst_secs: 1200.0,
            peak_factor: 7.0,
            baseline_jobs_per_hour: 4.0,
            drain_secs: 6.0 * 3600.0,
            layer_choices: vec![24, 32, 40, 48, 64, 80, 96],
            layer_secs_mean: 20.0,
            layer_secs_cv_between_jobs: 0.5,
            steady_layer_cv: 0.08,
            erratic_share: 0.25,
            erratic_layer_cv: 0.6,
            state_gib: (4.0, 16.0),
            changed_share_per_layer: 0.04,
            incremental: true,
            write_bytes_per_sec: 500e6,
            read_bytes_per_sec: 1e9,
            launch_secs: 90.0,
            load_secs: 60.0,
            naive_every_layers: 10,
            naive_max_over_market: 1.10,
            prior_exposure_secs: 3600.0,
            checkpoint_secs_guess: 20.0,
            trend_window_secs: 3600.0,
            trend_horizon_secs: 600.0,
            min_layers_to_predict: 3,
            storage_per_gib: 0.002,
            naive_max: MicrosPerHour(0),
        }
    }
}

impl ExperimentConfig {
    pub(crate) fn naive_max_price(&self) -> MicrosPerHour {
        self.naive_max
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    Reserved,
    OnDemand,
    NaiveSpot,
    Dynamic,
    Degraded,
    Omniscient,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [Strategy::Reserved, Strategy::OnDemand, Strategy::NaiveSpot, Strategy::Dynamic, Strategy::Degraded, Strategy::Omniscient];

    pub fn label(self) -> &'static str {
        match self {
            Strategy::Reserved => "reserved for peak",
            Strategy::OnDemand => "all on-demand",
            Strategy::NaiveSpot => "naive spot",
            Strategy::Dynamic => "gpuroom dynamic",
            Strategy::Degraded => "gpuroom degraded",
            Strategy::Omniscient => "omniscient bound",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub jobs: u64,
    pub interrupted_jobs: u64,
    pub interruptions: u64,
    pub lost_layers: f64,
    pub notice_saves_in_time: u64,
    pub notice_saves_missed: u64,
    pub moves: u64,
    /// Jobs that went back from on-demand to spot once capacity returned.
    pub back_to_spot: u64,
    pub checkpoints: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_pause_secs: f64,
    pub latencies: Vec<f64>,
    pub spot_spend: Micros,
    pub on_demand_spend: Micros,
    pub reserved_spend: Micros,
    pub spot_hours: f64,
    pub on_demand_hours: f64,
    pub reserved_instances: usize,
}

impl Outcome {
    pub fn storage_spend(&self, config: &ExperimentConfig) -> Micros {
        let gib = self.checkpoint_bytes as f64 / (1024.0 * 1024.0 * 1024.0);
        Micros((gib * config.storage_per_gib * 1e6).round() as i64)
    }

    pub fn total(&self, config: &ExperimentConfig) -> Micros {
        Micros(self.spot_spend.0 + self.on_demand_spend.0 + self.reserved_spend.0 + self.storage_spend(config).0)
    }

    pub fn preemption_rate(&self) -> f64 {
        self.interrupted_jobs as f64 / self.jobs.max(1) as f64
    }

    pub fn recompute_per_interruption(&self) -> f64 {
        if self.interruptions == 0 { 0.0 } else { self.lost_layers / self.interruptions as f64 }
    }

    pub fn latency(&self, q: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort_by(f64::total_cmp);
        if l.is_empty() {
            return 0.0;
        }
        l[((l.len() - 1) as f64 * q).round() as usize]
    }

    pub fn mean_latency(&self) -> f64 {
        self.latencies.iter().sum::<f64>() / self.latencies.len().max(1) as f64
    }
}
