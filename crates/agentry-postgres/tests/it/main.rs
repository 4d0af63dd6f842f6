//! agentry-postgres against a real PostgreSQL: 127.0.0.1:5432, database `test` (or
//! `$AGENTRY_TEST_POSTGRES`). The test command requires it (`AGENTRY_REQUIRE_POSTGRES=1`);
//! elsewhere these tests record a skip. Each test works in namespaces of its own, so they
//! run side by side in one database.

use std::sync::Arc;
use std::time::Duration;

use agentry_a2a::model::{TaskState, TaskStatus};
use agentry_a2a::store::contract::{check, check_outbox, check_saves_coalesce, task};
use agentry_a2a::store::{KeyClaim, TaskQuery, TaskStore};
use agentry_core::runs::RunStore;
use agentry_postgres::{Database, Error, Options};

fn url() -> String {
    std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A fresh connection (a replica's), or `None` (a recorded skip) without PostgreSQL.
async fn replica(url: &str) -> Option<Database> {
    match Database::connect(url).await {
        Ok(db) => Some(db),
        Err(e) => agentry_testkit::missing(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {} ({e})", url),
        ),
    }
}

/// A namespace no other test (or earlier run) uses.
fn ns(name: &str) -> String {
    format!("{name}-{}", agentry_a2a::new_id())
}

fn later() -> i64 {
    agentry_a2a::time::now_unix_millis() + 60_000
}

#[tokio::test]
async fn the_task_store_contract_holds() {
    let Some(db) = replica(&url()).await else {
        return;
    };
    check(&db.task_store(&ns("contract"))).await;
    check_outbox(&db.task_store(&ns("outbox"))).await;
}

/// Saves of one task queued while the writer waits (here on a lock another session holds on
/// the task's row) wait as one write, and the newest is stored with every notification.
#[tokio::test]
async fn saves_of_one_task_coalesce_while_the_writer_is_behind() {
    let Some(db) = replica(&url()).await else {
        return;
    };
    let name = ns("coalesce");
    check_saves_coalesce(
        &db.task_store(&name),
        async || {
            let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            client
                .batch_execute(&format!(
                    "BEGIN; SELECT 1 FROM agentry_tasks WHERE ns = '{name}' \
                     AND id = 'coalesce-t' FOR UPDATE"
                ))
                .await
                .unwrap();
            client
        },
        async |client: tokio_postgres::Client| client.batch_execute("COMMIT").await.unwrap(),
    )
    .await;
}

/// Replicas (separate connections) see each other's tasks, and of concurrent claims of one
/// idempotency key spread over them exactly one wins; a restart (new connections) loses
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_tasks_and_idempotency_keys() {
    let Some(a) = replica(&url()).await else {
        return;
    };
    let b = replica(&url()).await.expect("second replica");
    let name = ns("replicas");
    let (sa, sb) = (a.task_store(&name), b.task_store(&name));
    let mut t = task("shared", TaskState::Working);
    sa.save(&t).await.unwrap();
    assert_eq!(sb.get("shared").await.unwrap().unwrap(), t);
    // The turn ends on A (B may not write a task A runs: see the lease test).
    t.transition(TaskStatus::now(TaskState::Completed, None))
        .unwrap();
    sa.save(&t).await.unwrap();
    assert_eq!(
        sb.get("shared").await.unwrap().unwrap().state(),
        TaskState::Completed
    );
    // Another agent's namespace does not see it.
    assert!(
        a.task_store(&ns("other"))
            .get("shared")
            .await
            .unwrap()
            .is_none()
    );

    let (sa, sb) = (Arc::new(sa), Arc::new(sb));
    let claims: Vec<KeyClaim> = (0..64)
        .map(|i| KeyClaim {
            task_id: format!("c{i}"),
            fingerprint: "f".into(),
        })
        .collect();
    let mut handles = Vec::new();
    for (i, c) in claims.iter().cloned().enumerate() {
        let store = if i % 2 == 0 { sa.clone() } else { sb.clone() };
        handles.push(tokio::spawn(async move {
            store.claim_key("carol", "race", &c, later()).await.unwrap()
        }));
    }
    let mut results = Vec::new();
    for h in handles {
        results.push(h.await.unwrap());
    }
    let winners: Vec<usize> = (0..results.len())
        .filter(|&i| results[i].is_none())
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in results.iter().flatten() {
        assert_eq!(r, &claims[winners[0]]);
    }
    drop((sa, sb, a, b));

    // Restarted: new connections, everything there.
    let c = replica(&url()).await.expect("restarted replica");
    let sc = c.task_store(&name);
    assert_eq!(
        sc.get("shared").await.unwrap().unwrap().state(),
        TaskState::Completed
    );
    let other = KeyClaim {
        task_id: "late".into(),
        fingerprint: "f".into(),
    };
    assert_eq!(
        sc.claim_key("carol", "race", &other, later())
            .await
            .unwrap(),
        Some(claims[winners[0]].clone())
    );
}

/// Writes keep call order and happen whether or not their future is awaited; concurrent
/// writers lose nothing (they are committed in groups).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_keep_call_order_and_every_concurrent_write_lands() {
    let Some(db) = replica(&url()).await else {
        return;
    };
    let s = Arc::new(db.task_store(&ns("order")));
    let mut t = task("t", TaskState::Working);
    drop(s.save(&t));
    drop(s.save(&task("dropped", TaskState::Working)));
    t.transition(TaskStatus::now(TaskState::Completed, None))
        .unwrap();
    s.save(&t).await.unwrap();
    assert_eq!(
        s.get("t").await.unwrap().unwrap().state(),
        TaskState::Completed
    );
    assert!(s.get("dropped").await.unwrap().is_some());

    let mut handles = Vec::new();
    for i in 0..200 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut t = task(&format!("c{i}"), TaskState::Working);
            s.save(&t).await.unwrap();
            t.transition(TaskStatus::now(TaskState::Completed, None))
                .unwrap();
            s.save(&t).await.unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let page = s
        .list(&TaskQuery {
            state: Some(TaskState::Completed),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 201, "200 tasks and `t`");
    let counts = s.count_by_state().await.unwrap().unwrap();
    assert!(counts.contains(&(TaskState::Completed, 201)), "{counts:?}");
    assert!(counts.contains(&(TaskState::Working, 1)), "{counts:?}");
}

/// Checkpoints: written, read by another replica, replaced, deleted.
#[tokio::test]
async fn run_checkpoints_are_shared_and_deleted() {
    let Some(a) = replica(&url()).await else {
        return;
    };
    let b = replica(&url()).await.expect("second replica");
    let name = ns("runs");
    let (ra, rb) = (a.run_store(&name), b.run_store(&name));
    assert_eq!(rb.get("run-1").await.unwrap(), None);
    ra.put("run-1", r#"{"step":1}"#).await.unwrap();
    ra.put("run-1", r#"{"step":2}"#).await.unwrap();
    assert_eq!(
        rb.get("run-1").await.unwrap().as_deref(),
        Some(r#"{"step":2}"#)
    );
    rb.delete("run-1").await.unwrap();
    rb.delete("run-1").await.unwrap();
    assert_eq!(ra.get("run-1").await.unwrap(), None);
    // Another namespace's key of the same name is its own.
    assert_eq!(a.run_store(&ns("runs")).get("run-1").await.unwrap(), None);
}

/// The server ends every connection of the store (a failover, an administrator, a proxy's
/// idle timeout): the next reads and writes connect again and succeed.
#[tokio::test]
async fn lost_connections_are_made_again() {
    let app = format!("agentry-test-{}", agentry_a2a::new_id());
    let sep = if url().contains('?') { '&' } else { '?' };
    let Some(db) = replica(&format!("{}{sep}application_name={app}", url())).await else {
        return;
    };
    let s = db.task_store(&ns("cut"));
    s.save(&task("before", TaskState::Working)).await.unwrap();
    assert!(s.get("before").await.unwrap().is_some());
    let (admin, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for _ in 0..2 {
        let cut: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap()
            .get(0);
        assert!(cut >= 2, "the writer and a reader were connected ({cut})");
        s.save(&task("after", TaskState::Working)).await.unwrap();
        assert!(s.get("before").await.unwrap().is_some());
        assert!(s.get("after").await.unwrap().is_some());
        s.ping().await.unwrap();
    }
}

/// Bad input gets a clear error: a URL that does not parse, a server that is not there (the
/// message names host, port and database, never the password).
#[tokio::test]
async fn connection_errors_say_where_and_hide_the_password() {
    assert!(matches!(
        Database::connect("postgres://[bad").await,
        Err(Error::Url(_))
    ));
    let port = agentry_testkit::free_port();
    let err = Database::connect(&format!(
        "postgres://agentry:sekrit@127.0.0.1:{port}/agentry"
    ))
    .await
    .unwrap_err();
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{port}/agentry")),
        "{text}"
    );
    assert!(!text.contains("sekrit"), "{text}");
}

/// A task row whose body is not a task is reported as corrupt, not a panic.
#[tokio::test]
async fn corrupt_rows_are_errors() {
    let Some(db) = replica(&url()).await else {
        return;
    };
    let name = ns("corrupt");
    let (admin, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .execute(
            "INSERT INTO agentry_tasks (ns, id, context_id, state, body)
             VALUES ($1, 'bad', 'c', 'working', '{not json')",
            &[&name],
        )
        .await
        .unwrap();
    let err = db.task_store(&name).get("bad").await.unwrap_err();
    assert!(
        matches!(err, agentry_a2a::store::StoreError::Corrupt { .. }),
        "{err}"
    );
}

/// A replica running a turn holds its task: another replica sees it running elsewhere,
/// cannot take a turn of it or overwrite it; the hold is renewed while the replica lives,
/// released by the save that ends the turn, and lapses when the replica dies (its
/// connections gone, nothing renews it), so another replica takes the task over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_is_held_by_its_replica_until_the_turn_ends_or_the_replica_dies() {
    let lease = Duration::from_millis(1500);
    let options = Options::default().lease(lease);
    let Some(a) = Database::connect_with(&url(), options.clone()).await.ok() else {
        let _ = replica(&url()).await;
        return;
    };
    let b = Database::connect_with(&url(), options).await.unwrap();
    assert_ne!(a.replica(), b.replica());
    let name = ns("lease");
    let (sa, sb) = (a.task_store(&name), b.task_store(&name));
    let mut t = task("job", TaskState::Working);
    sa.save(&t).await.unwrap();
    assert!(sb.running_elsewhere("job").await.unwrap());
    assert!(!sa.running_elsewhere("job").await.unwrap());
    assert!(!sb.take_turn("job").await.unwrap());
    assert!(sa.take_turn("job").await.unwrap());
    // B cannot overwrite it (a second turn, a cancel that A's turn does not know of).
    let mut theirs = t.clone();
    theirs
        .transition(TaskStatus::now(TaskState::Canceled, None))
        .unwrap();
    let refused = sb.save(&theirs).await.unwrap_err();
    assert!(refused.to_string().contains("another replica"), "{refused}");
    assert_eq!(
        sa.get("job").await.unwrap().unwrap().state(),
        TaskState::Working
    );
    // Renewed: still held after more than a lease's time.
    tokio::time::sleep(lease * 2).await;
    assert!(sb.running_elsewhere("job").await.unwrap());
    // The turn ends (input-required): released, B may take the next turn.
    t.transition(TaskStatus::now(TaskState::InputRequired, None))
        .unwrap();
    sa.save(&t).await.unwrap();
    assert!(!sb.running_elsewhere("job").await.unwrap());
    assert!(sb.take_turn("job").await.unwrap());
    assert!(sa.running_elsewhere("job").await.unwrap());
    assert!(!sa.take_turn("job").await.unwrap());
    // B dies: nothing renews its hold, which lapses; A takes the task over.
    drop((sb, b));
    tokio::time::sleep(lease + Duration::from_millis(500)).await;
    assert!(!sa.running_elsewhere("job").await.unwrap());
    assert!(sa.take_turn("job").await.unwrap());
}

/// A turn a worker took from the work queue ([`Task::queued`]) is left to the queue when the
/// worker's replica dies: for a grace after its hold lapsed, other replicas read it as running
/// elsewhere (so they neither recover it nor answer for it) and do not list it as abandoned,
/// while a worker the queue hands the turn to may take it; past the grace it is abandoned
/// like any other. A turn that was not queued is abandoned as soon as its hold lapses. The
/// flag is stored while the turn runs only.
///
/// [`Task::queued`]: agentry_a2a::model::Task::queued
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_of_a_dead_replica_is_left_to_the_queue_for_a_grace() {
    let lease = Duration::from_millis(400);
    let options = Options::default().lease(lease);
    let Some(a) = Database::connect_with(&url(), options.clone()).await.ok() else {
        let _ = replica(&url()).await;
        return;
    };
    let b = Database::connect_with(&url(), options).await.unwrap();
    assert_eq!(
        b.queue_grace(),
        lease * agentry_postgres::QUEUE_GRACE_LEASES
    );
    let name = ns("queued");
    let (sa, sb) = (a.task_store(&name), b.task_store(&name));
    for id in ["q1", "q2"] {
        let mut t = task(id, TaskState::Working);
        t.queued = true;
        sa.save(&t).await.unwrap();
    }
    sa.save(&task("plain", TaskState::Working)).await.unwrap();
    assert!(sb.get("q1").await.unwrap().unwrap().queued);
    assert!(!sb.get("plain").await.unwrap().unwrap().queued);
    let all = TaskQuery {
        limit: 10,
        ..TaskQuery::default()
    };
    let listed = sb.list(&all).await.unwrap().tasks;
    assert_eq!(listed.iter().filter(|t| t.queued).count(), 2, "{listed:?}");
    // A dies; its holds lapse.
    drop((sa, a));
    tokio::time::sleep(lease + Duration::from_millis(400)).await;
    let ids = |found: Vec<agentry_a2a::store::Abandoned>| {
        let mut ids: Vec<String> = found.into_iter().map(|t| t.task_id).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(sb.abandoned(10).await.unwrap()), ["plain"]);
    assert!(sb.running_elsewhere("q1").await.unwrap());
    assert!(!sb.running_elsewhere("plain").await.unwrap());
    // The worker the queue hands q1 to takes it.
    assert!(sb.take_turn("q1").await.unwrap());
    assert!(!sb.running_elsewhere("q1").await.unwrap());
    // Past the grace, q2 (nobody took it) is abandoned; q1 is B's.
    tokio::time::sleep(b.queue_grace()).await;
    assert_eq!(ids(sb.abandoned(10).await.unwrap()), ["plain", "q2"]);
    // The save that ends the turn clears the flag.
    let mut t = task("q1", TaskState::Completed);
    t.queued = true;
    sb.save(&t).await.unwrap();
    assert!(!sb.get("q1").await.unwrap().unwrap().queued);
}

/// Pending push notifications belong to the replica that queued them while it lives (it
/// delivers them; its heartbeat renews the hold): another replica starting or sweeping does
/// not send them too. When that replica dies, its notifications are taken by the replicas
/// that look (each by exactly one, oldest first), and then held by the taker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_notifications_go_to_one_replica_and_outlive_the_one_that_queued_them() {
    use agentry_a2a::store::contract::notification;
    let lease = Duration::from_millis(600);
    let options = Options::default().lease(lease);
    let Some(a) = Database::connect_with(&url(), options.clone()).await.ok() else {
        let _ = replica(&url()).await;
        return;
    };
    let b = Database::connect_with(&url(), options.clone())
        .await
        .unwrap();
    let c = Database::connect_with(&url(), options).await.unwrap();
    let name = ns("outbox-claims");
    let (sa, sb, sc) = (
        a.task_store(&name),
        b.task_store(&name),
        c.task_store(&name),
    );
    let push = |n: usize| notification(&format!("n{n:03}"), &format!("t{}", n % 7), n);
    let items: Vec<_> = (0..300).map(push).collect();
    sa.enqueue_pushes(&items).await.unwrap();
    // A lives: B starting, or sweeping, takes none of them, even after several leases.
    assert!(sb.pending_pushes().await.unwrap().is_empty());
    tokio::time::sleep(lease * 3).await;
    assert!(sb.abandoned_pushes(1000).await.unwrap().is_empty());
    assert_eq!(
        sa.pending_pushes().await.unwrap(),
        items,
        "A's own, in order"
    );
    // A acknowledges some, then dies.
    for p in &items[..10] {
        sa.ack_push(&p.id).await.unwrap();
    }
    drop((sa, a));
    tokio::time::sleep(lease + Duration::from_millis(400)).await;
    // B and C sweep at once, in pages: each notification goes to one of them.
    let (mut got_b, mut got_c) = (Vec::new(), Vec::new());
    loop {
        let (pb, pc) = tokio::join!(sb.abandoned_pushes(25), sc.abandoned_pushes(25));
        let (pb, pc) = (pb.unwrap(), pc.unwrap());
        if pb.is_empty() && pc.is_empty() {
            break;
        }
        for (page, got) in [(pb, &mut got_b), (pc, &mut got_c)] {
            assert!(page.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
            got.extend(page);
        }
    }
    assert!(!got_b.is_empty() && !got_c.is_empty(), "both took a share");
    let mut all: Vec<_> = got_b.iter().chain(&got_c).cloned().collect();
    all.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(all, items[10..], "each once, none acknowledged, none lost");
    // Held now: B's by B (renewed), so C finds nothing more, even later.
    tokio::time::sleep(lease * 2).await;
    assert!(sc.abandoned_pushes(1000).await.unwrap().is_empty());
    for p in &got_b {
        sb.ack_push(&p.id).await.unwrap();
    }
    for p in &got_c {
        sc.ack_push(&p.id).await.unwrap();
    }
    assert!(sb.pending_pushes().await.unwrap().is_empty());
}

/// A write PostgreSQL refuses (here a NUL character, which a TEXT column cannot hold) fails
/// its caller with the database's reason, is counted for `/metrics`, and does not stop the
/// writer: the next save goes through.
#[tokio::test]
async fn a_refused_write_fails_its_caller_is_counted_and_the_writer_goes_on() {
    let Some(db) = replica(&url()).await else {
        return;
    };
    let s = db.task_store(&ns("refused"));
    assert_eq!(s.write_errors(), Some(0));
    let mut bad = task("bad", TaskState::Completed);
    bad.context_id = "nul\0inside".into();
    let err = s.save(&bad).await.unwrap_err();
    assert!(err.to_string().contains("0x00"), "{err}");
    assert_eq!(s.write_errors(), Some(1));
    s.save(&task("good", TaskState::Completed)).await.unwrap();
    assert!(s.get("good").await.unwrap().is_some());
    assert_eq!(s.write_errors(), Some(1));
}

/// The error and every source under it, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// TLS to the database, as the URL asks (libpq's `sslmode` and `sslrootcert`), always
/// verified: against the server's own certificate as the root, `verify-ca` connects and the
/// server sees TLS; `verify-full` to an address the certificate does not name, and `require`
/// against the default (Mozilla) roots, are refused; a root file that is not there is an
/// error before any connection. A server without SSL refuses `require` (the test then says
/// the handshake path did not run).
#[tokio::test]
async fn tls_is_verified_as_the_url_asks() {
    let Some(_db) = replica(&url()).await else {
        return;
    };
    let missing = Database::connect(&format!(
        "{}?sslmode=verify-full&sslrootcert=/nonexistent/agentry-ca.pem",
        url()
    ))
    .await
    .expect_err("a root file that is not there");
    assert!(matches!(missing, Error::Tls(_)), "{missing:?}");
    assert!(
        chain(&missing).contains("/nonexistent/agentry-ca.pem"),
        "{}",
        chain(&missing)
    );

    let (plain, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let show = |what: &'static str| {
        let plain = &plain;
        async move {
            plain
                .query_one(&format!("SHOW {what}"), &[])
                .await
                .unwrap()
                .get::<_, String>(0)
        }
    };
    let (ssl, cert) = (show("ssl").await, show("ssl_cert_file").await);
    if ssl != "on" || std::fs::metadata(&cert).is_err() {
        let refused = Database::connect(&format!("{}?sslmode=require", url()))
            .await
            .expect_err("require against a server without SSL");
        eprintln!(
            "NOTE: this PostgreSQL has no SSL (or its certificate {cert} is not readable): \
             only the refusal was checked ({})",
            chain(&refused)
        );
        return;
    }
    let marker = format!("agentry-tls-{}", agentry_a2a::new_id());
    let ca = format!(
        "{}?sslmode=verify-ca&sslrootcert={cert}&application_name={marker}",
        url()
    );
    let db = Database::connect(&ca)
        .await
        .expect("verify-ca with the server's certificate");
    let s = db.task_store(&ns("tls"));
    s.save(&task("over-tls", TaskState::Completed))
        .await
        .unwrap();
    assert!(s.get("over-tls").await.unwrap().is_some());
    let encrypted: i64 = plain
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = $1 AND s.ssl",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        encrypted >= 2,
        "the writer and a reader connect over TLS: {encrypted}"
    );
    let unencrypted: i64 = plain
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = $1 AND NOT s.ssl",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unencrypted, 0);

    // 127.0.0.1 is not a name the certificate gives (it names the host, or localhost).
    let full = Database::connect(&format!("{}?sslmode=verify-full&sslrootcert={cert}", url()))
        .await
        .expect_err("verify-full to an address the certificate does not name");
    assert!(chain(&full).contains("certificate"), "{}", chain(&full));
    let unknown = Database::connect(&format!("{}?sslmode=require", url()))
        .await
        .expect_err("require: verified against the Mozilla roots, which do not know this server");
    assert!(
        chain(&unknown).contains("certificate"),
        "{}",
        chain(&unknown)
    );
}

/// A replica opens one writer connection and at most [`Options::readers`] read connections,
/// however many reads run at once (counted by PostgreSQL, by application name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_connections_are_as_many_as_asked() {
    let Some(_db) = replica(&url()).await else {
        return;
    };
    let (plain, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for readers in [1, 3] {
        let marker = format!("agentry-readers-{}", agentry_a2a::new_id());
        let db = Database::connect_with(
            &format!("{}?application_name={marker}", url()),
            Options::default().readers(readers),
        )
        .await
        .unwrap();
        let s = Arc::new(db.task_store(&ns("readers")));
        s.save(&task("r", TaskState::Completed)).await.unwrap();
        let reads: Vec<_> = (0..32)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { s.get("r").await.unwrap().is_some() })
            })
            .collect();
        for r in reads {
            assert!(r.await.unwrap());
        }
        let open: i64 = plain
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&marker],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            open,
            1 + readers as i64,
            "the writer and {readers} reader(s)"
        );
    }
}

/// The audit trail shared by replicas: two processes' logs (separate databases handles,
/// connections and writers) append at once to one chain; it verifies whole, in one order,
/// each record once; durable and queued appends both land; the readers find them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_append_to_one_audit_chain() {
    use agentry_governance::audit::AuditKey;
    use agentry_governance::{AuditSink, Event};
    use agentry_postgres::PgAuditLog;
    let (Some(a), Some(b)) = (replica(&url()).await, replica(&url()).await) else {
        return;
    };
    let chain = ns("audit");
    let key = AuditKey::Hex("ab".repeat(32));
    let logs = [
        Arc::new(PgAuditLog::open(&a, &chain, &key).unwrap()),
        Arc::new(PgAuditLog::open(&b, &chain, &key).unwrap()),
    ];
    let mut appends = Vec::new();
    for (r, log) in logs.iter().enumerate() {
        for i in 0..150 {
            let log = log.clone();
            appends.push(tokio::spawn(async move {
                let e = Event::new("authz", format!("replica-{r}"))
                    .agent("mail")
                    .correlation(format!("req-{}", i % 10))
                    .decision("allow")
                    .detail(serde_json::json!({"i": i}));
                if i % 3 == 0 {
                    AuditSink::enqueue(&*log, e).await.map(|()| None)
                } else {
                    AuditSink::append(&*log, e).await.map(Some)
                }
            }));
        }
    }
    let mut seqs = Vec::new();
    for a in appends {
        if let Some(seq) = a.await.unwrap().unwrap() {
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 200, "every durable append has its own number");
    // Queued ones commit within moments.
    let mut verified = logs[0].verify().await.unwrap();
    for _ in 0..100 {
        if verified.records == 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        verified = logs[0].verify().await.unwrap();
    }
    assert_eq!(verified.records, 300);
    assert_eq!(
        logs[1].verify().await.unwrap(),
        verified,
        "both replicas see one chain"
    );
    let records = logs[1].records(1, 1000).await.unwrap();
    assert_eq!(records.len(), 300);
    assert!(records.iter().zip(1..).all(|(r, n)| r.seq == n));
    for r in 0..2 {
        let by = records
            .iter()
            .filter(|x| x.event.actor == format!("replica-{r}"));
        assert_eq!(by.count(), 150);
    }
    assert_eq!(logs[0].by_correlation("req-3").await.unwrap().len(), 30);
    let (head_seq, head_mac) = verified.head.clone().unwrap();
    assert!(logs[0].verify_against(head_seq, &head_mac).await.is_ok());
    // Another key cannot read it as its own.
    let forged = PgAuditLog::open(&a, &chain, &AuditKey::Hex("11".repeat(32))).unwrap();
    assert!(forged.verify().await.is_err());
}

/// Changes to the audit table are refused through the front door (`UPDATE`, `DELETE`,
/// `TRUNCATE`); with the triggers dropped, an edit, a deletion, a reorder and a truncation
/// (records and head rolled back together) are each found at the record they hit.
#[tokio::test]
async fn the_audit_chain_on_postgres_finds_every_kind_of_tampering() {
    use agentry_governance::audit::AuditKey;
    use agentry_governance::{AuditError, Event};
    use agentry_postgres::PgAuditLog;
    let Some(db) = replica(&url()).await else {
        return;
    };
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let key = AuditKey::Hex("cd".repeat(32));
    // A fresh chain of five records for each case.
    let fresh = async |name: &str| {
        let chain = ns(name);
        let log = PgAuditLog::open(&db, &chain, &key).unwrap();
        for i in 0..5 {
            log.append(Event::new("tool", "agent").skill(format!("t{i}")))
                .await
                .unwrap();
        }
        assert_eq!(log.verify().await.unwrap().records, 5);
        (chain, log)
    };
    let tampered_at = |r: Result<agentry_governance::Verified, AuditError>| match r {
        Err(AuditError::Tampered(t)) => t.seq,
        other => panic!("not found tampered: {other:?}"),
    };
    let (chain, _log) = fresh("refused").await;
    for sql in [
        format!("UPDATE agentry_audit SET actor = 'x' WHERE chain = '{chain}' AND seq = 2"),
        format!("DELETE FROM agentry_audit WHERE chain = '{chain}' AND seq = 5"),
        "TRUNCATE agentry_audit".to_owned(),
    ] {
        let err = client.batch_execute(&sql).await.unwrap_err();
        assert!(
            format!("{:?}", err).contains("append-only"),
            "{sql}: {err:?}"
        );
    }
    // For the rest, the trigger is dropped and restored within the tampering transaction,
    // so no other session ever sees the table unguarded.
    let case = async |name: &str, sql: &str| {
        let (chain, log) = fresh(name).await;
        let sql = sql.replace("CHAIN", &chain);
        client
            .batch_execute(&format!(
                "BEGIN; ALTER TABLE agentry_audit DISABLE TRIGGER agentry_audit_no_change; {sql};
                 ALTER TABLE agentry_audit ENABLE TRIGGER agentry_audit_no_change; COMMIT"
            ))
            .await
            .unwrap();
        tampered_at(log.verify().await)
    };
    assert_eq!(
        case(
            "edited",
            "UPDATE agentry_audit SET actor = 'mallory' WHERE chain = 'CHAIN' AND seq = 3"
        )
        .await,
        3
    );
    assert_eq!(
        case(
            "deleted",
            "DELETE FROM agentry_audit WHERE chain = 'CHAIN' AND seq = 2"
        )
        .await,
        2
    );
    assert_eq!(
        case(
            "reordered",
            "UPDATE agentry_audit SET seq = -seq WHERE chain = 'CHAIN' AND seq IN (2, 3);
             UPDATE agentry_audit SET seq = 3 WHERE chain = 'CHAIN' AND seq = -2;
             UPDATE agentry_audit SET seq = 2 WHERE chain = 'CHAIN' AND seq = -3;"
        )
        .await,
        2
    );
    assert_eq!(
        case(
            "cut",
            "DELETE FROM agentry_audit WHERE chain = 'CHAIN' AND seq >= 4"
        )
        .await,
        4,
        "the head still names record 5"
    );
    // Cut short with the head rolled back too: only a head kept elsewhere finds it.
    let (chain, log) = fresh("cut-and-head").await;
    let kept = log.verify().await.unwrap().head.unwrap();
    let old = log.records(3, 1).await.unwrap().remove(0);
    client
        .batch_execute(&format!(
            "BEGIN; ALTER TABLE agentry_audit DISABLE TRIGGER agentry_audit_no_change;
             DELETE FROM agentry_audit WHERE chain = '{chain}' AND seq > 3;
             UPDATE agentry_audit_head SET seq = 3, mac = '{}' WHERE chain = '{chain}';
             ALTER TABLE agentry_audit ENABLE TRIGGER agentry_audit_no_change; COMMIT",
            old.mac
        ))
        .await
        .unwrap();
    assert_eq!(log.verify().await.unwrap().records, 3);
    assert_eq!(tampered_at(log.verify_against(kept.0, &kept.1).await), 5);
}

/// A TCP proxy to the test database that, once `armed`, forwards the next COMMIT, swallows
/// the server's answer and drops that connection: the transaction is committed, its client
/// never hears so. The proxy's URL (the test URL with the proxy's address).
async fn commit_answer_loser(armed: Arc<std::sync::atomic::AtomicBool>) -> String {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = url();
    let (user, rest) = url.split_once('@').expect("a postgres:// URL with a user");
    let (target, path) = rest.split_once('/').unwrap_or((rest, ""));
    let target = if target.contains(':') {
        target.to_owned()
    } else {
        format!("{target}:5432")
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (armed, target) = (armed.clone(), target.clone());
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let swallow = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let cutting = swallow.clone();
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let chunk = &buf[..n];
                        if chunk.windows(6).any(|w| w == b"COMMIT")
                            && armed.swap(false, Ordering::SeqCst)
                        {
                            cutting.store(true, Ordering::SeqCst);
                        }
                        if sw.write_all(chunk).await.is_err() {
                            break;
                        }
                    }
                });
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 || swallow.load(Ordering::SeqCst) {
                        break;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                // Both directions closed: the client's connection ends unanswered.
                up.abort();
            });
        }
    });
    format!("{user}@{addr}/{path}")
}

/// The answer to an audit batch's COMMIT is lost (the connection drops after the server
/// committed): the writer's retry on a new connection finds the head its batch left and
/// does not append the records a second time (before, the chain held them twice).
#[tokio::test]
async fn an_audit_commit_whose_answer_is_lost_is_not_appended_twice() {
    use agentry_governance::audit::AuditKey;
    use agentry_governance::{AuditSink, Event};
    use agentry_postgres::PgAuditLog;
    if replica(&url()).await.is_none() {
        return;
    }
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let proxied = commit_answer_loser(armed.clone()).await;
    let db = Database::connect(&proxied).await.unwrap();
    let chain = ns("audit-lost-commit");
    let log = PgAuditLog::open(&db, &chain, &AuditKey::Hex("cd".repeat(32))).unwrap();
    let first = AuditSink::append(&log, Event::new("authz", "alice").decision("allow"))
        .await
        .unwrap();
    assert_eq!(first, 1);
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let second = AuditSink::append(&log, Event::new("authz", "bob").decision("deny"))
        .await
        .expect("the retry finds the batch committed");
    assert!(
        !armed.load(std::sync::atomic::Ordering::SeqCst),
        "the COMMIT's answer was swallowed"
    );
    assert_eq!(second, 2);
    let third = AuditSink::append(&log, Event::new("authz", "carol").decision("allow"))
        .await
        .unwrap();
    assert_eq!(third, 3);
    let verified = log.verify().await.unwrap();
    assert_eq!(verified.records, 3, "no record twice");
    let actors: Vec<String> = log
        .records(1, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.event.actor)
        .collect();
    assert_eq!(actors, ["alice", "bob", "carol"]);
}

/// Verifying the shared chain while replicas append to it: every verify reads one consistent
/// snapshot (head and records), so none reports the records appended meanwhile as tampering
/// (before, the head was read after the records and named records the check had not seen:
/// "truncated"). The check reads the records in pages, never the whole chain at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_chain_verifies_while_replicas_append() {
    use agentry_governance::audit::AuditKey;
    use agentry_governance::{AuditSink, Event};
    use agentry_postgres::PgAuditLog;
    let (Some(a), Some(b)) = (replica(&url()).await, replica(&url()).await) else {
        return;
    };
    let chain = ns("audit-live");
    let key = AuditKey::Hex("ef".repeat(32));
    let writer = Arc::new(PgAuditLog::open(&a, &chain, &key).unwrap());
    let reader = PgAuditLog::open(&b, &chain, &key).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appending = {
        let (writer, stop) = (writer.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                AuditSink::append(
                    &*writer,
                    Event::new("tool", "agent").detail(serde_json::json!({"n": n})),
                )
                .await
                .unwrap();
                n += 1;
            }
            n
        })
    };
    let mut seen = Vec::new();
    for _ in 0..40 {
        let v = reader.verify().await.expect("a live chain verifies");
        seen.push(v.records);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let appended = appending.await.unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.last().copied().unwrap_or(0) > 0, "{seen:?}");
    assert_eq!(reader.verify().await.unwrap().records, appended);
}

/// A chain longer than a page of the check (5,000 records) verifies across its pages, and an
/// edit in a later page is found at its record.
#[tokio::test]
async fn a_long_audit_chain_verifies_page_by_page() {
    use agentry_governance::audit::AuditKey;
    use agentry_governance::{AuditError, AuditSink, Event};
    use agentry_postgres::PgAuditLog;
    let Some(db) = replica(&url()).await else {
        return;
    };
    let chain = ns("audit-long");
    let log = PgAuditLog::open(&db, &chain, &AuditKey::Hex("ab".repeat(32))).unwrap();
    const N: u64 = 11_000;
    for i in 0..N - 1 {
        AuditSink::enqueue(
            &log,
            Event::new("tool", "agent").detail(serde_json::json!({"i": i})),
        )
        .await
        .unwrap();
    }
    // The last one durable: every queued one before it is committed too (one writer, in order).
    let last = AuditSink::append(&log, Event::new("tool", "agent"))
        .await
        .unwrap();
    assert_eq!(last, N);
    let verified = log.verify().await.unwrap();
    assert_eq!(verified.records, N);
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "BEGIN; ALTER TABLE agentry_audit DISABLE TRIGGER agentry_audit_no_change;
             UPDATE agentry_audit SET actor = 'mallory' WHERE chain = '{chain}' AND seq = 10500;
             ALTER TABLE agentry_audit ENABLE TRIGGER agentry_audit_no_change; COMMIT"
        ))
        .await
        .unwrap();
    match log.verify().await {
        Err(AuditError::Tampered(t)) => assert_eq!(t.seq, 10_500, "{t:?}"),
        other => panic!("the edit was not found: {other:?}"),
    }
}
