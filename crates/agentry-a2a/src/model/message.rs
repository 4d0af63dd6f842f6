//! Messages, parts and artifacts: the content that flows between a client and an agent.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Free-form metadata attached to most protocol objects.
pub type Metadata = Map<String, Value>;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "message")]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Message {
    /// A message with one text part and a fresh id.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self::new(role, vec![Part::text(text)])
    }

    /// A message with the given parts and a fresh id.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Message {
            role,
            parts,
            message_id: crate::new_id(),
            task_id: None,
            context_id: None,
            reference_task_ids: Vec::new(),
            extensions: Vec::new(),
            metadata: None,
        }
    }

    /// Sets the task and context this message belongs to.
    pub fn in_task(mut self, task_id: impl Into<String>, context_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self.context_id = Some(context_id.into());
        self
    }

    /// The text parts joined by newlines.
    pub fn text_content(&self) -> String {
        join_text(&self.parts)
    }
}

/// Joins the text parts of a part list with newlines.
pub fn join_text(parts: &[Part]) -> String {
    let mut out = String::new();
    for p in parts {
        if let Part::Text(t) = p {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t.text);
        }
    }
    out
}

/// A piece of content: text, a file, or structured data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text(TextPart),
    File(FilePart),
    Data(DataPart),
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text(TextPart {
            text: text.into(),
            metadata: None,
        })
    }

    pub fn data(data: Map<String, Value>) -> Self {
        Part::Data(DataPart {
            data,
            metadata: None,
        })
    }

    pub fn file(file: File) -> Self {
        Part::File(FilePart {
            file,
            metadata: None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextPart {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataPart {
    pub data: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilePart {
    pub file: File,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A file carried inline (base64 bytes) or by reference (URI); exactly one of the two.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub content: FileContent,
    pub mime_type: Option<String>,
    pub name: Option<String>,
}

/// Where a file's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum FileContent {
    /// Base64-encoded bytes, as on the wire.
    Bytes(String),
    Uri(String),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl Serialize for File {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (bytes, uri) = match &self.content {
            FileContent::Bytes(b) => (Some(b.clone()), None),
            FileContent::Uri(u) => (None, Some(u.clone())),
        };
        FileWire {
            bytes,
            uri,
            mime_type: self.mime_type.clone(),
            name: self.name.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for File {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = FileWire::deserialize(d)?;
        let content = match (w.bytes, w.uri) {
            (Some(b), None) => FileContent::Bytes(b),
            (None, Some(u)) => FileContent::Uri(u),
            (Some(_), Some(_)) => {
                return Err(serde::de::Error::custom(
                    "a file has either `bytes` or `uri`, not both",
                ));
            }
            (None, None) => {
                return Err(serde::de::Error::custom("a file needs `bytes` or `uri`"));
            }
        };
        Ok(File {
            content,
            mime_type: w.mime_type,
            name: w.name,
        })
    }
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Artifact {
    /// An artifact with a fresh id and the given parts.
    pub fn new(name: Option<&str>, parts: Vec<Part>) -> Self {
        Artifact {
            artifact_id: crate::new_id(),
            name: name.map(str::to_owned),
            description: None,
            parts,
            extensions: Vec::new(),
            metadata: None,
        }
    }
}
