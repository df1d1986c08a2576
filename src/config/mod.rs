//! The engine's configuration file (TOML): scheduler, checkpoint, spot, cost and
//! forecast policy.
//! Read from `--config FILE`, else `$XDG_CONFIG_HOME/gpuroom/config.toml`
//! (or `~/.config/gpuroom/config.toml`) when it exists; every key is optional
//! and defaults to the built-in policy. Unknown keys are errors (a typo must
//! not silently fall back to a default), and so is a number outside its key's
//! range, NaN and infinities included (`NUMERIC_KEYS`, checked by `numbers`).
//!
//! ```toml
//! [sched]
//! discipline = "drf"        # fifo | priority | drf | mlfq
//! backfill = true
//! time_sharing = false
//! [sched.max_wait]
//! eval = 1800               # seconds
//! [checkpoint]
//! hazard_threshold = 0.15   # next-minute risk above which intervals halve
//! full_every = 8            # every n-th save is full, the rest incremental
//! [spot]
//! after_interruption = "migrate-spot"   # | "migrate-on-demand" | "requeue"
//! degraded_bids = false     # force the linear max-price curve
//! [spot.bids]
//! start = 1.10              # cap = base × coefficient(progress), from 1.10…
//! top = 2.5                 # …to 2.5 at completion (never above on-demand)
//! [cost]
//! storage_per_gib_month = 23000   # micro-dollars ($0.023)
//! [cost.budget]
//! at_limit = "spot"         # at 100%: "queue" (default) or "spot"
//! notify_pct = 80
//! [forecast]
//! threshold = 0.25          # spend this far off the day-ahead forecast…
//! periods = 3               # …for this many hours raises an alarm
//! [capacity]
//! mode = "advisory"         # | "control" | "off"; unset: control simulated, advisory live
//! idle_release = 60         # seconds a bought node may idle before it is given back
//! min_stable_share = 0.2    # share of GPUs kept non-interruptible (the SLA floor)
//! [memory]
//! retain_finished = 691200  # seconds a finished job stays in memory (8 days; 0: forever)
//! [alarms]
//! storm_nodes = 3           # nodes lost within storm_window (seconds) are a storm; 0: off
//! storm_window = 600
//! failure_burst = 5         # jobs failed within failure_window are a burst; 0: off
//! failure_window = 600
//! launch_refusals = 3       # launches one pool refuses in a row; 0: off
//! event_hold = 900          # an alarm about an event clears itself after this
//! ```

use serde::Deserialize;

pub mod numbers;
pub mod tenant;
pub use tenant::TenantDecl;

use self::numbers::{COUNT, EVERY_SECS, FRACTION, NON_NEGATIVE, PERCENT, POSITIVE, POSITIVE_SECS, Pass, Rule, SECS, TIMEOUT_MS, U8, U32};
use crate::ckpt::CheckpointPolicy;
use crate::room::RoomConfig;
use crate::sched::SchedConfig;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    pub sched: SchedConfig,
    pub checkpoint: CheckpointPolicy,
    pub spot: SpotConfig,
    pub cost: crate::cost::CostConfig,
    pub forecast: crate::room::config::ForecastConfig,
    /// Live sources and executors (`gpuroom --live`); see `live::config`.
    pub sources: crate::live::config::SourcesConfig,
    pub capacity: CapacitySection,
    pub memory: MemorySection,
    /// `[alarms]`: when several events together make an alarm.
    pub alarms: crate::room::trips::AlarmRules,
}

/// `[memory]`: how long a finished job stays in memory (see `room::retired`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySection {
    /// Seconds after it ends; 0 keeps every job (memory then grows with them).
    pub retain_finished: crate::domain::units::Secs,
}

impl Default for MemorySection {
    fn default() -> Self {
        MemorySection { retain_finished: RoomConfig::default().retain_finished }
    }
}

/// `[capacity]`: elastic capacity's settings (`capacity::CapacityConfig`),
/// with the mode left to the world when unset: control on the simulated
/// cluster, advisory on live sources (a person approves each launch).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapacitySection {
    pub mode: Option<crate::capacity::CapacityMode>,
    pub idle_release: crate::domain::units::Secs,
    pub spot_backoff: crate::domain::units::Secs,
    pub min_stable_share: f64,
    pub account_gpu_limit: u32,
    pub consolidate: bool,
    pub plan_every: crate::domain::units::Secs,
    pub lookahead_jobs: usize,
}

impl Default for CapacitySection {
    fn default() -> Self {
        let c = crate::capacity::CapacityConfig::default();
        CapacitySection {
            mode: None,
            idle_release: c.idle_release,
            spot_backoff: c.spot_backoff,
            min_stable_share: c.min_stable_share,
            account_gpu_limit: c.account_gpu_limit,
            consolidate: c.consolidate,
            plan_every: c.plan_every,
            lookahead_jobs: c.lookahead_jobs,
        }
    }
}

impl CapacitySection {
    /// The policy's settings, with `world_default` as the mode when unset.
    pub fn resolve(&self, world_default: crate::capacity::CapacityMode) -> crate::capacity::CapacityConfig {
        crate::capacity::CapacityConfig {
            mode: self.mode.unwrap_or(world_default),
            idle_release: self.idle_release,
            spot_backoff: self.spot_backoff,
            min_stable_share: self.min_stable_share,
            account_gpu_limit: self.account_gpu_limit,
            consolidate: self.consolidate,
            plan_every: self.plan_every,
            lookahead_jobs: self.lookahead_jobs,
        }
    }
}

/// The spot watcher's policy: where interrupted jobs go, the max-price
/// curve, and how the hazard weighs recent interruptions.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpotConfig {
    pub after_interruption: crate::room::config::AfterInterruption,
    pub degraded_bids: bool,
    pub bids: crate::market::bid::BidPolicy,
    pub hazard: crate::market::hazard::HazardConfig,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigFileError {
    pub file: String,
    pub message: String,
}

/// Every numeric key of the engine's configuration and what it accepts.
/// A key missing here is still held to "finite and not negative".
pub const NUMERIC_KEYS: &[(&str, Rule)] = &[
    ("sched.aging_per_hour", NON_NEGATIVE),
    ("sched.mlfq_thresholds[]", Rule::Int(0, i64::MAX)),
    ("sched.mlfq_promote_after", SECS),
    ("sched.mlfq_quantum", SECS),
    ("sched.max_wait.training", SECS),
    ("sched.max_wait.fine_tune", SECS),
    ("sched.max_wait.eval", SECS),
    ("sched.max_wait.batch_inference", SECS),
    ("sched.idle_util_pct", PERCENT),
    ("sched.idle_window", SECS),
    ("checkpoint.stable_interval", POSITIVE_SECS),
    ("checkpoint.min_interval", POSITIVE_SECS),
    ("checkpoint.max_interval", POSITIVE_SECS),
    ("checkpoint.hazard_threshold", FRACTION),
    ("checkpoint.shorten_factor", Rule::Float { min: 0.0, above: true, max: 1.0 }),
    ("checkpoint.default_cost", SECS),
    ("checkpoint.full_every", COUNT),
    ("checkpoint.notice_miss_floor", FRACTION),
    ("spot.bids.start", Rule::Float { min: 1.0, above: false, max: f64::INFINITY }),
    ("spot.bids.top", Rule::Float { min: 1.0, above: false, max: f64::INFINITY }),
    ("spot.bids.reference_remaining_secs", POSITIVE),
    ("spot.hazard.window", POSITIVE_SECS),
    ("spot.hazard.prior_exposure", SECS),
    ("spot.hazard.smoothing", SECS),
    ("spot.hazard.fallback_per_hour", NON_NEGATIVE),
    ("spot.hazard.max_live", COUNT),
    ("cost.checkpoint_io_per_gib", Rule::Int(0, i64::MAX)),
    ("cost.storage_per_gib_month", Rule::Int(0, i64::MAX)),
    ("cost.network_per_gib", Rule::Int(0, i64::MAX)),
    ("cost.budget.notify_pct", COUNT),
    ("cost.budget.limit_pct", COUNT),
    ("cost.budget.block_pct", COUNT),
    ("forecast.threshold", POSITIVE),
    ("forecast.periods", COUNT),
    ("capacity.idle_release", SECS),
    ("capacity.spot_backoff", SECS),
    ("capacity.min_stable_share", FRACTION),
    ("capacity.account_gpu_limit", U32),
    ("capacity.plan_every", SECS),
    ("capacity.lookahead_jobs", COUNT),
    ("memory.retain_finished", SECS),
    ("alarms.storm_nodes", U32),
    ("alarms.storm_window", POSITIVE_SECS),
    ("alarms.failure_burst", U32),
    ("alarms.failure_window", POSITIVE_SECS),
    ("alarms.launch_refusals", U32),
    ("alarms.event_hold", POSITIVE_SECS),
    ("sources.nvml.every_secs", EVERY_SECS),
    ("sources.dcgm.every_secs", EVERY_SECS),
    ("sources.dcgm.timeout_ms", TIMEOUT_MS),
    ("sources.aws.prices_every_secs", EVERY_SECS),
    ("sources.aws.fleet_every_secs", EVERY_SECS),
    ("sources.aws.timeout_ms", TIMEOUT_MS),
    ("sources.aws.max_attempts", Rule::Int(1, 100)),
    ("sources.aws.pools[].max_nodes", U32),
    ("sources.aws.pools[].warm_min", U32),
    ("sources.aws.pools[].boot_secs", SECS),
    ("sources.aws.pools[].speed", POSITIVE),
    ("sources.imds.every_secs", EVERY_SECS),
    ("sources.imds.timeout_ms", TIMEOUT_MS),
    // IMDSv2 tokens live from 1 s to 6 h.
    ("sources.imds.token_ttl_secs", Rule::Int(1, 21_600)),
    ("sources.local.stop_grace_secs", EVERY_SECS),
    ("sources.local.poll_ms", TIMEOUT_MS),
    ("sources.slurm.poll_secs", Rule::Int(1, 3_600)),
    ("sources.slurm.timeout_secs", Rule::Int(1, 600)),
    ("sources.slurm.wait_alarm_mins", Rule::Int(0, crate::domain::units::HORIZON_SECS / 60)),
    ("sources.slurm.account[].quota_gpus", U32),
    ("sources.slurm.account[].borrow_limit_gpus", U32),
    ("sources.slurm.account[].monthly_budget", Rule::Money),
    ("sources.instance_types[].gpus", Rule::Int(1, u8::MAX as i64)),
    ("sources.instance_types[].gpu_memory_mib", COUNT),
    ("sources.instance_types[].cpus", U32),
    ("sources.instance_types[].host_memory_mib", U32),
    ("sources.instance_types[].on_demand", Rule::Money),
    ("sources.nodes[].gpus", U8),
    ("sources.nodes[].gpu_memory_mib", U32),
    ("sources.nodes[].price", Rule::Money),
];

impl EngineConfig {
    pub fn parse(file: &str, text: &str) -> Result<EngineConfig, ConfigFileError> {
        let fail = |message: String| ConfigFileError { file: file.to_string(), message };
        let doc: toml::Table = toml::from_str(text).map_err(|e| fail(crate::sources::toml_message(text, &e)))?;
        numbers::check(&doc, NUMERIC_KEYS, Pass::Known).map_err(fail)?;
        let config: EngineConfig = toml::from_str(text).map_err(|e| fail(crate::sources::toml_message(text, &e)))?;
        numbers::check(&doc, NUMERIC_KEYS, Pass::Rest).map_err(fail)?;
        config.spot.hazard.validate().map_err(|e| fail(format!("[spot.hazard]: {e}")))?;
        let bids = &config.spot.bids;
        if bids.top < bids.start {
            return Err(fail(format!("[spot.bids]: need start ≤ top, got start {} top {}", bids.start, bids.top)));
        }
        if let Some(problem) = config.cost.budget.problem() {
            return Err(fail(format!("[cost.budget]: {problem}")));
        }
        if let Some(problem) = config.capacity.resolve(crate::capacity::CapacityMode::Control).problem() {
            return Err(fail(format!("[capacity]: {problem}")));
        }
        let c = &config.checkpoint;
        if c.max_interval < c.min_interval {
            return Err(fail(format!("[checkpoint]: need min_interval ≤ max_interval, got {} and {}", c.min_interval.0, c.max_interval.0)));
        }
        if config.sched.mlfq_thresholds.windows(2).any(|w| w[1] <= w[0]) {
            return Err(fail(format!("sched.mlfq_thresholds must rise, got {:?}", config.sched.mlfq_thresholds)));
        }
        if let Some(p) = config.sources.aws.iter().flat_map(|a| &a.pools).find(|p| p.warm_min > p.max_nodes) {
            return Err(fail(format!("[[sources.aws.pools]] {} {}: warm_min {} passes max_nodes {}", p.instance_type, p.zone, p.warm_min, p.max_nodes)));
        }
        Ok(config)
    }

    pub fn room_config(&self) -> RoomConfig {
        RoomConfig {
            sched: self.sched.clone(),
            checkpoint: self.checkpoint.clone(),
            after_interruption: self.spot.after_interruption,
            degraded_bids: self.spot.degraded_bids,
            bids: self.spot.bids.clone(),
            hazard: self.spot.hazard.clone(),
            cost: self.cost.clone(),
            forecast: self.forecast.clone(),
            capacity: self.capacity.resolve(crate::capacity::CapacityMode::Control),
            retain_finished: self.memory.retain_finished,
            alarms: self.alarms.clone(),
            ..RoomConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::DisciplineKind;

    #[test]
    fn keys_are_optional_and_typos_are_errors() {
        assert_eq!(EngineConfig::parse("c.toml", "").unwrap(), EngineConfig::default());
        let kept = EngineConfig::parse("c.toml", "[memory]\nretain_finished = 3600\n").unwrap();
        assert_eq!(kept.room_config().retain_finished, crate::domain::units::Secs(3600));
        assert_eq!(EngineConfig::default().room_config().retain_finished, RoomConfig::default().retain_finished);
        let c = EngineConfig::parse("c.toml", "[sched]\ndiscipline = \"mlfq\"\n[sched.max_wait]\neval = 600\n").unwrap();
        assert_eq!(c.sched.discipline, DisciplineKind::Mlfq);
        assert_eq!(c.sched.max_wait.eval.0, 600);
        assert_eq!(c.sched.max_wait.training, crate::sched::MaxWait::default().training);
        let err = EngineConfig::parse("c.toml", "[sched]\ndiscipline = \"lottery\"\n").unwrap_err();
        assert!(err.message.starts_with("line 2:"), "{err}");
        let err = EngineConfig::parse("c.toml", "[sched]\nbackfil = true\n").unwrap_err();
        assert!(err.message.contains("backfil"), "{err}");
        // The span of an unknown key starts its line; that line is the one named.
        assert!(err.message.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn spot_policy_keys_and_their_refusals() {
        use crate::room::config::AfterInterruption;
        let c = EngineConfig::parse("c.toml", "[spot]\nafter_interruption = \"requeue\"\n[spot.bids]\ntop = 3.0\n[checkpoint]\nfull_every = 4\n").unwrap();
        let room = c.room_config();
        assert_eq!((room.after_interruption, room.bids.top, room.checkpoint.full_every), (AfterInterruption::Requeue, 3.0, 4));
        assert!(EngineConfig::parse("c.toml", "[spot.bids]\nstart = 0.5\n").unwrap_err().message.contains("start"));
        assert!(EngineConfig::parse("c.toml", "[spot.hazard]\nwindow = 0\n").unwrap_err().message.contains("window"));
        assert!(EngineConfig::parse("c.toml", "[spot]\nafter_interruption = \"pray\"\n").is_err());
        assert!(EngineConfig::parse("c.toml", "[checkpoint]\nspot_interval = 1800\n").unwrap_err().message.contains("spot_interval"));
    }

    #[test]
    fn alarm_rules_are_read_and_checked() {
        let c = EngineConfig::parse("c.toml", "[alarms]\nstorm_nodes = 5\nevent_hold = 60\n").unwrap();
        let rules = c.room_config().alarms;
        assert_eq!((rules.storm_nodes, rules.event_hold.0, rules.failure_burst), (5, 60, 5));
        let err = EngineConfig::parse("c.toml", "[alarms]\nstorm_window = 0\n").unwrap_err().to_string();
        assert!(err.contains("alarms.storm_window"), "{err}");
        let err = EngineConfig::parse("c.toml", "[alarms]\nstorms = 3\n").unwrap_err().to_string();
        assert!(err.contains("storms"), "{err}");
    }

    #[test]
    fn cost_and_forecast_keys_and_their_refusals() {
        use crate::cost::budget::AtLimit;
        let c = EngineConfig::parse("c.toml", "[cost.budget]\nat_limit = \"spot\"\n[forecast]\nperiods = 6\n").unwrap();
        let room = c.room_config();
        assert_eq!((room.cost.budget.at_limit, room.forecast.periods), (AtLimit::Spot, 6));
        let err = EngineConfig::parse("c.toml", "[cost.budget]\nnotify_pct = 130\n").unwrap_err();
        assert!(err.message.contains("must rise"), "{err}");
        assert!(EngineConfig::parse("c.toml", "[forecast]\nperiods = 0\n").unwrap_err().message.contains("periods"));
        assert!(EngineConfig::parse("c.toml", "[cost]\nstorage = 1\n").unwrap_err().message.contains("storage"));
    }

    /// A document that sets `key` (a rule's key, `[]` for an array's item) to `value`.
    fn doc_setting(key: &str, value: &str) -> String {
        let Some((array, field)) = key.split_once("[]") else {
            let (section, field) = key.rsplit_once('.').unwrap();
            return format!("[{section}]\n{field} = {value}\n");
        };
        let field = field.trim_start_matches('.');
        if field.is_empty() {
            let (section, field) = array.rsplit_once('.').unwrap();
            return format!("[{section}]\n{field} = [{value}]\n");
        }
        // The item's required keys, then the one under test in place of its own.
        let base: &[(&str, &str)] = match array {
            "sources.aws.pools" => &[("instance_type", "\"p3.2xlarge\""), ("zone", "\"z\""), ("billing", "\"spot\"")],
            "sources.slurm.account" => &[("id", "\"a\""), ("quota_gpus", "1"), ("monthly_budget", "\"1\"")],
            "sources.instance_types" => &[
                ("name", "\"t\""),
                ("gpu_model", "\"m\""),
                ("gpus", "1"),
                ("gpu_memory_mib", "1"),
                ("cpus", "1"),
                ("host_memory_mib", "1"),
                ("on_demand", "\"1\""),
            ],
            "sources.nodes" => &[("host", "\"h\"")],
            other => panic!("no base item for [[{other}]]"),
        };
        let mut text = format!("[[{array}]]\n");
        for (k, v) in base.iter().filter(|(k, _)| *k != field) {
            text.push_str(&format!("{k} = {v}\n"));
        }
        text.push_str(&format!("{field} = {value}\n"));
        text
    }

    /// Values the rule refuses, as TOML.
    fn bad_values(rule: numbers::Rule) -> Vec<String> {
        let mut bad: Vec<String> = ["nan", "inf", "-inf"].map(String::from).to_vec();
        match rule {
            Rule::Int(min, max) => {
                bad.push("1.5".into());
                if min > i64::MIN {
                    bad.push((min - 1).to_string());
                }
                if max < i64::MAX {
                    bad.push((max + 1).to_string());
                }
            }
            Rule::Float { min, above, max } => {
                bad.push(if above { min.to_string() } else { (min - 0.5).to_string() });
                if max.is_finite() {
                    bad.push((max + 0.5).to_string());
                }
            }
            Rule::Money => bad.extend(["-1".into(), "\"-1\"".into(), "\"1.0000001\"".into()]),
        }
        bad
    }

    #[test]
    fn every_numeric_key_takes_a_value_in_its_range() {
        for (key, rule) in NUMERIC_KEYS {
            let text = doc_setting(key, &numbers::accepted_example(key, *rule));
            if let Err(e) = EngineConfig::parse("c.toml", &text) {
                panic!("{key}: {e}\n{text}");
            }
        }
    }

    #[test]
    fn every_numeric_key_refuses_nan_infinity_and_out_of_range_naming_key_and_range() {
        for (key, rule) in NUMERIC_KEYS {
            for value in bad_values(*rule) {
                let text = doc_setting(key, &value);
                let err = EngineConfig::parse("c.toml", &text).expect_err(&format!("{key} = {value} accepted"));
                let shown_key = key.replace("[]", "[0]");
                assert!(err.message.starts_with(&format!("{shown_key} = ")), "{key} = {value}: {err}");
                assert!(err.message.ends_with(&rule.describe()), "{key} = {value}: {err}");
            }
        }
    }

    #[test]
    fn typos_stay_typos_and_keys_are_checked_against_each_other() {
        let err = EngineConfig::parse("c.toml", "[sched]\nbackfil = -1\n").unwrap_err();
        assert!(err.message.contains("backfil"), "a typo is a typo first: {err}");
        let err = EngineConfig::parse("c.toml", "[sched]\nidle_window = -60\n").unwrap_err();
        assert_eq!(err.to_string(), format!("c.toml: sched.idle_window = -60: must be a whole number within [0, {}]", crate::domain::units::HORIZON_SECS));
        assert!(
            EngineConfig::parse("c.toml", "[checkpoint]\nmin_interval = 600\nmax_interval = 60\n").unwrap_err().message.contains("min_interval ≤ max_interval")
        );
        assert!(EngineConfig::parse("c.toml", "[sched]\nmlfq_thresholds = [3600, 60]\n").unwrap_err().message.contains("must rise"));
        let pool = "[[sources.aws.pools]]\ninstance_type = \"p3.2xlarge\"\nzone = \"z\"\nbilling = \"spot\"\nmax_nodes = 1\nwarm_min = 2\n";
        assert!(EngineConfig::parse("c.toml", pool).unwrap_err().message.contains("warm_min"));
    }
}
