//! Who holds a lock on the log: the processes `/proc/locks` lists on the
//! log's files, with their user and command, so an alarm can name the
//! blocker instead of saying "database is locked".
//!
//! Owns reading `/proc`; what to do about a blocker is the duty's.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A process holding a lock on one of the log's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    pub user: String,
    pub command: String,
    /// Which file ("-shm", "" for the log itself) and byte range.
    pub what: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({}, {}) on {}", self.pid, self.user, self.command, self.what)
    }
}

/// The other processes holding POSIX locks on `log`, its `-wal` or its
/// `-shm`, from `/proc/locks` (empty where it cannot be read).
pub fn holders(log: &Path) -> Vec<Holder> {
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let files: Vec<(u64, &str)> =
        ["", "-wal", "-shm"].into_iter().filter_map(|side| std::fs::metadata(crate::store::file::sibling(log, side)).ok().map(|m| (m.ino(), side))).collect();
    parse(&text, &files, std::process::id() as i32)
}

/// The lines of `/proc/locks` on these inodes, except `me`'s (pure, for tests).
fn parse(text: &str, files: &[(u64, &str)], me: i32) -> Vec<Holder> {
    let mut out: Vec<Holder> = Vec::new();
    for line in text.lines() {
        // "1: POSIX  ADVISORY  READ 4242 fd:01:1234567 120 120"; a waiter's line has "->".
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(1) == Some(&"->") || words.len() < 8 {
            continue;
        }
        let (kind, pid, file, start, end) = (words[3], words[4], words[5], words[6], words[7]);
        let Ok(pid) = pid.parse::<i32>() else { continue };
        let Some(inode) = file.rsplit(':').next().and_then(|i| i.parse::<u64>().ok()) else { continue };
        let Some((_, side)) = files.iter().find(|(ino, _)| *ino == inode) else { continue };
        if pid == me || pid <= 0 {
            continue;
        }
        let name = if side.is_empty() { "the log".to_string() } else { format!("its {side}") };
        let what = format!("{name}, {} lock on bytes {start}-{end}", kind.to_lowercase());
        if !out.iter().any(|h| h.pid == pid && h.what == what) {
            out.push(Holder { pid, user: owner_of(pid), command: command_of(pid), what });
        }
    }
    out
}

fn owner_of(pid: i32) -> String {
    std::fs::metadata(format!("/proc/{pid}")).map(|m| crate::store::file::user_name(m.uid())).unwrap_or_else(|_| "gone".to_string())
}

fn command_of(pid: i32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    crate::domain::text::clean(comm.trim())
}

/// "pid 4242 (ana, python3) on its -shm, read lock on bytes 120-120; …", or
/// a plain word when none is listed.
pub fn describe(holders: &[Holder]) -> String {
    if holders.is_empty() {
        "no process is listed in /proc/locks (another engine's connection mid-write, or a lock this host cannot see)".to_string()
    } else {
        holders.iter().map(Holder::to_string).collect::<Vec<_>>().join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_on_the_logs_files_name_their_holders() {
        let text = "1: POSIX  ADVISORY  READ 4242 fd:01:777 120 120\n\
                    1: -> POSIX  ADVISORY  WRITE 99 fd:01:777 120 120\n\
                    2: POSIX  ADVISORY  WRITE 7 fd:01:555 0 EOF\n\
                    3: OFDLCK ADVISORY  READ -1 fd:01:777 121 121\n\
                    4: FLOCK  ADVISORY  WRITE 4242 fd:01:888 0 EOF\n";
        let found = parse(text, &[(777, "-shm"), (888, "")], 7);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].pid, found[0].what.as_str()), (4242, "its -shm, read lock on bytes 120-120"));
        assert_eq!(found[1].what, "the log, write lock on bytes 0-EOF");
        assert!(describe(&[]).contains("no process"));
    }
}
