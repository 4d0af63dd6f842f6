//! The adversarial suite: each case is an attack a review found working against a served
//! `agentry` process, replayed against a real one on loopback. Each test says which defect of
//! the security issue it pins down; SECURITY.md has the threat model.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{run, serve_in};

/// A fresh folder under the system temp dir, removed when the test passes.
fn scratch(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("sec-{name}"))
}

/// Sends `request` and returns the task (or whatever came back, as a string value) and how
/// long it took. A reply that never comes fails the test through the CLI's own timeout.
fn send(url: &str, request: &Value) -> (Value, Duration) {
    let t = Instant::now();
    let o = run(&["a2a", "send", url, &request.to_string(), "--json"]);
    let took = t.elapsed();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        Value::String(format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    });
    (v, took)
}

/// The text of the task's status message (what the agent said, without the request).
fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| task.to_string())
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// Refused: a failed task that says the source is not allowed and names no host path.
fn assert_refused(url: &str, source: &str, host_paths: &[&Path]) {
    let (task, _) = send(url, &json!({"source": source, "sql": "SELECT 1 AS one"}));
    assert_eq!(state(&task), "failed", "{source}: {task}");
    let said = status_text(&task);
    assert!(
        said.contains("is not a data source this agent may read"),
        "{source}: {said}"
    );
    // The refusal quotes the caller's own words and nothing more of the host.
    let rest = said.replace(source, "");
    for p in host_paths {
        assert!(
            !rest.contains(&*p.to_string_lossy()),
            "{source}: the error names the host path {}: {said}",
            p.display()
        );
    }
}

/// Issue 18, item 1: the data agent reads only its folders, never the server's state, never
/// through symlinks, `..`, FIFOs or unlisted database URLs; a data agent given nothing reads
/// nothing.
#[test]
fn the_data_agent_reads_only_what_it_was_given() {
    let root = scratch("data");
    let (inside, outside) = (root.join("inside"), root.join("outside"));
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(inside.join("ok.csv"), "x,y\n1,2\n3,4\n").unwrap();
    std::fs::write(outside.join("secret.csv"), "secret\nhunter2\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.csv"), inside.join("link.csv")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(inside.join("pipe.csv"))
        .status()
        .unwrap();
    assert!(fifo.success());
    // The server's own state (its task store) inside the allowed folder.
    let home = inside.join("state");
    std::fs::create_dir_all(&home).unwrap();

    let folder = inside.to_str().unwrap();
    let (_server, url) = serve_in(&home, "data", &["--store", "sqlite", "--data", folder]);
    // Allowed: a file by its relative path.
    let (task, _) = send(
        &url,
        &json!({"source": "ok.csv", "sql": "SELECT sum(y) AS s FROM ok"}),
    );
    assert_eq!(state(&task), "completed", "{task}");
    assert!(task.to_string().contains("| 6 |"), "{task}");
    let answer = task["artifacts"].to_string();
    assert!(
        !answer.contains(folder),
        "the answer names no host path: {answer}"
    );
    // Refused, each without saying where it is or whether it exists.
    let secret = outside.join("secret.csv");
    let hidden: &[&Path] = &[&inside, &outside];
    assert_refused(&url, secret.to_str().unwrap(), hidden);
    assert_refused(&url, "../outside/secret.csv", hidden);
    assert_refused(&url, "link.csv", hidden);
    assert_refused(&url, "pipe.csv", hidden);
    assert_refused(&url, "state/data.db", hidden);
    assert_refused(&url, home.join("data.db").to_str().unwrap(), hidden);
    assert_refused(&url, "/etc/passwd", hidden);
    assert_refused(&url, "/nonexistent/x.csv", hidden);
    assert_refused(&url, "postgres://127.0.0.1:5432/test", hidden);
    assert_refused(&url, "postgres://127.0.0.1:1/x", hidden);

    // Closed by default: no --data, nothing is readable, not even by absolute path.
    let home2 = scratch("data-closed");
    let (_closed, url2) = serve_in(&home2, "data", &["--store", "memory"]);
    assert_refused(&url2, "ok.csv", hidden);
    assert_refused(&url2, inside.join("ok.csv").to_str().unwrap(), hidden);
    let (task, _) = send(&url2, &json!({"source": "ok.csv", "sql": "SELECT 1"}));
    assert!(
        status_text(&task).contains("no data sources are configured"),
        "{task}"
    );
}

/// Issue 18, items 2, 6 and 10: a deeply nested expression does not abort the server, a
/// runaway query is stopped by its time budget (DataFusion and SQLite), and a chart over a
/// ±1e308 range is refused instead of spinning a core forever.
#[test]
fn queries_and_charts_cannot_exhaust_the_data_server() {
    let root = scratch("bounded");
    std::fs::write(root.join("ok.csv"), "a,b\n1,2\n3,4\n").unwrap();
    // An empty file is an empty SQLite database.
    std::fs::write(root.join("empty.db"), b"").unwrap();
    std::fs::write(root.join("huge.csv"), "x,y\nlow,-1e308\nhigh,1e308\n").unwrap();
    let home = scratch("bounded-home");
    let (mut server, url) = serve_in(
        &home,
        "data",
        &[
            "--store",
            "memory",
            "--data",
            root.to_str().unwrap(),
            "--query-seconds",
            "2",
        ],
    );
    // 700 terms: a 1.4 KB query that overflowed a worker's stack before.
    let deep = format!("SELECT {} AS s FROM ok", vec!["a"; 700].join("+"));
    let (task, _) = send(&url, &json!({"source": "ok.csv", "sql": deep}));
    assert!(
        matches!(state(&task), "completed" | "failed"),
        "an answer, not a dead server: {task}"
    );
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "the server is alive"
    );

    let forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) \
                   SELECT count(*) AS c FROM r";
    for source in ["ok.csv", "empty.db"] {
        let (task, took) = send(&url, &json!({"source": source, "sql": forever}));
        assert_eq!(state(&task), "failed", "{source}: {task}");
        assert!(task.to_string().contains("time budget"), "{source}: {task}");
        assert!(
            took < Duration::from_secs(60),
            "{source}: stopped by the budget, not by luck ({took:?})"
        );
    }

    let (task, _) = send(
        &url,
        &json!({"source": "huge.csv", "sql": "SELECT x, y FROM huge",
                "chart": {"kind": "bar", "x": "x", "y": "y"}}),
    );
    assert_eq!(state(&task), "failed", "{task}");
    assert!(task.to_string().contains("cannot plot"), "{task}");

    // Still serving after all of the above.
    let (task, _) = send(
        &url,
        &json!({"source": "ok.csv", "sql": "SELECT count(*) AS n FROM ok"}),
    );
    assert_eq!(state(&task), "completed", "{task}");
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "the server is alive"
    );
}

/// A 1x1 PNG.
const PNG: &str = "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d\
                   4944415478da63f8ffff3f0005fe02fea7a69da00000000049454e44ae426082";

fn png_bytes() -> Vec<u8> {
    (0..PNG.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&PNG[i..i + 2], 16).unwrap())
        .collect()
}

/// Issue 18, items 5 and 14: the PPT agent takes pictures only from its picture folders
/// (none by default), only regular files (a FIFO froze a worker), never through a symlink out;
/// a planted symlink at the temporary file's name is not followed.
#[test]
fn the_ppt_agent_reads_pictures_only_from_its_folders() {
    let root = scratch("ppt");
    let (pics, outside, out) = (root.join("pics"), root.join("outside"), root.join("out"));
    for d in [&pics, &outside, &out] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(pics.join("ok.png"), png_bytes()).unwrap();
    std::fs::write(outside.join("secret.png"), png_bytes()).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.png"), pics.join("link.png")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(pics.join("pipe.png"))
            .status()
            .unwrap()
            .success()
    );
    // The old temporary name, planted as a symlink to a file the deck must not overwrite.
    let victim = outside.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("deck.pptx.part")).unwrap();

    let outline = |picture: &str| {
        json!({"title": "T", "file_name": "deck.pptx",
               "slides": [{"title": "S", "bullets": ["b"], "pictures": [picture]}]})
    };
    let home = scratch("ppt-home");
    let o = out.to_str().unwrap();
    let (_closed, url) = serve_in(&home, "ppt", &["--store", "memory", "--output", o]);
    let (task, _) = send(&url, &outline(pics.join("ok.png").to_str().unwrap()));
    assert_eq!(state(&task), "failed", "{task}");
    assert!(
        status_text(&task).contains("no picture folder is configured"),
        "{task}"
    );

    let p = pics.to_str().unwrap();
    let (_server, url) = serve_in(
        &home,
        "ppt",
        &["--store", "memory", "--output", o, "--pictures", p],
    );
    for bad in [
        "link.png",
        "pipe.png",
        "../outside/secret.png",
        outside.join("secret.png").to_str().unwrap(),
        "/dev/zero",
        "/dev/stdin",
    ] {
        let (task, took) = send(&url, &outline(bad));
        assert_eq!(state(&task), "failed", "{bad}: {task}");
        assert!(status_text(&task).contains("cannot read"), "{bad}: {task}");
        assert!(took < Duration::from_secs(60), "{bad}: {took:?}");
    }
    let (task, _) = send(&url, &outline("ok.png"));
    assert_eq!(state(&task), "completed", "{task}");
    assert!(out.join("deck.pptx").exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    // Item 14: another client's deck of the same name does not replace the first, and the
    // reply carries the deck itself and its name, never a server path.
    let first = std::fs::read(out.join("deck.pptx")).unwrap();
    let (task, _) = send(&url, &outline("ok.png"));
    assert_eq!(state(&task), "completed", "{task}");
    assert_eq!(std::fs::read(out.join("deck.pptx")).unwrap(), first);
    assert!(out.join("deck-2.pptx").exists());
    let reply = task.to_string();
    assert!(!reply.contains(o), "a server path in the reply: {reply}");
    assert!(status_text(&task).contains("as deck-2.pptx"), "{task}");
    // The artifact's file part: the deck's bytes (a zip: "PK\x03\x04" starts "UEsDB" in base64).
    assert!(
        task["artifacts"].to_string().contains("\"UEsDB"),
        "{}",
        task["artifacts"]
    );
}

/// One raw HTTP/1.1 request to the loopback server; the whole response as text.
fn raw(url: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn post(url: &str, host: &str, headers: &str, body: &str) -> String {
    raw(
        url,
        &format!(
            "POST / HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Issue 18, items 3, 8 and 14: a web page cannot drive a loopback agent (no JSON content
/// type: refused before anything runs; a DNS-rebound `Host`: 421), credentials are checked
/// before the body is decoded and the auth scheme is case-insensitive.
#[test]
fn browsers_cannot_drive_a_loopback_agent() {
    let home = scratch("transport");
    let (_server, url) = serve_in(&home, "echo", &["--store", "memory"]);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message":
        {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}})
    .to_string();
    let ok = post(
        &url,
        "127.0.0.1",
        "Content-Type: application/json\r\n",
        &send,
    );
    assert!(ok.contains("\"completed\""), "{ok}");
    // A form post or fetch() with text/plain needs no CORS preflight: refused.
    for ct in ["Content-Type: text/plain\r\n", ""] {
        let r = post(&url, "127.0.0.1", ct, &send);
        assert!(r.contains("content type not supported"), "{ct:?}: {r}");
        assert!(!r.contains("\"completed\""), "{ct:?}: nothing ran: {r}");
    }
    // DNS rebinding: the page's own name in Host.
    let r = post(
        &url,
        "evil.example:8080",
        "Content-Type: application/json\r\n",
        &send,
    );
    assert!(r.starts_with("HTTP/1.1 421"), "{r}");
    let r = raw(
        &url,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 421"), "{r}");
    let r = raw(
        &url,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");

    // With a token: BEARER works, no token is refused before the (malformed) body is read.
    let (_secured, url) = serve_in(&home, "echo", &["--store", "memory", "--token", "s3cret"]);
    let json_ct = "Content-Type: application/json\r\n";
    let r = post(&url, "localhost", json_ct, "{not json");
    assert!(
        r.starts_with("HTTP/1.1 401"),
        "unauthenticated first, not a parse error: {r}"
    );
    let r = post(
        &url,
        "localhost",
        &format!("{json_ct}Authorization: BEARER s3cret\r\n"),
        &send,
    );
    assert!(r.contains("\"completed\""), "{r}");
}
