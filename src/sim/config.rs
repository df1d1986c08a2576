//! The simulated cluster's description (TOML): instance types with their
//! prices, the nodes bought, the tenants and the workload's shape.

use serde::Deserialize;

use crate::domain::capacity::PoolSpec;
use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::event::TenantSpec;
use crate::domain::ids::{NodeId, TenantId};
use crate::domain::units::{At, Mib, Micros, MicrosPerHour, Secs};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    pub start: At,
    pub telemetry_secs: i64,
    pub target_load: f64,
    pub instance_types: Vec<InstanceType>,
    #[serde(default)]
    pub nodes: Vec<NodeConfig>,
    /// Pools the room may buy nodes from and give them back (elastic capacity).
    #[serde(default)]
    pub pools: Vec<PoolConfig>,
    pub tenants: Vec<TenantConfig>,
    pub workload: Workload,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceType {
    pub name: String,
    pub gpu_model: String,
    pub gpus: u8,
    pub gpu_memory_mib: u32,
    pub mig_capable: bool,
    pub cpus: u32,
    pub host_memory_mib: u32,
    pub on_demand: String,
    pub reserved: String,
    /// Throughput relative to a V100 (the Philly durations are taken as V100 time).
    pub speed: f64,
    /// MIG slice sizes for GPUs of this type that a node splits.
    #[serde(default)]
    pub mig_slices_mib: Vec<u32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    /// Spot only; defaults to the on-demand price (AWS's default max price).
    #[serde(default)]
    pub max_price: Option<String>,
    /// How many of its GPUs run in MIG mode (split per `mig_slices_mib`).
    #[serde(default)]
    pub mig_gpus: u8,
}

/// An elastic pool: nodes of an instance type in a zone, on demand or on spot,
/// that the room launches and releases itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    pub max_nodes: u32,
    #[serde(default)]
    pub warm_min: u32,
    /// From the launch call to a node taking work; see fixtures/README.md.
    #[serde(default = "default_boot_secs")]
    pub boot_secs: i64,
}

fn default_boot_secs() -> i64 {
    crate::domain::capacity::DEFAULT_BOOT.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    pub quota_gpus: u32,
    pub monthly_budget: String,
    /// Fraction of arriving jobs that are this tenant's.
    pub share: f64,
    /// GPU memory quota in MiB (0: none) and GPUs it may borrow beyond its quota.
    #[serde(default)]
    pub quota_gpu_mem_mib: u32,
    #[serde(default)]
    pub borrow_limit_gpus: u32,
    pub projects: Vec<String>,
    pub models: Vec<String>,
    pub envs: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub max_gpus: u32,
    pub min_duration_secs: i64,
    pub max_duration_secs: i64,
    pub shared_fraction: f64,
    pub no_spot_fraction: f64,
    /// Share of small (shared) jobs that run on spot only until escalated.
    #[serde(default)]
    pub spot_only_fraction: f64,
    pub failure_rate: f64,
    /// Share of runs that hang (no progress, GPU idle) until idle reclaim releases them.
    #[serde(default)]
    pub hang_rate: f64,
    pub checkpoint_mib_per_sec: u32,
    /// Share of a job's state one step changes: an incremental save writes
    /// min(1, steps since the last save × this) of the full size.
    #[serde(default = "default_incremental_share")]
    pub incremental_share_per_step: f64,
    /// `poisson`: jobs sampled from the trace arrive at the target load.
    /// `trace`: the trace's first `trace_jobs` rows arrive as recorded.
    #[serde(default)]
    pub arrivals: Arrivals,
    #[serde(default)]
    pub trace_jobs: usize,
    /// The capacity (V100-equivalent GPUs) `target_load` is a share of; by
    /// default the configured nodes'. An elastic cluster names it, so that
    /// it is offered the same work as the fixed fleet it replaces.
    #[serde(default)]
    pub load_basis_gpus: Option<f64>,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    #[default]
    Poisson,
    Trace,
}

/// A configuration error, naming the file and, where TOML knows it, the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub message: String,
}

fn default_incremental_share() -> f64 {
    0.0005
}

fn money(file: &str, what: &str, text: &str) -> Result<Micros, ConfigError> {
    Micros::parse_decimal(text)
        .ok()
        .filter(|m| m.0 >= 0)
        .ok_or_else(|| ConfigError { file: file.into(), message: format!("{what}: {text:?} is not a non-negative amount") })
}

fn fraction(file: &str, what: &str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&value) { Ok(()) } else { Err(ConfigError { file: file.into(), message: format!("{what} must be within 0..=1, got {value}") }) }
}

impl SimConfig {
    pub fn default_embedded() -> SimConfig {
        let (name, text) = super::data::DEFAULT_CONFIG;
        SimConfig::parse(name, text).expect("the embedded default simulation config is valid (tested)")
    }

    pub fn parse(file: &str, text: &str) -> Result<SimConfig, ConfigError> {
        let config: SimConfig = toml::from_str(text).map_err(|e| ConfigError { file: file.into(), message: crate::sources::toml_message(text, &e) })?;
        config.validate(file)?;
        Ok(config)
    }

    fn validate(&self, file: &str) -> Result<(), ConfigError> {
        let err = |message: String| ConfigError { file: file.into(), message };
        if self.nodes.is_empty() && self.pools.is_empty() {
            return Err(err("no [[nodes]] and no [[pools]]".into()));
        }
        if self.tenants.is_empty() {
            return Err(err("no [[tenants]]".into()));
        }
        if self.telemetry_secs <= 0 {
            return Err(err(format!("telemetry_secs must be positive, got {}", self.telemetry_secs)));
        }
        if !(self.target_load > 0.0 && self.target_load <= 2.0) {
            return Err(err(format!("target_load must be within (0, 2], got {}", self.target_load)));
        }
        for t in &self.instance_types {
            money(file, &format!("instance type {} on_demand", t.name), &t.on_demand)?;
            money(file, &format!("instance type {} reserved", t.name), &t.reserved)?;
            // NaN speeds are refused too: `speed > 0.0` is false for them.
            if t.gpus == 0 || t.gpu_memory_mib == 0 || t.speed.is_nan() || t.speed <= 0.0 {
                return Err(err(format!("instance type {} needs gpus, gpu_memory_mib and a positive speed", t.name)));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for n in &self.nodes {
            if !names.insert(&n.name) {
                return Err(err(format!("node name {:?} used twice", n.name)));
            }
            if self.instance_type(&n.instance_type).is_none() {
                return Err(err(format!("node {} names unknown instance type {:?}", n.name, n.instance_type)));
            }
            if let Some(max) = &n.max_price {
                money(file, &format!("node {} max_price", n.name), max)?;
            }
        }
        let mut pools = std::collections::BTreeSet::new();
        for p in &self.pools {
            let name = format!("pool {} {} {}", p.billing.label(), p.instance_type, p.zone);
            if !pools.insert((p.billing, &p.instance_type, &p.zone)) {
                return Err(err(format!("{name} given twice")));
            }
            if self.instance_type(&p.instance_type).is_none() {
                return Err(err(format!("{name} names unknown instance type {:?}", p.instance_type)));
            }
            if p.billing == BillingMode::Reserved {
                return Err(err(format!("{name}: reserved capacity is bought for years, list it under [[nodes]]")));
            }
            if p.warm_min > p.max_nodes || p.boot_secs < 0 {
                return Err(err(format!("{name}: warm_min must not pass max_nodes, and boot_secs must not be negative")));
            }
        }
        if let Some(basis) = self.workload.load_basis_gpus
            && !(basis.is_finite() && basis > 0.0)
        {
            return Err(err(format!("workload.load_basis_gpus must be a positive number, got {basis}")));
        }
        for t in &self.tenants {
            money(file, &format!("tenant {} monthly_budget", t.name), &t.monthly_budget)?;
            fraction(file, &format!("tenant {} share", t.name), t.share)?;
            if t.projects.is_empty() || t.models.is_empty() || t.envs.is_empty() {
                return Err(err(format!("tenant {} needs projects, models and envs", t.name)));
            }
        }
        if self.tenants.iter().map(|t| t.share).sum::<f64>() <= 0.0 {
            return Err(err("tenant shares add up to 0".into()));
        }
        let w = &self.workload;
        fraction(file, "workload.shared_fraction", w.shared_fraction)?;
        fraction(file, "workload.no_spot_fraction", w.no_spot_fraction)?;
        fraction(file, "workload.spot_only_fraction", w.spot_only_fraction)?;
        fraction(file, "workload.failure_rate", w.failure_rate)?;
        fraction(file, "workload.hang_rate", w.hang_rate)?;
        // Not a share of jobs but of state per step; the executor would take NaN as 1 and a negative as 0.
        fraction(file, "workload.incremental_share_per_step", w.incremental_share_per_step)?;
        if w.arrivals == Arrivals::Trace && w.trace_jobs == 0 {
            return Err(err("workload.arrivals = \"trace\" needs workload.trace_jobs > 0".into()));
        }
        if w.max_gpus == 0 || w.min_duration_secs < 1 || w.max_duration_secs < w.min_duration_secs || w.checkpoint_mib_per_sec == 0 {
            return Err(err("workload bounds: max_gpus ≥ 1, 1 ≤ min_duration_secs ≤ max_duration_secs, checkpoint_mib_per_sec ≥ 1".into()));
        }
        Ok(())
    }

    pub fn instance_type(&self, name: &str) -> Option<&InstanceType> {
        self.instance_types.iter().find(|t| t.name == name)
    }

    /// The node specs, ids in file order from 1.
    pub fn node_specs(&self) -> Vec<NodeSpec> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let t = self.instance_type(&n.instance_type)?;
                let mut spec = self.spec_of(&n.instance_type, &n.zone, n.billing)?;
                spec.max_price = match (&n.billing, &n.max_price) {
                    (BillingMode::Spot, Some(text)) => Some(MicrosPerHour(Micros::parse_decimal(text).ok()?.0)),
                    (BillingMode::Spot, None) => Some(spec.on_demand_price),
                    _ => None,
                };
                spec.id = NodeId(i as u32 + 1);
                spec.name = n.name.clone();
                spec.mig_slices = t.mig_slices_mib.iter().map(|m| Mib(*m)).collect();
                spec.mig_gpus = if t.mig_capable { n.mig_gpus } else { 0 };
                Some(spec)
            })
            .collect()
    }

    /// A node spec of an instance type (id 0, no name, MIG off: the world
    /// gives them, and configured nodes add their own).
    fn spec_of(&self, instance_type: &str, zone: &str, billing: BillingMode) -> Option<NodeSpec> {
        let t = self.instance_type(instance_type)?;
        let on_demand = MicrosPerHour(Micros::parse_decimal(&t.on_demand).ok()?.0);
        let reserved = MicrosPerHour(Micros::parse_decimal(&t.reserved).ok()?.0);
        Some(NodeSpec {
            id: NodeId(0),
            name: String::new(),
            instance_type: t.name.clone(),
            zone: zone.to_string(),
            billing,
            gpu_model: t.gpu_model.clone(),
            gpu_count: t.gpus,
            gpu_memory: Mib(t.gpu_memory_mib),
            mig_capable: t.mig_capable,
            cpus: t.cpus,
            host_memory: Mib(t.host_memory_mib),
            on_demand_price: on_demand,
            contract_price: if billing == BillingMode::Reserved { reserved } else { on_demand },
            max_price: None,
            mig_slices: Vec::new(),
            mig_gpus: 0,
        })
    }

    /// The elastic pools, as the room's `PoolSpec`s.
    pub fn pool_specs(&self) -> Vec<PoolSpec> {
        self.pools
            .iter()
            .filter_map(|p| {
                let node = self.spec_of(&p.instance_type, &p.zone, p.billing)?;
                let speed = self.instance_type(&p.instance_type)?.speed;
                Some(PoolSpec { node, speed, max_nodes: p.max_nodes, warm_min: p.warm_min, boot: Secs(p.boot_secs) })
            })
            .collect()
    }

    /// The capacity the offered load is a share of, in V100-equivalent GPUs:
    /// `workload.load_basis_gpus`, or the configured nodes'.
    pub fn load_basis_gpus(&self) -> f64 {
        self.workload.load_basis_gpus.unwrap_or_else(|| {
            self.node_specs().iter().map(|n| f64::from(n.gpu_count) * self.instance_type(&n.instance_type).map(|t| t.speed).unwrap_or(1.0)).sum()
        })
    }

    pub fn tenant_specs(&self) -> Vec<TenantSpec> {
        self.tenants
            .iter()
            .map(|t| TenantSpec {
                id: TenantId(t.name.clone()),
                quota_gpus: t.quota_gpus,
                monthly_budget: Micros::parse_decimal(&t.monthly_budget).unwrap_or_default(),
                quota_gpu_mem: Mib(t.quota_gpu_mem_mib),
                borrow_limit_gpus: t.borrow_limit_gpus,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_config_is_elastic_and_the_static_one_is_still_there() {
        let c = SimConfig::default_embedded();
        assert!(c.node_specs().iter().all(|n| n.billing == BillingMode::Reserved), "the fixed part is the reserved base");
        let pools = c.pool_specs();
        assert_eq!(pools.len(), c.pools.len());
        for mode in [BillingMode::OnDemand, BillingMode::Spot] {
            assert!(pools.iter().any(|p| p.node.billing == mode), "{mode:?} pools");
        }
        assert!(pools.iter().all(|p| p.problem().is_none() && p.boot.0 == 90), "{pools:?}");
        // The same work as the static fleet: the load is a share of its capacity.
        let (name, text) = super::super::data::STATIC_CONFIG;
        let fixed = SimConfig::parse(name, text).unwrap();
        assert!((c.load_basis_gpus() - fixed.load_basis_gpus()).abs() < 1e-9, "{} vs {}", c.load_basis_gpus(), fixed.load_basis_gpus());
        assert_eq!(c.tenant_specs(), fixed.tenant_specs());
    }

    #[test]
    fn the_static_config_is_valid_and_believable() {
        let (name, text) = super::super::data::STATIC_CONFIG;
        let c = SimConfig::parse(name, text).unwrap();
        assert!(c.pools.is_empty());
        let specs = c.node_specs();
        assert_eq!(specs.len(), c.nodes.len());
        assert!(specs.iter().filter(|s| s.gpu_count == 8).count() >= 4, "at least 4 nodes × 8 GPUs");
        let models: std::collections::BTreeSet<_> = specs.iter().map(|s| &s.gpu_model).collect();
        assert!(models.len() >= 2);
        let zones: std::collections::BTreeSet<_> = specs.iter().map(|s| &s.zone).collect();
        assert!(zones.len() >= 2);
        for mode in BillingMode::ALL {
            assert!(specs.iter().any(|s| s.billing == mode), "{mode:?} present");
        }
        assert_eq!(c.tenant_specs().len(), 3);
    }

    #[test]
    fn bad_configs_name_the_file_and_line() {
        let (_, text) = super::super::data::DEFAULT_CONFIG;
        let broken = text.replacen("telemetry_secs = 30", "telemetry_secs = \"soon\"", 1);
        let err = SimConfig::parse("my.toml", &broken).unwrap_err();
        assert_eq!(err.file, "my.toml");
        let line = text.lines().position(|l| l.starts_with("telemetry_secs")).unwrap() + 1;
        assert!(err.message.starts_with(&format!("line {line}:")), "{err}");

        let unknown_type = text.replacen("instance_type = \"p3.16xlarge\"\nzone", "instance_type = \"x9.huge\"\nzone", 1);
        assert!(SimConfig::parse("my.toml", &unknown_type).unwrap_err().message.contains("x9.huge"));

        let bad_money = text.replacen("monthly_budget = \"30000\"", "monthly_budget = \"lots\"", 1);
        assert!(SimConfig::parse("my.toml", &bad_money).unwrap_err().message.contains("monthly_budget"));

        for bad in ["nan", "inf", "-0.5", "1.5"] {
            let share = text.replacen("failure_rate = 0.02", &format!("failure_rate = 0.02\nincremental_share_per_step = {bad}"), 1);
            let err = SimConfig::parse("my.toml", &share).unwrap_err();
            assert!(err.message.starts_with("workload.incremental_share_per_step must be within 0..=1"), "{bad}: {err}");
        }

        let typo = text.replacen("target_load", "target_laod", 1);
        assert!(SimConfig::parse("my.toml", &typo).is_err());

        // Pools: an unknown type, reserved capacity bought on the fly, a warm
        // minimum above the maximum, a negative boot, and a pool given twice.
        let pool = "[[pools]]\ninstance_type = \"p3.2xlarge\"\nzone = \"us-west-2b\"\nbilling = \"on-demand\"\nmax_nodes = 8\n";
        let with = |extra: &str| format!("{text}\n{extra}");
        let bad_type = with(&pool.replace("p3.2xlarge", "x9.huge").replace("us-west-2b", "us-west-2z"));
        assert!(SimConfig::parse("my.toml", &bad_type).unwrap_err().message.contains("x9.huge"));
        let reserved = with(&pool.replace("on-demand", "reserved").replace("us-west-2b", "us-west-2z"));
        assert!(SimConfig::parse("my.toml", &reserved).unwrap_err().message.contains("reserved capacity"));
        let warm = with(&format!("{}warm_min = 9\n", pool.replace("us-west-2b", "us-west-2z")));
        assert!(SimConfig::parse("my.toml", &warm).unwrap_err().message.contains("warm_min"));
        let boot = with(&format!("{}boot_secs = -1\n", pool.replace("us-west-2b", "us-west-2z")));
        assert!(SimConfig::parse("my.toml", &boot).unwrap_err().message.contains("boot_secs"));
        let twice = with(pool);
        assert!(SimConfig::parse("my.toml", &twice).unwrap_err().message.contains("given twice"));
        let basis = text.replacen("load_basis_gpus = 49.6", "load_basis_gpus = nan", 1);
        assert!(SimConfig::parse("my.toml", &basis).unwrap_err().message.contains("load_basis_gpus"));
    }
}
