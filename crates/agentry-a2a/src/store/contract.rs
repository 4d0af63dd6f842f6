//! The behaviour every [`TaskStore`] must have, as a test any implementation can run
//! (feature `store-contract`): agentry's own stores run it, and so can a store of yours.
//!
//! [`check`] panics, as a test does, at the first broken rule. Give it a store that holds
//! nothing yet (its ids are fixed: `t1`, `l1`..`l4`, `o1`, `p1`).

use super::*;
use crate::model::*;

/// A task in `state` (by valid transitions from `submitted`), with one user message.
pub fn task(id: &str, state: TaskState) -> Task {
    let mut t = Task::new(id.into(), "ctx".into());
    t.history
        .push(Message::text(Role::User, "hi").in_task(id, "ctx"));
    if state != TaskState::Submitted {
        t.transition(TaskStatus::now(state, None)).unwrap();
    }
    t
}

/// A notification `id` of task `task_id` for the webhook `https://example.com/hook`, its
/// body `{"n": n}`.
pub fn notification(id: &str, task_id: &str, n: usize) -> OutgoingPush {
    OutgoingPush {
        id: id.to_owned(),
        task_id: task_id.to_owned(),
        config: PushNotificationConfig {
            id: Some("hook".into()),
            url: "https://example.com/hook".into(),
            token: None,
            authentication: None,
            body_version: None,
        },
        body: format!("{{\"n\":{n}}}").into_bytes(),
    }
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

/// Runs the whole contract on `store`: reads and writes, push configs, listing (filters,
/// order, paging, owners, parked tasks) and idempotency keys (including 32 concurrent
/// claims of one key).
pub async fn check(store: &dyn TaskStore) {
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
    // Scope and key are kept apart: ("al", "icek") is not ("alice", "k").
    assert_eq!(
        store
            .claim_key("al", "icek", &claim("task-5", "f1"), later)
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

/// The push outbox of a store that keeps one: notifications pending in call order (also
/// when the enqueueing future is dropped) until acknowledged, with their config's
/// credentials, and a state change saved together with its notification. Give it a store
/// whose outbox is empty.
pub async fn check_outbox(store: &dyn TaskStore) {
    let push = |n: usize| {
        let mut p = notification(&format!("outbox-p{n}"), "outbox-t1", n);
        p.config.token = Some("tok".into());
        p
    };
    let items: Vec<_> = (0..4).map(push).collect();
    // Not awaited: queued at call time, like the server's intermediate writes.
    drop(store.enqueue_pushes(&items[..2]));
    store.enqueue_pushes(&items[2..]).await.unwrap();
    store.ack_push("outbox-p1").await.unwrap();
    let pending = store.pending_pushes().await.unwrap();
    assert_eq!(pending, vec![push(0), push(2), push(3)]);
    let t = task("outbox-t1", TaskState::Working);
    store.save_with_pushes(&t, &[push(7)]).await.unwrap();
    assert_eq!(
        store.get("outbox-t1").await.unwrap().unwrap().state(),
        TaskState::Working
    );
    let pending = store.pending_pushes().await.unwrap();
    assert_eq!(pending.last(), Some(&push(7)));
    for p in &pending {
        store.ack_push(&p.id).await.unwrap();
    }
    assert!(store.pending_pushes().await.unwrap().is_empty());
}

/// For a store that queues its writes ([`TaskStore::pending_writes`]): while its writer is
/// stalled, a task saved again and again waits as one write, not one per save, but the
/// notifications of the saves it superseded keep their places; when the writer goes on,
/// every caller hears its save succeeded, the newest snapshot is what is stored, and every
/// notification is pending in call order (those queued on their own between the saves
/// included).
///
/// `stall` stops the writer from finishing a write of the task `coalesce-t` (which exists
/// when it is called: a lock on its row, or the database's write lock); `lift` is given what
/// `stall` returned and ends the stall. Give it a store whose outbox is empty.
pub async fn check_saves_coalesce<S>(
    store: &dyn TaskStore,
    stall: impl AsyncFnOnce() -> S,
    lift: impl AsyncFnOnce(S),
) {
    const SAVES: usize = 2000;
    // Saves that owe a notification (a state change a webhook hears of); the rest are
    // progress. One notification is queued on its own, as the server does between saves.
    const NOTIFYING: [usize; 3] = [500, 1000, 1500];
    const ON_ITS_OWN: usize = 700;
    let version = |t: &mut Task, v: usize| {
        t.metadata = Some(Metadata::from_iter([("v".to_owned(), v.into())]).into());
    };
    let push = |n: usize| notification(&format!("coalesce-p{n:05}"), "coalesce-t", n);
    let mut t = task("coalesce-t", TaskState::Working);
    store.save(&t).await.unwrap();
    let stalled = stall().await;
    // The first save goes to the writer, which is stalled on it.
    version(&mut t, 0);
    let first_push = [push(0)];
    let first = store.save_with_pushes(&t, &first_push);
    let taken = async {
        while store.pending_writes() != Some(0) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), taken)
        .await
        .expect("the writer takes the first save");
    let mut versions = Vec::with_capacity(SAVES);
    for v in 1..SAVES {
        let mut t = t.clone();
        version(&mut t, v);
        let pushes = if NOTIFYING.contains(&v) {
            vec![push(v)]
        } else {
            Vec::new()
        };
        versions.push((t, pushes));
    }
    let own = [push(ON_ITS_OWN)];
    // Queued at call time, like the server's progress saves.
    let mut saves = Vec::with_capacity(SAVES);
    for (t, p) in &versions {
        saves.push(store.save_with_pushes(t, p));
        if t.metadata.as_ref().and_then(|m| m.get("v")) == Some(&ON_ITS_OWN.into()) {
            saves.push(store.enqueue_pushes(&own));
        }
    }
    let other = task("coalesce-u", TaskState::Working);
    let other_saved = store.save(&other);
    assert_eq!(
        store.pending_writes(),
        Some(NOTIFYING.len() + 3),
        "{SAVES} saves of one task wait as one write, with the notifications of the saves it \
         superseded, the one queued on its own, and another task's save"
    );
    lift(stalled).await;
    first.await.unwrap();
    for s in saves {
        s.await.unwrap();
    }
    other_saved.await.unwrap();
    let stored = store.get("coalesce-t").await.unwrap().unwrap();
    let v = stored.metadata.as_ref().and_then(|m| m.get("v"));
    assert_eq!(
        v,
        Some(&(SAVES - 1).into()),
        "the newest snapshot is stored"
    );
    assert!(store.get("coalesce-u").await.unwrap().is_some());
    let pending = store.pending_pushes().await.unwrap();
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    let expected: Vec<String> = [0, 500, ON_ITS_OWN, 1000, 1500]
        .into_iter()
        .map(|n| push(n).id)
        .collect();
    assert_eq!(ids, expected, "every notification, in call order");
    for p in &pending {
        store.ack_push(&p.id).await.unwrap();
    }
}
