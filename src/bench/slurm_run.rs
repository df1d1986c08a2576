//! One run of `gpuroom bench slurm` on the multi-node cluster of
//! `.ci/slurm-multi-up`: the set is submitted with real `sbatch` at its
//! times, the scripted market and spot events happen at theirs, the engine
//! runs as `gpuroom --live` would (governing in control mode, or only
//! watching in advisory mode while Slurm runs its own queue), and Slurm's
//! jobs are sampled about once a second until the whole set has finished.
//!
//! Owns the cluster commands of the bench and the run's loop; the figures
//! are `slurm_measure`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::slurm_measure::{BenchNode, JobOutcome, Sample, Seen};
use super::slurm_workload::{BenchJob, SCRIPT};
use crate::domain::event::Event;
use crate::domain::slurm::{SlurmJob, SlurmState};
use crate::domain::spot_drain;
use crate::domain::units::{At, MicrosPerHour, Secs};
use crate::live::Live;
use crate::live::config::SourcesConfig;
use crate::live::run::start_on_slurm;
use crate::room::RoomConfig;
use crate::sched::DisciplineKind;
use crate::sources::report::Report;
use crate::sources::slurm::json;
use crate::store::{RunMeta, Store};

/// The scripted events, in seconds into a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Script {
    /// n1's spot pool rises from `SPOT_PRICE` to `RISEN_PRICE`.
    pub rise_at: f64,
    /// n2 gets its 2-minute notice (compressed), is reclaimed, comes back.
    pub notice_at: f64,
    pub reclaim_at: f64,
    pub back_at: f64,
    /// A job's own checkpoint period, in both runs.
    pub own_every: u32,
    /// Giving up on a run that has not finished.
    pub limit: f64,
}

impl Script {
    pub fn new(quick: bool) -> Script {
        if quick {
            Script { rise_at: 12.0, notice_at: 18.0, reclaim_at: 26.0, back_at: 36.0, own_every: 20, limit: 300.0 }
        } else {
            Script { rise_at: 45.0, notice_at: 70.0, reclaim_at: 90.0, back_at: 110.0, own_every: 45, limit: 900.0 }
        }
    }
}

pub const SPOT_PRICE: f64 = 2.40;
pub const RISEN_PRICE: f64 = 4.20;
const G5_ON_DEMAND: f64 = 5.672;
const G6_ON_DEMAND: f64 = 4.6016;
/// The room's checkpoint interval is bounded to this (seconds): compressed
/// like the jobs.
const INTERVAL_BOUNDS: (i64, i64) = (10, 40);

/// The cluster as the bench prices it (`.ci/slurm-multi-up`'s layout).
pub fn nodes(script: &Script) -> Vec<BenchNode> {
    let node = |name: &str, spot: bool, prices: Vec<(f64, f64)>| BenchNode { name: name.into(), spot, gpus: 4, prices };
    vec![
        node("n1", true, vec![(0.0, SPOT_PRICE), (script.rise_at, RISEN_PRICE)]),
        node("n2", true, vec![(0.0, SPOT_PRICE)]),
        node("n3", false, vec![(0.0, G5_ON_DEMAND)]),
        node("n4", false, vec![(0.0, G6_ON_DEMAND)]),
    ]
}

/// What one run saw and what the room did.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    pub samples: Vec<Sample>,
    pub outcomes: Vec<JobOutcome>,
    /// Commands the room sent (verb → done).
    pub commands: BTreeMap<String, usize>,
    /// Commands Slurm refused: the verb and Slurm's reason, as audited.
    pub refused: Vec<(String, String)>,
    pub followed: u64,
    pub out_of_order: u64,
    pub finished: bool,
}

pub fn slurm(conf: &Path, program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program).args(args).env("SLURM_CONF", conf).output().with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn jobs_now(conf: &Path) -> anyhow::Result<Vec<SlurmJob>> {
    Ok(json::jobs("squeue --json", &slurm(conf, "squeue", &["--json"])?)?)
}

/// The cluster is `.ci/slurm-multi-up`'s and nobody else uses it.
pub fn preflight(conf: &Path) -> anyhow::Result<()> {
    let nodes = json::nodes("sinfo -N --json", &slurm(conf, "sinfo", &["-N", "--json"])?)?;
    for (name, partition) in [("n1", "spot"), ("n2", "spot"), ("n3", "od"), ("n4", "od")] {
        let ok = nodes.iter().any(|n| n.name == name && n.partitions.iter().any(|p| p == partition) && n.gpus == 4);
        if !ok {
            bail!(
                "the bench runs on .ci/slurm-multi-up's cluster (n1, n2 in partition spot, n3, n4 in od, 4 GPUs each); {} has no {name} in {partition} with 4 GPUs",
                conf.display()
            );
        }
    }
    let active = jobs_now(conf)?.into_iter().filter(SlurmJob::active).count();
    if active > 0 {
        bail!("{active} job(s) are active on the cluster: the bench needs it to itself (scancel them first)");
    }
    Ok(())
}

/// Cancels what the bench left and brings n1..n4 back, then waits until idle.
pub fn reset(conf: &Path, ids: &[u64]) -> anyhow::Result<()> {
    if !ids.is_empty() {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        let args: Vec<&str> = ids.iter().map(String::as_str).collect();
        // Jobs already gone make scancel complain: nothing to do for them.
        let _ = slurm(conf, "scancel", &args);
    }
    let nodes = json::nodes("sinfo -N --json", &slurm(conf, "sinfo", &["-N", "--json"])?)?;
    for n in nodes.iter().filter(|n| ["n1", "n2", "n3", "n4"].contains(&n.name.as_str())) {
        if n.state.contains("drain") || n.state.contains("down") {
            slurm(conf, "scontrol", &["update", &format!("NodeName={}", n.name), "State=RESUME"])?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let busy = jobs_now(conf)?.iter().filter(|j| j.active()).count();
        let nodes = json::nodes("sinfo -N --json", &slurm(conf, "sinfo", &["-N", "--json"])?)?;
        let used: u32 = nodes.iter().map(|n| n.gpus_used).sum();
        if busy == 0 && used == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster did not go idle in 90 s ({busy} job(s) active, {used} GPU(s) held)");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The engine as `gpuroom --live` runs it on this cluster: DRF, the four
/// nodes priced, n1 and n2 in two spot pools (us-east-1a and -1b).
fn engine(conf: &Path, governed: bool, db: &Path) -> anyhow::Result<(Live, tokio::sync::mpsc::Receiver<Report>)> {
    let mode = if governed { "control" } else { "advisory" };
    let mut text = format!(
        "[nvml]\nenabled = false\n\
         [slurm]\nmode = {mode:?}\ngovern = true\npoll_secs = 1\ntimeout_secs = 20\nconf = {:?}\ncheckpoint_grace_secs = 3\n\
         [[instance_types]]\nname = \"g6.12xlarge\"\ngpu_model = \"L4-24GB\"\ngpus = 4\ngpu_memory_mib = 23034\ncpus = 48\nhost_memory_mib = 196608\non_demand = \"{G6_ON_DEMAND}\"\n",
        conf.display().to_string()
    );
    for account in ["a", "b", "c"] {
        text += &format!("[[slurm.account]]\nid = \"{account}\"\nquota_gpus = 6\nborrow_limit_gpus = 16\nmonthly_budget = \"0\"\n");
    }
    for (host, partition, instance, zone, billing) in [
        ("n1", "spot", "g5.12xlarge", "us-east-1a", "spot"),
        ("n2", "spot", "g5.12xlarge", "us-east-1b", "spot"),
        ("n3", "od", "g5.12xlarge", "us-east-1a", "on-demand"),
        ("n4", "od", "g6.12xlarge", "us-east-1a", "on-demand"),
    ] {
        text += &format!("[[nodes]]\nhost = {host:?}\npartition = {partition:?}\ninstance_type = {instance:?}\nzone = {zone:?}\nbilling = {billing:?}\n");
    }
    let config: SourcesConfig = toml::from_str(&text).context("the bench's sources table")?;
    let policy = config.slurm.clone().context("a [slurm] table")?;
    let mut room_config = RoomConfig { slurm: policy.policy(), ..RoomConfig::default() };
    room_config.sched.discipline = DisciplineKind::Drf;
    room_config.checkpoint.min_interval = Secs(INTERVAL_BOUNDS.0);
    room_config.checkpoint.max_interval = Secs(INTERVAL_BOUNDS.1);
    let meta =
        RunMeta { room_config: room_config.clone(), source: format!("gpuroom bench slurm ({mode})"), created_with: "gpuroom bench slurm".into(), world: None };
    let store = Store::create(db, &meta)?;
    let now = chrono::Utc::now();
    let (mut live, reports) = start_on_slurm(&config, room_config, Some(store), now).map_err(anyhow::Error::msg)?;
    for zone in ["us-east-1a", "us-east-1b"] {
        live.report(now, Report::Core(price(zone, SPOT_PRICE)))?;
    }
    Ok((live, reports))
}

fn price(zone: &str, dollars: f64) -> Event {
    Event::PriceTick { zone: zone.into(), instance_type: "g5.12xlarge".into(), price: MicrosPerHour((dollars * 1e6).round() as i64) }
}

/// Submits one job of the set; its id.
fn submit(conf: &Path, script: &Path, dir: &Path, job: &BenchJob, own_every: u32) -> anyhow::Result<u64> {
    let work = dir.join(&job.name);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let minutes = (job.work_secs * 3).div_ceil(60) + 1;
    let (gres, time, chdir) = (format!("--gres=gpu:{}", job.gpus), format!("--time={minutes}"), format!("--chdir={}", work.display()));
    let (work_secs, every) = (job.work_secs.to_string(), own_every.to_string());
    let mut args = vec!["--parsable", "-J", &job.name, "-A", &job.account, "-p", "spot,od", &gres, &time, &chdir, "-o", "/dev/null", "--requeue"];
    if !job.checkpointable {
        args.push("--comment=ckpt=no");
    }
    let script = script.display().to_string();
    args.extend([script.as_str(), &work_secs, &every, if job.checkpointable { "yes" } else { "no" }]);
    let out = slurm(conf, "sbatch", &args)?;
    out.split(';').next().and_then(|id| id.parse().ok()).with_context(|| format!("sbatch said {out:?}"))
}

/// Runs the set once; `governed`: the room in control mode, else Slurm alone
/// (the room only watching, GPU jobs released as they are submitted).
pub async fn one_run(conf: &Path, jobs: &[BenchJob], script: &Script, governed: bool, dir: &Path) -> anyhow::Result<RunRecord> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let job_script = dir.join("job.sh");
    std::fs::write(&job_script, SCRIPT)?;
    std::fs::set_permissions(&job_script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let (mut live, mut reports) = engine(conf, governed, &dir.join("run.db"))?;
    let (start, wall) = (Instant::now(), chrono::Utc::now());
    let mut ids: BTreeMap<u64, &BenchJob> = BTreeMap::new();
    let mut record = RunRecord::default();
    let mut next_sample = 0.0;
    let mut fired = [false; 4];
    loop {
        let t = start.elapsed().as_secs_f64();
        let due: Vec<&BenchJob> = jobs.iter().filter(|j| j.submit_at <= t && !ids.values().any(|x| x.name == j.name)).collect();
        for job in due {
            let id = submit(conf, &job_script, dir, job, script.own_every)?;
            if !governed {
                // Slurm alone: the admission hold (job_submit.lua) is not the room's to lift here.
                let _ = slurm(conf, "scontrol", &["release", &id.to_string()]);
            }
            ids.insert(id, job);
        }
        events(conf, &mut live, script, governed, t, wall, &mut fired)?;
        if t >= next_sample {
            next_sample += 1.0;
            let now = jobs_now(conf)?;
            let reclaimed = t >= script.reclaim_at && t < script.back_at;
            record.samples.push(sample(&now, &ids, &live, t, wall, if reclaimed { 12 } else { 16 }));
            let all_in = ids.len() == jobs.len();
            if all_in && ids.iter().all(|(id, job)| dir.join(&job.name).join("finished").exists() && !now.iter().any(|j| j.id == *id && j.active())) {
                record.finished = true;
                break;
            }
        }
        if t > script.limit {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(200), reports.recv()).await {
            Ok(Some(report)) => live.report(chrono::Utc::now(), report)?,
            Ok(None) => bail!("the Slurm adapter stopped"),
            Err(_) => live.tick(chrono::Utc::now())?,
        }
    }
    for job in jobs {
        let lost = std::fs::read_to_string(dir.join(&job.name).join("lost")).unwrap_or_default();
        let lost_secs = lost.lines().filter_map(|l| l.trim().parse::<u64>().ok()).sum();
        record.outcomes.push(JobOutcome {
            name: job.name.clone(),
            account: job.account.clone(),
            gpus: job.gpus,
            checkpointable: job.checkpointable,
            lost_secs,
        });
    }
    for r in live.engine.store().context("the run's log")?.audit_records()?.into_iter().filter(|r| r.user == "gpuroom") {
        if r.outcome == "done" {
            *record.commands.entry(r.verb).or_default() += 1;
        } else if r.outcome != "sent" {
            record.refused.push((r.verb, r.detail));
        }
    }
    let govern = &live.engine.room().slurm().govern;
    (record.followed, record.out_of_order) = (govern.followed, govern.out_of_order);
    // What the figures are made of, for whoever checks them.
    let seen = serde_json::json!({ "samples": record.samples, "outcomes": record.outcomes });
    std::fs::write(dir.join("samples.json"), serde_json::to_string(&seen)?).with_context(|| format!("writing {}", dir.join("samples.json").display()))?;
    drop(live);
    reset(conf, &ids.keys().copied().collect::<Vec<_>>())?;
    Ok(record)
}

/// The scripted market and spot events due at `t` (each once).
fn events(conf: &Path, live: &mut Live, script: &Script, governed: bool, t: f64, wall: At, fired: &mut [bool; 4]) -> anyhow::Result<()> {
    let secs = |s: f64| wall + chrono::TimeDelta::milliseconds((s * 1000.0) as i64);
    if t >= script.rise_at && !fired[0] {
        fired[0] = true;
        live.report(chrono::Utc::now(), Report::Core(price("us-east-1a", RISEN_PRICE)))?;
    }
    if t >= script.notice_at && !fired[1] {
        fired[1] = true;
        // The notice reaches Slurm through gpuroom's agent on the node: with the room only.
        if governed {
            let reason = spot_drain::reason("terminate", Some(secs(script.reclaim_at)));
            slurm(conf, "scontrol", &["update", "NodeName=n2", "State=DRAIN", &format!("Reason={reason}")])?;
        }
    }
    if t >= script.reclaim_at && !fired[2] {
        fired[2] = true;
        // The instance goes: Slurm requeues what still runs there. Drained
        // first, or ReturnToService=2 takes the still-answering slurmd back
        // at once; it stays out until RESUME.
        let reason = "Reason=bench: spot instance reclaimed";
        slurm(conf, "scontrol", &["update", "NodeName=n2", "State=DRAIN", reason])?;
        slurm(conf, "scontrol", &["update", "NodeName=n2", "State=DOWN", reason])?;
    }
    if t >= script.back_at && !fired[3] {
        fired[3] = true;
        slurm(conf, "scontrol", &["update", "NodeName=n2", "State=RESUME"])?;
    }
    Ok(())
}

/// The set's jobs as Slurm lists them now, with the room's order for each.
fn sample(now: &[SlurmJob], ids: &BTreeMap<u64, &BenchJob>, live: &Live, t: f64, wall: At, capacity: u32) -> Sample {
    let since = |at: At| (at - wall).num_milliseconds() as f64 / 1000.0;
    let plan = &live.engine.room().slurm().govern.plan;
    let jobs = now
        .iter()
        .filter(|j| matches!(j.state, SlurmState::Pending | SlurmState::Running))
        .filter_map(|j| {
            let job = ids.get(&j.id)?;
            let running = j.state == SlurmState::Running;
            // A running job the room's plan still lists: Slurm started it
            // after the room's newest snapshot, on the decision kept here.
            let note = plan.get(&j.id);
            Some(Seen {
                name: job.name.clone(),
                account: job.account.clone(),
                gpus: job.gpus,
                running,
                node: j.nodes.first().cloned().filter(|_| running),
                submitted: j.submitted.map_or(job.submit_at, since),
                started: j.started.filter(|_| running).map(since),
                rank: note.map(|n| n.rank),
                placed_now: note.is_some_and(|n| n.node.is_some()),
            })
        })
        .collect();
    Sample { t, capacity, jobs }
}

/// Where the runs keep their jobs' directories and logs.
pub fn work_dir(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| std::env::temp_dir().join(format!("gpuroom-bench-slurm-{}", std::process::id())))
}
