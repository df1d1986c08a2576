//! The live sources' configuration (the `[sources]` table of config.toml)
//! and the jobs file the local executor runs (`--jobs FILE`).
//!
//! ```toml
//! [sources.nvml]
//! enabled = true            # this machine's GPUs (default on)
//! [sources.dcgm]
//! urls = ["http://gpu-a:9400/metrics", "http://gpu-b:9400/metrics"]
//! [sources.aws]             # present = on; credentials: the default chain
//! region = "us-east-1"
//! instance_types = ["p3.8xlarge"]
//! zones = ["us-east-1a", "us-east-1b"]
//! [sources.imds]            # on a spot instance: 2-minute notices
//! [sources.local]           # run jobs here as processes
//! work_dir = "/var/tmp/gpuroom-jobs"
//! [[sources.nodes]]         # what a host is and costs, when its GPUs cannot say
//! host = "gpu-a"
//! instance_type = "p4d.24xlarge"
//! billing = "reserved"
//! price = "19.22"
//! ```
//!
//! Owns parsing and validation only; adapters read their part.

use serde::Deserialize;

use super::catalogue::{InstanceShape, NodeDecl};
use crate::config::numbers::{self, Pass, Rule};
pub use crate::config::tenant::TenantDecl;
use crate::domain::event::TenantSpec;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{JobClass, JobSpec, PoolPreference, Tags};
use crate::domain::units::{Mib, Micros, Secs};
use crate::sources::aws::AwsConfig;
use crate::sources::dcgm::DcgmConfig;
use crate::sources::imds::ImdsConfig;
use crate::sources::local::{JobCommand, LocalConfig};
use crate::sources::nvml::NvmlConfig;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    pub nvml: NvmlConfig,
    pub dcgm: DcgmConfig,
    pub aws: Option<AwsConfig>,
    pub imds: Option<ImdsConfig>,
    pub local: Option<LocalConfig>,
    pub slurm: Option<crate::sources::slurm::SlurmConfig>,
    pub instance_types: Vec<InstanceShape>,
    pub nodes: Vec<NodeDecl>,
}

/// A jobs file: tenants, and jobs with the command each runs.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsFile {
    pub tenant: Vec<TenantDecl>,
    pub job: Vec<JobDecl>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobDecl {
    pub name: String,
    pub tenant: String,
    #[serde(default = "default_text")]
    pub project: String,
    #[serde(default = "default_text")]
    pub env: String,
    #[serde(default = "default_text")]
    pub model: String,
    #[serde(default = "default_class")]
    pub class: JobClass,
    #[serde(default = "one")]
    pub gpus: u8,
    pub gpu_mem_mib: u32,
    pub steps: u64,
    #[serde(default)]
    pub checkpoint_mib: u32,
    #[serde(default)]
    pub priority: i32,
    #[serde(default = "default_pool")]
    pub pool: PoolPreference,
    /// Seconds the submitter expects it to run (backfill uses it).
    #[serde(default)]
    pub est_runtime_secs: Option<i64>,
    /// The GPU models it may run on (as the nodes name theirs); none: any.
    #[serde(default)]
    pub gpu_models: Vec<String>,
    /// Program and arguments.
    pub command: Vec<String>,
    #[serde(default)]
    pub workdir: Option<std::path::PathBuf>,
    #[serde(default)]
    pub env_vars: std::collections::BTreeMap<String, String>,
}

fn default_text() -> String {
    "default".into()
}
fn default_class() -> JobClass {
    JobClass::Training
}
fn one() -> u8 {
    1
}
fn default_pool() -> PoolPreference {
    PoolPreference::Any
}

/// Every numeric key of a jobs file and what it accepts (priorities alone may be negative).
pub const JOBS_NUMERIC_KEYS: &[(&str, Rule)] = &[
    ("tenant[].quota_gpus", numbers::U32),
    ("tenant[].borrow_limit_gpus", numbers::U32),
    ("tenant[].monthly_budget", Rule::Money),
    ("job[].gpus", Rule::Int(1, u8::MAX as i64)),
    ("job[].gpu_mem_mib", numbers::U32),
    ("job[].steps", Rule::Int(1, i64::MAX)),
    ("job[].checkpoint_mib", numbers::U32),
    ("job[].priority", Rule::Int(i32::MIN as i64, i32::MAX as i64)),
    ("job[].est_runtime_secs", numbers::SECS),
];

impl JobsFile {
    pub fn parse(file: &str, text: &str) -> Result<JobsFile, String> {
        let toml_error = |e: toml::de::Error| format!("{file}: {}", crate::sources::toml_message(text, &e));
        let doc: toml::Table = toml::from_str(text).map_err(toml_error)?;
        numbers::check(&doc, JOBS_NUMERIC_KEYS, Pass::Known).map_err(|e| format!("{file}: {e}"))?;
        let jobs: JobsFile = toml::from_str(text).map_err(toml_error)?;
        numbers::check(&doc, JOBS_NUMERIC_KEYS, Pass::Rest).map_err(|e| format!("{file}: {e}"))?;
        for (i, j) in jobs.job.iter().enumerate() {
            let problem = if j.command.is_empty() {
                Some("command is empty")
            } else if j.gpus == 0 {
                Some("gpus must be at least 1")
            } else if j.steps == 0 {
                Some("steps must be at least 1")
            } else if !jobs.tenant.iter().any(|t| t.id == j.tenant) {
                Some("its tenant is not declared in a [[tenant]] table")
            } else {
                None
            };
            if let Some(p) = problem {
                return Err(format!("{file}: job {} ({:?}): {p}", i + 1, j.name));
            }
        }
        for t in &jobs.tenant {
            Micros::parse_decimal(&t.monthly_budget).map_err(|e| format!("{file}: tenant {:?}: monthly_budget: {e}", t.id))?;
        }
        Ok(jobs)
    }

    pub fn tenants(&self) -> Vec<TenantSpec> {
        self.tenant
            .iter()
            .map(|t| TenantSpec {
                id: TenantId(t.id.clone()),
                quota_gpus: t.quota_gpus,
                monthly_budget: Micros::parse_decimal(&t.monthly_budget).unwrap_or(Micros(0)),
                quota_gpu_mem: Mib(0),
                borrow_limit_gpus: t.borrow_limit_gpus,
            })
            .collect()
    }

    /// The jobs as specs with ids from `first`, each with its command.
    pub fn jobs(&self, first: u64) -> Vec<(JobSpec, JobCommand)> {
        self.job
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let spec = JobSpec {
                    id: JobId(first + i as u64),
                    name: j.name.clone(),
                    tags: Tags { tenant: TenantId(j.tenant.clone()), project: j.project.clone(), env: j.env.clone(), model: j.model.clone() },
                    class: j.class,
                    gpus: j.gpus,
                    gpu_mem: Mib(j.gpu_mem_mib),
                    exclusive: true,
                    steps_total: j.steps,
                    priority: j.priority,
                    pool: j.pool,
                    checkpoint_size: Mib(j.checkpoint_mib),
                    cpus: 0,
                    host_mem: Mib(0),
                    est_runtime: j.est_runtime_secs.map(Secs),
                    gpu_models: j.gpu_models.clone(),
                };
                let command = JobCommand {
                    program: j.command[0].clone(),
                    args: j.command[1..].to_vec(),
                    workdir: j.workdir.clone(),
                    env: j.env_vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                };
                (spec, command)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT: &str = "[[tenant]]\nid = \"r\"\nquota_gpus = 2\nmonthly_budget = \"100\"\n";

    fn job_with(key: &str, value: &str) -> String {
        let base = [("name", "\"j\""), ("tenant", "\"r\""), ("gpu_mem_mib", "1000"), ("steps", "10"), ("command", "[\"true\"]")];
        let mut text = format!("{TENANT}[[job]]\n");
        for (k, v) in base.iter().filter(|(k, _)| *k != key) {
            text.push_str(&format!("{k} = {v}\n"));
        }
        text.push_str(&format!("{key} = {value}\n"));
        text
    }

    #[test]
    fn job_numbers_are_refused_out_of_range_naming_file_key_and_range() {
        assert!(JobsFile::parse("jobs.toml", &job_with("priority", "-5")).is_ok(), "priorities may be negative");
        assert!(JobsFile::parse("jobs.toml", &job_with("est_runtime_secs", "3600")).is_ok());
        for (key, value) in [
            ("gpus", "0"),
            ("gpus", "256"),
            ("steps", "-1"),
            ("gpu_mem_mib", "-1"),
            ("checkpoint_mib", "inf"),
            ("est_runtime_secs", "-60"),
            ("priority", "nan"),
            ("priority", "3000000000"),
        ] {
            let err = JobsFile::parse("jobs.toml", &job_with(key, value)).unwrap_err();
            assert!(err.starts_with(&format!("jobs.toml: job[0].{key} = {value}: must be a whole number within [")), "{key} = {value}: {err}");
        }
    }

    #[test]
    fn tenant_numbers_and_budgets_are_refused_out_of_range() {
        let job = job_with("gpus", "1");
        let job = job.trim_start_matches(TENANT);
        for (key, value, range) in
            [("quota_gpus", "-1", "whole number"), ("borrow_limit_gpus", "inf", "whole number"), ("monthly_budget", "\"-100\"", "amount ≥ 0")]
        {
            let tenant = TENANT.lines().filter(|l| !l.starts_with(key)).collect::<Vec<_>>().join("\n");
            let text = format!("{tenant}\n{key} = {value}\n{job}");
            let err = JobsFile::parse("jobs.toml", &text).unwrap_err();
            assert!(err.starts_with(&format!("jobs.toml: tenant[0].{key} = {value}: must be")) && err.contains(range), "{err}");
        }
    }
}
