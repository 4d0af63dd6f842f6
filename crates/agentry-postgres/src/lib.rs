//! Agentry on PostgreSQL: the state several agentry replicas share.
//!
//! On one machine agentry keeps tasks and checkpoints in SQLite files. Replicas behind a load
//! balancer need one place they all read and write: [`Database`] connects to a PostgreSQL
//! database, applies agentry's migrations (once, under an advisory lock, whichever replica
//! starts first) and hands out stores per agent. The agent's name is a namespace, as the
//! SQLite file name is on one machine:
//!
//! - [`PgTaskStore`]: the A2A task store (tasks, push configs, the push outbox,
//!   idempotency keys), an [`agentry_a2a::store::TaskStore`];
//! - [`PgRunStore`]: core's run store (checkpoints of ReAct runs and workflows), an
//!   [`agentry_core::runs::RunStore`];
//! - [`PgAuditLog`]: the governance audit trail, one HMAC chain the replicas append to, an
//!   [`agentry_governance::AuditSink`].
//!
//! Writes keep the task store's contract: queued at call time and applied in call order by
//! one writer connection, which commits whatever is waiting in one transaction (a group
//! commit), so a resolved write is committed (as durable as the server's
//! `synchronous_commit` makes it) and throughput under load does not pay a commit per
//! request. Reads go to a few other connections. A lost connection is made again on next
//! use, and a group cut off by one is applied again on a new connection (every write is an
//! upsert or a delete, so applying one twice changes nothing).
//!
//! A replica running a turn of a task holds it (a lease, renewed every third of
//! [`Options::lease`]): other replicas do not take it for an orphan of a dead process, do
//! not start a second turn of it, and cannot overwrite it; when the replica dies its holds
//! lapse and any replica recovers the task. One turn of a task runs at a time, wherever its
//! messages land.
//!
//! Idempotency keys are decided by the database (`INSERT .. ON CONFLICT`), not in memory as
//! the single-process SQLite store does: of concurrent claims of one key, on any number of
//! replicas, exactly one wins.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentry_postgres::Error> {
//! let db = agentry_postgres::Database::connect("postgres://agentry@db.internal/agentry").await?;
//! let tasks = db.task_store("researcher");
//! let runs = db.run_store("researcher");
//! # Ok(()) }
//! ```
//!
//! TLS to the database is asked for in the URL, with libpq's names, and always verified
//! (see [`tls`]: `require` checks the server's certificate and name too):
//! `postgres://agentry@db.internal/agentry?sslmode=verify-full&sslrootcert=/etc/agentry/db-ca.pem`.
#![warn(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

pub mod audit;
mod conn;
mod runs;
mod tasks;
pub mod tls;
mod writer;

pub use audit::PgAuditLog;
pub use runs::PgRunStore;
pub use tasks::PgTaskStore;
pub use tls::TlsError;

use conn::Conn;

/// Read connections per [`Database`] by default (each pipelines the queries of concurrent
/// callers): [`Options::readers`].
const READERS: usize = 4;

/// Connecting, or preparing the database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL (or key=value string) does not parse.
    #[error("invalid PostgreSQL connection string")]
    Url(#[source] tokio_postgres::Error),
    /// The TLS the URL asks for cannot be set up (its `sslrootcert` cannot be read).
    #[error("cannot set up TLS to PostgreSQL")]
    Tls(#[source] TlsError),
    /// The database could not be reached, or refused the credentials.
    #[error("cannot connect to PostgreSQL at {target}")]
    Connect {
        /// Host, port and database (never the password).
        target: String,
        /// Why.
        #[source]
        source: DbError,
    },
    /// agentry's tables could not be made or brought up to date.
    #[error("cannot apply agentry's migrations to {target}")]
    Migrate {
        /// Host, port and database.
        target: String,
        /// Why.
        #[source]
        source: DbError,
    },
}

/// A PostgreSQL error whose message includes the server's (tokio-postgres says only
/// "db error" and keeps the server's message as its source), or a failure of agentry's
/// own around it.
#[derive(Debug, Clone)]
pub struct DbError(Repr);

#[derive(Debug, Clone)]
enum Repr {
    Pg(Arc<tokio_postgres::Error>),
    Other(&'static str),
}

impl DbError {
    /// The driver's error underneath, if the driver failed.
    pub fn inner(&self) -> Option<&tokio_postgres::Error> {
        match &self.0 {
            Repr::Pg(e) => Some(e),
            Repr::Other(_) => None,
        }
    }

    pub(crate) fn other(what: &'static str) -> Self {
        DbError(Repr::Other(what))
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError(Repr::Pg(Arc::new(e)))
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = match &self.0 {
            Repr::Pg(e) => e,
            Repr::Other(what) => return f.write_str(what),
        };
        write!(f, "{e}")?;
        if let Some(db) = e.as_db_error() {
            write!(f, ": {} ({})", db.message(), db.code().code())?;
        } else if let Some(cause) = std::error::Error::source(&**e) {
            write!(f, ": {cause}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner().and_then(std::error::Error::source)
    }
}

/// See [`Database::queue_grace`].
pub const QUEUE_GRACE_LEASES: u32 = 10;

/// How a [`Database`] behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How long a replica's hold on a task it runs lasts unless renewed (it renews every
    /// third of it): after a replica dies, its running tasks are taken for orphans this much
    /// later. Default 30 s.
    pub lease: Duration,
    /// Connections for reads, beside the one writer (default 4). Each pipelines the queries
    /// of concurrent callers, so a few go a long way; more help when reads wait on a slow
    /// database, at one PostgreSQL backend each.
    pub readers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease: Duration::from_secs(30),
            readers: READERS,
        }
    }
}

impl Options {
    /// These options with `n` read connections (at least 1).
    pub fn readers(mut self, n: usize) -> Self {
        self.readers = n.max(1);
        self
    }

    /// These options with `lease` as the hold's lifetime (at least 300 ms).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(300));
        self
    }
}

/// One PostgreSQL database, shared by every agent of a process (and by every replica):
/// a writer connection, a few read connections, and the stores made from them. Cheap to
/// clone; the connections close when the last clone and store are dropped.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    at: conn::Endpoint,
    target: String,
    /// This replica, as the tasks it holds name it.
    replica: Arc<str>,
    lease: Duration,
    writer: agentry_a2a::store::pending::Writes<writer::Op, writer::Applied>,
    /// Writes the writer failed to apply.
    write_errors: Arc<std::sync::atomic::AtomicU64>,
    readers: Vec<Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`, or a
    /// key=value string), applies agentry's migrations, and starts the writer. Must be
    /// called within a Tokio runtime, which runs the connections.
    pub async fn connect(url: &str) -> Result<Database, Error> {
        Self::connect_with(url, Options::default()).await
    }

    /// [`connect`](Self::connect) with `options`.
    pub async fn connect_with(url: &str, options: Options) -> Result<Database, Error> {
        let (url, asked) = tls::split(url);
        let mut config: tokio_postgres::Config = url.parse().map_err(Error::Url)?;
        if config.get_application_name().is_none() {
            config.application_name("agentry");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let tls = match asked.mode {
            Some(mode) => {
                Some(tls::client_config(mode, asked.root_cert.as_deref()).map_err(Error::Tls)?)
            }
            None => None,
        };
        Self::open(conn::Endpoint { config, tls }, options).await
    }

    /// [`connect_with`](Self::connect_with) with a parsed configuration: with
    /// `sslmode=require` in it, TLS verified against the Mozilla roots (`webpki-roots`) and
    /// the host name; [`connect_with`](Self::connect_with) takes `sslrootcert` and
    /// `verify-ca` too.
    pub async fn with_config(
        config: tokio_postgres::Config,
        options: Options,
    ) -> Result<Database, Error> {
        let tls = match config.get_ssl_mode() {
            tokio_postgres::config::SslMode::Require => {
                Some(tls::client_config(tls::Mode::Full, None).map_err(Error::Tls)?)
            }
            _ => None,
        };
        Self::open(conn::Endpoint { config, tls }, options).await
    }

    async fn open(at: conn::Endpoint, options: Options) -> Result<Database, Error> {
        let target = conn::target(&at.config);
        let mut first = conn::open(&at).await.map_err(|source| Error::Connect {
            target: target.clone(),
            source,
        })?;
        conn::migrate(&mut first)
            .await
            .map_err(|source| Error::Migrate {
                target: target.clone(),
                source,
            })?;
        // Prepared after the migrations: the statements name agentry's tables.
        let first = conn::prepare(first)
            .await
            .map_err(|source| Error::Connect {
                target: target.clone(),
                source,
            })?;
        let replica: Arc<str> = agentry_a2a::new_id().into();
        let lease = writer::Lease {
            me: replica.clone(),
            seconds: options.lease.as_secs_f64(),
        };
        let (tx, rx) = agentry_a2a::store::pending::channel();
        let write_errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
        tokio::spawn(writer::run(
            at.clone(),
            first,
            lease,
            rx,
            write_errors.clone(),
        ));
        let inner = Arc::new(Inner {
            at,
            target,
            replica,
            lease: options.lease,
            writer: tx,
            write_errors,
            readers: (0..options.readers.max(1))
                .map(|_| Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        });
        let every = (options.lease / 3).max(Duration::from_millis(100));
        tokio::spawn(heartbeat(Arc::downgrade(&inner), every));
        Ok(Database { inner })
    }

    /// How long a hold lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.inner.lease
    }

    /// How long after its hold lapsed a turn a worker took from the work queue
    /// ([`Task::queued`](agentry_a2a::model::Task::queued)) is still left to the queue
    /// ([`QUEUE_GRACE_LEASES`] leases): the queue gives the turn of a worker that died to
    /// another one within about a lease, unless every worker is busy. Past it, the task is
    /// recovered like any other (and the queued turn, when it comes, runs it again).
    pub fn queue_grace(&self) -> Duration {
        self.inner.lease * QUEUE_GRACE_LEASES
    }

    /// This replica's id, as the tasks it runs name their holder.
    pub fn replica(&self) -> &str {
        &self.inner.replica
    }

    /// Writes of this process queued and not yet committed, by every store of the database
    /// (a task saved again while its save waits counts once).
    pub fn pending_writes(&self) -> usize {
        self.inner.writer.len()
    }

    /// Writes of this process that failed since it connected.
    pub fn write_errors(&self) -> u64 {
        self.inner.write_errors.load(Ordering::Relaxed)
    }

    /// Host, port and database name (no credentials), for messages.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// The task store of the agent named `namespace`.
    pub fn task_store(&self, namespace: &str) -> PgTaskStore {
        PgTaskStore::new(self.clone(), namespace)
    }

    /// The run store (checkpoints) of the agent or engine named `namespace`.
    pub fn run_store(&self, namespace: &str) -> PgRunStore {
        PgRunStore::new(self.clone(), namespace)
    }

    /// Queues `op` now (writes keep the order of the calls) and returns a future that
    /// resolves when its group is committed. Dropping the future does not cancel the write.
    fn write(
        &self,
        op: writer::Op,
    ) -> impl Future<Output = Result<writer::Done, WriteError>> + Send + 'static {
        let queued = self.inner.writer.push(op);
        async move {
            let Some(rx) = queued else {
                return Err(WriteError::Closed);
            };
            rx.await
                .map_err(|_| WriteError::Closed)?
                .map_err(WriteError::Db)
        }
    }

    /// Runs `f` on a read connection, made again (once) when it was lost.
    async fn read<T, F, Fut>(&self, f: F) -> Result<T, DbError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let slot = &self.inner.readers
            [self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.readers.len()];
        let mut retried = false;
        loop {
            let conn = {
                let mut slot = slot.lock().await;
                match slot.as_ref().filter(|c| !c.client.is_closed()) {
                    Some(c) => c.clone(),
                    None => {
                        let c = Arc::new(conn::prepare(conn::open(&self.inner.at).await?).await?);
                        *slot = Some(c.clone());
                        c
                    }
                }
            };
            match f(conn.clone()).await {
                Err(e) if !retried && conn::lost(&conn.client, &e) => {
                    tracing::warn!(
                        "PostgreSQL read connection to {} lost ({}); connecting again",
                        self.inner.target,
                        DbError::from(e)
                    );
                    retried = true;
                    let mut slot = slot.lock().await;
                    if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                        *slot = None;
                    }
                }
                r => return r.map_err(DbError::from),
            }
        }
    }
}

/// Renews this replica's holds every `every` while the database is in use.
async fn heartbeat(inner: std::sync::Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let renewed = Database { inner }.write(writer::Op::Heartbeat);
        if let Err(e) = renewed.await {
            tracing::warn!("cannot renew this replica's holds on its running tasks: {e}");
        }
    }
}

/// Why a queued write did not happen.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error("the PostgreSQL writer has stopped")]
    Closed,
    #[error(transparent)]
    Db(DbError),
}
