//! The adversarial suite, a shared room (issue 33, the second pass): a log
//! shared with `--log-group`, an engine run by its owner `gpr-eng`, members
//! `gpr-alice` and `gpr-mallory`, and `gpr-outsider`, real users made here,
//! each a real process. What a member can do to the engine and what they
//! cannot, as README › Security states it.
//!
//! The users are created when the test runs as root; otherwise the tests
//! that need them say so and pass, unless `GPUROOM_REQUIRE_USERS` is set (as
//! `.ci/run` does). The lock tests need no other user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpuroom::domain::event::{Actor, Role};
use gpuroom::host::client::Client;
use gpuroom::store::{Published, Store, file};

const BIN: &str = env!("CARGO_BIN_EXE_gpuroom");
const GROUP: &str = "gpr-ops";
/// The system's Python, which every user may run (a user's own, under
/// their home, is closed to the others).
const PYTHON: &str = "/usr/bin/python3";

fn wait<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        sleep(Duration::from_millis(50));
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn me() -> Actor {
    Actor { user: "test".into(), origin: "local".into(), role: Role::Viewer, account: None }
}

fn alarm(view: &Published, id: &str) -> Option<String> {
    view.view.alarms.iter().find(|a| a.id == id).map(|a| a.text.clone())
}

/// A POSIX lock of this process on `len` bytes of `file` from `start`, as any
/// reader of the file could take one; released when dropped.
struct Lock(#[allow(dead_code)] std::fs::File);

impl Lock {
    fn take(file: &Path, start: i64, len: i64) -> Lock {
        let handle = std::fs::File::open(file).unwrap();
        let flock = nix::libc::flock { l_type: nix::libc::F_RDLCK as i16, l_whence: nix::libc::SEEK_SET as i16, l_start: start, l_len: len, l_pid: 0 };
        // The engine holds its write lock for a moment per batch: try until it is free.
        wait("the lock", Duration::from_secs(30), || nix::fcntl::fcntl(&handle, nix::fcntl::FcntlArg::F_SETLK(&flock)).ok());
        Lock(handle)
    }
}

/// `program` run as `user` (its own uid, primary group and groups), by
/// `setpriv`, which execs it: the child's pid is the program's.
fn command_as(user: &str, program: &str) -> Command {
    let account = nix::unistd::User::from_name(user).unwrap().unwrap_or_else(|| panic!("no user {user}"));
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", account.uid)).arg(format!("--regid={}", account.gid)).arg("--init-groups").arg("--").arg(program);
    c
}

fn engine_as(user: Option<&str>, db: &Path, extra: &[&str], bin: &str) -> Child {
    let mut args: Vec<String> = vec!["engine".into(), "--seed".into(), "6".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--db".into(), db.display().to_string()]);
    let mut command = match user {
        Some(user) => command_as(user, bin),
        None => Command::new(bin),
    };
    command.args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start the engine")
}

fn stop(child: Child) -> String {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue 33, item 2: a shared lock on byte 120 of the `-shm` (SQLite's WAL
/// write lock) made the engine exit after 5 s. Now it writes nothing while
/// the lock is held, names the holder in an alarm, and goes on when it is
/// released, having lost nothing.
#[test]
fn a_lock_on_the_write_byte_is_named_and_outlasted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let child = engine_as(None, &db, &["--speed", "3000"], BIN);
    let client = wait("the engine", Duration::from_secs(60), || Client::connect(&db, &me(), true).ok());
    let first = wait("a view", Duration::from_secs(30), || client.latest_view(i64::MIN));
    let lock = Lock::take(&file::sibling(&db, "-shm"), 120, 1);
    let blocked =
        wait("the blocked alarm", Duration::from_secs(30), || client.latest_view(first.published_ms).filter(|v| alarm(v, "engine:blocked").is_some()));
    let said = alarm(&blocked, "engine:blocked").unwrap();
    assert!(said.contains(&format!("pid {}", std::process::id())) && said.contains("its -shm, read lock on bytes 120-120"), "{said}");
    // Held for a while: the engine lives on, and writes nothing.
    sleep(Duration::from_secs(6));
    let still = client.latest_view(i64::MIN).unwrap();
    assert!(alarm(&still, "engine:blocked").unwrap().contains("written nothing for"), "{:?}", alarm(&still, "engine:blocked"));
    assert_eq!(still.seq, blocked.seq, "nothing was written while the lock was held");
    drop(lock);
    let free = wait("the engine writing again", Duration::from_secs(30), || {
        client.latest_view(still.published_ms).filter(|v| v.seq > still.seq && alarm(v, "engine:blocked").is_none())
    });
    assert!(free.seq > still.seq);
    let said = stop(child);
    assert!(said.contains("lease released"), "{said}");
    let audit = Store::open_read_only(&db).unwrap().audit_records().unwrap();
    assert!(audit.iter().any(|r| r.verb == "blocked" && r.detail.contains("nothing was lost")), "{audit:#?}");
}

/// Issue 33, item 2: the same lock on byte 121 silently stopped every
/// checkpoint (the WAL grew from 4.5 MB to 227 MB in 40 s). Now the WAL's
/// size and its holder are an alarm, which clears once checkpoints go through.
#[test]
fn a_lock_that_stops_checkpoints_is_an_alarm_with_the_wal_size() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let child = engine_as(None, &db, &["--speed", "max", "--step-minutes", "10"], BIN);
    let client = wait("the engine", Duration::from_secs(60), || Client::connect(&db, &me(), true).ok());
    wait("a view", Duration::from_secs(30), || client.latest_view(i64::MIN));
    let lock = Lock::take(&file::sibling(&db, "-shm"), 121, 1);
    let grown = wait("the WAL alarm", Duration::from_secs(120), || client.latest_view(i64::MIN).and_then(|v| alarm(&v, "engine:wal")));
    assert!(grown.contains("cannot be checkpointed") && grown.contains(&format!("pid {}", std::process::id())), "{grown}");
    let mb: f64 = grown.split("WAL is ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(mb >= 16.0, "{grown}");
    drop(lock);
    wait("the WAL alarm to clear", Duration::from_secs(60), || client.latest_view(i64::MIN).filter(|v| alarm(v, "engine:wal").is_none()));
    stop(child);
    let wal = std::fs::metadata(file::sibling(&db, "-wal")).map(|m| m.len()).unwrap_or(0);
    assert!(wal <= 64 * 1024 * 1024, "the WAL was cut back after the checkpoint: {wal} bytes");
}

// ------------------------------------------------------------ several users

struct Users {
    bin: String,
    uid: std::collections::BTreeMap<&'static str, u32>,
}

/// The users and group, made once (idempotent), or `None` (with a reason
/// printed) where this process cannot make them.
fn users() -> Option<Users> {
    let required = std::env::var_os("GPUROOM_REQUIRE_USERS").is_some();
    if !nix::unistd::geteuid().is_root() {
        assert!(!required, "GPUROOM_REQUIRE_USERS is set, but the multi-user tests need root to create their users");
        eprintln!("skipped: the multi-user tests create users gpr-eng, gpr-alice, gpr-mallory, gpr-outsider and need root");
        return None;
    }
    let run = |args: &[&str]| Command::new(args[0]).args(&args[1..]).output().map(|o| o.status.success()).unwrap_or(false);
    if !run(&["getent", "group", GROUP]) {
        assert!(run(&["groupadd", GROUP]) || run(&["getent", "group", GROUP]), "groupadd {GROUP}");
    }
    let mut uid = std::collections::BTreeMap::new();
    // The engine's user is a member too: only a member may give its socket to the group.
    for (user, member) in [("gpr-eng", true), ("gpr-alice", true), ("gpr-mallory", true), ("gpr-outsider", false)] {
        if !run(&["id", "-u", user]) {
            let mut args = vec!["useradd", "-M", "-N", "-s", "/bin/sh"];
            if member {
                args.extend(["-G", GROUP]);
            }
            args.push(user);
            assert!(run(&args) || run(&["id", "-u", user]), "useradd {user}");
        }
        if member && !run(&["sh", "-c", &format!("id -nG {user} | grep -qw {GROUP}")]) {
            assert!(run(&["usermod", "-a", "-G", GROUP, user]), "usermod -a -G {GROUP} {user}");
        }
        let id = Command::new("id").args(["-u", user]).output().unwrap();
        uid.insert(user, String::from_utf8_lossy(&id.stdout).trim().parse().unwrap());
    }
    Some(Users { bin: BIN.to_string(), uid })
}

impl Users {
    /// A folder every user may enter, owned by the engine's user; the
    /// binary copied in where the build's own folder is closed to them.
    fn room(&mut self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        if !self.as_user("gpr-outsider", &[self.bin.as_str(), "--version"]).status.success() {
            let copy = dir.path().join("gpuroom");
            std::fs::copy(BIN, &copy).unwrap();
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
            self.bin = copy.display().to_string();
        }
        dir
    }

    fn as_user(&self, user: &str, args: &[&str]) -> Output {
        command_as(user, args[0]).args(&args[1..]).output().unwrap()
    }

    fn act(&self, user: &str, db: &Path, words: &str) -> Output {
        let db = db.display().to_string();
        let mut args = vec![self.bin.as_str(), "act", "--db", db.as_str()];
        args.extend(words.split_whitespace());
        self.as_user(user, &args)
    }

    fn shared_engine(&self, db: &Path, extra: &[&str]) -> Child {
        let mut args = vec!["--log-group", GROUP];
        args.extend(extra);
        engine_as(Some("gpr-eng"), db, &args, &self.bin)
    }
}

/// A client speaking the engine's protocol from Python, run as `user`: it
/// says hello and sends commands as fast as the socket takes them for
/// `secs` seconds, reading (and dropping) the answers as they come.
fn flood_as(user: &str, db: &Path, secs: u32) -> Child {
    let script = format!(
        r#"
import json, socket, struct, threading, time
s = socket.socket(socket.AF_UNIX)
s.connect({socket:?})
def send(m):
    b = json.dumps(m).encode()
    s.sendall(struct.pack('>I', len(b)) + b)
def drain():
    try:
        while s.recv(1 << 16):
            pass
    except OSError:
        pass
threading.Thread(target=drain, daemon=True).start()
send({{"Hello": {{"protocol": 1, "claimed": {{"user": "alice", "origin": "flood", "role": "operator"}}, "views": False}}}})
n, end = 0, time.time() + {secs}
while time.time() < end:
    send({{"Command": {{"ticket": "0000000000000-d%07d" % n, "action": {{"AcknowledgeAlarm": {{"id": "x%d" % n}}}}}}}})
    n += 1
print("sent", n, flush=True)
"#,
        socket = gpuroom::host::serve::socket_of(db).display().to_string()
    );
    command_as(user, PYTHON).args(["-c", &script]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Issue 33, items 1 and 2: members never open the log (so they cannot lock
/// it), outsiders cannot reach the engine, a member's flood neither delays
/// another's command behind it nor becomes rows in the log, and is an alarm
/// and one audit row; the actor recorded is the kernel's user.
#[test]
fn members_reach_the_engine_only_through_its_socket_and_no_flood_starves_another() {
    let Some(mut users) = users() else { return };
    let dir = users.room();
    let db = dir.path().join("room.db");
    let engine = users.shared_engine(&db, &["--speed", "600"]);
    let client = wait("the engine", Duration::from_secs(60), || Client::connect(&db, &me(), true).ok());
    let view = wait("running jobs", Duration::from_secs(60), || client.latest_view(i64::MIN).filter(|v| v.view.queue.running > 3));

    // The log and its side files are closed to members and outsiders alike.
    for user in ["gpr-alice", "gpr-mallory", "gpr-outsider"] {
        for side in ["", "-wal", "-shm"] {
            let path = file::sibling(&db, side).display().to_string();
            let out = users.as_user(user, &["cat", &path]);
            assert!(!out.status.success() && text(&out).contains("Permission denied"), "{user} read {path}: {}", text(&out));
        }
    }
    // An outsider cannot reach the engine at all.
    let out = users.act("gpr-outsider", &db, "ack x");
    assert!(!out.status.success() && text(&out).contains("Permission denied"), "{}", text(&out));

    // Mallory floods for 8 s; alice's command is taken in the first turn
    // after it arrives, and answered while the flood goes on.
    // The running job furthest from its end, so it still runs when alice's command lands.
    let running = view.view.jobs.iter().filter(|j| j.phase == gpuroom::domain::job::Phase::Running);
    let job = running.max_by_key(|j| j.eta.map_or(i64::MAX, |s| s.0)).unwrap().id;
    let mut flood = flood_as("gpr-mallory", &db, 8);
    sleep(Duration::from_millis(1_000));
    let out = users.act("gpr-alice", &db, &format!("preempt {job}"));
    assert!(flood.try_wait().unwrap().is_none(), "the flood ended before alice's answer came: the test shows nothing");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("✓ preempt {job}")) && text(&out).contains("as gpr-alice"), "{}", text(&out));
    let flooded = flood.wait_with_output().unwrap();
    let sent: usize =
        String::from_utf8_lossy(&flooded.stdout).trim().strip_prefix("sent ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{}", text(&flooded)));
    assert!(sent > 2_000, "mallory sent only {sent}");
    let alarm_text = wait("the flood alarm", Duration::from_secs(30), || client.latest_view(i64::MIN).and_then(|v| alarm(&v, "engine:flood:gpr-mallory")));
    assert!(alarm_text.contains("gpr-mallory is flooding the engine") && alarm_text.contains("refused"), "{alarm_text}");
    drop(client);
    stop(engine);

    let store = Store::open_read_only(&db).unwrap();
    let commands = store.commands().unwrap();
    let mallory = users.uid["gpr-mallory"];
    let filed: Vec<usize> = commands.iter().enumerate().filter(|(_, c)| c.ticket.starts_with(&format!("u{mallory}-"))).map(|(i, _)| i).collect();
    assert!(filed.len() < 1_000, "a flood of {sent} became {} rows", filed.len());
    let alice_at = commands.iter().position(|c| c.action.contains("Preempt")).expect("alice's command");
    let after = filed.iter().filter(|&&i| i > alice_at).count();
    assert!(after > 0, "alice's command waited behind every one of mallory's ({} filed)", filed.len());
    assert!(
        commands[alice_at].actor.contains("\"user\":\"gpr-alice\"") && commands[alice_at].actor.contains("\"engine\":false"),
        "{}",
        commands[alice_at].actor
    );
    let audit = store.audit_records().unwrap();
    let floods: Vec<_> = audit.iter().filter(|r| r.verb == "flood").collect();
    assert!(!floods.is_empty() && floods.len() <= 3, "one audit row a minute, not one per command: {floods:#?}");
    assert!(audit.iter().any(|r| r.verb == "preempt" && r.user == "gpr-alice" && r.outcome == "done"), "{audit:#?}");
}

/// Issue 33: a member who may write the log's folder can put a program of
/// their own under the socket's name while no engine runs; a console checks
/// who listens and refuses to send it anything.
#[test]
fn a_socket_not_served_by_the_logs_owner_is_refused() {
    let Some(mut users) = users() else { return };
    let dir = users.room();
    let db = dir.path().join("room.db");
    let engine = users.shared_engine(&db, &["--speed", "max", "--until-hours", "2"]);
    let out = engine.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let socket = gpuroom::host::serve::socket_of(&db).display().to_string();
    let script = format!(
        "import os, socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind({socket:?})\nos.chmod({socket:?}, 0o777)\ns.listen(5)\nprint('listening', flush=True)\nc, _ = s.accept()\ntime.sleep(5)"
    );
    let mut fake = command_as("gpr-mallory", PYTHON).args(["-c", &script]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(fake.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "listening");
    let out = users.act("gpr-alice", &db, "ack x");
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("served by gpr-mallory, not by the log's owner gpr-eng"), "{}", text(&out));
    let _ = fake.kill();
    let _ = fake.wait();
}

/// Issue 33, item 2, the path an older gpuroom shared: a log of mode 0640
/// is made its owner's alone again when its engine resumes it.
#[test]
fn a_log_an_older_gpuroom_shared_is_closed_again_when_resumed() {
    let Some(mut users) = users() else { return };
    let dir = users.room();
    let db: PathBuf = dir.path().join("room.db");
    let out = users.shared_engine(&db, &["--speed", "max", "--until-hours", "1"]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = users.shared_engine(&db, &["--speed", "max", "--until-hours", "2"]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::metadata(&db).unwrap().permissions().mode() & 0o777, 0o600);
}
