//! gpuroom as Slurm's ResumeProgram and SuspendProgram, against a real
//! slurmctld and moto's EC2: the test starts its own small slurmctld (no
//! slurmd) in a temporary directory, with two CLOUD nodes `cloud-[1-2]` in a
//! partition `cloud` and power saving pointing at scripts that run
//! `gpuroom slurm-resume|slurm-suspend … --config` (the shared CI cluster of
//! `.ci/slurm-up` is not touched). A job on cloud-1 makes Slurm call
//! gpuroom, which launches in moto the instance the capacity policy chooses
//! and tells Slurm its address; a job on cloud-2, whose entry names a zone
//! EC2 refuses, leaves cloud-2 DOWN with the reason. `slurm-suspend`
//! terminates cloud-1's instance. A bad hostlist and a node no pattern
//! matches are clear errors and launch nothing.
//!
//! Needs Slurm's daemons and munged (as `.ci/run` installs and starts them)
//! and moto: skipped with a message when `GPUROOM_SLURM_CONF` or
//! `GPUROOM_MOTO_URL` is unset, unless `GPUROOM_REQUIRE_SLURM` /
//! `GPUROOM_REQUIRE_MOTO` is set.

#[path = "support/moto.rs"]
mod moto_support;
#[path = "support/slurm.rs"]
mod slurm_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, InstanceLifecycleType};
use gpuroom::capacity::plan::FleetGpus;
use gpuroom::config::EngineConfig;
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::hostlist;
use gpuroom::domain::units::MicrosPerHour;
use gpuroom::live::catalogue::Catalogue;
use gpuroom::live::slurm_power::{self, CLUSTER_TAG, NODE_TAG, PowerPolicy};
use gpuroom::sources::aws::{self, AwsConfig};

const GPUROOM: &str = env!("CARGO_BIN_EXE_gpuroom");

/// A slurmctld of the test's own, stopped and its directory removed on drop.
struct Ctld {
    child: Child,
    dir: tempfile::TempDir,
}

impl Ctld {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn conf(&self) -> PathBuf {
        self.path("slurm.conf")
    }

    /// A Slurm command against this controller; its output, or a panic with Slurm's words.
    fn slurm(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program).args(args).env("SLURM_CONF", self.conf()).output().unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(out.status.success(), "{program} {args:?}: {}{}", String::from_utf8_lossy(&out.stderr), self.log_tail());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.path("log/slurmctld.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let out = std::fs::read_to_string(self.path("power.out")).unwrap_or_default();
        format!("\n--- slurmctld.log (end) ---\n{}\n--- power.out ---\n{out}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }

    /// `Key=value` of `scontrol show node NODE`.
    fn node_field(&self, node: &str, key: &str) -> String {
        let text = self.slurm("scontrol", &["show", "node", node]);
        if key == "Reason" {
            return text.lines().find_map(|l| l.trim_start().strip_prefix("Reason=")).unwrap_or_default().to_string();
        }
        let prefix = format!("{key}=");
        text.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap_or_default().to_string()
    }
}

impl Drop for Ctld {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// gpuroom's configuration for the test: moto, the test's Slurm, two node entries.
fn gpuroom_config(moto: &str, conf: &Path, image: &str) -> String {
    format!(
        r#"[capacity]
min_stable_share = 0.0     # no floor: the cheapest pool wins
[sources.aws]
region = "us-east-1"
endpoint_url = "{moto}"
[sources.slurm]
conf = "{conf}"
timeout_secs = 30
[sources.slurm.power]
[[sources.slurm.power.nodes]]
pattern = "cloud-2"
instance_type = "g4dn.xlarge"
image = "{image}"
zones = ["us-east-1zz"]    # not a zone: EC2 refuses the launch
billing = "on-demand"
[[sources.slurm.power.nodes]]
pattern = "cloud-*"
instance_type = "g4dn.xlarge"
image = "{image}"
zones = ["us-east-1a", "us-east-1b"]
billing = "auto"
"#,
        conf = conf.display()
    )
}

/// Starts slurmctld (as root it runs as the `slurm` user) with power saving
/// on two CLOUD nodes, programs that log their calls and run gpuroom.
fn start_ctld(cluster: &str, moto: &str, image: &str) -> Ctld {
    let dir = tempfile::Builder::new().prefix("gpuroom-power.").tempdir_in("/tmp").expect("a temp dir");
    let d = dir.path();
    for sub in ["state", "log", "spool"] {
        std::fs::create_dir(d.join(sub)).expect("mkdir");
    }
    let root = nix::unistd::geteuid().is_root();
    let user = if root { "slurm".to_string() } else { nix::unistd::User::from_uid(nix::unistd::geteuid()).ok().flatten().map(|u| u.name).expect("who am I") };
    let conf = d.join("slurm.conf");
    let slurm_conf = format!(
        "ClusterName={cluster}
SlurmctldHost=localhost
SlurmUser={user}
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SlurmctldDebug=verbose
DebugFlags=Power
SlurmctldPidFile={d}/slurmctld.pid
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldLogFile={d}/log/slurmctld.log
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SuspendTime=600
SuspendTimeout=30
ResumeTimeout=600
ResumeProgram={d}/resume.sh
SuspendProgram={d}/suspend.sh
SlurmctldParameters=idle_on_node_suspend
NodeName=cloud-[1-2] CPUs=1 State=CLOUD
PartitionName=cloud Nodes=cloud-[1-2] Default=YES MaxTime=INFINITE State=UP
",
        d = d.display(),
        ctld_port = free_port(),
        slurmd_port = free_port(),
    );
    write(&conf, &slurm_conf, 0o644);
    write(&d.join("gpuroom.toml"), &gpuroom_config(moto, &conf, image), 0o644);
    // slurmctld runs the programs as SlurmUser with a bare environment.
    for verb in ["resume", "suspend"] {
        let script = format!(
            "#!/bin/sh
export PATH=/usr/local/bin:/usr/bin:/bin HOME={d} AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true
echo \"{verb} $*\" >> {d}/calls.log
{GPUROOM} slurm-{verb} \"$@\" --config {d}/gpuroom.toml >> {d}/power.out 2>&1
echo \"{verb} exit $?\" >> {d}/calls.log
",
            d = d.display()
        );
        write(&d.join(format!("{verb}.sh")), &script, 0o755);
    }
    write(&d.join("calls.log"), "", 0o644);
    write(&d.join("power.out"), "", 0o644);
    if root {
        let ok = Command::new("chown").args(["-R", "slurm:slurm"]).arg(d).status().expect("chown");
        assert!(ok.success(), "chown -R slurm:slurm {}", d.display());
    }
    write_mode(d, 0o755);
    let child = Command::new("/usr/sbin/slurmctld")
        .args(["-D", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("log/slurmctld.stderr")).expect("stderr file"))
        .spawn()
        .expect("slurmctld starts");
    let ctld = Ctld { child, dir };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ping = Command::new("scontrol").args(["ping"]).env("SLURM_CONF", ctld.conf()).output().expect("scontrol");
        if String::from_utf8_lossy(&ping.stdout).contains("is UP") {
            break;
        }
        assert!(Instant::now() < deadline, "slurmctld did not come up: {}{}", String::from_utf8_lossy(&ping.stdout), ctld.log_tail());
        std::thread::sleep(Duration::from_millis(300));
    }
    ctld
}

fn write_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn gpuroom(args: &[&str], config: &Path) -> Output {
    Command::new(GPUROOM).args(args).arg("--config").arg(config).output().expect("gpuroom runs")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The cluster's instances for `node` that are not terminated, straight from EC2.
async fn instances_of(client: &aws_sdk_ec2::Client, cluster: &str, node: &str) -> Vec<aws_sdk_ec2::types::Instance> {
    let out = client
        .describe_instances()
        .filters(Filter::builder().name(format!("tag:{NODE_TAG}")).values(node).build())
        .filters(Filter::builder().name(format!("tag:{CLUSTER_TAG}")).values(cluster).build())
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).is_some_and(|n| n.as_str() != "terminated"))
        .cloned()
        .collect()
}

async fn moto_client(url: &str) -> (aws_sdk_ec2::Client, String) {
    moto_support::credentials();
    let client = aws::client(&AwsConfig { endpoint_url: Some(url.to_string()), ..AwsConfig::default() }).await;
    let images = client.describe_images().send().await.expect("moto answers DescribeImages");
    let image = images.images().iter().find_map(|i| i.image_id()).expect("moto ships images").to_string();
    (client, image)
}

/// Polls the programs' call log until `ok` holds for its lines (or 120 s).
fn wait_for_calls(ctld: &Ctld, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let lines: Vec<String> = std::fs::read_to_string(ctld.path("calls.log")).unwrap_or_default().lines().map(str::to_string).collect();
        if ok(&lines) {
            return lines;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; calls: {lines:?}{}", ctld.log_tail());
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The nodes of every `resume NODES` call, and whether those calls have all returned.
fn resumed(lines: &[String]) -> (Vec<String>, usize, usize) {
    let mut nodes = Vec::new();
    let (mut calls, mut exits) = (0, 0);
    for l in lines {
        if let Some(list) = l.strip_prefix("resume ").filter(|r| !r.starts_with("exit ")) {
            calls += 1;
            nodes.extend(hostlist::expand(list).expect("Slurm's hostlist"));
        } else if l.starts_with("resume exit ") {
            exits += 1;
        }
    }
    (nodes, calls, exits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_resumes_cloud_nodes_through_gpuroom_and_suspend_terminates_them() {
    let Some(url) = moto_support::moto() else { return };
    if slurm_support::slurm_conf().is_none() {
        return;
    }
    let (client, image) = moto_client(&url).await;
    let cluster = format!("grpower{}", std::process::id());
    let ctld = start_ctld(&cluster, &url, &image);
    let config = ctld.path("gpuroom.toml");

    // Two jobs, one per node: Slurm powers both up through gpuroom.
    for node in ["cloud-1", "cloud-2"] {
        ctld.slurm("sbatch", &["--parsable", "-p", "cloud", "-w", node, "-o", "/dev/null", "--wrap", "sleep 30"]);
    }
    let calls = wait_for_calls(&ctld, "Slurm to call slurm-resume for both nodes and the calls to return", |lines| {
        let (nodes, calls, exits) = resumed(lines);
        nodes.iter().any(|n| n == "cloud-1") && nodes.iter().any(|n| n == "cloud-2") && calls == exits
    });
    let out = std::fs::read_to_string(ctld.path("power.out")).unwrap_or_default();
    assert!(calls.iter().any(|l| l == "resume exit 1"), "a failed node makes the program fail: {calls:?}\n{out}");

    // cloud-1: the instance the policy chose, launched in moto, tagged with the node.
    let found = instances_of(&client, &cluster, "cloud-1").await;
    assert_eq!(found.len(), 1, "exactly one instance for cloud-1: {found:#?}\n{out}");
    let instance = &found[0];
    let parsed = EngineConfig::parse("gpuroom.toml", &std::fs::read_to_string(&config).unwrap()).expect("the test's config parses");
    let power = parsed.sources.slurm.as_ref().and_then(|s| s.power.as_ref()).expect("[sources.slurm.power]");
    let (_, entry) = power.template_for("cloud-1").expect("cloud-1 has an entry");
    let catalogue = Catalogue::default();
    let shape = catalogue.instance_type(&entry.instance_type).expect("a known type");
    let since = chrono::Utc::now() - chrono::TimeDelta::hours(3);
    let points = aws::spot_price_history(&client, std::slice::from_ref(&entry.instance_type), &entry.zones, since).await.expect("moto's spot prices");
    let prices: BTreeMap<String, MicrosPerHour> = points.iter().map(|p| (p.zone.clone(), p.price)).collect();
    let choice = slurm_power::choose(
        chrono::Utc::now(),
        &PowerPolicy::of(&parsed),
        entry,
        shape,
        &catalogue,
        &prices,
        None,
        FleetGpus::default(),
        &BTreeMap::new(),
        &BTreeMap::new(),
    )
    .expect("the policy chooses a pool");
    assert_eq!(choice.pool.billing, BillingMode::Spot, "moto's spot price is far under on-demand and there is no floor: {choice:?}");
    let lifecycle = if instance.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) { BillingMode::Spot } else { BillingMode::OnDemand };
    let zone = instance.placement().and_then(|p| p.availability_zone()).unwrap_or_default();
    assert_eq!(
        (instance.instance_type().map(|t| t.as_str()), zone, lifecycle),
        (Some(choice.pool.instance_type.as_str()), choice.pool.zone.as_str(), choice.pool.billing),
        "{out}"
    );
    let tags: BTreeMap<&str, &str> = instance.tags().iter().filter_map(|t| Some((t.key()?, t.value()?))).collect();
    assert_eq!((tags.get("gpuroom"), tags.get("gpuroom-billing")), (Some(&"managed"), Some(&"spot")), "{tags:?}");
    let id = instance.instance_id().expect("an id").to_string();
    let max = format!("max price ${}/h", aws::price_text(choice.max_price.expect("spot has a max price")));
    let line = out.lines().find(|l| l.starts_with("cloud-1: launched")).unwrap_or_else(|| panic!("one line for cloud-1:\n{out}"));
    for part in [id.as_str(), "g4dn.xlarge", "spot", zone, max.as_str(), "cheapest open pool"] {
        assert!(line.contains(part), "{part:?} in {line:?}");
    }

    // Slurm now reaches cloud-1 at the instance's address (it never registers: no slurmd).
    let ip = instance.private_ip_address().expect("a private address");
    let host = instance.private_dns_name().and_then(|d| d.split('.').next()).expect("a private name");
    assert_eq!(ctld.node_field("cloud-1", "NodeAddr"), ip, "{}", ctld.log_tail());
    assert_eq!(ctld.node_field("cloud-1", "NodeHostName"), host);

    // cloud-2: EC2 refused its zone; nothing runs for it and Slurm has it DOWN with the reason.
    assert!(instances_of(&client, &cluster, "cloud-2").await.is_empty(), "{out}");
    let line = out.lines().find(|l| l.starts_with("cloud-2: NOT launched")).unwrap_or_else(|| panic!("one line for cloud-2:\n{out}"));
    assert!(line.contains("us-east-1zz") && line.contains("set DOWN in Slurm"), "{line}");
    assert!(ctld.node_field("cloud-2", "State").contains("DOWN"), "{}", ctld.slurm("scontrol", &["show", "node", "cloud-2"]));
    assert!(ctld.node_field("cloud-2", "Reason").starts_with("launch failed: "), "{}", ctld.slurm("scontrol", &["show", "node", "cloud-2"]));

    // Slurm's SuspendProgram, called as Slurm would: cloud-1's instance goes; cloud-2 has none.
    let suspend = gpuroom(&["slurm-suspend", "cloud-[1-2]"], &config);
    let said = text(&suspend);
    assert!(suspend.status.success(), "{said}");
    assert!(said.contains(&format!("cloud-1: terminated {id}")), "{said}");
    assert!(said.contains("cloud-2: no instance of gpuroom's"), "{said}");
    let state = client.describe_instances().instance_ids(&id).send().await.expect("DescribeInstances");
    let state = state.reservations().iter().flat_map(|r| r.instances()).find_map(|i| i.state()?.name().map(|n| n.as_str().to_string()));
    assert!(matches!(state.as_deref(), Some("shutting-down" | "terminated")), "{state:?}");
    // Again: nothing left, still fine.
    let again = gpuroom(&["slurm-suspend", "cloud-1"], &config);
    assert!(again.status.success() && text(&again).contains("cloud-1: no instance"), "{}", text(&again));

    // A bad hostlist and a node that no pattern matches: clear errors, nothing launched.
    let bad = gpuroom(&["slurm-resume", "cloud-[2-1]"], &config);
    assert!(!bad.status.success() && text(&bad).contains("hostlist \"cloud-[2-1]\": \"cloud-[2-1]\": the range 2-1 runs backwards"), "{}", text(&bad));
    let unmatched = gpuroom(&["slurm-resume", "gpu-[01-02]"], &config);
    let said = text(&unmatched);
    assert!(!unmatched.status.success(), "{said}");
    assert!(said.contains("gpu-01: NOT launched: no [[sources.slurm.power.nodes]] pattern matches its name"), "{said}");
    assert!(said.contains("2 of 2 nodes not resumed: gpu-01,gpu-02"), "{said}");
    for node in ["gpu-01", "gpu-02", "cloud-2"] {
        assert!(instances_of(&client, &cluster, node).await.is_empty(), "{node}: nothing launched");
    }
    drop(ctld);
}

#[tokio::test]
async fn without_a_power_table_or_aws_nothing_is_launched_and_the_error_says_why() {
    let Some(url) = moto_support::moto() else { return };
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("gpuroom.toml");
    std::fs::write(&config, format!("[sources.aws]\nendpoint_url = \"{url}\"\n[sources.slurm]\nconf = \"/nonexistent/slurm.conf\"\n")).unwrap();
    let out = gpuroom(&["slurm-resume", "cloud-1"], &config);
    assert!(!out.status.success() && text(&out).contains("no [sources.slurm.power] table"), "{}", text(&out));
    std::fs::write(&config, "[sources.slurm.power]\n[[sources.slurm.power.nodes]]\npattern = \"cloud-*\"\ninstance_type = \"g4dn.xlarge\"\nimage = \"ami-1\"\nzones = [\"us-east-1a\"]\nsubnets = [\"subnet-1\"]\n").unwrap();
    let out = gpuroom(&["slurm-resume", "cloud-1"], &config);
    assert!(!out.status.success() && text(&out).contains("unknown field `subnets`"), "{}", text(&out));
    std::fs::write(&config, "[sources.slurm.power]\ncluster = \"c\"\n[[sources.slurm.power.nodes]]\npattern = \"cloud-*\"\ninstance_type = \"g4dn.xlarge\"\nimage = \"ami-1\"\nzones = [\"us-east-1a\"]\n").unwrap();
    let out = gpuroom(&["slurm-suspend", "cloud-1"], &config);
    assert!(!out.status.success() && text(&out).contains("no [sources.aws] table"), "{}", text(&out));
}
