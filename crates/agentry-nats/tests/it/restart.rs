//! A NATS server restarted under live connections: a private `nats-server` (Debian's package,
//! JetStream on, its own storage folder) on a free port, killed and started again.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentry_a2a::server::TaskEvents;
use agentry_flow::bus::EventBus;
use agentry_nats::{BusOptions, NatsBus, NatsEvents};
use futures_util::StreamExt;
use serde_json::json;

/// A private server; killed when dropped.
struct Private {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

impl Private {
    /// Starts one, or `None` (a skip recorded) when `nats-server` is not installed.
    async fn start() -> Option<Private> {
        let dir = std::env::temp_dir().join(format!("agentry-nats-{}", agentry_a2a::new_id()));
        let mut p = Private {
            port: agentry_testkit::free_port(),
            dir,
            child: None,
        };
        if let Err(e) = p.run().await {
            return agentry_testkit::missing(
                agentry_testkit::Peer::Nats,
                format!("cannot start nats-server (Debian package nats-server): {e}"),
            );
        }
        Some(p)
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Runs the server on the port and folder, and waits until it takes connections.
    async fn run(&mut self) -> std::io::Result<()> {
        let child = Command::new("nats-server")
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err(std::io::Error::other("nats-server did not start"))
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Killed and started again: a follower of a task's events gets the events published after
/// the clients reconnected (those published while it was down are gone: core NATS keeps
/// nothing, and the task store has the state), and the bus's stream and a subscriber's
/// durable consumer survive: an event published after the restart is delivered to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_loses_no_follower_and_no_subscription() {
    let Some(mut server) = Private::start().await else {
        return;
    };
    let url = server.url();
    let publisher = NatsEvents::connect(&url).await.unwrap();
    let follower = NatsEvents::connect(&url).await.unwrap();
    let mut follow = follower.follow("agent", "t1").await.unwrap();
    publisher.publish("agent", "t1", b"before".to_vec());
    assert_eq!(follow.next().await.unwrap(), b"before");
    let bus = NatsBus::connect_with(&url, BusOptions::default())
        .await
        .unwrap();
    bus.prepare("audit", "order.*").await.unwrap();
    let mut consumed = bus.consume("audit", "order.*");
    bus.publish("order.one", payload(1)).await.unwrap();
    let first = consumed.next().await.unwrap();
    assert_eq!(first.item.payload["n"], 1);
    first.ack().await;

    server.kill();
    server.run().await.unwrap();

    // Published until one reaches the follower (each client reconnects by itself).
    let mut got = None;
    for i in 0..300 {
        publisher.publish("agent", "t1", format!("after {i}").into_bytes());
        if let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(100), follow.next()).await
        {
            got = Some(String::from_utf8(ev).unwrap());
            break;
        }
    }
    let got = got.expect("the follower hears events after the restart");
    assert!(got.starts_with("after"), "{got}");

    let mut stored = false;
    for _ in 0..100 {
        if bus.publish("order.two", payload(2)).await.is_ok() {
            stored = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stored, "the bus stores events again after the restart");
    let second = tokio::time::timeout(Duration::from_secs(20), consumed.next())
        .await
        .expect("the durable subscription survived the restart")
        .unwrap();
    assert_eq!(second.item.payload["n"], 2);
    second.ack().await;
}

fn payload(n: u64) -> serde_json::Map<String, serde_json::Value> {
    let serde_json::Value::Object(m) = json!({ "n": n }) else {
        unreachable!()
    };
    m
}
