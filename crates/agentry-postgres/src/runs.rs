//! Core's run store on PostgreSQL: checkpoints of unfinished runs, where any replica can
//! resume them.

use std::sync::Arc;

use agentry_core::llm::BoxFuture;
use agentry_core::runs::{RunStore, RunStoreError};

use crate::writer::{Done, Op};
use crate::{Database, WriteError};

/// One agent's (or workflow engine's) checkpoints in a [`Database`]: an
/// [`agentry_core::runs::RunStore`]. Writes share the task store's queue, so a checkpoint
/// and a task saved after it are committed in that order. Made by [`Database::run_store`].
pub struct PgRunStore {
    db: Database,
    ns: Arc<str>,
}

impl std::fmt::Debug for PgRunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRunStore")
            .field("database", &self.db.target())
            .field("namespace", &self.ns)
            .finish()
    }
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> RunStoreError {
    RunStoreError::Backend(Box::new(e))
}

impl PgRunStore {
    pub(crate) fn new(db: Database, namespace: &str) -> Self {
        PgRunStore {
            db,
            ns: namespace.into(),
        }
    }

    fn write(&self, op: Op) -> BoxFuture<'static, Result<(), RunStoreError>> {
        let done = self.db.write(op);
        Box::pin(async move {
            match done.await {
                Ok(Done::Rows(_)) => Ok(()),
                Ok(Done::Claim(_) | Done::Undecided) => Err(RunStoreError::Backend(
                    "a checkpoint write was answered as a claim".into(),
                )),
                Err(e @ WriteError::Closed) => Err(backend(e)),
                Err(WriteError::Db(e)) => Err(backend(e)),
            }
        })
    }
}

impl RunStore for PgRunStore {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>> {
        self.write(Op::PutCheckpoint {
            ns: self.ns.clone(),
            key: key.to_owned(),
            body: body.to_owned(),
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, RunStoreError>> {
        Box::pin(async move {
            let row = self
                .db
                .read(|c| {
                    let ns = self.ns.clone();
                    async move {
                        c.client
                            .query_opt(&c.s.get_checkpoint, &[&&*ns, &key])
                            .await
                    }
                })
                .await
                .map_err(backend)?;
            row.map(|r| r.try_get(0).map_err(backend)).transpose()
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>> {
        self.write(Op::DeleteCheckpoint {
            ns: self.ns.clone(),
            key: key.to_owned(),
        })
    }
}
