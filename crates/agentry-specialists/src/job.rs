//! The main job: "Create a 5-slide presentation about Hamlet based on our documents".
//!
//! [`plan`] reads the request (topic, number of slides) and gives the workflow: the RAG agent
//! writes a cited brief of the work the topic names, one facet per slide (who's who, plot,
//! themes, key passages for a play; see [`crate::rag::brief`]), or cited key points when the
//! topic is a subject inside the documents; then the PPT agent builds the deck from it. A request that asks
//! for no deck becomes a single RAG step. The default reading is rule-based on purpose: it must
//! work with the 135M embedded model, which cannot plan reliably. With a configured model
//! ([`understand_with`]) the model reads the request, and the rules take over whenever its
//! answer is not a usable `{topic, slides}`.
//!
//! [`Team`] serves the two agents over A2A on loopback ports and registers them as remote
//! agents (with their in-process twins as fallback), so a run goes over the real protocol.

use std::sync::Arc;

use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::MemoryStore;
use agentry_core::a2a::{AgentHandle, Served};
use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider};
use agentry_flow::{AgentRegistry, Mode, Workflow};
use serde_json::{Value, json};

use crate::agents::{PptSpecialist, RagSpecialist};

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What the deck or answer is about.
    pub topic: String,
    /// Slides wanted, title slide included; `None` when no deck was asked for.
    pub slides: Option<usize>,
}

const NUMBERS: [&str; 12] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve",
];

/// Reads the topic and slide count out of a request.
pub fn understand(task: &str) -> Request {
    // Every word looked for is ASCII, so an ASCII-lowercased copy finds them all, and its
    // offsets are the task's (a full lowercasing changes lengths: `İ` grows, `ẞ` shrinks, and
    // an offset from it would cut the task in the wrong place or inside a character).
    let lower = task.to_ascii_lowercase();
    let wants_deck = ["presentation", "slide", "deck", "pptx", "powerpoint"]
        .iter()
        .any(|w| lower.contains(w));
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == '-')
        .filter(|w| !w.is_empty())
        .collect();
    let mut slides = None;
    for (i, w) in words.iter().enumerate() {
        if words.get(i + 1).is_some_and(|n| n.starts_with("slide")) {
            slides = w
                .parse::<usize>()
                .ok()
                .or_else(|| NUMBERS.iter().position(|n| n == w).map(|p| p + 1));
            if slides.is_some() {
                break;
            }
        }
    }
    // The topic: after "about"/"on"/"of", up to a trailing "based on ..."/"from ..."/"using ...".
    let mut topic = task.trim().to_owned();
    for marker in [
        " about ",
        " on the topic of ",
        " regarding ",
        " on ",
        " of ",
    ] {
        if let Some(i) = lower.find(marker) {
            topic = task[i + marker.len()..].to_owned();
            break;
        }
    }
    let tl = topic.to_ascii_lowercase();
    for end in [" based on", " from ", " using ", " with ", " for "] {
        if let Some(i) = tl.find(end) {
            topic.truncate(i);
            break;
        }
    }
    let topic = topic
        .trim()
        .trim_end_matches(['.', '!', '?'])
        .replace('"', "")
        .trim()
        .to_owned();
    Request {
        topic: if topic.is_empty() {
            task.trim().to_owned()
        } else {
            topic
        },
        slides: wants_deck.then(|| slides.unwrap_or(5).clamp(2, 30)),
    }
}

/// Reads the request with `llm`: it is asked for `{"topic": …, "slides": n|null}`. Returns the
/// request and whether the model's reading was used (an unusable answer falls back to
/// [`understand`]).
pub async fn understand_with(llm: &dyn DynLlmProvider, task: &str) -> (Request, bool) {
    let rules = understand(task);
    let req = ChatRequest {
        messages: vec![
            ChatMessage::system(
                "Read the user's request. Answer with one JSON object and nothing else: \
                 {\"topic\": the subject in a few words, \"slides\": the number of slides \
                 asked for including the title slide, or null when no presentation is asked for}.",
            ),
            ChatMessage::user(task),
        ],
        temperature: Some(0.0),
        max_tokens: Some(100),
        ..Default::default()
    };
    let Ok(answer) = llm.chat_dyn(req).await else {
        return (rules, false);
    };
    let text = answer.message.content;
    let json = text
        .find('{')
        .zip(text.rfind('}'))
        .and_then(|(a, z)| serde_json::from_str::<Value>(&text[a..=z]).ok());
    let Some(v) = json else {
        return (rules, false);
    };
    let topic = v["topic"].as_str().map(str::trim).unwrap_or_default();
    let slides = match &v["slides"] {
        Value::Null => None,
        n => match n.as_u64() {
            Some(n @ 2..=30) => Some(n as usize),
            _ => return (rules, false),
        },
    };
    if topic.is_empty() || topic.len() > 120 {
        return (rules, false);
    }
    let r = Request {
        topic: topic.to_owned(),
        slides,
    };
    (r, true)
}

/// The workflow and its input for `task`, read by the rules.
pub fn plan(task: &str) -> (Workflow, Value) {
    plan_request(task, understand(task))
}

/// The workflow and its input for a request already read.
pub fn plan_request(task: &str, r: Request) -> (Workflow, Value) {
    match r.slides {
        Some(slides) => {
            let wf: Workflow = serde_json::from_value(json!({
                "name": "presentation",
                "description": "A cited brief of the work (or key points on a subject) from the documents (RAG), then a deck built from it (PPT).",
                "inputs": ["topic", "slides", "points", "facets", "text"],
                "steps": [
                    {
                        "id": "research",
                        "agent": "rag",
                        "skill": "answer",
                        "input": "{\"question\": \"${input.topic}\", \"points\": ${input.points}, \"facets\": ${input.facets}}"
                    },
                    {
                        "id": "deck",
                        "agent": "ppt",
                        "skill": "build_deck",
                        "depends_on": ["research"],
                        "input": "{\"title\": \"${input.topic}\", \"slides\": ${input.slides}, \"research\": ${steps.research.data}}"
                    }
                ],
                "output": "${steps.deck.output}\n\n${steps.research.output}"
            }))
            .expect("the presentation workflow is valid");
            let input = json!({
                "topic": r.topic,
                "slides": slides,
                // Three quotes per content slide, when the topic is a subject inside the
                // documents; one facet per content slide when it names a work.
                "points": (slides - 1) * 3,
                "facets": slides - 1,
                "text": task,
            });
            (wf, input)
        }
        None => {
            let wf: Workflow = serde_json::from_value(json!({
                "name": "question",
                "description": "A cited answer from the documents.",
                "steps": [
                    {"id": "answer", "agent": "rag", "skill": "answer", "input": "${input.text}"}
                ]
            }))
            .expect("the question workflow is valid");
            (wf, json!({"text": task, "topic": r.topic}))
        }
    }
}

/// The RAG and PPT agents, served over A2A on loopback for the length of a run.
pub struct Team {
    /// The team's agents (local, or remote on loopback), for the workflow.
    pub registry: Arc<AgentRegistry>,
    /// Where each agent is served (`name`, URL); empty for an in-process team.
    pub urls: Vec<(String, String)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Team {
    /// In-process agents only.
    pub fn in_process(rag: RagSpecialist, ppt: PptSpecialist) -> Team {
        let mut reg = AgentRegistry::new(Mode::Direct);
        reg.add_local(Arc::new(rag) as Arc<dyn AgentHandle>);
        reg.add_local(Arc::new(ppt) as Arc<dyn AgentHandle>);
        Team {
            registry: Arc::new(reg),
            urls: Vec::new(),
            stop: None,
        }
    }

    /// Serves both agents on one loopback port (`/rag`, `/ppt`) and registers them as remote
    /// A2A agents; the in-process twins stay registered as the fallback.
    pub async fn over_a2a(rag: RagSpecialist, ppt: PptSpecialist) -> std::io::Result<Team> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let rag = Arc::new(rag);
        let ppt = Arc::new(ppt);
        let rag_card = rag.card(&format!("{base}/rag"));
        let ppt_card = ppt.card(&format!("{base}/ppt"));
        let server = A2aServer::new()
            .agent(
                "/rag",
                AgentService::new(
                    rag_card,
                    Served(rag.clone() as Arc<dyn AgentHandle>),
                    Arc::new(MemoryStore::default()),
                ),
            )
            .agent(
                "/ppt",
                AgentService::new(
                    ppt_card,
                    Served(ppt.clone() as Arc<dyn AgentHandle>),
                    Arc::new(MemoryStore::default()),
                ),
            );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = server
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await;
        });
        let mut reg = AgentRegistry::new(Mode::A2a);
        let urls = vec![
            ("rag".to_owned(), format!("{base}/rag")),
            ("ppt".to_owned(), format!("{base}/ppt")),
        ];
        reg.add_local(rag.clone() as Arc<dyn AgentHandle>);
        reg.add_local(ppt.clone() as Arc<dyn AgentHandle>);
        reg.add_remote("rag", &urls[0].1, &rag.description(), rag.skills());
        reg.add_remote("ppt", &urls[1].1, &ppt.description(), ppt.skills());
        Ok(Team {
            registry: Arc::new(reg),
            urls,
            stop: Some(tx),
        })
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_understood() {
        let r = understand("Create a 5-slide presentation about Hamlet based on our documents");
        assert_eq!(
            r,
            Request {
                topic: "Hamlet".into(),
                slides: Some(5)
            }
        );
        let r = understand("Make a deck of seven slides on the ghost in Hamlet.");
        assert_eq!(r.slides, Some(7));
        assert_eq!(r.topic, "the ghost in Hamlet");
        let r = understand("Who is Ophelia?");
        assert_eq!(r.slides, None);
        let r = understand("Build slides about \"Macbeth\" from our files");
        assert_eq!(
            r,
            Request {
                topic: "Macbeth".into(),
                slides: Some(5)
            }
        );
    }

    /// Letters whose lowercase is longer or shorter than they are, before the topic: the
    /// topic is still found (it used to be cut in the wrong place, or inside a character).
    #[test]
    fn case_changes_that_change_lengths_do_not_move_the_topic() {
        for task in [
            "İstanbul İİİ: a presentation about Hamlet",
            "ẞẞẞẞẞẞẞẞẞẞ presentation about Hamlet based on our documents",
            "ẞẞẞẞẞẞẞẞ presentation ÜBER about Hamlet from ÄÖ files",
        ] {
            let r = understand(task);
            assert_eq!(r.topic, "Hamlet", "{task}");
            assert_eq!(r.slides, Some(5));
        }
    }

    proptest::proptest! {
        /// Any request reads as a topic, never a panic.
        #[test]
        fn any_request_has_a_topic(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "İ", "ẞ", "Σ", "ﬁ", "日本", " about ", " on ", " of ", " based on", " from ",
                " for ", "presentation", " 3 slides", "\"", ".", "?", " ", "Hamlet",
            ]), 0..24),
        ) {
            let task: String = pieces.concat();
            let r = understand(&task);
            proptest::prop_assert!(!r.topic.is_empty() || task.trim().is_empty());
        }
    }

    #[test]
    fn the_presentation_plan_is_rag_then_ppt() {
        let (wf, input) = plan("Create a 5-slide presentation about Hamlet based on our documents");
        assert_eq!(wf.steps.len(), 2);
        assert_eq!(wf.steps[1].depends_on, ["research"]);
        assert_eq!(input["points"], 12);
        assert_eq!(input["topic"], "Hamlet");
    }
}
