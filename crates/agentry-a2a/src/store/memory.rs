//! An in-memory store that forgets the oldest finished tasks past a cap.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{
    BoxFuture, KeyClaim, KeyHash, StoreError, TaskPage, TaskQuery, TaskRef, TaskStore, key_id,
};
use crate::model::{PushNotificationConfig, Task};

/// Tasks in a map; finished tasks beyond `max_finished` are evicted oldest first, so a
/// long-running server does not grow without bound (the JS SDK's store never drops any).
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_finished: usize,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Task>,
    push: HashMap<String, Vec<PushNotificationConfig>>,
    finished: VecDeque<String>,
    /// Idempotency keys by [`key_id`], with their claims and expiry (Unix ms). A claim
    /// holds no allocation of its own (ids as numbers, the request as a hash): at a busy
    /// server's 100,000 claims, a few strings per claim kept alive until evicted cost ~15%
    /// of a governed send's time in memory and cache traffic (docs/BENCHMARKS.md).
    keys: HashMap<u128, (Claim, i64), KeyHash>,
    /// Keys in the order they were claimed, with each claim's expiry: with one window per
    /// server, also the order they expire in, so the oldest is evicted first in O(1) and
    /// without looking it up.
    key_order: VecDeque<(u128, i64)>,
    /// Claims forgotten before they expired because the map was full.
    evicted_early: u64,
}

/// A claim as kept: the task and the request's [`Fingerprint::hash128`].
struct Claim {
    task: TaskRef,
    fingerprint: u128,
}

/// Keys held at most; past it, the oldest claims are forgotten first.
const MAX_KEYS: usize = 100_000;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(10_000)
    }
}

impl MemoryStore {
    /// A store that keeps at most `max_finished` terminal tasks.
    pub fn new(max_finished: usize) -> Self {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            max_finished,
        }
    }

    /// How many tasks are held now.
    pub fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Whether it holds no task.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the maps consistent (each update is
        // a single insert), so a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TaskStore for MemoryStore {
    fn forgets_finished(&self) -> bool {
        true
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        let t = self.lock().tasks.get(id).cloned();
        Box::pin(async move { Ok(t) })
    }

    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut g = self.lock();
        let newly_finished = task.state().is_terminal()
            && !g
                .tasks
                .get(&task.id)
                .is_some_and(|t| t.state().is_terminal());
        g.tasks.insert(task.id.clone(), task.clone());
        if newly_finished {
            g.finished.push_back(task.id.clone());
            while g.finished.len() > self.max_finished {
                if let Some(old) = g.finished.pop_front() {
                    g.tasks.remove(&old);
                    g.push.remove(&old);
                }
            }
        }
        drop(g);
        Box::pin(async { Ok(()) })
    }

    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>> {
        let g = self.lock();
        let mut hits: Vec<&Task> = g
            .tasks
            .values()
            .filter(|t| super::matches(query, t))
            .collect();
        hits.sort_by(|a, b| {
            (b.status.timestamp.as_deref(), &b.id).cmp(&(a.status.timestamp.as_deref(), &a.id))
        });
        let page = TaskPage {
            total: hits.len(),
            tasks: hits
                .into_iter()
                .skip(query.offset)
                .take(query.limit)
                .cloned()
                .collect(),
        };
        drop(g);
        Box::pin(async move { Ok(page) })
    }

    fn count_by_state(&self) -> BoxFuture<'_, Result<Option<super::StateCounts>, StoreError>> {
        let mut counts: Vec<(crate::model::TaskState, u64)> = Vec::new();
        for t in self.lock().tasks.values() {
            match counts.iter_mut().find(|(s, _)| *s == t.state()) {
                Some((_, n)) => *n += 1,
                None => counts.push((t.state(), 1)),
            }
        }
        Box::pin(async move { Ok(Some(counts)) })
    }

    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut g = self.lock();
        let list = g.push.entry(task_id.to_owned()).or_default();
        match list.iter_mut().find(|c| c.id == config.id) {
            Some(c) => *c = config.clone(),
            None => list.push(config.clone()),
        }
        drop(g);
        Box::pin(async { Ok(()) })
    }

    fn list_push<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PushNotificationConfig>, StoreError>> {
        let l = self.lock().push.get(task_id).cloned().unwrap_or_default();
        Box::pin(async move { Ok(l) })
    }

    fn delete_push<'a>(
        &'a self,
        task_id: &'a str,
        config_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut g = self.lock();
        let deleted = match g.push.get_mut(task_id) {
            Some(list) => {
                let before = list.len();
                list.retain(|c| c.id.as_deref() != Some(config_id));
                before != list.len()
            }
            None => false,
        };
        drop(g);
        Box::pin(async move { Ok(deleted) })
    }

    fn keys_evicted_early(&self) -> Option<u64> {
        Some(self.lock().evicted_early)
    }

    fn fingerprint(&self, request: &crate::model::Message) -> super::Fingerprint {
        // Its hash is all this store keeps: made from the request as it is.
        super::Fingerprint::hashed_of(request)
    }

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        claim: &'a KeyClaim,
        expires_ms: i64,
    ) -> BoxFuture<'a, Result<Option<KeyClaim>, StoreError>> {
        let now = crate::time::now_unix_millis();
        let id = key_id(scope, key);
        // Made before the lock is taken (the request's hash is most of a claim's work); a
        // repeat, which does not need it, is rare.
        let record = Claim {
            task: TaskRef::of(&claim.task_id),
            fingerprint: claim.fingerprint.hash128(),
        };
        let mut guard = self.lock();
        let g = &mut *guard;
        if g.keys.capacity() == 0 {
            // Room for the cap at the first claim (~14 MB of address space, touched as it
            // fills): a busy server reaches the cap within seconds, and each doubling on the
            // way would move every claim while holding the store's lock (~5 MB at the last).
            g.keys.reserve(MAX_KEYS + 1);
            g.key_order.reserve(MAX_KEYS + 1);
        }
        // One hash of the key, for the lookup and the claim.
        let held = match g.keys.entry(id) {
            Entry::Occupied(e) if e.get().1 > now => {
                let (c, _) = e.get();
                Some(KeyClaim {
                    task_id: c.task.id(),
                    fingerprint: super::Fingerprint::hashed(c.fingerprint),
                })
            }
            Entry::Occupied(mut e) => {
                e.insert((record, expires_ms));
                None
            }
            Entry::Vacant(e) => {
                e.insert((record, expires_ms));
                None
            }
        };
        if held.is_none() {
            g.key_order.push_back((id, expires_ms));
            // Expired claims at the front go, then the oldest while over the cap. A key
            // released or claimed again after it expired is in the order twice: its older
            // entry removes the key only while it still holds that claim (same expiry).
            while let Some(&(_, until)) = g.key_order.front() {
                if g.key_order.len() <= MAX_KEYS && until > now {
                    break;
                }
                if let Some((old, until)) = g.key_order.pop_front()
                    && g.keys.get(&old).is_some_and(|(_, u)| *u == until)
                {
                    g.keys.remove(&old);
                    if until > now {
                        g.evicted_early += 1;
                        if g.evicted_early == 1 {
                            tracing::warn!(
                                "the memory store holds {MAX_KEYS} idempotency keys and now \
                                 forgets the oldest before their window ends: a retry under \
                                 one runs again (a durable store keeps every key for its \
                                 window; a2a_idempotency_keys_evicted_total counts them)"
                            );
                        }
                    }
                }
            }
        }
        drop(guard);
        Box::pin(async move { Ok(held) })
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().keys.remove(&key_id(scope, key));
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs that join to the same text are different keys; a task id comes back as it
    /// went in, as a number or not.
    #[test]
    fn key_ids_and_task_ids() {
        assert_ne!(key_id("a", "bc"), key_id("ab", "c"));
        assert_eq!(key_id("a", "bc"), key_id("a", "bc"));
        let made = crate::new_id();
        assert!(matches!(TaskRef::of(&made), TaskRef::Uuid(_)));
        for id in [
            made.as_str(),
            "t-1",
            "",
            &made.to_uppercase(),
            &made.replace('-', ""),
        ] {
            assert_eq!(TaskRef::of(id).id(), id);
        }
    }

    /// Past the cap, the oldest claims are forgotten and counted as early (what an operator
    /// sees in `/metrics`), unlike claims that had expired anyway.
    #[tokio::test]
    async fn claims_forgotten_at_the_cap_are_counted() {
        let store = MemoryStore::default();
        let claim = KeyClaim {
            task_id: "t".into(),
            fingerprint: "f".into(),
        };
        let now = crate::time::now_unix_millis();
        let later = now + 60_000;
        store.claim_key("s", "old", &claim, now - 1).await.unwrap();
        for i in 0..MAX_KEYS + 2 {
            store
                .claim_key("s", &i.to_string(), &claim, later)
                .await
                .unwrap();
        }
        assert_eq!(
            store.keys_evicted_early(),
            Some(2),
            "keys 0 and 1, not the expired one"
        );
        let last = (MAX_KEYS + 1).to_string();
        assert!(
            store
                .claim_key("s", &last, &claim, later)
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            store.claim_key("s", "0", &claim, later).await.unwrap(),
            None
        );
    }

    /// A key claimed again after its claim expired is in the claim order twice: the older
    /// entry, when it leaves, must not take the newer claim with it.
    #[tokio::test]
    async fn an_expired_claims_entry_does_not_evict_the_claim_that_replaced_it() {
        let store = MemoryStore::default();
        let claim = |t: &str| KeyClaim {
            task_id: t.into(),
            fingerprint: "f".into(),
        };
        let now = crate::time::now_unix_millis();
        let (past, later) = (now - 1, now + 60_000);
        assert_eq!(
            store.claim_key("s", "k", &claim("a"), past).await.unwrap(),
            None
        );
        assert_eq!(
            store.claim_key("s", "k", &claim("b"), later).await.unwrap(),
            None
        );
        // Another key's claim runs the eviction again; "k" still holds "b".
        assert_eq!(
            store
                .claim_key("s", "k2", &claim("c"), later)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store.claim_key("s", "k", &claim("d"), later).await.unwrap(),
            Some(claim("b"))
        );
        // Released and claimed again: the same holds.
        store.release_key("s", "k").await.unwrap();
        assert_eq!(
            store
                .claim_key("s", "k", &claim("e"), later + 1)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store.claim_key("s", "k", &claim("f"), later).await.unwrap(),
            Some(claim("e"))
        );
        // "a" (expired) left the order; "b" (released, not yet expired) stays until it expires.
        let order: Vec<i64> = store.lock().key_order.iter().map(|(_, u)| *u).collect();
        assert_eq!(order, [later, later, later + 1]);
    }
}
