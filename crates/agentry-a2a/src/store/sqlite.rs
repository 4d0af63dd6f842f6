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
        /// Its number, in queue order (see `SqliteStore::claims_written`).
        seq: u64,
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

/// Recent claims held in memory: past it, the oldest whose write the writer has answered go
/// (to the table alone).
const RECENT_CLAIMS: usize = if cfg!(test) { 1_000 } else { 100_000 };

/// See [`SqliteStore::recent`]. A claim kept here holds no allocation of its own for a task
/// of this server (its id as a number, the request as its hash): before, each kept the
/// caller's scope and key twice and a copy of the request, and claims left only after a
/// minute, so under load the map grew past its cap (360 MB after 30 s at 15k keys a second)
/// and slowed every claim (docs/BENCHMARKS.md).
struct RecentClaims {
    /// By [`key_id`](super::key_id): the claim, its expiry (Unix ms) and its write's number.
    map: HashMap<u128, (Kept, i64, u64), super::KeyHash>,
    /// Ids in the order claimed, with their write's number.
    order: std::collections::VecDeque<(u128, u64)>,
    /// Keys the table may hold that memory does not: those stored before this process
    /// opened the file, and those that left memory since.
    table: TableKeys,
    /// The number of the last claim queued to be written (from 1; 0: none).
    queued: u64,
}

/// A claim as kept in memory: its task, and the request's fingerprint as a hash (a claim
/// this process made) or as the digest the table holds (one read back from it).
struct Kept {
    task: super::TaskRef,
    fingerprint: super::Fingerprint,
}

impl Kept {
    fn of(claim: &KeyClaim, stored: bool) -> Self {
        Kept {
            task: super::TaskRef::of(&claim.task_id),
            fingerprint: if stored {
                claim.fingerprint.clone()
            } else {
                super::Fingerprint::hashed(claim.fingerprint.hash128())
            },
        }
    }

    fn claim(&self) -> KeyClaim {
        KeyClaim {
            task_id: self.task.id(),
            fingerprint: self.fingerprint.clone(),
        }
    }
}

/// Blocked Bloom filters of key ids: "no" is certain, so a key never seen costs no read of
/// the table (measured: the read was half of what idempotency cost on SQLite); "maybe"
/// reads it. A filter holds a fixed number of keys at ~1% false positives; the next is twice
/// as large, and a filter whose keys have all expired is dropped, so the rate stays low on
/// a server that runs for weeks (one fixed filter had saturated after a few hundred thousand
/// keys, and then every claim read the table).
struct TableKeys {
    filters: Vec<Filter>,
}

struct Filter {
    /// 512-bit blocks (a cache line each): a key's bits all lie in one block.
    blocks: Vec<[u64; 8]>,
    keys: usize,
    capacity: usize,
    /// The latest expiry among its keys (Unix ms).
    until: i64,
}

/// Bits set per key, within its block (12 to 24 bits of filter per key: under 1% false
/// positives).
const BLOOM_BITS: u32 = 7;

impl Filter {
    fn sized(capacity: usize) -> Self {
        let capacity = capacity.max(100_000);
        Filter {
            blocks: vec![[0; 8]; (capacity * 12 / 512).next_power_of_two()],
            keys: 0,
            capacity,
            until: i64::MIN,
        }
    }

    /// The key's block (from its low bits) and its bits in it (nine bits each from its top
    /// 64): ids are already uniform keyed hashes.
    fn bits(&self, id: u128) -> (usize, impl Iterator<Item = usize> + use<>) {
        let block = (id as u64 as usize) & (self.blocks.len() - 1);
        let high = (id >> 64) as u64;
        (
            block,
            (0..BLOOM_BITS).map(move |i| ((high >> (i * 9)) & 511) as usize),
        )
    }

    fn add(&mut self, id: u128) {
        let (b, bits) = self.bits(id);
        for bit in bits {
            self.blocks[b][bit / 64] |= 1 << (bit % 64);
        }
    }

    fn may_hold(&self, id: u128) -> bool {
        let (b, mut bits) = self.bits(id);
        let block = &self.blocks[b];
        bits.all(|bit| block[bit / 64] & (1 << (bit % 64)) != 0)
    }
}

impl TableKeys {
    /// Room for `n` keys in the first filter (at least 100,000).
    fn sized(n: usize) -> Self {
        TableKeys {
            filters: vec![Filter::sized(n)],
        }
    }

    /// Adds a key that expires at `until`; drops the filters whose keys have all expired.
    fn add(&mut self, id: u128, until: i64, now: i64) {
        self.filters.retain(|f| f.until > now);
        if self.filters.last().is_none_or(|f| f.keys >= f.capacity) {
            let capacity = self.filters.last().map_or(0, |f| f.capacity * 2);
            self.filters.push(Filter::sized(capacity));
        }
        if let Some(f) = self.filters.last_mut() {
            f.add(id);
            f.keys += 1;
            f.until = f.until.max(until);
        }
    }

    fn may_hold(&self, id: u128, now: i64) -> bool {
        self.filters.iter().any(|f| f.until > now && f.may_hold(id))
    }
}

impl RecentClaims {
    fn new(table: TableKeys) -> Self {
        RecentClaims {
            map: HashMap::default(),
            order: std::collections::VecDeque::new(),
            table,
            queued: 0,
        }
    }

    fn held(&self, id: u128, now_ms: i64) -> Option<KeyClaim> {
        self.map
            .get(&id)
            .filter(|(_, until, _)| *until > now_ms)
            .map(|(c, _, _)| c.claim())
    }

    /// Keeps `kept` under `id` until `until`; `seq` is its write's number (0: none, it came
    /// from the table). The oldest claims past the cap leave for the table once their write
    /// was answered (`written`: the writer's last, in queue order).
    fn insert(&mut self, id: u128, kept: Kept, until: i64, seq: u64, written: u64, now: i64) {
        while self.order.len() >= RECENT_CLAIMS
            && self.order.front().is_some_and(|&(_, s)| s <= written)
        {
            if let Some((old, s)) = self.order.pop_front()
                && let Some(&(_, old_until, held_seq)) = self.map.get(&old)
                && held_seq == s
            {
                // Its newest claim (a key claimed again is in the order twice).
                self.map.remove(&old);
                self.table.add(old, old_until, now);
            }
        }
        self.order.push_back((id, seq));
        self.map.insert(id, (kept, until, seq));
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
    /// The number of the last claim whose write the writer has answered (committed, or
    /// failed and counted in `write_errors`): claims up to it may leave memory.
    claims_written: Arc<std::sync::atomic::AtomicU64>,
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
             );
             -- The sweep of expired keys (every 1,024 claims) reads only what expired: without
             -- it each sweep scanned the whole table, and a keyed server slowed as it grew.
             CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys (expires_ms);",
        )
        .map_err(backend)?;
        // Files from before tasks had owners (NULL: no owner) or could be parked (0: not).
        add_column(&conn, "owner", "TEXT")?;
        add_column(&conn, "parked", "INTEGER NOT NULL DEFAULT 0")?;
        // The keys claimed before this process, for the filter in front of the table.
        let recent = {
            let now = crate::time::now_unix_millis();
            let mut stmt = conn
                .prepare(
                    "SELECT scope, key, expires_ms FROM idempotency_keys WHERE expires_ms > ?1",
                )
                .map_err(backend)?;
            let ids = stmt
                .query_map([now], |r| {
                    let (scope, key): (String, String) = (r.get(0)?, r.get(1)?);
                    Ok((super::key_id(&scope, &key), r.get::<_, i64>(2)?))
                })
                .map_err(backend)?
                .collect::<Result<Vec<(u128, i64)>, _>>()
                .map_err(backend)?;
            let mut table = TableKeys::sized(ids.len() * 2);
            for (id, until) in ids {
                table.add(id, until, now);
            }
            RecentClaims::new(table)
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
        let claims_written = Arc::new(std::sync::atomic::AtomicU64::new(0));
        std::thread::Builder::new()
            .name("agentry-sqlite-writer".into())
            .spawn({
                let errors = write_errors.clone();
                let written = claims_written.clone();
                move || writer_loop(conn, rx, commits, errors, written)
            })
            .map_err(|e| StoreError::backend("cannot start the writer thread", e))?;
        Ok(SqliteStore {
            writer: tx,
            write_errors,
            claims_written,
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
    claims_written: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while rx.take_blocking(MAX_GROUP, &mut batch) {
        let result = commit_group(&mut conn, &batch);
        // Claims are queued in their numbers' order, so the group's last is its highest.
        if let Some(seq) = batch.iter().rev().find_map(|w| match &w.write {
            Op::Claim { seq, .. } => Some(*seq),
            _ => None,
        }) {
            claims_written.store(seq, std::sync::atomic::Ordering::Release);
        }
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
                        ..
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
            let id = super::key_id(scope, key);
            let may_be_stored = {
                let recent = self.recent();
                if let Some(held) = recent.held(id, now_ms) {
                    return Ok(Some(held));
                }
                // Not claimed in this process lately: maybe before a restart, in the table.
                recent.table.may_hold(id, now_ms)
            };
            let stored = if !may_be_stored {
                None
            } else {
                let (s, k) = (scope.to_owned(), key.to_owned());
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
            let written = self.claims_written.load(Ordering::Acquire);
            let mut recent = self.recent();
            // A claim of this process may have taken it while the table was read.
            if let Some(held) = recent.held(id, now_ms) {
                return Ok(Some(held));
            }
            if let Some((held, until)) = stored {
                recent.insert(id, Kept::of(&held, true), until, 0, written, now_ms);
                return Ok(Some(held));
            }
            recent.queued += 1;
            let seq = recent.queued;
            recent.insert(id, Kept::of(claim, false), expires_ms, seq, written, now_ms);
            // Written behind: queued now, so it commits before anything the request saves
            // (writes keep call order), and a client that was answered has a durable key.
            // Queued under the lock, so claims reach the writer in their numbers' order.
            if seq.is_multiple_of(SWEEP_EVERY) {
                drop(self.write(Op::SweepKeys(now_ms)));
            }
            drop(self.write(Op::Claim {
                scope: scope.to_owned(),
                key: key.to_owned(),
                claim: claim.clone(),
                expires_ms,
                now_ms,
                seq,
            }));
            drop(recent);
            Ok(None)
        })
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.recent().map.remove(&super::key_id(scope, key));
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

    /// The filters never say "no" for a key they hold (that would run a request twice), say
    /// "maybe" for few they do not (each costs one read), stay that way as keys keep coming
    /// (a new filter when one is full), and forget keys once they have all expired.
    #[test]
    fn the_key_filter_has_no_false_negatives_and_few_false_positives() {
        let id = |i: u64| super::super::key_id("scope", &format!("key-{i}"));
        let now = 1_000;
        let mut t = TableKeys::sized(10_000);
        for i in 0..350_000 {
            // The first 100,000 expire at 2,000, the others later.
            t.add(id(i), if i < 100_000 { 2_000 } else { 9_000 }, now);
        }
        assert!(
            t.filters.len() >= 2,
            "a full filter is followed by a larger one"
        );
        assert!((0..350_000).all(|i| t.may_hold(id(i), now)));
        let fp = (1_000_000..1_100_000)
            .filter(|&i| t.may_hold(id(i), now))
            .count();
        assert!(fp < 2_000, "{fp} false positives of 100,000");
        // Past 2,000 the first filter's keys have all expired: it is dropped at the next add.
        t.add(id(2_000_000), 9_000, 2_500);
        assert_eq!(t.filters.iter().filter(|f| f.until <= 2_500).count(), 0);
        assert!((100_000..350_000).all(|i| t.may_hold(id(i), 2_500)));
    }

    /// Claims past the cap leave memory once written, so memory stays bounded under any
    /// rate; a retry of one that left still finds its first task (the filter says "maybe",
    /// the table answers), and a different request under it is still told apart.
    #[tokio::test]
    async fn recent_claims_stay_bounded_and_evicted_keys_are_still_held() {
        use crate::model::{Message, Part, Role};
        let path = std::env::temp_dir().join(format!("agentry-claims-{}.db", crate::new_id()));
        let store = SqliteStore::open(&path).unwrap();
        let until = crate::time::now_unix_millis() + 60_000;
        let request = |i: usize| Message::new(Role::User, vec![Part::text(format!("req {i}"))]);
        let claim = |i: usize| KeyClaim {
            task_id: format!("task-{i}"),
            fingerprint: store.fingerprint(&request(i)),
        };
        let n = RECENT_CLAIMS * 3;
        for i in 0..n {
            let (key, mine) = (format!("k{i}"), claim(i));
            assert_eq!(
                store.claim_key("alice", &key, &mine, until).await.unwrap(),
                None
            );
            if i % 500 == 499 {
                // Writes keep call order: once this save is in, so are the claims before it.
                store
                    .save(&Task::new(format!("t{i}"), "c".into()))
                    .await
                    .unwrap();
            }
        }
        let kept = store.recent().map.len();
        assert!(
            kept <= RECENT_CLAIMS + 500,
            "{kept} claims in memory, cap {RECENT_CLAIMS}"
        );
        for i in [0, 1, RECENT_CLAIMS, n - 1] {
            let (key, again) = (format!("k{i}"), claim(i));
            let held = store.claim_key("alice", &key, &again, until).await.unwrap();
            let held = held.expect("the key is still claimed");
            assert_eq!(held.task_id, format!("task-{i}"));
            assert_eq!(
                held.fingerprint, again.fingerprint,
                "the same request, key {i}"
            );
            assert_ne!(held.fingerprint, store.fingerprint(&request(i + 1)));
        }
        drop(store);
        let _ = std::fs::remove_file(&path);
    }
}
