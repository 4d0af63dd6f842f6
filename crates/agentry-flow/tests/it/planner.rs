//! The planner binds plans to real agents and repairs invalid ones.

use std::sync::Arc;

use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_core::llm::*;
use agentry_flow::*;
use serde_json::json;

struct Named(&'static str, &'static str);
impl AgentHandle for Named {
    fn name(&self) -> String {
        self.0.into()
    }
    fn description(&self) -> String {
        self.1.into()
    }
    fn skills(&self) -> Vec<String> {
        vec![format!("{}-skill", self.0)]
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let name = self.0;
        single(async move {
            Ok(Reply {
                text: format!("{name} handled: {}", ask.text),
                ..Default::default()
            })
        })
    }
}

fn text(t: &str) -> ChatResponse {
    ChatResponse {
        message: ChatMessage::assistant(t),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
    }
}

struct Spy {
    inner: ScriptedProvider,
    seen: std::sync::Mutex<Vec<ChatRequest>>,
}
impl LlmProvider for Spy {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(req.clone());
        self.inner.chat(req).await
    }
}

fn registry() -> AgentRegistry {
    let mut r = AgentRegistry::new(Mode::Direct);
    r.add_local(Arc::new(Named("rag", "Finds key points in our documents")));
    r.add_local(Arc::new(Named("ppt", "Builds PowerPoint decks")));
    r
}

#[tokio::test]
async fn invalid_plans_are_repaired_with_the_errors_then_run() {
    let bad = r#"Here is the plan: {"name": "deck", "steps": [{"id": "find", "agent": "search-engine", "input": "x"}]}"#;
    let also_bad = r#"{"name": "deck", "steps": [{"id": "find", "agent": "rag", "input": "x"}, {"id": "build", "agent": "ppt", "input": "${steps.find.output}"}]}"#;
    let good = r#"```json
{"name": "deck", "steps": [
  {"id": "find", "agent": "rag", "skill": "rag-skill", "input": "Key points about ${input.topic}"},
  {"id": "build", "agent": "ppt", "depends_on": ["find"], "input": "Make slides from: ${steps.find.output}"}]}
```"#;
    let spy = Arc::new(Spy {
        inner: ScriptedProvider::new(Transcript::of(
            Capabilities::default(),
            vec![text(bad), text(also_bad), text(good)],
        )),
        seen: Default::default(),
    });
    let reg = registry();
    let wf = Planner::new(spy.clone())
        .plan(
            "Create a presentation about Hamlet based on our documents",
            &reg,
        )
        .await
        .unwrap();
    assert_eq!(wf.steps.len(), 2);
    let seen = spy.seen.lock().unwrap().clone();
    // The model saw the agents and the schema; the repairs quoted the errors.
    assert!(
        seen[0].messages[0]
            .content
            .contains("- rag: Finds key points in our documents (skills: rag-skill)")
    );
    assert!(seen[0].json_schema.is_some());
    let repair1 = &seen[1].messages.last().unwrap().content;
    assert!(
        repair1.contains("unknown agent `search-engine`"),
        "{repair1}"
    );
    let repair2 = &seen[2].messages.last().unwrap().content;
    assert!(
        repair2.contains("which is not among its dependencies"),
        "{repair2}"
    );

    let state = Engine::new(Arc::new(reg))
        .run(wf, json!({"topic": "Hamlet"}), None, None)
        .await
        .unwrap();
    assert_eq!(
        state.final_output.as_deref(),
        Some("ppt handled: Make slides from: rag handled: Key points about Hamlet")
    );
}

#[tokio::test]
async fn the_planner_gives_up_after_its_repairs() {
    let spy = Arc::new(Spy {
        inner: ScriptedProvider::new(Transcript::of(
            Capabilities::default(),
            vec![text("no idea"), text("{\"name\": 1}"), text("still no")],
        )),
        seen: Default::default(),
    });
    let err = Planner::new(spy)
        .plan("anything", &registry())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no valid plan after 3 attempts") && err.contains("holds no JSON object"),
        "{err}"
    );
}
