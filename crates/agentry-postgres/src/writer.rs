//! The writer: one connection applying every write of a process in call order, in groups.
//!
//! Whatever is queued when a transaction starts joins it (up to [`MAX_GROUP`]), so one
//! commit serves many requests under load and one request alone waits for one round trip
//! more than a bare statement. A group that fails is applied again write by write, each in
//! its own transaction, so one bad write (or a deadlock with another replica's group) fails
//! only itself; a group cut off by a lost connection is applied again on a new one.

use std::collections::HashMap;
use std::sync::Arc;

use agentry_a2a::model::Task;
use agentry_a2a::store::KeyClaim;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Config;

use crate::DbError;
use crate::conn::{self, Conn};

/// Writes in one transaction at most.
const MAX_GROUP: usize = 256;

/// (id, task id, config JSON, body) of one notification.
pub(crate) type OutboxRow = (String, String, String, Vec<u8>);

/// One write; `ns` is the agent it belongs to.
pub(crate) enum Op {
    /// Only the last save of a task in a group is written; its notifications are written
    /// whichever save is last. `running`: a turn runs (the replica holds the task).
    Save {
        ns: Arc<str>,
        task: Box<Task>,
        body: String,
        pushes: Vec<OutboxRow>,
        running: bool,
    },
    /// Holds a stored task for this replica's turn, unless another live replica holds it.
    TakeTurn {
        ns: Arc<str>,
        task_id: String,
    },
    /// Renews this replica's holds.
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

/// What a write did.
#[derive(Debug)]
pub(crate) enum Done {
    /// Rows changed.
    Rows(u64),
    /// A claim: `None` when it took the key, else the claim that holds it.
    Claim(Option<KeyClaim>),
}

pub(crate) struct Write {
    pub(crate) op: Op,
    pub(crate) done: oneshot::Sender<Result<Done, DbError>>,
}

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
    config: Config,
    first: Conn,
    lease: Lease,
    mut rx: mpsc::UnboundedReceiver<Write>,
) {
    let mut conn = Some(first);
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while let Some(w) = rx.recv().await {
        batch.push(w);
        while batch.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let results = apply(&config, &mut conn, &lease, &batch).await;
        for (w, r) in batch.drain(..).zip(results) {
            if let Err(e) = &r {
                tracing::error!("PostgreSQL write failed: {e}");
            }
            let _ = w.done.send(r);
        }
    }
}

/// The writer's connection, made again when there is none or it was lost.
async fn ready<'c>(config: &Config, conn: &'c mut Option<Conn>) -> Result<&'c mut Conn, DbError> {
    if conn.as_ref().is_some_and(|c| c.client.is_closed()) {
        *conn = None;
    }
    if conn.is_none() {
        *conn = Some(conn::prepare(conn::open(config).await?).await?);
    }
    conn.as_mut()
        .ok_or_else(|| DbError::other("the writer's connection was not made"))
}

/// One result per write of `batch`, in order.
async fn apply(
    config: &Config,
    conn: &mut Option<Conn>,
    lease: &Lease,
    batch: &[Write],
) -> Vec<Result<Done, DbError>> {
    let fail = |e: DbError| batch.iter().map(|_| Err(e.clone())).collect::<Vec<_>>();
    for attempt in 0..2 {
        let c = match ready(config, conn).await {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        match commit(c, lease, batch).await {
            Ok(done) => return done.into_iter().map(Ok).collect(),
            Err(e) if c.client.is_closed() && attempt == 0 => {
                tracing::warn!(
                    "PostgreSQL writer connection lost ({e}); applying {} write(s) again",
                    batch.len()
                );
            }
            Err(e) if batch.len() > 1 => {
                tracing::debug!("a group of {} writes failed ({e}); one by one", batch.len());
                let mut out = Vec::with_capacity(batch.len());
                for w in batch {
                    let r = match ready(config, conn).await {
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

/// Applies `batch` in one transaction.
async fn commit(c: &mut Conn, lease: &Lease, batch: &[Write]) -> Result<Vec<Done>, DbError> {
    let me = &*lease.me;
    // The last save of each task in the group wins; earlier ones are skipped.
    let mut last_save: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, w) in batch.iter().enumerate() {
        if let Op::Save { ns, task, .. } = &w.op {
            last_save.insert((&**ns, task.id.as_str()), i);
        }
    }
    let s = &c.s;
    let tx = c.client.transaction().await?;
    let mut out = Vec::with_capacity(batch.len());
    for (i, w) in batch.iter().enumerate() {
        let done = match &w.op {
            Op::Save {
                ns,
                task,
                body,
                pushes,
                running,
            } => {
                for (id, task_id, config, push) in pushes {
                    tx.execute(&s.enqueue, &[&&**ns, id, task_id, config, push])
                        .await?;
                }
                if last_save.get(&(&**ns, task.id.as_str())) == Some(&i) {
                    let status_ts = task
                        .status
                        .timestamp
                        .as_deref()
                        .map(agentry_a2a::time::normalize);
                    Done::Rows(
                        tx.execute(
                            &s.save,
                            &[
                                &&**ns,
                                &task.id,
                                &task.context_id,
                                &task.state().as_str(),
                                &status_ts,
                                &task.owner,
                                &task.parked,
                                body,
                                &running.then_some(me),
                                &lease.seconds,
                                &me,
                            ],
                        )
                        .await?,
                    )
                } else {
                    Done::Rows(1)
                }
            }
            Op::TakeTurn { ns, task_id } => Done::Rows(
                tx.execute(&s.take_turn, &[&&**ns, task_id, &me, &lease.seconds])
                    .await?,
            ),
            Op::Heartbeat => Done::Rows(tx.execute(&s.heartbeat, &[&me, &lease.seconds]).await?),
            Op::SetPush {
                ns,
                task_id,
                config_id,
                body,
            } => Done::Rows(
                tx.execute(&s.set_push, &[&&**ns, task_id, config_id, body])
                    .await?,
            ),
            Op::DeletePush {
                ns,
                task_id,
                config_id,
            } => Done::Rows(
                tx.execute(&s.delete_push, &[&&**ns, task_id, config_id])
                    .await?,
            ),
            Op::Enqueue { ns, rows } => {
                let mut n = 0;
                for (id, task_id, config, body) in rows {
                    n += tx
                        .execute(&s.enqueue, &[&&**ns, id, task_id, config, body])
                        .await?;
                }
                Done::Rows(n)
            }
            Op::Ack { ns, id } => Done::Rows(tx.execute(&s.ack, &[&&**ns, id]).await?),
            Op::Claim {
                ns,
                scope,
                key,
                claim,
                expires_ms,
                now_ms,
            } => {
                // Some(None): taken; Some(Some(c)): held by c.
                let mut held = None;
                // The holder may release the key between the two statements: then claim
                // again (a bounded number of times; each round another claim finished).
                for _ in 0..8 {
                    let took = tx
                        .query_opt(
                            &s.claim,
                            &[
                                &&**ns,
                                scope,
                                key,
                                &claim.task_id,
                                &claim.fingerprint,
                                expires_ms,
                                now_ms,
                            ],
                        )
                        .await?;
                    if took.is_some() {
                        held = Some(None);
                        break;
                    }
                    if let Some(row) = tx.query_opt(&s.held, &[&&**ns, scope, key]).await? {
                        held = Some(Some(KeyClaim {
                            task_id: row.try_get(0)?,
                            fingerprint: row.try_get(1)?,
                        }));
                        break;
                    }
                }
                match held {
                    Some(h) => Done::Claim(h),
                    None => {
                        return Err(DbError::other(
                            "an idempotency key changed hands 8 times during one claim",
                        ));
                    }
                }
            }
            Op::Release { ns, scope, key } => {
                Done::Rows(tx.execute(&s.release, &[&&**ns, scope, key]).await?)
            }
            Op::SweepKeys(now_ms) => Done::Rows(tx.execute(&s.sweep, &[now_ms]).await?),
            Op::PutCheckpoint { ns, key, body } => {
                Done::Rows(tx.execute(&s.put_checkpoint, &[&&**ns, key, body]).await?)
            }
            Op::DeleteCheckpoint { ns, key } => {
                Done::Rows(tx.execute(&s.delete_checkpoint, &[&&**ns, key]).await?)
            }
        };
        out.push(done);
    }
    tx.commit().await?;
    Ok(out)
}
