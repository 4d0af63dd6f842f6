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

/// Decks open at once at most; creating one more drops the oldest unsaved one, so decks that
/// are never saved cannot grow the process without bound.
const MAX_OPEN: usize = 32;
/// Largest picture read, in bytes.
const MAX_PICTURE: u64 = 20 << 20;

/// Open decks, by presentation id, where they are saved, and the folders pictures may come
/// from (none by default: a picture path comes from the request).
#[derive(Clone)]
pub struct Decks {
    open: Arc<Mutex<OpenDecks>>,
    out_dir: PathBuf,
    pictures: agentry_core::confine::Folders,
    /// Whether saving under a taken name replaces that deck (see [`Decks::replacing`]).
    replace: bool,
}

#[derive(Default)]
struct OpenDecks {
    decks: HashMap<String, (u64, Deck)>,
    created: u64,
}

impl Decks {
    /// Decks saved in `out_dir`; no picture can be added until a picture folder is allowed.
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Decks {
            open: Default::default(),
            out_dir: out_dir.into(),
            pictures: Default::default(),
            replace: false,
        }
    }

    /// Saving under a taken name replaces that deck, as a local user re-running a job into
    /// their own folder expects. Off by default: a served agent's callers are different
    /// clients, and one must not replace another's deck (a taken name gets `-2`, `-3`, ...).
    pub fn replacing(mut self) -> Self {
        self.replace = true;
        self
    }

    /// Lets `add_picture` read PNG files under `folder` (by relative or absolute path).
    pub fn with_picture_folder(
        mut self,
        folder: impl AsRef<std::path::Path>,
    ) -> std::io::Result<Self> {
        self.pictures.allow(folder.as_ref())?;
        Ok(self)
    }

    fn with<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Deck) -> Result<T, PptxError>,
    ) -> Result<T, PptxError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (_, deck) = open
            .decks
            .get_mut(id)
            .ok_or_else(|| PptxError::UnknownPresentation(id.to_owned()))?;
        f(deck)
    }

    fn insert(&self, id: String, deck: Deck) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.decks.len() >= MAX_OPEN {
            let oldest = open
                .decks
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                open.decks.remove(&k);
            }
        }
        open.created += 1;
        let n = open.created;
        open.decks.insert(id, (n, deck));
    }

    /// The folder decks are saved in.
    pub fn out_dir(&self) -> &std::path::Path {
        &self.out_dir
    }

    /// Open decks (for tests of the bound).
    pub fn open_count(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decks
            .len()
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
        self.0.insert(id.clone(), deck);
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
    /// A PNG file (a chart, for instance), by its path in an allowed picture folder.
    path: String,
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
        let pictures = &self.0.pictures;
        let path = pictures.resolve(&a.path).ok_or_else(|| {
            PptxError::Input(format!(
                "cannot read `{}`: {}",
                a.path,
                if pictures.is_empty() {
                    "no picture folder is configured for this agent"
                } else {
                    "not a file in an allowed picture folder"
                }
            ))
        })?;
        let png = agentry_core::confine::read_capped(path, MAX_PICTURE)
            .await
            .map_err(|e| PptxError::Input(format!("cannot read `{}`: {e}", a.path)))?;
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
    /// The deck's file name in the output folder: the one asked for, or with `-2`, `-3`, ...
    /// before `.pptx` when that name was taken. No server path: the caller may be remote.
    file: String,
    slides: usize,
    bytes: usize,
}

impl Tool for SavePresentation {
    const NAME: &'static str = "save_presentation";
    type Args = SaveArgs;
    type Output = Saved;
    type Error = PptxError;
    fn description(&self) -> String {
        "Writes a presentation to a .pptx file in the output folder and returns the file's name \
         (never overwrites: a taken name gets a number)."
            .into()
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
        // Saved: the deck is done and its memory goes (60 decks held 230 MiB before).
        self.0
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decks
            .remove(&a.presentation_id);
        let out_dir = self.0.out_dir.clone();
        let name = a.file_name.clone();
        let len = bytes.len();
        let replace = self.0.replace;
        let file = tokio::task::spawn_blocking(move || {
            agentry_core::confine::write_new(&out_dir, &name, &bytes, replace)
        })
        .await
        .map_err(|e| PptxError::Write(format!("{}: {e}", a.file_name)))?
        .map_err(|e| PptxError::Write(format!("{}: {e}", a.file_name)))?;
        Ok(Saved {
            file,
            slides,
            bytes: len,
        })
    }
}
