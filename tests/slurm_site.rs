//! A Slurm cluster as a first-class room, end to end against the real
//! single-host Slurm of `.ci/slurm-up` (node `localhost`, 4 fake GRES GPUs),
//! a loopback dcgm-exporter and a loopback instance metadata service:
//!
//! * Slurm's node is a node of the room: its GPUs carry the Slurm jobs that
//!   hold them (by GRES index) and dcgm's utilization, matched by host name;
//! * Slurm jobs are charged to their accounts and comment tags, and the
//!   exported FOCUS file says so, idle GPUs as idle lines;
//! * an account at its budget has its pending jobs held in Slurm, another
//!   account's not, and an operator's approval releases them;
//! * `gpuroom agent` on the node sees an IMDS spot notice and drains the node
//!   in Slurm; the room signals the job (its batch script's trap writes a
//!   file), requeues it after the grace period and records the interruption.
//!
//! The engine runs on a clock the test moves (an hour's charges close when
//! the clock passes the hour); Slurm and the adapters run in real time.
//! Skipped with a message without Slurm unless `GPUROOM_REQUIRE_SLURM` is set.

#[path = "support/focus.rs"]
mod focus;
#[path = "support/loopback.rs"]
mod loopback;
#[path = "support/slurm.rs"]
mod slurm_support;

use std::path::Path;
use std::time::Duration;

use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::ids::{JobId, TenantId};
use gpuroom::domain::slurm::SlurmState;
use gpuroom::domain::units::Micros;
use gpuroom::live::Live;
use gpuroom::live::catalogue::Catalogue;
use gpuroom::live::config::SourcesConfig;
use gpuroom::live::run::spawn_sources;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sources::report::Report;
use gpuroom::store::{RunMeta, Store};
use loopback::{Loopback, Reply};
use slurm_support::{cancel_all, jobs_now, slurm_command, slurm_conf, wait_for_jobs};

/// One cluster: the tests take turns.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PROM: &str = "text/plain; version=0.0.4; charset=utf-8";

/// dcgm-exporter on `localhost`'s four GPUs: 10%, 20%, 30%, 40% busy.
fn dcgm() -> Loopback {
    let mut page = String::from("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n# TYPE DCGM_FI_DEV_FB_USED gauge\n# TYPE DCGM_FI_DEV_FB_FREE gauge\n");
    for gpu in 0..4 {
        let labels = format!("gpu=\"{gpu}\",UUID=\"GPU-{gpu}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA A10G\",Hostname=\"localhost\"");
        page.push_str(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{{labels}}} {}\nDCGM_FI_DEV_FB_USED{{{labels}}} {}\nDCGM_FI_DEV_FB_FREE{{{labels}}} {}\n",
            (gpu + 1) * 10,
            1000 * (gpu + 1),
            22_000 - 1000 * (gpu + 1)
        ));
    }
    Loopback::start(move |_| Reply::ok(PROM, page.clone()))
}

/// The metadata service of a spot instance told it goes at `deadline`.
fn imds(deadline: chrono::DateTime<chrono::Utc>) -> Loopback {
    let action = format!(r#"{{"action": "terminate", "time": "{}"}}"#, deadline.format("%Y-%m-%dT%H:%M:%SZ"));
    Loopback::start(move |seen| match (seen.method.as_str(), seen.url.as_str()) {
        ("PUT", "/latest/api/token") => Reply::ok("text/plain", "token"),
        ("GET", "/latest/meta-data/spot/instance-action") => Reply::ok("application/json", action.clone()),
        _ => Reply::status(404, "not found"),
    })
}

struct Engine {
    live: Live,
    reports: tokio::sync::mpsc::Receiver<Report>,
    dir: tempfile::TempDir,
    /// The engine's clock runs this far ahead of the wall clock.
    ahead: chrono::TimeDelta,
}

/// The engine as `gpuroom --live` runs it on `localhost`'s Slurm, on a real
/// SQLite log: control mode, the checkpoint grace cut to 2 s, the node
/// declared as an on-demand g5.12xlarge ($5.672/h: $1.418 a GPU).
fn engine(conf: &Path, dcgm_url: &str, budget_a: &str) -> Engine {
    let text = format!(
        "[nvml]\nenabled = false\n[dcgm]\nurls = [{dcgm_url:?}]\nevery_secs = 1\n\
         [slurm]\nmode = \"control\"\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\ncheckpoint_grace_secs = 2\n\
         [[slurm.account]]\nid = \"acme\"\nquota_gpus = 4\nmonthly_budget = {budget_a:?}\n\
         [[slurm.account]]\nid = \"beta\"\nquota_gpus = 4\nmonthly_budget = \"0\"\n\
         [[nodes]]\nhost = \"localhost\"\ninstance_type = \"g5.12xlarge\"\nbilling = \"on-demand\"\n",
        conf.display().to_string()
    );
    let config: SourcesConfig = toml::from_str(&text).expect("a sources table");
    let slurm = config.slurm.clone().unwrap();
    let adapters = spawn_sources(&config, "head");
    let room_config = RoomConfig { slurm: slurm.policy(), ..RoomConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let meta = RunMeta { room_config: room_config.clone(), source: "slurm site test".into(), created_with: "test".into(), world: None };
    let store = Store::create(&dir.path().join("run.db"), &meta).expect("a store");
    let catalogue = Catalogue::new(config.instance_types.clone(), config.nodes.clone());
    let mut live = Live::new(Room::new(room_config), Some(store), catalogue, "head".into(), chrono::Utc::now(), None)
        .with_slurm(adapters.slurm.clone(), slurm.accounts().unwrap());
    live.begin(chrono::Utc::now(), None).expect("begin");
    Engine { live, reports: adapters.reports, dir, ahead: chrono::TimeDelta::zero() }
}

impl Engine {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() + self.ahead
    }

    /// Applies reports as they come until `done` holds (or 60 s).
    async fn until(&mut self, what: &str, done: impl Fn(&Live) -> bool) {
        let ahead = self.ahead;
        slurm_support::apply_until(&mut self.live, &mut self.reports, what, Duration::from_secs(60), move || chrono::Utc::now() + ahead, done).await;
    }

    /// Moves the engine's clock on by `d` (the charges of the time between are settled).
    fn jump(&mut self, d: chrono::TimeDelta) {
        self.ahead += d;
        self.live.tick(self.now()).expect("tick");
    }

    fn audit(&self) -> Vec<gpuroom::store::audit::AuditRecord> {
        self.live.engine.store().unwrap().audit_records().unwrap()
    }

    fn localhost(&self) -> Option<gpuroom::room::view::NodeView> {
        self.live.engine.room().view().nodes.into_iter().find(|n| n.name == "localhost")
    }
}

async fn clean(conf: &Path) {
    let conf = conf.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let _ = std::process::Command::new("scontrol").args(["update", "nodename=localhost", "state=resume"]).env("SLURM_CONF", &conf).output();
        cancel_all(&conf)
    })
    .await
    .expect("the cluster is cleaned");
}

/// Puts `localhost` back in service however the test ends.
struct Resume<'a>(&'a Path);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scontrol").args(["update", "nodename=localhost", "state=resume"]).env("SLURM_CONF", self.0).output();
        cancel_all(self.0);
    }
}

/// `sbatch` a job of `account` on `gpus` GPUs running `script`; its id.
fn sbatch(conf: &Path, name: &str, account: &str, gpus: u32, comment: &str, script: &str) -> u64 {
    let gres = format!("--gres=gpu:{gpus}");
    let args = ["--parsable", "-J", name, "-A", account, "-p", "gpu", gres.as_str(), "-o", "/dev/null", "--comment", comment, "--requeue", "--wrap", script];
    let out = slurm_command(conf, "sbatch", &args);
    out.split(';').next().and_then(|id| id.parse().ok()).unwrap_or_else(|| panic!("sbatch said {out:?}"))
}

fn state(conf: &Path, id: u64) -> (SlurmState, String, u32) {
    jobs_now(conf).into_iter().find(|j| j.id == id).map(|j| (j.state, j.reason, j.restarts)).unwrap_or((SlurmState::Other("gone".into()), String::new(), 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_nodes_are_in_the_fleet_with_dcgm_figures_and_their_jobs_are_charged_to_accounts_in_the_focus_export() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let _resume = Resume(&conf);
    let a = sbatch(&conf, "gr-site-train", "acme", 2, "project=detr,model=vit-h", "sleep 600");
    let b = sbatch(&conf, "gr-site-eval", "beta", 1, "project=evals", "sleep 600");
    wait_for_jobs(&conf, "both to run", |jobs| [a, b].iter().all(|id| jobs.iter().any(|j| j.id == *id && j.state == SlurmState::Running)));
    let exporter = dcgm();
    let mut e = engine(&conf, &exporter.url("/metrics"), "1000");
    e.until("localhost in the fleet with its jobs and dcgm figures", |l| {
        l.engine
            .room()
            .view()
            .nodes
            .iter()
            .any(|n| n.name == "localhost" && n.gpus.iter().filter(|g| !g.jobs.is_empty()).count() == 3 && n.gpus.iter().all(|g| g.util.is_some()))
    })
    .await;
    let node = e.localhost().unwrap();
    assert_eq!(
        (node.state.as_str(), node.instance_type.as_str(), node.gpu_model.as_str(), node.gpus.len()),
        ("slurm mixed", "g5.12xlarge", "NVIDIA A10G", 4),
        "the type declared, the model as dcgm says: {node:#?}"
    );
    let on = |job: u64| node.gpus.iter().filter(|g| g.jobs.contains(&JobId::slurm(job))).map(|g| g.index).collect::<Vec<_>>();
    let slurm = jobs_now(&conf);
    let idx = |job: u64| slurm.iter().find(|j| j.id == job).unwrap().gpu_idx[0].1.iter().map(|i| *i as u8).collect::<Vec<_>>();
    assert_eq!((on(a), on(b)), (idx(a), idx(b)), "each GPU carries the Slurm job Slurm gave it");
    let utils: Vec<f32> = node.gpus.iter().map(|g| g.util.unwrap()).collect();
    assert_eq!(utils, [10.0, 20.0, 30.0, 40.0], "dcgm-exporter's figures, matched by host name");

    // The clock passes the hour: the hour's charges close into the ledger.
    let month = e.now().format("%Y-%m").to_string();
    e.jump(chrono::TimeDelta::hours(1));
    let db = e.dir.path().join("run.db");
    let focus = e.dir.path().join("focus.csv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuroom"))
        .args(["export", "--db"])
        .arg(&db)
        .args(["--month", &month, "--out"])
        .arg(&focus)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    focus::assert_valid(&focus);
    let mut reader = csv::Reader::from_path(&focus).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name} column"));
    let (cost, tags, resource, from, to) = (col("BilledCost"), col("Tags"), col("ResourceName"), col("ChargePeriodStart"), col("ChargePeriodEnd"));
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let tagged = |job: u64| -> Vec<(f64, serde_json::Value)> {
        rows.iter()
            .map(|r| (r[cost].parse::<f64>().unwrap(), serde_json::from_str::<serde_json::Value>(&r[tags]).unwrap()))
            .filter(|(_, t)| t["job"] == format!("slurm-{job}"))
            .collect()
    };
    // The closed charge period: from the engine's start to the hour.
    let time = |text: &str| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%SZ").unwrap();
    let hours = (time(&rows[0][to]) - time(&rows[0][from])).num_milliseconds() as f64 / 3_600_000.0;
    let (of_a, of_b) = (tagged(a), tagged(b));
    assert_eq!((of_a.len(), of_b.len()), (2, 1), "a line per GPU per job:\n{}", std::fs::read_to_string(&focus).unwrap());
    assert_eq!(
        (of_a[0].1["tenant"].as_str(), of_a[0].1["project"].as_str(), of_a[0].1["model"].as_str(), of_a[0].1["environment"].as_str()),
        (Some("acme"), Some("detr"), Some("vit-h"), Some("gpu"))
    );
    assert_eq!(of_b[0].1["tenant"].as_str(), Some("beta"));
    let a_total: f64 = of_a.iter().map(|(c, _)| c).sum();
    // Two GPUs of $5.672/h for the period, less the seconds before the first snapshot.
    assert!((a_total - 2.836 * hours).abs() < 0.01, "acme: {a_total} for {hours} h");
    let idle: f64 = rows.iter().filter(|r| r[tags].contains("\"idle\":\"true\"")).map(|r| r[cost].parse::<f64>().unwrap()).sum();
    assert!((idle - 1.418 * hours).abs() < 0.02, "the free GPU is idle: {idle} for {hours} h");
    let all: f64 = rows.iter().map(|r| r[cost].parse::<f64>().unwrap()).sum();
    assert!((all - 5.672 * hours).abs() < 0.005, "the whole node, every second: {all} for {hours} h");
    assert!(rows.iter().all(|r| r[resource].starts_with("localhost")), "every line is a GPU of the Slurm node");
    let view = e.live.engine.room().view();
    let acme = view.budgets.iter().find(|b| b.tenant == "acme").unwrap();
    assert!(acme.month_to_date >= Micros(2_836_000), "the account's books, which its budget reads: {acme:?}");
    drop(e);
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_at_its_budget_has_its_pending_jobs_held_in_slurm_until_an_operator_approves() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let _resume = Resume(&conf);
    let running = sbatch(&conf, "gr-budget-run", "acme", 4, "project=detr", "sleep 600");
    wait_for_jobs(&conf, "acme's job to run", |jobs| jobs.iter().any(|j| j.id == running && j.state == SlurmState::Running));
    let waiting = sbatch(&conf, "gr-budget-wait", "acme", 1, "project=detr", "sleep 600");
    let other = sbatch(&conf, "gr-budget-beta", "beta", 1, "project=evals", "sleep 600");
    let exporter = dcgm();
    // acme may spend $5; its job holds the whole node at $5.672/h.
    let mut e = engine(&conf, &exporter.url("/metrics"), "5");
    e.until("the node with acme's job", |l| l.engine.room().view().nodes.iter().any(|n| n.name == "localhost" && n.gpus.iter().all(|g| !g.jobs.is_empty())))
        .await;
    e.jump(chrono::TimeDelta::minutes(55));
    e.until("acme limited", |l| l.engine.room().view().budgets.iter().any(|b| b.tenant == "acme" && b.level == gpuroom::cost::budget::BudgetLevel::Limited))
        .await;
    let held = |c: &Path, id: u64| state(c, id).1.starts_with("JobHeld");
    let audited = |l: &Live, verb: &str| l.engine.store().unwrap().audit_records().unwrap().iter().any(|r| r.verb == verb && r.outcome == "done");
    e.until("acme's pending job held in Slurm, and Slurm's answer audited", |l| held(&conf, waiting) && audited(l, "hold")).await;
    assert!(!held(&conf, other), "beta is within its budget: {:?}", state(&conf, other));
    assert_eq!(state(&conf, running).0, SlurmState::Running, "at 100% running work goes on");
    let audit = e.audit();
    let holds: Vec<_> = audit.iter().filter(|r| r.verb == "hold").collect();
    assert_eq!(holds.len(), 1, "{audit:#?}");
    assert!(holds[0].origin == "policy" && holds[0].outcome == "done" && holds[0].detail.contains(&format!("scontrol hold {waiting}")), "{:?}", holds[0]);

    let alice = Actor { user: "alice".into(), origin: "console".into(), role: Role::Operator, account: None };
    let approve = Action::ApproveOverrun { tenant: TenantId("acme".into()), reason: "paper deadline".into(), amount: Some(Micros(20_000_000)), until: None };
    e.live.engine.operate(&alice, approve).unwrap().unwrap();
    e.until("the approval releases it", |l| !held(&conf, waiting) && audited(l, "release")).await;
    assert!(e.audit().iter().any(|r| r.verb == "release" && r.outcome == "done"), "{:#?}", e.audit());
    drop(e);
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_notice_on_the_node_drains_it_and_the_room_signals_requeues_and_records_the_interruption() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let _resume = Resume(&conf);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("checkpointed");
    // The job saves when told: its batch script traps the checkpoint signal.
    let script = format!("trap 'echo saved >> {}' USR1; for i in $(seq 600); do sleep 1; done", marker.display());
    let job = sbatch(&conf, "gr-spot", "acme", 2, "project=detr", &script);
    wait_for_jobs(&conf, "the job to run", |jobs| jobs.iter().any(|j| j.id == job && j.state == SlurmState::Running));
    let exporter = dcgm();
    let mut e = engine(&conf, &exporter.url("/metrics"), "0");
    e.until("the node with the job", |l| {
        l.engine.room().view().nodes.iter().any(|n| n.name == "localhost" && n.gpus.iter().any(|g| g.jobs.contains(&JobId::slurm(job))))
    })
    .await;

    // The agent on the node hears IMDS and drains it through Slurm.
    let deadline = chrono::Utc::now() + chrono::TimeDelta::seconds(120);
    let metadata = imds(deadline);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuroom"))
        .args(["agent", "--once", "--node", "localhost", "--imds", &metadata.url(""), "--slurm-conf"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(out.status.success(), "agent: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    e.until("the interruption recorded", |l| l.engine.room().view().alarms.iter().any(|a| a.text.contains("spot interruption: localhost"))).await;
    let node = e.localhost().unwrap();
    assert!(node.state.starts_with("draining"), "{}", node.state);
    e.until("the job requeued after its checkpoint signal", |_| {
        let (s, _, restarts) = state(&conf, job);
        s == SlurmState::Pending && restarts == 1
    })
    .await;
    let saved = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(saved.contains("saved"), "the batch script got USR1 before the requeue");
    let audit = e.audit();
    let verbs: Vec<(&str, &str, &str)> =
        audit.iter().filter(|r| r.user == "gpuroom").map(|r| (r.verb.as_str(), r.outcome.as_str(), r.origin.as_str())).collect();
    assert_eq!(verbs, [("signal", "done", "policy"), ("requeue", "done", "policy")], "{audit:#?}");
    assert!(audit[0].detail.contains(&format!("scancel --batch --signal=USR1 {job}")), "{:?}", audit[0]);
    let log = e.live.engine.room().view().log;
    assert!(log.iter().any(|l| l.text.contains("spot interruption (terminate)")), "{log:#?}");
    // The log alone rebuilds the room the console showed: nodes, holders, draining, alarms.
    let live = e.live.engine.room().view();
    let (replayed, _) = gpuroom::store::replay(e.live.engine.store().unwrap(), false).unwrap();
    let again = replayed.view();
    assert_eq!((again.nodes, again.alarms, again.budgets), (live.nodes, live.alarms, live.budgets), "replay gives the live room");
    drop(e);
    clean(&conf).await;
}
