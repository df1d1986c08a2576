//! The room as Slurm's policy on a real multi-node Slurm (`.ci/slurm-multi-up`:
//! n1, n2 spot with 4 a10g each; n3 a10g and n4 l4 on demand; GPU jobs held
//! at submission by its `job_submit.lua` until the room admits them):
//!
//! * order: with account a holding every GPU, b's job submitted last is
//!   ranked first (DRF); nothing is released while nothing can be placed,
//!   and as GPUs free each job starts where and when the room places it,
//!   with its priority in the room's order; each start is checked against
//!   the order and none broke it;
//! * routing: a job that cannot be interrupted (`ckpt=no`), submitted to
//!   spot and on-demand, never runs on spot; a typed ask lands on its type;
//! * checkpoints at the room's risk: a job on spot is signalled when the
//!   room's interval falls due, acknowledges with `saved=EPOCH` in its
//!   comment, and the room reads it back;
//! * max price: the pool's price passing the job's cap saves it and moves
//!   it off spot (requeued, spot nodes excluded) onto on-demand;
//! * advisory mode sends nothing; every command is audited; the log
//!   replays to the same room;
//! * `gpuroom bench slurm --quick` runs its set alone and governed.
//!
//! The engine runs in real time on a real SQLite log. Skipped with a message
//! without the multi-node cluster unless `GPUROOM_REQUIRE_SLURM` is set.

#[path = "support/slurm.rs"]
mod slurm_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuroom::bench::slurm::SlurmBenchOptions;
use gpuroom::domain::event::Event;
use gpuroom::domain::slurm::{SlurmJob, SlurmState};
use gpuroom::domain::units::{MicrosPerHour, Secs};
use gpuroom::live::Live;
use gpuroom::live::config::SourcesConfig;
use gpuroom::live::run::start_on_slurm;
use gpuroom::room::RoomConfig;
use gpuroom::sched::DisciplineKind;
use gpuroom::sources::report::Report;
use gpuroom::store::{RunMeta, Store};
use slurm_support::{jobs_now, slurm_command};

/// One cluster: the tests take turns.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The multi-node cluster's slurm.conf, or `None` (skipped, saying so)
/// unless `GPUROOM_REQUIRE_SLURM` is set.
fn multi_conf() -> Option<PathBuf> {
    let required = std::env::var_os("GPUROOM_REQUIRE_SLURM").is_some();
    match std::env::var_os("GPUROOM_SLURM_MULTI_CONF") {
        Some(conf) => Some(PathBuf::from(conf)),
        None => {
            assert!(!required, "Slurm is required (GPUROOM_REQUIRE_SLURM is set) but GPUROOM_SLURM_MULTI_CONF is not");
            eprintln!("SKIPPED: no multi-node Slurm; run .ci/slurm-multi-up DIR and set GPUROOM_SLURM_MULTI_CONF=DIR/slurm.conf");
            None
        }
    }
}

struct Engine {
    live: Live,
    reports: tokio::sync::mpsc::Receiver<Report>,
    _dir: tempfile::TempDir,
}

/// The engine as `gpuroom --live` runs it on the cluster, governing: DRF,
/// spot nodes g5.12xlarge at the spot price, on-demand ones at list, the
/// checkpoint interval bounded to 4–8 s and the grace to 2 s so that a test
/// sees several in a minute. Account a owns the whole cluster (quota 16):
/// when it fills every GPU it borrows nothing, so b's jobs wait for the
/// room's order, not for a quota reclaim.
fn engine(conf: &Path, mode: &str) -> Engine {
    let text = format!(
        "[nvml]\nenabled = false\n\
         [slurm]\nmode = {mode:?}\ngovern = true\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\ncheckpoint_grace_secs = 2\n\
         [[slurm.account]]\nid = \"a\"\nquota_gpus = 16\nborrow_limit_gpus = 16\nmonthly_budget = \"0\"\n\
         [[slurm.account]]\nid = \"b\"\nquota_gpus = 8\nborrow_limit_gpus = 16\nmonthly_budget = \"0\"\n\
         [[nodes]]\nhost = \"n*\"\npartition = \"spot\"\ninstance_type = \"g5.12xlarge\"\nzone = \"us-east-1a\"\nbilling = \"spot\"\n\
         [[nodes]]\nhost = \"n*\"\npartition = \"od\"\ninstance_type = \"g5.12xlarge\"\nzone = \"us-east-1a\"\nbilling = \"on-demand\"\n",
        conf.display().to_string()
    );
    let config: SourcesConfig = toml::from_str(&text).expect("a sources table");
    let mut room_config = RoomConfig { slurm: config.slurm.as_ref().unwrap().policy(), ..RoomConfig::default() };
    room_config.sched.discipline = DisciplineKind::Drf;
    room_config.checkpoint.min_interval = Secs(4);
    room_config.checkpoint.max_interval = Secs(8);
    let dir = tempfile::tempdir().unwrap();
    let meta = RunMeta { room_config: room_config.clone(), source: "slurm govern test".into(), created_with: "test".into(), world: None };
    let store = Store::create(&dir.path().join("run.db"), &meta).expect("a store");
    let (mut live, reports) = start_on_slurm(&config, room_config, Some(store), chrono::Utc::now()).expect("a live engine");
    // The spot pool's market: $2.40/h for the 4-GPU node.
    live.report(chrono::Utc::now(), Report::Core(spot_price(2_400_000))).expect("a price");
    Engine { live, reports, _dir: dir }
}

fn spot_price(micros: i64) -> Event {
    Event::PriceTick { zone: "us-east-1a".into(), instance_type: "g5.12xlarge".into(), price: MicrosPerHour(micros) }
}

impl Engine {
    /// Applies reports as they come until `done` holds (or 90 s).
    async fn until(&mut self, what: &str, done: impl Fn(&Live) -> bool) {
        slurm_support::apply_until(&mut self.live, &mut self.reports, what, Duration::from_secs(90), chrono::Utc::now, done).await;
    }

    /// Applies reports for `secs` seconds.
    async fn run_for(&mut self, secs: u64) {
        let end = tokio::time::Instant::now() + Duration::from_secs(secs);
        self.until("time to pass", |_| tokio::time::Instant::now() >= end).await;
    }

    fn audit(&self) -> Vec<gpuroom::store::audit::AuditRecord> {
        self.live.engine.store().unwrap().audit_records().unwrap()
    }
}

/// `sbatch` as account `account` with `gres` (`gpu:4`, `gpu:l4:1`) in
/// `partitions`, with `extra` options (`--comment=ckpt=no`), running
/// `script`; its id.
fn sbatch(conf: &Path, name: &str, account: &str, gres: &str, partitions: &str, extra: &[&str], script: &str) -> u64 {
    let gres = format!("--gres={gres}");
    let mut args = vec!["--parsable", "-J", name, "-A", account, "-p", partitions, gres.as_str(), "-o", "/dev/null", "--requeue"];
    args.extend_from_slice(extra);
    args.extend(["--wrap", script]);
    let out = slurm_command(conf, "sbatch", &args);
    out.split(';').next().and_then(|id| id.parse().ok()).unwrap_or_else(|| panic!("sbatch said {out:?}"))
}

fn job(conf: &Path, id: u64) -> Option<SlurmJob> {
    jobs_now(conf).into_iter().find(|j| j.id == id)
}

fn runs(conf: &Path, id: u64) -> Option<String> {
    job(conf, id).filter(|j| j.state == SlurmState::Running).and_then(|j| j.nodes.first().cloned())
}

/// Whether the Slurm pane's plan for job `id` says `words`.
fn plan_says(live: &Live, id: u64, words: &str) -> bool {
    live.engine.room().view().slurm.is_some_and(|s| s.jobs.iter().any(|j| j.id == id && j.plan.as_deref().is_some_and(|p| p.contains(words))))
}

/// Cancels every job and waits until no GPU is held: each test starts idle.
async fn clean(conf: &Path) {
    let conf = conf.to_path_buf();
    tokio::task::spawn_blocking(move || slurm_support::cancel_all(&conf)).await.expect("the cluster is cleaned");
}

const SLEEP: &str = "sleep 600";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_starts_the_rooms_order_on_the_rooms_nodes_and_uninterruptible_work_never_on_spot() {
    let Some(conf) = multi_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let mut e = engine(&conf, "control");
    // Account a takes every GPU: one 4-GPU job on each node.
    let blockers: Vec<u64> =
        ["n1", "n2", "n3", "n4"].iter().map(|n| sbatch(&conf, &format!("block-{n}"), "a", "gpu:4", "spot,od", &["-w", n], SLEEP)).collect();
    e.until("the blockers running", |_| blockers.iter().all(|b| runs(&conf, *b).is_some())).await;
    // a's two jobs first, then b's, which cannot be interrupted.
    let a1 = sbatch(&conf, "a1", "a", "gpu:4", "spot,od", &["--comment=project=x"], SLEEP);
    let a2 = sbatch(&conf, "a2", "a", "gpu:4", "spot,od", &[], SLEEP);
    let b1 = sbatch(&conf, "b1", "b", "gpu:4", "spot,od", &["--comment=ckpt=no"], SLEEP);
    // The room ranks b1 first (a holds everything) and routes it off spot;
    // with no GPU free it places none, so all three stay held: Slurm starts
    // nothing the room has not placed.
    e.until("the room's order, b1 routed off spot", |l| {
        let view = l.engine.room().view().slurm;
        let rank = |id: u64| view.as_ref().and_then(|v| v.jobs.iter().find(|j| j.id == id).and_then(|j| j.rank));
        (rank(b1), rank(a1), rank(a2)) == (Some(1), Some(2), Some(3)) && job(&conf, b1).is_some_and(|b| b.excluded == ["n1", "n2"])
    })
    .await;
    e.run_for(3).await;
    for id in [b1, a1, a2] {
        let j = job(&conf, id).unwrap();
        assert!(j.awaits_admission(), "placed nowhere, so still held: {j:#?}");
    }

    // A spot node frees: b1 may not go there; a1 does.
    slurm_command(&conf, "scancel", &[&blockers[0].to_string()]);
    e.until("a1 on n1", |_| runs(&conf, a1).as_deref() == Some("n1")).await;
    assert!(runs(&conf, b1).is_none(), "b1 cannot be interrupted: it must not take spot");
    // An on-demand node frees: b1, ranked ahead of a2, takes it.
    slurm_command(&conf, "scancel", &[&blockers[2].to_string()]);
    e.until("b1 on n3", |_| runs(&conf, b1).as_deref() == Some("n3")).await;
    assert!(job(&conf, a2).is_some_and(|j| j.awaits_admission()), "a2 was placed nowhere: still held");
    // Each job placed went out with its priority in the room's order.
    let (a, b) = (job(&conf, a1).unwrap(), job(&conf, b1).unwrap());
    assert!(b.priority > a.priority && a.priority > 1, "b1 ranked ahead of a1: {b:#?} {a:#?}");
    e.until("the starts checked", |l| l.engine.room().view().slurm.is_some_and(|s| s.followed >= 2)).await;
    let whole = e.live.engine.room().view();
    let jumps: Vec<&str> = whole.log.iter().filter(|l| l.text.contains("room rank")).map(|l| l.text.as_str()).collect();
    let view = whole.slurm.clone().unwrap();
    assert_eq!(view.out_of_order, 0, "{jumps:#?}");

    // Every command is audited: the room's order went out as "order".
    let audit = e.audit();
    let order: Vec<_> = audit.iter().filter(|r| r.user == "gpuroom" && r.verb == "schedule").collect();
    assert!(order.len() >= 3 && order.iter().all(|r| r.outcome == "done"), "{audit:#?}");
    assert!(order.iter().any(|r| r.detail.contains(&format!("jobid={b1}")) && r.detail.contains("excnodelist=n1,n2")), "{order:#?}");
    // The log alone rebuilds the room the console showed.
    let live = e.live.engine.room().view();
    let (replayed, _) = gpuroom::store::replay(e.live.engine.store().unwrap(), false).unwrap();
    let again = replayed.view();
    assert_eq!((again.slurm, again.nodes), (live.slurm, live.nodes), "replay gives the live room");
    drop(e);
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_ask_lands_on_its_type_and_advisory_mode_sends_nothing() {
    let Some(conf) = multi_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let mut e = engine(&conf, "advisory");
    let typed = sbatch(&conf, "typed", "a", "gpu:l4:1", "spot,od", &[], SLEEP);
    e.until("the room's plan for it", |l| plan_says(l, typed, "→ n4")).await;
    e.run_for(3).await;
    // Advisory: shown, never sent; the job stays held for admission.
    assert!(e.audit().iter().all(|r| r.user != "gpuroom"), "{:#?}", e.audit());
    assert!(job(&conf, typed).unwrap().held(), "nothing released it");
    drop(e);
    // In control mode the same job is admitted where the plan said.
    let mut e = engine(&conf, "control");
    e.until("the typed job on n4", |_| runs(&conf, typed).as_deref() == Some("n4")).await;
    drop(e);
    clean(&conf).await;
}

/// GPU sharing through `gres/shard` (n4: 4 shards a GPU): a sharing job is
/// held at submission like any GPU job and admitted onto n4 by the room;
/// the next one joins the GPU already shared; a whole-GPU ask that needs
/// all of n4 is not released onto GPUs that carry shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_jobs_are_admitted_onto_the_gpu_already_shared() {
    let Some(conf) = multi_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let mut e = engine(&conf, "control");
    let first = sbatch(&conf, "share1", "a", "shard:2", "od", &[], SLEEP);
    let second = sbatch(&conf, "share2", "b", "shard:2", "od", &[], SLEEP);
    let asked = job(&conf, first).unwrap();
    assert_eq!((asked.gpus, asked.shards, asked.awaits_admission()), (0, 2, true), "held for the room, read as shards: {asked:#?}");
    e.until("both sharing jobs on n4", |_| runs(&conf, first).as_deref() == Some("n4") && runs(&conf, second).as_deref() == Some("n4")).await;
    e.until("n4's shards read back", |l| {
        l.engine.room().view().slurm.is_some_and(|s| s.jobs.iter().filter(|j| j.shards == 2 && j.state == SlurmState::Running).count() == 2)
    })
    .await;
    let nodes = gpuroom::sources::slurm::json::nodes("sinfo -N --json", &slurm_command(&conf, "sinfo", &["-N", "--json"])).expect("sinfo reads");
    let n4 = nodes.into_iter().find(|n| n.name == "n4").unwrap();
    assert!(n4.shards == 16 && n4.shards_used > 0, "{n4:#?}");
    // n4's GPUs carrying shards are not free whole: four l4 GPUs fit nowhere now.
    let whole = sbatch(&conf, "whole-l4", "b", "gpu:l4:4", "od", &[], SLEEP);
    e.until("the room's plan for the whole ask", |l| plan_says(l, whole, "waits")).await;
    e.run_for(3).await;
    assert!(job(&conf, whole).is_some_and(|j| j.awaits_admission()), "not released onto GPUs that are shared");
    let audit = e.audit();
    assert!(audit.iter().any(|r| r.detail.contains(&format!("jobid={first}")) && r.detail.contains("reqnodelist=n4")), "{audit:#?}");
    drop(e);
    clean(&conf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_job_saves_at_the_rooms_interval_and_moves_off_spot_when_the_market_passes_its_cap() {
    let Some(conf) = multi_conf() else { return };
    let _turn = CLUSTER.lock().await;
    clean(&conf).await;
    let mut e = engine(&conf, "control");
    // It saves when told, and says so in its own comment.
    let script = "trap 'scontrol update JobId=$SLURM_JOB_ID Comment=\"project=x;saved=$(date +%s)\"' USR1; for i in $(seq 600); do sleep 1; done";
    let id = sbatch(&conf, "saver", "a", "gpu:2", "spot,od", &["--comment=project=x", "--time=30"], script);
    e.until("it runs on spot", |_| runs(&conf, id).is_some_and(|n| n == "n1" || n == "n2")).await;
    e.until("two acknowledged saves", |l| {
        let signals = l.engine.store().unwrap().audit_records().unwrap().into_iter().filter(|r| r.verb == "signal" && r.outcome == "done").count();
        signals >= 2 && plan_says(l, id, "saved ")
    })
    .await;
    let row = e.live.engine.room().view().slurm.unwrap().jobs.into_iter().find(|j| j.id == id).unwrap();
    assert!(!row.plan_alarm, "{row:#?}");
    assert!(job(&conf, id).unwrap().comment.contains("saved="));

    // The spot price jumps tenfold: past any cap the curve gives.
    e.live.report(chrono::Utc::now(), Report::Core(spot_price(24_000_000))).expect("a price");
    e.until("it runs on demand", |_| runs(&conf, id).is_some_and(|n| n == "n3" || n == "n4")).await;
    let moved = job(&conf, id).unwrap();
    assert_eq!((moved.restarts, moved.excluded.clone()), (1, vec!["n1".to_string(), "n2".to_string()]), "{moved:#?}");
    let audit = e.audit();
    let by: Vec<(&str, &str)> = audit.iter().filter(|r| r.user == "gpuroom" && r.verb != "schedule").map(|r| (r.verb.as_str(), r.outcome.as_str())).collect();
    assert!(by.windows(2).any(|w| w == [("signal", "done"), ("migrate", "done")]), "{audit:#?}");
    assert!(e.live.engine.room().view().log.iter().any(|l| l.text.contains("above its max price")));
    drop(e);
    clean(&conf).await;
}

/// `gpuroom bench slurm --quick` end to end on the cluster: both runs finish
/// the whole set, Slurm alone gets no command from the room (it only
/// watches), the governed run admits every job, puts none that cannot be
/// interrupted on spot, and every command it sent was carried out; the
/// table prints both columns. (Its figures are measured, not asserted.)
#[test]
fn the_slurm_bench_runs_the_set_alone_and_governed_and_prints_both() {
    let Some(conf) = multi_conf() else { return };
    let _turn = CLUSTER.blocking_lock();
    slurm_support::cancel_all(&conf);
    let dir = tempfile::tempdir().unwrap();
    let options = SlurmBenchOptions { conf, seed: 7, jobs: 12, quick: true, work_dir: Some(dir.path().to_path_buf()) };
    let bench = gpuroom::bench::slurm::run(&options).expect("both runs");
    for (name, (record, figures)) in [("alone", &bench.alone), ("governed", &bench.governed)] {
        assert!(record.finished && figures.started == 12, "{name}: {} of 12 started, finished: {}", figures.started, record.finished);
        assert!(dir.path().join(name).join("samples.json").exists(), "{name}: the samples behind the figures are kept");
    }
    assert!(bench.alone.0.commands.is_empty(), "advisory sends nothing: {:?}", bench.alone.0.commands);
    let (record, figures) = &bench.governed;
    assert_eq!(figures.uninterruptible_on_spot, 0, "no job that cannot be interrupted runs on spot");
    // A job that ends or moves between a snapshot and a command makes Slurm
    // refuse it (audited, never retried blindly): a race of the short quick
    // jobs, not a fault, as long as such refusals stay rare.
    let sent: usize = record.commands.values().sum::<usize>() + record.refused.len();
    assert!(record.refused.len() * 10 <= sent, "{} of {sent} commands refused: {:#?}; done: {:?}", record.refused.len(), record.refused, record.commands);
    assert!(record.commands.get("schedule").is_some_and(|n| *n >= 12), "each job admitted by the room: {:?}", record.commands);
    let table = bench.markdown();
    for row in ["| mean wait, every wait", "| DRF share error", "| jobs that cannot checkpoint, run on spot |", "| start order against the room's"] {
        assert!(table.contains(row), "no {row:?} in\n{table}");
    }
}
