//! The log as a file on disk: who may open it, how it comes into being, and
//! how read-only work opens it without writing anything.
//!
//! * **The owner's alone.** A log and its `-wal`/`-shm` (SQLite gives them
//!   the database's mode and owner) are the creating user's alone (0600),
//!   whatever the umask, and also when `Access::group` shares the run with a
//!   group of operators: members reach a running engine through its socket
//!   (`host::serve`), never the file. A member who could read the file could
//!   lock it: a shared lock on byte 120 of the `-shm` stopped the engine, one
//!   on byte 121 stopped every checkpoint. The group is kept in the log's
//!   meta (`log_group`), for the socket; a log an older gpuroom shared (0640)
//!   is made the owner's again when its engine resumes it.
//! * **Atomic creation.** The whole log (tables, metadata, the creator's
//!   lease) is built under a temporary name beside it and linked into place
//!   in one step that fails if the name is taken, so a second engine racing
//!   the first either wins or finds a complete log held by the winner; it
//!   never reads a half-made one.
//! * **No orphan WAL.** A `-wal` or `-journal` with no database beside it may
//!   hold committed events of a log that was moved; a new log there would
//!   discard them, so creation refuses.
//! * **Read-only opens write nothing.** A log no engine has open (no `-wal`)
//!   is opened `immutable`, so no `-wal`/`-shm` appear beside it, on a
//!   read-only mount or a chmod 444 file alike.
//!
//! Owns paths, modes and URIs; the SQL is `db`'s.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file-level refusal or failure, with the path it concerns.
#[derive(Debug)]
pub enum FileError {
    /// Another process created the log first.
    Raced(PathBuf),
    At {
        path: PathBuf,
        message: String,
    },
}

/// Who may use a log besides its owner.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// A group of operators (its id): they may attach to the running engine
    /// (views, commands) through its socket.
    pub group: Option<u32>,
}

impl Access {
    /// The owner alone.
    pub fn private() -> Access {
        Access { group: None }
    }

    /// Shared with the group named `name` (from the system's group database).
    pub fn for_group(name: &str) -> Result<Access, String> {
        let group = nix_group(name)?;
        Ok(Access { group: Some(group) })
    }

    /// The log's mode: the owner's alone, shared or not (see the module's doc).
    pub(super) fn log_mode(&self) -> u32 {
        0o600
    }
}

fn nix_group(name: &str) -> Result<u32, String> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(format!("no group named {:?} (give its numeric id instead)", crate::domain::text::clean(name))),
        Err(e) => Err(format!("looking up group {:?}: {e}", crate::domain::text::clean(name))),
    }
}

/// `path` with `suffix` appended to its file name (`log.db` → `log.db-wal`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn format_err(path: &Path, message: impl Into<String>) -> FileError {
    FileError::At { path: path.to_path_buf(), message: message.into() }
}

/// Refuses to create a log where SQLite's side files of another one remain.
pub(super) fn refuse_orphans(path: &Path) -> Result<(), FileError> {
    for suffix in ["-wal", "-journal"] {
        let side = sibling(path, suffix);
        if side.exists() {
            return Err(format_err(
                path,
                format!(
                    "{} is here without its database: it may hold committed events of a log that was moved or deleted; \
                     put the database back beside it, or remove it if it is truly unwanted (refusing to start a new log over it)",
                    side.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The temporary file a new log is built in, private to this process.
pub(super) fn temporary_for(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    path.with_file_name(format!(".{name}.creating-{}-{nanos}", std::process::id()))
}

/// Makes the empty file a new log is built in, with the log's mode and group.
pub(super) fn make_private_file(tmp: &Path, access: &Access) -> Result<(), FileError> {
    let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(tmp).map_err(|e| format_err(tmp, e.to_string()))?;
    // Explicitly, so the umask does not decide who reads the log.
    file.set_permissions(fs::Permissions::from_mode(access.log_mode())).map_err(|e| format_err(tmp, e.to_string()))
}

/// Makes a log (and its side files) its owner's alone again: one an older
/// gpuroom shared with a group (0640) is resumed as this one keeps logs.
/// By path, never by opening them (see `match_side_files`). Says whether
/// anything was changed.
pub(super) fn make_owner_only(path: &Path) -> bool {
    let mut changed = false;
    for side in ["", "-wal", "-shm"] {
        let file = sibling(path, side);
        if let Ok(meta) = fs::metadata(&file)
            && meta.permissions().mode() & 0o077 != 0
        {
            changed |= fs::set_permissions(&file, fs::Permissions::from_mode(meta.permissions().mode() & 0o700)).is_ok();
        }
    }
    changed
}

/// Gives SQLite's `-wal` and `-shm` the log's group and mode. SQLite copies
/// the mode but, unless run as root, leaves the group its creator's own, and
/// a group operator who cannot read them sees no live data.
///
/// By path, never by opening them: closing any descriptor of a file drops
/// every POSIX lock this process holds on it, and SQLite's locks on the
/// `-shm` are what keep a reader from re-initialising it under the engine.
pub(super) fn match_side_files(path: &Path) {
    let Ok(log) = fs::metadata(path) else { return };
    for suffix in ["-wal", "-shm"] {
        let side = sibling(path, suffix);
        if side.exists() {
            let _ = std::os::unix::fs::chown(&side, None, Some(log.gid()));
            let _ = fs::set_permissions(&side, fs::Permissions::from_mode(log.permissions().mode() & 0o777));
        }
    }
}

/// This process's effective user id.
pub fn nix_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// A user's name, or "uid N" where the system has none for it.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => crate::domain::text::clean(&user.name),
        _ => format!("uid {uid}"),
    }
}

/// Links the finished temporary log into place; fails if `path` exists (a
/// racing engine made it first). The temporary name is removed either way.
pub(super) fn publish(tmp: &Path, path: &Path) -> Result<(), FileError> {
    let linked = fs::hard_link(tmp, path);
    let _ = fs::remove_file(tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(FileError::Raced(path.to_path_buf())),
        Err(e) => Err(format_err(path, format!("putting the new log in place: {e}"))),
    }
}

/// A `-journal` beside a log means a write in rollback mode is under way or
/// was interrupted (a migration by an engine killed half-way): the file may
/// be half-changed until a writer rolls the journal back, which a read-only
/// open cannot do. Say so, and how to recover, instead of "corrupt".
pub(super) fn refuse_hot_journal(path: &Path) -> Result<(), FileError> {
    let journal = sibling(path, "-journal");
    if journal.exists() {
        return Err(format_err(
            path,
            format!(
                "{} is beside it: a write to this log (an upgrade of an older log, most likely) is under way or was interrupted, \
                 and until it is rolled back the file cannot be read as it stands. If no engine is running, the log's owner \
                 recovers it by opening it once with `gpuroom engine --db` (or `gpuroom --db`), which rolls the journal back; \
                 do not remove the journal by hand",
                journal.display()
            ),
        ));
    }
    Ok(())
}

/// How a read-only open should reach the file.
pub(super) enum ReadOnlyOpen {
    /// An engine has (or had) it open: read through its WAL.
    Shared,
    /// Nobody writes it: read the file as it is, creating nothing beside it.
    Immutable,
}

pub(super) fn read_only_mode(path: &Path) -> ReadOnlyOpen {
    if sibling(path, "-wal").exists() { ReadOnlyOpen::Shared } else { ReadOnlyOpen::Immutable }
}

/// A `file:` URI for `path` with `query`, percent-encoding what a URI must not hold raw.
pub(super) fn uri(path: &Path, query: &str) -> String {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let mut out = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => out.push(*byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out.push('?');
    out.push_str(query);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(uri(Path::new("/a b/l?g#1%.db"), "immutable=1"), "file:/a%20b/l%3Fg%231%25.db?immutable=1");
    }

    #[test]
    fn groups_resolve_by_name_or_id() {
        assert_eq!(nix_group("0").unwrap(), 0);
        assert_eq!(nix_group("root").unwrap(), 0);
        assert!(nix_group("no-such-group-here").unwrap_err().contains("no group named"));
    }
}
