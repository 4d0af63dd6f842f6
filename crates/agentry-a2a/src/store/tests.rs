//! The same contract checked on every store.

use super::contract::{check as contract, task};
use super::*;
use crate::model::*;

#[tokio::test]
async fn memory_store_contract() {
    contract(&MemoryStore::default()).await;
}

#[tokio::test]
async fn memory_store_evicts_oldest_finished_tasks() {
    let s = MemoryStore::new(3);
    s.save(&task("running", TaskState::Working)).await.unwrap();
    for i in 0..10 {
        s.save(&task(&format!("done{i}"), TaskState::Completed))
            .await
            .unwrap();
    }
    assert_eq!(s.len(), 4, "three finished tasks and the running one");
    assert!(s.get("running").await.unwrap().is_some());
    assert!(s.get("done0").await.unwrap().is_none());
    assert!(s.get("done9").await.unwrap().is_some());
}

#[cfg(feature = "sqlite")]
fn temp_db() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("agentry-store-{}.db", crate::new_id()))
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_store_contract_and_restart() {
    let path = temp_db();
    {
        let s = SqliteStore::open(&path).unwrap();
        contract(&s).await;
    }
    // A new process (a new store on the same file) sees everything.
    let s = SqliteStore::open(&path).unwrap();
    let t = s.get("t1").await.unwrap().unwrap();
    // Idempotency keys survive too: a retry after a restart finds the first task.
    let held = s
        .claim_key(
            "alice",
            "k",
            &KeyClaim {
                task_id: "x".into(),
                fingerprint: "y".into(),
            },
            crate::time::now_unix_millis() + 1000,
        )
        .await
        .unwrap();
    assert_eq!(held.map(|c| c.task_id).as_deref(), Some("task-4"));
    assert_eq!(t.artifacts.len(), 1);
    assert_eq!(t.history.len(), 1);
    assert_eq!(s.list_push("t1").await.unwrap().len(), 1);
    let mode: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

/// The push outbox across a reopen (a restart): what was pending is still pending, in order,
/// with the config's credentials (the webhook needs them).
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_push_outbox_keeps_notifications_until_acknowledged() {
    let path = temp_db();
    let push = |n: usize| OutgoingPush {
        id: format!("p{n}"),
        task_id: "t1".into(),
        config: PushNotificationConfig {
            id: Some("hook".into()),
            url: "https://example.com/hook".into(),
            token: Some("tok".into()),
            authentication: None,
            body_version: None,
        },
        body: format!("{{\"n\":{n}}}").into_bytes(),
    };
    // The outbox's rules in one process are the contract's (`sqlite_outbox_contract`); here,
    // that what is pending survives a restart, credentials included.
    {
        let s = SqliteStore::open(&path).unwrap();
        let items: Vec<_> = (0..4).map(push).collect();
        // Not awaited: queued at call time, like the server's intermediate writes.
        drop(s.enqueue_pushes(&items[..2]));
        s.enqueue_pushes(&items[2..]).await.unwrap();
        s.ack_push("p1").await.unwrap();
    }
    let s = SqliteStore::open(&path).unwrap();
    let pending = s.pending_pushes().await.unwrap();
    assert_eq!(pending, vec![push(0), push(2), push(3)]);
    // The in-memory store keeps none.
    let m = MemoryStore::default();
    m.enqueue_pushes(&[push(9)]).await.unwrap();
    assert!(m.pending_pushes().await.unwrap().is_empty());
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_outbox_contract() {
    let path = temp_db();
    super::contract::check_outbox(&SqliteStore::open(&path).unwrap()).await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_group_commit_keeps_every_concurrent_write() {
    let path = temp_db();
    let s = std::sync::Arc::new(SqliteStore::open(&path).unwrap());
    let mut handles = Vec::new();
    for i in 0..200 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut t = task(&format!("t{i}"), TaskState::Working);
            s.save(&t).await.unwrap();
            t.transition(TaskStatus::now(TaskState::Completed, None))
                .unwrap();
            s.save(&t).await.unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    for i in 0..200 {
        let t = s.get(&format!("t{i}")).await.unwrap().unwrap();
        assert_eq!(t.state(), TaskState::Completed);
    }
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_reports_corrupt_rows_instead_of_panicking() {
    let path = temp_db();
    let s = SqliteStore::open(&path).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO tasks (id, context_id, state, body) VALUES ('bad', 'c', 'working', '{not json')",
            [],
        )
        .unwrap();
    assert!(matches!(
        s.get("bad").await,
        Err(StoreError::Corrupt { .. })
    ));
    let _ = std::fs::remove_file(&path);
}

/// The memory store holds at most its cap of keys, forgetting the oldest first, in constant
/// time per claim (150,000 claims: the cap is 100,000).
#[tokio::test]
async fn memory_store_keys_are_capped_oldest_first() {
    let s = MemoryStore::default();
    let later = crate::time::now_unix_millis() + 60_000;
    let c = KeyClaim {
        task_id: "t".into(),
        fingerprint: "f".into(),
    };
    for i in 0..150_000 {
        assert_eq!(
            s.claim_key("a", &format!("k{i}"), &c, later).await.unwrap(),
            None
        );
    }
    // The newest are still held; the oldest were forgotten.
    assert!(
        s.claim_key("a", "k149999", &c, later)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.claim_key("a", "k60000", &c, later)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(s.claim_key("a", "k0", &c, later).await.unwrap(), None);
}

/// Progress saves queued faster than the disk takes them wait as one write per task (the
/// writer is stalled by another connection holding the database's write lock).
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_saves_of_one_task_coalesce_while_the_writer_is_behind() {
    let path = temp_db();
    let s = SqliteStore::open(&path).unwrap();
    let p = path.clone();
    super::contract::check_saves_coalesce(
        &s,
        async move || {
            let blocker = rusqlite::Connection::open(&p).unwrap();
            blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
            blocker
        },
        async |blocker: rusqlite::Connection| blocker.execute_batch("COMMIT").unwrap(),
    )
    .await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

/// Claims stored by an earlier version (SQLite, PostgreSQL) hold digests made from the
/// serialized message in one buffer: the digest made when asked for must be the same, or
/// every retry after an upgrade would be refused as a different request.
#[test]
fn a_fingerprint_digest_is_that_of_the_serialized_message() {
    use crate::model::{Message, Part, Role};
    use sha2::{Digest, Sha256};
    let mut m = Message::new(Role::User, vec![Part::text("draft the \"weekly\" mail ✉")]);
    m.context_id = Some("ctx-1".into());
    m.reference_task_ids = vec!["t-0".into()];
    let body = serde_json::to_vec(&(
        m.role,
        &m.parts,
        &m.context_id,
        &m.task_id,
        &m.reference_task_ids,
    ))
    .unwrap();
    let expected: String = Sha256::digest(&body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(Fingerprint::of(&m).digest(), expected);
    let stored = Fingerprint::from(expected.as_str());
    // The messageId and the metadata are not part of it (a client may make a new one per
    // attempt), compared as requests or against the stored digest.
    let mut again = m.clone();
    again.message_id = "another".into();
    again.metadata = Some(
        [("k".to_owned(), serde_json::json!(1))]
            .into_iter()
            .collect(),
    );
    assert_eq!(Fingerprint::of(&again), Fingerprint::of(&m));
    assert_eq!(Fingerprint::of(&again), stored);
    assert_eq!(stored, Fingerprint::of(&again));
    // Anything else is: parts, context, task, references.
    let mut others = Vec::new();
    let mut o = m.clone();
    o.parts.push(Part::text("and more"));
    others.push(o);
    let mut o = m.clone();
    o.context_id = Some("ctx-2".into());
    others.push(o);
    let mut o = m.clone();
    o.task_id = Some("t-1".into());
    others.push(o);
    let mut o = m.clone();
    o.reference_task_ids.clear();
    others.push(o);
    let mut o = m.clone();
    o.role = Role::Agent;
    others.push(o);
    for o in &others {
        assert_ne!(Fingerprint::of(o), Fingerprint::of(&m));
        assert_ne!(Fingerprint::of(o), stored);
        assert_ne!(stored, Fingerprint::of(o));
    }
    // The memory store's, hashed where the request is: equal to the copy's for the same
    // request and its retries, different for every other.
    let hashed = |m: &Message| Fingerprint::hashed_of(m);
    assert_eq!(hashed(&m), Fingerprint::of(&m));
    assert_eq!(Fingerprint::of(&m), hashed(&again));
    assert_eq!(hashed(&again), hashed(&m));
    for o in &others {
        assert_ne!(hashed(o), hashed(&m));
        assert_ne!(hashed(o), Fingerprint::of(&m));
        assert_ne!(Fingerprint::of(o), hashed(&m));
    }
}
