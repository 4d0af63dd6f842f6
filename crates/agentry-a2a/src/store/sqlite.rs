//! The embedded default store: one SQLite file in WAL mode.
//!
//! Writes go to one writer thread that commits them in groups: every write waiting when a
//! transaction starts joins it, and a task saved again while its save waits is written once
//! ([`super::pending`]: what waits is bounded by the number of tasks).
//! Callers still wait for the commit, so a resolved `save` is on disk (fsynced, by default:
//! see [`Durability`]), while throughput under load comes from amortising each commit over
//! many requests.
//!
//! Checkpoints (copying the WAL into the database file) are where the long tail of a durable
//! answer came from: run by the writer every 8,192 pages, each held up the commits queued
//! behind it (p99 ~24 ms at 64 connections). Now a second connection copies the WAL in PASSIVE
//! mode after commits, at most every 200 ms, beside the writer; the writer still checkpoints
//! every 1,000 pages, but finds nearly everything copied already, so its checkpoint is short,
//! and being the writer it can complete one and let the WAL restart (passive checkpoints alone
//! never catch up with sustained writes: the WAL grew to 2.4 GB in 20 s). Measured: p99 ~6 ms,
//! WAL bounded at ~4 MB, same throughput (docs/BENCHMARKS.md). Reads use a small pool of
//! read-only connections on the blocking thread pool (WAL lets them run beside the writer).

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use super::pending::{self, Coalesce, Queued};
use super::rows::{OutboxRow, outbox_rows, parse_task, to_json};
use super::{BoxFuture, KeyClaim, OutgoingPush, StoreError, TaskPage, TaskQuery, TaskStore};
use crate::model::{PushNotificationConfig, Task};

const MAX_GROUP: usize = 512;
const READERS: usize = 4;

enum Op {
    /// Serialized on the writer thread. A later save of the task supersedes it while it
    /// waits; its notifications (outbox rows) are then written in its place.
    Save(Box<Task>, Vec<OutboxRow>),
    SetPush {
        task_id: String,
        config_id: String,
        body: String,
    },
    DeletePush {
        task_id: String,
        config_id: String,
    },
    Enqueue(Vec<OutboxRow>),
    Ack(String),
    /// Records a claim decided in memory (replacing an expired or released one).
    Claim {
        scope: String,
        key: String,
        claim: KeyClaim,
        expires_ms: i64,
        now_ms: i64,
    },
    Release {
        scope: String,
        key: String,
    },
    /// Deletes every key expired by then.
    SweepKeys(i64),
}

/// Claims between two sweeps of expired idempotency keys.
const SWEEP_EVERY: u64 = 1024;

/// Recent claims held in memory at most, beyond which the oldest go (to the table alone)
/// once their write has long committed.
const RECENT_CLAIMS: usize = 100_000;

/// How old a claim must be before it may leave memory: its queued write committed long ago,
/// so the table answers for it.
const RECENT_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(60);

type ClaimId = (String, String);

/// See [`SqliteStore::recent`].
#[derive(Default)]
struct RecentClaims {
    map: HashMap<ClaimId, (KeyClaim, i64)>,
    order: std::collections::VecDeque<(ClaimId, std::time::Instant)>,
    /// Keys the table may hold that memory does not: those stored before this process
    /// opened the file, and those that left memory since.
    table: TableKeys,
}

/// A Bloom filter of (scope, key) pairs: "no" is certain, so a key never seen costs no
/// read of the table (measured: the read was half of what idempotency cost on SQLite);
/// "maybe" reads it.
struct TableKeys {
    bits: Vec<u64>,
    hasher: std::collections::hash_map::RandomState,
}

/// Hash functions per key (about 1% false positives at 10 bits per key).
const BLOOM_HASHES: u64 = 7;

impl Default for TableKeys {
    fn default() -> Self {
        TableKeys::sized(0)
    }
}

impl TableKeys {
    /// Room for `n` keys at ~10 bits each (at least 100,000 keys' worth, 128 KiB).
    fn sized(n: usize) -> Self {
        let bits = (n.max(100_000) * 10).next_power_of_two();
        TableKeys {
            bits: vec![0; bits / 64],
            hasher: Default::default(),
        }
    }

    fn positions(&self, id: &ClaimId) -> impl Iterator<Item = usize> + use<> {
        use std::hash::BuildHasher;
        let h1 = self.hasher.hash_one((0u8, id));
        let h2 = self.hasher.hash_one((1u8, id)) | 1;
        let mask = (self.bits.len() * 64 - 1) as u64;
        (0..BLOOM_HASHES).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) & mask) as usize)
    }

    fn add(&mut self, id: &ClaimId) {
        for p in self.positions(id) {
            self.bits[p / 64] |= 1 << (p % 64);
        }
    }

    fn may_hold(&self, id: &ClaimId) -> bool {
        self.positions(id)
            .all(|p| self.bits[p / 64] & (1 << (p % 64)) != 0)
    }
}

impl RecentClaims {
    fn held(&self, id: &ClaimId, now_ms: i64) -> Option<KeyClaim> {
        self.map
            .get(id)
            .filter(|(_, until)| *until > now_ms)
            .map(|(c, _)| c.clone())
    }

    fn insert(&mut self, id: ClaimId, claim: KeyClaim, until: i64) {
        while self.order.len() >= RECENT_CLAIMS
            && self
                .order
                .front()
                .is_some_and(|(_, at)| at.elapsed() >= RECENT_MIN_AGE)
        {
            if let Some((old, _)) = self.order.pop_front() {
                self.map.remove(&old);
                self.table.add(&old);
            }
        }
        self.order
            .push_back((id.clone(), std::time::Instant::now()));
        self.map.insert(id, (claim, until));
    }
}

impl Coalesce for Op {
    type Key = String;

    fn key(&self) -> Option<String> {
        match self {
            Op::Save(task, _) => Some(task.id.clone()),
            _ => None,
        }
    }

    fn supersede(&mut self, earlier: Op) -> Option<Op> {
        match earlier {
            Op::Save(_, rows) if !rows.is_empty() => Some(Op::Enqueue(rows)),
            _ => None,
        }
    }
}

/// A write's result on the writer thread: rows changed, or why the group failed (the same
/// message for every caller of a coalesced save).
type Applied = Result<usize, String>;

type Write = Queued<Op, Applied>;

/// A SQLite-backed [`TaskStore`].
pub struct SqliteStore {
    writer: pending::Writes<Op, Applied>,
    /// Writes the writer thread failed to apply.
    write_errors: Arc<std::sync::atomic::AtomicU64>,
    claims: std::sync::atomic::AtomicU64,
    /// The idempotency keys this process claimed lately: claims are decided here (one
    /// process writes a store file), so a claim costs no commit of its own; the table is
    /// read for keys not held here (claimed before a restart) and written behind.
    recent: Mutex<RecentClaims>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: PathBuf,
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::backend("SQLite", e)
}

/// What a resolved save survives: the trade between durability and latency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// The process dying (crash, kill -9, OOM): commits reach the WAL file without an fsync
    /// (`synchronous=NORMAL`); a power loss or kernel crash can take the last commits.
    Process,
    /// The machine losing power too (the default): every group commit is fsynced
    /// (`synchronous=FULL`). Measured no slower here (docs/BENCHMARKS.md): the fsync makes
    /// groups larger; on a disk with slow flushes `Process` trades it for latency.
    #[default]
    Power,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, durable across a power loss.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::default())
    }

    /// Opens (creating if needed) the store at `path` with the given durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::backend(format!("cannot create {}", dir.display()), e))?;
        }
        let conn = Connection::open(&path).map_err(backend)?;
        conn.execute_batch(match durability {
            Durability::Process => "PRAGMA synchronous=NORMAL;",
            Durability::Power => "PRAGMA synchronous=FULL;",
        })
        .map_err(backend)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA busy_timeout=5000;
             PRAGMA wal_autocheckpoint=1000;
             PRAGMA cache_size=-32768;
             CREATE TABLE IF NOT EXISTS tasks (
                 id TEXT PRIMARY KEY,
                 context_id TEXT NOT NULL,
                 state TEXT NOT NULL,
                 body TEXT NOT NULL,
                 updated_at INTEGER NOT NULL DEFAULT (unixepoch()),
                 owner TEXT,
                 parked INTEGER NOT NULL DEFAULT 0
             );
             CREATE TABLE IF NOT EXISTS push_configs (
                 task_id TEXT NOT NULL,
                 config_id TEXT NOT NULL,
                 body TEXT NOT NULL,
                 PRIMARY KEY (task_id, config_id)
             );
             CREATE TABLE IF NOT EXISTS push_outbox (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 id TEXT NOT NULL UNIQUE,
                 task_id TEXT NOT NULL,
                 config TEXT NOT NULL,
                 body BLOB NOT NULL
             );
             CREATE TABLE IF NOT EXISTS idempotency_keys (
                 scope TEXT NOT NULL,
                 key TEXT NOT NULL,
                 task_id TEXT NOT NULL,
                 fingerprint TEXT NOT NULL,
                 expires_ms INTEGER NOT NULL,
                 PRIMARY KEY (scope, key)
             );",
        )
        .map_err(backend)?;
        // Files from before tasks had owners (NULL: no owner) or could be parked (0: not).
        add_column(&conn, "owner", "TEXT")?;
        add_column(&conn, "parked", "INTEGER NOT NULL DEFAULT 0")?;
        // The keys claimed before this process, for the filter in front of the table.
        let recent = {
            let mut stmt = conn
                .prepare("SELECT scope, key FROM idempotency_keys WHERE expires_ms > ?1")
                .map_err(backend)?;
            let ids = stmt
                .query_map([crate::time::now_unix_millis()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(backend)?
                .collect::<Result<Vec<ClaimId>, _>>()
                .map_err(backend)?;
            let mut table = TableKeys::sized(ids.len() * 2);
            for id in &ids {
                table.add(id);
            }
            RecentClaims {
                table,
                ..Default::default()
            }
        };
        let checkpointer = Connection::open(&path).map_err(backend)?;
        checkpointer
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(backend)?;
        let (commits, committed) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("agentry-sqlite-checkpoint".into())
            .spawn(move || checkpoint_loop(checkpointer, committed))
            .map_err(|e| StoreError::backend("cannot start the checkpoint thread", e))?;
        let (tx, rx) = pending::channel();
        let write_errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
        std::thread::Builder::new()
            .name("agentry-sqlite-writer".into())
            .spawn({
                let errors = write_errors.clone();
                move || writer_loop(conn, rx, commits, errors)
            })
            .map_err(|e| StoreError::backend("cannot start the writer thread", e))?;
        Ok(SqliteStore {
            writer: tx,
            write_errors,
            claims: std::sync::atomic::AtomicU64::new(0),
            recent: Mutex::new(recent),
            readers: Arc::new(Mutex::new(Vec::new())),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, RecentClaims> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `op` now (so writes keep the order of the calls) and returns a future that
    /// resolves when its group is committed. Dropping the future does not cancel the write.
    fn write(&self, op: Op) -> impl Future<Output = Result<usize, StoreError>> + Send + 'static {
        let queued = self.writer.push(op);
        async move {
            let Some(rx) = queued else {
                return Err(StoreError::Closed);
            };
            rx.await
                .map_err(|_| StoreError::Closed)?
                .map_err(|msg| StoreError::backend("a group commit failed", msg))
        }
    }

    /// Runs `f` on a pooled read-only connection on the blocking pool.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let pool = self.readers.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let conn = match conn {
                Some(c) => c,
                None => {
                    let c = Connection::open_with_flags(
                        &path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )
                    .map_err(backend)?;
                    c.busy_timeout(std::time::Duration::from_secs(5))
                        .map_err(backend)?;
                    c
                }
            };
            let out = f(&conn);
            let mut p = pool.lock().unwrap_or_else(|p| p.into_inner());
            if p.len() < READERS {
                p.push(conn);
            }
            out
        })
        .await
        .map_err(|e| StoreError::backend("the reader thread failed", e))?
    }
}

/// How often at most the checkpoint thread copies the WAL into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Checkpoints after commits, at most every [`CHECKPOINT_EVERY`], until the writer is gone
/// (then once more, so a closed store leaves a short WAL).
fn checkpoint_loop(conn: Connection, committed: std::sync::mpsc::Receiver<()>) {
    let checkpoint = |mode: &str| {
        if let Err(e) = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(())) {
            tracing::warn!("task store checkpoint failed: {e}");
        }
    };
    while committed.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        // Commits made while this slept are covered by this checkpoint.
        while committed.try_recv().is_ok() {}
        checkpoint("PASSIVE");
    }
    checkpoint("TRUNCATE");
}

fn writer_loop(
    mut conn: Connection,
    rx: pending::Taker<Op, Applied>,
    commits: std::sync::mpsc::SyncSender<()>,
    errors: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while rx.take_blocking(MAX_GROUP, &mut batch) {
        let result = commit_group(&mut conn, &batch);
        // Full means a checkpoint is already due.
        let _ = commits.try_send(());
        for (w, r) in batch.drain(..).zip(result) {
            if let Err(e) = &r {
                tracing::error!("task store write failed: {e}");
                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            w.answer(r);
        }
    }
}

/// Applies a group in one transaction; returns one result per write, in order.
fn commit_group(conn: &mut Connection, batch: &[Write]) -> Vec<Applied> {
    let run = |conn: &mut Connection| -> Result<Vec<usize>, rusqlite::Error> {
        let tx = conn.transaction()?;
        let mut counts = Vec::with_capacity(batch.len());
        {
            let mut save = tx.prepare_cached(
                "INSERT INTO tasks (id, context_id, state, body, updated_at, owner, parked)
                 VALUES (?1, ?2, ?3, ?4, unixepoch(), ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET context_id=excluded.context_id,
                   state=excluded.state, body=excluded.body, updated_at=excluded.updated_at,
                   owner=excluded.owner, parked=excluded.parked",
            )?;
            let mut set_push = tx.prepare_cached(
                "INSERT INTO push_configs (task_id, config_id, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT(task_id, config_id) DO UPDATE SET body=excluded.body",
            )?;
            let mut del_push =
                tx.prepare_cached("DELETE FROM push_configs WHERE task_id=?1 AND config_id=?2")?;
            let mut enqueue = tx.prepare_cached(
                "INSERT OR IGNORE INTO push_outbox (id, task_id, config, body) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut ack = tx.prepare_cached("DELETE FROM push_outbox WHERE id=?1")?;
            let mut expire_key = tx.prepare_cached(
                "DELETE FROM idempotency_keys WHERE scope=?1 AND key=?2 AND expires_ms<=?3",
            )?;
            let mut claim_key = tx.prepare_cached(
                "INSERT INTO idempotency_keys (scope, key, task_id, fingerprint, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(scope, key) DO UPDATE SET task_id=excluded.task_id,
                   fingerprint=excluded.fingerprint, expires_ms=excluded.expires_ms",
            )?;
            let mut release_key =
                tx.prepare_cached("DELETE FROM idempotency_keys WHERE scope=?1 AND key=?2")?;
            for w in batch {
                let n = match &w.write {
                    Op::Save(task, rows) => {
                        for (id, task_id, config, body) in rows {
                            enqueue.execute(params![id, task_id, config, body])?;
                        }
                        let body = serde_json::to_string(task)
                            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                        save.execute(params![
                            task.id,
                            task.context_id,
                            task.state().as_str(),
                            body,
                            task.owner,
                            task.parked
                        ])?
                    }
                    Op::SetPush {
                        task_id,
                        config_id,
                        body,
                    } => set_push.execute(params![task_id, config_id, body])?,
                    Op::DeletePush { task_id, config_id } => {
                        del_push.execute(params![task_id, config_id])?
                    }
                    Op::Enqueue(items) => {
                        let mut n = 0;
                        for (id, task_id, config, body) in items {
                            n += enqueue.execute(params![id, task_id, config, body])?;
                        }
                        n
                    }
                    Op::Ack(id) => ack.execute([id])?,
                    Op::Claim {
                        scope,
                        key,
                        claim,
                        expires_ms,
                        now_ms,
                    } => {
                        expire_key.execute(params![scope, key, now_ms])?;
                        claim_key.execute(params![
                            scope,
                            key,
                            claim.task_id,
                            claim.fingerprint.digest(),
                            expires_ms
                        ])?
                    }
                    Op::Release { scope, key } => release_key.execute(params![scope, key])?,
                    Op::SweepKeys(now_ms) => tx.execute(
                        "DELETE FROM idempotency_keys WHERE expires_ms<=?1",
                        [now_ms],
                    )?,
                };
                counts.push(n);
            }
        }
        tx.commit()?;
        Ok(counts)
    };
    match run(conn) {
        Ok(counts) => counts.into_iter().map(Ok).collect(),
        Err(e) => {
            let msg = e.to_string();
            batch.iter().map(|_| Err(msg.clone())).collect()
        }
    }
}

/// Adds `column` to `tasks` in a file made before it existed.
fn add_column(conn: &Connection, column: &str, decl: &str) -> Result<(), StoreError> {
    if conn
        .prepare(&format!("SELECT {column} FROM tasks LIMIT 0"))
        .is_err()
    {
        conn.execute_batch(&format!("ALTER TABLE tasks ADD COLUMN {column} {decl}"))
            .map_err(backend)?;
    }
    Ok(())
}

impl TaskStore for SqliteStore {
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        let id = id.to_owned();
        Box::pin(self.read(move |c| {
            let row: Option<(String, Option<String>, bool)> = c
                .prepare_cached("SELECT body, owner, parked FROM tasks WHERE id=?1")
                .and_then(|mut s| {
                    s.query_row([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()
                })
                .map_err(backend)?;
            row.map(|(body, owner, parked)| parse_task(&id, &body, owner, parked))
                .transpose()
        }))
    }

    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.write(Op::Save(Box::new(task.clone()), Vec::new()));
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn pending_writes(&self) -> Option<usize> {
        Some(self.writer.len())
    }

    fn write_errors(&self) -> Option<u64> {
        Some(self.write_errors.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn count_by_state(&self) -> BoxFuture<'_, Result<Option<super::StateCounts>, StoreError>> {
        Box::pin(self.read(|c| {
            let mut stmt = c
                .prepare_cached("SELECT state, count(*) FROM tasks GROUP BY state")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(backend)?;
            let mut out = Vec::new();
            for row in rows {
                let (state, n) = row.map_err(backend)?;
                if let Some(s) = crate::model::TaskState::ALL
                    .into_iter()
                    .find(|s| s.as_str() == state)
                {
                    out.push((s, n.max(0) as u64));
                }
            }
            Ok(Some(out))
        }))
    }

    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>> {
        let q = query.clone();
        Box::pin(self.read(move |c| {
            // The filters are optional: a NULL parameter turns its condition off.
            const WHERE: &str =
                "WHERE (?1 IS NULL OR context_id = ?1) AND (?2 IS NULL OR state = ?2)
                 AND (?3 IS NULL OR json_extract(body, '$.status.timestamp') > ?3)
                 AND owner IS ?6";
            // ?4 and ?5 (limit, offset) are the page's; the count binds them unused.
            let args = params![
                q.context_id,
                q.state.map(|s| s.as_str()),
                q.status_after,
                None::<i64>,
                None::<i64>,
                q.owner
            ];
            let total: i64 = c
                .prepare_cached(&format!("SELECT count(*) FROM tasks {WHERE}"))
                .and_then(|mut s| s.query_row(args, |r| r.get(0)))
                .map_err(backend)?;
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT id, body, owner, parked FROM tasks {WHERE}
                     ORDER BY json_extract(body, '$.status.timestamp') DESC, id DESC
                     LIMIT ?4 OFFSET ?5"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map(
                    params![
                        q.context_id,
                        q.state.map(|s| s.as_str()),
                        q.status_after,
                        i64::try_from(q.limit).unwrap_or(i64::MAX),
                        // Past the end rather than wrapped to a negative (first-page) offset.
                        i64::try_from(q.offset).unwrap_or(i64::MAX),
                        q.owner
                    ],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, bool>(3)?,
                        ))
                    },
                )
                .map_err(backend)?;
            let mut tasks = Vec::new();
            for row in rows {
                let (id, body, owner, parked) = row.map_err(backend)?;
                tasks.push(parse_task(&id, &body, owner, parked)?);
            }
            Ok(TaskPage {
                tasks,
                total: total.max(0) as usize,
            })
        }))
    }

    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let body = match to_json(config) {
            Ok(b) => b,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let done = self.write(Op::SetPush {
            task_id: task_id.to_owned(),
            config_id: config.id.clone().unwrap_or_else(|| task_id.to_owned()),
            body,
        });
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn list_push<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PushNotificationConfig>, StoreError>> {
        let task_id = task_id.to_owned();
        Box::pin(self.read(move |c| {
            let mut s = c
                .prepare_cached("SELECT body FROM push_configs WHERE task_id=?1 ORDER BY rowid")
                .map_err(backend)?;
            let rows = s
                .query_map([&task_id], |r| r.get::<_, String>(0))
                .map_err(backend)?;
            let mut out = Vec::new();
            for body in rows {
                let body = body.map_err(backend)?;
                out.push(
                    serde_json::from_str(&body)
                        .map_err(|e| StoreError::corrupt("push config", e))?,
                );
            }
            Ok(out)
        }))
    }

    fn delete_push<'a>(
        &'a self,
        task_id: &'a str,
        config_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let done = self.write(Op::DeletePush {
            task_id: task_id.to_owned(),
            config_id: config_id.to_owned(),
        });
        Box::pin(async move { done.await.map(|n| n > 0) })
    }

    fn enqueue_pushes<'a>(
        &'a self,
        items: &'a [OutgoingPush],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let rows = match outbox_rows(items) {
            Ok(rows) => rows,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let done = self.write(Op::Enqueue(rows));
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn save_with_pushes<'a>(
        &'a self,
        task: &'a Task,
        pushes: &'a [OutgoingPush],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let rows = match outbox_rows(pushes) {
            Ok(rows) => rows,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let done = self.write(Op::Save(Box::new(task.clone()), rows));
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn pending_pushes(&self) -> BoxFuture<'_, Result<Vec<OutgoingPush>, StoreError>> {
        Box::pin(self.read(|c| {
            let mut s = c
                .prepare_cached("SELECT id, task_id, config, body FROM push_outbox ORDER BY seq")
                .map_err(backend)?;
            let rows = s
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Vec<u8>>(3)?,
                    ))
                })
                .map_err(backend)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, task_id, config, body) = row.map_err(backend)?;
                let config = serde_json::from_str(&config)
                    .map_err(|e| StoreError::corrupt(format!("push outbox entry {id}"), e))?;
                out.push(OutgoingPush {
                    id,
                    task_id,
                    config,
                    body,
                });
            }
            Ok(out)
        }))
    }

    fn ack_push<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.write(Op::Ack(id.to_owned()));
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        claim: &'a KeyClaim,
        expires_ms: i64,
    ) -> BoxFuture<'a, Result<Option<KeyClaim>, StoreError>> {
        use std::sync::atomic::Ordering;
        Box::pin(async move {
            let now_ms = crate::time::now_unix_millis();
            let id = (scope.to_owned(), key.to_owned());
            if let Some(held) = self.recent().held(&id, now_ms) {
                return Ok(Some(held));
            }
            // Not claimed in this process lately: maybe before a restart, in the table.
            let (s, k) = id.clone();
            let may_be_stored = self.recent().table.may_hold(&id);
            let stored = if !may_be_stored {
                None
            } else {
                self.read(move |c| {
                    c.query_row(
                        "SELECT task_id, fingerprint, expires_ms FROM idempotency_keys
                         WHERE scope=?1 AND key=?2 AND expires_ms>?3",
                        params![s, k, now_ms],
                        |r| {
                            Ok((
                                KeyClaim {
                                    task_id: r.get(0)?,
                                    fingerprint: r.get::<_, String>(1)?.into(),
                                },
                                r.get::<_, i64>(2)?,
                            ))
                        },
                    )
                    .optional()
                    .map_err(backend)
                })
                .await?
            };
            let mut recent = self.recent();
            // A claim of this process may have taken it while the table was read.
            if let Some(held) = recent.held(&id, now_ms) {
                return Ok(Some(held));
            }
            if let Some((held, until)) = stored {
                recent.insert(id, held.clone(), until);
                return Ok(Some(held));
            }
            recent.insert(id, claim.clone(), expires_ms);
            drop(recent);
            // Written behind: queued now, so it commits before anything the request saves
            // (writes keep call order), and a client that was answered has a durable key.
            if self.claims.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
                drop(self.write(Op::SweepKeys(now_ms)));
            }
            drop(self.write(Op::Claim {
                scope: scope.to_owned(),
                key: key.to_owned(),
                claim: claim.clone(),
                expires_ms,
                now_ms,
            }));
            Ok(None)
        })
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.recent()
            .map
            .remove(&(scope.to_owned(), key.to_owned()));
        let done = self.write(Op::Release {
            scope: scope.to_owned(),
            key: key.to_owned(),
        });
        Box::pin(async move { done.await.map(|_| ()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter never says "no" for a key it holds (that would run a request twice), and
    /// says "maybe" for few it does not (each costs one read).
    #[test]
    fn the_key_filter_has_no_false_negatives_and_few_false_positives() {
        let mut t = TableKeys::sized(10_000);
        let id = |i: usize| ("scope".to_owned(), format!("key-{i}"));
        for i in 0..10_000 {
            t.add(&id(i));
        }
        assert!((0..10_000).all(|i| t.may_hold(&id(i))));
        let false_positives = (10_000..20_000).filter(|&i| t.may_hold(&id(i))).count();
        assert!(false_positives < 200, "{false_positives} of 10,000");
    }
}
