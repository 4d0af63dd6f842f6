//! Where the reference data and tau2 itself are.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use agentry_eval::domain::Domain;
use agentry_testkit::{Peer, repo_root, require_path, shared_dir};

/// tau2's retail domain from the shared folder (not shipped with agentry).
pub(crate) fn retail() -> Option<Domain> {
    let dir = require_path(
        Peer::Shared,
        shared_dir().join("tau2/domains/retail"),
        "the tau2 retail domain is in ../shared/tau2 (or set AGENTRY_SHARED_DIR)",
    )?;
    Some(Domain::load(&dir, None).expect("retail loads"))
}

/// tau2-bench's Python, installed by the test command from the pinned source archive.
pub(crate) fn tau2_python() -> Option<PathBuf> {
    require_path(
        Peer::Shared,
        repo_root().join(".venv-tau2/bin/python"),
        "tau2-bench is installed into .venv-tau2 by scripts/test.sh from ../shared/tau2",
    )
}

/// A tau2 data folder (`tau2/domains/{mock,retail}`) made of links, for TAU2_DATA_DIR.
pub(crate) fn tau2_data_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentry-tau2-data-{}", std::process::id()));
    let domains = dir.join("tau2/domains");
    std::fs::create_dir_all(&domains).unwrap();
    // Tests make it concurrently: a link another test made first is fine.
    let link = |from: PathBuf, to: PathBuf| match std::os::unix::fs::symlink(from, &to) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            panic!("{}: {e}", to.display())
        }
        _ => {}
    };
    link(
        repo_root().join("crates/agentry-eval/domains/mock"),
        domains.join("mock"),
    );
    link(
        shared_dir().join("tau2/domains/retail"),
        domains.join("retail"),
    );
    // The user-simulation guidelines agentry ships (tau2's, unchanged).
    let guidelines = dir.join("tau2/user_simulator");
    std::fs::create_dir_all(&guidelines).unwrap();
    for f in ["simulation_guidelines.md", "simulation_guidelines_tools.md"] {
        link(
            repo_root().join("crates/agentry-eval/domains").join(f),
            guidelines.join(f),
        );
    }
    dir
}

/// Runs `tau2_check.py` with tau2 and returns its JSON.
pub(crate) fn tau2_check(python: &PathBuf, args: &[&str]) -> serde_json::Value {
    let script = repo_root().join("crates/agentry-eval/tests/interop/tau2_check.py");
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .env("TAU2_DATA_DIR", tau2_data_dir())
        .output()
        .expect("tau2 runs");
    assert!(
        out.status.success(),
        "tau2_check {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    serde_json::from_slice(&out.stdout).expect("tau2_check prints JSON")
}
