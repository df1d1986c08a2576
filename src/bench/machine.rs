//! The machine a benchmark ran on, as the report names it: CPU model, cores,
//! memory, OS, compiler, build profile, source revision and date. Every
//! probe is best effort and says "unknown" rather than fail.

use std::path::Path;
use std::process::Command;

/// Where and with what the figures were measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// `model name` of /proc/cpuinfo.
    pub cpu: String,
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// `MemTotal` of /proc/meminfo.
    pub memory: String,
    /// `PRETTY_NAME` of /etc/os-release, else the target OS.
    pub os: String,
    /// `rustc --version` on this machine now.
    pub rustc: String,
    /// `release` or `debug` (from `debug_assertions`).
    pub profile: &'static str,
    /// `git rev-parse --short HEAD` of the source tree, and whether it had local changes.
    pub git: String,
    /// When the run started (UTC).
    pub date: String,
}

const UNKNOWN: &str = "unknown";

impl Machine {
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        Machine {
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| UNKNOWN.into()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory: total_memory(&meminfo).unwrap_or_else(|| UNKNOWN.into()),
            os: pretty_name(&os_release).unwrap_or_else(|| std::env::consts::OS.into()),
            rustc: command_line("rustc", &["--version"], None).unwrap_or_else(|| UNKNOWN.into()),
            profile: if cfg!(debug_assertions) { "debug" } else { "release" },
            git: git_revision().unwrap_or_else(|| UNKNOWN.into()),
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        }
    }
}

/// The first `model name` (x86) or `Model`/`Hardware` (ARM) line's value.
pub(crate) fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

/// `MemTotal: 24555000 kB` as "23.4 GiB".
pub(crate) fn total_memory(meminfo: &str) -> Option<String> {
    let kib: f64 = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(format!("{:.1} GiB", kib / (1024.0 * 1024.0)))
}

/// `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"` without the quotes.
pub(crate) fn pretty_name(os_release: &str) -> Option<String> {
    let v = os_release.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))?;
    let v = v.trim().trim_matches('"').trim_matches('\'');
    (!v.is_empty()).then(|| v.to_string())
}

/// The first line a command prints, if it runs and succeeds.
fn command_line(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// The revision of the tree this binary was built from (if it is still
/// there), else of the working directory.
fn git_revision() -> Option<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = manifest.is_dir().then_some(manifest);
    let rev = command_line("git", &["rev-parse", "--short", "HEAD"], dir)?;
    let mut cmd = Command::new("git");
    cmd.args(["status", "--porcelain", "--untracked-files=no"]);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let dirty = cmd.output().ok().filter(|o| o.status.success()).is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{rev} (with local changes)") } else { rev })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_files_and_os_release() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        assert_eq!(total_memory("MemTotal:       24555000 kB\nMemFree: 1 kB\n").as_deref(), Some("23.4 GiB"));
        assert_eq!(total_memory(""), None);
        assert_eq!(pretty_name("NAME=Debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n").as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(pretty_name("NAME=x\n"), None);
    }

    #[test]
    fn detect_fills_every_field() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        for field in [&m.cpu, &m.memory, &m.os, &m.rustc, &m.git, &m.date] {
            assert!(!field.is_empty());
        }
        assert!(["debug", "release"].contains(&m.profile));
    }
}
