//! The adversarial suite, engines and their log: real `gpuroom engine`
//! processes raced, killed, silenced and pointed at files they must not
//! touch. Each test names the defect of issue 22 it keeps fixed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::store::Store;

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");

/// One test at a time: each runs several engines, and on two cores a
/// dozen at once would starve them all.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn engine_args(db: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["engine", "--seed", "4"]).args(extra).arg("--db").arg(db).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

fn spawn(db: &Path, extra: &[&str]) -> Child {
    engine_args(db, extra).spawn().expect("start gpuroom engine")
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
}

/// Waits for `child` to exit (a hang fails the test rather than the suite).
fn wait_exit(child: Child, what: &str) -> Output {
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("wait"));
    let start = Instant::now();
    while !waiter.is_finished() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
            panic!("{what}: the engine did not exit");
        }
        sleep(Duration::from_millis(50));
    }
    waiter.join().unwrap()
}

fn events(db: &Path) -> i64 {
    match Store::open_read_only(db).and_then(|s| s.event_count()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}");
            0
        }
    }
}

fn wait_events(db: &Path, at_least: i64) {
    let start = Instant::now();
    while events(db) < at_least {
        assert!(start.elapsed() < Duration::from_secs(90), "the engine made no progress ({} events)", events(db));
        sleep(Duration::from_millis(20));
    }
}

fn side_files(db: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"].iter().map(|s| gpuroom::store::file::sibling(db, s)).filter(|p| p.exists()).collect()
}

/// Item 10: losers of a creation race read a half-made log ("no such table:
/// meta"). Dozens of engines raced onto new files: exactly one owns each,
/// every other names it, and nobody sees a partial log.
#[test]
fn racing_engines_find_one_complete_log_owned_by_the_winner() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    for round in 0..4 {
        let db = dir.path().join(format!("race{round}.db"));
        // Ten years of simulated time: the winner must still run when the
        // losers are counted, however fast the engine gets.
        let racers: Vec<Child> = (0..8).map(|_| spawn(&db, &["--speed", "max", "--step-minutes", "30", "--until-hours", "87600"])).collect();
        // The winner runs on; the losers answer at once.
        let mut owners = Vec::new();
        let mut losers = Vec::new();
        for child in racers {
            let pid = child.id();
            let start = Instant::now();
            let mut child = child;
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let out = child.wait_with_output().unwrap();
                    losers.push((pid, status, stderr_of(&out)));
                    break;
                }
                if start.elapsed() > Duration::from_secs(30) {
                    owners.push(child);
                    break;
                }
                sleep(Duration::from_millis(20));
            }
        }
        assert_eq!(owners.len(), 1, "round {round}: {} engines kept running; losers: {losers:?}", owners.len());
        let winner = owners.pop().unwrap();
        for (pid, status, text) in &losers {
            assert!(!status.success(), "round {round}: loser {pid} exited 0: {text}");
            assert!(text.contains(&format!("already owned by the engine pid {}", winner.id())), "round {round}: loser {pid}: {text}");
            assert!(!text.contains("no such table"), "round {round}: {text}");
        }
        sigterm(&winner);
        let out = wait_exit(winner, "the race's winner");
        assert!(out.status.success(), "{}", stderr_of(&out));
        let store = Store::open_read_only(&db).unwrap();
        store.check_integrity().unwrap();
        assert_eq!(store.lease().unwrap(), None);
        assert!(side_files(&db).is_empty(), "{:?}", side_files(&db));
        assert!(!std::fs::read_dir(dir.path()).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains(".creating-")), "a temporary log was left");
    }
}

/// Item 1: an engine inside a long batch or resume (heartbeat older than the
/// timeout) was taken over while alive, and then exited.
#[test]
fn a_live_engine_with_a_silent_heartbeat_keeps_its_log() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let owner = spawn(&db, &["--speed", "600"]);
    wait_events(&db, 2);
    let pid = nix::unistd::Pid::from_raw(owner.id() as i32);
    // Stopped, it is as silent as an engine deep in a long batch: no heartbeat at all.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    sleep(Duration::from_millis(300));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute("UPDATE lease SET heartbeat_ms = 0", []).unwrap();
    drop(conn);
    for _ in 0..3 {
        let out = engine_args(&db, &["--speed", "600"]).output().unwrap();
        let text = stderr_of(&out);
        assert!(!out.status.success() && text.contains(&format!("already owned by the engine pid {}", owner.id())), "{text}");
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let before = events(&db);
    wait_events(&db, before + 1);
    let lease = Store::open_read_only(&db).unwrap().lease().unwrap().expect("still held");
    assert_eq!(lease.holder.pid, owner.id(), "the live owner lost its lease");
    sigterm(&owner);
    let out = wait_exit(owner, "the owner");
    assert!(out.status.success() && stderr_of(&out).contains("lease released"), "{}", stderr_of(&out));
}

/// Item 2: at --speed 1e7 one batch grew without bound (gigabytes of WAL)
/// and SIGTERM was not heard; a step that rounds to nothing spun forever.
#[test]
fn a_fast_engine_commits_bounded_batches_and_stops_on_sigterm() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fast.db");
    let child = spawn(&db, &["--speed", "1e7"]);
    // Committed work appears while the clock is far ahead of the engine.
    wait_events(&db, 2_000);
    let first = events(&db);
    wait_events(&db, first + 2_000);
    let wal = std::fs::metadata(gpuroom::store::file::sibling(&db, "-wal")).map(|m| m.len()).unwrap_or(0);
    assert!(wal < 256 << 20, "the WAL grew to {wal} bytes");
    sigterm(&child);
    let out = wait_exit(child, "the fast engine");
    assert!(out.status.success() && stderr_of(&out).contains("lease released"), "{}", stderr_of(&out));
    assert!(events(&db) >= first + 2_000);

    for (args, says) in [
        (&["--speed", "max", "--step-minutes", "1e-9"][..], "--step-minutes"),
        (&["--speed", "max", "--until-hours", "nan"][..], "hours"),
        (&["--speed", "max", "--until-hours=-1"][..], "hours"),
    ] {
        let db = dir.path().join("refused.db");
        let out = engine_args(&db, args).output().unwrap();
        let text = stderr_of(&out);
        assert!(!out.status.success() && text.contains(says), "{args:?}: {text}");
        assert!(!db.exists() && side_files(&db).is_empty(), "{args:?} left a log behind");
    }
}

/// The crash guard, at random points: each kill -9 lands somewhere else;
/// the resumed log is byte for byte the log of a run never killed.
#[test]
fn kill_9_at_random_points_leaves_the_log_of_an_unkilled_run() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.db");
    let broken = dir.path().join("broken.db");
    let args = ["--speed", "max", "--step-minutes", "20", "--until-hours", "90"];
    let reference = spawn(&whole, &args);
    // A fixed sequence of "random" points (a seeded LCG), so a failure reproduces.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % 1_500
    };
    let mut at = 0;
    for kill in 0..3 {
        let child = spawn(&broken, &args);
        at += 300 + next() as i64;
        wait_events(&broken, at);
        let mut child = child;
        child.kill().unwrap();
        let _ = child.wait();
        eprintln!("kill {kill} after {} events", events(&broken));
    }
    let out = wait_exit(spawn(&broken, &args), "the last resume");
    assert!(out.status.success() && stderr_of(&out).contains("resuming"), "{}", stderr_of(&out));
    let out = wait_exit(reference, "the reference");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let rows = |path: &Path| -> Vec<(i64, String, String)> {
        let store = Store::open_read_only(path).unwrap();
        let mut out = Vec::new();
        store.for_each_event(0, |seq, at, e| out.push((seq, at.to_rfc3339(), serde_json::to_string(&e).unwrap()))).unwrap();
        out
    };
    let (a, b) = (rows(&whole), rows(&broken));
    assert_eq!(a.len(), b.len(), "the resumed log has a different length");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("the logs differ at event {}: {:?} vs {:?}", i + 1, a[i], b[i]);
    }
}

/// Item 5: with the database moved away, its WAL was silently discarded by
/// a new run started at the same path.
#[test]
fn an_orphan_wal_is_refused_and_left_as_it_was() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let mut child = spawn(&db, &["--speed", "max", "--step-minutes", "20", "--until-hours", "5000"]);
    wait_events(&db, 1_000);
    child.kill().unwrap();
    let _ = child.wait();
    let wal = gpuroom::store::file::sibling(&db, "-wal");
    let wal_bytes = std::fs::read(&wal).expect("a killed engine leaves its WAL");
    let moved = dir.path().join("moved.db");
    std::fs::rename(&db, &moved).unwrap();
    let out = engine_args(&db, &["--speed", "max", "--until-hours", "1"]).output().unwrap();
    let text = stderr_of(&out);
    assert!(!out.status.success() && text.contains("-wal is here without its database"), "{text}");
    assert!(!db.exists(), "a new log was started over the orphan WAL");
    assert_eq!(std::fs::read(&wal).unwrap(), wal_bytes, "the orphan WAL was touched");
    // Put back, the run resumes with every committed event.
    std::fs::rename(&moved, &db).unwrap();
    let out = wait_exit(spawn(&db, &["--speed", "max", "--step-minutes", "20", "--until-hours", "40"]), "the resume");
    assert!(out.status.success() && stderr_of(&out).contains("resuming"), "{}", stderr_of(&out));
}

/// Item 6: `--wall` on a path that did not exist started an engine there.
#[test]
fn the_wall_never_creates_or_writes_a_log() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nothing-here.db");
    let out = Command::new(BIN).arg("--wall").arg("--db").arg(&db).stdin(Stdio::null()).output().unwrap();
    let text = stderr_of(&out);
    assert!(!out.status.success() && text.contains("the wall display only reads"), "{text}");
    assert!(!db.exists() && side_files(&db).is_empty() && !gpuroom::host::serve::socket_of(&db).exists());
}

fn finished_log(dir: &Path) -> PathBuf {
    let db = dir.join("done.db");
    let out = engine_args(&db, &["--speed", "max", "--step-minutes", "30", "--until-hours", "24"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    db
}

/// Item 4: read-only work on a chmod 444 log left -wal/-shm beside it, and on
/// a read-only mount said "not a gpuroom event log".
#[test]
fn read_only_logs_are_replayed_and_exported_without_writing_anything() {
    let _serial = serial();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = finished_log(dir.path());
    let before = std::fs::read(&db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    for args in [vec!["replay"], vec!["efficiency", "--db"], vec!["export", "--month", "2020-01", "--db"]] {
        let out = Command::new(BIN).args(&args).arg(&db).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr_of(&out));
        assert!(side_files(&db).is_empty(), "{args:?} left {:?}", side_files(&db));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "a read-only open changed the file");

    // A read-only mount (a private mount namespace; needs root, which CI has).
    if nix::unistd::geteuid().is_root() {
        let mount_dir = dir.path();
        let script = format!(
            "mount --bind -o ro {d} {d} && {BIN} replay {db} && touch {d}/probe 2>/dev/null; test ! -e {d}/probe",
            d = mount_dir.display(),
            db = db.display()
        );
        let out = Command::new("unshare").args(["-m", "sh", "-c", &script]).output().expect("unshare");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr_of(&out);
        assert!(out.status.success(), "replay on a read-only mount: {text}");
        assert!(text.contains("replayed") && !text.contains("not a gpuroom event log"), "{text}");
    }
}

/// Item 3: the log must be private whatever the umask; a run shared with a
/// group of operators shares its engine's socket, never the file (issue 33,
/// item 2: a member who could read the `-shm` could lock the writer out).
#[test]
fn logs_are_the_owners_alone_whatever_the_umask_and_a_group_shares_the_socket() {
    let _serial = serial();
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    for (name, group) in [("private.db", None), ("shared.db", Some("0"))] {
        let db = dir.path().join(name);
        let group_arg = group.map(|g| format!("--log-group {g}")).unwrap_or_default();
        let script = format!("umask 000; exec {BIN} engine --seed 4 --speed max --until-hours 3 {group_arg} --db {}", db.display());
        let out = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert_eq!(mode(&db), 0o600, "{name}");
        assert!(!gpuroom::host::serve::socket_of(&db).exists(), "a stopped engine removes its socket");
    }
    // While an engine runs: its log, -wal and -shm are its owner's alone; its
    // socket is the group's (0660), made whole before anyone could connect.
    let db = dir.path().join("live-shared.db");
    let mut child = spawn(&db, &["--speed", "600", "--log-group", "4242"]);
    while events(&db) < 2 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut text = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut text).unwrap();
            panic!("the shared engine exited ({status}): {text}");
        }
        sleep(Duration::from_millis(20));
    }
    for side in ["", "-wal", "-shm"] {
        let file = gpuroom::store::file::sibling(&db, side);
        assert_eq!(mode(&file), 0o600, "{side}");
    }
    let socket = gpuroom::host::serve::socket_of(&db);
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    if nix::unistd::geteuid().is_root() {
        assert_eq!((meta.gid(), meta.permissions().mode() & 0o777), (4242, 0o660));
    }
    let hidden: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with('.')).collect();
    assert!(hidden.is_empty(), "the socket's private folder is gone: {hidden:?}");
    sigterm(&child);
    assert!(wait_exit(child, "the shared engine").status.success());
    let out = Command::new(BIN)
        .args(["engine", "--speed", "max", "--until-hours", "1", "--log-group", "no-such-group-anywhere", "--db"])
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    assert!(!out.status.success() && stderr_of(&out).contains("no group named"), "{}", stderr_of(&out));
    assert!(!dir.path().join("x.db").exists());
}
