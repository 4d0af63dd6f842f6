//! The protocol's reference agents: `echo` (benchmarks measure the server with it) and
//! `conformance`, a test agent that external conformance suites drive through every
//! lifecycle path. They live here, not in the protocol crate, which knows no agents.

use std::time::Duration;

use serde_json::json;

use agentry_a2a::model::*;
use agentry_a2a::server::{AgentExecutor, EventSink, ExecutorError, RequestContext};

/// How the echo agent answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EchoMode {
    /// A task: submitted, working, an `echo` artifact, completed.
    #[default]
    Task,
    /// A direct message, no task.
    Message,
}

/// Echoes the text of each message.
#[derive(Debug, Clone, Default)]
pub struct Echo {
    /// A task or a direct message.
    pub mode: EchoMode,
}

impl Echo {
    /// The echo agent's card, served at `url`.
    pub fn card(url: &str) -> AgentCard {
        let mut card = AgentCard::new("echo", "Echoes every message it receives.", url);
        card.capabilities.streaming = Some(true);
        card.capabilities.push_notifications = Some(true);
        card.skills.push(AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Returns the text it is sent.".into(),
            tags: vec!["echo".into(), "test".into()],
            examples: vec!["hello".into()],
            input_modes: None,
            output_modes: None,
            security: Vec::new(),
        });
        card
    }
}

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let text = ctx.message.text_content();
        match self.mode {
            EchoMode::Message => events.message(events.agent_text(text)).await,
            EchoMode::Task => {
                events.working(None).await?;
                let artifact = Artifact::new(Some("echo"), vec![Part::text(text)]);
                events.artifact(artifact, false, true).await?;
                events.complete(None).await
            }
        }
    }
}

/// A test agent whose behaviour the incoming messageId selects (longest prefix first), so
/// conformance suites (the A2A TCK, the official SDKs' suites) can drive every path:
///
/// | messageId prefix | outcome |
/// |---|---|
/// | `test-resubscribe-message-id` | `working` for 10 s, an artifact chunk every 0.5 s, then completed |
/// | `tck-complete-task` | completed, agent message "Hello from TCK" |
/// | `tck-input-required` | input-required |
/// | `tck-reject-task` | rejected |
/// | `tck-artifact-text` | completed with a text artifact "Generated text content" |
/// | `tck-artifact-data` | completed with a data artifact `{"key":"value","count":42}` |
/// | `tck-artifact-file-url` | completed with a file artifact by URI |
/// | `tck-artifact-file` | completed with a file artifact `output.txt` holding `tck` |
/// | `tck-message-response` | a direct message "Direct message response", no task |
/// | `tck-stream-artifact-chunked` | working, two chunks of one artifact, completed |
/// | `tck-stream-002` | completed |
/// | `tck-stream` | working, a text artifact, completed |
/// | anything else | working, an echo artifact, then the turn ends with the task `working` |
///
/// Every turn that does not end the task leaves it `working` (or `input-required` when asked
/// to), so a client can continue or cancel a task after a blocking send.
#[derive(Debug, Clone)]
pub struct Conformance {
    /// How long `test-resubscribe-message-id` tasks stay working.
    pub resubscribe_window: Duration,
}

impl Default for Conformance {
    fn default() -> Self {
        Conformance {
            resubscribe_window: Duration::from_secs(10),
        }
    }
}

const BEHAVIOURS: &[&str] = &[
    "test-resubscribe-message-id",
    "tck-stream-artifact-chunked",
    "tck-artifact-file-url",
    "tck-message-response",
    "tck-input-required",
    "tck-complete-task",
    "tck-artifact-text",
    "tck-artifact-data",
    "tck-artifact-file",
    "tck-reject-task",
    "tck-stream-002",
    "tck-stream",
];

/// The behaviour a messageId selects: the longest matching prefix.
pub fn conformance_behaviour(message_id: &str) -> Option<&'static str> {
    BEHAVIOURS
        .iter()
        .filter(|p| message_id.starts_with(**p))
        .max_by_key(|p| p.len())
        .copied()
}

impl Conformance {
    /// The conformance agent's card, served at `url`: every capability the kits test.
    pub fn card(url: &str) -> AgentCard {
        let mut card = AgentCard::new(
            "conformance",
            "Test agent for A2A conformance suites: the messageId prefix selects the behaviour.",
            url,
        );
        card.capabilities.streaming = Some(true);
        card.capabilities.push_notifications = Some(true);
        card.capabilities.state_transition_history = Some(false);
        card.default_input_modes = vec!["text/plain".into(), "application/json".into()];
        card.default_output_modes = vec!["text/plain".into(), "application/json".into()];
        card.skills.push(AgentSkill {
            id: "conformance".into(),
            name: "Conformance".into(),
            description: "Drives every task lifecycle path by messageId prefix.".into(),
            tags: vec!["test".into(), "conformance".into()],
            examples: vec!["tck-complete-task-0001".into()],
            input_modes: None,
            output_modes: None,
            security: Vec::new(),
        });
        card
    }
}

fn text_artifact(name: &str, text: &str) -> Artifact {
    Artifact::new(Some(name), vec![Part::text(text)])
}

impl AgentExecutor for Conformance {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        let id = ctx.message.message_id.as_str();
        match conformance_behaviour(id) {
            Some("test-resubscribe-message-id") => {
                ev.working(Some(ev.agent_text("working for a while")))
                    .await?;
                let artifact_id = agentry_a2a::new_id();
                let ticks = (self.resubscribe_window.as_millis() / 500).max(1);
                for i in 0..ticks {
                    tokio::select! {
                        _ = ctx.canceled() => return Ok(()),
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                    let mut a = text_artifact("progress", &format!("tick {i}\n"));
                    a.artifact_id = artifact_id.clone();
                    ev.artifact(a, i > 0, false).await?;
                }
                ev.complete(Some(ev.agent_text("done"))).await
            }
            Some("tck-complete-task") => ev.complete(Some(ev.agent_text("Hello from TCK"))).await,
            Some("tck-input-required") => {
                ev.input_required(Some(ev.agent_text("Please provide more input")))
                    .await
            }
            Some("tck-reject-task") => ev.reject(Some(ev.agent_text("Task rejected"))).await,
            Some("tck-artifact-text") => {
                ev.artifact(text_artifact("text", "Generated text content"), false, true)
                    .await?;
                ev.complete(None).await
            }
            Some("tck-artifact-data") => {
                let data = json!({"key": "value", "count": 42});
                let data = data.as_object().cloned().unwrap_or_default();
                ev.artifact(
                    Artifact::new(Some("data"), vec![Part::data(data)]),
                    false,
                    true,
                )
                .await?;
                ev.complete(None).await
            }
            Some(b @ ("tck-artifact-file" | "tck-artifact-file-url")) => {
                let content = if b == "tck-artifact-file" {
                    FileContent::Bytes("dGNr".into())
                } else {
                    FileContent::Uri("https://example.com/output.txt".into())
                };
                let file = File {
                    content,
                    mime_type: Some("text/plain".into()),
                    name: Some("output.txt".into()),
                };
                ev.artifact(
                    Artifact::new(Some("file"), vec![Part::file(file)]),
                    false,
                    true,
                )
                .await?;
                ev.complete(None).await
            }
            Some("tck-message-response") => {
                ev.message(ev.agent_text("Direct message response")).await
            }
            Some("tck-stream-artifact-chunked") => {
                ev.working(None).await?;
                let mut a = text_artifact("chunked", "first chunk ");
                ev.artifact(a.clone(), false, false).await?;
                a.parts = vec![Part::text("second chunk")];
                ev.artifact(a, true, true).await?;
                ev.complete(None).await
            }
            Some("tck-stream-002") => ev.complete(None).await,
            Some("tck-stream") => {
                ev.working(None).await?;
                ev.artifact(text_artifact("stream", "Streamed content"), false, true)
                    .await?;
                ev.complete(None).await
            }
            _ => {
                if ctx.message.parts.iter().any(|p| matches!(p, Part::File(_))) {
                    return Err(ExecutorError::Rejected(
                        "file parts are not supported by the conformance agent".into(),
                    ));
                }
                ev.working(None).await?;
                let text = ctx.message.text_content();
                ev.artifact(text_artifact("echo", &text), false, true)
                    .await?;
                ev.end_turn_working(Some(ev.agent_text(format!("echo: {text}"))))
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::conformance_behaviour;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(
            conformance_behaviour("tck-artifact-file-url-1a2b3c4d"),
            Some("tck-artifact-file-url")
        );
        assert_eq!(
            conformance_behaviour("tck-artifact-file-1a2b3c4d"),
            Some("tck-artifact-file")
        );
        assert_eq!(
            conformance_behaviour("tck-stream-002-aa"),
            Some("tck-stream-002")
        );
        assert_eq!(
            conformance_behaviour("tck-stream-001-aa"),
            Some("tck-stream")
        );
        assert_eq!(conformance_behaviour("hello"), None);
    }
}
