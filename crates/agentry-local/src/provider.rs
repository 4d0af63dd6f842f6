//! [`LocalProvider`]: the embedded chat model as an [`LlmProvider`].
//!
//! With tools in the request the model never writes free text: its output is constrained to
//! `{"name": <tool>, "arguments": <that tool's schema>}`, so every call names a real tool and
//! has valid arguments. With routing on (the default) the embedder ranks the tools against the
//! request and the name is constrained to the best ones; after a tool result the model is
//! constrained to `finish` (a 135M model cannot judge whether more calls are needed; bigger
//! models set `after_tool = "choose"`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use agentry_core::agent::AgentFactory;
use agentry_core::embed::DynEmbedder;
use agentry_core::llm::{
    Capabilities, ChatDelta, ChatMessage, ChatRequest, ChatResponse, ChatRole, DeltaStream,
    FinishReason, LlmError, LlmProvider, ToolCall, ToolSpec, Usage,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::{ChatModel, Finish, GenerateOptions, Generation, TemplateMessage};
use crate::constrain::Grammar;
use crate::embed::LocalEmbedder;
use crate::route::ToolRouter;
use crate::{LocalError, paths};

/// How tool calls are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Tools described in the prompt, the call parsed from free text (no guarantees).
    Prompted,
    /// Output constrained to a call of one of the agent's tools.
    Constrained,
    /// Constrained, with the tool names narrowed by embedding similarity.
    #[default]
    Routed,
}

/// What to do after a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AfterTool {
    /// Answer (`finish`): right for tiny models.
    #[default]
    Finish,
    /// Let the model choose among `finish` and the routed tools.
    Choose,
}

/// Settings of `[model] provider = "local"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    /// GGUF file (default: [`paths::chat_model_path`]).
    pub model: Option<PathBuf>,
    /// The tool router's embedder folder (default: [`paths::router_embedder_path`]); `embedder`
    /// is its older name.
    #[serde(alias = "embedder")]
    pub router_embedder: Option<PathBuf>,
    /// When a tool call is forced (see [`ToolChoice`]).
    pub tool_choice: ToolChoice,
    /// How many of the best-ranked tools the model may choose among.
    pub route_top: usize,
    /// A second tool joins the first when its score is within this margin.
    pub route_margin: f32,
    /// The chat model also reads the close best tools' descriptions and scores how likely
    /// the request is after each ([`ToolRouter::with_reader`]), for 0.1-0.5 s a request on
    /// two cores. Off by default: it helped the MiniLM router choose among tools of one
    /// server, and no longer helps the all-mpnet-base-v2 one (`docs/BENCHMARKS.md`).
    pub route_read: bool,
    /// What the model may do after a tool result (see [`AfterTool`]).
    pub after_tool: AfterTool,
    /// Most tokens a completion may take.
    pub max_tokens: usize,
    /// Cap on every string the model writes inside a tool call.
    pub max_string: usize,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// The sampler's seed.
    pub seed: u64,
    /// Repetition penalty inside constrained output (see `GenerateOptions::repeat_penalty`).
    pub repeat_penalty: f32,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            model: None,
            router_embedder: None,
            tool_choice: ToolChoice::Routed,
            route_top: 2,
            route_margin: 0.02,
            route_read: false,
            after_tool: AfterTool::Finish,
            max_tokens: 384,
            max_string: 120,
            temperature: 0.0,
            seed: 42,
            repeat_penalty: 1.3,
        }
    }
}

/// The embedded chat model (and embedder, for routing) as an LLM provider.
#[derive(Clone)]
pub struct LocalProvider {
    model: Arc<ChatModel>,
    router: Option<ToolRouter>,
    cfg: LocalConfig,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("model", &self.model.name())
            .field("cfg", &self.cfg)
            .finish()
    }
}

/// Loaded models, shared by every provider in the process (keyed by path).
fn shared<T: Send + Sync + 'static>(
    path: PathBuf,
    load: impl FnOnce(&std::path::Path) -> Result<T, LocalError>,
) -> Result<Arc<T>, LocalError> {
    type Slot = Mutex<Vec<(PathBuf, Weak<dyn std::any::Any + Send + Sync>)>>;
    static LOADED: OnceLock<Slot> = OnceLock::new();
    let mut loaded = LOADED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for (p, w) in loaded.iter() {
        if *p == path
            && let Some(a) = w.upgrade()
            && let Ok(t) = a.downcast::<T>()
        {
            return Ok(t);
        }
    }
    let t = Arc::new(load(&path)?);
    let any: Arc<dyn std::any::Any + Send + Sync> = t.clone();
    loaded.retain(|(_, w)| w.strong_count() > 0);
    loaded.push((path, Arc::downgrade(&any)));
    Ok(t)
}

/// The default embedder, shared in the process.
pub fn shared_embedder(path: Option<PathBuf>) -> Result<Arc<LocalEmbedder>, LocalError> {
    shared(
        path.unwrap_or_else(paths::embedder_path),
        LocalEmbedder::load,
    )
}

/// The tool router's embedder at `path` (default: [`paths::router_embedder_path`]), shared in
/// the process.
pub fn shared_router_embedder(path: Option<PathBuf>) -> Result<Arc<LocalEmbedder>, LocalError> {
    shared(
        path.unwrap_or_else(paths::router_embedder_path),
        LocalEmbedder::load,
    )
}

/// The chat model at `path` (default: [`paths::chat_model_path`]), shared in the process.
pub fn shared_chat_model(path: Option<PathBuf>) -> Result<Arc<ChatModel>, LocalError> {
    shared(path.unwrap_or_else(paths::chat_model_path), ChatModel::load)
}

/// Lets agent configs say `[model] provider = "local"`.
pub fn register(factory: &mut AgentFactory) {
    factory.register_model_provider(
        "local",
        Arc::new(|settings| {
            let cfg: LocalConfig = serde_json::from_value(Value::Object(settings.clone()))
                .map_err(|e| LlmError::Settings(format!("[model] provider = \"local\": {e}")))?;
            let p = LocalProvider::new(cfg).map_err(llm_err)?;
            Ok(Arc::new(p))
        }),
    );
}

fn llm_err(e: LocalError) -> LlmError {
    LlmError::backend(e)
}

/// Reserved tool names the ReAct loop adds.
const FINISH: &str = agentry_core::react::FINISH;

impl LocalProvider {
    /// Loads (or reuses) the models the config names.
    pub fn new(cfg: LocalConfig) -> Result<Self, LocalError> {
        let model = shared_chat_model(cfg.model.clone())?;
        let router = match cfg.tool_choice {
            ToolChoice::Routed => {
                let e: Arc<dyn DynEmbedder> = shared_router_embedder(cfg.router_embedder.clone())?;
                let router = ToolRouter::new(e);
                Some(if cfg.route_read {
                    router.with_reader(model.clone())
                } else {
                    router
                })
            }
            _ => None,
        };
        Ok(LocalProvider { model, router, cfg })
    }

    /// A provider over models loaded elsewhere.
    pub fn from_parts(model: Arc<ChatModel>, router: Option<ToolRouter>, cfg: LocalConfig) -> Self {
        LocalProvider { model, router, cfg }
    }

    /// The chat model.
    pub fn model(&self) -> &Arc<ChatModel> {
        &self.model
    }

    /// The settings it was made with.
    pub fn config(&self) -> &LocalConfig {
        &self.cfg
    }

    /// The tools the model may call now: all of them, or the routed ones.
    pub async fn candidate_tools(&self, req: &ChatRequest) -> Result<Vec<ToolSpec>, LlmError> {
        let tools = &req.tools;
        if self.cfg.tool_choice != ToolChoice::Routed {
            return Ok(tools.clone());
        }
        let finish = tools.iter().find(|t| t.name == FINISH).cloned();
        let after_tool = req
            .messages
            .last()
            .is_some_and(|m| m.role == ChatRole::Tool);
        if after_tool
            && self.cfg.after_tool == AfterTool::Finish
            && let Some(f) = &finish
        {
            return Ok(vec![f.clone()]);
        }
        let own: Vec<ToolSpec> = tools
            .iter()
            .filter(|t| t.name != FINISH && t.name != agentry_core::react::ASK_USER)
            .cloned()
            .collect();
        let Some(router) = &self.router else {
            return Ok(tools.clone());
        };
        if own.is_empty() {
            return Ok(tools.clone());
        }
        let query = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == ChatRole::User)
            .map_or("", |m| m.content.as_str());
        let ranked = router.rank(query, &own).await.map_err(LlmError::backend)?;
        let best = ranked[0].1;
        let mut out: Vec<ToolSpec> = ranked
            .iter()
            .take(self.cfg.route_top.max(1))
            .filter(|(_, s)| best - s <= self.cfg.route_margin)
            .map(|&(i, _)| own[i].clone())
            .collect();
        if after_tool && let Some(f) = finish {
            out.push(f);
        }
        Ok(out)
    }

    /// The prompt: the conversation in the model's chat template, tools described in the
    /// system message.
    fn prompt(
        &self,
        req: &ChatRequest,
        tools: &[ToolSpec],
    ) -> Result<(Vec<u32>, Option<usize>), LlmError> {
        let mut msgs: Vec<TemplateMessage> = Vec::new();
        let mut system = String::new();
        for m in &req.messages {
            match m.role {
                ChatRole::System => {
                    if !system.is_empty() {
                        system.push('\n');
                    }
                    system.push_str(&m.content);
                }
                ChatRole::User => msgs.push(TemplateMessage {
                    role: "user".into(),
                    content: m.content.clone(),
                }),
                ChatRole::Assistant => {
                    let mut content = m.content.clone();
                    for c in &m.tool_calls {
                        if !content.is_empty() {
                            content.push('\n');
                        }
                        content.push_str(
                            &serde_json::json!({"name": c.name, "arguments": c.arguments})
                                .to_string(),
                        );
                    }
                    msgs.push(TemplateMessage {
                        role: "assistant".into(),
                        content,
                    });
                }
                // Small models know three roles; a tool result reads as a user turn.
                ChatRole::Tool => msgs.push(TemplateMessage {
                    role: "user".into(),
                    content: format!("Tool result: {}", m.content),
                }),
            }
        }
        if !tools.is_empty() {
            system.push_str(&describe_tools(tools, self.cfg.tool_choice));
        }
        if !system.is_empty() {
            msgs.insert(
                0,
                TemplateMessage {
                    role: "system".into(),
                    content: system,
                },
            );
        }
        self.model.encode_chat(&msgs).map_err(llm_err)
    }

    fn options(&self, req: &ChatRequest, grammar: Option<Grammar>) -> GenerateOptions {
        GenerateOptions {
            max_tokens: req.max_tokens.map_or(self.cfg.max_tokens, |m| m as usize),
            temperature: req.temperature.unwrap_or(self.cfg.temperature),
            top_p: 0.95,
            seed: self.cfg.seed,
            stop: req.stop.clone(),
            repeat_penalty: if grammar.is_some() {
                self.cfg.repeat_penalty
            } else {
                1.0
            },
            grammar: grammar.map(Arc::new),
            cache_points: Vec::new(),
        }
    }

    /// Runs a generation on a blocking thread, sending text pieces to `tx` when given.
    async fn run(
        &self,
        prompt: Vec<u32>,
        opts: GenerateOptions,
        tx: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<Generation, LlmError> {
        let model = self.model.clone();
        tokio::task::spawn_blocking(move || {
            model.generate(&prompt, &opts, &mut |piece| match &tx {
                Some(tx) => tx.send(piece.to_owned()).is_ok(),
                None => true,
            })
        })
        .await
        .map_err(LlmError::backend)?
        .map_err(llm_err)
    }

    /// The whole answer; text pieces go to `tx` as they come (plain-text answers only).
    async fn answer(
        &self,
        req: ChatRequest,
        tx: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        let tools = if req.tools.is_empty() {
            Vec::new()
        } else {
            self.candidate_tools(&req).await?
        };
        // The prompt describes the candidates only: a 135M model writes better arguments when
        // it sees fewer tools (measured: describing all eleven of the suite's tools made the
        // arguments worse and the run slower, prompt cache or not).
        let (prompt, system_end) = self.prompt(&req, &tools)?;
        let constrained = !tools.is_empty() && self.cfg.tool_choice != ToolChoice::Prompted;
        let grammar = if constrained {
            let specs: Vec<(String, Value)> = tools
                .iter()
                .map(|t| (t.name.clone(), t.parameters.clone()))
                .collect();
            Some(Grammar::tool_call(&specs, self.cfg.max_string).map_err(|e| llm_err(e.into()))?)
        } else if let Some(schema) = &req.json_schema {
            Some(Grammar::from_schema(schema, self.cfg.max_string).map_err(|e| llm_err(e.into()))?)
        } else {
            None
        };
        let mut opts = self.options(&req, grammar);
        opts.cache_points.extend(system_end);
        if constrained {
            // The grammar wraps the call up before the budget ends; it needs some room.
            opts.max_tokens = opts.max_tokens.max(self.cfg.max_tokens);
        }
        let g = self
            .run(prompt, opts, if constrained { None } else { tx })
            .await?;
        let usage = Usage {
            prompt_tokens: g.prompt_tokens as u64,
            completion_tokens: g.completion_tokens as u64,
        };
        let finish_reason = match g.finish {
            Finish::Length => FinishReason::Length,
            _ => FinishReason::Stop,
        };
        if constrained {
            let v: Value = serde_json::from_str(&g.text).map_err(|e| {
                LlmError::InvalidResponse(format!(
                    "constrained output is not JSON ({e}): {}",
                    g.text
                ))
            })?;
            let call = ToolCall {
                id: format!("call_{}", uuid::Uuid::new_v4().simple()),
                name: v["name"].as_str().unwrap_or_default().to_owned(),
                arguments: v["arguments"].clone(),
            };
            let mut r = ChatResponse::tool_calls(vec![call]);
            r.usage = usage;
            return Ok(r);
        }
        Ok(ChatResponse {
            message: ChatMessage::assistant(g.text.trim()),
            usage,
            finish_reason,
        })
    }
}

/// The tool list for the system message.
fn describe_tools(tools: &[ToolSpec], choice: ToolChoice) -> String {
    let mut s = String::from("\n\nTools:\n");
    for t in tools {
        s.push_str(&format!(
            "- {}: {} Arguments: {}\n",
            t.name, t.description, t.parameters
        ));
    }
    if choice == ToolChoice::Prompted {
        s.push_str(
            "To use a tool, reply with only a JSON object: \
             {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}",
        );
    } else {
        s.push_str("Reply with a JSON tool call: {\"name\": ..., \"arguments\": {...}}");
    }
    s
}

impl LlmProvider for LocalProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Tool calls come back structured: the provider constrains and parses them.
            native_tools: self.cfg.tool_choice != ToolChoice::Prompted,
            json_schema: true,
            streaming: true,
        }
    }

    fn provider_name(&self) -> &str {
        "agentry.local"
    }

    fn model_name(&self) -> &str {
        self.model.name()
    }

    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.answer(req, None).await
    }

    fn chat_stream(&self, req: ChatRequest) -> DeltaStream<'_> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let done = Box::pin(self.answer(req, Some(tx)));
        // Text pieces as they come, then the whole answer.
        let pieces = tokio_stream_from(rx).map(|t| Ok(ChatDelta::Text(t)));
        let last = futures_util::stream::once(done).map(|r| r.map(ChatDelta::Done));
        Box::pin(merge_then(pieces, last))
    }
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<String>,
) -> impl futures_util::Stream<Item = String> + Send {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Polls the answer future (which drives generation) while yielding its text pieces; the
/// answer comes last.
fn merge_then<'a>(
    pieces: impl futures_util::Stream<Item = Result<ChatDelta, LlmError>> + Send + 'a,
    last: impl futures_util::Stream<Item = Result<ChatDelta, LlmError>> + Send + 'a,
) -> impl futures_util::Stream<Item = Result<ChatDelta, LlmError>> + Send + 'a {
    use futures_util::stream::select;
    // `select` drives both; the answer is held back until the pieces are drained.
    let tagged = select(pieces.map(|p| (false, p)), last.map(|d| (true, d)));
    let mut held: Option<Result<ChatDelta, LlmError>> = None;
    let mut tagged = Box::pin(tagged);
    futures_util::stream::poll_fn(move |cx| {
        use std::task::Poll;
        loop {
            match futures_util::Stream::poll_next(tagged.as_mut(), cx) {
                Poll::Ready(Some((false, p))) => return Poll::Ready(Some(p)),
                Poll::Ready(Some((true, d))) => held = Some(d),
                Poll::Ready(None) => return Poll::Ready(held.take()),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
}
