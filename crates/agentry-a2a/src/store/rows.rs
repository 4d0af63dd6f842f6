//! What a database-backed task store writes and reads, shared by agentry's stores (SQLite
//! here, PostgreSQL in agentry-postgres) so that both encode alike: a task's body is its wire
//! JSON, with its owner and parked flag kept in columns of their own; a push outbox row.

use super::{OutgoingPush, StoreError};
use crate::model::Task;

/// (id, task id, config JSON, body) of one notification in a push outbox.
pub type OutboxRow = (String, String, String, Vec<u8>);

/// `v` as JSON; a value that cannot be encoded is reported, not a panic.
pub fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::corrupt("cannot encode", e))
}

/// The outbox rows of `items`.
pub fn outbox_rows(items: &[OutgoingPush]) -> Result<Vec<OutboxRow>, StoreError> {
    items
        .iter()
        .map(|p| {
            Ok((
                p.id.clone(),
                p.task_id.clone(),
                to_json(&p.config)?,
                p.body.clone(),
            ))
        })
        .collect()
}

/// A stored task from its body and the columns beside it; a body that is not a task is
/// [`StoreError::Corrupt`], naming the task.
pub fn parse_task(
    id: &str,
    body: &str,
    owner: Option<String>,
    parked: bool,
) -> Result<Task, StoreError> {
    let mut task: Task =
        serde_json::from_str(body).map_err(|e| StoreError::corrupt(format!("task {id}"), e))?;
    task.owner = owner;
    task.parked = parked;
    Ok(task)
}
