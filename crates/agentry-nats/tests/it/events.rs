//! Task events between replicas (core NATS).

use agentry_a2a::server::TaskEvents;
use agentry_nats::{Error, NatsEvents};
use futures_util::StreamExt;

use crate::url;

async fn connect() -> Option<NatsEvents> {
    match NatsEvents::connect(&url()).await {
        Ok(e) => Some(e),
        Err(e) => agentry_testkit::missing(
            agentry_testkit::Peer::Nats,
            format!("no NATS at {} ({e})", url()),
        ),
    }
}

/// Events published by one process reach a follower on another connection, in order, only
/// for the task followed; cancel requests reach the agent's listeners.
#[tokio::test]
async fn events_and_cancel_requests_cross_connections_in_order() {
    let Some(a) = connect().await else {
        return;
    };
    let b = connect().await.expect("a second connection");
    let agent = format!("agent.{}", agentry_a2a::new_id());
    let mut follow = b.follow(&agent, "t1").await.unwrap();
    let mut cancels = b.cancel_requests(&agent).await.unwrap();
    for i in 0..50 {
        a.publish(&agent, "other", b"not this one".to_vec());
        a.publish(&agent, "t1", format!("event {i}").into_bytes());
    }
    // Bounded: a lost event fails the test instead of hanging it.
    let wait = std::time::Duration::from_secs(20);
    for i in 0..50 {
        let got = tokio::time::timeout(wait, follow.next())
            .await
            .unwrap_or_else(|_| panic!("event {i} never arrived"))
            .unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), format!("event {i}"));
    }
    a.request_cancel(&agent, "t1");
    let asked = tokio::time::timeout(wait, cancels.next())
        .await
        .expect("the cancel request never arrived");
    assert_eq!(asked.unwrap(), "t1");
}

/// A server that is not there: the error names it, never the password.
#[tokio::test]
async fn connection_errors_hide_the_password() {
    let port = agentry_testkit::free_port();
    let err = NatsEvents::connect(&format!("nats://agentry:sekrit@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    let text = format!("{err}");
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("sekrit"), "{text}");
}
