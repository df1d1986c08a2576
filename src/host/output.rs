//! Where a report goes when a command is told `--out FILE`: never over a
//! recorded run, and never half-written.
//!
//! * An output that is the log being read (the same file by inode, or its
//!   `-wal`, `-shm` or `-journal`), or any SQLite database, is refused before
//!   anything is written: README says no recorded run is ever overwritten,
//!   and `export --out room.db` once replaced a log with CSV.
//! * The report is written to a temporary file beside the target and
//!   renamed over it once complete, so a failure (a full disk, a bad
//!   format) leaves the old file as it was.
//!
//! Owns output paths only; what goes into them is the caller's.

use std::fs;
use std::io::{self, Read as _, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::domain::text::for_terminal;

/// SQLite's files start with these 16 bytes.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Whether `out` may receive a report: not the log `source` (or one of its
/// side files), not any SQLite database.
pub fn check(out: &Path, source: Option<&Path>) -> Result<()> {
    let shown = for_terminal(&out.display().to_string());
    let Ok(meta) = fs::metadata(out) else { return Ok(()) };
    if let Some(log) = source {
        for side in ["", "-wal", "-shm", "-journal"] {
            let candidate = crate::store::file::sibling(log, side);
            if fs::metadata(&candidate).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()) {
                bail!(
                    "{shown} is the log being read ({}): refusing to write over a recorded run; name another file",
                    for_terminal(&candidate.display().to_string())
                );
            }
        }
    }
    if meta.is_file() {
        let mut head = [0u8; 16];
        let read = fs::File::open(out).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
        if read == head.len() && &head == SQLITE_HEADER {
            bail!("{shown} is an SQLite database (perhaps another gpuroom log): refusing to write a report over it; name another file");
        }
    } else {
        bail!("{shown} is not a plain file: refusing to write a report there");
    }
    Ok(())
}

/// Writes what `fill` produces to `out`, whole or not at all, after `check`.
pub fn write(out: &Path, source: Option<&Path>, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    check(out, source)?;
    let shown = for_terminal(&out.display().to_string());
    let tmp = temporary_beside(out);
    let written = (|| -> io::Result<()> {
        let mut file = io::BufWriter::new(fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?);
        fill(&mut file)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, out)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {shown} (nothing was changed there)"));
    }
    Ok(())
}

/// `write` for text already in hand.
pub fn write_bytes(out: &Path, source: Option<&Path>, bytes: &[u8]) -> Result<()> {
    write(out, source, |w| w.write_all(bytes))
}

fn temporary_beside(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    out.with_file_name(format!(".{name}.writing-{}-{nanos}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_its_side_files_and_any_database_are_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("room.db");
        let mut db = SQLITE_HEADER.to_vec();
        db.extend_from_slice(&[7u8; 100]);
        fs::write(&log, &db).unwrap();
        fs::write(crate::store::file::sibling(&log, "-wal"), b"wal").unwrap();
        let other = dir.path().join("other.db");
        fs::write(&other, &db).unwrap();
        let link = dir.path().join("alias.csv");
        fs::hard_link(&log, &link).unwrap();
        for (out, says) in [
            (log.clone(), "the log being read"),
            (link.clone(), "the log being read"),
            (crate::store::file::sibling(&log, "-wal"), "the log being read"),
            (other.clone(), "SQLite database"),
            (dir.path().to_path_buf(), "not a plain file"),
        ] {
            let err = write_bytes(&out, Some(&log), b"a,b\n").unwrap_err().to_string();
            assert!(err.contains(says), "{}: {err}", out.display());
        }
        assert_eq!(fs::read(&log).unwrap(), db, "the log is as it was");
        assert_eq!(fs::read(&other).unwrap(), db);
    }

    #[test]
    fn a_report_replaces_a_plain_file_whole_or_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("table.csv");
        fs::write(&out, b"old").unwrap();
        let failed = write(&out, None, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert!(failed.unwrap_err().to_string().contains("nothing was changed"));
        assert_eq!(fs::read(&out).unwrap(), b"old");
        write_bytes(&out, None, b"new").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"new");
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("table.csv")], "no temporary file is left");
    }
}
