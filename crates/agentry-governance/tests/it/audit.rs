//! The audit trail: appends from many tasks make one gapless chain that survives a restart;
//! every kind of tampering (edit, delete, reorder, insert, truncate, a deleted or rolled-back
//! head) is found, at the right record.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_governance::audit::AuditKey;
use agentry_governance::{AuditError, AuditLog, Event, Tampered};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentry-audit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("audit.db")
}

/// A log of `n` records, records 1..=n with correlation `c<seq % 3>`.
async fn log_of(name: &str, n: u64) -> (AuditLog, PathBuf) {
    let path = temp(name);
    let log = AuditLog::open(&path).unwrap();
    for i in 1..=n {
        let e = Event::new("authz", format!("user-{i}"))
            .agent("mail")
            .skill("draft")
            .task(format!("task-{i}"))
            .correlation(format!("c{}", i % 3))
            .decision(if i % 2 == 0 { "allow" } else { "deny" })
            .detail(serde_json::json!({"scopes": ["mail.draft"], "i": i}));
        assert_eq!(log.append(e).await.unwrap(), i);
    }
    (log, path)
}

/// Runs `sql` on the database as an attacker with write access would: around the
/// append-only triggers.
fn tamper(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete; {sql}"
    ))
    .unwrap();
}

fn tampered_at(r: Result<agentry_governance::Verified, AuditError>) -> Tampered {
    match r {
        Err(AuditError::Tampered(t)) => t,
        other => panic!("tampering not found: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_make_one_gapless_chain_that_survives_a_restart() {
    let path = temp("concurrent");
    let log = Arc::new(AuditLog::open(&path).unwrap());
    let tasks: Vec<_> = (0..50)
        .map(|t| {
            let log = log.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..40 {
                    let e = Event::new("tool", format!("agent-{t}")).skill(format!("call-{i}"));
                    seqs.push(log.append(e).await.unwrap());
                }
                seqs
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (1..=2000).collect::<Vec<u64>>());
    let v = log.verify().unwrap();
    assert_eq!(v.records, 2000);
    let head = v.head.clone().unwrap();
    drop(log);

    // A new process continues the chain.
    let log = AuditLog::open(&path).unwrap();
    assert_eq!(log.append(Event::new("tool", "after")).await.unwrap(), 2001);
    let v = log.verify().unwrap();
    assert_eq!(v.records, 2001);
    // The head recorded earlier is still in the log.
    log.verify_against(head.0, &head.1).unwrap();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn the_path_of_one_request_reads_back_in_order() {
    let (log, path) = log_of("correlation", 9).await;
    let c1 = log.by_correlation("c1").unwrap();
    let seqs: Vec<u64> = c1.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 4, 7]);
    assert_eq!(c1[1].event.actor, "user-4");
    assert_eq!(c1[1].event.decision.as_deref(), Some("allow"));
    assert_eq!(c1[1].event.detail["scopes"][0], "mail.draft");
    assert_eq!(log.records(8, 10).unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn the_front_door_refuses_updates_and_deletes() {
    let (_log, path) = log_of("triggers", 2).await;
    let conn = rusqlite::Connection::open(&path).unwrap();
    let e = conn
        .execute("UPDATE audit SET decision = 'allow' WHERE seq = 1", [])
        .unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
    assert!(conn.execute("DELETE FROM audit", []).is_err());
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Each way of changing the log, and the record `verify` must name.
#[tokio::test]
async fn every_kind_of_tampering_is_found_at_the_first_changed_record() {
    let cases: &[(&str, &str, u64)] = &[
        (
            "edit-decision",
            "UPDATE audit SET decision = 'allow' WHERE seq = 5",
            5,
        ),
        (
            "edit-actor",
            "UPDATE audit SET actor = 'admin' WHERE seq = 3",
            3,
        ),
        (
            "edit-detail",
            "UPDATE audit SET detail = '{\"scopes\":[\"*\"]}' WHERE seq = 7",
            7,
        ),
        (
            "edit-time",
            "UPDATE audit SET at_ms = at_ms - 3600000 WHERE seq = 2",
            2,
        ),
        (
            "clear-field",
            "UPDATE audit SET task_id = NULL WHERE seq = 4",
            4,
        ),
        ("delete-middle", "DELETE FROM audit WHERE seq = 6", 6),
        ("delete-first", "DELETE FROM audit WHERE seq = 1", 1),
        // Two records swap places (their contents move, the numbers stay).
        (
            "reorder",
            "UPDATE audit SET seq = -1 WHERE seq = 4; UPDATE audit SET seq = 4 WHERE seq = 5; \
             UPDATE audit SET seq = 5 WHERE seq = -1;",
            4,
        ),
        // A record re-numbered to the end (a gap where it was).
        ("move", "UPDATE audit SET seq = 11 WHERE seq = 3", 3),
        // A forged record slipped in with a MAC the attacker cannot compute.
        (
            "insert",
            "UPDATE audit SET seq = seq + 1001 WHERE seq >= 6; \
             UPDATE audit SET seq = seq - 1000 WHERE seq > 1000; \
             INSERT INTO audit SELECT 6, at_ms, kind, 'forger', on_behalf_of, agent, skill, task_id, \
               correlation_id, idempotency_key, 'allow', latency_us, detail, prev, mac FROM audit WHERE seq = 5;",
            6,
        ),
        // The tail cut off: a shorter chain that is valid in itself.
        ("truncate", "DELETE FROM audit WHERE seq > 7", 8),
        ("empty", "DELETE FROM audit", 1),
    ];
    for (name, sql, at) in cases {
        let (log, path) = log_of(name, 10).await;
        log.verify().unwrap();
        tamper(&path, sql);
        let t = tampered_at(log.verify());
        assert_eq!(t.seq, *at, "{name}: {t}");
        // Appending to a log whose tail no longer matches its head is refused at open.
        if matches!(*name, "truncate" | "empty") {
            drop(log);
            let err = AuditLog::open(&path).unwrap_err();
            assert!(matches!(err, AuditError::Tampered(_)), "{name}: {err}");
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}

#[tokio::test]
async fn a_deleted_or_rolled_back_head_file_is_found() {
    // Deleted: records and no head.
    let (log, path) = log_of("head-deleted", 4).await;
    std::fs::remove_file(path.with_file_name("audit.db.head")).unwrap();
    assert_eq!(tampered_at(log.verify()).seq, 4);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());

    // Rolled back with the tail: the local check passes (the shorter chain and its head
    // agree), the head recorded elsewhere earlier does not.
    let (log, path) = log_of("head-rolled-back", 6).await;
    let earlier = log.verify().unwrap().head.unwrap();
    let head_file = path.with_file_name("audit.db.head");
    tamper(&path, "DELETE FROM audit WHERE seq > 4");
    let r4 = &log.records(4, 1).unwrap()[0];
    std::fs::write(&head_file, format!("4 {}\n", r4.mac)).unwrap();
    assert_eq!(log.verify().unwrap().records, 4);
    let t = tampered_at(log.verify_against(earlier.0, &earlier.1));
    assert_eq!(t.seq, 6, "{t}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn without_the_key_the_chain_cannot_be_rebuilt() {
    // The attacker empties the log and the head file and writes a history of their own with
    // a key of their own: a chain consistent with that key, with none of the real one.
    let (log, path) = log_of("rekeyed", 3).await;
    drop(log);
    tamper(&path, "DELETE FROM audit");
    std::fs::remove_file(path.with_file_name("audit.db.head")).unwrap();
    let forged = AuditLog::open_with(&path, AuditKey::Hex("11".repeat(32))).unwrap();
    for i in 1..=3 {
        let e = Event::new("authz", format!("user-{i}")).decision("allow");
        forged.append(e).await.unwrap();
    }
    forged.verify().unwrap();
    drop(forged);
    let log = AuditLog::open(&path).unwrap();
    assert_eq!(tampered_at(log.verify()).seq, 1);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn a_bad_key_is_a_clear_error() {
    let path = temp("bad-key");
    let err = AuditLog::open_with(&path, AuditKey::Hex("not hex".into())).unwrap_err();
    assert!(err.to_string().contains("64 hex digits"), "{err}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Queued appends keep their order and all reach the log: a durable append after them
/// resolves only once they are committed too.
#[tokio::test]
async fn queued_events_are_committed_in_order_before_a_later_durable_one() {
    let path = temp("queued");
    let log = AuditLog::open(&path).unwrap();
    for i in 0..1000 {
        log.enqueue(Event::new("authz", format!("caller-{i}")))
            .await
            .unwrap();
    }
    assert_eq!(log.append(Event::new("authz", "last")).await.unwrap(), 1001);
    let v = log.verify().unwrap();
    assert_eq!(v.records, 1001);
    let first = log.records(1, 3).unwrap();
    let actors: Vec<&str> = first.iter().map(|r| r.event.actor.as_str()).collect();
    assert_eq!(actors, ["caller-0", "caller-1", "caller-2"]);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
