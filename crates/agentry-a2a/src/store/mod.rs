//! Task stores: where tasks and their push-notification configs live.
//!
//! [`MemoryStore`] is for tests and ephemeral agents (it evicts the oldest finished tasks past a
//! cap, so memory stays bounded); [`SqliteStore`] is the embedded default and keeps everything
//! across restarts. Both sit behind [`TaskStore`], which the server holds as `Arc<dyn TaskStore>`.

use std::future::Future;
use std::pin::Pin;

use crate::model::{PushNotificationConfig, Task, TaskState};

#[cfg(any(test, feature = "store-contract"))]
pub mod contract;
mod memory;
#[cfg(any(feature = "sqlite", feature = "server"))]
pub mod pending;
pub mod rows;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{Durability, SqliteStore};

/// A boxed future, as the object-safe store methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a store failure came from (a database error, an I/O error, a JSON error, ...).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A store failure, with what was being done and the error underneath.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database (or the file system under it) failed.
    #[error("store backend: {context}: {source}")]
    Backend {
        /// What was being done.
        context: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// A stored record does not decode.
    #[error("stored data is corrupt: {context}: {source}")]
    Corrupt {
        /// Which record.
        context: String,
        /// The decoding error.
        #[source]
        source: BoxError,
    },
    /// The store was shut down.
    #[error("store is closed")]
    Closed,
    /// The store does not keep this kind of record.
    #[error("this task store does not keep {0}")]
    Unsupported(&'static str),
}

impl StoreError {
    /// A backend failure while doing `context`.
    pub fn backend(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Backend {
            context: context.into(),
            source: source.into(),
        }
    }

    /// A record that does not decode, `context` saying which.
    pub fn corrupt(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Corrupt {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// A filter over stored tasks, newest status first (ties: newest id first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskQuery {
    /// Only tasks of this conversation.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is later than this RFC 3339 UTC instant.
    pub status_after: Option<String>,
    /// Only tasks of this owner ([`Task::owner`]); `None`: only tasks without one.
    pub owner: Option<String>,
    /// Matches to skip.
    pub offset: usize,
    /// Matches to return at most.
    pub limit: usize,
}

/// One page of a [`TaskQuery`], with the number of tasks the filter matches in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskPage {
    /// The page.
    pub tasks: Vec<Task>,
    /// How many tasks match in all.
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

/// Tasks per state, as [`TaskStore::count_by_state`] gives them.
pub type StateCounts = Vec<(TaskState, u64)>;

/// Persistence for tasks and push configs.
///
/// Writes take effect in the order of the calls, at call time: a store queues or applies the
/// write before returning its future, and the future resolves when the write is durable. So the
/// server can drop the future of an intermediate save (it still happens, in order) and await
/// only the ones a client will rely on, such as the end of a turn. The server never writes an
/// invalid state change, because changes go through [`Task::transition`].
pub trait TaskStore: Send + Sync + 'static {
    /// The task with this id.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>>;
    /// Writes the task (insert or replace).
    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The tasks matching `query`, newest status first.
    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>>;
    /// Adds or replaces (same id) a push config of a task.
    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// A task's push configs.
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

    /// Keeps push notifications until they are delivered (an outbox), in call order like
    /// every write, so a server that dies with deliveries pending sends them when it starts
    /// again: at least once, in order per task. The default keeps nothing (deliveries are
    /// then at most once, as with the in-memory store, which dies with its tasks anyway).
    fn enqueue_pushes<'a>(
        &'a self,
        items: &'a [OutgoingPush],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = items;
        Box::pin(async { Ok(()) })
    }

    /// Saves `task` and enqueues `pushes` (its notifications) together: a store with an
    /// outbox writes both in one transaction, so a crash keeps both or neither. The default
    /// queues the save, then the notifications, at call time.
    fn save_with_pushes<'a>(
        &'a self,
        task: &'a Task,
        pushes: &'a [OutgoingPush],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let saved = self.save(task);
        let queued = (!pushes.is_empty()).then(|| self.enqueue_pushes(pushes));
        Box::pin(async move {
            saved.await?;
            match queued {
                Some(q) => q.await,
                None => Ok(()),
            }
        })
    }

    /// The notifications enqueued and not yet acknowledged, oldest first: what a server
    /// starting delivers. A store shared by replicas gives those no other live replica is
    /// delivering, and holds them for this one from then on.
    fn pending_pushes(&self) -> BoxFuture<'_, Result<Vec<OutgoingPush>, StoreError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// For a store shared by replicas: up to `limit` pending notifications queued by
    /// replicas that stopped before delivering them, oldest first, held for this one from
    /// then on (of replicas asking at once, each notification goes to one). The server asks
    /// every [`TaskStore::sweep_every`]. A store of one process has none (the default).
    fn abandoned_pushes(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<OutgoingPush>, StoreError>> {
        let _ = limit;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Forgets a notification that was delivered (or given up on).
    fn ack_push<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = id;
        Box::pin(async { Ok(()) })
    }

    /// Claims idempotency key `key` of `scope` (the caller) for `claim` until `expires_ms`
    /// (Unix milliseconds). `None`: the key was free (or its claim had expired) and is now
    /// this claim's; otherwise the claim that holds it. Atomic: of concurrent claims of one
    /// key exactly one gets `None`. A new claim is written in call order like every write
    /// (it may resolve before it is committed): durable once a later write of the request
    /// is, so a restarted server knows every key it answered. The default keeps no keys (the
    /// server then refuses requests that carry one).
    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        claim: &'a KeyClaim,
        expires_ms: i64,
    ) -> BoxFuture<'a, Result<Option<KeyClaim>, StoreError>> {
        let _ = (scope, key, claim, expires_ms);
        Box::pin(async { Err(StoreError::Unsupported("idempotency keys")) })
    }

    /// What this store keeps of a keyed request to tell a retry from a different request
    /// ([`KeyClaim::fingerprint`]). The default copies the request's fields (a durable store
    /// writes their digest when it writes the claim); a store of one process may keep their
    /// hash alone, made without copying the request.
    fn fingerprint(&self, request: &crate::model::Message) -> Fingerprint {
        Fingerprint::of(request)
    }

    /// Frees a key whose request started nothing (it was refused, or its task never saved).
    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (scope, key);
        Box::pin(async { Err(StoreError::Unsupported("idempotency keys")) })
    }

    /// Takes the next turn of stored task `task_id` for this process, before its agent runs.
    /// A store shared by several processes (replicas) answers `false` while another live
    /// process runs a turn of the task (so one turn runs at a time, wherever the messages
    /// land); a store of one process always answers `true` (the default). The turn is held
    /// while the task is saved `submitted` or `working` and released by the save that ends it.
    fn take_turn<'a>(&'a self, task_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = task_id;
        Box::pin(async { Ok(true) })
    }

    /// Whether another live process runs a turn of task `task_id` now: then a task stored
    /// as `working` is not an orphan of a dead process, and this process must not recover
    /// it. `false` for a store of one process (the default).
    fn running_elsewhere<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = task_id;
        Box::pin(async { Ok(false) })
    }

    /// Tasks another replica was running when it died: held `submitted` or `working` by a
    /// process whose hold has lapsed, at most `limit`, with their owners. The server takes
    /// each over ([`TaskStore::take_turn`]) and recovers it, every
    /// [`TaskStore::sweep_every`], so a client waiting for a push notification hears of it.
    /// A store of one process has none (the default): its orphans are found when looked at.
    fn abandoned(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Abandoned>, StoreError>> {
        let _ = limit;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Whether finished tasks may be dropped while an idempotency key still names them (a
    /// store of one process with a cap on what it keeps, like [`MemoryStore`]). The server
    /// then refuses a repeat whose task is gone instead of running it a second time. `false`
    /// (the default): a claimed key's task that is missing was never saved (its server died
    /// between the claim and the task), and the repeat takes the key over.
    fn forgets_finished(&self) -> bool {
        false
    }

    /// How often the server asks for [`TaskStore::abandoned`] tasks; `None` (the default):
    /// never.
    fn sweep_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether the store answers: the server's readiness probe (`/readyz`). The default
    /// reads a task that does not exist.
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { self.get("").await.map(|_| ()) })
    }

    /// How many tasks are in each state, whoever owns them (the server's `/metrics`); `None`
    /// where the store cannot count cheaply (the default).
    fn count_by_state(&self) -> BoxFuture<'_, Result<Option<StateCounts>, StoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// Writes queued and not yet applied (the server's `/metrics`: a store falling behind);
    /// `None` for a store that writes at once (the default).
    fn pending_writes(&self) -> Option<usize> {
        None
    }

    /// Writes that failed since the store was opened (each failure is also its caller's
    /// error; a failed progress save has no caller waiting), for `/metrics`; `None` where the
    /// store does not count them (the default).
    fn write_errors(&self) -> Option<u64> {
        None
    }

    /// Idempotency keys forgotten before their window ended, to keep the store under a cap
    /// (a retry under such a key runs again), for `/metrics`; `None` for a store without a
    /// cap on keys (the default).
    fn keys_evicted_early(&self) -> Option<u64> {
        None
    }
}

/// A task left by a replica that died: its id and owner ([`Task::owner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The task.
    pub task_id: String,
    /// Who may see it.
    pub owner: Option<String>,
}

/// What an idempotency key is held for: the task its first request started (or continued)
/// and that request's [`Fingerprint`], to tell a retry from a different request under the
/// same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    /// The task the key's first request started or continued.
    pub task_id: String,
    /// What the request was.
    pub fingerprint: Fingerprint,
}

/// What tells a retry from a different request under one idempotency key: the message's
/// role, parts, context, task and references. Not its messageId (a client may make a new
/// one per attempt) nor its metadata (a new `traceparent` span per attempt).
///
/// Durable stores keep its [`digest`](Fingerprint::digest) (SHA-256 of those fields as
/// JSON). The digest is made only when asked for: a claim made from a request remembers the
/// request's fields, and two such claims compare field by field, so a store of one process
/// serializes nothing on the path of a new key (a SQLite store's recent claims compare
/// fields; the memory store keeps a 128-bit keyed hash of them). Under
/// valgrind the digest had been most of an idempotent send's extra instructions.
///
/// ```
/// use agentry_a2a::model::{Message, Part, Role};
/// use agentry_a2a::store::Fingerprint;
/// let m = Message::new(Role::User, vec![Part::text("draft the weekly mail")]);
/// let mut retry = m.clone();
/// retry.message_id = "another attempt".into();
/// assert_eq!(Fingerprint::of(&m), Fingerprint::of(&retry));
/// // As a durable store reads it back: equal to the request it was made from.
/// let stored = Fingerprint::from(Fingerprint::of(&m).digest().to_owned());
/// assert_eq!(stored, Fingerprint::of(&retry));
/// ```
#[derive(Clone)]
pub struct Fingerprint(Repr);

#[derive(Clone)]
enum Repr {
    Print(std::sync::Arc<Print>),
    /// As the memory store keeps it: [`Fingerprint::hash128`] alone.
    Hashed(u128),
}

struct Print {
    /// The request's fields; `None` for a digest read back from a store.
    request: Option<Printed>,
    /// Hex SHA-256, made on first use.
    digest: std::sync::OnceLock<String>,
}

#[derive(PartialEq, Hash, serde::Serialize)]
struct Printed(
    crate::model::Role,
    Vec<crate::model::Part>,
    Option<String>,
    Option<String>,
    Vec<String>,
);

impl Fingerprint {
    /// The fingerprint of `m`'s request (its fields copied; nothing hashed yet).
    pub fn of(m: &crate::model::Message) -> Self {
        Self::print(
            Some(Printed(
                m.role,
                m.parts.clone(),
                m.context_id.clone(),
                m.task_id.clone(),
                m.reference_task_ids.clone(),
            )),
            std::sync::OnceLock::new(),
        )
    }

    fn print(request: Option<Printed>, digest: std::sync::OnceLock<String>) -> Self {
        Self(Repr::Print(std::sync::Arc::new(Print { request, digest })))
    }

    /// The digest durable stores keep: lowercase hex SHA-256 of the fields as a JSON array
    /// (the same as every earlier version stored, so keys claimed before an upgrade still
    /// recognize their retries). Empty for a fingerprint the memory store kept as a hash
    /// (it never leaves that store).
    pub fn digest(&self) -> &str {
        let Repr::Print(p) = &self.0 else {
            return "";
        };
        p.digest.get_or_init(|| {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            // Fed to the hash as it is written (the hasher is an `io::Write`). Serializing the
            // model's own types cannot fail.
            let _ = serde_json::to_writer(&mut h, &p.request);
            crate::hex(&h.finalize())
        })
    }

    /// A 128-bit hash with this process's random seeds of the request's fields (see
    /// `fields_hash`), or keyed SipHash of the digest of one read back from a store: what
    /// the memory store keeps per claim instead of the request (no allocation that lives as
    /// long as the claim). Equal requests hash equal; two requests a caller did not choose
    /// to collide hash alike with a probability of about 2^-128.
    pub(crate) fn hash128(&self) -> u128 {
        match &self.0 {
            Repr::Hashed(h) => *h,
            Repr::Print(p) => match &p.request {
                Some(Printed(role, parts, context, task, refs)) => {
                    fields_hash(*role, parts, context, task, refs)
                }
                None => hash128(&(1u8, p.digest.get().map(String::as_str))),
            },
        }
    }

    /// A fingerprint known only by [`hash128`](Self::hash128) (the memory store's).
    pub(crate) fn hashed(h: u128) -> Self {
        Self(Repr::Hashed(h))
    }

    /// [`Fingerprint::of`]`(m)` as the memory store keeps it: the hash of `m`'s fields,
    /// hashed where they are (no copy of the request).
    pub(crate) fn hashed_of(m: &crate::model::Message) -> Self {
        Self::hashed(fields_hash(
            m.role,
            &m.parts,
            &m.context_id,
            &m.task_id,
            &m.reference_task_ids,
        ))
    }
}

/// What [`Fingerprint::hash128`] hashes of a request: one function for a request's own
/// fields and for a copy of them, so the two hash alike.
///
/// foldhash (two random seeds per process), not SipHash: a fingerprint is only compared
/// with another under the same caller's key, so requests chosen to collide could only
/// make that caller's own retry check wrong; a quarter of SipHash's cost here.
fn fields_hash(
    role: crate::model::Role,
    parts: &[crate::model::Part],
    context: &Option<String>,
    task: &Option<String>,
    refs: &[String],
) -> u128 {
    use std::hash::BuildHasher;
    static SEEDS: std::sync::OnceLock<[foldhash::quality::RandomState; 2]> =
        std::sync::OnceLock::new();
    let [a, b] = SEEDS.get_or_init(Default::default);
    let fields = (0u8, role, parts, context, task, refs);
    (u128::from(a.hash_one(fields)) << 64) | u128::from(b.hash_one(fields))
}

/// A task id: one of this server's (a lowercase UUID) as its 128 bits, anything else as is.
pub(crate) enum TaskRef {
    Uuid(u128),
    Other(Box<str>),
}

impl TaskRef {
    pub(crate) fn of(id: &str) -> Self {
        match uuid::Uuid::try_parse(id) {
            Ok(u) if id.len() == 36 && !id.bytes().any(|b| b.is_ascii_uppercase()) => {
                TaskRef::Uuid(u.as_u128())
            }
            _ => TaskRef::Other(id.into()),
        }
    }

    pub(crate) fn id(&self) -> String {
        match self {
            TaskRef::Uuid(u) => {
                let mut buf = uuid::Uuid::encode_buffer();
                uuid::Uuid::from_u128(*u)
                    .hyphenated()
                    .encode_lower(&mut buf)
                    .to_owned()
            }
            TaskRef::Other(s) => s.to_string(),
        }
    }
}

/// A caller's key as one map key: 128 bits of keyed SipHash over the pair (each string
/// hashed with its end marked, so `("a", "bc")` and `("ab", "c")` differ); two pairs meet
/// with a probability of 2^-128, and nobody outside the process knows the keys.
pub(crate) fn key_id(scope: &str, key: &str) -> u128 {
    hash128(&(scope, key))
}

/// The hash of maps keyed by [`key_id`]: foldhash with a random seed per map (what hashbrown
/// uses by default) over ids that are already keyed SipHash outputs.
pub(crate) type KeyHash = foldhash::quality::RandomState;

/// SipHash-1-3 with a 128-bit output, keyed with this process's random keys (from the
/// thread's CSPRNG, drawn once): one pass over `v` (two 64-bit SipHashes under two keys,
/// as before, cost twice the hashing for the same 128 bits).
pub(crate) fn hash128<T: std::hash::Hash + ?Sized>(v: &T) -> u128 {
    use siphasher::sip128::{Hasher128, SipHasher13};
    static KEYS: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    let &(k0, k1) = KEYS.get_or_init(|| {
        // Two v4 UUIDs: each half has 2 to 4 fixed bits, which the other UUID's half covers.
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let ((a0, a1), (b0, b1)) = (a.as_u64_pair(), b.as_u64_pair());
        (a0 ^ b1, a1 ^ b0)
    });
    let mut h = SipHasher13::new_with_keys(k0, k1);
    v.hash(&mut h);
    h.finish128().as_u128()
}

impl From<String> for Fingerprint {
    /// A digest as a store kept it.
    fn from(digest: String) -> Self {
        Self::print(None, digest.into())
    }
}

impl From<&str> for Fingerprint {
    fn from(digest: &str) -> Self {
        digest.to_owned().into()
    }
}

impl PartialEq for Fingerprint {
    /// Field by field when both were made from requests (JSON objects in parts compared as
    /// maps), by hash when either is the memory store's, else by digest.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Print(a), Repr::Print(b)) => match (&a.request, &b.request) {
                (Some(a), Some(b)) => a == b,
                _ => self.digest() == other.digest(),
            },
            _ => self.hash128() == other.hash128(),
        }
    }
}

impl Eq for Fingerprint {}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Hashed(h) => f
                .debug_tuple("Fingerprint")
                .field(&format_args!("{h:032x}"))
                .finish(),
            Repr::Print(_) => f.debug_tuple("Fingerprint").field(&self.digest()).finish(),
        }
    }
}

/// A push notification on its way: the body as sent, to the config's webhook with its
/// credentials.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingPush {
    /// Unique; what [`TaskStore::ack_push`] names.
    pub id: String,
    /// The task it is about.
    pub task_id: String,
    /// Where and with which credentials.
    pub config: PushNotificationConfig,
    /// The body, as it will be POSTed.
    pub body: Vec<u8>,
}

#[cfg(test)]
mod tests;
