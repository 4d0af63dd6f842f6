//! The PowerPoint specialist: decks built by tools (`create_presentation`, `add_slide`,
//! `add_text`, `populate_placeholder`, `add_picture`, `save_presentation`), which a model can
//! call, MCP can serve (`agentry mcp serve ppt`), and [`build_outline`] calls in order to turn an
//! [`Outline`] into a deck without a model.

mod tools;
pub mod writer;

use std::path::{Path, PathBuf};

pub use agentry_core::confine::file_stem;
use agentry_core::llm::ToolCall;
use agentry_core::tools::ToolRegistry;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use tools::{Decks, ppt_tools};
pub use writer::{Bullet, Deck, Layout, Picture, Slide, write};

/// Why a deck could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PptxError {
    #[error("{0}")]
    /// A request the tools cannot build from (a bad outline, a bad argument).
    Input(String),
    #[error("cannot write the deck: {0}")]
    /// The deck could not be written.
    Write(String),
    #[error("no presentation `{0}` (create one with create_presentation)")]
    /// No deck has this id.
    UnknownPresentation(String),
}

/// A deck described as data: what the RAG step hands the PPT step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outline {
    /// The deck's title (its title slide).
    pub title: String,
    #[serde(default)]
    /// The title slide's subtitle.
    pub subtitle: String,
    /// The slides after the title slide.
    pub slides: Vec<OutlineSlide>,
    /// File name for the deck (in the tool set's output folder).
    #[serde(default)]
    pub file_name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
/// One slide of an [`Outline`].
pub struct OutlineSlide {
    /// Its title.
    pub title: String,
    #[serde(default)]
    /// Its bullets, in order.
    pub bullets: Vec<String>,
    #[serde(default)]
    /// Speaker notes.
    pub notes: String,
    /// PNG files to place on the slide.
    #[serde(default)]
    pub pictures: Vec<PathBuf>,
}

impl Outline {
    /// Reads a Markdown outline: `# Deck title`, an optional plain line as subtitle, then
    /// `## Slide title` with `- bullets` (indented for sub-bullets) and `> notes` lines.
    pub fn from_markdown(text: &str) -> Option<Outline> {
        let mut o = Outline::default();
        for line in text.lines() {
            let t = line.trim();
            if let Some(h) = t.strip_prefix("## ") {
                o.slides.push(OutlineSlide {
                    title: h.trim().to_owned(),
                    ..Default::default()
                });
            } else if let Some(h) = t.strip_prefix("# ") {
                o.title = h.trim().to_owned();
            } else if let Some(b) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
                let indent = line.len() - line.trim_start().len();
                let text = if indent >= 2 {
                    format!("\t{}", b.trim())
                } else {
                    b.trim().to_owned()
                };
                o.slides.last_mut()?.bullets.push(text);
            } else if let Some(n) = t.strip_prefix('>') {
                let s = o.slides.last_mut()?;
                if !s.notes.is_empty() {
                    s.notes.push('\n');
                }
                s.notes.push_str(n.trim());
            } else if !t.is_empty() && o.slides.is_empty() && o.subtitle.is_empty() {
                o.subtitle = t.to_owned();
            }
        }
        (!o.title.is_empty() && !o.slides.is_empty()).then_some(o)
    }
}

/// What building a deck produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Built {
    /// The deck's id in the tool set.
    pub presentation_id: String,
    /// The deck's file name in the tool set's output folder (see `save_presentation`).
    pub file: String,
    /// Slides written.
    pub slides: usize,
    /// Size of the file.
    pub bytes: usize,
    /// The tool calls made, in order (name and arguments), for the record.
    pub calls: Vec<Value>,
}

/// Builds `outline` by calling the PPT tools in order: a title slide, then one bullet slide per
/// outline slide. Sub-bullets are bullets starting with a tab.
pub async fn build_outline(tools: &ToolRegistry, outline: &Outline) -> Result<Built, PptxError> {
    let mut calls = Vec::new();
    let mut call = async |name: &str, args: Value| -> Result<Value, PptxError> {
        calls.push(json!({"tool": name, "arguments": args.clone()}));
        let out = tools
            .call(&ToolCall {
                id: format!("call_{}", calls.len()),
                name: name.to_owned(),
                arguments: args,
            })
            .await
            .output
            .map_err(|e| PptxError::Input(e.to_string()))?;
        Ok(out.data.unwrap_or(Value::String(out.text)))
    };
    let created = call(
        "create_presentation",
        json!({"title": outline.title, "author": "agentry"}),
    )
    .await?;
    let id = created["presentation_id"]
        .as_str()
        .ok_or_else(|| PptxError::Write("create_presentation gave no id".into()))?
        .to_owned();
    let first = call(
        "add_slide",
        json!({"presentation_id": id, "layout": "title", "title": outline.title}),
    )
    .await?;
    if !outline.subtitle.is_empty() {
        call(
            "populate_placeholder",
            json!({"presentation_id": id, "slide": first["slide"], "placeholder": "subtitle", "text": outline.subtitle}),
        )
        .await?;
    }
    for s in &outline.slides {
        let added = call(
            "add_slide",
            json!({"presentation_id": id, "layout": "bullets", "title": s.title}),
        )
        .await?;
        let n = added["slide"].clone();
        for b in &s.bullets {
            let level = b.chars().take_while(|c| *c == '\t').count();
            call(
                "add_text",
                json!({"presentation_id": id, "slide": n, "text": b.trim_start_matches('\t'), "level": level}),
            )
            .await?;
        }
        if !s.notes.is_empty() {
            call(
                "populate_placeholder",
                json!({"presentation_id": id, "slide": n, "placeholder": "notes", "text": s.notes}),
            )
            .await?;
        }
        for p in &s.pictures {
            call(
                "add_picture",
                json!({"presentation_id": id, "slide": n, "path": p}),
            )
            .await?;
        }
    }
    let file = outline
        .file_name
        .clone()
        .unwrap_or_else(|| format!("{}.pptx", file_stem(&outline.title)));
    let saved = call(
        "save_presentation",
        json!({"presentation_id": id, "file_name": file}),
    )
    .await?;
    Ok(Built {
        presentation_id: id,
        file: saved["file"].as_str().unwrap_or_default().to_owned(),
        slides: saved["slides"].as_u64().unwrap_or_default() as usize,
        bytes: saved["bytes"].as_u64().unwrap_or_default() as usize,
        calls,
    })
}

/// Whether `name` is a plain file name (no folders, no `..`), as the tools accept.
pub(crate) fn plain_file_name(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty()
        && p.components().count() == 1
        && matches!(p.components().next(), Some(std::path::Component::Normal(_)))
}
