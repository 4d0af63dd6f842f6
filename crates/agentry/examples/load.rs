//! Load test: agentry servers (the `serve_echo` example, conformance mode) under 10,000
//! tasks sent at once, then 10,000 SSE streams open at once. Counts errors, times the sends,
//! and samples the servers' resident memory (idle, after the tasks, with every stream open,
//! after they end) to show it is bounded, and their CPU time per task.
//!
//! ```text
//! cargo build --release -p agentry --no-default-features --features postgres,nats --example serve_echo --example load
//! target/release/examples/load target/release/examples/serve_echo [N]
//! target/release/examples/load target/release/examples/serve_echo [N] --replicas 3 --store postgres://... --bus nats://...
//! ```
//!
//! One server keeps its tasks in SQLite (durability `power`). With `--replicas K`, K servers
//! share one PostgreSQL namespace and their task events on NATS, as replicas of one agent
//! do; requests go to them in turn (what a round-robin balancer does: one HAProxy process
//! in front would need two descriptors per stream, over this machine's 20,000 open-files
//! limit at 10,000 streams). `bash bench/load.sh` runs both, one after the other, and keeps
//! the output.

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

/// The servers' resident memory now and at its peak, summed, in MiB (Linux `/proc`).
fn rss(pids: &[u32]) -> (f64, f64) {
    pids.iter()
        .map(|p| rss_of(*p))
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// The servers' CPU time so far (user + system), summed, in seconds (Linux `/proc`; clock
/// ticks of 1/100 s).
fn cpu(pids: &[u32]) -> f64 {
    pids.iter()
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // After the command name (in parentheses, which may hold spaces): fields 14 and
            // 15 of the line are the 12th and 13th here.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
        })
        .sum()
}

/// One process's resident memory now and at its peak, in MiB.
fn rss_of(pid: u32) -> (f64, f64) {
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

/// The command line: `SERVE_ECHO [N] [--replicas K --store URL [--bus URL]]`.
struct Args {
    server_bin: String,
    n: usize,
    replicas: usize,
    store: Option<String>,
    bus: Option<String>,
}

fn args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut it = std::env::args().skip(1);
    let usage = "usage: load SERVE_ECHO [N] [--replicas K --store URL [--bus URL]]";
    let mut a = Args {
        server_bin: it.next().ok_or(usage)?,
        n: 10_000,
        replicas: 1,
        store: None,
        bus: None,
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--replicas" => a.replicas = it.next().ok_or(usage)?.parse()?,
            "--store" => a.store = Some(it.next().ok_or(usage)?),
            "--bus" => a.bus = Some(it.next().ok_or(usage)?),
            n => a.n = n.parse()?,
        }
    }
    if a.replicas > 1 && a.store.is_none() {
        return Err("replicas share a store: --store postgres://...".into());
    }
    Ok(a)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args {
        server_bin,
        n,
        replicas,
        store,
        bus,
    } = args()?;
    let stream_secs: u64 = 20;
    let dir = std::env::temp_dir().join(format!("agentry-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = store.unwrap_or_else(|| dir.join("tasks.db").to_string_lossy().into_owned());
    let mut servers = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..replicas.max(1) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut cmd = std::process::Command::new(&server_bin);
        cmd.args([&port.to_string(), "conformance", &store])
            .env("AGENTRY_STREAM_SECONDS", stream_secs.to_string())
            .env("AGENTRY_BENCH_NS", format!("load-{}", std::process::id()))
            .stderr(std::process::Stdio::null());
        if let Some(bus) = &bus {
            cmd.env("AGENTRY_BENCH_BUS", bus);
        }
        servers.push(cmd.spawn()?);
        urls.push(format!("http://127.0.0.1:{port}/"));
    }
    let pids: Vec<u32> = servers.iter().map(std::process::Child::id).collect();
    let pid = pids.as_slice();
    let cfg = ClientConfig {
        request_timeout: Duration::from_secs(120),
        stream_idle_timeout: Duration::from_secs(120),
        ..ClientConfig::default()
    };
    let mut clients = Vec::new();
    for url in &urls {
        for _ in 0..200 {
            if let Ok(c) = A2aClient::discover(url, cfg.clone()).await {
                clients.push(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    if clients.len() < urls.len() {
        return Err("a server did not start".into());
    }
    // Requests go to the replicas in turn.
    let client = |i: usize| clients[i % clients.len()].clone();
    let idle = rss(pid).0;
    if replicas > 1 {
        println!(
            "servers: {replicas} replicas of agentry serve_echo (conformance agent) on PostgreSQL{}, pids {pids:?}",
            if bus.is_some() { " and NATS" } else { "" }
        );
    } else {
        println!(
            "server: agentry serve_echo (conformance agent, SQLite, durability power), pid {pids:?}"
        );
    }
    println!("resident memory idle: {idle:.1} MiB");
    let cpu_before = cpu(pid);

    // 1. N tasks at once.
    let t0 = Instant::now();
    let sends = (0..n).map(|i| {
        let c = client(i);
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
    let (after_tasks, peak_tasks) = rss(pid);
    let task_cpu = cpu(pid) - cpu_before;
    println!(
        "{n} tasks at once: {} errors, {:.1} s in all ({:.0} tasks/s), latency p50 {:.0} ms, p99 {:.0} ms; server CPU {:.2} ms per task; resident memory after: {after_tasks:.1} MiB (peak so far {peak_tasks:.1} MiB)",
        errors.len(),
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        task_cpu * 1000.0 / n as f64,
    );
    if let Some((_, _, Some(e))) = errors.first() {
        println!("  first error: {e}");
    }

    // 2. N streams open at once, each a task working for `stream_secs` with a progress event
    // every half second; all open together before the first ends.
    let opened = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let cpu_before = cpu(pid);
    let streams = (0..n).map(|i| {
        let (c, opened, ended) = (client(i), opened.clone(), ended.clone());
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
        let (opened, ended, pids) = (opened.clone(), ended.clone(), pids.clone());
        tokio::spawn(async move {
            let mut peak_open = (0usize, 0.0f64);
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let now = opened.load(Ordering::SeqCst);
                let (mem, _) = rss(&pids);
                if mem > peak_open.1 {
                    peak_open = (now, mem);
                }
                if now >= n || ended.load(Ordering::SeqCst) >= n {
                    // Everything open: sample once more, mid-stream.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let (mem, _) = rss(&pids);
                    return (t0.elapsed(), peak_open.1.max(mem));
                }
            }
        })
    };
    let done = futures_util::future::join_all(streams).await;
    let wall = t0.elapsed();
    let (all_open_after, open_mem) = sampler.await?;
    let peak_streams = rss(pid).1;
    let stream_cpu = cpu(pid) - cpu_before;
    println!(
        "  streams that delivered an event: {} of {n}",
        opened.load(Ordering::SeqCst)
    );
    let failed: Vec<_> = done.iter().filter_map(|r| r.as_ref().err()).collect();
    println!(
        "{n} SSE streams at once ({stream_secs} s each): all open {:.1} s after the first was asked, {} ended in error, {:.1} s in all; server CPU {:.2} ms per stream ({} events each); resident memory with all open: {open_mem:.1} MiB ({:.1} KiB per open stream over idle), peak so far {peak_streams:.1} MiB",
        all_open_after.as_secs_f64(),
        failed.len(),
        wall.as_secs_f64(),
        stream_cpu * 1000.0 / n as f64,
        stream_secs * 2 + 3,
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
    drop(clients);
    tokio::time::sleep(Duration::from_secs(35)).await;
    let (idle_again, _) = rss(pid);
    println!("idle again (connections closed): resident memory {idle_again:.1} MiB");
    // Once more, the same load: memory must not grow run over run.
    let again = (0..n).map(|i| {
        let c = A2aClient::discover(&urls[i % urls.len()], cfg.clone());
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
    for mut server in servers {
        let _ = server.kill();
        let _ = server.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !errors.is_empty() || !failed.is_empty() || second_errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}
