//! The run store: checkpoints of unfinished runs (ReAct loops, workflows), so a run that a
//! crash or a restart interrupted resumes from its last step instead of starting over.
//!
//! A checkpoint is opaque JSON under a key (for a served agent, the A2A task id; for a
//! workflow, its run id). The store knows nothing of what it holds, so ReAct states and
//! workflow states share it, and a scale-out backend only has to store strings.
//! [`MemoryRunStore`] is for tests and ephemeral agents; [`SqliteRunStore`] (feature `sqlite`,
//! on by default) is the embedded default. Agentry keeps it in the same file as the agent's
//! task store, so a run and its task are backed up, moved and deleted together.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use agentry_core::runs::{MemoryRunStore, RunStore};
//!
//! let store = MemoryRunStore::default();
//! store.put("task-1", r#"{"step":1}"#).await?;
//! assert_eq!(store.get("task-1").await?.as_deref(), Some(r#"{"step":1}"#));
//! store.delete("task-1").await?;
//! assert_eq!(store.get("task-1").await?, None);
//! # Ok::<_, agentry_core::runs::RunStoreError>(()) }).unwrap();
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::llm::{BoxFuture, ChatMessage};
use crate::react::ReactState;

/// A run store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunStoreError {
    /// The backend failed (I/O, SQL, a lost connection).
    #[error("run store: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store was opened on something it cannot use.
    #[error("cannot open the run store at {path}")]
    Open {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where checkpoints of unfinished runs live: opaque JSON bodies by key.
///
/// A resolved `put` is as durable as the backend's task store (SQLite: across a crash of the
/// process). Callers await each `put` before taking the next step, so writes keep their order.
pub trait RunStore: Send + Sync + 'static {
    /// Stores `body` under `key`, replacing what was there.
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>>;
    /// The body under `key`, if any.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, RunStoreError>>;
    /// Removes `key` (no error when it is absent).
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>>;
}

/// Checkpoints in memory: lost with the process.
#[derive(Default)]
pub struct MemoryRunStore {
    runs: Mutex<HashMap<String, String>>,
}

impl MemoryRunStore {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RunStore for MemoryRunStore {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>> {
        self.runs().insert(key.to_owned(), body.to_owned());
        Box::pin(async { Ok(()) })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, RunStoreError>> {
        let body = self.runs().get(key).cloned();
        Box::pin(async move { Ok(body) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>> {
        self.runs().remove(key);
        Box::pin(async { Ok(()) })
    }
}

#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRunStore;

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use rusqlite::{Connection, OptionalExtension, params};

    use super::{BoxFuture, RunStoreError};

    fn backend(e: impl std::error::Error + Send + Sync + 'static) -> RunStoreError {
        RunStoreError::Backend(Box::new(e))
    }

    /// Checkpoints in one SQLite table (`checkpoints`), in WAL mode with the task store's
    /// durability (`synchronous=FULL`: a resolved write is fsynced).
    ///
    /// It may share a file with other writers (agentry puts it in the agent's task database):
    /// every write is one statement, and a busy database is waited for, not failed.
    pub struct SqliteRunStore {
        conn: Arc<Mutex<Connection>>,
        path: PathBuf,
    }

    impl SqliteRunStore {
        /// Opens (creating if needed) the store at `path`.
        pub fn open(path: impl AsRef<Path>) -> Result<Self, RunStoreError> {
            let path = path.as_ref().to_path_buf();
            let fail = |source: Box<dyn std::error::Error + Send + Sync>| RunStoreError::Open {
                path: path.display().to_string(),
                source,
            };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| fail(Box::new(e)))?;
            }
            let conn = Connection::open(&path).map_err(|e| fail(Box::new(e)))?;
            conn.busy_timeout(std::time::Duration::from_secs(10))
                .map_err(|e| fail(Box::new(e)))?;
            conn.execute_batch(
                "PRAGMA journal_mode=WAL;
                 PRAGMA synchronous=FULL;
                 CREATE TABLE IF NOT EXISTS checkpoints (
                     key TEXT PRIMARY KEY,
                     body TEXT NOT NULL,
                     updated_at INTEGER NOT NULL DEFAULT (unixepoch())
                 );",
            )
            .map_err(|e| fail(Box::new(e)))?;
            Ok(SqliteRunStore {
                conn: Arc::new(Mutex::new(conn)),
                path,
            })
        }

        /// The database file.
        pub fn path(&self) -> &Path {
            &self.path
        }

        /// Runs `f` on the connection off the async workers.
        async fn with<T: Send + 'static>(
            &self,
            f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        ) -> Result<T, RunStoreError> {
            let conn = self.conn.clone();
            tokio::task::spawn_blocking(move || {
                let c = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&c)
            })
            .await
            .map_err(backend)?
            .map_err(backend)
        }
    }

    impl super::RunStore for SqliteRunStore {
        fn put<'a>(
            &'a self,
            key: &'a str,
            body: &'a str,
        ) -> BoxFuture<'a, Result<(), RunStoreError>> {
            let (key, body) = (key.to_owned(), body.to_owned());
            Box::pin(self.with(move |c| {
                c.prepare_cached(
                    "INSERT INTO checkpoints (key, body, updated_at) VALUES (?1, ?2, unixepoch())
                     ON CONFLICT(key) DO UPDATE SET body=excluded.body, updated_at=excluded.updated_at",
                )?
                .execute(params![key, body])
                .map(|_| ())
            }))
        }

        fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, RunStoreError>> {
            let key = key.to_owned();
            Box::pin(self.with(move |c| {
                c.prepare_cached("SELECT body FROM checkpoints WHERE key=?1")?
                    .query_row([key], |r| r.get(0))
                    .optional()
            }))
        }

        fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), RunStoreError>> {
            let key = key.to_owned();
            Box::pin(self.with(move |c| {
                c.prepare_cached("DELETE FROM checkpoints WHERE key=?1")?
                    .execute([key])
                    .map(|_| ())
            }))
        }
    }
}

/// A ReAct run's checkpoints in a [`RunStore`]: its state as JSON under the run's id.
///
/// Failures are logged, not returned: a run whose checkpoint could not be saved goes on (it
/// only loses the ability to resume), and an unreadable checkpoint starts the run afresh.
///
/// A store given to [`Checkpoints::new`] also keeps each conversation's recent messages (key
/// `conversation:<contextId>`), so an agent remembers a context after a restart as its task
/// store remembers the tasks; the default in-memory one keeps none (it would hold every
/// conversation without bound, and the agent's own memory already has the recent ones).
#[derive(Clone)]
pub struct Checkpoints {
    store: Arc<dyn RunStore>,
    conversations: bool,
}

impl Default for Checkpoints {
    /// In memory.
    fn default() -> Self {
        Checkpoints {
            store: Arc::new(MemoryRunStore::default()),
            conversations: false,
        }
    }
}

impl Checkpoints {
    /// Checkpoints (and conversations) in `store`.
    pub fn new(store: Arc<dyn RunStore>) -> Self {
        Checkpoints {
            store,
            conversations: true,
        }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// Saves a conversation's recent messages (a no-op for the default in-memory store).
    pub async fn save_conversation(&self, context_id: &str, messages: &[ChatMessage]) {
        if self.conversations {
            self.put_json(
                &format!("conversation:{context_id}"),
                &messages,
                "conversation",
            )
            .await;
        }
    }

    /// A conversation's saved messages, if there are readable ones.
    pub async fn conversation(&self, context_id: &str) -> Option<Vec<ChatMessage>> {
        if !self.conversations {
            return None;
        }
        self.get_json(&format!("conversation:{context_id}"), "conversation")
            .await
    }

    /// Saves `state` as the run's checkpoint.
    pub async fn save(&self, run_id: &str, state: &ReactState) {
        self.put_json(run_id, state, "checkpoint").await;
    }

    /// The run's checkpoint, if there is a readable one.
    pub async fn load(&self, run_id: &str) -> Option<ReactState> {
        self.get_json(run_id, "checkpoint").await
    }

    /// Stores `value` as JSON under `key`; a failure is logged as `what` (see the type docs).
    async fn put_json<T: serde::Serialize + ?Sized>(&self, key: &str, value: &T, what: &str) {
        match serde_json::to_string(value) {
            Ok(json) => {
                if let Err(e) = self.store.put(key, &json).await {
                    tracing::warn!(key, "{what} not saved: {e}");
                }
            }
            Err(e) => tracing::warn!(key, "{what} not serializable: {e}"),
        }
    }

    /// The JSON under `key`, if there is a readable one; a failure is logged as `what`.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str, what: &str) -> Option<T> {
        let body = match self.store.get(key).await {
            Ok(body) => body?,
            Err(e) => {
                tracing::warn!(key, "{what} not read: {e}");
                return None;
            }
        };
        serde_json::from_str(&body)
            .inspect_err(|e| tracing::warn!(key, "{what} unreadable: {e}"))
            .ok()
    }

    /// Forgets the run's checkpoint (the run ended).
    pub async fn remove(&self, run_id: &str) {
        if let Err(e) = self.store.delete(run_id).await {
            tracing::warn!(run = run_id, "checkpoint not removed: {e}");
        }
    }
}
