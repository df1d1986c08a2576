//! Against a real Slurm (slurmctld + slurmd on localhost, started by
//! `.ci/slurm-up`, which writes the slurm.conf: one node, 4 CPUs, 4 fake
//! GRES GPUs, partitions `gpu` and `spare`): real `sbatch --wrap` jobs are
//! read back through squeue/sinfo/scontrol (JSON and the parsable text),
//! driven through gpuroom (requeue, suspend/resume, hold/release, migrate,
//! cancel) and checked in Slurm; Slurm's errors (job not found, permission
//! denied, controller down) come back classified; `gpuroom doctor` says
//! which Slurm answers and why one does not; and the engine's quota policy
//! preempts a borrower in control mode and only advises otherwise.
//!
//! Skipped with a message when `GPUROOM_SLURM_CONF` is not set, unless
//! `GPUROOM_REQUIRE_SLURM` is (as `.ci/run` does). The tests share the one
//! cluster, so they take turns.

#[path = "support/slurm.rs"]
mod slurm_support;

use std::path::Path;
use std::time::Duration;

use gpuroom::domain::event::{Action, Actor, Role};
use gpuroom::domain::slurm::{SlurmCommand, SlurmSnapshot, SlurmState, SlurmVerb};
use gpuroom::live::Live;
use gpuroom::live::catalogue::Catalogue;
use gpuroom::live::config::SourcesConfig;
use gpuroom::live::run::spawn_sources;
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sources::report::Report;
use gpuroom::sources::slurm::cli::{ErrorKind, SlurmCli};
use gpuroom::store::{RunMeta, Store};
use slurm_support::{cancel_all, slurm_conf, submit};

/// One cluster for every test here: they take turns (tokio's lock, held across awaits).
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cli(conf: &Path) -> SlurmCli {
    SlurmCli::new(Vec::new(), None, Some(conf.to_path_buf()), Duration::from_secs(20))
}

/// Polls Slurm until `ok` holds for a snapshot (or 60 s).
async fn wait_for(cli: &SlurmCli, what: &str, ok: impl Fn(&SlurmSnapshot) -> bool) -> SlurmSnapshot {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let snapshot = cli.snapshot().await.expect("a snapshot");
        if ok(&snapshot) {
            return snapshot;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}; jobs: {:#?}", snapshot.jobs);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn job(s: &SlurmSnapshot, id: u64) -> &gpuroom::domain::slurm::SlurmJob {
    s.jobs.iter().find(|j| j.id == id).unwrap_or_else(|| panic!("job {id} is not in the snapshot"))
}

/// `cancel_all` off the async threads: each test starts on an idle cluster.
async fn clean(conf: &Path) {
    let conf = conf.to_path_buf();
    tokio::task::spawn_blocking(move || cancel_all(&conf)).await.expect("the cluster is cleaned");
}

fn command(id: u64, job: u64, verb: SlurmVerb) -> SlurmCommand {
    SlurmCommand { id, job, verb, by: "test@tests".into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_nodes_and_partitions_read_back_with_their_gres_gpus_in_json_and_in_text() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let running = submit(&conf, "gr-read-run", "acme", 2, &[]);
    let json = cli(&conf);
    wait_for(&json, "the 2-GPU job to run", |s| job(s, running).state == SlurmState::Running).await;
    let pending = submit(&conf, "gr-read-wait", "beta", 3, &[]);
    let held = submit(&conf, "gr-read-held", "beta", 1, &["--hold"]);
    let s = wait_for(&json, "the 3-GPU job to wait for resources", |s| job(s, pending).reason == "Resources").await;
    assert!(s.version.starts_with("2"), "a release: {:?}", s.version);
    assert_eq!(s.cluster, "gpuroom-ci");
    let names: Vec<_> = s.partitions.iter().map(|p| (p.name.as_str(), p.default)).collect();
    assert_eq!(names, [("gpu", true), ("spare", false)]);
    let node = &s.nodes[0];
    assert_eq!((node.name.as_str(), node.gpus, node.gpus_used, node.gpu_type.as_deref()), ("localhost", 4, 2, Some("fake")), "{node:?}");
    let r = job(&s, running);
    assert_eq!((r.gpus, r.account.as_str(), r.nodes.clone()), (2, "acme", vec!["localhost".to_string()]));
    assert_eq!(r.gpu_idx.len(), 1, "GPU indices from gres_detail: {r:?}");
    assert_eq!(r.gpu_idx[0].1.len(), 2);
    assert_eq!(node.gpus_used_idx, r.gpu_idx[0].1, "the node's used GPUs are the job's");
    let p = job(&s, pending);
    assert_eq!((p.state.clone(), p.gpus, p.nodes.len()), (SlurmState::Pending, 3, 0));
    assert!(job(&s, held).held(), "{:?}", job(&s, held));
    // The parsable text (Slurm without --json) says the same, without indices.
    let text = cli(&conf).without_json();
    let t = text.snapshot().await.expect("a text snapshot");
    assert!(!text.uses_json());
    for id in [running, pending, held] {
        let (a, b) = (job(&s, id), job(&t, id));
        assert_eq!(
            (&a.name, &a.account, &a.state, a.gpus, &a.nodes, &a.partition, a.held()),
            (&b.name, &b.account, &b.state, b.gpus, &b.nodes, &b.partition, b.held()),
            "job {id}"
        );
    }
    assert_eq!((t.nodes[0].gpus, t.nodes[0].gpus_used), (4, 2));
    assert_eq!(t.nodes[0].partitions, ["gpu", "spare"]);
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_is_carried_out_by_slurm_and_read_back() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let c = cli(&conf);
    let a = submit(&conf, "gr-verbs-a", "acme", 1, &[]);
    wait_for(&c, "a to run", |s| job(s, a).state == SlurmState::Running).await;

    assert_eq!(c.execute(&command(1, a, SlurmVerb::Suspend)).await.unwrap(), format!("scontrol suspend {a}"));
    wait_for(&c, "a suspended", |s| job(s, a).state == SlurmState::Suspended).await;
    c.execute(&command(2, a, SlurmVerb::Resume)).await.unwrap();
    wait_for(&c, "a running again", |s| job(s, a).state == SlurmState::Running).await;

    c.execute(&command(3, a, SlurmVerb::Requeue)).await.unwrap();
    let s = wait_for(&c, "a requeued", |s| job(s, a).state == SlurmState::Pending && job(s, a).restarts == 1).await;
    assert_eq!(s.nodes[0].gpus_used, 0, "its GPU is free");

    c.execute(&command(4, a, SlurmVerb::Hold)).await.unwrap();
    wait_for(&c, "a held", |s| job(s, a).held()).await;
    c.execute(&command(5, a, SlurmVerb::Release)).await.unwrap();
    wait_for(&c, "a released", |s| !job(s, a).held()).await;

    // A pending job is only updated; a running one is requeued held, changed, released.
    let moved = c.execute(&command(6, a, SlurmVerb::Migrate { partition: Some("spare".into()), exclude: Vec::new() })).await.unwrap();
    assert!(moved.contains("partition=spare") && !moved.contains("requeuehold"), "{moved}");
    wait_for(&c, "a in spare", |s| job(s, a).partition == "spare").await;
    let b = submit(&conf, "gr-verbs-b", "acme", 1, &[]);
    wait_for(&c, "b to run", |s| job(s, b).state == SlurmState::Running).await;
    let moved = c.execute(&command(7, b, SlurmVerb::Migrate { partition: Some("spare".into()), exclude: vec!["localhost".into()] })).await.unwrap();
    assert!(moved.contains("requeuehold") && moved.contains("excnodelist=localhost") && moved.ends_with(&format!("release {b}")), "{moved}");
    let s = wait_for(&c, "b moved", |s| job(s, b).partition == "spare" && job(s, b).state == SlurmState::Pending).await;
    let jb = job(&s, b);
    assert_eq!((jb.restarts, jb.excluded.clone(), jb.held()), (1, vec!["localhost".to_string()], false), "{jb:?}");

    assert_eq!(c.execute(&command(8, b, SlurmVerb::Cancel)).await.unwrap(), format!("scancel {b}"));
    wait_for(&c, "b cancelled", |s| s.jobs.iter().find(|j| j.id == b).is_none_or(|j| j.state == SlurmState::Cancelled)).await;
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurms_refusals_come_back_classified_in_its_own_words() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let c = cli(&conf);
    let e = c.execute(&command(1, 999_999, SlurmVerb::Requeue)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("Invalid job id"), "{e}");
    let e = c.execute(&command(2, 999_999, SlurmVerb::Cancel)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "scancel says it on stderr with status 0: {e}");

    let a = submit(&conf, "gr-refused", "acme", 1, &[]);
    wait_for(&c, "a to run", |s| job(s, a).state == SlurmState::Running).await;
    let e = c.execute(&command(3, a, SlurmVerb::Resume)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidState, "resuming a running job: {e}");
    // Another user may not touch it.
    let nobody = SlurmCli::new(vec!["runuser".into(), "-u".into(), "nobody".into(), "--".into()], None, Some(conf.clone()), Duration::from_secs(20));
    let e = nobody.execute(&command(4, a, SlurmVerb::Requeue)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    assert!(e.command.starts_with("runuser -u nobody -- scontrol requeue"), "{e}");
    assert_eq!(nobody.execute(&command(5, a, SlurmVerb::Cancel)).await.unwrap_err().kind, ErrorKind::PermissionDenied);
    let s = c.snapshot().await.unwrap();
    assert_eq!((job(&s, a).state.clone(), job(&s, a).restarts), (SlurmState::Running, 0), "nothing happened to it");

    // A controller nobody answers on: squeue --json exits 0 with an errors list.
    let dir = tempfile::tempdir().unwrap();
    let down = SlurmCli::new(Vec::new(), None, Some(dead_controller(&conf, dir.path())), Duration::from_secs(30));
    let e = down.snapshot().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::ControllerDown, "{e}");
    let e = down.execute(&command(6, a, SlurmVerb::Requeue)).await.unwrap_err();
    assert_ne!(e.kind, ErrorKind::NotFound, "{e}");
    clean(&conf).await;
}

/// A copy of the cluster's slurm.conf in `dir` whose controller port nobody listens on.
fn dead_controller(conf: &Path, dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(conf).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let moved: String = text.lines().map(|l| if l.starts_with("SlurmctldPort=") { format!("SlurmctldPort={port}\n") } else { format!("{l}\n") }).collect();
    std::fs::write(dir.join("slurm.conf"), moved).unwrap();
    std::fs::copy(conf.with_file_name("gres.conf"), dir.join("gres.conf")).unwrap();
    dir.join("slurm.conf")
}

/// `gpuroom doctor` on a configuration whose Slurm uses `conf`: its exit status and output.
fn doctor(conf: &Path) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!("[sources.nvml]\nenabled = false\n[sources.slurm]\ntimeout_secs = 20\nconf = {:?}\n", conf.display().to_string());
    std::fs::write(&config, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(["doctor", "--config"]).arg(&config).output().expect("run gpuroom doctor");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_which_slurm_answers_and_why_one_does_not() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let (ok, text) = doctor(&conf);
    let line = text.lines().find(|l| l.contains("slurm")).unwrap_or_else(|| panic!("no slurm line:\n{text}"));
    assert!(ok && line.starts_with("ok"), "{text}");
    assert!(
        line.contains("Slurm 22.05") && line.contains("cluster gpuroom-ci: 2 partitions, 1 nodes, 4 GRES GPUs") && line.contains("read with --json"),
        "{line}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = doctor(&dead_controller(&conf, dir.path()));
    let line = text.lines().find(|l| l.contains("slurm")).unwrap_or_else(|| panic!("no slurm line:\n{text}"));
    assert!(!ok && line.starts_with("FAIL") && line.contains("controller unreachable"), "a failing exit and why: {text}");
}

fn sources(conf: &Path, mode: &str, prefix: &[&str]) -> SourcesConfig {
    let text = format!(
        "[nvml]\nenabled = false\n[slurm]\nmode = {mode:?}\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\nprefix = {prefix:?}\n\
         [[slurm.account]]\nid = \"a\"\nquota_gpus = 2\nmonthly_budget = \"0\"\n\
         [[slurm.account]]\nid = \"b\"\nquota_gpus = 2\nmonthly_budget = \"0\"\n",
        conf.display().to_string()
    );
    toml::from_str(&text).expect("a sources table")
}

struct Engine {
    live: Live,
    reports: tokio::sync::mpsc::Receiver<Report>,
    _dir: tempfile::TempDir,
}

/// The engine as the console runs it, on a real SQLite log.
fn engine(conf: &Path, mode: &str, prefix: &[&str]) -> Engine {
    let config = sources(conf, mode, prefix);
    let slurm = config.slurm.clone().unwrap();
    let adapters = spawn_sources(&config, "head");
    let room_config = RoomConfig { slurm: slurm.policy(), ..RoomConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let meta = RunMeta { room_config: room_config.clone(), source: "slurm test".into(), created_with: "test".into(), world: None };
    let store = Store::create(&dir.path().join("run.db"), &meta).expect("a store");
    let catalogue = Catalogue::new(Vec::new(), Vec::new());
    let mut live = Live::new(Room::new(room_config), Some(store), catalogue, "head".into(), chrono::Utc::now(), None)
        .with_slurm(adapters.slurm.clone(), slurm.accounts().unwrap());
    live.begin(chrono::Utc::now(), None).expect("begin");
    Engine { live, reports: adapters.reports, _dir: dir }
}

impl Engine {
    /// Applies reports as they come until `done` holds (or 60 s).
    async fn until(&mut self, what: &str, done: impl Fn(&Live) -> bool) {
        slurm_support::apply_until(&mut self.live, &mut self.reports, what, Duration::from_secs(60), chrono::Utc::now, done).await;
    }

    /// Applies reports as they come for `d`.
    async fn run_for(&mut self, d: Duration) {
        let end = tokio::time::Instant::now() + d;
        while let Ok(next) = tokio::time::timeout_at(end, self.reports.recv()).await {
            let report = next.expect("the adapters run");
            self.live.report(chrono::Utc::now(), report).expect("apply a report");
        }
    }

    fn row(&self, id: u64) -> Option<gpuroom::room::view_slurm::SlurmJobRow> {
        self.live.engine.room().view().slurm?.jobs.into_iter().find(|j| j.id == id)
    }

    fn audit(&self) -> Vec<gpuroom::store::audit::AuditRecord> {
        self.live.engine.store().unwrap().audit_records().unwrap()
    }
}

/// a holds all four GPUs in two jobs (two of them borrowed); b asks for two within its quota.
async fn contest(conf: &Path) -> (u64, u64, u64) {
    let c = cli(conf);
    let first = submit(conf, "gr-a-old", "a", 2, &[]);
    wait_for(&c, "a's first job to run", |s| job(s, first).state == SlurmState::Running).await;
    let second = submit(conf, "gr-a-new", "a", 2, &[]);
    wait_for(&c, "a's second job to run", |s| job(s, second).state == SlurmState::Running).await;
    let waiting = submit(conf, "gr-b", "b", 2, &[]);
    wait_for(&c, "b to wait", |s| job(s, waiting).reason == "Resources").await;
    (first, second, waiting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_mode_preempts_the_borrowers_newest_job_and_the_owner_runs() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let (first, second, waiting) = contest(&conf).await;
    let mut e = engine(&conf, "control", &[]);
    e.until("b's job to run", |l| l.engine.room().view().slurm.is_some_and(|s| s.jobs.iter().any(|j| j.id == waiting && j.state == SlurmState::Running))).await;
    let s = cli(&conf).snapshot().await.unwrap();
    assert_eq!((job(&s, second).state.clone(), job(&s, second).restarts), (SlurmState::Pending, 1), "a's newer job was requeued");
    assert_eq!((job(&s, first).state.clone(), job(&s, first).restarts), (SlurmState::Running, 0), "a keeps its quota's job");
    let row = e.row(second).unwrap();
    assert_eq!(row.command.as_deref(), Some("requeue by policy: done"), "{row:?}");
    let audit = e.audit();
    let policy: Vec<_> = audit.iter().filter(|r| r.user == "gpuroom" && r.origin == "policy").collect();
    assert_eq!(policy.len(), 1, "one command, audited once: {audit:#?}");
    assert_eq!((policy[0].verb.as_str(), policy[0].outcome.as_str()), ("requeue", "done"));
    assert!(policy[0].detail.contains(&format!("scontrol requeue {second}")), "{:?}", policy[0]);
    // Later polls send nothing more: a's remaining job is within its quota.
    let before = e.audit().len();
    e.run_for(Duration::from_secs(4)).await;
    assert_eq!(e.audit().len(), before);
    assert!(e.live.engine.room().view().slurm.unwrap().jobs.iter().all(|j| j.advice.is_none()));
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_mode_shows_the_advice_and_an_operators_verbs_and_failures_are_audited() {
    let Some(conf) = slurm_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let (first, second, waiting) = contest(&conf).await;
    let mut e = engine(&conf, "advisory", &[]);
    e.until("the advice", |l| l.engine.room().view().slurm.is_some_and(|s| s.jobs.iter().any(|j| j.id == second && j.advice.is_some()))).await;
    let advice = e.row(second).unwrap().advice.unwrap();
    assert!(advice.starts_with(&format!("requeue for job {waiting}")) && advice.contains("account a borrows"), "{advice}");
    e.run_for(Duration::from_secs(4)).await;
    let s = cli(&conf).snapshot().await.unwrap();
    assert_eq!((job(&s, second).state.clone(), job(&s, waiting).state.clone()), (SlurmState::Running, SlurmState::Pending), "advice only");

    // The operator suspends a's first job through the engine; Slurm does it.
    let alice = Actor { user: "alice".into(), origin: "console".into(), role: Role::Operator, account: None };
    let sent = e.live.engine.operate(&alice, Action::Slurm { job: first, verb: SlurmVerb::Suspend }).unwrap();
    assert!(sent.as_ref().unwrap().contains(&format!("slurm suspend job {first}")), "{sent:?}");
    e.until("the suspension to show", |l| {
        l.engine.room().view().slurm.is_some_and(|s| s.jobs.iter().any(|j| j.id == first && j.state == SlurmState::Suspended))
    })
    .await;
    assert_eq!(e.row(first).unwrap().command.as_deref(), Some("suspend by alice@console: done"));
    // A refused one never reaches Slurm, and says why.
    let refused = e.live.engine.operate(&alice, Action::Slurm { job: first, verb: SlurmVerb::Hold }).unwrap();
    assert!(refused.unwrap_err().contains("cannot hold"));
    let audit = e.audit();
    let alices: Vec<_> = audit.iter().filter(|r| r.user == "alice").map(|r| (r.verb.as_str(), r.outcome.as_str())).collect();
    assert_eq!(alices, [("suspend", "done"), ("suspend", "done"), ("hold", "refused")], "the request, Slurm's outcome, the refusal: {audit:#?}");
    drop(e);

    // Through a user Slurm does not let touch these jobs: the failure is shown, audited, not retried.
    let mut e = engine(&conf, "advisory", &["runuser", "-u", "nobody", "--"]);
    e.until("the snapshot", |l| l.engine.room().view().slurm.is_some()).await;
    e.live.engine.operate(&alice, Action::Slurm { job: first, verb: SlurmVerb::Resume }).unwrap().unwrap();
    e.until("the failure", |l| l.engine.room().view().alarms.iter().any(|a| a.id == "slurm:commands")).await;
    let view = e.live.engine.room().view();
    let alarm = view.alarms.iter().find(|a| a.id == "slurm:commands").unwrap();
    assert!(alarm.text.contains("permission denied") && alarm.text.contains("not retried"), "{}", alarm.text);
    let row = e.row(first).unwrap();
    assert!(row.command_failed && row.command.as_deref().unwrap().contains("failed: "), "{row:?}");
    let audit = e.audit();
    let failed: Vec<_> = audit.iter().filter(|r| r.outcome == "refused" && r.verb == "resume").collect();
    assert_eq!(failed.len(), 1, "{audit:#?}");
    assert!(failed[0].detail.contains("Access/permission denied"), "{:?}", failed[0]);
    let s = cli(&conf).snapshot().await.unwrap();
    assert_eq!(job(&s, first).state, SlurmState::Suspended, "still suspended: nothing was retried");
    clean(&conf).await;
}
