//! `agentry serve` in operation: metrics and probes from agentry.toml, draining on SIGTERM.

use crate::support::{free_port, http_get, run, serve_config, stdout};

/// `[server] metrics = true` serves Prometheus text that counts what was asked; on SIGTERM
/// `/readyz` says draining for `drain_delay_ms` while requests are still answered, then the
/// process exits by itself.
#[test]
fn metrics_and_draining_from_the_config() {
    let dir = agentry_testkit::Scratch::new("ops");
    let config = dir.join("agentry.toml");
    std::fs::write(
        &config,
        "[server]\nstore = \"memory\"\nmetrics = true\ndrain_delay_ms = 3000\n\n\
         [[agents]]\npath = \"/\"\nbuiltin = { kind = \"echo\" }\n",
    )
    .unwrap();
    let port = free_port();
    let mut server = serve_config(&config, port, &[]);
    assert!(http_get(port, "/readyz").starts_with("HTTP/1.1 200"));
    let base = format!("http://127.0.0.1:{port}/");
    let sent = run(&["a2a", "send", &base, "hello"]);
    assert!(stdout(&sent).contains("hello"), "{}", stdout(&sent));
    let metrics = http_get(port, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    let sends = metrics
        .lines()
        .filter(|l| l.starts_with("a2a_requests_total{") && l.contains("code=\"200\""))
        .filter(|l| l.contains("method=\"SendMessage\"") || l.contains("method=\"message/send\""))
        .count();
    assert_eq!(sends, 1, "{metrics}");
    assert!(metrics.contains("a2a_tasks{agent="), "{metrics}");

    let pid = server.0.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let ready = http_get(port, "/readyz");
    assert!(
        ready.starts_with("HTTP/1.1 503") && ready.contains("draining"),
        "{ready}"
    );
    let again = run(&["a2a", "send", &base, "still there"]);
    assert!(stdout(&again).contains("still there"), "{}", stdout(&again));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running after the drain"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `AGENTRY_LOG_FORMAT=json`: every log line is one JSON object (time, level, target, the
/// event's fields) a log collector can read; the start-up lines name what is served.
#[test]
fn logs_are_json_lines_when_asked() {
    use std::io::BufRead;
    let port = free_port();
    let home = agentry_testkit::Scratch::new("json-logs");
    let mut child = std::process::Command::new(crate::support::BIN)
        .args(["serve", "--agent", "echo", "--store", "memory", "--port"])
        .arg(port.to_string())
        .env("AGENTRY_HOME", &home)
        .env("AGENTRY_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let server_stderr = child.stderr.take().unwrap();
    let server = crate::support::Server(child);
    crate::support::wait_for(port);
    drop(server);
    let lines: Vec<String> = std::io::BufReader::new(server_stderr)
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(!lines.is_empty(), "no log lines");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"));
        assert!(v["timestamp"].is_string(), "{line}");
        assert!(v["level"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    assert!(
        lines.iter().any(|l| l.contains("agent `echo`")),
        "{lines:?}"
    );
}
