//! `gpuroom doctor`: asks each configured source once whether it answers,
//! and says why not when it does not: the first thing to run on a new head
//! node. Reads the network and the disk; changes nothing (no instance is
//! launched, no job run).

use std::time::Duration;

use super::config::SourcesConfig;
use crate::sources::{aws, dcgm, imds, nvml};

#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub source: String,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    fn new(source: impl Into<String>, result: Result<String, String>) -> Check {
        let (ok, detail) = match result {
            Ok(d) => (true, d),
            Err(d) => (false, d),
        };
        Check { source: source.into(), ok, detail }
    }
}

/// One check per configured source, in the order the console lists them.
pub async fn checks(config: &SourcesConfig, host: &str) -> Vec<Check> {
    let mut out = Vec::new();
    if config.nvml.enabled {
        let probe = tokio::task::spawn_blocking(|| {
            let driver = nvml::NvmlDriver::open()?;
            let host = nvml::host_name();
            let (readings, problems) = nvml::readings(&host, &driver)?;
            let models: Vec<String> = readings.iter().filter(|r| r.mig_instance.is_none()).filter_map(|r| r.model.clone()).collect();
            let version = driver.driver_version().map(|v| format!(", driver {v}")).unwrap_or_default();
            let extra = if problems.is_empty() { String::new() } else { format!("; {}", problems.join("; ")) };
            Ok(format!("{} GPUs ({}){version}{extra}", models.len(), models.join(", ")))
        })
        .await
        .unwrap_or_else(|e| Err(format!("NVML probe failed: {e}")));
        out.push(Check::new(format!("nvml {host}"), probe));
    }
    if !config.dcgm.urls.is_empty() {
        let client = reqwest::Client::new();
        let timeout = Duration::from_millis(config.dcgm.timeout_ms.max(1));
        for url in &config.dcgm.urls {
            let result = dcgm::scrape(&client, url, timeout).await.map_err(|e| e.to_string()).map(|readings| {
                let mut hosts: Vec<&str> = readings.iter().map(|r| r.host.as_str()).collect();
                hosts.sort();
                hosts.dedup();
                format!("{} GPU readings from {}", readings.len(), hosts.join(", "))
            });
            out.push(Check::new(format!("dcgm {url}"), result));
        }
    }
    if let Some(cfg) = &config.aws {
        let client = aws::client(cfg).await;
        let since = chrono::Utc::now() - chrono::TimeDelta::hours(1);
        let prices = aws::spot_price_history(&client, &cfg.instance_types, &cfg.zones, since).await;
        out.push(Check::new(
            format!("ec2 prices {}", cfg.region),
            prices.map(|p| format!("{} price points in the last hour", p.len())).map_err(|e| e.to_string()),
        ));
        let fleet = aws::describe_fleet(&client, None).await;
        out.push(Check::new(
            format!("ec2 fleet {}", cfg.region),
            fleet.map(|f| format!("{} instances, {} of them spot", f.len(), f.iter().filter(|i| i.spot).count())).map_err(|e| e.to_string()),
        ));
    }
    if let Some(cfg) = &config.imds {
        let mut client = imds::Imds::new(cfg);
        let result = client.poll_once().await.map_err(|e| e.to_string()).map(|notices| match notices.as_slice() {
            [] => "reachable; no interruption or rebalance notice".to_string(),
            n => format!("reachable; {} notice(s) now: {:?}", n.len(), n),
        });
        out.push(Check::new(format!("imds {}", cfg.endpoint), result));
    }
    if let Some(cfg) = &config.local {
        let dir = cfg.work_dir.clone();
        let result = std::fs::create_dir_all(&dir)
            .and_then(|_| tempfile_in(&dir))
            .map(|_| format!("work dir {} is writable", dir.display()))
            .map_err(|e| format!("work dir {}: {e}", dir.display()));
        out.push(Check::new("local executor", result));
    }
    if let Some(cfg) = &config.slurm {
        let cli = cfg.cli();
        let result = cli.snapshot().await.map_err(|e| e.to_string()).map(|s| {
            let gpus: u32 = s.nodes.iter().map(|n| n.gpus).sum();
            let how = if cli.uses_json() { "--json" } else { "parsable text (no --json)" };
            format!(
                "Slurm {} cluster {}: {} partitions, {} nodes, {gpus} GRES GPUs, {} jobs; read with {how}",
                s.version,
                s.cluster,
                s.partitions.len(),
                s.nodes.len(),
                s.jobs.len()
            )
        });
        out.push(Check::new("slurm", result));
    }
    out
}

fn tempfile_in(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".gpuroom-doctor-{}", std::process::id()));
    std::fs::write(&probe, b"ok")?;
    std::fs::remove_file(&probe)
}

/// The checks as a table, one line each.
pub fn render(checks: &[Check]) -> String {
    if checks.is_empty() {
        return "no live source is configured (see the README: Running against a real cluster)\n".to_string();
    }
    let width = checks.iter().map(|c| c.source.chars().count()).max().unwrap_or(0);
    checks.iter().map(|c| format!("{} {:width$}  {}\n", if c.ok { "ok  " } else { "FAIL" }, c.source, c.detail)).collect()
}
