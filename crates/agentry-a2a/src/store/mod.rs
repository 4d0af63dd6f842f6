//! Task stores: where tasks and their push-notification configs live.
//!
//! [`MemoryStore`] is for tests and ephemeral agents (it evicts the oldest finished tasks past a
//! cap, so memory stays bounded); [`SqliteStore`] is the embedded default and keeps everything
//! across restarts. Both sit behind [`TaskStore`], which the server holds as `Arc<dyn TaskStore>`.

use std::future::Future;
use std::pin::Pin;

use crate::model::{PushNotificationConfig, Task, TaskState};

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// A boxed future, as the object-safe store methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store backend: {0}")]
    Backend(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("store is closed")]
    Closed,
}

impl From<StoreError> for crate::error::A2aError {
    fn from(e: StoreError) -> Self {
        crate::error::A2aError::Store(e.to_string())
    }
}

/// A filter over stored tasks, newest status first (ties: newest id first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskQuery {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is later than this RFC 3339 UTC instant.
    pub status_after: Option<String>,
    /// Only tasks of this owner ([`Task::owner`]); `None`: only tasks without one.
    pub owner: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

/// One page of a [`TaskQuery`], with the number of tasks the filter matches in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    pub total: usize,
}

/// Whether `t` passes the query's filters (not its paging).
pub(crate) fn matches(q: &TaskQuery, t: &Task) -> bool {
    q.owner == t.owner
        && q.context_id.as_ref().is_none_or(|c| *c == t.context_id)
        && q.state.is_none_or(|s| s == t.state())
        && q.status_after.as_deref().is_none_or(|after| {
            t.status
                .timestamp
                .as_deref()
                .is_some_and(|ts| crate::time::normalize(ts).as_str() > after)
        })
}

/// Persistence for tasks and push configs.
///
/// Writes take effect in the order of the calls, at call time: a store queues or applies the
/// write before returning its future, and the future resolves when the write is durable. So the
/// server can drop the future of an intermediate save (it still happens, in order) and await
/// only the ones a client will rely on, such as the end of a turn. The server never writes an
/// invalid state change, because changes go through [`Task::transition`].
pub trait TaskStore: Send + Sync + 'static {
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>>;
    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The tasks matching `query`, newest status first.
    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>>;
    /// Adds or replaces (same id) a push config of a task.
    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn list_push<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PushNotificationConfig>, StoreError>>;
    /// Returns whether a config was deleted.
    fn delete_push<'a>(
        &'a self,
        task_id: &'a str,
        config_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}

#[cfg(test)]
mod tests;
