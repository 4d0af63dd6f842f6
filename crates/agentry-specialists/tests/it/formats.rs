//! Ingestion formats on real files: a DOCX written as Word writes it (zip + WordprocessingML), a
//! PDF rendered by LibreOffice, Markdown and HTML; a folder of them ingested with the real
//! embedder; broken files reported, not fatal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use agentry_core::embed::DynEmbedder;
use agentry_specialists::pptx::{Bullet, Deck, Layout, Slide, write};
use agentry_specialists::rag::KnowledgeBase;
use agentry_specialists::rag::parse::{Format, parse};

/// A scratch folder for one test: removed when it passes, kept when it fails.
fn tempdir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("formats-{name}"))
}

fn docx(paragraphs: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (style, text) in paragraphs {
        let ppr = if style.is_empty() {
            String::new()
        } else {
            format!(r#"<w:pPr><w:pStyle w:val="{style}"/></w:pPr>"#)
        };
        body.push_str(&format!(
            r#"<w:p>{ppr}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#
        ));
    }
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default();
    z.start_file("[Content_Types].xml", o).unwrap();
    z.write_all(br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#).unwrap();
    z.start_file("word/document.xml", o).unwrap();
    z.write_all(doc.as_bytes()).unwrap();
    z.finish().unwrap().into_inner()
}

#[test]
fn docx_headings_become_sections() {
    let bytes = docx(&[
        ("Title", "Elsinore Guide"),
        ("Heading1", "The Castle"),
        ("", "The platform is cold &amp; windy."),
        ("Heading2", "Ghosts"),
        ("", "Sightings are reported at midnight."),
    ]);
    let p = parse(&bytes, Format::Docx, "guide.docx").unwrap();
    assert_eq!(p.title, "Elsinore Guide");
    let titles: Vec<_> = p.sections.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Elsinore Guide > The Castle",
            "Elsinore Guide > The Castle > Ghosts"
        ]
    );
    assert!(p.text.contains("The platform is cold & windy."));
}

/// A PDF made by LibreOffice from a deck of ours: one page per slide.
fn pdf_from_libreoffice(dir: &Path) -> Option<PathBuf> {
    if Command::new("soffice").arg("--version").output().is_err() {
        let msg = "LibreOffice (soffice) not found: scripts/test.sh installs it";
        agentry_testkit::missing::<()>(agentry_testkit::Peer::Interop, &msg);
        return None;
    }
    let deck = Deck {
        title: "Report".into(),
        author: String::new(),
        slides: vec![
            Slide {
                layout: Layout::Title,
                title: "Quarterly herring report".into(),
                ..Default::default()
            },
            Slide {
                title: "Findings".into(),
                bullets: vec![Bullet {
                    text: "Herring catches rose by a third in the northern waters".into(),
                    level: 0,
                }],
                ..Default::default()
            },
        ],
    };
    let pptx = dir.join("report.pptx");
    std::fs::write(&pptx, write(&deck).unwrap()).unwrap();
    let pdf = dir.join("report.pdf");
    // A fresh LibreOffice profile sometimes aborts on its first start (seen once on a new
    // machine: WrappedTargetRuntimeException, no PDF); a second start with it works.
    let mut out = None;
    for _ in 0..2 {
        let o = Command::new("soffice")
            .arg(format!("-env:UserInstallation=file://{}/lo", dir.display()))
            .args(["--headless", "--convert-to", "pdf", "--outdir"])
            .arg(dir)
            .arg(&pptx)
            .output()
            .unwrap();
        let done = pdf.exists();
        out = Some(o);
        if done {
            break;
        }
    }
    assert!(pdf.exists(), "{out:?}");
    std::fs::remove_file(&pptx).unwrap();
    Some(pdf)
}

#[test]
fn pdf_pages_become_sections_and_broken_pdfs_are_errors() {
    let dir = tempdir("pdf");
    let e = parse(b"%PDF-1.4 garbage", Format::Pdf, "x.pdf").unwrap_err();
    assert!(e.to_string().contains("PDF"), "{e}");
    let Some(pdf) = pdf_from_libreoffice(&dir) else {
        return;
    };
    let p = parse(&std::fs::read(pdf).unwrap(), Format::Pdf, "report.pdf").unwrap();
    assert_eq!(p.sections.len(), 2, "{:?}", p.sections);
    assert_eq!(p.sections[1].page, Some(2));
    let page2 = &p.text[p.sections[1].start..p.sections[1].end];
    assert!(page2.contains("Herring catches rose"), "{page2:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_of_mixed_documents_is_ingested_and_searchable() {
    if !agentry_local::paths::embedder_path()
        .join("model.safetensors")
        .exists()
    {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Models,
            "embedder missing: run scripts/fetch-models.sh",
        );
        return;
    }
    let dir = tempdir("mixed");
    let docs = dir.join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("a.md"),
        "# Boats\n\n## Rowing\n\nA rowing boat is moved by oars.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("sub/b.html"),
        "<html><title>Birds</title><body><h1>Owls</h1><p>Owls hunt at night and see in the dark.</p></body></html>",
    )
    .unwrap();
    std::fs::write(
        docs.join("c.docx"),
        docx(&[
            ("Heading1", "Bread"),
            ("", "Sourdough bread rises with wild yeast."),
        ]),
    )
    .unwrap();
    std::fs::write(docs.join("broken.docx"), b"not a zip").unwrap();
    let pdf = pdf_from_libreoffice(&dir);
    if let Some(p) = &pdf {
        std::fs::rename(p, docs.join("report.pdf")).unwrap();
    }
    let embedder: Arc<dyn DynEmbedder> = agentry_local::provider::shared_embedder(None).unwrap();
    let kb = KnowledgeBase::open(&dir.join("kb.db"), embedder, "all-minilm-l6-v2").unwrap();
    let r = kb.ingest(&docs, "misc", &|_| {}).await.unwrap();
    assert_eq!(r.ingested.len(), 3 + usize::from(pdf.is_some()), "{r:?}");
    assert_eq!(r.skipped.len(), 1);
    assert!(r.skipped[0].0.ends_with("broken.docx") && r.skipped[0].1.contains("DOCX"));
    for (q, doc, section) in [
        ("Which birds hunt in darkness?", "b.html", "Owls"),
        ("How does sourdough rise?", "c.docx", "Bread"),
        ("How is a rowing boat propelled?", "a.md", "Boats > Rowing"),
    ] {
        let hits = kb.search("misc", q, 1).await.unwrap();
        assert_eq!(
            (hits[0].document.as_str(), hits[0].section.as_str()),
            (doc, section),
            "{q}"
        );
    }
    if pdf.is_some() {
        let hits = kb.search("misc", "herring catches", 1).await.unwrap();
        assert_eq!(hits[0].document, "report.pdf");
        assert_eq!(hits[0].page, Some(2));
    }
}

/// Whether a parsed document keeps its promises: sections in order, not overlapping, inside
/// the text and on character boundaries; chunks the same, each holding exactly the text at
/// its offsets (what a citation quotes).
fn well_formed(p: &agentry_specialists::rag::parse::Parsed) -> Result<(), String> {
    let mut at = 0;
    for s in &p.sections {
        if s.start < at || s.end < s.start || p.text.get(s.start..s.end).is_none() {
            return Err(format!(
                "section {s:?} after {at} in {} bytes",
                p.text.len()
            ));
        }
        at = s.end;
    }
    for max in [64, 200, 1000] {
        for c in agentry_specialists::rag::chunk::chunk(p, max) {
            if p.text.get(c.start..c.end) != Some(c.text.as_str()) {
                return Err(format!("chunk {c:?} is not the text at its offsets"));
            }
        }
    }
    Ok(())
}

/// Pieces that exercise the text formats' parsers: headings of each kind, tags, entities,
/// comments and scripts cut anywhere, multibyte characters next to markup, every line end.
fn document_piece() -> impl proptest::strategy::Strategy<Value = &'static str> {
    proptest::sample::select(vec![
        "# ",
        "## ",
        "###### ",
        "Title\n",
        "=====\n",
        "---\n",
        "```\n",
        "ACT I.\n",
        "SCENE II. ",
        "<h1>",
        "</h1>",
        "<h2 class=x>",
        "<p>",
        "</p>",
        "<br/>",
        "<title>",
        "</title>",
        "<script>",
        "</script>",
        "<!--",
        "-->",
        "<",
        ">",
        "&amp;",
        "&#233;",
        "&#x1F600;",
        "&#99999999;",
        "&",
        ";",
        "&nbsp",
        "é",
        "日本",
        "😀",
        "\u{200b}",
        "\n",
        "\r\n",
        "\r",
        "\n\n",
        " ",
        "word",
        ".",
        "Hamlet. ",
        "\t",
        "\0",
        "\u{feff}",
    ])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
    /// No text, Markdown or HTML file makes ingestion panic, and what it makes of one can be
    /// cited at its offsets.
    #[test]
    fn no_text_document_breaks_parsing_or_chunking(
        pieces in proptest::collection::vec(document_piece(), 0..120),
    ) {
        let doc: String = pieces.concat();
        for format in [Format::Text, Format::Markdown, Format::Html] {
            let p = parse(doc.as_bytes(), format, "doc").unwrap();
            let checked = well_formed(&p);
            proptest::prop_assert!(checked.is_ok(), "{format:?} of {doc:?}: {checked:?}");
        }
    }

    /// Arbitrary bytes as a DOCX, and a real DOCX zip holding arbitrary WordprocessingML:
    /// an error or a document, never a panic.
    #[test]
    fn no_docx_breaks_parsing(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        pieces in proptest::collection::vec(proptest::sample::select(vec![
            "<w:p>", "</w:p>", "<w:r>", "</w:r>", "<w:t>", "</w:t>", "<w:t xml:space=\"preserve\">",
            "<w:pPr><w:pStyle w:val=\"Heading1\"/></w:pPr>", "<w:pStyle w:val=\"Title\"/>",
            "<w:pStyle w:val=\"Heading18446744073709551615\"/>", "<w:pStyle w:val=\"heading\"/>",
            "<w:tab/>", "<w:br/>", "&amp;", "&bogus;", "text", "é", "<", ">", "\"", "<w:body>",
        ]), 0..60),
    ) {
        let _ = parse(&bytes, Format::Docx, "x.docx");
        let body: String = pieces.concat();
        let z = {
            let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            let o = zip::write::SimpleFileOptions::default();
            z.start_file("word/document.xml", o).unwrap();
            z.write_all(format!(
                r#"<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
            ).as_bytes()).unwrap();
            z.finish().unwrap().into_inner()
        };
        if let Ok(p) = parse(&z, Format::Docx, "x.docx") {
            let checked = well_formed(&p);
            proptest::prop_assert!(checked.is_ok(), "{body:?}: {checked:?}");
        }
    }
}
