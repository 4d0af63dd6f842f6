//! The A2A task store on PostgreSQL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentry_a2a::model::{PushNotificationConfig, Task, TaskState};
use agentry_a2a::store::{
    BoxFuture, KeyClaim, OutgoingPush, StateCounts, StoreError, TaskPage, TaskQuery, TaskStore,
};

use agentry_a2a::store::rows::{OutboxRow, outbox_rows, parse_task, to_json};

use crate::writer::{Done, Op};
use crate::{Database, WriteError};

/// Claims between two sweeps of expired idempotency keys (by any agent of the process).
const SWEEP_EVERY: u64 = 1024;

/// One agent's tasks in a [`Database`]: an [`agentry_a2a::store::TaskStore`] that every
/// replica serving the agent shares. Made by [`Database::task_store`].
pub struct PgTaskStore {
    db: Database,
    ns: Arc<str>,
    claims: AtomicU64,
}

impl std::fmt::Debug for PgTaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTaskStore")
            .field("database", &self.db.target())
            .field("namespace", &self.ns)
            .finish()
    }
}

fn backend(e: impl Into<agentry_a2a::store::BoxError>) -> StoreError {
    StoreError::backend("PostgreSQL", e)
}

fn written(r: Result<Done, WriteError>) -> Result<u64, StoreError> {
    match r {
        Ok(Done::Rows(n)) => Ok(n),
        Ok(Done::Claim(_) | Done::Undecided) => Err(backend("a write was answered as a claim")),
        Err(WriteError::Closed) => Err(StoreError::Closed),
        Err(WriteError::Db(e)) => Err(backend(e)),
    }
}

impl PgTaskStore {
    pub(crate) fn new(db: Database, namespace: &str) -> Self {
        PgTaskStore {
            db,
            ns: namespace.into(),
            claims: AtomicU64::new(0),
        }
    }

    /// The agent's name, which its rows carry.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// Queues `op` now; the future resolves with the rows it changed once committed.
    fn write(&self, op: Op) -> BoxFuture<'static, Result<u64, StoreError>> {
        let done = self.db.write(op);
        Box::pin(async move { written(done.await) })
    }

    fn save_op(&self, task: &Task, pushes: Vec<OutboxRow>) -> Result<Op, StoreError> {
        Ok(Op::Save {
            ns: self.ns.clone(),
            body: to_json(task)?,
            running: matches!(task.state(), TaskState::Submitted | TaskState::Working)
                && !task.parked,
            task: crate::writer::TaskRow::of(task),
            pushes,
        })
    }

    /// Queues a save; the future fails when another live replica holds the task (the row
    /// was left as that replica wrote it).
    fn save_task(
        &self,
        task: &Task,
        pushes: Vec<OutboxRow>,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let op = match self.save_op(task, pushes) {
            Ok(op) => op,
            Err(e) => return failed(e),
        };
        let done = self.write(op);
        let id = task.id.clone();
        Box::pin(async move {
            match done.await? {
                0 => Err(backend(format!(
                    "task {id} is held by another replica running a turn of it; not saved"
                ))),
                _ => Ok(()),
            }
        })
    }
}

impl PgTaskStore {
    /// Takes up to `limit` pending notifications for this replica, oldest first: those no
    /// live replica holds (queued by one that stopped), and with `own` this replica's too
    /// (the store contract's `pending_pushes`). Held by this replica from then on, so no
    /// other sends them while it lives.
    async fn claim_pushes(&self, own: bool, limit: i64) -> Result<Vec<OutgoingPush>, StoreError> {
        let me = self.db.replica().to_owned();
        let lease = self.db.lease().as_secs_f64();
        let claim = agentry_a2a::new_id();
        let mut rows = self
            .db
            .read(|c| {
                let (ns, me, claim) = (self.ns.clone(), me.clone(), claim.clone());
                async move {
                    c.client
                        .query(
                            &c.s.claim_pushes,
                            &[&&*ns, &me, &lease, &own, &limit, &claim],
                        )
                        .await
                }
            })
            .await
            .map_err(backend)?;
        // RETURNING keeps no order.
        rows.sort_by_key(|r| r.try_get::<_, i64>(0).unwrap_or(i64::MAX));
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let id: String = r.try_get(1).map_err(backend)?;
            let config: String = r.try_get(3).map_err(backend)?;
            let config = serde_json::from_str(&config)
                .map_err(|e| StoreError::corrupt(format!("push outbox entry {id}"), e))?;
            out.push(OutgoingPush {
                task_id: r.try_get(2).map_err(backend)?,
                body: r.try_get(4).map_err(backend)?,
                id,
                config,
            });
        }
        Ok(out)
    }
}

/// A future that fails at once (input that cannot be encoded: nothing is queued).
fn failed<T: Send + 'static>(e: StoreError) -> BoxFuture<'static, Result<T, StoreError>> {
    Box::pin(async move { Err(e) })
}

impl TaskStore for PgTaskStore {
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        Box::pin(async move {
            let row = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    async move { c.client.query_opt(&c.s.get, &[&&*ns, &id]).await }
                })
                .await
                .map_err(backend)?;
            match row {
                None => Ok(None),
                Some(r) => {
                    let body: String = r.try_get(0).map_err(backend)?;
                    let owner: Option<String> = r.try_get(1).map_err(backend)?;
                    let parked: bool = r.try_get(2).map_err(backend)?;
                    let mut task = parse_task(id, &body, owner, parked)?;
                    task.queued = r.try_get(3).map_err(backend)?;
                    Ok(Some(task))
                }
            }
        })
    }

    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>> {
        self.save_task(task, Vec::new())
    }

    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>> {
        Box::pin(async move {
            let state = query.state.map(|s| s.as_str());
            // Past the end rather than wrapped to a negative (first-page) offset.
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
            let (total, rows) = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    async move {
                        let filters: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [
                            &&*ns,
                            &query.context_id,
                            &state,
                            &query.status_after,
                            &query.owner,
                        ];
                        let mut page = filters.to_vec();
                        page.push(&limit);
                        page.push(&offset);
                        // Pipelined on the connection: one round trip.
                        tokio::try_join!(
                            c.client.query_one(&c.s.count, &filters),
                            c.client.query(&c.s.list, &page),
                        )
                    }
                })
                .await
                .map_err(backend)?;
            let total: i64 = total.try_get(0).map_err(backend)?;
            let mut tasks = Vec::with_capacity(rows.len());
            for r in rows {
                let id: String = r.try_get(0).map_err(backend)?;
                let body: String = r.try_get(1).map_err(backend)?;
                let mut task = parse_task(
                    &id,
                    &body,
                    r.try_get(2).map_err(backend)?,
                    r.try_get(3).map_err(backend)?,
                )?;
                task.queued = r.try_get(4).map_err(backend)?;
                tasks.push(task);
            }
            Ok(TaskPage {
                tasks,
                total: usize::try_from(total).unwrap_or(0),
            })
        })
    }

    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let body = match to_json(config) {
            Ok(b) => b,
            Err(e) => return failed(e),
        };
        let done = self.write(Op::SetPush {
            ns: self.ns.clone(),
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
        Box::pin(async move {
            let rows = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    async move { c.client.query(&c.s.list_push, &[&&*ns, &task_id]).await }
                })
                .await
                .map_err(backend)?;
            rows.iter()
                .map(|r| {
                    let body: String = r.try_get(0).map_err(backend)?;
                    serde_json::from_str(&body).map_err(|e| StoreError::corrupt("push config", e))
                })
                .collect()
        })
    }

    fn delete_push<'a>(
        &'a self,
        task_id: &'a str,
        config_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let done = self.write(Op::DeletePush {
            ns: self.ns.clone(),
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
            Err(e) => return failed(e),
        };
        let done = self.write(Op::Enqueue {
            ns: self.ns.clone(),
            rows,
        });
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn save_with_pushes<'a>(
        &'a self,
        task: &'a Task,
        pushes: &'a [OutgoingPush],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        match outbox_rows(pushes) {
            Ok(rows) => self.save_task(task, rows),
            Err(e) => failed(e),
        }
    }

    fn take_turn<'a>(&'a self, task_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let done = self.write(Op::TakeTurn {
            ns: self.ns.clone(),
            task_id: task_id.to_owned(),
        });
        Box::pin(async move { done.await.map(|n| n > 0) })
    }

    fn abandoned(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<agentry_a2a::store::Abandoned>, StoreError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    let grace = self.db.queue_grace().as_secs_f64();
                    async move {
                        c.client
                            .query(&c.s.abandoned, &[&&*ns, &limit, &grace])
                            .await
                    }
                })
                .await
                .map_err(backend)?;
            rows.iter()
                .map(|r| {
                    Ok(agentry_a2a::store::Abandoned {
                        task_id: r.try_get(0).map_err(backend)?,
                        owner: r.try_get(1).map_err(backend)?,
                    })
                })
                .collect()
        })
    }

    /// Half the hold's lifetime: a dead replica's tasks are taken over within 1.5 leases.
    fn sweep_every(&self) -> Option<std::time::Duration> {
        Some(self.db.lease() / 2)
    }

    fn running_elsewhere<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let row = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    let me = self.db.replica().to_owned();
                    let grace = self.db.queue_grace().as_secs_f64();
                    async move {
                        c.client
                            .query_opt(&c.s.elsewhere, &[&&*ns, &task_id, &me, &grace])
                            .await
                    }
                })
                .await
                .map_err(backend)?;
            match row {
                None => Ok(false),
                Some(r) => Ok(r.try_get::<_, Option<bool>>(0).map_err(backend)? == Some(true)),
            }
        })
    }

    fn pending_pushes(&self) -> BoxFuture<'_, Result<Vec<OutgoingPush>, StoreError>> {
        Box::pin(self.claim_pushes(true, i64::MAX))
    }

    fn abandoned_pushes(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<OutgoingPush>, StoreError>> {
        Box::pin(self.claim_pushes(false, i64::try_from(limit).unwrap_or(i64::MAX)))
    }

    fn ack_push<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.write(Op::Ack {
            ns: self.ns.clone(),
            id: id.to_owned(),
        });
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        claim: &'a KeyClaim,
        expires_ms: i64,
    ) -> BoxFuture<'a, Result<Option<KeyClaim>, StoreError>> {
        let now_ms = agentry_a2a::time::now_unix_millis();
        if self.claims.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            drop(self.db.write(Op::SweepKeys(now_ms)));
        }
        // Queued now, like every write: decided by the database in call order.
        let done = self.db.write(Op::Claim {
            ns: self.ns.clone(),
            scope: scope.to_owned(),
            key: key.to_owned(),
            claim: claim.clone(),
            expires_ms,
            now_ms,
        });
        Box::pin(async move {
            match done.await {
                Ok(Done::Claim(held)) => Ok(held),
                other => written(other).and_then(|_| Err(backend("a claim was answered as rows"))),
            }
        })
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.write(Op::Release {
            ns: self.ns.clone(),
            scope: scope.to_owned(),
            key: key.to_owned(),
        });
        Box::pin(async move { done.await.map(|_| ()) })
    }

    fn pending_writes(&self) -> Option<usize> {
        Some(self.db.pending_writes())
    }

    fn write_errors(&self) -> Option<u64> {
        Some(self.db.write_errors())
    }

    fn count_by_state(&self) -> BoxFuture<'_, Result<Option<StateCounts>, StoreError>> {
        Box::pin(async move {
            let rows = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    async move { c.client.query(&c.s.by_state, &[&&*ns]).await }
                })
                .await
                .map_err(backend)?;
            let mut out = Vec::new();
            for r in rows {
                let state: String = r.try_get(0).map_err(backend)?;
                let n: i64 = r.try_get(1).map_err(backend)?;
                if let Some(s) = TaskState::ALL.into_iter().find(|s| s.as_str() == state) {
                    out.push((s, u64::try_from(n).unwrap_or(0)));
                }
            }
            Ok(Some(out))
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.db
                .read(|c| async move { c.client.simple_query("SELECT 1").await })
                .await
                .map(|_| ())
                .map_err(backend)
        })
    }
}
