//! Connections, agentry's schema and its migrations, and the statements every connection
//! prepares once.

use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::DbError;

/// Host, port and database of `config`, without user or password.
pub(crate) fn target(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{host}:{port}/{}",
        config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres")
    )
}

/// Where and how to connect: the driver's settings, and TLS when the URL asked for it.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) config: Config,
    pub(crate) tls: Option<crate::tls::Connector>,
}

/// A new connection, its I/O running on a task of its own.
pub(crate) async fn open(at: &Endpoint) -> Result<Client, DbError> {
    fn run<F>(connection: F)
    where
        F: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
    {
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {}", DbError::from(e));
            }
        });
    }
    Ok(match &at.tls {
        None => {
            let (client, connection) = at.config.connect(NoTls).await?;
            run(connection);
            client
        }
        Some(tls) => {
            let (client, connection) = at.config.connect(tls.clone()).await?;
            run(connection);
            client
        }
    })
}

/// Whether `e` means the connection is gone (closed, or ended by the server: an
/// administrator, a failover, a restart), so the request may be tried again on a new one.
/// The error can arrive before the client notices the closed socket.
pub(crate) fn lost(client: &Client, e: &tokio_postgres::Error) -> bool {
    client.is_closed()
        || e.is_closed()
        || e.as_db_error().is_some_and(|d| {
            let code = d.code().code();
            matches!(d.severity(), "FATAL" | "PANIC")
                || code.starts_with("57P")
                || code.starts_with("08")
        })
}

/// A connection with agentry's statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) s: Statements,
}

/// Makes `client` a [`Conn`]: prepares every statement (pipelined, one round trip).
pub(crate) async fn prepare(client: Client) -> Result<Conn, DbError> {
    let s = Statements::prepare(&client).await?;
    Ok(Conn { client, s })
}

/// Key of the advisory lock replicas take to migrate one at a time ("agentry" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6765_6e74_7279;

/// agentry's schema, one entry per version; applied in order, each once, never edited
/// (a change is a new entry). Every table has `ns`, the agent's name: one database holds
/// every agent of every replica.
const MIGRATIONS: &[&str] = &[
    // 1: tasks (the status timestamp normalized to UTC milliseconds, for listing; the
    // replica running a turn and until when its hold lasts), push configs (listed in the
    // order they were first set), the push outbox, idempotency keys, run checkpoints.
    "CREATE TABLE agentry_tasks (
         ns TEXT NOT NULL,
         id TEXT NOT NULL,
         context_id TEXT NOT NULL,
         state TEXT NOT NULL,
         status_ts TEXT,
         owner TEXT,
         parked BOOLEAN NOT NULL DEFAULT false,
         body TEXT NOT NULL,
         updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
         holder TEXT,
         lease_until TIMESTAMPTZ,
         PRIMARY KEY (ns, id)
     );
     CREATE INDEX agentry_tasks_by_holder ON agentry_tasks (holder) WHERE holder IS NOT NULL;
     CREATE INDEX agentry_tasks_by_context
         ON agentry_tasks (ns, context_id, status_ts DESC NULLS LAST, id DESC);
     CREATE INDEX agentry_tasks_by_status
         ON agentry_tasks (ns, status_ts DESC NULLS LAST, id DESC);
     CREATE TABLE agentry_push_configs (
         ns TEXT NOT NULL,
         task_id TEXT NOT NULL,
         config_id TEXT NOT NULL,
         body TEXT NOT NULL,
         seq BIGSERIAL NOT NULL,
         PRIMARY KEY (ns, task_id, config_id)
     );
     CREATE TABLE agentry_push_outbox (
         seq BIGSERIAL PRIMARY KEY,
         ns TEXT NOT NULL,
         id TEXT NOT NULL,
         task_id TEXT NOT NULL,
         config TEXT NOT NULL,
         body BYTEA NOT NULL,
         UNIQUE (ns, id)
     );
     CREATE INDEX agentry_push_outbox_by_ns ON agentry_push_outbox (ns, seq);
     CREATE TABLE agentry_idempotency_keys (
         ns TEXT NOT NULL,
         scope TEXT NOT NULL,
         key TEXT NOT NULL,
         task_id TEXT NOT NULL,
         fingerprint TEXT NOT NULL,
         expires_ms BIGINT NOT NULL,
         PRIMARY KEY (ns, scope, key)
     );
     CREATE INDEX agentry_idempotency_keys_by_expiry ON agentry_idempotency_keys (expires_ms);
     CREATE TABLE agentry_checkpoints (
         ns TEXT NOT NULL,
         key TEXT NOT NULL,
         body TEXT NOT NULL,
         updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (ns, key)
     );",
    // 2: a turn a worker took from the work queue (`Task::queued`): when its replica dies,
    // the queue gives it to another worker, so no replica recovers it for a while.
    "ALTER TABLE agentry_tasks ADD COLUMN queued BOOLEAN NOT NULL DEFAULT false",
    // 3: the replica delivering a pending push notification, and until when (renewed with
    // its holds): another replica sends it only once that lapsed, so one notification is
    // not sent by every replica that starts (rows from before have no holder: anyone's).
    "ALTER TABLE agentry_push_outbox ADD COLUMN holder TEXT,
         ADD COLUMN lease_until TIMESTAMPTZ, ADD COLUMN claim TEXT;
     CREATE INDEX agentry_push_outbox_by_holder ON agentry_push_outbox (holder)
         WHERE holder IS NOT NULL",
    // 4: the audit trail (`crate::audit`): one HMAC chain per `chain` name, its head (the
    // last record's sequence number and MAC, updated in the same transaction as the records:
    // its row lock makes the replicas append one batch at a time), and triggers refusing
    // changes through the front door (whoever drops them is caught by the chain).
    "CREATE TABLE agentry_audit (
         chain TEXT NOT NULL,
         seq BIGINT NOT NULL,
         at_ms BIGINT NOT NULL,
         kind TEXT NOT NULL,
         actor TEXT NOT NULL,
         on_behalf_of TEXT,
         agent TEXT,
         skill TEXT,
         task_id TEXT,
         correlation_id TEXT,
         idempotency_key TEXT,
         decision TEXT,
         latency_us BIGINT,
         detail TEXT NOT NULL,
         prev TEXT NOT NULL,
         mac TEXT NOT NULL,
         PRIMARY KEY (chain, seq)
     );
     CREATE INDEX agentry_audit_by_correlation ON agentry_audit (chain, correlation_id);
     CREATE TABLE agentry_audit_head (
         chain TEXT PRIMARY KEY,
         seq BIGINT NOT NULL,
         mac TEXT NOT NULL
     );
     CREATE FUNCTION agentry_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$;
     CREATE TRIGGER agentry_audit_no_change BEFORE UPDATE OR DELETE ON agentry_audit
         FOR EACH ROW EXECUTE FUNCTION agentry_audit_append_only();
     CREATE TRIGGER agentry_audit_no_truncate BEFORE TRUNCATE ON agentry_audit
         FOR EACH STATEMENT EXECUTE FUNCTION agentry_audit_append_only()",
];

/// Brings agentry's tables up to date, in one transaction under an advisory lock: replicas
/// starting together migrate one after the other, and the later ones find nothing to do.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), DbError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agentry_migrations (
             version INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let applied: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM agentry_migrations",
            &[],
        )
        .await?
        .get(0);
    let applied = usize::try_from(applied).unwrap_or(0);
    if applied > MIGRATIONS.len() {
        // A newer agentry migrated it (a rolling upgrade): its changes keep old readers
        // working, so this one goes on.
        tracing::warn!(
            "the PostgreSQL schema is at version {applied}, newer than this agentry's {}",
            MIGRATIONS.len()
        );
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(sql).await?;
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO agentry_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Every statement agentry runs, prepared once per connection.
pub(crate) struct Statements {
    pub(crate) save: Statement,
    pub(crate) take_turn: Statement,
    pub(crate) elsewhere: Statement,
    pub(crate) heartbeat: Statement,
    /// Renews the leases of this replica's pending notifications (with `heartbeat`).
    pub(crate) renew_pushes: Statement,
    /// Takes pending notifications for this replica (see its SQL).
    pub(crate) claim_pushes: Statement,
    pub(crate) abandoned: Statement,
    pub(crate) get: Statement,
    pub(crate) list: Statement,
    pub(crate) count: Statement,
    pub(crate) by_state: Statement,
    pub(crate) set_push: Statement,
    pub(crate) list_push: Statement,
    pub(crate) delete_push: Statement,
    pub(crate) enqueue: Statement,
    pub(crate) ack: Statement,
    pub(crate) claim: Statement,
    pub(crate) release: Statement,
    pub(crate) sweep: Statement,
    pub(crate) put_checkpoint: Statement,
    pub(crate) get_checkpoint: Statement,
    pub(crate) delete_checkpoint: Statement,
}

/// The filters of a listing; a NULL parameter turns its condition off.
const FILTER: &str = "WHERE ns = $1 AND ($2::text IS NULL OR context_id = $2)
     AND ($3::text IS NULL OR state = $3) AND ($4::text IS NULL OR status_ts > $4)
     AND owner IS NOT DISTINCT FROM $5";

impl Statements {
    async fn prepare(c: &Client) -> Result<Statements, tokio_postgres::Error> {
        let list = format!(
            "SELECT id, body, owner, parked, queued FROM agentry_tasks {FILTER}
             ORDER BY status_ts DESC NULLS LAST, id DESC LIMIT $6 OFFSET $7"
        );
        let count = format!("SELECT count(*) FROM agentry_tasks {FILTER}");
        // A hold on a task: by this replica ($3 / $11), until now + $4 / $10 seconds. A
        // queued turn's hold ($4 / $3 seconds of grace past its end) is not taken for a dead
        // replica's until the queue had time to give the turn to another worker.
        let (take_turn, elsewhere, heartbeat, abandoned, renew_pushes, claim_pushes) = tokio::try_join!(
            c.prepare(
                "UPDATE agentry_tasks SET holder = $3,
                   lease_until = now() + make_interval(secs => $4::float8)
                 WHERE ns = $1 AND id = $2
                   AND (holder IS NULL OR holder = $3 OR lease_until < now())"
            ),
            c.prepare(
                "SELECT holder IS NOT NULL AND holder <> $3 AND (lease_until > now()
                   OR (queued AND lease_until > now() - make_interval(secs => $4::float8)))
                 FROM agentry_tasks WHERE ns = $1 AND id = $2"
            ),
            c.prepare(
                "UPDATE agentry_tasks SET lease_until = now() + make_interval(secs => $2::float8)
                 WHERE holder = $1"
            ),
            c.prepare(
                "SELECT id, owner FROM agentry_tasks
                 WHERE holder IS NOT NULL AND ns = $1
                   AND lease_until < now() - CASE WHEN queued
                       THEN make_interval(secs => $3::float8) ELSE interval '0' END
                   AND state IN ('submitted', 'working') AND NOT parked
                 ORDER BY lease_until LIMIT $2"
            ),
            c.prepare(
                "UPDATE agentry_push_outbox
                   SET lease_until = now() + make_interval(secs => $2::float8)
                 WHERE holder = $1"
            ),
            // Pending notifications this replica ($2) may deliver, taken for it: those of
            // no live replica, and its own too when $4. Rows another replica is taking are
            // skipped, not waited for: each row goes to one replica. The claim's id ($6)
            // makes asking again after a lost answer return the rows it took.
            c.prepare(
                "UPDATE agentry_push_outbox SET holder = $2, claim = $6,
                   lease_until = now() + make_interval(secs => $3::float8)
                 WHERE seq IN (
                   SELECT seq FROM agentry_push_outbox
                   WHERE ns = $1 AND (holder IS NULL OR lease_until < now()
                     OR ($4 AND holder = $2) OR claim = $6)
                   ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED)
                 RETURNING seq, id, task_id, config, body"
            ),
        )?;
        let (
            (save, get, list, count, by_state, set_push),
            (list_push, delete_push, enqueue, ack, claim),
            (release, sweep, put_checkpoint, get_checkpoint, delete_checkpoint),
        ) = tokio::try_join!(
            async {
                tokio::try_join!(
                    // Held ($9 set) while a turn runs, released by the save that ends it;
                    // no row changes while another live replica holds the task (fenced).
                    c.prepare(
                        "INSERT INTO agentry_tasks AS t (ns, id, context_id, state, status_ts,
                             owner, parked, body, updated_at, holder, lease_until, queued)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9::text,
                           CASE WHEN $9::text IS NULL THEN NULL
                                ELSE now() + make_interval(secs => $10::float8) END, $12)
                         ON CONFLICT (ns, id) DO UPDATE SET context_id = EXCLUDED.context_id,
                           state = EXCLUDED.state, status_ts = EXCLUDED.status_ts,
                           owner = EXCLUDED.owner, parked = EXCLUDED.parked,
                           queued = EXCLUDED.queued,
                           body = EXCLUDED.body, updated_at = now(),
                           holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until
                         WHERE t.holder IS NULL OR t.holder = $11 OR t.lease_until < now()"
                    ),
                    c.prepare(
                        "SELECT body, owner, parked, queued FROM agentry_tasks WHERE ns = $1 AND id = $2"
                    ),
                    c.prepare(&list),
                    c.prepare(&count),
                    c.prepare(
                        "SELECT state, count(*) FROM agentry_tasks WHERE ns = $1 GROUP BY state"
                    ),
                    c.prepare(
                        "INSERT INTO agentry_push_configs (ns, task_id, config_id, body)
                         VALUES ($1, $2, $3, $4)
                         ON CONFLICT (ns, task_id, config_id) DO UPDATE SET body = EXCLUDED.body"
                    ),
                )
            },
            async {
                tokio::try_join!(
                    c.prepare(
                        "SELECT body FROM agentry_push_configs WHERE ns = $1 AND task_id = $2
                         ORDER BY seq"
                    ),
                    c.prepare(
                        "DELETE FROM agentry_push_configs
                         WHERE ns = $1 AND task_id = $2 AND config_id = $3"
                    ),
                    // Held by the replica queuing it ($6), which delivers it.
                    c.prepare(
                        "INSERT INTO agentry_push_outbox
                             (ns, id, task_id, config, body, holder, lease_until)
                         VALUES ($1, $2, $3, $4, $5, $6,
                           now() + make_interval(secs => $7::float8))
                         ON CONFLICT (ns, id) DO NOTHING"
                    ),
                    c.prepare("DELETE FROM agentry_push_outbox WHERE ns = $1 AND id = $2"),
                    // One row: (NULL, NULL) when this claim took the key (it was free, or
                    // its claim had expired), else the holder's claim. The conflicting row is
                    // locked either way, so concurrent claims of one key queue here and
                    // exactly one wins. No row: the holder committed after this statement's
                    // snapshot (asked again by the writer).
                    c.prepare(
                        "WITH took AS (
                             INSERT INTO agentry_idempotency_keys AS k
                                 (ns, scope, key, task_id, fingerprint, expires_ms)
                             VALUES ($1, $2, $3, $4, $5, $6)
                             ON CONFLICT (ns, scope, key) DO UPDATE
                               SET task_id = EXCLUDED.task_id,
                                   fingerprint = EXCLUDED.fingerprint,
                                   expires_ms = EXCLUDED.expires_ms
                             WHERE k.expires_ms <= $7
                             RETURNING 1
                         )
                         SELECT NULL::text, NULL::text FROM took
                         UNION ALL
                         SELECT task_id, fingerprint FROM agentry_idempotency_keys
                         WHERE ns = $1 AND scope = $2 AND key = $3
                           AND NOT EXISTS (SELECT 1 FROM took)"
                    ),
                )
            },
            async {
                tokio::try_join!(
                    c.prepare(
                        "DELETE FROM agentry_idempotency_keys WHERE ns = $1 AND scope = $2 AND key = $3"
                    ),
                    c.prepare("DELETE FROM agentry_idempotency_keys WHERE expires_ms <= $1"),
                    c.prepare(
                        "INSERT INTO agentry_checkpoints (ns, key, body, updated_at)
                         VALUES ($1, $2, $3, now())
                         ON CONFLICT (ns, key) DO UPDATE SET body = EXCLUDED.body,
                           updated_at = now()"
                    ),
                    c.prepare("SELECT body FROM agentry_checkpoints WHERE ns = $1 AND key = $2"),
                    c.prepare("DELETE FROM agentry_checkpoints WHERE ns = $1 AND key = $2"),
                )
            },
        )?;
        Ok(Statements {
            save,
            take_turn,
            elsewhere,
            heartbeat,
            renew_pushes,
            claim_pushes,
            abandoned,
            get,
            list,
            count,
            by_state,
            set_push,
            list_push,
            delete_push,
            enqueue,
            ack,
            claim,
            release,
            sweep,
            put_checkpoint,
            get_checkpoint,
            delete_checkpoint,
        })
    }
}
