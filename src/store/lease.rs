//! The engine lease: one row that says which process owns this database.
//! Exactly one engine writes a log; a second `gpuroom` on the same file finds
//! the lease held and attaches as a console instead of starting an engine.
//!
//! A holder on this host is checked, not presumed: while its process lives
//! (the same process: a reused pid started later than the holder did) the
//! lease is its own, however long its heartbeat has been silent (a long
//! resume, a slow disk); once it is gone the next engine takes over at once
//! and resumes the run from the log. Only a holder that cannot be checked
//! (another host) is judged by its heartbeat, which it refreshes in every
//! batch and from a thread between batches (`host::Heartbeat`). Taking the lease is one `BEGIN IMMEDIATE` transaction, so
//! two engines starting at once cannot both win. A holder that finds its row
//! changed (it was presumed dead and replaced) stops: it never writes again.
//!
//! Owns the lease SQL. The clock and the liveness check are passed in.

use rusqlite::{OptionalExtension, params};

use super::db::{Store, StoreError};

/// A lease whose heartbeat is older than this is stale even if its process
/// cannot be checked (another host, or a pid reused).
pub const LEASE_TIMEOUT_MS: i64 = 15_000;

/// Which engine process holds (or wants) the lease.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseHolder {
    pub pid: u32,
    pub host: String,
    /// When this process started, so a reused pid is not mistaken for it.
    pub started_ms: i64,
}

impl std::fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} on {}", self.pid, self.host)
    }
}

/// The lease as the database holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub holder: LeaseHolder,
    pub heartbeat_ms: i64,
}

/// What can be known of a holder's process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// It runs on this host (and is the process that took the lease).
    Alive,
    /// It is gone from this host (or its pid now belongs to another process).
    Dead,
    /// It cannot be checked from here (another host).
    Unknown,
}

impl Lease {
    /// Whether its holder should be presumed dead at `now_ms`.
    pub fn is_stale(&self, now_ms: i64, alive: &dyn Fn(&LeaseHolder) -> Liveness) -> bool {
        match alive(&self.holder) {
            Liveness::Alive => false,
            Liveness::Dead => true,
            Liveness::Unknown => now_ms - self.heartbeat_ms > LEASE_TIMEOUT_MS,
        }
    }
}

/// How the lease was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Nobody held it (a new log, or one whose engine released it cleanly).
    Free,
    /// Its holder was gone: this engine takes over its run.
    TakenOver(Lease),
}

/// Refreshes the holder's heartbeat; changes nothing if another holds the lease.
const REFRESH: &str = "UPDATE lease SET heartbeat_ms = ?1 WHERE id = 1 AND pid = ?2 AND host = ?3 AND started_ms = ?4";

fn refresh(conn: &rusqlite::Connection, me: &LeaseHolder, now_ms: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached(REFRESH).and_then(|mut stmt| stmt.execute(params![now_ms, me.pid, me.host, me.started_ms]))
}

/// A connection of its own that only refreshes a holder's heartbeat, for a
/// thread that beats while the engine's connection is busy elsewhere.
pub struct LeaseBeat {
    conn: rusqlite::Connection,
}

impl LeaseBeat {
    pub fn open(path: &std::path::Path) -> Result<LeaseBeat, StoreError> {
        let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| Store::wrap(path, e))?;
        // Waits out an engine batch (bounded well below this).
        conn.busy_timeout(std::time::Duration::from_secs(2)).map_err(|e| Store::wrap(path, e))?;
        Ok(LeaseBeat { conn })
    }

    /// A holder that lost its lease learns it in its next batch; this only refreshes.
    pub fn beat(&self, me: &LeaseHolder, now_ms: i64) {
        let _ = refresh(&self.conn, me, now_ms);
    }
}

fn read_lease(conn: &rusqlite::Connection) -> rusqlite::Result<Option<Lease>> {
    conn.query_row("SELECT pid, host, started_ms, heartbeat_ms FROM lease WHERE id = 1", [], |r| {
        Ok(Lease { holder: LeaseHolder { pid: r.get(0)?, host: r.get(1)?, started_ms: r.get(2)? }, heartbeat_ms: r.get(3)? })
    })
    .optional()
}

impl Store {
    /// Creates a new log (see `Store::create_with`) with `me` holding its
    /// lease from the moment it exists, so an engine racing to create the
    /// same log finds it complete and owned.
    pub fn create_leased(path: &std::path::Path, meta: &super::RunMeta, access: &super::Access, me: &LeaseHolder, now_ms: i64) -> Result<Store, StoreError> {
        Store::create_with(path, meta, access, &|conn| {
            conn.execute(
                "INSERT INTO lease (id, pid, host, started_ms, heartbeat_ms) VALUES (1, ?1, ?2, ?3, ?4)",
                params![me.pid, me.host, me.started_ms, now_ms],
            )
            .map(|_| ())
        })
    }

    /// Who holds this log's lease, if anyone.
    pub fn lease(&self) -> Result<Option<Lease>, StoreError> {
        read_lease(&self.conn).map_err(|e| self.sql_err(e))
    }

    /// Takes the lease for `me`, or says who holds it (`StoreError::Leased`).
    pub fn acquire_lease(&mut self, me: &LeaseHolder, now_ms: i64, alive: &dyn Fn(&LeaseHolder) -> Liveness) -> Result<Acquired, StoreError> {
        if self.in_tx {
            return Err(StoreError::Format { path: self.path.display().to_string(), message: "the lease is taken outside a batch".into() });
        }
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.sql_err(e))?;
        let outcome = (|| {
            let current = read_lease(&self.conn).map_err(|e| self.sql_err(e))?;
            let acquired = match current {
                None => Acquired::Free,
                Some(lease) if lease.holder == *me => Acquired::Free,
                Some(lease) if lease.is_stale(now_ms, alive) => Acquired::TakenOver(lease),
                Some(lease) => return Err(StoreError::Leased { path: self.path.display().to_string(), holder: lease.holder.to_string() }),
            };
            self.conn
                .execute(
                    "INSERT OR REPLACE INTO lease (id, pid, host, started_ms, heartbeat_ms) VALUES (1, ?1, ?2, ?3, ?4)",
                    params![me.pid, me.host, me.started_ms, now_ms],
                )
                .map_err(|e| self.sql_err(e))?;
            Ok(acquired)
        })();
        let end = if outcome.is_ok() { "COMMIT" } else { "ROLLBACK" };
        self.conn.execute_batch(end).map_err(|e| self.sql_err(e))?;
        outcome
    }

    /// Refreshes the lease (inside the open batch). Fails if another engine
    /// took it over: the caller must stop writing.
    pub fn heartbeat(&mut self, me: &LeaseHolder, now_ms: i64) -> Result<(), StoreError> {
        let updated = refresh(&self.conn, me, now_ms).map_err(|e| self.sql_err(e))?;
        if updated == 1 {
            return Ok(());
        }
        let holder = self.lease()?.map_or_else(|| "nobody".to_string(), |l| l.holder.to_string());
        Err(StoreError::Leased { path: self.path.display().to_string(), holder: format!("{holder} (this engine lost its lease)") })
    }

    /// Gives the lease up on a clean shutdown, so the next start needs no takeover.
    pub fn release_lease(&mut self, me: &LeaseHolder) -> Result<(), StoreError> {
        self.commit()?;
        self.conn
            .execute("DELETE FROM lease WHERE id = 1 AND pid = ?1 AND host = ?2 AND started_ms = ?3", params![me.pid, me.host, me.started_ms])
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::room::RoomConfig;
    use crate::store::RunMeta;

    fn store(dir: &tempfile::TempDir) -> Store {
        let meta = RunMeta { room_config: RoomConfig::default(), source: "test".into(), created_with: "test".into(), world: None };
        Store::create(&dir.path().join("log.db"), &meta).unwrap()
    }

    fn holder(pid: u32) -> LeaseHolder {
        LeaseHolder { pid, host: "head".into(), started_ms: 1_000 }
    }

    #[test]
    fn a_live_holder_keeps_the_lease_and_a_dead_or_silent_one_loses_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(&dir);
        let alive = |_: &LeaseHolder| Liveness::Unknown;
        assert_eq!(s.acquire_lease(&holder(1), 10_000, &alive).unwrap(), Acquired::Free);
        let err = s.acquire_lease(&holder(2), 12_000, &alive).unwrap_err();
        assert!(err.to_string().contains("pid 1 on head"), "{err}");
        // The holder's process is gone: taken over at once.
        let dead = |h: &LeaseHolder| if h.pid == 1 { Liveness::Dead } else { Liveness::Alive };
        let Acquired::TakenOver(old) = s.acquire_lease(&holder(2), 12_000, &dead).unwrap() else { panic!("not taken over") };
        assert_eq!(old.holder, holder(1));
        // The old holder may not write any more.
        assert!(s.heartbeat(&holder(1), 13_000).unwrap_err().to_string().contains("lost its lease"));
        s.heartbeat(&holder(2), 13_000).unwrap();
        // Silent for longer than the timeout and not checkable: presumed dead.
        assert!(matches!(s.acquire_lease(&holder(3), 13_000 + LEASE_TIMEOUT_MS + 1, &alive).unwrap(), Acquired::TakenOver(_)));
        s.release_lease(&holder(3)).unwrap();
        assert_eq!(s.lease().unwrap(), None);
        assert_eq!(s.acquire_lease(&holder(4), 20_000, &alive).unwrap(), Acquired::Free);
    }

    /// Issue 22, item 1: a live holder on this host inside a long batch or
    /// resume (heartbeat minutes old) was taken over, and then exited.
    #[test]
    fn a_live_local_holder_is_never_taken_over_however_silent() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(&dir);
        let local_alive = |h: &LeaseHolder| if h.pid == 1 { Liveness::Alive } else { Liveness::Unknown };
        s.acquire_lease(&holder(1), 0, &local_alive).unwrap();
        let an_hour_later = 3_600_000;
        let err = s.acquire_lease(&holder(2), an_hour_later, &local_alive).unwrap_err();
        assert!(matches!(err, StoreError::Leased { .. }), "{err}");
        s.heartbeat(&holder(1), an_hour_later).unwrap();
    }
}
