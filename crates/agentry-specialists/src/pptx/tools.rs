//! The PPT tools over a shared set of open decks. Decks are saved only into the tool set's
//! output folder, under plain file names: a model (or an MCP client) cannot write elsewhere.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentry_core::tools::{Tool, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::writer::{Bullet, Deck, Layout, Picture, Slide};
use super::{PptxError, plain_file_name};

/// Open decks, by presentation id, and where they are saved.
#[derive(Clone)]
pub struct Decks {
    open: Arc<Mutex<HashMap<String, Deck>>>,
    out_dir: PathBuf,
}

impl Decks {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Decks {
            open: Default::default(),
            out_dir: out_dir.into(),
        }
    }

    fn with<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Deck) -> Result<T, PptxError>,
    ) -> Result<T, PptxError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let deck = open
            .get_mut(id)
            .ok_or_else(|| PptxError::UnknownPresentation(id.to_owned()))?;
        f(deck)
    }
}

/// The PPT tools, sharing `decks`.
pub fn ppt_tools(decks: &Decks) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.add(CreatePresentation(decks.clone()));
    r.add(AddSlide(decks.clone()));
    r.add(AddText(decks.clone()));
    r.add(PopulatePlaceholder(decks.clone()));
    r.add(AddPicture(decks.clone()));
    r.add(SavePresentation(decks.clone()));
    r
}

fn slide_mut(deck: &mut Deck, n: usize) -> Result<&mut Slide, PptxError> {
    let count = deck.slides.len();
    n.checked_sub(1)
        .and_then(|i| deck.slides.get_mut(i))
        .ok_or_else(|| {
            PptxError::Input(format!(
                "no slide {n}; the deck has {count} (numbered from 1)"
            ))
        })
}

struct CreatePresentation(Decks);

#[derive(Deserialize, JsonSchema)]
struct CreateArgs {
    /// Title of the presentation.
    title: String,
    #[serde(default)]
    author: Option<String>,
}

#[derive(Serialize)]
struct Created {
    presentation_id: String,
}

impl Tool for CreatePresentation {
    const NAME: &'static str = "create_presentation";
    type Args = CreateArgs;
    type Output = Created;
    type Error = PptxError;
    fn description(&self) -> String {
        "Starts a new PowerPoint presentation and returns its presentation_id.".into()
    }
    fn examples(&self) -> Vec<String> {
        vec!["Make a presentation about our quarterly results".into()]
    }
    async fn call(&self, a: CreateArgs) -> Result<Created, PptxError> {
        let id = format!("pres_{}", uuid::Uuid::new_v4().simple());
        let deck = Deck {
            title: a.title,
            author: a.author.unwrap_or_default(),
            slides: Vec::new(),
        };
        self.0
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), deck);
        Ok(Created {
            presentation_id: id,
        })
    }
}

struct AddSlide(Decks);

#[derive(Deserialize, JsonSchema)]
struct AddSlideArgs {
    presentation_id: String,
    /// `title` (title and subtitle) or `bullets` (title and bulleted text).
    #[serde(default)]
    layout: Layout,
    #[serde(default)]
    title: Option<String>,
}

#[derive(Serialize)]
struct Added {
    /// Number of the new slide, from 1.
    slide: usize,
}

impl Tool for AddSlide {
    const NAME: &'static str = "add_slide";
    type Args = AddSlideArgs;
    type Output = Added;
    type Error = PptxError;
    fn description(&self) -> String {
        "Adds a slide (layout `title` or `bullets`) to a presentation; returns its number.".into()
    }
    async fn call(&self, a: AddSlideArgs) -> Result<Added, PptxError> {
        self.0.with(&a.presentation_id, |d| {
            if d.slides.len() >= 500 {
                return Err(PptxError::Input("a deck holds at most 500 slides".into()));
            }
            d.slides.push(Slide {
                layout: a.layout,
                title: a.title.unwrap_or_default(),
                ..Default::default()
            });
            Ok(Added {
                slide: d.slides.len(),
            })
        })
    }
}

struct AddText(Decks);

#[derive(Deserialize, JsonSchema)]
struct AddTextArgs {
    presentation_id: String,
    /// Slide number, from 1.
    slide: usize,
    /// One bullet's text.
    text: String,
    /// Indent level, 0 (top) to 4.
    #[serde(default)]
    level: u8,
}

#[derive(Serialize)]
struct Done {
    ok: bool,
}

impl Tool for AddText {
    const NAME: &'static str = "add_text";
    type Args = AddTextArgs;
    type Output = Done;
    type Error = PptxError;
    fn description(&self) -> String {
        "Adds a bullet of text to a slide's body.".into()
    }
    async fn call(&self, a: AddTextArgs) -> Result<Done, PptxError> {
        self.0.with(&a.presentation_id, |d| {
            let s = slide_mut(d, a.slide)?;
            s.bullets.push(Bullet {
                text: a.text,
                level: a.level.min(4),
            });
            Ok(Done { ok: true })
        })
    }
}

struct PopulatePlaceholder(Decks);

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum PlaceholderName {
    Title,
    Subtitle,
    /// The body: the text replaces its bullets, one bullet per line.
    Body,
    /// The speaker notes.
    Notes,
}

#[derive(Deserialize, JsonSchema)]
struct PopulateArgs {
    presentation_id: String,
    slide: usize,
    placeholder: PlaceholderName,
    text: String,
}

impl Tool for PopulatePlaceholder {
    const NAME: &'static str = "populate_placeholder";
    type Args = PopulateArgs;
    type Output = Done;
    type Error = PptxError;
    fn description(&self) -> String {
        "Sets a slide's title, subtitle, body or speaker notes.".into()
    }
    async fn call(&self, a: PopulateArgs) -> Result<Done, PptxError> {
        self.0.with(&a.presentation_id, |d| {
            let s = slide_mut(d, a.slide)?;
            match a.placeholder {
                PlaceholderName::Title => s.title = a.text,
                PlaceholderName::Subtitle => s.subtitle = a.text,
                PlaceholderName::Notes => s.notes = a.text,
                PlaceholderName::Body => {
                    s.bullets = a
                        .text
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| Bullet {
                            text: l.trim().to_owned(),
                            level: 0,
                        })
                        .collect()
                }
            }
            Ok(Done { ok: true })
        })
    }
}

struct AddPicture(Decks);

#[derive(Deserialize, JsonSchema)]
struct AddPictureArgs {
    presentation_id: String,
    slide: usize,
    /// Path of a PNG file (a chart, for instance).
    path: PathBuf,
    #[serde(default)]
    description: Option<String>,
}

impl Tool for AddPicture {
    const NAME: &'static str = "add_picture";
    type Args = AddPictureArgs;
    type Output = Done;
    type Error = PptxError;
    fn description(&self) -> String {
        "Places a PNG picture (e.g. a chart) on a slide.".into()
    }
    async fn call(&self, a: AddPictureArgs) -> Result<Done, PptxError> {
        let png = std::fs::read(&a.path)
            .map_err(|e| PptxError::Input(format!("cannot read {}: {e}", a.path.display())))?;
        super::writer::png_size(&png)?;
        self.0.with(&a.presentation_id, |d| {
            slide_mut(d, a.slide)?.pictures.push(Picture {
                png,
                description: a.description.unwrap_or_default(),
            });
            Ok(Done { ok: true })
        })
    }
}

struct SavePresentation(Decks);

#[derive(Deserialize, JsonSchema)]
struct SaveArgs {
    presentation_id: String,
    /// A plain file name ending in .pptx, saved in the output folder.
    file_name: String,
}

#[derive(Serialize)]
struct Saved {
    path: String,
    slides: usize,
    bytes: usize,
}

impl Tool for SavePresentation {
    const NAME: &'static str = "save_presentation";
    type Args = SaveArgs;
    type Output = Saved;
    type Error = PptxError;
    fn description(&self) -> String {
        "Writes a presentation to a .pptx file and returns its path.".into()
    }
    async fn call(&self, a: SaveArgs) -> Result<Saved, PptxError> {
        if !plain_file_name(&a.file_name) || !a.file_name.ends_with(".pptx") {
            return Err(PptxError::Input(format!(
                "file_name must be a plain name ending in .pptx, not `{}`",
                a.file_name
            )));
        }
        let (bytes, slides) = self.0.with(&a.presentation_id, |d| {
            Ok((super::write(d)?, d.slides.len()))
        })?;
        std::fs::create_dir_all(&self.0.out_dir)
            .map_err(|e| PptxError::Write(format!("{}: {e}", self.0.out_dir.display())))?;
        let path = self.0.out_dir.join(&a.file_name);
        // Write beside, then rename: a reader never sees half a deck.
        let tmp = path.with_extension("pptx.part");
        std::fs::write(&tmp, &bytes)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| PptxError::Write(format!("{}: {e}", path.display())))?;
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(Saved {
            path: path.display().to_string(),
            slides,
            bytes: bytes.len(),
        })
    }
}
