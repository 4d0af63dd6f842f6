//! Decks from the PPT tools, checked by other people's software: every deck is opened with
//! python-pptx (PyPI), and one is rendered to PDF by LibreOffice and to PNG by poppler.
//! `scripts/test.sh` installs both; without them these tests say SKIPPED (and fail when
//! `AGENTRY_REQUIRE_INTEROP=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

use agentry_core::llm::ToolCall;
use agentry_specialists::pptx::{Decks, Outline, OutlineSlide, build_outline, ppt_tools};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with python-pptx (and Pillow), or `None` with a SKIPPED line.
pub(crate) fn pptx_python() -> Option<PathBuf> {
    let py = std::env::var_os("AGENTRY_PPTX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-pptx/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import pptx, PIL"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let msg = format!(
            "python-pptx not found at {}: run scripts/test.sh",
            py.display()
        );
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Interop, &msg);
        return None;
    }
    Some(py)
}

pub(crate) fn inspect(py: &Path, deck: &Path) -> Value {
    let out = Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pptx_inspect.py"))
        .arg(deck)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "python-pptx could not open {}: {}",
        deck.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone()
}

/// A scratch folder for one test: removed when it passes, kept when it fails.
fn tempdir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("pptx-{name}"))
}

#[tokio::test]
async fn an_outline_becomes_a_deck_python_pptx_and_libreoffice_open() {
    let Some(py) = pptx_python() else { return };
    let dir = tempdir("outline");
    // A chart-like PNG drawn by Pillow, 640x400.
    let png = dir.join("chart.png");
    let st = Command::new(&py)
        .args([
            "-c",
            "import sys; from PIL import Image, ImageDraw; im = Image.new('RGB', (640, 400), 'white'); d = ImageDraw.Draw(im); [d.rectangle([60 + i * 110, 380 - h, 140 + i * 110, 380], fill=(47, 85, 151)) for i, h in enumerate([120, 300, 200, 260, 90])]; im.save(sys.argv[1])",
        ])
        .arg(&png)
        .status()
        .unwrap();
    assert!(st.success());

    let decks = Decks::new(dir.join("out"))
        .with_picture_folder(&dir)
        .unwrap();
    let tools = ppt_tools(&decks);
    let outline = Outline {
        title: "Hamlet & the <Danes>".into(),
        subtitle: "Key points, cited".into(),
        slides: vec![
            OutlineSlide {
                title: "Who is Hamlet?".into(),
                bullets: vec![
                    "\"Hamlet, Son to the former, and Nephew to the present King.\" [1]".into(),
                    "\tPERSONS REPRESENTED".into(),
                ],
                notes: "[1] hamlet_gut.txt, PERSONS REPRESENTED, bytes 103-161".into(),
                pictures: vec![],
            },
            OutlineSlide {
                title: "Speeches per act".into(),
                bullets: vec!["Act III has the most [2]".into()],
                notes: "[2] counted from hamlet_gut.txt".into(),
                pictures: vec![png.clone()],
            },
        ],
        file_name: None,
    };
    let built = build_outline(&tools, &outline).await.unwrap();
    assert_eq!(built.slides, 3);
    assert_eq!(built.file, "hamlet-the-danes.pptx", "{built:?}");
    let names: Vec<&str> = built
        .calls
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "create_presentation");
    assert_eq!(*names.last().unwrap(), "save_presentation");
    assert!(
        names.contains(&"add_text")
            && names.contains(&"populate_placeholder")
            && names.contains(&"add_picture")
    );

    let deck = dir.join("out").join(&built.file);
    let d = inspect(&py, &deck);
    assert_eq!(d["title"], "Hamlet & the <Danes>");
    let slides = d["slides"].as_array().unwrap();
    assert_eq!(slides.len(), 3);
    assert_eq!(slides[0]["layout"], "Title Slide");
    assert_eq!(slides[0]["title"], "Hamlet & the <Danes>");
    assert_eq!(slides[0]["texts"], json!(["Key points, cited"]));
    assert_eq!(slides[1]["layout"], "Title and Content");
    assert_eq!(slides[1]["title"], "Who is Hamlet?");
    assert_eq!(
        slides[1]["texts"],
        json!([
            "\"Hamlet, Son to the former, and Nephew to the present King.\" [1]",
            "PERSONS REPRESENTED"
        ])
    );
    assert!(
        slides[1]["notes"]
            .as_str()
            .unwrap()
            .contains("bytes 103-161")
    );
    let pics = slides[2]["pictures"].as_array().unwrap();
    assert_eq!(pics.len(), 1);
    assert_eq!(pics[0]["type"], "image/png");
    // Aspect ratio kept (640:400).
    let ratio = pics[0]["width"].as_f64().unwrap() / pics[0]["height"].as_f64().unwrap();
    assert!((ratio - 1.6).abs() < 0.01, "{ratio}");

    // LibreOffice renders it: one PDF page per slide, and the pages rasterize.
    let soffice = Command::new("soffice").arg("--version").output();
    if soffice.is_err() {
        let msg = "LibreOffice (soffice) not found: scripts/test.sh installs libreoffice-impress";
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Interop, &msg);
        return;
    }
    let pdf_dir = dir.join("pdf");
    let out = Command::new("soffice")
        .arg(format!(
            "-env:UserInstallation=file://{}/lo-profile",
            dir.display()
        ))
        .args(["--headless", "--convert-to", "pdf", "--outdir"])
        .arg(&pdf_dir)
        .arg(&deck)
        .output()
        .unwrap();
    let pdf = pdf_dir.join("hamlet-the-danes.pdf");
    assert!(pdf.exists(), "LibreOffice did not convert: {out:?}");
    let info = Command::new("pdfinfo").arg(&pdf).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.lines()
            .any(|l| l.starts_with("Pages:") && l.trim_end().ends_with(" 3")),
        "{info}"
    );
    let st = Command::new("pdftoppm")
        .args(["-png", "-r", "40"])
        .arg(&pdf)
        .arg(dir.join("page"))
        .status()
        .unwrap();
    assert!(st.success());
    let pngs = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("page"))
        .count();
    assert_eq!(pngs, 3);
}

#[tokio::test]
async fn bad_tool_calls_get_clear_errors_and_leave_the_deck_intact() {
    let dir = tempdir("errors");
    let decks = Decks::new(dir.join("out"));
    let tools = ppt_tools(&decks);
    let call = |name: &str, args: Value| ToolCall {
        id: "1".into(),
        name: name.into(),
        arguments: args,
    };
    let id = tools
        .call(&call("create_presentation", json!({"title": "T"})))
        .await
        .output
        .unwrap()
        .data
        .unwrap()["presentation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = tools
        .call(&call(
            "add_text",
            json!({"presentation_id": id, "slide": 1, "text": "x"}),
        ))
        .await
        .output
        .unwrap_err();
    assert!(e.to_string().contains("no slide 1; the deck has 0"), "{e}");
    let e = tools
        .call(&call("add_slide", json!({"presentation_id": "pres_nope"})))
        .await
        .output
        .unwrap_err();
    assert!(e.to_string().contains("no presentation `pres_nope`"), "{e}");
    let e = tools
        .call(&call(
            "add_slide",
            json!({"presentation_id": id, "layout": "diagonal"}),
        ))
        .await
        .output
        .unwrap_err();
    assert!(e.to_string().contains("invalid arguments"), "{e}");
    tools
        .call(&call(
            "add_slide",
            json!({"presentation_id": id, "title": "One"}),
        ))
        .await
        .output
        .unwrap();
    for bad in [
        "../escape.pptx",
        "/tmp/abs.pptx",
        "sub/dir.pptx",
        "notes.txt",
    ] {
        let e = tools
            .call(&call(
                "save_presentation",
                json!({"presentation_id": id, "file_name": bad}),
            ))
            .await
            .output
            .unwrap_err();
        assert!(e.to_string().contains("plain name"), "{bad}: {e}");
    }
    assert!(!dir.join("escape.pptx").exists());
    let e = tools
        .call(&call(
            "add_picture",
            json!({"presentation_id": id, "slide": 1, "path": dir.join("none.png")}),
        ))
        .await
        .output
        .unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
    // The deck survived the bad calls.
    let saved = tools
        .call(&call(
            "save_presentation",
            json!({"presentation_id": id, "file_name": "t.pptx"}),
        ))
        .await
        .output
        .unwrap()
        .data
        .unwrap();
    assert_eq!(saved["slides"], 1);
    // Issue 18, item 11: a saved deck is freed (60 requests grew the server by 230 MiB).
    assert_eq!(decks.open_count(), 0, "the saved deck is no longer held");
    // Decks never saved are bounded too: the oldest goes.
    for i in 0..100 {
        tools
            .call(&call(
                "create_presentation",
                json!({"title": format!("d{i}")}),
            ))
            .await
            .output
            .unwrap();
    }
    assert!(
        decks.open_count() <= 32,
        "{} decks held",
        decks.open_count()
    );
}

/// Issue 18, item 14: on a served agent, one client's deck is never replaced by another's
/// under the same name; a local job into the user's own folder replaces its previous deck.
#[tokio::test]
async fn a_taken_name_gets_a_number_unless_decks_replace() {
    let dir = tempdir("names");
    let save = async |decks: &Decks, title: &str| -> String {
        let tools = ppt_tools(decks);
        let outline = Outline {
            title: title.into(),
            slides: vec![OutlineSlide {
                title: "S".into(),
                bullets: vec![title.into()],
                ..Default::default()
            }],
            file_name: Some("deck.pptx".into()),
            ..Default::default()
        };
        build_outline(&tools, &outline).await.unwrap().file
    };
    let served = Decks::new(dir.join("served"));
    assert_eq!(save(&served, "first").await, "deck.pptx");
    let first = std::fs::read(dir.join("served/deck.pptx")).unwrap();
    assert_eq!(save(&served, "second").await, "deck-2.pptx");
    assert_eq!(save(&served, "third").await, "deck-3.pptx");
    assert_eq!(
        std::fs::read(dir.join("served/deck.pptx")).unwrap(),
        first,
        "the first client's deck is untouched"
    );
    let local = Decks::new(dir.join("local")).replacing();
    assert_eq!(save(&local, "first").await, "deck.pptx");
    let first = std::fs::read(dir.join("local/deck.pptx")).unwrap();
    assert_eq!(save(&local, "second one").await, "deck.pptx");
    assert_ne!(std::fs::read(dir.join("local/deck.pptx")).unwrap(), first);
    let left: Vec<_> = std::fs::read_dir(dir.join("local"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["deck.pptx"], "no temporary file is left behind");
}

#[test]
fn markdown_outlines_parse() {
    let o = Outline::from_markdown(
        "# Hamlet\nA tragedy\n\n## Plot\n- Ghost appears\n  - on the platform\n> [1] Act I\n## Ending\n- All die\n",
    )
    .unwrap();
    assert_eq!(o.title, "Hamlet");
    assert_eq!(o.subtitle, "A tragedy");
    assert_eq!(o.slides.len(), 2);
    assert_eq!(o.slides[0].bullets, ["Ghost appears", "\ton the platform"]);
    assert_eq!(o.slides[0].notes, "[1] Act I");
    assert!(Outline::from_markdown("just text").is_none());
}

/// What the writer makes of text: tabs and line breaks become spaces, characters XML cannot
/// hold are dropped.
fn as_written(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\r' => Some(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => None,
            c => Some(c),
        })
        .collect()
}

/// Every `<a:t>` text of every XML part, after checking the part is well-formed XML that holds
/// only characters XML 1.0 allows.
fn texts_of(deck: &[u8]) -> Result<Vec<String>, String> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(deck)).map_err(|e| e.to_string())?;
    let mut texts = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).map_err(|e| e.to_string())?;
        let name = f.name().to_owned();
        if !(name.ends_with(".xml") || name.ends_with(".rels")) {
            continue;
        }
        let mut xml = String::new();
        f.read_to_string(&mut xml)
            .map_err(|e| format!("{name}: {e}"))?;
        if let Some(c) = xml.chars().find(|&c| {
            ((c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
                || c == '\u{FFFE}'
                || c == '\u{FFFF}'
        }) {
            return Err(format!("{name} holds {:?}, which XML does not allow", c));
        }
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut in_text = false;
        loop {
            match reader.read_event() {
                Err(e) => return Err(format!("{name}: {e}")),
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(quick_xml::events::Event::Start(t)) => in_text = t.name().as_ref() == b"a:t",
                Ok(quick_xml::events::Event::Empty(_)) => {}
                Ok(quick_xml::events::Event::End(_)) => in_text = false,
                Ok(quick_xml::events::Event::Text(t)) if in_text => texts.push(
                    t.unescape()
                        .map_err(|e| format!("{name}: {e}"))?
                        .into_owned(),
                ),
                Ok(_) => {}
            }
        }
    }
    Ok(texts)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any text a request can put in a deck (XML's special characters, control characters,
    /// any Unicode, any bullet level) gives a deck whose XML parts are all well-formed, with
    /// the titles and bullets in them as written.
    #[test]
    fn any_text_makes_a_well_formed_deck(
        title in proptest::prelude::any::<String>(),
        slides in proptest::collection::vec(
            (
                proptest::prelude::any::<String>(),
                proptest::collection::vec((proptest::prelude::any::<String>(), proptest::prelude::any::<u8>()), 0..4),
                proptest::prelude::any::<String>(),
            ),
            0..4,
        ),
    ) {
        use agentry_specialists::pptx::{Bullet, Deck, Layout, Slide, write};
        let mut deck = Deck { title: title.clone(), author: "a & b <c>".into(), slides: Vec::new() };
        deck.slides.push(Slide { layout: Layout::Title, title: title.clone(), subtitle: "s".into(), ..Default::default() });
        for (t, bullets, notes) in &slides {
            deck.slides.push(Slide {
                title: t.clone(),
                bullets: bullets.iter().map(|(text, level)| Bullet { text: text.clone(), level: *level }).collect(),
                notes: notes.clone(),
                ..Default::default()
            });
        }
        let bytes = write(&deck).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let texts = texts_of(&bytes).map_err(proptest::test_runner::TestCaseError::fail)?;
        let wanted = std::iter::once(&title)
            .chain(slides.iter().map(|(t, _, _)| t))
            .chain(slides.iter().flat_map(|(_, b, _)| b.iter().map(|(t, _)| t)));
        for w in wanted {
            let w = as_written(w);
            if !w.trim().is_empty() {
                proptest::prop_assert!(texts.contains(&w), "{w:?} is not in the deck: {texts:?}");
            }
        }
    }

    /// Markdown outlines from anyone: parsed or refused, never a panic.
    #[test]
    fn any_markdown_is_an_outline_or_none(text in "(#{0,3} ?[^\n]{0,30}\n|[-*>] [^\n]{0,30}\n|\t- [^\n]{0,20}\n|[^\n]{0,40}\n){0,20}") {
        if let Some(o) = Outline::from_markdown(&text) {
            proptest::prop_assert!(!o.title.is_empty() && !o.slides.is_empty());
        }
    }
}

/// Decks do not pile up (issue 18, item 11: 60 requests grew a server from 44 to 276 MiB): a
/// saved deck is freed, and past 32 open decks the oldest is evicted; either id then gets
/// a clear "no presentation" error.
#[tokio::test]
async fn saved_and_abandoned_decks_are_freed() {
    let dir = tempdir("freed");
    let decks = Decks::new(dir.join("out"));
    let tools = ppt_tools(&decks);
    let call = |name: &str, args: Value| ToolCall {
        id: "1".into(),
        name: name.into(),
        arguments: args,
    };
    let mut ids = Vec::new();
    for i in 0..40 {
        let out = tools
            .call(&call(
                "create_presentation",
                json!({"title": format!("T{i}")}),
            ))
            .await
            .output
            .unwrap();
        ids.push(
            out.data.unwrap()["presentation_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let slide = |id: &str| call("add_slide", json!({"presentation_id": id, "title": "s"}));
    // The first eight were evicted by the 33rd to 40th; the last 32 are open.
    for (i, id) in ids.iter().enumerate() {
        let r = tools.call(&slide(id)).await.output;
        if i < 8 {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("no presentation"), "{i}: {e}");
        } else {
            assert!(r.is_ok(), "{i}");
        }
    }
    // Saved: written, then freed.
    let last = ids.last().unwrap();
    tools
        .call(&call(
            "save_presentation",
            json!({"presentation_id": last, "file_name": "last.pptx"}),
        ))
        .await
        .output
        .unwrap();
    assert!(dir.join("out/last.pptx").exists());
    let e = tools
        .call(&slide(last))
        .await
        .output
        .unwrap_err()
        .to_string();
    assert!(e.contains("no presentation"), "{e}");
}
