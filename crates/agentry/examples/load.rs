//! Load test: one agentry server (the `serve_echo` example, conformance mode, SQLite store)
//! under 10,000 tasks sent at once, then 10,000 SSE streams open at once. Counts errors,
//! times the sends, and samples the server's resident memory (idle, after the tasks, with
//! every stream open, after they end) to show it is bounded.
//!
//! ```text
//! cargo build --release -p agentry --no-default-features --example serve_echo --example load
//! target/release/examples/load target/release/examples/serve_echo [N]
//! ```
//!
//! `bash bench/load.sh` does both and keeps the output.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::{
    Message, MessageSendParams, Role, SendMessageResult, StreamEvent, TaskState,
};
use futures_util::StreamExt;

/// Counts a stream as ended when its task is dropped, however it ended.
struct EndsOnDrop(Arc<AtomicUsize>);

impl Drop for EndsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The server's resident memory now and at its peak, in MiB (Linux `/proc`).
fn rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server_bin = args.first().ok_or("usage: load SERVE_ECHO_BINARY [N]")?;
    let n: usize = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let stream_secs: u64 = 20;
    let dir = std::env::temp_dir().join(format!("agentry-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = std::process::Command::new(server_bin)
        .args([
            &port.to_string(),
            "conformance",
            dir.join("tasks.db").to_str().unwrap(),
        ])
        .env("AGENTRY_STREAM_SECONDS", stream_secs.to_string())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = server.id();
    let url = format!("http://127.0.0.1:{port}/");
    let cfg = ClientConfig {
        request_timeout: Duration::from_secs(120),
        stream_idle_timeout: Duration::from_secs(120),
        ..ClientConfig::default()
    };
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) = A2aClient::discover(&url, cfg.clone()).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = client.ok_or("the server did not start")?;
    let idle = rss(pid).0;
    println!("server: agentry serve_echo (conformance agent, SQLite, durability power), pid {pid}");
    println!("resident memory idle: {idle:.1} MiB");

    // 1. N tasks at once.
    let t0 = Instant::now();
    let sends = (0..n).map(|i| {
        let c = client.clone();
        async move {
            let start = Instant::now();
            let r = c
                .send_message(MessageSendParams::new(Message::text(
                    Role::User,
                    format!("task {i}"),
                )))
                .await;
            let ok =
                matches!(&r, Ok(SendMessageResult::Task(t)) if t.state() == TaskState::Working);
            (ok, start.elapsed(), r.err().map(|e| e.to_string()))
        }
    });
    let results = futures_util::future::join_all(sends).await;
    let wall = t0.elapsed();
    let errors: Vec<_> = results.iter().filter(|r| !r.0).collect();
    let mut lat: Vec<Duration> = results.iter().map(|r| r.1).collect();
    lat.sort();
    let (after_tasks, _) = rss(pid);
    println!(
        "{n} tasks at once: {} errors, {:.1} s in all ({:.0} tasks/s), latency p50 {:.0} ms, p99 {:.0} ms; resident memory after: {after_tasks:.1} MiB",
        errors.len(),
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
    );
    if let Some((_, _, Some(e))) = errors.first() {
        println!("  first error: {e}");
    }

    // 2. N streams open at once, each a task working for `stream_secs` with a progress event
    // every half second; all open together before the first ends.
    let opened = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let streams = (0..n).map(|i| {
        let (c, opened, ended) = (client.clone(), opened.clone(), ended.clone());
        async move {
            let _ended = EndsOnDrop(ended);
            let mut m = Message::text(Role::User, "stream");
            m.message_id = format!("test-resubscribe-message-id-load-{i}");
            let mut s = Box::pin(c.stream_message(MessageSendParams::new(m)));
            let mut first = true;
            let mut last = None;
            while let Some(ev) = s.next().await {
                match ev {
                    Ok(ev) => {
                        if first {
                            opened.fetch_add(1, Ordering::SeqCst);
                            first = false;
                        }
                        last = Some(ev);
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            match last {
                Some(StreamEvent::StatusUpdate(s)) if s.status.state == TaskState::Completed => {
                    Ok(())
                }
                other => Err(format!("ended on {other:?}")),
            }
        }
    });
    let sampler = {
        let (opened, ended) = (opened.clone(), ended.clone());
        tokio::spawn(async move {
            let mut peak_open = (0usize, 0.0f64);
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let now = opened.load(Ordering::SeqCst);
                let (mem, _) = rss(pid);
                if mem > peak_open.1 {
                    peak_open = (now, mem);
                }
                if now >= n || ended.load(Ordering::SeqCst) >= n {
                    // Everything open: sample once more, mid-stream.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let (mem, _) = rss(pid);
                    return (t0.elapsed(), peak_open.1.max(mem));
                }
            }
        })
    };
    let done = futures_util::future::join_all(streams).await;
    let wall = t0.elapsed();
    let (all_open_after, open_mem) = sampler.await?;
    println!(
        "  streams that delivered an event: {} of {n}",
        opened.load(Ordering::SeqCst)
    );
    let failed: Vec<_> = done.iter().filter_map(|r| r.as_ref().err()).collect();
    println!(
        "{n} SSE streams at once ({stream_secs} s each): all open {:.1} s after the first was asked, {} ended in error, {:.1} s in all; resident memory with all open: {open_mem:.1} MiB ({:.1} KiB per open stream over idle)",
        all_open_after.as_secs_f64(),
        failed.len(),
        wall.as_secs_f64(),
        (open_mem - after_tasks).max(0.0) * 1024.0 / n as f64,
    );
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for e in &failed {
        *kinds.entry(e.chars().take(120).collect()).or_default() += 1;
    }
    for (e, k) in kinds {
        println!("  {k} x {e}");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (after, peak) = rss(pid);
    println!(
        "after the streams ended: resident memory {after:.1} MiB (peak over the run {peak:.1} MiB)"
    );
    // The client keeps its connections alive; the server closes idle ones after 30 s.
    drop(client);
    tokio::time::sleep(Duration::from_secs(35)).await;
    let (idle_again, _) = rss(pid);
    println!("idle again (connections closed): resident memory {idle_again:.1} MiB");
    // Once more, the same load: memory must not grow run over run.
    let again = (0..n).map(|i| {
        let c = A2aClient::discover(&url, cfg.clone());
        async move {
            let c = c.await.map_err(|e| e.to_string())?;
            c.send_message(MessageSendParams::new(Message::text(
                Role::User,
                format!("again {i}"),
            )))
            .await
            .map_err(|e| e.to_string())
        }
    });
    let second = futures_util::future::join_all(again).await;
    let second_errors = second.iter().filter(|r| r.is_err()).count();
    tokio::time::sleep(Duration::from_secs(35)).await;
    let (after_second, _) = rss(pid);
    println!(
        "the {n} tasks again, each on a new client: {second_errors} errors; idle after: resident memory {after_second:.1} MiB"
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if !errors.is_empty() || !failed.is_empty() || second_errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}
