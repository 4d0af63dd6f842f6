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
    if !models_present()
        && agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Models,
            "the embedded models are missing: run scripts/fetch-models.sh",
        )
        .is_some()
    {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work =
        std::env::temp_dir().join(format!("agentry-governance-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
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
    let _ = std::fs::remove_dir_all(&work);
}
