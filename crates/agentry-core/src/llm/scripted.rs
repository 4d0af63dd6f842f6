//! A provider that replays a recorded transcript, and one that records a transcript.
//!
//! A transcript is a JSON file: `{"entries": [{"expect": "...", "response": {...}}, ...]}`.
//! Each call to the scripted provider returns the next response; `expect`, when present, must
//! occur in the last message of the request, so a test fails loudly when the loop sends
//! something other than what was recorded.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::*;

/// A recorded exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Text the request's last message must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// The request as recorded (informational; recorded by [`RecordingProvider`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ChatRequest>,
    /// The answer replayed.
    pub response: ChatResponse,
}

/// A sequence of exchanges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    #[serde(default)]
    /// What the replayed provider says it can do.
    pub capabilities: Capabilities,
    /// The exchanges, in order.
    pub entries: Vec<TranscriptEntry>,
}

impl Transcript {
    /// Reads a transcript file (JSON).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        let p = path.as_ref();
        let text = std::fs::read_to_string(p)
            .map_err(|e| LlmError::Transcript(format!("cannot read {}: {e}", p.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| LlmError::Transcript(format!("invalid transcript {}: {e}", p.display())))
    }

    /// Writes it as pretty JSON.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), LlmError> {
        let text =
            serde_json::to_string_pretty(self).map_err(|e| LlmError::Transcript(e.to_string()))?;
        std::fs::write(path.as_ref(), text).map_err(|e| {
            LlmError::Transcript(format!("cannot write {}: {e}", path.as_ref().display()))
        })
    }

    /// A transcript of plain responses, for tests built in code.
    pub fn of(capabilities: Capabilities, responses: Vec<ChatResponse>) -> Self {
        Transcript {
            capabilities,
            entries: responses
                .into_iter()
                .map(|response| TranscriptEntry {
                    expect: None,
                    request: None,
                    response,
                })
                .collect(),
        }
    }
}

/// Replays a transcript, one response per call.
pub struct ScriptedProvider {
    transcript: Transcript,
    next: AtomicUsize,
}

impl ScriptedProvider {
    /// Replays `transcript` from its first exchange.
    pub fn new(transcript: Transcript) -> Self {
        ScriptedProvider {
            transcript,
            next: AtomicUsize::new(0),
        }
    }

    /// Replays the transcript in a file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        Ok(Self::new(Transcript::load(path)?))
    }

    /// How many exchanges were replayed.
    pub fn calls(&self) -> usize {
        self.next.load(Ordering::SeqCst)
    }
}

impl LlmProvider for ScriptedProvider {
    fn capabilities(&self) -> Capabilities {
        self.transcript.capabilities
    }

    fn provider_name(&self) -> &str {
        "agentry.scripted"
    }

    fn model_name(&self) -> &str {
        "transcript"
    }

    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        let entry = self.transcript.entries.get(i).ok_or_else(|| {
            LlmError::Transcript(format!(
                "transcript exhausted: call {} but only {} recorded",
                i + 1,
                self.transcript.entries.len()
            ))
        })?;
        if let Some(expect) = &entry.expect {
            let last = req
                .messages
                .last()
                .map(|m| m.content.as_str())
                .unwrap_or("");
            if !last.contains(expect.as_str()) {
                return Err(LlmError::Transcript(format!(
                    "exchange {}: expected the last message to contain {expect:?}, got {last:?}",
                    i + 1
                )));
            }
        }
        Ok(entry.response.clone())
    }
}

/// Wraps a real provider and writes every exchange to a transcript file.
pub struct RecordingProvider {
    inner: Box<dyn DynLlmProvider>,
    path: PathBuf,
    transcript: Mutex<Transcript>,
}

impl RecordingProvider {
    /// Records every exchange with `inner` into a transcript at `path`.
    pub fn new(inner: Box<dyn DynLlmProvider>, path: impl Into<PathBuf>) -> Self {
        let capabilities = inner.capabilities();
        RecordingProvider {
            inner,
            path: path.into(),
            transcript: Mutex::new(Transcript {
                capabilities,
                entries: Vec::new(),
            }),
        }
    }
}

impl LlmProvider for RecordingProvider {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let response = self.inner.chat_dyn(req.clone()).await?;
        let snapshot = {
            let mut t = self.transcript.lock().unwrap_or_else(|p| p.into_inner());
            t.entries.push(TranscriptEntry {
                expect: None,
                request: Some(req),
                response: response.clone(),
            });
            t.clone()
        };
        snapshot.save(&self.path)?;
        Ok(response)
    }
}
