//! A minimal PresentationML writer: the parts a `.pptx` needs and nothing else (a master, two
//! layouts, a theme, a notes master; slides with a title, bullets, pictures and speaker notes).
//!
//! Why our own: the crates checked either do not build without heavy defaults or wrote decks
//! LibreOffice would not open; the format needed for title-and-bullets decks is small, and the
//! tests open every deck with python-pptx and render one with LibreOffice.

use std::io::Write;

use zip::write::SimpleFileOptions;

use super::PptxError;

/// 16:9, in EMU (English Metric Units, 914,400 per inch).
const SLIDE_W: i64 = 12_192_000;
const SLIDE_H: i64 = 6_858_000;

/// A deck to write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deck {
    /// The presentation's title (document properties).
    pub title: String,
    /// Its author (document properties).
    pub author: String,
    /// The slides, in order.
    pub slides: Vec<Slide>,
}

/// Which layout a slide uses.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// A centered title and a subtitle.
    Title,
    /// A title and a bulleted body.
    #[default]
    Bullets,
}

/// A bullet, with its indent level (0 = top).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bullet {
    /// Its text.
    pub text: String,
    #[serde(default)]
    /// Indent level, 0 at the top.
    pub level: u8,
}

/// A PNG picture placed on a slide (on the right half of a bullet slide, else centered).
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// The image, PNG.
    pub png: Vec<u8>,
    /// Its alternative text.
    pub description: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
/// One slide to write.
pub struct Slide {
    /// Title slide or bullets.
    pub layout: Layout,
    /// Its title.
    pub title: String,
    /// The subtitle of a title slide.
    pub subtitle: String,
    /// Its bullets (bullet slides).
    pub bullets: Vec<Bullet>,
    /// Speaker notes.
    pub notes: String,
    /// Pictures on it.
    pub pictures: Vec<Picture>,
}

/// Width and height of a PNG, from its header; anything else is refused.
pub fn png_size(png: &[u8]) -> Result<(u32, u32), PptxError> {
    const SIG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || &png[..8] != SIG || &png[12..16] != b"IHDR" {
        return Err(PptxError::Input("picture is not a PNG file".into()));
    }
    let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let h = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    if w == 0 || h == 0 {
        return Err(PptxError::Input("PNG with zero size".into()));
    }
    Ok((w, h))
}

/// Escapes text for XML and drops characters XML 1.0 cannot hold.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\t' | '\n' | '\r' => o.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => o.push(c),
        }
    }
    o
}

const NS: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
const XML: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#;
const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
const CT: &str = "application/vnd.openxmlformats-officedocument";

fn rels(items: &[(&str, &str, String)]) -> String {
    let mut s = format!(
        r#"{XML}<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#
    );
    for (id, ty, target) in items {
        s.push_str(&format!(
            r#"<Relationship Id="{id}" Type="{REL}/{ty}" Target="{target}"/>"#
        ));
    }
    s.push_str("</Relationships>");
    s
}

fn xfrm(x: i64, y: i64, w: i64, h: i64) -> String {
    format!(r#"<a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{w}" cy="{h}"/></a:xfrm>"#)
}

const GROUP: &str = r#"<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="0" cy="0"/><a:chOff x="0" y="0"/><a:chExt cx="0" cy="0"/></a:xfrm></p:grpSpPr>"#;

/// A placeholder shape with paragraphs (already XML).
fn placeholder(id: u32, name: &str, ph: &str, pos: (i64, i64, i64, i64), paras: &str) -> String {
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="{id}" name="{name}"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr>{}</p:spPr><p:txBody><a:bodyPr><a:normAutofit/></a:bodyPr><a:lstStyle/>{paras}</p:txBody></p:sp>"#,
        xfrm(pos.0, pos.1, pos.2, pos.3)
    )
}

fn para(text: &str, size: u32, bold: bool, align: Option<&str>) -> String {
    let algn = align.map(|a| format!(r#" algn="{a}""#)).unwrap_or_default();
    let b = if bold { r#" b="1""# } else { "" };
    format!(
        r#"<a:p><a:pPr{algn}/><a:r><a:rPr lang="en-US" sz="{size}"{b} dirty="0"/><a:t>{}</a:t></a:r></a:p>"#,
        esc(text)
    )
}

fn bullet_para(b: &Bullet) -> String {
    let level = i64::from(b.level.min(4));
    let mar = 342_900 + level * 457_200;
    let size = 2000 - 200 * level as u32;
    format!(
        r#"<a:p><a:pPr marL="{mar}" lvl="{level}" indent="-342900"><a:buFont typeface="Arial"/><a:buChar char="&#8226;"/></a:pPr><a:r><a:rPr lang="en-US" sz="{size}" dirty="0"/><a:t>{}</a:t></a:r></a:p>"#,
        esc(&b.text)
    )
}

fn slide_xml(s: &Slide, picture_rids: &[(String, (u32, u32))]) -> String {
    let mut tree = String::from(GROUP);
    match s.layout {
        Layout::Title => {
            tree.push_str(&placeholder(
                2,
                "Title 1",
                r#"<p:ph type="ctrTitle"/>"#,
                (914_400, 2_130_425, SLIDE_W - 1_828_800, 1_470_025),
                &para(&s.title, 4400, true, Some("ctr")),
            ));
            if !s.subtitle.is_empty() {
                tree.push_str(&placeholder(
                    3,
                    "Subtitle 2",
                    r#"<p:ph type="subTitle" idx="1"/>"#,
                    (1_828_800, 3_886_200, SLIDE_W - 3_657_600, 1_752_600),
                    &para(&s.subtitle, 2400, false, Some("ctr")),
                ));
            }
        }
        Layout::Bullets => {
            tree.push_str(&placeholder(
                2,
                "Title 1",
                r#"<p:ph type="title"/>"#,
                (609_600, 274_638, SLIDE_W - 1_219_200, 1_143_000),
                &para(&s.title, 3200, true, None),
            ));
            let body_w = if picture_rids.is_empty() {
                SLIDE_W - 1_219_200
            } else {
                SLIDE_W / 2 - 609_600
            };
            let paras: String = if s.bullets.is_empty() {
                "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>".into()
            } else {
                s.bullets.iter().map(bullet_para).collect()
            };
            tree.push_str(&placeholder(
                3,
                "Content 2",
                r#"<p:ph idx="1"/>"#,
                (609_600, 1_600_200, body_w, SLIDE_H - 2_057_400),
                &paras,
            ));
        }
    }
    // Pictures: right half of a bullet slide (stacked), else centered below the title.
    let n = picture_rids.len() as i64;
    for (i, (rid, (pw, ph))) in picture_rids.iter().enumerate() {
        let (bx, by, bw, bh) = if s.layout == Layout::Bullets && !s.bullets.is_empty() {
            let h = (SLIDE_H - 2_057_400) / n.max(1);
            (
                SLIDE_W / 2 + 304_800,
                1_600_200 + h * i as i64,
                SLIDE_W / 2 - 914_400,
                h,
            )
        } else {
            let h = (SLIDE_H - 2_057_400) / n.max(1);
            (609_600, 1_600_200 + h * i as i64, SLIDE_W - 1_219_200, h)
        };
        // Fit, keeping the aspect ratio.
        let scale = (bw as f64 / f64::from(*pw)).min(bh as f64 / f64::from(*ph));
        let (w, h) = (
            (f64::from(*pw) * scale) as i64,
            (f64::from(*ph) * scale) as i64,
        );
        let (x, y) = (bx + (bw - w) / 2, by + (bh - h) / 2);
        let id = 10 + i;
        let descr = esc(&s.pictures[i].description);
        tree.push_str(&format!(
            r#"<p:pic><p:nvPicPr><p:cNvPr id="{id}" name="Picture {id}" descr="{descr}"/><p:cNvPicPr><a:picLocks noChangeAspect="1"/></p:cNvPicPr><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="{rid}"/><a:stretch><a:fillRect/></a:stretch></p:blipFill><p:spPr>{}<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>"#,
            xfrm(x, y, w, h)
        ));
    }
    format!(
        r#"{XML}<p:sld {NS}><p:cSld><p:spTree>{tree}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>"#
    )
}

fn notes_xml(notes: &str) -> String {
    let paras: String = notes
        .lines()
        .map(|l| para(l, 1200, false, None))
        .collect::<String>();
    let paras = if paras.is_empty() {
        "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>".into()
    } else {
        paras
    };
    format!(
        r#"{XML}<p:notes {NS}><p:cSld><p:spTree>{GROUP}<p:sp><p:nvSpPr><p:cNvPr id="2" name="Slide Image 1"/><p:cNvSpPr><a:spLocks noGrp="1" noRot="1" noChangeAspect="1"/></p:cNvSpPr><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr><p:spPr>{}</p:spPr></p:sp>{}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:notes>"#,
        xfrm(381_000, 685_800, 6_096_000, 3_429_000),
        placeholder(
            3,
            "Notes Placeholder 2",
            r#"<p:ph type="body" idx="1"/>"#,
            (685_800, 4_343_400, 5_486_400, 4_114_800),
            &paras
        )
    )
}

fn theme(name: &str) -> String {
    let solid = |c: &str| format!(r#"<a:solidFill><a:schemeClr val="{c}"/></a:solidFill>"#);
    let line = |w: u32| {
        format!(
            r#"<a:ln w="{w}" cap="flat" cmpd="sng" algn="ctr"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:prstDash val="solid"/></a:ln>"#
        )
    };
    format!(
        r#"{XML}<a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" name="{name}"><a:themeElements><a:clrScheme name="Agentry"><a:dk1><a:sysClr val="windowText" lastClr="000000"/></a:dk1><a:lt1><a:sysClr val="window" lastClr="FFFFFF"/></a:lt1><a:dk2><a:srgbClr val="1F2A44"/></a:dk2><a:lt2><a:srgbClr val="E7E6E6"/></a:lt2><a:accent1><a:srgbClr val="2F5597"/></a:accent1><a:accent2><a:srgbClr val="C55A11"/></a:accent2><a:accent3><a:srgbClr val="7F7F7F"/></a:accent3><a:accent4><a:srgbClr val="BF9000"/></a:accent4><a:accent5><a:srgbClr val="2E75B6"/></a:accent5><a:accent6><a:srgbClr val="548235"/></a:accent6><a:hlink><a:srgbClr val="0563C1"/></a:hlink><a:folHlink><a:srgbClr val="954F72"/></a:folHlink></a:clrScheme><a:fontScheme name="Agentry"><a:majorFont><a:latin typeface="Calibri Light"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont><a:minorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont></a:fontScheme><a:fmtScheme name="Agentry"><a:fillStyleLst>{f}{f}{f}</a:fillStyleLst><a:lnStyleLst>{l1}{l2}{l3}</a:lnStyleLst><a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst><a:bgFillStyleLst>{f}{f}{f}</a:bgFillStyleLst></a:fmtScheme></a:themeElements><a:objectDefaults/><a:extraClrSchemeLst/></a:theme>"#,
        f = solid("phClr"),
        l1 = line(6350),
        l2 = line(12700),
        l3 = line(19050),
    )
}

const CLR_MAP: &str = r#"<p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/>"#;

fn master_xml() -> String {
    let title = placeholder(
        2,
        "Title Placeholder 1",
        r#"<p:ph type="title"/>"#,
        (609_600, 274_638, SLIDE_W - 1_219_200, 1_143_000),
        "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>",
    );
    let body = placeholder(
        3,
        "Text Placeholder 2",
        r#"<p:ph type="body" idx="1"/>"#,
        (609_600, 1_600_200, SLIDE_W - 1_219_200, SLIDE_H - 2_057_400),
        "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>",
    );
    format!(
        r#"{XML}<p:sldMaster {NS}><p:cSld><p:bg><p:bgRef idx="1001"><a:schemeClr val="bg1"/></p:bgRef></p:bg><p:spTree>{GROUP}{title}{body}</p:spTree></p:cSld>{CLR_MAP}<p:sldLayoutIdLst><p:sldLayoutId id="2147483649" r:id="rId1"/><p:sldLayoutId id="2147483650" r:id="rId2"/></p:sldLayoutIdLst><p:txStyles><p:titleStyle><a:lvl1pPr><a:defRPr sz="3200"><a:solidFill><a:schemeClr val="tx2"/></a:solidFill><a:latin typeface="+mj-lt"/></a:defRPr></a:lvl1pPr></p:titleStyle><p:bodyStyle><a:lvl1pPr><a:defRPr sz="2000"><a:solidFill><a:schemeClr val="tx1"/></a:solidFill><a:latin typeface="+mn-lt"/></a:defRPr></a:lvl1pPr></p:bodyStyle><p:otherStyle><a:lvl1pPr><a:defRPr/></a:lvl1pPr></p:otherStyle></p:txStyles></p:sldMaster>"#
    )
}

fn layout_xml(title_layout: bool) -> String {
    let empty = "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>";
    let (ty, name, shapes) = if title_layout {
        (
            "title",
            "Title Slide",
            placeholder(
                2,
                "Title 1",
                r#"<p:ph type="ctrTitle"/>"#,
                (914_400, 2_130_425, SLIDE_W - 1_828_800, 1_470_025),
                empty,
            ) + &placeholder(
                3,
                "Subtitle 2",
                r#"<p:ph type="subTitle" idx="1"/>"#,
                (1_828_800, 3_886_200, SLIDE_W - 3_657_600, 1_752_600),
                empty,
            ),
        )
    } else {
        (
            "obj",
            "Title and Content",
            placeholder(
                2,
                "Title 1",
                r#"<p:ph type="title"/>"#,
                (609_600, 274_638, SLIDE_W - 1_219_200, 1_143_000),
                empty,
            ) + &placeholder(
                3,
                "Content Placeholder 2",
                r#"<p:ph idx="1"/>"#,
                (609_600, 1_600_200, SLIDE_W - 1_219_200, SLIDE_H - 2_057_400),
                empty,
            ),
        )
    };
    format!(
        r#"{XML}<p:sldLayout {NS} type="{ty}" preserve="1"><p:cSld name="{name}"><p:spTree>{GROUP}{shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>"#
    )
}

fn notes_master_xml() -> String {
    format!(
        r#"{XML}<p:notesMaster {NS}><p:cSld><p:bg><p:bgRef idx="1001"><a:schemeClr val="bg1"/></p:bgRef></p:bg><p:spTree>{GROUP}{}</p:spTree></p:cSld>{CLR_MAP}</p:notesMaster>"#,
        placeholder(
            2,
            "Notes Placeholder 1",
            r#"<p:ph type="body" idx="1"/>"#,
            (685_800, 4_343_400, 5_486_400, 4_114_800),
            "<a:p><a:endParaRPr lang=\"en-US\"/></a:p>"
        )
    )
}

/// Writes `deck` as a `.pptx` file's bytes.
pub fn write(deck: &Deck) -> Result<Vec<u8>, PptxError> {
    if deck.slides.is_empty() {
        return Err(PptxError::Input("a deck needs at least one slide".into()));
    }
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut put = |name: &str, body: &[u8]| -> Result<(), PptxError> {
        zip.start_file(name, opts)
            .map_err(|e| PptxError::Write(e.to_string()))?;
        zip.write_all(body)
            .map_err(|e| PptxError::Write(e.to_string()))
    };

    let n = deck.slides.len();
    let mut types = format!(
        r#"{XML}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Default Extension="png" ContentType="image/png"/><Override PartName="/ppt/presentation.xml" ContentType="{CT}.presentationml.presentation.main+xml"/><Override PartName="/ppt/slideMasters/slideMaster1.xml" ContentType="{CT}.presentationml.slideMaster+xml"/><Override PartName="/ppt/slideLayouts/slideLayout1.xml" ContentType="{CT}.presentationml.slideLayout+xml"/><Override PartName="/ppt/slideLayouts/slideLayout2.xml" ContentType="{CT}.presentationml.slideLayout+xml"/><Override PartName="/ppt/notesMasters/notesMaster1.xml" ContentType="{CT}.presentationml.notesMaster+xml"/><Override PartName="/ppt/theme/theme1.xml" ContentType="{CT}.theme+xml"/><Override PartName="/ppt/theme/theme2.xml" ContentType="{CT}.theme+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/><Override PartName="/docProps/app.xml" ContentType="{CT}.extended-properties+xml"/>"#
    );
    for i in 1..=n {
        types.push_str(&format!(
            r#"<Override PartName="/ppt/slides/slide{i}.xml" ContentType="{CT}.presentationml.slide+xml"/><Override PartName="/ppt/notesSlides/notesSlide{i}.xml" ContentType="{CT}.presentationml.notesSlide+xml"/>"#
        ));
    }
    types.push_str("</Types>");
    put("[Content_Types].xml", types.as_bytes())?;
    put(
        "_rels/.rels",
        rels(&[
            ("rId1", "officeDocument", "ppt/presentation.xml".into()),
            (
                "rId2",
                "../package/2006/relationships/metadata/core-properties",
                "docProps/core.xml".into(),
            ),
            ("rId3", "extended-properties", "docProps/app.xml".into()),
        ])
        .replace(
            &format!("{REL}/../package/2006/relationships/metadata/core-properties"),
            "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties",
        )
        .as_bytes(),
    )?;
    put(
        "docProps/core.xml",
        format!(
            r#"{XML}<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><dc:title>{}</dc:title><dc:creator>{}</dc:creator></cp:coreProperties>"#,
            esc(&deck.title),
            esc(&deck.author)
        )
        .as_bytes(),
    )?;
    put(
        "docProps/app.xml",
        format!(
            r#"{XML}<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"><Application>agentry</Application><Slides>{n}</Slides><Notes>{n}</Notes></Properties>"#
        )
        .as_bytes(),
    )?;

    // presentation.xml and its relationships.
    let mut prels = vec![
        (
            "rId1".to_owned(),
            "slideMaster",
            "slideMasters/slideMaster1.xml".to_owned(),
        ),
        (
            "rId2".to_owned(),
            "notesMaster",
            "notesMasters/notesMaster1.xml".to_owned(),
        ),
        ("rId3".to_owned(), "theme", "theme/theme1.xml".to_owned()),
    ];
    let mut sld_ids = String::new();
    for i in 1..=n {
        let rid = format!("rId{}", i + 3);
        sld_ids.push_str(&format!(r#"<p:sldId id="{}" r:id="{rid}"/>"#, 255 + i));
        prels.push((rid, "slide", format!("slides/slide{i}.xml")));
    }
    put(
        "ppt/presentation.xml",
        format!(
            r#"{XML}<p:presentation {NS} saveSubsetFonts="1"><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:notesMasterIdLst><p:notesMasterId r:id="rId2"/></p:notesMasterIdLst><p:sldIdLst>{sld_ids}</p:sldIdLst><p:sldSz cx="{SLIDE_W}" cy="{SLIDE_H}"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>"#
        )
        .as_bytes(),
    )?;
    let prels: Vec<(&str, &str, String)> = prels
        .iter()
        .map(|(a, b, c)| (a.as_str(), *b, c.clone()))
        .collect();
    put("ppt/_rels/presentation.xml.rels", rels(&prels).as_bytes())?;

    put("ppt/slideMasters/slideMaster1.xml", master_xml().as_bytes())?;
    put(
        "ppt/slideMasters/_rels/slideMaster1.xml.rels",
        rels(&[
            (
                "rId1",
                "slideLayout",
                "../slideLayouts/slideLayout1.xml".into(),
            ),
            (
                "rId2",
                "slideLayout",
                "../slideLayouts/slideLayout2.xml".into(),
            ),
            ("rId3", "theme", "../theme/theme1.xml".into()),
        ])
        .as_bytes(),
    )?;
    for (i, title) in [(1, true), (2, false)] {
        put(
            &format!("ppt/slideLayouts/slideLayout{i}.xml"),
            layout_xml(title).as_bytes(),
        )?;
        put(
            &format!("ppt/slideLayouts/_rels/slideLayout{i}.xml.rels"),
            rels(&[(
                "rId1",
                "slideMaster",
                "../slideMasters/slideMaster1.xml".into(),
            )])
            .as_bytes(),
        )?;
    }
    put("ppt/theme/theme1.xml", theme("Agentry").as_bytes())?;
    put("ppt/theme/theme2.xml", theme("Agentry Notes").as_bytes())?;
    put(
        "ppt/notesMasters/notesMaster1.xml",
        notes_master_xml().as_bytes(),
    )?;
    put(
        "ppt/notesMasters/_rels/notesMaster1.xml.rels",
        rels(&[("rId1", "theme", "../theme/theme2.xml".into())]).as_bytes(),
    )?;

    let mut media = 0;
    for (i, s) in deck.slides.iter().enumerate() {
        let i = i + 1;
        let layout = if s.layout == Layout::Title { 1 } else { 2 };
        let mut srels = vec![
            (
                "rId1".to_owned(),
                "slideLayout",
                format!("../slideLayouts/slideLayout{layout}.xml"),
            ),
            (
                "rId2".to_owned(),
                "notesSlide",
                format!("../notesSlides/notesSlide{i}.xml"),
            ),
        ];
        let mut pics = Vec::new();
        for (k, p) in s.pictures.iter().enumerate() {
            let size = png_size(&p.png)?;
            media += 1;
            let rid = format!("rId{}", k + 3);
            put(&format!("ppt/media/image{media}.png"), &p.png)?;
            srels.push((rid.clone(), "image", format!("../media/image{media}.png")));
            pics.push((rid, size));
        }
        put(
            &format!("ppt/slides/slide{i}.xml"),
            slide_xml(s, &pics).as_bytes(),
        )?;
        let srels: Vec<(&str, &str, String)> = srels
            .iter()
            .map(|(a, b, c)| (a.as_str(), *b, c.clone()))
            .collect();
        put(
            &format!("ppt/slides/_rels/slide{i}.xml.rels"),
            rels(&srels).as_bytes(),
        )?;
        put(
            &format!("ppt/notesSlides/notesSlide{i}.xml"),
            notes_xml(&s.notes).as_bytes(),
        )?;
        put(
            &format!("ppt/notesSlides/_rels/notesSlide{i}.xml.rels"),
            rels(&[
                (
                    "rId1",
                    "notesMaster",
                    "../notesMasters/notesMaster1.xml".into(),
                ),
                ("rId2", "slide", format!("../slides/slide{i}.xml")),
            ])
            .as_bytes(),
        )?;
    }
    let cursor = zip.finish().map_err(|e| PptxError::Write(e.to_string()))?;
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_it_cannot_write() {
        assert!(write(&Deck::default()).is_err());
        let e = png_size(b"GIF89a not a png at all....").unwrap_err();
        assert!(e.to_string().contains("PNG"));
    }

    #[test]
    fn escapes_text() {
        assert_eq!(esc("a<b & \"c\"\u{1}\n"), "a&lt;b &amp; &quot;c&quot; ");
    }
}
