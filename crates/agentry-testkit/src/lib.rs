//! What agentry's test suites share (a dev-dependency only, never published): gates for
//! peers a machine may lack (the embedded models, the official SDKs, PostgreSQL), free ports,
//! scratch folders, the repository root.
//!
//! A gate passes when its peer is there. When it is not, the test fails if the test command
//! requires that kind of peer (`AGENTRY_REQUIRE_MODELS`, `AGENTRY_REQUIRE_INTEROP`,
//! `AGENTRY_REQUIRE_POSTGRES`, `AGENTRY_REQUIRE_NATS`, `AGENTRY_REQUIRE_SHARED` set to `1`, as `scripts/test.sh` and
//! CI set them), and otherwise
//! records a skip: a `SKIPPED:` line on stderr and one in the file `$AGENTRY_SKIP_LOG`, which
//! the test command counts and prints at its end (a skip inside a passing test is otherwise
//! invisible: the harness captures its output).
//!
//! ```
//! use agentry_testkit::{Peer, require_path};
//!
//! fn a_test_that_needs_a_peer() {
//!     // `None` (skip recorded) or a panic (required) when the file is missing.
//!     let Some(_script) = require_path(Peer::Interop, "/no/such/peer.py", "run scripts/test.sh")
//!     else {
//!         return;
//!     };
//! }
//! # // Not required here: the doctest itself must not fail on the missing file.
//! # if std::env::var_os("AGENTRY_REQUIRE_INTEROP").is_none() { a_test_that_needs_a_peer(); }
//! ```

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A kind of peer a test may need, each with the variable that makes it required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The embedded models and data (`scripts/fetch-models.sh`, `scripts/fetch-data.sh`).
    Models,
    /// The official SDKs and reference servers the test command installs (PyPI, npm).
    Interop,
    /// A PostgreSQL server at 127.0.0.1:5432.
    Postgres,
    /// A NATS server (127.0.0.1:4222, or `$AGENTRY_TEST_NATS`).
    Nats,
    /// The shared folder beside the repository (`../shared`: the tau2 domains and source
    /// archive, the conformance kits), which a clone on its own does not have.
    Shared,
}

impl Peer {
    /// The variable that, set to `1`, turns a missing peer of this kind into a failure.
    pub fn variable(self) -> &'static str {
        match self {
            Peer::Models => "AGENTRY_REQUIRE_MODELS",
            Peer::Interop => "AGENTRY_REQUIRE_INTEROP",
            Peer::Postgres => "AGENTRY_REQUIRE_POSTGRES",
            Peer::Nats => "AGENTRY_REQUIRE_NATS",
            Peer::Shared => "AGENTRY_REQUIRE_SHARED",
        }
    }

    /// Whether the test command requires this kind of peer.
    pub fn required(self) -> bool {
        std::env::var(self.variable()).as_deref() == Ok("1")
    }
}

/// `what` is missing: panics when `peer` is required, else records the skip and returns
/// `None` (for `let Some(..) = .. else { return }`).
#[track_caller]
pub fn missing<T>(peer: Peer, what: impl Display) -> Option<T> {
    assert!(
        !peer.required(),
        "{what} (required: {} is set)",
        peer.variable()
    );
    record_skip(&what.to_string());
    None
}

/// `path` when it exists; otherwise [`missing`], saying what is missing and `how` to get it.
#[track_caller]
pub fn require_path(peer: Peer, path: impl Into<PathBuf>, how: &str) -> Option<PathBuf> {
    let path = path.into();
    if path.exists() {
        return Some(path);
    }
    missing(peer, format!("{} is missing: {how}", path.display()))
}

/// Writes a skip to stderr and appends it to `$AGENTRY_SKIP_LOG` (test binary and reason).
pub fn record_skip(why: &str) {
    eprintln!("SKIPPED: {why}");
    let Some(log) = std::env::var_os("AGENTRY_SKIP_LOG") else {
        return;
    };
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    // One short write with O_APPEND: lines from parallel tests do not interleave.
    let line = format!("{binary}: {}\n", why.replace('\n', " "));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// A TCP port free on 127.0.0.1 when asked (for peers that must be told their port).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The folder of shared peers and data beside the repository (`../shared`: the conformance
/// kits, the tau2 domains), or `$AGENTRY_SHARED_DIR`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("AGENTRY_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => repo_root().join("../shared"),
    }
}

/// A test's own folder under the system's temporary folder: empty when made, removed when
/// dropped, kept (and named on stderr) when the test fails, for a look at what it wrote.
/// Named after the test, this process and a counter, so that tests running at once, and
/// the same test in two test processes, never share one.
///
/// ```
/// let dir = agentry_testkit::Scratch::new("doc");
/// std::fs::write(dir.join("a.txt"), "x").unwrap();
/// let path = dir.to_path_buf();
/// drop(dir);
/// assert!(!path.exists());
/// ```
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder whose name starts with `agentry-{name}-`.
    #[track_caller]
    pub fn new(name: &str) -> Scratch {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agentry-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // Left by an earlier process with the same id.
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot make {}: {e}", dir.display());
        }
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
