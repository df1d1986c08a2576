//! gpuroom in the on-call stack, against the real daemons (Debian's
//! `prometheus` and `prometheus-alertmanager`, on loopback ports of the
//! test's own, stopped by PID when it ends): a simulated engine serves
//! `/metrics`; Prometheus scrapes it every second and evaluates the shipped
//! rules (`deploy/prometheus/gpuroom-rules.yml`); a tenant goes over its
//! budget and the spot traces take nodes away; the alerts fire in
//! Prometheus and reach a webhook receiver of the test's through
//! Alertmanager with their labels; the engine stops and they resolve. Also:
//! `promtool check rules` and `promtool check metrics` on a real scrape, and
//! every query of the Grafana dashboard names a metric the engine exports.
//!
//! Without the daemons the tests say so and pass, unless
//! `GPUROOM_REQUIRE_PROMETHEUS` is set (as `.ci/run` does).

#[path = "support/loopback.rs"]
mod loopback;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use loopback::{Loopback, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");
const RULES: &str = "deploy/prometheus/gpuroom-rules.yml";
const DASHBOARD: &str = "deploy/grafana/gpuroom.json";

fn available() -> bool {
    let found = ["prometheus", "prometheus-alertmanager", "promtool"]
        .iter()
        .all(|b| Command::new("sh").args(["-c", &format!("command -v {b}")]).output().is_ok_and(|o| o.status.success()));
    if !found {
        assert!(
            std::env::var_os("GPUROOM_REQUIRE_PROMETHEUS").is_none(),
            "GPUROOM_REQUIRE_PROMETHEUS is set but prometheus, prometheus-alertmanager or promtool is missing"
        );
        eprintln!("skipped: prometheus, prometheus-alertmanager and promtool are not installed (apt-get install prometheus prometheus-alertmanager)");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A daemon of the test's, stopped (and waited for) when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        sleep(Duration::from_millis(250));
    }
}

/// The body of a 200 answer to GET `url` (plain HTTP on loopback).
fn get(url: &str) -> Option<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.split_whitespace().nth(1).filter(|code| *code == "200").map(|_| body.to_string())
}

fn engine(db: &Path, metrics_port: u16) -> Child {
    Command::new(BIN)
        .args(["engine", "--sim-config", "fixtures/sim/paging.toml", "--speed", "3600", "--metrics", &format!("127.0.0.1:{metrics_port}"), "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The alerts the receiver was sent: (status, alertname, labels as JSON).
type Received = Arc<Mutex<Vec<serde_json::Value>>>;

fn alerts(received: &Received, name: &str, status: &str) -> Vec<serde_json::Value> {
    received.lock().unwrap().iter().filter(|a| a["labels"]["alertname"] == name && a["status"] == status).cloned().collect()
}

#[test]
fn alerts_fire_in_prometheus_reach_the_receiver_through_alertmanager_and_resolve() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (metrics, prom, am) = (free_port(), free_port(), free_port());
    let received: Received = Arc::default();
    let receiver = {
        let received = received.clone();
        Loopback::start(move |seen| {
            if let Ok(body) = serde_json::from_str::<serde_json::Value>(&seen.body) {
                received.lock().unwrap().extend(body["alerts"].as_array().cloned().unwrap_or_default());
            }
            Reply::ok("text/plain", "ok")
        })
    };
    let am_config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &am_config,
        format!(
            "route:\n  receiver: test\n  group_by: [alertname, tenant]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: {}\n        send_resolved: true\n",
            receiver.url("/alerts")
        ),
    )
    .unwrap();
    let _alertmanager = Daemon(
        Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", am_config.display()))
            .arg(format!("--storage.path={}", dir.path().join("am").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{am}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let rules = std::fs::canonicalize(RULES).unwrap();
    let prom_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am}']\nscrape_configs:\n  - job_name: gpuroom\n    static_configs:\n      - targets: ['127.0.0.1:{metrics}']\n",
            rules.display()
        ),
    )
    .unwrap();
    let _prometheus = Daemon(
        Command::new("prometheus")
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let db = dir.path().join("room.db");
    let mut child = engine(&db, metrics);
    let scrape = wait_for("the engine's /metrics", Duration::from_secs(60), || get(&format!("http://127.0.0.1:{metrics}/metrics")));
    let scraped = dir.path().join("scrape.txt");
    std::fs::write(&scraped, &scrape).unwrap();
    let check = Command::new("sh").arg("-c").arg(format!("promtool check metrics < {}", scraped.display())).output().unwrap();
    assert!(check.status.success(), "promtool check metrics: {}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));

    // Firing: in Prometheus, then at the receiver, with the rule's labels.
    // recsys's $25 goes within hours; past 100% the room runs its work on
    // spot only, and it is held there (the 80% and 120% rungs are covered by
    // the rules' own unit tests, deploy/prometheus/gpuroom-rules.test.yml).
    let api = format!("http://127.0.0.1:{prom}/api/v1/alerts");
    wait_for("GpuroomBudgetLimited firing in Prometheus", Duration::from_secs(120), || {
        get(&api).filter(|body| body.contains("\"alertname\":\"GpuroomBudgetLimited\"") && body.contains("\"state\":\"firing\""))
    });
    let over = wait_for("GpuroomBudgetLimited at the receiver", Duration::from_secs(60), || alerts(&received, "GpuroomBudgetLimited", "firing").pop());
    assert_eq!(over["labels"]["tenant"], "recsys", "{over}");
    assert_eq!(over["labels"]["severity"], "warning", "{over}");
    assert_eq!(over["labels"]["job"], "gpuroom", "{over}");
    assert!(over["annotations"]["summary"].as_str().unwrap().starts_with("recsys is over its monthly budget ("), "{over}");
    assert!(over["annotations"]["runbook"].as_str().unwrap().contains("key 5 (Budgets)"), "{over}");
    let storm = wait_for("GpuroomSpotStorm at the receiver", Duration::from_secs(120), || alerts(&received, "GpuroomSpotStorm", "firing").pop());
    assert_eq!(storm["labels"]["severity"], "critical", "{storm}");
    assert!(storm["annotations"]["runbook"].as_str().unwrap().contains("key 4 (Spot market)"), "{storm}");
    // The other tenants' budgets are far from it: no budget alert names them.
    let budget_alerts = ["GpuroomBudgetNotice", "GpuroomBudgetLimited", "GpuroomBudgetOver120"];
    let tenants: BTreeSet<String> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|a| budget_alerts.iter().any(|n| a["labels"]["alertname"] == *n))
        .filter_map(|a| a["labels"]["tenant"].as_str().map(String::from))
        .collect();
    assert_eq!(tenants, BTreeSet::from(["recsys".to_string()]));

    // The engine stops: its series go, the budget alert resolves, the engine-down one fires.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(child.wait().unwrap().success());
    wait_for("GpuroomBudgetLimited resolved at the receiver", Duration::from_secs(120), || alerts(&received, "GpuroomBudgetLimited", "resolved").pop());
    wait_for("GpuroomEngineDown at the receiver", Duration::from_secs(120), || alerts(&received, "GpuroomEngineDown", "firing").pop());
    drop(receiver);
}

#[test]
fn the_shipped_rules_check_and_the_dashboard_asks_only_for_exported_metrics() {
    if !available() {
        return;
    }
    let out = Command::new("promtool").args(["check", "rules", RULES]).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("10 rules found"), "{}", String::from_utf8_lossy(&out.stdout));
    // Each alert fires at its threshold and not below (promtool's rule unit tests).
    let out = Command::new("promtool").args(["test", "rules", "gpuroom-rules.test.yml"]).current_dir("deploy/prometheus").output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    // The families the engine documents (a unit test holds them to its scrapes)…
    let exported: BTreeSet<String> = gpuroom::metrics::FAMILIES.iter().map(|f| f.name.to_string()).collect();
    // …hold every metric the dashboard's and the rules' queries name.
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap()).unwrap();
    let mut queries = Vec::new();
    collect_exprs(&dashboard, &mut queries);
    assert!(queries.len() >= 12, "{} queries", queries.len());
    let rules = std::fs::read_to_string(RULES).unwrap();
    queries.extend(rules.lines().filter_map(|l| l.trim().strip_prefix("expr: ")).map(String::from));
    for query in &queries {
        for name in metric_names(query) {
            let family = name.trim_end_matches("_total");
            let known = exported.contains(&name) || exported.contains(family) || exported.contains(&format!("{name}_total"));
            assert!(known, "{query:?} names {name}, which gpuroom does not export");
        }
    }
}

fn collect_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            // Panel queries, and the template variables' ("label_values(…)").
            if let Some(serde_json::Value::String(expr)) = map.get("expr").or_else(|| map.get("definition")) {
                out.push(expr.clone());
            }
            map.values().for_each(|v| collect_exprs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The `gpuroom_…` names in a PromQL query.
fn metric_names(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = query;
    while let Some(i) = rest.find("gpuroom_") {
        let name: String = rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        rest = &rest[i + name.len()..];
        out.push(name);
    }
    out
}
