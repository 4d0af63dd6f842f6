//! Task stores: where tasks and their push-notification configs live.
//!
//! [`MemoryStore`] is for tests and ephemeral agents (it evicts the oldest finished tasks past a
//! cap, so memory stays bounded); [`SqliteStore`] is the embedded default and keeps everything
//! across restarts. Both sit behind [`TaskStore`], which the server holds as `Arc<dyn TaskStore>`.

use std::future::Future;
use std::pin::Pin;

use crate::model::{PushNotificationConfig, Task};

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

    /// Stores an agent's run state (opaque JSON) under `key`, usually a task id, so a run
    /// interrupted by a crash can resume from its last step.
    fn put_checkpoint<'a>(
        &'a self,
        key: &'a str,
        body: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
    fn delete_checkpoint<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
}

#[cfg(test)]
mod tests;
