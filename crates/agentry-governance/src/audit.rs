//! The audit trail: an append-only SQLite log of authorization decisions, tokens issued,
//! delegations and side-effecting tool calls.
//!
//! Each record carries the MAC of the record before it and its own MAC (HMAC-SHA256 under a
//! key kept outside the database), so that a record edited, deleted, moved or inserted
//! breaks the chain at that record, and nobody without the key can rebuild the chain after
//! changing it. A truncated tail leaves a valid shorter chain: the log also writes its head
//! (sequence number and MAC of the last record) to a file beside the database after every
//! commit, and `verify` compares the two. An attacker who can write both files and read the
//! key defeats any local scheme: keep the key elsewhere (`AuditKey::Hex`, from a secret
//! store), and record the head elsewhere now and then (`agentry audit head`), then
//! `verify_against` it.
//!
//! Appends go to one writer thread that commits what has queued up in one transaction (one
//! fsync for many records), so auditing every request costs little.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

/// Why the audit log could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The database could not be opened, written or read.
    #[error("audit database {path}: {source}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The key or head file could not be read or written.
    #[error("audit file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A batch of appends failed to commit (each caller of the batch gets this).
    #[error("audit database {path}: append failed: {message}")]
    Append {
        /// The database file.
        path: PathBuf,
        /// The commit's error.
        message: String,
    },
    /// The key is not 32 bytes of hex.
    #[error("audit key {0}: not 64 hex digits")]
    BadKey(String),
    /// The log was changed after it was written.
    #[error(transparent)]
    Tampered(#[from] Tampered),
    /// The writer thread is gone (the process is shutting down).
    #[error("the audit log is closed")]
    Closed,
    /// Another backend's store (PostgreSQL) failed.
    #[error("audit store {store}: {source}")]
    Backend {
        /// Where the log is kept (host, port and database; never a password).
        store: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where audit records go: the SQLite [`AuditLog`] of one machine, or a log several replicas
/// share (`agentry_postgres::PgAuditLog`). What a server needs to record its decisions.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Appends `event`; resolves with its sequence number once it is committed.
    fn append(&self, event: Event) -> BoxFuture<'_, Result<u64, AuditError>>;
    /// Queues `event` in order and returns before it is committed (see
    /// [`AuditLog::enqueue`]).
    fn enqueue(&self, event: Event) -> BoxFuture<'_, Result<(), AuditError>>;
}

/// A boxed future, for the object-safe [`AuditSink`].
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl AuditSink for AuditLog {
    fn append(&self, event: Event) -> BoxFuture<'_, Result<u64, AuditError>> {
        Box::pin(AuditLog::append(self, event))
    }

    fn enqueue(&self, event: Event) -> BoxFuture<'_, Result<(), AuditError>> {
        Box::pin(AuditLog::enqueue(self, event))
    }
}

/// Where the log was found changed: the first record that does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit log tampered at record {seq}: {why}")]
pub struct Tampered {
    /// The sequence number of the first record that fails (for a truncation: the first
    /// missing one).
    pub seq: u64,
    /// What failed.
    pub why: String,
}

impl Tampered {
    /// The head recorded elsewhere earlier (`seq`) is no longer in the log as it was: the
    /// log was cut short (and its own head rolled back) or rewritten.
    pub fn not_the_kept_head(seq: u64) -> Self {
        Tampered {
            seq,
            why: format!("record {seq} is not the one recorded as the head earlier"),
        }
    }
}

/// What happened, as the caller reports it; the log adds the sequence number, the time and
/// the chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// What kind of event: `authz`, `token`, `delegation`, `tool`, ...
    pub kind: String,
    /// Who acted (a principal: `jwt:<sub>`, `api-key:<digest>`, an agent's name).
    pub actor: String,
    /// On whose behalf (the user at the start of a delegation chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// The agent asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The skill or tool asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The A2A task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The id shared by every task of one user request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The caller's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The outcome: `allow`, `deny`, `issued`, `ok`, `error`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// How long the audited operation took, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
    /// Anything else worth keeping (a reason, the scopes granted), as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

impl Event {
    /// An event of `kind` by `actor`.
    pub fn new(kind: impl Into<String>, actor: impl Into<String>) -> Self {
        Event {
            kind: kind.into(),
            actor: actor.into(),
            ..Event::default()
        }
    }
    /// On whose behalf `actor` acted.
    pub fn on_behalf_of(mut self, who: impl Into<String>) -> Self {
        self.on_behalf_of = Some(who.into());
        self
    }
    /// The agent asked.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }
    /// The skill or tool.
    pub fn skill(mut self, skill: impl Into<String>) -> Self {
        self.skill = Some(skill.into());
        self
    }
    /// The task.
    pub fn task(mut self, id: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self
    }
    /// The correlation id.
    pub fn correlation(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
    /// The idempotency key.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
    /// The outcome.
    pub fn decision(mut self, decision: impl Into<String>) -> Self {
        self.decision = Some(decision.into());
        self
    }
    /// How long it took.
    pub fn latency(mut self, took: std::time::Duration) -> Self {
        self.latency_us = Some(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
        self
    }
    /// Extra detail.
    pub fn detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = detail;
        self
    }
}

/// An event as stored: numbered, timed and chained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// 1, 2, 3, ... with no gaps.
    pub seq: u64,
    /// When it was appended, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
    /// The MAC of the record before (64 zeros for the first).
    pub prev: String,
    /// This record's MAC, over all of the above.
    pub mac: String,
}

/// Where the chain's key comes from.
#[derive(Debug, Clone)]
pub enum AuditKey {
    /// A file holding 64 hex digits, created (mode 0600) with a random key when missing.
    File(PathBuf),
    /// The key itself, as 64 hex digits (from a secret store or an environment variable).
    Hex(String),
}

/// The result of a verification that found nothing wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many records were checked.
    pub records: u64,
    /// The last record's sequence number and MAC (what `agentry audit head` prints).
    pub head: Option<(u64, String)>,
}

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How many queued appends one transaction takes at most.
const BATCH: usize = 512;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    on_behalf_of TEXT,
    agent TEXT,
    skill TEXT,
    task_id TEXT,
    correlation_id TEXT,
    idempotency_key TEXT,
    decision TEXT,
    latency_us INTEGER,
    detail TEXT NOT NULL,
    prev TEXT NOT NULL,
    mac TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_correlation ON audit(correlation_id);
-- Append-only for everyone who goes through SQLite's front door; whoever drops these is
-- caught by the chain.
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

type Reply = oneshot::Sender<Result<u64, AuditError>>;

/// The audit log. Cheap to share (`Arc` it); appends from any task go to one writer thread.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    key: [u8; 32],
    /// `None` only while dropping: closing it ends the writer, which is then joined.
    tx: Option<mpsc::Sender<(Event, Reply)>>,
    /// Why the last commit failed, if it did: [`AuditLog::enqueue`] refuses from then on
    /// (nobody waits for a queued record's commit to hear of it).
    failed: Arc<Mutex<Option<String>>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for AuditLog {
    /// Waits for the writer to commit what is queued and close the database, so that a log
    /// dropped is a log on disk.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl AuditLog {
    /// Opens (or creates) the log at `path`, its key in `<path>.key` beside it. See
    /// [`AuditLog::open_with`] to keep the key elsewhere.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let key = AuditKey::File(sibling(path, "key"));
        Self::open_with(path, key)
    }

    /// Opens (or creates) the log at `path` with `key`. Refuses a log whose tail does not
    /// match its head file (it was truncated or rewritten): appending to it would bury the
    /// evidence.
    pub fn open_with(path: &Path, key: AuditKey) -> Result<Self, AuditError> {
        let key = chain_key(&key)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| AuditError::File {
                path: dir.to_owned(),
                source,
            })?;
        }
        let db = |source| AuditError::Db {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open(path).map_err(db)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=30000;",
        )
        .map_err(db)?;
        conn.execute_batch(SCHEMA).map_err(db)?;
        let last: Option<(u64, String)> = conn
            .query_row(
                "SELECT seq, mac FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db)?;
        check_head(&conn, path, last.as_ref().map(|(s, _)| *s))?;
        let (tx, rx) = mpsc::channel(4096);
        let failed = Arc::new(Mutex::new(None));
        let writer = Writer {
            failed: failed.clone(),
            conn,
            path: path.to_owned(),
            key,
            last: last.unwrap_or((0, GENESIS.to_owned())),
        };
        let writer = std::thread::Builder::new()
            .name("agentry-audit".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| AuditError::File {
                path: path.to_owned(),
                source,
            })?;
        Ok(AuditLog {
            path: path.to_owned(),
            key,
            tx: Some(tx),
            failed,
            writer: Some(writer),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `event`; resolves with its sequence number once it is committed (fsynced).
    pub async fn append(&self, event: Event) -> Result<u64, AuditError> {
        let (reply, done) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(AuditError::Closed)?;
        tx.send((event, reply))
            .await
            .map_err(|_| AuditError::Closed)?;
        done.await.map_err(|_| AuditError::Closed)?
    }

    /// Queues `event` and returns once it is in the writer's queue, in order, before it is
    /// committed (within milliseconds under load): a crash can lose what is queued, not
    /// reorder or alter it. For servers that cannot afford a durable commit per request;
    /// once a commit has failed, every later call is refused.
    pub async fn enqueue(&self, event: Event) -> Result<(), AuditError> {
        if let Some(message) = self.failed.lock().ok().and_then(|f| f.clone()) {
            return Err(AuditError::Append {
                path: self.path.clone(),
                message,
            });
        }
        let (reply, _ignored) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(AuditError::Closed)?;
        tx.send((event, reply))
            .await
            .map_err(|_| AuditError::Closed)
    }

    /// Checks every record and the head file; the first record that fails is the error.
    /// Blocking (reads the whole log): call it from a blocking context.
    pub fn verify(&self) -> Result<Verified, AuditError> {
        verify_file(&self.path, &self.key, None)
    }

    /// As [`verify`](Self::verify), and also that the log still holds the head recorded
    /// elsewhere earlier (`seq` and its MAC): a truncation to before it is caught even when
    /// the head file was rolled back too.
    pub fn verify_against(&self, seq: u64, mac: &str) -> Result<Verified, AuditError> {
        verify_file(&self.path, &self.key, Some((seq, mac)))
    }

    /// The records of one correlation id (one user request, every hop), in order.
    pub fn by_correlation(&self, id: &str) -> Result<Vec<Record>, AuditError> {
        self.select("WHERE correlation_id = ?1 ORDER BY seq", params![id])
    }

    /// Up to `limit` records from `from` on, in order.
    pub fn records(&self, from: u64, limit: u64) -> Result<Vec<Record>, AuditError> {
        self.select(
            "WHERE seq >= ?1 ORDER BY seq LIMIT ?2",
            params![from, limit],
        )
    }

    fn select(&self, tail: &str, args: impl rusqlite::Params) -> Result<Vec<Record>, AuditError> {
        let db = |source| AuditError::Db {
            path: self.path.clone(),
            source,
        };
        let conn = read_only(&self.path)?;
        let mut stmt = conn
            .prepare(&format!("SELECT {COLUMNS} FROM audit {tail}"))
            .map_err(db)?;
        let rows = stmt.query_map(args, row_to_record).map_err(db)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db)
    }
}

const COLUMNS: &str = "seq, at_ms, kind, actor, on_behalf_of, agent, skill, task_id, \
                       correlation_id, idempotency_key, decision, latency_us, detail, prev, mac";

fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    let (mut record, detail) = stored_row(r)?;
    // A detail that is not JSON any more was tampered with; `verify` says so, the readers
    // show it as a string.
    record.event.detail =
        serde_json::from_str(&detail).unwrap_or(serde_json::Value::String(detail));
    Ok(record)
}

/// A row of [`COLUMNS`] as stored: the record without its detail, and the detail's text
/// (what the MAC covers).
fn stored_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Record, String)> {
    let record = Record {
        seq: r.get(0)?,
        at_ms: r.get(1)?,
        event: Event {
            kind: r.get(2)?,
            actor: r.get(3)?,
            on_behalf_of: r.get(4)?,
            agent: r.get(5)?,
            skill: r.get(6)?,
            task_id: r.get(7)?,
            correlation_id: r.get(8)?,
            idempotency_key: r.get(9)?,
            decision: r.get(10)?,
            latency_us: r.get(11)?,
            detail: serde_json::Value::Null,
        },
        prev: r.get(13)?,
        mac: r.get(14)?,
    };
    Ok((record, r.get(12)?))
}

/// The bytes a record's MAC covers: every stored field, in a fixed order, as one JSON array
/// (the detail as its stored text, so that nothing is re-serialized differently).
fn mac_input(seq: u64, at_ms: i64, e: &Event, detail: &str, prev: &str) -> Vec<u8> {
    // A tuple serializes as the same JSON array as the values listed, without copying them.
    serde_json::to_vec(&(
        seq,
        at_ms,
        &e.kind,
        &e.actor,
        &e.on_behalf_of,
        &e.agent,
        &e.skill,
        &e.task_id,
        &e.correlation_id,
        &e.idempotency_key,
        &e.decision,
        e.latency_us,
        detail,
        prev,
    ))
    .unwrap_or_default()
}

/// HMAC-SHA256 (RFC 2104), in lower-case hex.
fn hmac_hex(key: &[u8; 32], msg: &[u8]) -> String {
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    let outer = Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize();
    hex(&outer)
}

/// Lower-case hex (on the append path: no formatting machinery per byte).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

fn parse_key(hex_key: &str, origin: &str) -> Result<[u8; 32], AuditError> {
    let s = hex_key.trim();
    let bad = || AuditError::BadKey(origin.to_owned());
    if s.len() != 64 || !s.is_ascii() {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(key)
}

/// The 32-byte key `key` names (a key file is created, mode 0600, when missing).
pub fn chain_key(key: &AuditKey) -> Result<[u8; 32], AuditError> {
    match key {
        AuditKey::Hex(h) => parse_key(h, "(given)"),
        AuditKey::File(path) => {
            let io = |source| AuditError::File {
                path: path.clone(),
                source,
            };
            match std::fs::read_to_string(path) {
                Ok(text) => parse_key(&text, &path.display().to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let mut key = [0u8; 32];
                    getrandom::fill(&mut key)
                        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir).map_err(io)?;
                    }
                    let mut opts = std::fs::OpenOptions::new();
                    opts.write(true).create_new(true);
                    #[cfg(unix)]
                    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
                    let mut f = opts.open(path).map_err(io)?;
                    std::io::Write::write_all(&mut f, format!("{}\n", hex(&key)).as_bytes())
                        .map_err(io)?;
                    f.sync_all().map_err(io)?;
                    Ok(key)
                }
                Err(e) => Err(io(e)),
            }
        }
    }
}

fn sibling(path: &Path, ext: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{ext}"));
    path.with_file_name(name)
}

fn read_only(path: &Path) -> Result<Connection, AuditError> {
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| AuditError::Db {
        path: path.to_owned(),
        source,
    })?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(30));
    Ok(conn)
}

/// The head file's `seq mac`, if there is one.
fn read_head(db: &Path) -> Result<Option<(u64, String)>, AuditError> {
    let path = sibling(db, "head");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mut it = text.split_whitespace();
            match (it.next().and_then(|s| s.parse().ok()), it.next()) {
                (Some(seq), Some(mac)) => Ok(Some((seq, mac.to_owned()))),
                _ => Err(Tampered {
                    seq: 0,
                    why: format!("the head file {} is unreadable", path.display()),
                }
                .into()),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AuditError::File { path, source }),
    }
}

/// The head file against the database's last record, at open.
fn check_head(conn: &Connection, db: &Path, last: Option<u64>) -> Result<(), AuditError> {
    let Some((seq, mac)) = read_head(db)? else {
        if let Some(last) = last {
            // Records and no head: the head file was deleted.
            return Err(Tampered {
                seq: last,
                why: "the head file is missing".into(),
            }
            .into());
        }
        return Ok(());
    };
    let at: Option<String> = conn
        .query_row("SELECT mac FROM audit WHERE seq = ?1", [seq], |r| r.get(0))
        .optional()
        .map_err(|source| AuditError::Db {
            path: db.to_owned(),
            source,
        })?;
    match at {
        // The head may trail the last record (a crash between the commit and the head's
        // write); it may not name a record that is gone or changed.
        Some(m) if m == mac => Ok(()),
        Some(_) => Err(Tampered {
            seq,
            why: "the record the head names was changed".into(),
        }
        .into()),
        None => Err(Tampered {
            seq: last.map_or(1, |l| l + 1),
            why: format!(
                "the log ends at record {} but its head names record {seq}: truncated",
                last.unwrap_or(0)
            ),
        }
        .into()),
    }
}

fn verify_file(
    path: &Path,
    key: &[u8; 32],
    expected: Option<(u64, &str)>,
) -> Result<Verified, AuditError> {
    let db = |source| AuditError::Db {
        path: path.to_owned(),
        source,
    };
    let conn = read_only(path)?;
    let mut stmt = conn
        .prepare(&format!("SELECT {COLUMNS} FROM audit ORDER BY seq"))
        .map_err(db)?;
    let rows = stmt
        .query_map([], stored_row)
        .map_err(db)?
        .map(|r| r.map_err(db));
    let last = verify_chain(key, rows)?;
    let count = last.as_ref().map_or(0, |(s, _)| *s);
    check_head(&conn, path, last.as_ref().map(|(s, _)| *s))?;
    if let Some((seq, mac)) = expected {
        let ok = conn
            .query_row("SELECT mac FROM audit WHERE seq = ?1", [seq], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(db)?
            .is_some_and(|m| m == mac);
        if !ok {
            return Err(Tampered::not_the_kept_head(seq).into());
        }
    }
    Ok(Verified {
        records: count,
        head: last,
    })
}

/// Checks a log's records, read in sequence order as stored (each with its detail's stored
/// text): numbered 1, 2, 3, ... without gaps, each naming the one before, each MAC right.
/// The last record's sequence number and MAC when all pass, `None` for an empty log; the
/// first record that fails is the error. Any backend's `verify` runs its rows through this
/// (or through [`ChainCheck`], a page at a time).
pub fn verify_chain<E>(
    key: &[u8; 32],
    rows: impl IntoIterator<Item = Result<(Record, String), E>>,
) -> Result<Option<(u64, String)>, E>
where
    E: From<Tampered>,
{
    let mut check = ChainCheck::new(key);
    for row in rows {
        let (record, detail) = row?;
        check.next(&record, &detail)?;
    }
    Ok(check.last())
}

/// [`verify_chain`] one record at a time, for a backend that reads a long log in pages.
#[derive(Debug)]
pub struct ChainCheck<'k> {
    key: &'k [u8; 32],
    prev: String,
    count: u64,
}

impl<'k> ChainCheck<'k> {
    /// A check of a log from its first record.
    pub fn new(key: &'k [u8; 32]) -> Self {
        ChainCheck {
            key,
            prev: GENESIS.to_owned(),
            count: 0,
        }
    }

    /// Checks the next record (with its detail's stored text).
    pub fn next(&mut self, record: &Record, detail: &str) -> Result<(), Tampered> {
        let expected_seq = self.count + 1;
        let seq = record.seq;
        if seq != expected_seq {
            return Err(Tampered {
                seq: expected_seq,
                why: format!("record {expected_seq} is missing (the next is {seq})"),
            });
        }
        if record.prev != self.prev {
            return Err(Tampered {
                seq,
                why: "it does not follow the record before it (moved, or one was removed)".into(),
            });
        }
        if seal(
            self.key,
            seq,
            record.at_ms,
            &record.event,
            detail,
            &self.prev,
        ) != record.mac
        {
            return Err(Tampered {
                seq,
                why: "its contents do not match its MAC (edited)".into(),
            });
        }
        self.prev.clone_from(&record.mac);
        self.count = seq;
        Ok(())
    }

    /// The last record checked (its sequence number and MAC); `None` before the first.
    pub fn last(&self) -> Option<(u64, String)> {
        (self.count > 0).then(|| (self.count, self.prev.clone()))
    }
}

/// A record's MAC: HMAC-SHA256 under `key` over every stored field (the detail as its
/// stored text) and the MAC of the record before, in lower-case hex.
pub fn seal(key: &[u8; 32], seq: u64, at_ms: i64, e: &Event, detail: &str, prev: &str) -> String {
    hmac_hex(key, &mac_input(seq, at_ms, e, detail, prev))
}

/// The one writer: numbers, chains and commits queued events in batches.
struct Writer {
    failed: Arc<Mutex<Option<String>>>,
    conn: Connection,
    path: PathBuf,
    key: [u8; 32],
    last: (u64, String),
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<(Event, Reply)>) {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let before = self.last.clone();
            match self.commit(&batch) {
                Ok(seqs) => {
                    for ((_, reply), seq) in batch.drain(..).zip(seqs) {
                        let _ = reply.send(Ok(seq));
                    }
                }
                Err(e) => {
                    self.last = before;
                    let why = e.to_string();
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(why.clone());
                    }
                    for (_, reply) in batch.drain(..) {
                        let _ = reply.send(Err(AuditError::Append {
                            path: self.path.clone(),
                            message: why.clone(),
                        }));
                    }
                }
            }
        }
    }

    fn commit(&mut self, batch: &[(Event, Reply)]) -> Result<Vec<u64>, AuditError> {
        let db = |source| AuditError::Db {
            path: self.path.clone(),
            source,
        };
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let tx = self.conn.transaction().map_err(db)?;
        let mut seqs = Vec::with_capacity(batch.len());
        {
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO audit ({COLUMNS}) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
                ))
                .map_err(db)?;
            for (e, _) in batch {
                let seq = self.last.0 + 1;
                let detail = e.detail.to_string();
                let mac = seal(&self.key, seq, at_ms, e, &detail, &self.last.1);
                insert
                    .execute(params![
                        seq,
                        at_ms,
                        e.kind,
                        e.actor,
                        e.on_behalf_of,
                        e.agent,
                        e.skill,
                        e.task_id,
                        e.correlation_id,
                        e.idempotency_key,
                        e.decision,
                        e.latency_us,
                        detail,
                        self.last.1,
                        mac
                    ])
                    .map_err(db)?;
                self.last = (seq, mac);
                seqs.push(seq);
            }
        }
        tx.commit().map_err(db)?;
        self.write_head()?;
        Ok(seqs)
    }

    /// Replaces the head file atomically (a crash leaves the old or the new one).
    fn write_head(&self) -> Result<(), AuditError> {
        let head = sibling(&self.path, "head");
        let tmp = sibling(&self.path, "head.tmp");
        let io = |source| AuditError::File {
            path: head.clone(),
            source,
        };
        std::fs::write(&tmp, format!("{} {}\n", self.last.0, self.last.1)).map_err(io)?;
        std::fs::rename(&tmp, &head).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against Python's `hmac.new(bytes(range(32)), b"agentry", "sha256").hexdigest()`.
    #[test]
    fn hmac_matches_an_independent_implementation() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        assert_eq!(
            hmac_hex(&key, b"agentry"),
            "55edca13eed06a336976e7e95fc3c2d6bb87dff8b124d8c8276c02b0a7815f7c"
        );
    }
}
