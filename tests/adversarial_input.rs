//! Adversarial input at the edges, through the real binary: every number of
//! the engine's configuration refused out of its range (NaN and infinities
//! included) with file, key and range in the message; control bytes in
//! values, paths and files never reaching the terminal raw; huge values never
//! echoed whole. And names with escape sequences from the Slurm and dcgm
//! parsers reaching the view clean.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gpuroom::config::NUMERIC_KEYS;
use gpuroom::config::numbers::Rule;

/// What the hostile strings carry: ESC with a screen clear, an OSC title with
/// BEL, a C1 CSI, and a right-to-left override.
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m\u{202e}";

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox { dir: tempfile::tempdir().expect("a temp dir") }
    }

    fn path(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.dir.path().join(name.as_ref())
    }

    fn write(&self, name: impl AsRef<OsStr>, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write a file");
        path
    }

    /// The binary with no user configuration or state of this machine in reach.
    fn command(&self, args: &[&OsStr]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuroom"));
        cmd.args(args).env("XDG_CONFIG_HOME", self.dir.path()).env("XDG_STATE_HOME", self.dir.path()).env("HOME", self.dir.path()).stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&OsStr]) -> Output {
        self.command(args).output().expect("run gpuroom")
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A failed run whose stderr holds no control byte but newlines, and no C1 or bidi control.
fn refused_safely(out: &Output, what: &str) -> String {
    assert!(!out.status.success(), "{what}: accepted");
    let err = &out.stderr;
    let raw: Vec<u8> = err.iter().copied().filter(|b| (*b < 0x20 && *b != b'\n') || *b == 0x7f).collect();
    assert!(raw.is_empty(), "{what}: control bytes {raw:02x?} reached stderr: {:?}", stderr(out));
    let text = stderr(out);
    for c in ['\u{9b}', '\u{202e}', '\u{85}'] {
        assert!(!text.contains(c), "{what}: {c:?} reached stderr: {text:?}");
    }
    text
}

// ---- numbers ------------------------------------------------------------

/// A configuration setting each `(key, value)`: keys as `NUMERIC_KEYS` names
/// them, an array item's keys (`a[].b`) gathered into one item with the
/// keys that item requires.
fn config_doc(settings: &[(&str, String)]) -> String {
    let mut tables: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut items: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (key, value) in settings {
        match key.split_once("[]") {
            Some((array, "")) => {
                let (table, field) = array.rsplit_once('.').unwrap();
                tables.entry(table.into()).or_default().push((field.into(), format!("[{value}]")));
            }
            Some((array, field)) => {
                let item = items.entry(array.into()).or_insert_with(|| required(array));
                item.insert(field.trim_start_matches('.').into(), value.clone());
            }
            None => {
                let (table, field) = key.rsplit_once('.').unwrap();
                tables.entry(table.into()).or_default().push((field.into(), value.clone()));
            }
        }
    }
    let mut text = String::new();
    for (table, fields) in tables {
        text.push_str(&format!("[{table}]\n"));
        for (k, v) in fields {
            text.push_str(&format!("{k} = {v}\n"));
        }
    }
    for (array, fields) in items {
        text.push_str(&format!("[[{array}]]\n"));
        for (k, v) in fields {
            text.push_str(&format!("{k} = {v}\n"));
        }
    }
    text
}

/// The keys an item of `array` must have.
fn required(array: &str) -> BTreeMap<String, String> {
    let fields: &[(&str, &str)] = match array {
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
        other => panic!("no required keys known for [[{other}]]"),
    };
    fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// NaN, both infinities, a negative, and past each end of the range.
fn bad_values(rule: Rule) -> Vec<String> {
    let mut bad: Vec<String> = vec!["nan".into(), "inf".into(), "-inf".into(), "-1".into()];
    match rule {
        Rule::Int(min, max) => {
            bad.push("0.5".into());
            if min > 0 {
                bad.push((min - 1).to_string());
            }
            if max < i64::MAX {
                bad.push((max + 1).to_string());
            }
        }
        Rule::Float { min, above, max } => {
            if min > 0.0 || above {
                bad.push(if above { min.to_string() } else { (min - 0.5).to_string() });
            }
            if max.is_finite() {
                bad.push((max + 0.5).to_string());
            }
        }
        Rule::Money => bad.push("\"-1\"".into()),
    }
    bad
}

#[test]
fn every_engine_number_is_refused_out_of_range_with_file_key_and_range() {
    let sandbox = Sandbox::new();
    let file = sandbox.path("engine.toml");
    let file_name = file.display().to_string();
    for (key, rule) in NUMERIC_KEYS {
        for value in bad_values(*rule) {
            std::fs::write(&file, config_doc(&[(key, value.clone())])).unwrap();
            // `doctor` reads the configuration first and stops at its error.
            let out = sandbox.run(&[os("doctor"), os("--config"), file.as_os_str()]);
            let err = refused_safely(&out, &format!("{key} = {value}"));
            let shown_key = key.replace("[]", "[0]");
            assert!(err.contains(&format!("{file_name}: {shown_key} = {value}: {}", rule.describe())), "{key} = {value}: {err}");
        }
    }
}

#[test]
fn a_configuration_setting_every_number_in_range_is_accepted() {
    let sandbox = Sandbox::new();
    let settings: Vec<(&str, String)> = NUMERIC_KEYS.iter().map(|(k, r)| (*k, gpuroom::config::numbers::accepted_example(k, *r))).collect();
    let file = sandbox.write("engine.toml", config_doc(&settings));
    let out = sandbox.run(&[os("sim"), os("--hours"), os("0"), os("--config"), file.as_os_str()]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), std::fs::read_to_string(&file).unwrap());
}

#[test]
fn jobs_file_numbers_are_refused_with_file_key_and_range() {
    let sandbox = Sandbox::new();
    let jobs = sandbox.write(
        "jobs.toml",
        "[[tenant]]\nid = \"r\"\nquota_gpus = -2\nmonthly_budget = \"100\"\n\
         [[job]]\nname = \"j\"\ntenant = \"r\"\ngpu_mem_mib = 1000\nsteps = 10\ncommand = [\"true\"]\n",
    );
    let out = sandbox.run(&[os("--live"), os("--no-log"), os("--jobs"), jobs.as_os_str()]);
    let err = refused_safely(&out, "quota_gpus = -2");
    assert!(err.contains(&format!("{}: tenant[0].quota_gpus = -2: must be a whole number within [0, 4294967295]", jobs.display())), "{err}");
}

// ---- control bytes --------------------------------------------------------

/// The escaped form of `HOSTILE` as the messages show it.
fn shown_hostile() -> &'static str {
    "\\x1b[2J\\x1b]0;owned\\x07\\u{9b}31m\\u{202e}"
}

/// A file name holding the hostile bytes.
fn hostile_name(stem: &str) -> std::ffi::OsString {
    OsStr::from_bytes(format!("{stem}{HOSTILE}.toml").as_bytes()).to_os_string()
}

#[test]
fn a_configuration_value_with_control_bytes_is_echoed_escaped() {
    let sandbox = Sandbox::new();
    // As TOML escapes, so that the value itself holds them.
    let file = sandbox.write("engine.toml", "[sched]\ndiscipline = \"\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\\u202edrf\"\n");
    let err = refused_safely(&sandbox.run(&[os("doctor"), os("--config"), file.as_os_str()]), "discipline");
    assert!(err.contains("engine.toml") && err.contains("line 2"), "{err}");
    // As raw bytes in the file, which TOML refuses.
    let file = sandbox.write("raw.toml", format!("[sched]\ndiscipline = \"{HOSTILE}drf\"\n"));
    let err = refused_safely(&sandbox.run(&[os("doctor"), os("--config"), file.as_os_str()]), "raw bytes");
    assert!(err.contains("raw.toml") && err.contains("line 2"), "{err}");
    // A hostile key.
    let file = sandbox.write("key.toml", "[sched]\n\"idle\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\\u202e\" = 1\n");
    let err = refused_safely(&sandbox.run(&[os("doctor"), os("--config"), file.as_os_str()]), "key");
    assert!(err.contains(&format!("idle{}", shown_hostile())), "{err}");
}

#[test]
fn paths_with_control_bytes_are_echoed_escaped() {
    let sandbox = Sandbox::new();
    // A configuration file that exists, with a bad number, and one that does not.
    let config = sandbox.write(hostile_name("engine"), "[sched]\nidle_util_pct = inf\n");
    let err = refused_safely(&sandbox.run(&[os("doctor"), os("--config"), config.as_os_str()]), "config path");
    assert!(err.contains(&format!("engine{}.toml: sched.idle_util_pct = inf", shown_hostile())), "{err}");
    let missing = sandbox.path(hostile_name("missing"));
    let err = refused_safely(&sandbox.run(&[os("doctor"), os("--config"), missing.as_os_str()]), "missing config");
    assert!(err.contains("reading") && err.contains(shown_hostile()), "{err}");
    // A log that does not exist.
    let db = sandbox.path(hostile_name("day"));
    let err = refused_safely(&sandbox.run(&[os("replay"), db.as_os_str()]), "--db path");
    assert!(err.contains(shown_hostile()), "{err}");
    let err = refused_safely(&sandbox.run(&[os("export"), os("--db"), db.as_os_str(), os("--month"), os("2024-01")]), "export --db");
    assert!(err.contains(shown_hostile()), "{err}");
    // A simulated cluster's file, missing and present with a hostile name inside.
    let sim = sandbox.path(hostile_name("cluster"));
    let err = refused_safely(&sandbox.run(&[os("sim"), os("--hours"), os("0"), os("--sim-config"), sim.as_os_str()]), "--sim-config path");
    assert!(err.contains(shown_hostile()), "{err}");
    let mut text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sim/default.toml")).unwrap();
    text.push_str("\n[[nodes]]\nname = \"\\u001b[2J\\u0007\\u202ex\"\ninstance_type = \"no-such-type\"\nzone = \"z\"\nbilling = \"reserved\"\n");
    let sim = sandbox.write(hostile_name("present"), text);
    let err = refused_safely(&sandbox.run(&[os("sim"), os("--hours"), os("0"), os("--sim-config"), sim.as_os_str()]), "--sim-config content");
    assert!(err.contains("no-such-type"), "{err}");
}

#[test]
fn a_jobs_file_with_control_bytes_is_echoed_escaped() {
    let sandbox = Sandbox::new();
    let job = "[[job]]\nname = \"\\u001b]0;owned\\u0007\\u202ej\"\ntenant = \"nobody\"\ngpu_mem_mib = 1000\nsteps = 10\ncommand = [\"true\"]\n";
    let jobs = sandbox.write(hostile_name("jobs"), format!("[[tenant]]\nid = \"r\"\nquota_gpus = 2\nmonthly_budget = \"100\"\n{job}"));
    let err = refused_safely(&sandbox.run(&[os("--live"), os("--no-log"), os("--jobs"), jobs.as_os_str()]), "jobs file");
    assert!(err.contains(&format!("jobs{}.toml", shown_hostile())) && err.contains("tenant is not declared"), "{err}");
    let budget = sandbox.write("budget.toml", format!("[[tenant]]\nid = \"r\"\nquota_gpus = 2\nmonthly_budget = \"\\u001b[2J\\u0007100\"\n{job}"));
    let err = refused_safely(&sandbox.run(&[os("--live"), os("--no-log"), os("--jobs"), budget.as_os_str()]), "budget");
    assert!(err.contains("budget.toml: tenant[0].monthly_budget = \"\\x1b[2J\\x07100\": must be an amount"), "{err}");
    let raw = sandbox.write("raw-jobs.toml", format!("[[tenant]]\nid = \"{HOSTILE}\"\n"));
    let err = refused_safely(&sandbox.run(&[os("--live"), os("--no-log"), os("--jobs"), raw.as_os_str()]), "raw jobs file");
    assert!(err.contains("raw-jobs.toml"), "{err}");
}

#[test]
fn a_theme_file_with_control_bytes_is_echoed_escaped() {
    let sandbox = Sandbox::new();
    let out = sandbox.path("shot.svg");
    let theme = sandbox.write(hostile_name("theme"), "name = \"t\"\n[styles]\ntext = \"\\u001b[2J\\u0007\\u202ered\"\n");
    let args = |theme: &Path| sandbox.run(&[os("screenshot"), os("--hours"), os("0"), os("--out"), out.as_os_str(), os("--theme"), theme.as_os_str()]);
    let err = refused_safely(&args(&theme), "theme file");
    assert!(err.contains(&format!("theme{}.toml", shown_hostile())), "{err}");
    let err = refused_safely(&args(&sandbox.path(hostile_name("no-theme"))), "missing theme");
    assert!(err.contains("no such theme file"), "{err}");
}

#[test]
fn a_command_line_value_with_control_bytes_is_echoed_escaped() {
    let sandbox = Sandbox::new();
    let err = refused_safely(&sandbox.run(&[os("--speed"), os(&format!("2{HOSTILE}"))]), "--speed");
    // clap's plain rendering already drops what reads as styling (the ESC
    // sequences); the C1 and bidi controls it keeps are shown escaped.
    assert!(err.contains("--speed") && err.contains("\\u{9b}31m\\u{202e}"), "{err}");
}

// ---- sizes ----------------------------------------------------------------

const HUGE: usize = 50 * 1024 * 1024;
/// Far more than any message needs, far less than the input.
const STDERR_BOUND: usize = 10 * 1024;

/// The run's peak resident set in KiB, where `/usr/bin/time` can say.
fn peak_rss_kib(sandbox: &Sandbox, args: &[&OsStr]) -> Option<(Output, u64)> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let report = sandbox.path("rss");
    let mut cmd = Command::new(time);
    cmd.arg("-o").arg(&report).arg("-f").arg("%M").arg(env!("CARGO_BIN_EXE_gpuroom")).args(args);
    cmd.env("XDG_CONFIG_HOME", sandbox.path("")).env("XDG_STATE_HOME", sandbox.path("")).stdin(Stdio::null());
    let out = cmd.output().ok()?;
    let kib = std::fs::read_to_string(&report).ok()?.lines().last()?.trim().parse().ok()?;
    Some((out, kib))
}

#[test]
fn a_huge_configuration_value_or_line_is_not_echoed_whole() {
    let sandbox = Sandbox::new();
    let value = sandbox.write("value.toml", format!("[sched]\ndiscipline = \"{}\"\n", "x".repeat(HUGE)));
    let key = sandbox.write("line.toml", format!("[sched]\n{} = 1\n", "k".repeat(HUGE)));
    for file in [value, key] {
        let args = [os("doctor"), os("--config"), file.as_os_str()];
        let out = sandbox.run(&args);
        let err = refused_safely(&out, &file.display().to_string());
        assert!(out.stderr.len() < STDERR_BOUND, "{} bytes of stderr", out.stderr.len());
        assert!(err.contains(&file.display().to_string()) && err.contains("more bytes"), "{err}");
        // Reading and parsing a 50 MB file costs a few copies of it; echoing it
        // would not add much memory, so this bounds copies, not the echo.
        if let Some((_, kib)) = peak_rss_kib(&sandbox, &args) {
            assert!(kib < 1024 * 1024, "peak RSS {kib} KiB for a 50 MB file");
        }
    }
}

#[test]
fn a_huge_path_argument_is_not_echoed_whole() {
    // One argument may hold at most 128 KiB on Linux, so that is the size tried.
    let sandbox = Sandbox::new();
    let path = format!("/{}", "p".repeat(120 * 1024));
    for args in [vec![os("doctor"), os("--config"), os(&path)], vec![os("replay"), os(&path)], vec![os("--speed"), os(&path)]] {
        let out = sandbox.run(&args);
        let err = refused_safely(&out, "a huge path");
        assert!(out.stderr.len() < STDERR_BOUND, "{} bytes of stderr: {}", out.stderr.len(), &err[..200]);
        assert!(err.contains("more bytes"), "{err}");
    }
}

// ---- names from the Slurm and dcgm parsers ---------------------------------

/// The view as JSON, checked for every form a control can take there.
fn assert_view_clean(view: &gpuroom::room::view::View) {
    let text = serde_json::to_string(view).expect("a view serialises");
    for escaped in ["\\u001b", "\\u0007", "\\u009b"] {
        assert!(!text.contains(escaped), "{escaped} in the view: {text}");
    }
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!text.contains(c), "{c:?} in the view: {text}");
    }
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn slurm_partition_node_and_job_names_with_controls_reach_the_view_clean() {
    use gpuroom::domain::event::Event;
    use gpuroom::domain::slurm::SlurmSnapshot;
    use gpuroom::sources::slurm::{json, text};
    // JSON carries them as escapes, the scontrol text as raw bytes. Node
    // names in JSON get ESC c (a full terminal reset), BEL, a C1 and a bidi
    // override; a host list refuses controls outright, so the partition's
    // and the jobs' node lists carry the bidi override alone.
    let json_hostile = "\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\\u202e";
    let (node_hostile, node_json) = ("\u{202e}", "\\u001bc\\u0007\\u009b\\u202e");
    let nodes = fixture("fixtures/slurm/sinfo-22.05.json").replace("\"localhost\"", &format!("\"local{node_json}host\""));
    let jobs = fixture("fixtures/slurm/squeue-22.05.json")
        .replace("\"partition\": \"gpu\"", &format!("\"partition\": \"gpu{json_hostile}\""))
        .replace("\"localhost\"", "\"local\\u202ehost\"");
    let partitions = fixture("fixtures/slurm/scontrol-partition-22.05.txt")
        .replace("PartitionName=gpu ", &format!("PartitionName=gpu{HOSTILE} "))
        .replace("Nodes=localhost ", &format!("Nodes=local{node_hostile}host "));
    let snapshot = SlurmSnapshot {
        cluster: format!("c{HOSTILE}"),
        version: format!("22.05{HOSTILE}"),
        partitions: text::partitions("scontrol", &partitions).expect("partitions"),
        nodes: json::nodes("sinfo", &nodes).expect("nodes"),
        jobs: json::jobs("squeue", &jobs).expect("jobs"),
    };
    assert!(snapshot.partitions.iter().any(|p| p.name.contains('\u{1b}')), "the parser keeps the bytes: the view must clean them");
    assert!(snapshot.nodes.iter().any(|n| n.name.contains('\u{202e}')));
    let mut room = gpuroom::room::Room::default();
    room.apply(chrono::Utc::now(), &Event::Slurm { snapshot });
    let view = room.view();
    let slurm = view.slurm.as_ref().expect("the Slurm part of the view");
    assert!(slurm.partitions.iter().any(|p| p.name.starts_with("gpu[2J")), "{:?}", slurm.partitions);
    assert!(slurm.nodes.iter().any(|n| n.name.starts_with("local")), "{:?}", slurm.nodes);
    assert!(!slurm.jobs.is_empty());
    assert_view_clean(&view);
}

#[test]
fn dcgm_hostnames_and_models_with_controls_reach_the_view_clean() {
    use gpuroom::live::Live;
    use gpuroom::live::catalogue::Catalogue;
    use gpuroom::sources::report::Report;
    let page = fixture("fixtures/dcgm/a100-8gpu.prom")
        .replace("Hostname=\"node-a\"", &format!("Hostname=\"node{HOSTILE}-a\""))
        .replace("modelName=\"NVIDIA A100-SXM4-40GB\"", &format!("modelName=\"A100{HOSTILE}\""));
    let url = format!("http://gpu{HOSTILE}:9400/metrics");
    let readings = gpuroom::sources::dcgm::parse_page(&url, &page).expect("a page").readings;
    assert!(readings.iter().any(|r| r.host.contains('\u{1b}')), "the parser keeps the bytes: the view must clean them");
    let now = chrono::Utc::now();
    let mut live = Live::new(gpuroom::room::Room::default(), None, Catalogue::new(Vec::new(), Vec::new()), "head".into(), now, None);
    live.begin(now, None).expect("begin");
    live.report(now, Report::Gpus { source: url.clone(), readings }).expect("the readings");
    live.report(now, Report::Failed { source: url, hosts: vec![format!("node{HOSTILE}-a")], why: format!("bad{HOSTILE}") }).expect("a failure");
    let view = live.engine.room().view();
    assert!(view.nodes.iter().any(|n| n.name.starts_with("node") && n.gpus.len() == 8), "{:?}", view.nodes.iter().map(|n| &n.name).collect::<Vec<_>>());
    assert_view_clean(&view);
}
