//! The audit trail on PostgreSQL ([`PgAuditLog`]): the same HMAC-chained records as the
//! SQLite [`agentry_governance::AuditLog`], in one chain every replica appends to.
//!
//! Each replica's appends go to one task with a connection of its own, which commits what
//! has queued up in one transaction: it locks the chain's head row (`SELECT .. FOR UPDATE`:
//! replicas append one batch at a time, so the chain has no fork), numbers and seals the
//! batch after the head, inserts it, and moves the head, all in one commit. The records'
//! table refuses `UPDATE`, `DELETE` and `TRUNCATE` (triggers); whoever drops the triggers or
//! edits the rows directly is caught by [`PgAuditLog::verify`], which checks every record's
//! MAC and link and that the head row names the last record. The head lives in the same
//! database, so someone who can rewrite both the tail and the head (and knows nothing of the
//! key) can cut the log short unnoticed: record the head elsewhere now and then and check
//! with [`PgAuditLog::verify_against`], as for the SQLite log.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agentry_governance::audit::AuditKey;
//! use agentry_governance::{AuditSink, Event};
//! let db = agentry_postgres::Database::connect("postgres://agentry@db.internal/agentry").await?;
//! let log = agentry_postgres::PgAuditLog::open(&db, "agentry", &AuditKey::Hex("00".repeat(32)))?;
//! log.append(Event::new("authz", "jwt:ada").agent("mail").decision("allow")).await?;
//! assert!(log.verify().await?.records >= 1);
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};

use agentry_governance::audit::{AuditKey, BoxFuture, ChainCheck, GENESIS, seal};
use agentry_governance::{AuditError, AuditSink, Event, Record, Tampered, Verified};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::{Database, DbError, conn};

/// How many queued appends one transaction takes at most.
const BATCH: usize = 512;

/// Records read at a time by `verify` (a long chain is never held in memory at once).
const VERIFY_PAGE: i64 = 5_000;

const COLUMNS: &str = "seq, at_ms, kind, actor, on_behalf_of, agent, skill, task_id, \
                       correlation_id, idempotency_key, decision, latency_us, detail, prev, mac";

type Reply = oneshot::Sender<Result<u64, AuditError>>;

/// The audit trail in a PostgreSQL database, shared by the replicas that name the same
/// chain and hold the same key. Cheap to share (`Arc` it).
pub struct PgAuditLog {
    db: Database,
    chain: String,
    key: [u8; 32],
    tx: mpsc::Sender<(Event, Reply)>,
    /// Why the last commit failed, until one succeeds: [`PgAuditLog::enqueue`] refuses
    /// meanwhile (nobody waits for a queued record's commit to hear of it).
    failed: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for PgAuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgAuditLog")
            .field("target", &self.db.target())
            .field("chain", &self.chain)
            .finish_non_exhaustive()
    }
}

impl PgAuditLog {
    /// The chain named `chain` in `db` (its tables are made by the database's migrations),
    /// sealed with `key`: every replica appending to one chain needs the same key, so keep it
    /// in a secret store ([`AuditKey::Hex`]) or a file they all read. Starts this process's
    /// writer; must be called within a Tokio runtime.
    pub fn open(db: &Database, chain: &str, key: &AuditKey) -> Result<PgAuditLog, AuditError> {
        let key = agentry_governance::audit::chain_key(key)?;
        let (tx, rx) = mpsc::channel(4096);
        let failed = Arc::new(Mutex::new(None));
        tokio::spawn(
            Writer {
                db: db.clone(),
                chain: chain.to_owned(),
                key,
                failed: failed.clone(),
                client: None,
                sent: None,
            }
            .run(rx),
        );
        Ok(PgAuditLog {
            db: db.clone(),
            chain: chain.to_owned(),
            key,
            tx,
            failed,
        })
    }

    /// Appends `event`; resolves with its sequence number once it is committed.
    pub async fn append(&self, event: Event) -> Result<u64, AuditError> {
        let (reply, done) = oneshot::channel();
        self.tx
            .send((event, reply))
            .await
            .map_err(|_| AuditError::Closed)?;
        done.await.map_err(|_| AuditError::Closed)?
    }

    /// Queues `event` in order and returns before it is committed: a crash may lose what
    /// is queued, not reorder or alter it. Refused while the last commit failed.
    pub async fn enqueue(&self, event: Event) -> Result<(), AuditError> {
        if let Some(why) = self.failed.lock().ok().and_then(|f| f.clone()) {
            return Err(backend(&self.db, std::io::Error::other(why)));
        }
        let (reply, _ignored) = oneshot::channel();
        self.tx
            .send((event, reply))
            .await
            .map_err(|_| AuditError::Closed)
    }

    /// Checks every record of the chain and that its head row names the last one; the first
    /// record that fails is the error.
    pub async fn verify(&self) -> Result<Verified, AuditError> {
        self.verify_inner(None).await
    }

    /// As [`verify`](Self::verify), and also that the chain still holds the head recorded
    /// elsewhere earlier (`seq` and its MAC): a truncation to before it is caught even when
    /// the head row was rolled back too.
    pub async fn verify_against(&self, seq: u64, mac: &str) -> Result<Verified, AuditError> {
        self.verify_inner(Some((seq, mac))).await
    }

    /// The records of one correlation id (one user request, every hop), in order.
    pub async fn by_correlation(&self, id: &str) -> Result<Vec<Record>, AuditError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM agentry_audit WHERE chain = $1 AND correlation_id = $2 \
             ORDER BY seq"
        );
        let rows = self.query(&sql, &[&self.chain, &id]).await?;
        Ok(rows.into_iter().map(with_detail).collect())
    }

    /// Up to `limit` records from `from` on, in order.
    pub async fn records(&self, from: u64, limit: u64) -> Result<Vec<Record>, AuditError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM agentry_audit WHERE chain = $1 AND seq >= $2 \
             ORDER BY seq LIMIT $3"
        );
        let (from, limit) = (
            i64::try_from(from).unwrap_or(i64::MAX),
            i64::try_from(limit).unwrap_or(i64::MAX),
        );
        let rows = self.query(&sql, &[&self.chain, &from, &limit]).await?;
        Ok(rows.into_iter().map(with_detail).collect())
    }

    async fn verify_inner(&self, expected: Option<(u64, &str)>) -> Result<Verified, AuditError> {
        let failed = |e: tokio_postgres::Error| backend(&self.db, e);
        // One snapshot for the head and every record, on a connection of its own (a
        // transaction cannot share a pooled reader): replicas appending meanwhile are not
        // seen, instead of a head that names records the check has not read.
        let mut client = conn::open(&self.db.inner.at)
            .await
            .map_err(|e| backend(&self.db, e))?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(failed)?;
        let head: Option<(i64, String)> = tx
            .query_opt(
                "SELECT seq, mac FROM agentry_audit_head WHERE chain = $1",
                &[&self.chain],
            )
            .await
            .map_err(failed)?
            .map(|r| (r.get(0), r.get(1)));
        let page_sql = format!(
            "SELECT {COLUMNS} FROM agentry_audit WHERE chain = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3"
        );
        let page = tx.prepare(&page_sql).await.map_err(failed)?;
        let mut check = ChainCheck::new(&self.key);
        let mut kept_held = false;
        let mut after = 0i64;
        loop {
            let rows = tx
                .query(&page, &[&self.chain, &after, &VERIFY_PAGE])
                .await
                .map_err(failed)?;
            for row in &rows {
                let (record, detail) = stored_row(row);
                if let Some((seq, mac)) = expected {
                    kept_held |= record.seq == seq && record.mac == mac;
                }
                check.next(&record, &detail)?;
                after = i64::try_from(record.seq).unwrap_or(i64::MAX);
            }
            if rows.len() < VERIFY_PAGE as usize {
                break;
            }
        }
        tx.commit().await.map_err(failed)?;
        let kept = expected.map(|(seq, _)| (seq, kept_held));
        let last = check.last();
        let head = head.filter(|(seq, _)| *seq > 0);
        let count = last.as_ref().map_or(0, |(s, _)| *s);
        match (&head, &last) {
            (None, None) => {}
            (Some((seq, mac)), Some((last_seq, last_mac)))
                if u64::try_from(*seq).ok() == Some(*last_seq) && mac == last_mac => {}
            (Some((seq, _)), _) if u64::try_from(*seq).unwrap_or(0) > count => {
                return Err(Tampered {
                    seq: count + 1,
                    why: format!(
                        "the log ends at record {count} but its head names record {seq}: truncated"
                    ),
                }
                .into());
            }
            (Some((seq, _)), _) => {
                return Err(Tampered {
                    seq: u64::try_from(*seq).unwrap_or(0),
                    why: "the head does not name the last record (records added or changed)".into(),
                }
                .into());
            }
            (None, Some((last_seq, _))) => {
                return Err(Tampered {
                    seq: *last_seq,
                    why: "the head row is missing".into(),
                }
                .into());
            }
        }
        if let Some((seq, false)) = kept {
            return Err(Tampered::not_the_kept_head(seq).into());
        }
        Ok(Verified {
            records: count,
            head: last,
        })
    }

    /// Rows of the chain as stored (each record with its detail's text).
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<(Record, String)>, AuditError> {
        self.db
            .read(|c| async move {
                Ok(c.client
                    .query(sql, params)
                    .await?
                    .iter()
                    .map(stored_row)
                    .collect())
            })
            .await
            .map_err(|e| backend(&self.db, e))
    }
}

impl AuditSink for PgAuditLog {
    fn append(&self, event: Event) -> BoxFuture<'_, Result<u64, AuditError>> {
        Box::pin(PgAuditLog::append(self, event))
    }

    fn enqueue(&self, event: Event) -> BoxFuture<'_, Result<(), AuditError>> {
        Box::pin(PgAuditLog::enqueue(self, event))
    }
}

fn backend(db: &Database, e: impl std::error::Error + Send + Sync + 'static) -> AuditError {
    AuditError::Backend {
        store: db.target().to_owned(),
        source: Box::new(e),
    }
}

/// A row of [`COLUMNS`]: the record without its detail, and the detail's stored text (what
/// the MAC covers).
fn stored_row(r: &tokio_postgres::Row) -> (Record, String) {
    let seq: i64 = r.get(0);
    let latency: Option<i64> = r.get(11);
    let mut event = Event::new(r.get::<_, String>(2), r.get::<_, String>(3));
    event.on_behalf_of = r.get(4);
    event.agent = r.get(5);
    event.skill = r.get(6);
    event.task_id = r.get(7);
    event.correlation_id = r.get(8);
    event.idempotency_key = r.get(9);
    event.decision = r.get(10);
    event.latency_us = latency.and_then(|l| u64::try_from(l).ok());
    let record = Record {
        seq: u64::try_from(seq).unwrap_or(0),
        at_ms: r.get(1),
        event,
        prev: r.get(13),
        mac: r.get(14),
    };
    (record, r.get(12))
}

/// The record with its detail parsed (a detail that is not JSON any more was tampered with;
/// `verify` says so, the readers show it as a string).
fn with_detail((mut record, detail): (Record, String)) -> Record {
    record.event.detail =
        serde_json::from_str(&detail).unwrap_or(serde_json::Value::String(detail));
    record
}

/// This process's one writer: numbers, seals and commits queued events in batches, after
/// the chain's head as the database holds it (other replicas append too).
struct Writer {
    db: Database,
    chain: String,
    key: [u8; 32],
    failed: Arc<Mutex<Option<String>>>,
    client: Option<Client>,
    /// The batch whose COMMIT was sent last, unanswered: its first seq and the head it
    /// leaves (seq, MAC). A connection lost after the server committed but before its answer
    /// arrived looks like a failure; the retry finds this head and does not append the batch
    /// twice.
    sent: Option<(i64, i64, String)>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<(Event, Reply)>) {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.recv().await {
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let events: Vec<&Event> = batch.iter().map(|(e, _)| e).collect();
            // A connection lost before or during the commit: once more on a new one (a
            // transaction lost before its COMMIT committed nothing; one whose COMMIT the
            // server took is recognized by the head it left, see `sent`).
            let mut result = self.commit(&events).await;
            if result.is_err() && self.client.as_ref().is_none_or(Client::is_closed) {
                self.client = None;
                result = self.commit(&events).await;
            }
            // Only a retry of the same batch may find its own head.
            self.sent = None;
            match result {
                Ok(first_seq) => {
                    if let Ok(mut f) = self.failed.lock() {
                        *f = None;
                    }
                    for (i, (_, reply)) in batch.drain(..).enumerate() {
                        let _ = reply.send(Ok(first_seq + i as u64));
                    }
                }
                Err(e) => {
                    let why = e.to_string();
                    tracing::warn!("audit records not committed to {}: {why}", self.db.target());
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(why.clone());
                    }
                    for (_, reply) in batch.drain(..) {
                        let _ =
                            reply.send(Err(backend(&self.db, std::io::Error::other(why.clone()))));
                    }
                }
            }
        }
    }

    /// Appends `events` after the chain's head in one transaction; the first one's seq.
    async fn commit(&mut self, events: &[&Event]) -> Result<u64, DbError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = Some(conn::open(&self.db.inner.at).await?);
        }
        let Some(client) = self.client.as_mut() else {
            return Err(DbError::other("no connection"));
        };
        let tx = client.transaction().await?;
        tx.execute(
            "INSERT INTO agentry_audit_head (chain, seq, mac) VALUES ($1, 0, $2)
             ON CONFLICT (chain) DO NOTHING",
            &[&self.chain, &GENESIS],
        )
        .await?;
        let head = tx
            .query_one(
                "SELECT seq, mac FROM agentry_audit_head WHERE chain = $1 FOR UPDATE",
                &[&self.chain],
            )
            .await?;
        let (mut seq, mut prev): (i64, String) = (head.get(0), head.get(1));
        if let Some((first, at, mac)) = self.sent.take()
            && at == seq
            && mac == prev
        {
            // The MAC covers the batch's records and everything before: this head is the
            // one that batch committed.
            tx.commit().await?;
            return Ok(u64::try_from(first).unwrap_or(0));
        }
        let first = seq + 1;
        let at_ms = agentry_a2a::time::now_unix_millis();
        let insert = tx
            .prepare(&format!(
                "INSERT INTO agentry_audit (chain, {COLUMNS}) VALUES \
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
            ))
            .await?;
        let mut rows = Vec::with_capacity(events.len());
        for e in events {
            seq += 1;
            let detail = e.detail.to_string();
            let mac = seal(
                &self.key,
                u64::try_from(seq).unwrap_or(0),
                at_ms,
                e,
                &detail,
                &prev,
            );
            let latency = e.latency_us.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
            rows.push((seq, latency, detail, prev, mac.clone()));
            prev = mac;
        }
        // Sent together: the driver pipelines them on the connection.
        type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);
        let params: Vec<[Param<'_>; 16]> = events
            .iter()
            .zip(&rows)
            .map(
                |(e, (seq, latency, detail, prev, mac))| -> [Param<'_>; 16] {
                    [
                        &self.chain,
                        seq,
                        &at_ms,
                        &e.kind,
                        &e.actor,
                        &e.on_behalf_of,
                        &e.agent,
                        &e.skill,
                        &e.task_id,
                        &e.correlation_id,
                        &e.idempotency_key,
                        &e.decision,
                        latency,
                        detail,
                        prev,
                        mac,
                    ]
                },
            )
            .collect();
        let sent = params.iter().map(|p| tx.execute(&insert, p));
        futures_util::future::try_join_all(sent).await?;
        tx.execute(
            "UPDATE agentry_audit_head SET seq = $2, mac = $3 WHERE chain = $1",
            &[&self.chain, &seq, &prev],
        )
        .await?;
        self.sent = Some((first, seq, prev.clone()));
        tx.commit().await?;
        self.sent = None;
        Ok(u64::try_from(first).unwrap_or(0))
    }
}
