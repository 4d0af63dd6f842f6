//! Soak test: one agentry server (the `serve_echo` example, conformance agent, SQLite store,
//! durability power) under a mixed load for a long time: blocking sends, streams, cancels,
//! resubscriptions to running tasks and sends with a push webhook, in rotation by `W`
//! workers. Every 10 s it samples the server's resident memory and each operation's latency
//! (p50, p99) and errors; at the end it writes them as CSV and as an SVG chart.
//!
//! ```text
//! cargo build --release -p agentry --no-default-features --example serve_echo --example soak
//! target/release/examples/soak target/release/examples/serve_echo [MINUTES] [WORKERS] [OUT_DIR]
//! ```
//!
//! `bash bench/soak.sh` does both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::{
    Message, MessageSendConfiguration, MessageSendParams, PushNotificationConfig, Role,
    SendMessageResult, StreamEvent, TaskState,
};
use futures_util::StreamExt;

const OPS: [&str; 5] = ["send", "stream", "cancel", "resubscribe", "push"];

/// The server's resident memory in MiB (Linux `/proc`).
fn rss(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one window of the run saw: per operation, latencies (ms) and errors.
#[derive(Default)]
struct Window {
    lat: [Vec<f64>; 5],
    errors: [usize; 5],
}

fn message(id: String, text: &str) -> MessageSendParams {
    let mut m = Message::text(Role::User, text);
    m.message_id = id;
    MessageSendParams::new(m)
}

/// One operation; `Err` says what went wrong.
async fn op(c: &A2aClient, kind: usize, n: usize, hook: &str) -> Result<(), String> {
    let e = |e: agentry_a2a::A2aError| e.to_string();
    match OPS[kind] {
        "send" => match c
            .send_message(message(format!("tck-complete-task-soak-{n}"), "hi"))
            .await
            .map_err(e)?
        {
            SendMessageResult::Task(t) if t.state() == TaskState::Completed => Ok(()),
            other => Err(format!("send ended as {other:?}")),
        },
        "stream" => {
            let mut s = Box::pin(c.stream_message(message(format!("tck-stream-soak-{n}"), "hi")));
            let mut last = None;
            while let Some(ev) = s.next().await {
                last = Some(ev.map_err(e)?);
            }
            match last {
                Some(StreamEvent::StatusUpdate(u)) if u.status.state == TaskState::Completed => {
                    Ok(())
                }
                Some(StreamEvent::Task(t)) if t.state() == TaskState::Completed => Ok(()),
                other => Err(format!("stream ended on {other:?}")),
            }
        }
        "cancel" => {
            let SendMessageResult::Task(t) = c
                .send_message(message(format!("soak-cancel-{n}"), "keep working"))
                .await
                .map_err(e)?
            else {
                return Err("no task".into());
            };
            let t = c.cancel_task(&t.id).await.map_err(e)?;
            (t.state() == TaskState::Canceled)
                .then_some(())
                .ok_or(format!("cancel left {:?}", t.state()))
        }
        "resubscribe" => {
            let mut p = message(format!("test-resubscribe-message-id-soak-{n}"), "work");
            p.configuration = Some(MessageSendConfiguration {
                blocking: Some(false),
                ..Default::default()
            });
            let SendMessageResult::Task(t) = c.send_message(p).await.map_err(e)? else {
                return Err("no task".into());
            };
            let mut s = Box::pin(c.resubscribe(&t.id));
            let mut last = None;
            while let Some(ev) = s.next().await {
                last = Some(ev.map_err(e)?);
            }
            match last {
                Some(StreamEvent::StatusUpdate(u)) if u.status.state == TaskState::Completed => {
                    Ok(())
                }
                other => Err(format!("resubscription ended on {other:?}")),
            }
        }
        _ => {
            let mut p = message(format!("tck-complete-task-push-{n}"), "hi");
            p.configuration = Some(MessageSendConfiguration {
                push_notification_config: Some(PushNotificationConfig {
                    id: None,
                    url: hook.to_owned(),
                    token: Some(format!("soak-{n}")),
                    authentication: None,
                    body_version: None,
                }),
                ..Default::default()
            });
            match c.send_message(p).await.map_err(e)? {
                SendMessageResult::Task(t) if t.state() == TaskState::Completed => Ok(()),
                other => Err(format!("push send ended as {other:?}")),
            }
        }
    }
}

/// A series of a chart: its name, colour and values.
type Series<'a> = (&'a str, &'a str, Vec<f64>);

/// One 10 s sample: seconds, RSS MiB, p50 and p99 per operation, errors per operation, count.
struct Row {
    t: f64,
    mem: f64,
    p50: [f64; 5],
    p99: [f64; 5],
    errors: [usize; 5],
    count: usize,
}

/// A line chart: one panel per series group, time on x.
fn svg(title: &str, t: &[f64], panels: &[(&str, Vec<Series<'_>>)]) -> String {
    let (w, ph, left, top) = (900.0, 220.0, 70.0, 40.0);
    let h = top + panels.len() as f64 * (ph + 50.0);
    let tmax = t.last().copied().unwrap_or(1.0).max(1.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{left}\" y=\"22\" font-size=\"15\">{title}</text>"
    );
    for (i, (label, series)) in panels.iter().enumerate() {
        let y0 = top + i as f64 * (ph + 50.0);
        let ymax = series
            .iter()
            .flat_map(|(_, _, v)| v.iter().copied())
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.1;
        let pw = w - left - 20.0;
        s.push_str(&format!(
            "<rect x=\"{left}\" y=\"{y0}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>\
             <text x=\"{left}\" y=\"{}\">{label}</text>\
             <text x=\"5\" y=\"{}\">{ymax:.1}</text><text x=\"5\" y=\"{}\">0</text>\
             <text x=\"{}\" y=\"{}\">{:.0} min</text>",
            y0 - 6.0,
            y0 + 12.0,
            y0 + ph,
            w - 80.0,
            y0 + ph + 16.0,
            tmax / 60.0
        ));
        for (j, (name, color, v)) in series.iter().enumerate() {
            let pts: Vec<String> = t
                .iter()
                .zip(v)
                .map(|(x, y)| format!("{:.1},{:.1}", left + x / tmax * pw, y0 + ph - y / ymax * ph))
                .collect();
            s.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
                 <text x=\"{}\" y=\"{}\" fill=\"{color}\">{name}</text>",
                pts.join(" "),
                left + 10.0 + j as f64 * 130.0,
                y0 + ph + 16.0
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server_bin = args
        .first()
        .ok_or("usage: soak SERVE_ECHO_BINARY [MINUTES] [WORKERS] [OUT_DIR]")?;
    let minutes: f64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(30.0);
    let workers: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(32);
    let out = std::path::PathBuf::from(args.get(3).map_or("bench/out", String::as_str));
    std::fs::create_dir_all(&out)?;
    let dir = std::env::temp_dir().join(format!("agentry-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    // The webhook: counts deliveries.
    let pushed = Arc::new(AtomicUsize::new(0));
    let hook_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/hook", hook_listener.local_addr()?);
    let counter = pushed.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            // Every state change is pushed; the completed ones are counted.
            if body.contains("\"completed\"") || body.contains("TASK_STATE_COMPLETED") {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            async { "ok" }
        }),
    );
    tokio::spawn(async move { axum::serve(hook_listener, app).await });

    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = std::process::Command::new(server_bin)
        .args([
            &port.to_string(),
            "conformance",
            dir.join("tasks.db").to_str().unwrap(),
        ])
        .env("AGENTRY_STREAM_SECONDS", "2")
        .env("AGENTRY_ALLOW_PRIVATE_PUSH", "1")
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = server.id();
    let url = format!("http://127.0.0.1:{port}/");
    let cfg = ClientConfig {
        request_timeout: Duration::from_secs(60),
        stream_idle_timeout: Duration::from_secs(60),
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
    println!(
        "soak: {minutes} min, {workers} workers rotating {OPS:?}; server serve_echo (conformance, SQLite, power), pid {pid}; idle RSS {:.1} MiB",
        rss(pid)
    );

    let window = Arc::new(std::sync::Mutex::new(Window::default()));
    let deadline = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let seq = Arc::new(AtomicUsize::new(0));
    let pushes = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (c, window, seq, hook, pushes) = (
            client.clone(),
            window.clone(),
            seq.clone(),
            hook.clone(),
            pushes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut kind = w % OPS.len();
            while Instant::now() < deadline {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let t0 = Instant::now();
                let r = op(&c, kind, n, &hook).await;
                let ms = t0.elapsed().as_secs_f64() * 1000.0;
                if OPS[kind] == "push" && r.is_ok() {
                    pushes.fetch_add(1, Ordering::Relaxed);
                }
                {
                    let mut win = window.lock().unwrap();
                    win.lat[kind].push(ms);
                    if let Err(e) = r {
                        if win.errors[kind] == 0 {
                            eprintln!("{}: {e}", OPS[kind]);
                        }
                        win.errors[kind] += 1;
                    }
                }
                kind = (kind + 1) % OPS.len();
            }
        }));
    }

    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    let mut csv = String::from("seconds,rss_mib,ops");
    for o in OPS {
        csv.push_str(&format!(",{o}_p50_ms,{o}_p99_ms,{o}_errors"));
    }
    csv.push('\n');
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mut win = std::mem::take(&mut *window.lock().unwrap());
        let (mut p50, mut p99, mut count) = ([0.0; 5], [0.0; 5], 0);
        for k in 0..OPS.len() {
            win.lat[k].sort_by(f64::total_cmp);
            p50[k] = percentile(&win.lat[k], 0.5);
            p99[k] = percentile(&win.lat[k], 0.99);
            count += win.lat[k].len();
        }
        let t = started.elapsed().as_secs_f64();
        let mem = rss(pid);
        csv.push_str(&format!("{t:.0},{mem:.1},{count}"));
        for k in 0..OPS.len() {
            csv.push_str(&format!(",{:.1},{:.1},{}", p50[k], p99[k], win.errors[k]));
        }
        csv.push('\n');
        rows.push(Row {
            t,
            mem,
            p50,
            p99,
            errors: win.errors,
            count,
        });
    }
    for t in tasks {
        let _ = t.await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ops: usize = rows.iter().map(|r| r.count).sum();
    let errors: usize = rows.iter().map(|r| r.errors.iter().sum::<usize>()).sum();
    let pushes = pushes.load(Ordering::Relaxed);
    let delivered = pushed.load(Ordering::Relaxed);
    let mem: Vec<f64> = rows.iter().map(|r| r.mem).collect();
    let first_min = mem.iter().take(6).copied().fold(f64::MAX, f64::min);
    let last_min = mem.iter().rev().take(6).copied().fold(f64::MAX, f64::min);
    let peak = mem.iter().copied().fold(0.0, f64::max);
    println!(
        "{ops} operations ({:.0}/s), {errors} errors; `completed` pushed for {delivered} of {pushes} push tasks",
        ops as f64 / started.elapsed().as_secs_f64()
    );
    println!(
        "resident memory: lowest in the first minute {first_min:.1} MiB, in the last minute {last_min:.1} MiB, peak {peak:.1} MiB"
    );
    for (k, o) in OPS.iter().enumerate() {
        let mut p99: Vec<f64> = rows.iter().map(|r| r.p99[k]).collect();
        let med50: Vec<f64> = rows.iter().map(|r| r.p50[k]).collect();
        p99.sort_by(f64::total_cmp);
        println!(
            "  {o:<12} p50 over windows {:.1}..{:.1} ms, window p99 median {:.1} ms, worst {:.1} ms",
            med50.iter().copied().fold(f64::MAX, f64::min),
            med50.iter().copied().fold(0.0, f64::max),
            percentile(&p99, 0.5),
            p99.last().copied().unwrap_or(0.0)
        );
    }
    let t: Vec<f64> = rows.iter().map(|r| r.t).collect();
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];
    let p99s: Vec<Series<'_>> = OPS
        .iter()
        .enumerate()
        .map(|(k, o)| (*o, colors[k], rows.iter().map(|r| r.p99[k]).collect()))
        .collect();
    let p50s: Vec<Series<'_>> = OPS
        .iter()
        .enumerate()
        .map(|(k, o)| (*o, colors[k], rows.iter().map(|r| r.p50[k]).collect()))
        .collect();
    let chart = svg(
        &format!("agentry soak: {minutes} min, {workers} workers, mixed operations"),
        &t,
        &[
            (
                "server resident memory (MiB)",
                vec![("RSS", "#333", mem.clone())],
            ),
            ("p50 latency per 10 s window (ms)", p50s),
            ("p99 latency per 10 s window (ms)", p99s),
        ],
    );
    std::fs::write(out.join("soak.csv"), csv)?;
    std::fs::write(out.join("soak.svg"), chart)?;
    println!(
        "wrote {} and {}",
        out.join("soak.csv").display(),
        out.join("soak.svg").display()
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if errors > 0 || delivered < pushes {
        std::process::exit(1);
    }
    Ok(())
}
