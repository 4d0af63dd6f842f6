//! Issue 21's example, as a user runs it: `examples/governance/run.sh` with this build's
//! binary. Three agents on three ports (orchestrator with its token service and a trigger,
//! the RAG knowledge agent, the mail agent), a user's token from the development identity
//! provider, delegated tokens per call, a draft, a send confirmed in a second turn, and the
//! audit trail of the request on each agent.

use std::path::Path;
use std::process::Command;

use crate::support::{BIN, free_port, models_present};

#[test]
fn the_three_agent_governance_example_runs_and_leaves_a_verified_trail() {
    // Skipped (or failed, where models are required) without them: the knowledge agent
    // embeds its handbook.
    if !models_present() {
        let _ = agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Models,
            "the embedded models are missing: run scripts/fetch-models.sh",
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = agentry_testkit::Scratch::new("governance-example");
    let out = Command::new("bash")
        .arg(root.join("examples/governance/run.sh"))
        .env("AGENTRY", BIN)
        .env("WORK", &work)
        .env("PORT_ORCHESTRATOR", free_port().to_string())
        .env("PORT_KNOWLEDGE", free_port().to_string())
        .env("PORT_MAIL", free_port().to_string())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    // The draft answers the question from the handbook, and was sent only once confirmed.
    let sent: Vec<_> = std::fs::read_dir(work.join("outbox/sent"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(sent.len(), 1, "{stdout}");
    let mail = std::fs::read_to_string(&sent[0]).unwrap();
    assert!(mail.contains("To: hr-questions@example.com"), "{mail}");
    assert!(mail.contains("up to three days a week"), "{mail}");
    assert_eq!(
        std::fs::read_dir(work.join("outbox/drafts"))
            .unwrap()
            .count(),
        0,
        "the draft left the drafts when sent"
    );
    let states: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("\"state\""))
        .collect();
    assert_eq!(
        states,
        ["\"state\": \"input-required\"", "\"state\": \"completed\""],
        "{stdout}"
    );

    // The trail of req-1: the user at the orchestrator, a token per call (least privilege),
    // the orchestrator acting for the user at each agent, the user confirming the send.
    for line in [
        "authz      jwt:alice -> orchestrator/message/send: allow",
        "token      orchestrator for jwt:alice -> ",
        "\"scope\":\"handbook.read\"",
        "\"scope\":\"mail.draft\"",
        "authz      orchestrator for jwt:alice -> Handbook Knowledge Base/message/send: allow",
        "authz      orchestrator for jwt:alice -> mail/message/send: allow",
        "authz      jwt:alice -> mail/message/send task ",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert_eq!(
        stdout.matches("chain and head intact").count(),
        3,
        "{stdout}"
    );
}

/// Triggers from a database (`[server] triggers_db`): `agentry triggers put|remove` changes
/// what a running server admits, within about a second, without a restart.
#[test]
fn triggers_put_in_the_database_reach_a_running_server() {
    use crate::support::{post_json, run, serve_config, stdout};
    let dir = agentry_testkit::Scratch::new("trigger-db");
    let port = free_port();
    let config = dir.join("agentry.toml");
    std::fs::write(
        &config,
        "[server]\nstore = \"memory\"\ntriggers_db = \"triggers.db\"\n\
         [[agents]]\npath = \"/\"\nbuiltin = { kind = \"echo\" }\n",
    )
    .unwrap();
    let server = serve_config(&config, port, &[]);
    let db = dir.join("triggers.db");
    let db = db.to_str().unwrap();
    let mut n = 0;
    let mut send = || {
        n += 1;
        let body = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "message/send",
            "params": {"message": {"role": "user", "messageId": format!("m-{n}"),
                "parts": [{"kind": "text", "text": "hello"}],
                "metadata": {"urn:agentry:a2a:task-envelope:v1": {"triggerId": "nightly"}}}}});
        post_json(port, "/", &body.to_string())
    };
    let settle = || std::thread::sleep(std::time::Duration::from_millis(1300));
    assert!(send().contains("unknown trigger `nightly`"));

    let put = |json: &str| run(&["triggers", "put", "--db", db, json]);
    let out = put(
        r#"{"id": "nightly", "system_prompt": "Be brief.", "agents": ["echo"], "priority": "high"}"#,
    );
    assert!(out.status.success(), "{out:?}");
    settle();
    let ok = send();
    assert!(
        ok.contains("\"completed\"") && ok.contains("\"priority\":\"high\""),
        "{ok}"
    );

    assert!(
        put(r#"{"id": "nightly", "agents": ["mailer"]}"#)
            .status
            .success()
    );
    let listed = stdout(&run(&["triggers", "list", "--db", db]));
    assert!(
        listed.contains("\"mailer\"") && listed.lines().count() == 1,
        "{listed}"
    );
    settle();
    let other = send();
    assert!(other.contains("does not apply to agent `echo`"), "{other}");

    assert!(
        run(&["triggers", "remove", "--db", db, "nightly"])
            .status
            .success()
    );
    settle();
    assert!(send().contains("unknown trigger `nightly`"));
    // Bad input is refused with a reason and changes nothing.
    let bad = put(r#"{"id": "nightly", "colour": "red"}"#);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not a trigger"),
        "{bad:?}"
    );
    let gone = run(&["triggers", "remove", "--db", db, "nightly"]);
    assert!(!gone.status.success());
    assert!(stdout(&run(&["triggers", "list", "--db", db])).is_empty());
    drop(server);
}
