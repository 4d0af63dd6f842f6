//! The embedded default store: one SQLite file in WAL mode.
//!
//! Writes go to one writer thread that commits them in groups: every write waiting when a
//! transaction starts joins it, and a task saved several times in one group is written once.
//! Callers still wait for the commit, so a resolved `save` is on disk, while throughput under
//! load comes from amortising each commit over many requests. Reads use a small pool of
//! read-only connections on the blocking thread pool (WAL lets them run beside the writer).

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot};

use super::{BoxFuture, StoreError, TaskPage, TaskQuery, TaskStore};
use crate::model::{PushNotificationConfig, Task};

const MAX_GROUP: usize = 512;
const READERS: usize = 4;

enum Op {
    /// Serialized on the writer thread, and only for the last save of a task in a group.
    Save(Box<Task>),
    SetPush {
        task_id: String,
        config_id: String,
        body: String,
    },
    DeletePush {
        task_id: String,
        config_id: String,
    },
}

struct Write {
    op: Op,
    done: oneshot::Sender<Result<usize, StoreError>>,
}

/// A SQLite-backed [`TaskStore`].
pub struct SqliteStore {
    writer: mpsc::UnboundedSender<Write>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: PathBuf,
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let conn = Connection::open(&path).map_err(backend)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             PRAGMA busy_timeout=5000;
             PRAGMA wal_autocheckpoint=8192;
             PRAGMA cache_size=-32768;
             CREATE TABLE IF NOT EXISTS tasks (
                 id TEXT PRIMARY KEY,
                 context_id TEXT NOT NULL,
                 state TEXT NOT NULL,
                 body TEXT NOT NULL,
                 updated_at INTEGER NOT NULL DEFAULT (unixepoch()),
                 owner TEXT
             );
             CREATE TABLE IF NOT EXISTS push_configs (
                 task_id TEXT NOT NULL,
                 config_id TEXT NOT NULL,
                 body TEXT NOT NULL,
                 PRIMARY KEY (task_id, config_id)
             );",
        )
        .map_err(backend)?;
        // Files from before tasks had owners get the column (NULL: no owner).
        if conn.prepare("SELECT owner FROM tasks LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE tasks ADD COLUMN owner TEXT")
                .map_err(backend)?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("agentry-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx))
            .map_err(|e| StoreError::Backend(format!("cannot start writer thread: {e}")))?;
        Ok(SqliteStore {
            writer: tx,
            readers: Arc::new(Mutex::new(Vec::new())),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `op` now (so writes keep the order of the calls) and returns a future that
    /// resolves when its group is committed. Dropping the future does not cancel the write.
    fn write(&self, op: Op) -> impl Future<Output = Result<usize, StoreError>> + Send + 'static {
        let (done, rx) = oneshot::channel();
        let queued = self.writer.send(Write { op, done }).is_ok();
        async move {
            if !queued {
                return Err(StoreError::Closed);
            }
            rx.await.map_err(|_| StoreError::Closed)?
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
        .map_err(|e| StoreError::Backend(format!("reader failed: {e}")))?
    }
}

fn writer_loop(mut conn: Connection, mut rx: mpsc::UnboundedReceiver<Write>) {
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let result = commit_group(&mut conn, &batch);
        for (w, r) in batch.drain(..).zip(result) {
            if let Err(e) = &r {
                tracing::error!("task store write failed: {e}");
            }
            let _ = w.done.send(r);
        }
    }
}

/// Applies a group in one transaction; returns one result per write, in order.
fn commit_group(conn: &mut Connection, batch: &[Write]) -> Vec<Result<usize, StoreError>> {
    // The last save of each task in the group wins; earlier ones are skipped.
    let mut last_save: HashMap<&str, usize> = HashMap::new();
    for (i, w) in batch.iter().enumerate() {
        if let Op::Save(task) = &w.op {
            last_save.insert(&task.id, i);
        }
    }
    let run = |conn: &mut Connection| -> Result<Vec<usize>, rusqlite::Error> {
        let tx = conn.transaction()?;
        let mut counts = Vec::with_capacity(batch.len());
        {
            let mut save = tx.prepare_cached(
                "INSERT INTO tasks (id, context_id, state, body, updated_at, owner)
                 VALUES (?1, ?2, ?3, ?4, unixepoch(), ?5)
                 ON CONFLICT(id) DO UPDATE SET context_id=excluded.context_id,
                   state=excluded.state, body=excluded.body, updated_at=excluded.updated_at,
                   owner=excluded.owner",
            )?;
            let mut set_push = tx.prepare_cached(
                "INSERT INTO push_configs (task_id, config_id, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT(task_id, config_id) DO UPDATE SET body=excluded.body",
            )?;
            let mut del_push =
                tx.prepare_cached("DELETE FROM push_configs WHERE task_id=?1 AND config_id=?2")?;
            for (i, w) in batch.iter().enumerate() {
                let n = match &w.op {
                    Op::Save(task) => {
                        if last_save.get(task.id.as_str()) == Some(&i) {
                            let body = serde_json::to_string(task).map_err(|e| {
                                rusqlite::Error::ToSqlConversionFailure(Box::new(e))
                            })?;
                            save.execute(params![
                                task.id,
                                task.context_id,
                                task.state().as_str(),
                                body,
                                task.owner
                            ])?
                        } else {
                            1
                        }
                    }
                    Op::SetPush {
                        task_id,
                        config_id,
                        body,
                    } => set_push.execute(params![task_id, config_id, body])?,
                    Op::DeletePush { task_id, config_id } => {
                        del_push.execute(params![task_id, config_id])?
                    }
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
            batch
                .iter()
                .map(|_| Err(StoreError::Backend(msg.clone())))
                .collect()
        }
    }
}

/// A stored task with its owner (kept in its own column: the body is wire JSON).
fn parse_task(id: &str, body: &str, owner: Option<String>) -> Result<Task, StoreError> {
    let mut task: Task =
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt(format!("task {id}: {e}")))?;
    task.owner = owner;
    Ok(task)
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl TaskStore for SqliteStore {
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        let id = id.to_owned();
        Box::pin(self.read(move |c| {
            let row: Option<(String, Option<String>)> = c
                .prepare_cached("SELECT body, owner FROM tasks WHERE id=?1")
                .and_then(|mut s| {
                    s.query_row([&id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(backend)?;
            row.map(|(body, owner)| parse_task(&id, &body, owner))
                .transpose()
        }))
    }

    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.write(Op::Save(Box::new(task.clone())));
        Box::pin(async move { done.await.map(|_| ()) })
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
                    "SELECT id, body, owner FROM tasks {WHERE}
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
                        ))
                    },
                )
                .map_err(backend)?;
            let mut tasks = Vec::new();
            for row in rows {
                let (id, body, owner) = row.map_err(backend)?;
                tasks.push(parse_task(&id, &body, owner)?);
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
                        .map_err(|e| StoreError::Corrupt(format!("push config: {e}")))?,
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
}
