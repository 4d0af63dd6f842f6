//! Messages, parts and artifacts: the content that flows between a client and an agent.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Free-form metadata attached to most protocol objects.
pub type Metadata = Map<String, Value>;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client (a user or a calling agent).
    User,
    /// The agent answering.
    Agent,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", rename = "message")]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content: text, files, structured data.
    pub parts: Vec<Part>,
    /// Unique per message, chosen by its sender.
    pub message_id: String,
    /// The task it belongs to (set to continue a task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The conversation it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Other tasks it refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
    /// URIs of the extensions its metadata uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Extension data, by extension URI.
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    /// Text.
    Text(TextPart),
    /// A file, inline or by URI.
    File(FilePart),
    /// A JSON object.
    Data(DataPart),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text(TextPart {
            text: text.into(),
            metadata: None,
        })
    }

    /// A data part.
    pub fn data(data: Map<String, Value>) -> Self {
        Part::Data(DataPart {
            data,
            metadata: None,
        })
    }

    /// A file part.
    pub fn file(file: File) -> Self {
        Part::File(FilePart {
            file,
            metadata: None,
        })
    }
}

/// A part holding text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// Extension data for this part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A part holding a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataPart {
    /// The object.
    pub data: Map<String, Value>,
    /// Extension data for this part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A part holding a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FilePart {
    /// The file.
    pub file: File,
    /// Extension data for this part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A file carried inline (base64 bytes) or by reference (URI); exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct File {
    /// Its bytes or where to get them.
    pub content: FileContent,
    /// Its media type.
    pub mime_type: Option<String>,
    /// Its file name.
    pub name: Option<String>,
}

/// Where a file's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FileContent {
    /// Base64-encoded bytes, as on the wire.
    Bytes(String),
    /// A URI to fetch the bytes from.
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
    /// Unique within its task.
    pub artifact_id: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its content.
    pub parts: Vec<Part>,
    /// URIs of the extensions its metadata uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Extension data, by extension URI.
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
