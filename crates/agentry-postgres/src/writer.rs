//! The writer: one connection applying every write of a process in call order, in groups.
//!
//! Whatever is queued when a transaction starts joins it (up to [`MAX_GROUP`]), so one
//! commit serves many requests under load and one request alone waits for one round trip
//! more than a bare statement. A task saved again while its save waits is written once
//! ([`agentry_a2a::store::pending`]), so what waits is bounded by the number of tasks. A
//! group that fails is applied again write by write, each in its own transaction, so one bad
//! write (or a deadlock with another replica's group) fails only itself; a group cut off by
//! a lost connection is applied again on a new one.

use std::sync::Arc;

use agentry_a2a::model::Task;
use agentry_a2a::store::KeyClaim;
use agentry_a2a::store::pending::{self, Coalesce, Queued};
use agentry_a2a::store::rows::OutboxRow;

use crate::DbError;
use crate::conn::{self, Conn, Endpoint};

/// Writes in one transaction at most.
const MAX_GROUP: usize = 256;

/// One write; `ns` is the agent it belongs to.
pub(crate) enum Op {
    /// A later save of the task supersedes it while it waits; its notifications are then
    /// written in its place. `running`: a turn runs (the replica holds the task).
    Save {
        ns: Arc<str>,
        task: TaskRow,
        body: String,
        pushes: Vec<OutboxRow>,
        running: bool,
    },
    /// Holds a stored task for this replica's turn, unless another live replica holds it.
    TakeTurn {
        ns: Arc<str>,
        task_id: String,
    },
    /// Renews this replica's holds (on tasks and pending notifications).
    Heartbeat,
    SetPush {
        ns: Arc<str>,
        task_id: String,
        config_id: String,
        body: String,
    },
    DeletePush {
        ns: Arc<str>,
        task_id: String,
        config_id: String,
    },
    Enqueue {
        ns: Arc<str>,
        rows: Vec<OutboxRow>,
    },
    Ack {
        ns: Arc<str>,
        id: String,
    },
    Claim {
        ns: Arc<str>,
        scope: String,
        key: String,
        claim: KeyClaim,
        expires_ms: i64,
        now_ms: i64,
    },
    Release {
        ns: Arc<str>,
        scope: String,
        key: String,
    },
    /// Deletes every idempotency key (of every agent) expired by then.
    SweepKeys(i64),
    PutCheckpoint {
        ns: Arc<str>,
        key: String,
        body: String,
    },
    DeleteCheckpoint {
        ns: Arc<str>,
        key: String,
    },
}

/// The columns of a task's row beside its body: what a queued save keeps of the task (not
/// a copy of it: under load many saves wait in the queue, each with the task's JSON).
pub(crate) struct TaskRow {
    pub(crate) id: String,
    pub(crate) context_id: String,
    pub(crate) state: &'static str,
    /// The status timestamp normalized to UTC milliseconds, for listing.
    pub(crate) status_ts: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) parked: bool,
    pub(crate) queued: bool,
}

impl TaskRow {
    pub(crate) fn of(task: &Task) -> TaskRow {
        TaskRow {
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            state: task.state().as_str(),
            status_ts: task
                .status
                .timestamp
                .as_deref()
                .map(agentry_a2a::time::normalize),
            owner: task.owner.clone(),
            parked: task.parked,
            queued: task.queued,
        }
    }
}

impl Coalesce for Op {
    type Key = (Arc<str>, String);

    fn key(&self) -> Option<Self::Key> {
        match self {
            Op::Save { ns, task, .. } => Some((ns.clone(), task.id.clone())),
            _ => None,
        }
    }

    fn supersede(&mut self, earlier: Op) -> Option<Op> {
        match earlier {
            Op::Save { ns, pushes, .. } if !pushes.is_empty() => {
                Some(Op::Enqueue { ns, rows: pushes })
            }
            _ => None,
        }
    }
}

/// What a write did.
#[derive(Debug, Clone)]
pub(crate) enum Done {
    /// Rows changed.
    Rows(u64),
    /// A claim: `None` when it took the key, else the claim that holds it.
    Claim(Option<KeyClaim>),
    /// A claim whose statement saw neither (the holder committed after the statement's
    /// snapshot): asked again before the group's results are given. Never leaves `commit`.
    Undecided,
}

/// A write's result, as every caller waiting for it hears it.
pub(crate) type Applied = Result<Done, DbError>;

/// A write taken from the queue, with its callers.
pub(crate) type Write = Queued<Op, Applied>;

/// This replica's holds on the tasks it runs.
#[derive(Clone)]
pub(crate) struct Lease {
    /// This replica, as the `holder` column names it.
    pub(crate) me: Arc<str>,
    /// How long a hold lasts unless renewed.
    pub(crate) seconds: f64,
}

/// Applies queued writes until every sender is gone.
pub(crate) async fn run(
    at: Endpoint,
    first: Conn,
    lease: Lease,
    rx: pending::Taker<Op, Applied>,
    errors: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut conn = Some(first);
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while rx.take(MAX_GROUP, &mut batch).await {
        let results = apply(&at, &mut conn, &lease, &batch).await;
        for (w, r) in batch.drain(..).zip(results) {
            if let Err(e) = &r {
                tracing::error!("PostgreSQL write failed: {e}");
                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            w.answer(r);
        }
    }
}

/// The writer's connection, made again when there is none or it was lost.
async fn ready<'c>(at: &Endpoint, conn: &'c mut Option<Conn>) -> Result<&'c mut Conn, DbError> {
    if conn.as_ref().is_some_and(|c| c.client.is_closed()) {
        *conn = None;
    }
    if conn.is_none() {
        *conn = Some(conn::prepare(conn::open(at).await?).await?);
    }
    conn.as_mut()
        .ok_or_else(|| DbError::other("the writer's connection was not made"))
}

/// One result per write of `batch`, in order.
async fn apply(
    at: &Endpoint,
    conn: &mut Option<Conn>,
    lease: &Lease,
    batch: &[Write],
) -> Vec<Applied> {
    let fail = |e: DbError| batch.iter().map(|_| Err(e.clone())).collect::<Vec<_>>();
    for attempt in 0..2 {
        let c = match ready(at, conn).await {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        match commit(c, lease, batch).await {
            Ok(done) => return done.into_iter().map(Ok).collect(),
            Err(e) if attempt == 0 && e.inner().is_some_and(|pg| conn::lost(&c.client, pg)) => {
                tracing::warn!(
                    "PostgreSQL writer connection lost ({e}); applying {} write(s) again",
                    batch.len()
                );
                *conn = None;
            }
            Err(e) if batch.len() > 1 => {
                tracing::debug!("a group of {} writes failed ({e}); one by one", batch.len());
                let mut out = Vec::with_capacity(batch.len());
                for w in batch {
                    let r = match ready(at, conn).await {
                        Ok(c) => {
                            commit(c, lease, std::slice::from_ref(w))
                                .await
                                .and_then(|mut d| {
                                    d.pop()
                                        .ok_or_else(|| DbError::other("a write gave no result"))
                                })
                        }
                        Err(e) => Err(e),
                    };
                    out.push(r);
                }
                return out;
            }
            Err(e) => return fail(e),
        }
    }
    fail(DbError::other("the connection was lost twice"))
}

/// A statement's result, in the order it was sent.
type Pending<'t> =
    std::pin::Pin<Box<dyn Future<Output = Result<Done, tokio_postgres::Error>> + Send + 't>>;

/// Applies `batch` in one transaction. Every statement is sent before any answer is awaited
/// (tokio-postgres sends a request when its future is first polled, and `join_all` polls them
/// in order), so a group costs about one round trip, not one per write; the server runs them
/// in order.
async fn commit(c: &mut Conn, lease: &Lease, batch: &[Write]) -> Result<Vec<Done>, DbError> {
    let me = &*lease.me;
    let s = &c.s;
    let txn = c.client.transaction().await?;
    let tx = &txn;
    // One entry per write: how many of the pending statements are its own.
    let mut owned: Vec<usize> = Vec::with_capacity(batch.len());
    let mut pending: Vec<Pending<'_>> = Vec::with_capacity(batch.len() + 8);
    for w in batch {
        let before = pending.len();
        match &w.write {
            Op::Save {
                ns,
                task,
                body,
                pushes,
                running,
            } => {
                for (id, task_id, config, push) in pushes {
                    pending.push(Box::pin(async move {
                        tx.execute(
                            &s.enqueue,
                            &[&&**ns, id, task_id, config, push, &me, &lease.seconds],
                        )
                        .await
                        .map(Done::Rows)
                    }));
                }
                let holder = running.then_some(me);
                let queued = *running && task.queued;
                pending.push(Box::pin(async move {
                    tx.execute(
                        &s.save,
                        &[
                            &&**ns,
                            &task.id,
                            &task.context_id,
                            &task.state,
                            &task.status_ts,
                            &task.owner,
                            &task.parked,
                            body,
                            &holder,
                            &lease.seconds,
                            &me,
                            &queued,
                        ],
                    )
                    .await
                    .map(Done::Rows)
                }));
            }
            Op::TakeTurn { ns, task_id } => pending.push(Box::pin(async move {
                tx.execute(&s.take_turn, &[&&**ns, task_id, &me, &lease.seconds])
                    .await
                    .map(Done::Rows)
            })),
            Op::Heartbeat => {
                pending.push(Box::pin(async move {
                    tx.execute(&s.renew_pushes, &[&me, &lease.seconds])
                        .await
                        .map(Done::Rows)
                }));
                pending.push(Box::pin(async move {
                    tx.execute(&s.heartbeat, &[&me, &lease.seconds])
                        .await
                        .map(Done::Rows)
                }));
            }
            Op::SetPush {
                ns,
                task_id,
                config_id,
                body,
            } => pending.push(Box::pin(async move {
                tx.execute(&s.set_push, &[&&**ns, task_id, config_id, body])
                    .await
                    .map(Done::Rows)
            })),
            Op::DeletePush {
                ns,
                task_id,
                config_id,
            } => pending.push(Box::pin(async move {
                tx.execute(&s.delete_push, &[&&**ns, task_id, config_id])
                    .await
                    .map(Done::Rows)
            })),
            Op::Enqueue { ns, rows } => {
                for (id, task_id, config, body) in rows {
                    pending.push(Box::pin(async move {
                        tx.execute(
                            &s.enqueue,
                            &[&&**ns, id, task_id, config, body, &me, &lease.seconds],
                        )
                        .await
                        .map(Done::Rows)
                    }));
                }
            }
            Op::Ack { ns, id } => pending.push(Box::pin(async move {
                tx.execute(&s.ack, &[&&**ns, id]).await.map(Done::Rows)
            })),
            Op::Claim { .. } => pending.push(Box::pin(async move {
                let row = claim_row(tx, s, &w.write).await?;
                Ok(match row {
                    Some(r) => Done::Claim(claimed(&r)?),
                    None => Done::Undecided,
                })
            })),
            Op::Release { ns, scope, key } => pending.push(Box::pin(async move {
                tx.execute(&s.release, &[&&**ns, scope, key])
                    .await
                    .map(Done::Rows)
            })),
            Op::SweepKeys(now_ms) => pending.push(Box::pin(async move {
                tx.execute(&s.sweep, &[now_ms]).await.map(Done::Rows)
            })),
            Op::PutCheckpoint { ns, key, body } => pending.push(Box::pin(async move {
                tx.execute(&s.put_checkpoint, &[&&**ns, key, body])
                    .await
                    .map(Done::Rows)
            })),
            Op::DeleteCheckpoint { ns, key } => pending.push(Box::pin(async move {
                tx.execute(&s.delete_checkpoint, &[&&**ns, key])
                    .await
                    .map(Done::Rows)
            })),
        }
        owned.push(pending.len() - before);
    }
    let results = futures_util::future::join_all(pending).await;
    let mut results = results.into_iter();
    let mut out = Vec::with_capacity(batch.len());
    for (w, n) in batch.iter().zip(owned) {
        // A write's result is its last statement's (a save's notifications come first).
        let mut done = Done::Rows(1);
        for r in results.by_ref().take(n) {
            done = r?;
        }
        if let Done::Undecided = done {
            done = Done::Claim(claim_again(tx, s, &w.write).await?);
        }
        out.push(done);
    }
    txn.commit().await?;
    Ok(out)
}

/// A claim statement's row: `(NULL, NULL)` when the claim took the key, else the holder's.
fn claimed(row: &tokio_postgres::Row) -> Result<Option<KeyClaim>, tokio_postgres::Error> {
    Ok(
        match (
            row.try_get::<_, Option<String>>(0)?,
            row.try_get::<_, Option<String>>(1)?,
        ) {
            (Some(task_id), Some(fingerprint)) => Some(KeyClaim {
                task_id,
                fingerprint: fingerprint.into(),
            }),
            _ => None,
        },
    )
}

/// A claim asked again, alone (a new statement sees what committed since): the holder may
/// also have released the key meanwhile, so a bounded number of rounds.
async fn claim_again(
    tx: &tokio_postgres::Transaction<'_>,
    s: &crate::conn::Statements,
    op: &Op,
) -> Result<Option<KeyClaim>, DbError> {
    for _ in 0..8 {
        if let Some(r) = claim_row(tx, s, op).await? {
            return Ok(claimed(&r)?);
        }
    }
    Err(DbError::other(
        "an idempotency key changed hands 8 times during one claim",
    ))
}

/// Runs a claim's statement (see `Statements::claim`); no row for a write that is not a claim.
async fn claim_row(
    tx: &tokio_postgres::Transaction<'_>,
    s: &crate::conn::Statements,
    op: &Op,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    let Op::Claim {
        ns,
        scope,
        key,
        claim,
        expires_ms,
        now_ms,
    } = op
    else {
        return Ok(None);
    };
    tx.query_opt(
        &s.claim,
        &[
            &&**ns,
            scope,
            key,
            &claim.task_id,
            &claim.fingerprint.digest(),
            expires_ms,
            now_ms,
        ],
    )
    .await
}
