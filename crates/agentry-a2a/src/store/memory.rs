//! An in-memory store that forgets the oldest finished tasks past a cap.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::{BoxFuture, KeyClaim, StoreError, TaskPage, TaskQuery, TaskStore};
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
    /// Idempotency keys by (scope, key), with their expiry (Unix ms).
    /// One allocation per key ([`key_id`]), shared with `key_order`.
    keys: HashMap<Arc<str>, (KeyClaim, i64), KeyHash>,
    /// Keys in the order they were claimed, with each claim's expiry: with one window per
    /// server, also the order they expire in, so the oldest is evicted first in O(1) and
    /// without looking it up.
    key_order: VecDeque<(Arc<str>, i64)>,
}

/// The key map's hash: foldhash with a random seed per map (what hashbrown uses by default).
/// Keys are chosen by clients, so the seed is random (a fixed one would let a client send
/// keys that collide); SipHash, std's default, cost three times as much on every claim.
type KeyHash = foldhash::quality::RandomState;

/// Keys held at most; past it, the oldest claims are forgotten first.
const MAX_KEYS: usize = 100_000;

/// A caller's key as one map key: the scope's length first, so that no two (scope, key)
/// pairs meet (`("a", "bc")` and `("ab", "c")`).
fn key_id(scope: &str, key: &str) -> Arc<str> {
    // The length in decimal, without the formatting machinery (a claim's hot path).
    let mut digits = [0u8; 20];
    let (mut n, mut at) = (scope.len(), digits.len());
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let parts: [&[u8]; 4] = [&digits[at..], b":", scope.as_bytes(), key.as_bytes()];
    // Written on the stack and copied once into the shared allocation (a `String` first
    // would be a second allocation per claim).
    let mut buf = [0u8; 384];
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > buf.len() {
        return Arc::from(String::from_utf8(parts.concat()).unwrap_or_default());
    }
    let mut end = 0;
    for p in parts {
        buf[end..end + p.len()].copy_from_slice(p);
        end += p.len();
    }
    // Valid: ASCII digits and ':' joined to two strings.
    Arc::from(std::str::from_utf8(&buf[..end]).unwrap_or_default())
}

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

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        claim: &'a KeyClaim,
        expires_ms: i64,
    ) -> BoxFuture<'a, Result<Option<KeyClaim>, StoreError>> {
        let now = crate::time::now_unix_millis();
        let id = key_id(scope, key);
        let mut guard = self.lock();
        let g = &mut *guard;
        // One hash of the key, for the lookup and the claim.
        let held = match g.keys.entry(id) {
            Entry::Occupied(e) if e.get().1 > now => Some(e.get().0.clone()),
            Entry::Occupied(mut e) => {
                e.insert((claim.clone(), expires_ms));
                g.key_order.push_back((e.key().clone(), expires_ms));
                None
            }
            Entry::Vacant(e) => {
                g.key_order.push_back((e.key().clone(), expires_ms));
                e.insert((claim.clone(), expires_ms));
                None
            }
        };
        if held.is_none() {
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
        self.lock().keys.remove(&*key_id(scope, key));
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scope's length leads the id, as `format!` wrote it before (no two (scope, key)
    /// pairs meet), at every number of digits.
    #[test]
    fn a_key_id_is_the_scope_length_the_scope_and_the_key() {
        for scope in ["", "a", "jwt:bench-user", &"s".repeat(10), &"s".repeat(123)] {
            let id = key_id(scope, "k-1");
            assert_eq!(&*id, format!("{}:{scope}k-1", scope.len()));
        }
        assert_ne!(key_id("a", "bc"), key_id("ab", "c"));
        // Past the stack buffer, and not ASCII.
        let (scope, key) = ("ü".repeat(150), "k".repeat(255));
        let id = key_id(&scope, &key);
        assert_eq!(&*id, format!("{}:{scope}{key}", scope.len()));
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
