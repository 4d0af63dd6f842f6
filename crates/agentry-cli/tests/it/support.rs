//! What the end-to-end tests share: the binary, a served agent that is killed on drop, runs of
//! the CLI.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_agentry");

pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    agentry_testkit::free_port()
}

/// Waits until something listens on `port` (up to 30 s: a debug build loading the embedded
/// model on a busy 2-core machine took over 5 s).
pub(crate) fn wait_for(port: u16) {
    for _ in 0..600 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port}");
}

pub(crate) fn serve(agent: &str, extra: &[&str]) -> (Server, String) {
    let port = free_port();
    let home = std::env::temp_dir().join(format!("agentry-cli-{port}"));
    serve_on(port, &home, agent, extra)
}

/// `agentry serve --agent AGENT` with its state (task stores) in `home`.
pub(crate) fn serve_in(home: &std::path::Path, agent: &str, extra: &[&str]) -> (Server, String) {
    serve_on(free_port(), home, agent, extra)
}

/// `agentry serve --agent AGENT` on `port` with its state in `home` (a restart on the same
/// address).
pub(crate) fn serve_on(
    port: u16,
    home: &std::path::Path,
    agent: &str,
    extra: &[&str],
) -> (Server, String) {
    let child = Command::new(BIN)
        .args(["serve", "--agent", agent, "--port", &port.to_string()])
        .args(extra)
        .env("AGENTRY_HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    wait_for(port);
    (server, format!("http://127.0.0.1:{port}"))
}

/// `agentry serve --config CONFIG --port PORT` with its state beside the config and these
/// variables set; returns once it listens.
pub(crate) fn serve_config(
    config: &std::path::Path,
    port: u16,
    env: &[(&str, &std::ffi::OsStr)],
) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config"])
        .arg(config)
        .args(["--port", &port.to_string()])
        .env(
            "AGENTRY_HOME",
            config.parent().unwrap_or(std::path::Path::new(".")),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let server = Server(cmd.spawn().unwrap());
    wait_for(port);
    server
}

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A JSON POST over plain HTTP to `127.0.0.1:port`; the raw response (status line, headers,
/// body). For requests the CLI cannot make as written (chosen message ids, hostile bodies).
pub(crate) fn post_json(port: u16, path: &str, body: &str) -> String {
    post_json_with(port, path, body, &[])
}

/// [`post_json`] with more headers.
pub(crate) fn post_json_with(
    port: u16,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> String {
    use std::io::{Read, Write};
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Where the demo data is (`scripts/fetch-data.sh`).
pub(crate) fn data_dir() -> std::path::PathBuf {
    std::env::var_os("AGENTRY_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/agentry/data")
        })
}

/// Whether the embedder is fetched (`scripts/fetch-models.sh`).
pub(crate) fn models_present() -> bool {
    std::env::var_os("AGENTRY_MODELS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/agentry/models")
        })
        .join("all-minilm-l6-v2/model.safetensors")
        .exists()
}

/// A plain HTTP GET to `127.0.0.1:port`; the raw response.
pub(crate) fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
