//! The same contract checked on every store.

use super::*;
use crate::model::*;

fn task(id: &str, state: TaskState) -> Task {
    let mut t = Task::new(id.into(), "ctx".into());
    t.history
        .push(Message::text(Role::User, "hi").in_task(id, "ctx"));
    if state != TaskState::Submitted {
        t.transition(TaskStatus::now(state, None)).unwrap();
    }
    t
}

fn push(id: &str) -> PushNotificationConfig {
    PushNotificationConfig {
        id: Some(id.into()),
        url: format!("https://example.com/{id}"),
        token: None,
        authentication: None,
        body_version: None,
    }
}

async fn contract(store: &dyn TaskStore) {
    assert!(store.get("t1").await.unwrap().is_none());
    let mut t = task("t1", TaskState::Working);
    store.save(&t).await.unwrap();
    t.apply_artifact(&Artifact::new(Some("a"), vec![Part::text("x")]), false);
    store.save(&t).await.unwrap();
    assert_eq!(store.get("t1").await.unwrap().unwrap(), t);

    store.set_push("t1", &push("a")).await.unwrap();
    store.set_push("t1", &push("b")).await.unwrap();
    let mut a2 = push("a");
    a2.token = Some("new".into());
    store.set_push("t1", &a2).await.unwrap();
    let list = store.list_push("t1").await.unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].token.as_deref(), Some("new"));
    assert!(store.delete_push("t1", "b").await.unwrap());
    assert!(!store.delete_push("t1", "b").await.unwrap());
    assert_eq!(store.list_push("t1").await.unwrap().len(), 1);
    assert!(store.list_push("other").await.unwrap().is_empty());

    listing(store).await;
    idempotency_keys(store).await;
}

/// Claims of idempotency keys: first wins, scopes apart, release frees, expiry frees, and
/// of many concurrent claims of one key exactly one wins.
async fn idempotency_keys(store: &dyn TaskStore) {
    let claim = |t: &str, f: &str| KeyClaim {
        task_id: t.into(),
        fingerprint: f.into(),
    };
    let later = crate::time::now_unix_millis() + 60_000;
    let first = claim("task-1", "f1");
    assert_eq!(
        store.claim_key("alice", "k", &first, later).await.unwrap(),
        None
    );
    // A retry, or another request under the same key: the first claim comes back.
    for other in [claim("task-2", "f1"), claim("task-2", "f2")] {
        assert_eq!(
            store.claim_key("alice", "k", &other, later).await.unwrap(),
            Some(first.clone())
        );
    }
    // Another caller's key of the same name is its own.
    assert_eq!(
        store
            .claim_key("bob", "k", &claim("task-3", "f1"), later)
            .await
            .unwrap(),
        None
    );
    // Released: the next claim takes it.
    store.release_key("alice", "k").await.unwrap();
    let second = claim("task-4", "f4");
    assert_eq!(
        store.claim_key("alice", "k", &second, later).await.unwrap(),
        None
    );
    assert_eq!(
        store.claim_key("alice", "k", &first, later).await.unwrap(),
        Some(second.clone())
    );
    // Expired: taken again.
    let gone = crate::time::now_unix_millis() - 1;
    assert_eq!(
        store.claim_key("alice", "old", &first, gone).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .claim_key("alice", "old", &second, later)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .claim_key("alice", "old", &first, later)
            .await
            .unwrap(),
        Some(claim("task-4", "f4"))
    );
    // 32 concurrent claims of one key: one winner, and every loser sees the winner's claim.
    let claims: Vec<KeyClaim> = (0..32).map(|i| claim(&format!("c{i}"), "f")).collect();
    let results = futures_util::future::join_all(
        claims
            .iter()
            .map(|c| store.claim_key("carol", "race", c, later)),
    )
    .await;
    let winners: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, Ok(None)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Ok(Some(held)) = r {
            assert_eq!(held, &claims[winners[0]]);
        }
    }
    // Writes keep call order: this one resolved, every claim before it is stored too.
    store.release_key("nobody", "none").await.unwrap();
}

/// Filters, newest-first order and paging of `list`.
async fn listing(store: &dyn TaskStore) {
    let at = |id: &str, ctx: &str, state: TaskState, ms: i64| {
        let mut t = task(id, state);
        t.context_id = ctx.into();
        t.status.timestamp = Some(crate::time::format_unix_millis(ms));
        t
    };
    for t in [
        at("l1", "c1", TaskState::Completed, 1_000),
        at("l2", "c1", TaskState::Working, 3_000),
        at("l3", "c2", TaskState::Completed, 2_000),
        at("l4", "c1", TaskState::Completed, 4_000),
    ] {
        store.save(&t).await.unwrap();
    }
    let ids = |p: &TaskPage| p.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    let q = |ctx: Option<&str>, state, after: Option<i64>, offset, limit| TaskQuery {
        context_id: ctx.map(str::to_owned),
        state,
        status_after: after.map(crate::time::format_unix_millis),
        owner: None,
        offset,
        limit,
    };
    // A task with an owner is listed only for that owner, and keeps its owner.
    let mut owned = at("o1", "c1", TaskState::Completed, 5_000);
    owned.owner = Some("bearer:alice".into());
    store.save(&owned).await.unwrap();
    assert_eq!(
        store.get("o1").await.unwrap().unwrap().owner.as_deref(),
        Some("bearer:alice")
    );
    // A parked task stays parked (a restarted server must not take it for an orphan).
    let mut parked = at("p1", "c9", TaskState::Working, 5_500);
    parked.parked = true;
    store.save(&parked).await.unwrap();
    assert!(store.get("p1").await.unwrap().unwrap().parked);
    let listed = store
        .list(&TaskQuery {
            context_id: Some("c9".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.tasks[0].parked);
    let mine = TaskQuery {
        owner: Some("bearer:alice".into()),
        limit: 10,
        ..Default::default()
    };
    let p = store.list(&mine).await.unwrap();
    assert_eq!((ids(&p), p.total), (vec!["o1".into()], 1));
    let p = store.list(&q(Some("c1"), None, None, 0, 10)).await.unwrap();
    assert_eq!(
        (ids(&p), p.total),
        (vec!["l4".into(), "l2".into(), "l1".into()], 3)
    );
    let p = store.list(&q(Some("c1"), None, None, 1, 1)).await.unwrap();
    assert_eq!((ids(&p), p.total), (vec!["l2".into()], 3));
    let p = store
        .list(&q(None, Some(TaskState::Completed), Some(1_500), 0, 10))
        .await
        .unwrap();
    assert_eq!((ids(&p), p.total), (vec!["l4".into(), "l3".into()], 2));
    let p = store
        .list(&q(Some("none"), None, None, 0, 10))
        .await
        .unwrap();
    assert_eq!((ids(&p), p.total), (vec![], 0));
}

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

/// The push outbox: kept in order until acknowledged, across a reopen (a restart); the
/// credentials of the config come back with it (the webhook needs them).
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
    {
        let s = SqliteStore::open(&path).unwrap();
        let items: Vec<_> = (0..4).map(push).collect();
        // Not awaited: queued at call time, like the server's intermediate writes.
        drop(s.enqueue_pushes(&items[..2]));
        s.enqueue_pushes(&items[2..]).await.unwrap();
        s.ack_push("p1").await.unwrap();
        let pending = s.pending_pushes().await.unwrap();
        assert_eq!(
            pending.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["p0", "p2", "p3"]
        );
    }
    let s = SqliteStore::open(&path).unwrap();
    let pending = s.pending_pushes().await.unwrap();
    assert_eq!(pending, vec![push(0), push(2), push(3)]);
    // A state change and its notification are written together.
    let t = task("t1", TaskState::Working);
    s.save_with_pushes(&t, &[push(7)]).await.unwrap();
    assert_eq!(
        s.get("t1").await.unwrap().unwrap().state(),
        TaskState::Working
    );
    let pending = s.pending_pushes().await.unwrap();
    assert_eq!(pending.last(), Some(&push(7)));
    for p in &pending {
        s.ack_push(&p.id).await.unwrap();
    }
    assert!(s.pending_pushes().await.unwrap().is_empty());
    // The in-memory store keeps none.
    let m = MemoryStore::default();
    m.enqueue_pushes(&[push(9)]).await.unwrap();
    assert!(m.pending_pushes().await.unwrap().is_empty());
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
