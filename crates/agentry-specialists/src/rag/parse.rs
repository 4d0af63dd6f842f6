//! Documents in: plain text, Markdown, HTML and DOCX become one text with its sections.
//!
//! Every format is reduced to the same shape, [`Parsed`]: the document's text and the byte
//! ranges of its sections (headings, or pages), so chunking can follow the structure and a
//! citation can name the section and the exact offsets in the text.

use std::io::Read;
use std::path::Path;

use super::RagError;

/// A section of a document: its heading path (e.g. `ACT I > Scene II. A room of state`) or page.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Its heading path (empty before the first heading).
    pub title: String,
    /// The page, for paged documents.
    pub page: Option<u32>,
    /// Byte range in [`Parsed::text`].
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
}

/// A document reduced to text and sections.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The document's title (its first heading, else its file name).
    pub title: String,
    /// Its text.
    pub text: String,
    /// In order, covering the text without overlaps (text before the first heading is a
    /// section with an empty title).
    pub sections: Vec<Section>,
}

/// The formats ingestion reads, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text (`.txt`).
    Text,
    /// Markdown (`.md`).
    Markdown,
    /// HTML (`.html`, `.htm`).
    Html,
    /// Word (`.docx`).
    Docx,
    /// Text per page (feature `pdf`).
    Pdf,
}

impl Format {
    /// The format of `path`, by its extension; `None` when ingestion does not read it.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" => Format::Html,
            "docx" => Format::Docx,
            "pdf" => Format::Pdf,
            _ => return None,
        })
    }
}

/// Parses `bytes` as `format`; `name` is the fallback title.
pub fn parse(bytes: &[u8], format: Format, name: &str) -> Result<Parsed, RagError> {
    let text = || {
        String::from_utf8(bytes.to_vec())
            .or_else(|_| Ok::<_, RagError>(String::from_utf8_lossy(bytes).into_owned()))
    };
    let mut p = match format {
        Format::Text => plain(&text()?),
        Format::Markdown => markdown(&text()?),
        Format::Html => html(&text()?),
        Format::Docx => docx(bytes)?,
        Format::Pdf => pdf(bytes)?,
    };
    if p.title.is_empty() {
        p.title = name.to_owned();
    }
    Ok(p)
}

/// Builds sections from heading positions: `(byte offset of the heading line, level, title)`.
fn sections_from(text: &str, headings: &[(usize, usize, String)]) -> Vec<Section> {
    let mut out = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut start = 0;
    let mut title = String::new();
    // A section holding nothing but its heading (an act heading right before its first scene)
    // is folded into the next one.
    let has_body = |a: usize, b: usize, titled: bool| {
        let s = &text[a..b];
        let body = if titled {
            s.split_once('\n').map_or("", |x| x.1)
        } else {
            s
        };
        !body.trim().is_empty()
    };
    for (at, level, h) in headings {
        if *at > start && has_body(start, *at, !title.is_empty()) {
            out.push(Section {
                title: title.clone(),
                page: None,
                start,
                end: *at,
            });
        }
        start = *at;
        path.retain(|(l, _)| l < level);
        path.push((*level, h.clone()));
        title = path
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(" > ");
    }
    if start < text.len() && has_body(start, text.len(), !title.is_empty()) {
        out.push(Section {
            title,
            page: None,
            start,
            end: text.len(),
        });
    }
    out
}

/// Plain text. Headings are short lines standing alone between blank lines that are in capitals,
/// are a roman numeral, or start with a structural word (`Act`, `Scene`, `Chapter`, `Part`,
/// `Book`, `Section`); `Scene` nests under `Act`, and an act's heading may stand right above
/// its first scene's or share its line. Inside an act a title in capitals nests under it. The
/// title is the first line when it is in capitals. This fits plays, poems and books, the usual
/// plain-text corpora.
fn plain(text: &str) -> Parsed {
    let lines: Vec<(usize, &str)> = line_offsets(text);
    let mut headings = Vec::new();
    // The first line, when it is short and in capitals, is the title even with a byline right
    // under it (`THE SONNETS` / `by William Shakespeare`).
    let mut first_title = lines
        .iter()
        .map(|l| l.1.trim())
        .find(|l| !l.is_empty())
        .filter(|l| {
            l.len() <= 80
                && l.chars().filter(|c| c.is_alphabetic()).count() >= 4
                && !l.chars().any(char::is_lowercase)
        })
        .map(|l| l.trim_end_matches('.').to_owned())
        .unwrap_or_default();
    // Whether the line before was taken as a heading: an act's heading may stand right above
    // its first scene's (`ACT 1` / `SCENE 1`, `Act I.` / `Scene I.--Athens.`).
    let mut after_heading = false;
    // Whether an act, chapter or other structural part has begun.
    let mut in_parts = false;
    for (i, (at, line)) in lines.iter().enumerate() {
        let was_after = std::mem::take(&mut after_heading);
        let t = line.trim();
        if t.is_empty() || t.len() > 80 || t.starts_with('[') {
            continue;
        }
        let lower = t.to_ascii_lowercase();
        let word = |w: &str| lower.starts_with(w);
        let scene = word("scene ") || word("section ");
        let structural =
            scene || word("act ") || word("chapter ") || word("part ") || word("book ");
        let blank_before = i == 0 || lines[i - 1].1.trim().is_empty() || structural && was_after;
        let next = lines.get(i + 1).map_or("", |(_, l)| l.trim());
        // Under a structural heading may come the scene's heading or its opening direction.
        let blank_after = next.is_empty()
            || structural
                && (next.starts_with('[')
                    || next.to_ascii_lowercase().starts_with("scene ") && next.len() <= 80);
        // A long structural heading may wrap onto up to three more lines before the blank
        // (`Scene III. A churchyard; in it a Monument belonging to the` / `Capulets.`).
        let wrapped = (structural && !blank_after && t.len() >= 50)
            .then(|| {
                let more: Vec<&str> = lines[i + 1..]
                    .iter()
                    .map(|l| l.1.trim())
                    .take_while(|l| !l.is_empty())
                    .take(4)
                    .collect();
                (more.len() <= 3 && more.iter().all(|l| l.len() <= 80 && !l.starts_with('[')))
                    .then(|| more.join(" "))
            })
            .flatten();
        if !(blank_before && (blank_after || wrapped.is_some())) {
            continue;
        }
        let full = wrapped.map(|more| {
            let joined = format!("{t} {more}");
            joined.split_whitespace().collect::<Vec<_>>().join(" ")
        });
        let t = full.as_deref().unwrap_or(t);
        let capitals = t.chars().any(char::is_alphabetic)
            && !t.chars().any(char::is_lowercase)
            && t.chars().filter(|c| c.is_alphabetic()).count() >= 4;
        // A number alone in roman numerals numbers a poem or a chapter (`I`, `XVIII`).
        let number = t.trim_end_matches('.');
        let numeral = !number.is_empty() && number.chars().all(|c| "IVXLCDM".contains(c));
        let level = if scene {
            2
        } else if structural {
            in_parts = true;
            1
        } else if (capitals || numeral) && in_parts {
            // A title in capitals inside an act (`SONG`, `EPILOGUE`) is under it, not a new
            // part: what follows still belongs to the act.
            3
        } else if capitals || numeral {
            1
        } else {
            continue;
        };
        after_heading = true;
        if first_title.is_empty() && level == 1 && headings.is_empty() {
            first_title = t.trim_end_matches('.').to_owned();
        }
        // One line may hold both an act and its first scene (`ACT IV. SCENE I. Caesar's Camp`).
        if let Some(i) = lower.find(". scene ").filter(|_| word("act ")) {
            headings.push((*at, 1, t[..i].to_owned()));
            headings.push((*at, 2, t[i + 2..].trim_end_matches('.').to_owned()));
            continue;
        }
        headings.push((*at, level, t.trim_end_matches('.').to_owned()));
    }
    Parsed {
        title: first_title,
        text: text.to_owned(),
        sections: sections_from(text, &headings),
    }
}

fn line_offsets(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        out.push((at, line.trim_end_matches(['\n', '\r'])));
        at += line.len();
    }
    out
}

/// Markdown: ATX headings (`#` to `######`) outside fenced code blocks; the text is kept as
/// written.
fn markdown(text: &str) -> Parsed {
    let mut headings = Vec::new();
    let mut fenced = false;
    let mut title = String::new();
    for (at, line) in line_offsets(text) {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with([' ', '\t']) {
            let h = t[hashes..].trim().trim_end_matches('#').trim().to_owned();
            if hashes == 1 && title.is_empty() {
                title = h.clone();
            }
            headings.push((at, hashes, h));
        }
    }
    Parsed {
        title,
        text: text.to_owned(),
        sections: sections_from(text, &headings),
    }
}

/// HTML to text: block elements end lines, `script`/`style`/`head` content is dropped, the
/// common entities are decoded, `h1`-`h6` become sections and `title` the title.
fn html(src: &str) -> Parsed {
    let mut out = String::new();
    let mut headings = Vec::new();
    let mut title = String::new();
    let mut skip: Option<String> = None;
    let mut heading: Option<(usize, usize)> = None; // (level, start in out)
    let mut in_title = false;
    let mut rest = src;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            push_text(&mut out, rest, skip.is_some(), in_title, &mut title);
            break;
        };
        push_text(&mut out, &rest[..lt], skip.is_some(), in_title, &mut title);
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(s) = &skip {
            if closing && *s == name {
                skip = None;
            }
            continue;
        }
        match (name.as_str(), closing) {
            ("script" | "style" | "noscript" | "svg", false) => skip = Some(name.clone()),
            ("title", c) => in_title = !c,
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", false) => {
                ensure_break(&mut out, true);
                heading = Some((name[1..].parse().unwrap_or(1), out.len()));
            }
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", true) => {
                if let Some((level, at)) = heading.take() {
                    let h = out[at..].trim().to_owned();
                    if !h.is_empty() {
                        headings.push((at, level, h));
                    }
                }
                ensure_break(&mut out, true);
            }
            ("br", _) => out.push('\n'),
            (
                "p" | "div" | "section" | "article" | "li" | "ul" | "ol" | "table" | "tr"
                | "blockquote" | "pre" | "header" | "footer" | "main" | "nav" | "dd" | "dt",
                _,
            ) => ensure_break(&mut out, name == "p" || name == "section"),
            ("td" | "th", true) => out.push('\t'),
            _ => {}
        }
    }
    let text = out.trim_end().to_owned() + "\n";
    if title.trim().is_empty()
        && let Some((_, _, h)) = headings.first()
    {
        title = h.clone();
    }
    Parsed {
        title: title.trim().to_owned(),
        sections: sections_from(&text, &headings),
        text,
    }
}

fn push_text(out: &mut String, raw: &str, skip: bool, in_title: bool, title: &mut String) {
    if skip {
        return;
    }
    let decoded = decode_entities(raw);
    if in_title {
        title.push_str(&decoded);
        return;
    }
    // Collapse runs of whitespace as a browser does.
    for (i, word) in decoded.split_whitespace().enumerate() {
        let spaced = i > 0 || decoded.starts_with(char::is_whitespace);
        if spaced && !out.is_empty() && !out.ends_with(['\n', ' ', '\t']) {
            out.push(' ');
        }
        out.push_str(word);
    }
    if decoded.ends_with(char::is_whitespace) && !out.ends_with(['\n', ' ']) && !out.is_empty() {
        out.push(' ');
    }
}

fn ensure_break(out: &mut String, paragraph: bool) {
    while out.ends_with(' ') {
        out.pop();
    }
    if out.is_empty() {
        return;
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if paragraph && !out.ends_with("\n\n") {
        out.push('\n');
    }
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // By bytes: 12 bytes in may fall inside a character, and a ';' never does.
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|&b| b == b';');
        let decoded = end.and_then(|e| {
            let ent = &rest[1..e];
            let c = match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                "mdash" => Some('—'),
                "ndash" => Some('–'),
                "hellip" => Some('…'),
                _ if ent.starts_with("#x") || ent.starts_with("#X") => {
                    u32::from_str_radix(&ent[2..], 16)
                        .ok()
                        .and_then(char::from_u32)
                }
                _ if ent.starts_with('#') => ent[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// PDF: the text of each page, a section per page (`page N`). pdf-extract panics on some
/// malformed files; the panic is caught and reported as a parse error.
#[cfg(feature = "pdf")]
fn pdf(bytes: &[u8]) -> Result<Parsed, RagError> {
    let owned = bytes.to_vec();
    let pages =
        std::panic::catch_unwind(move || pdf_extract::extract_text_from_mem_by_pages(&owned))
            .map_err(|_| {
                RagError::Parse("not a readable PDF file (the PDF parser gave up)".into())
            })?
            .map_err(|e| RagError::Parse(format!("not a readable PDF file: {e}")))?;
    let mut text = String::new();
    let mut sections = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let page = page.trim();
        if page.is_empty() {
            continue;
        }
        let start = text.len();
        text.push_str(page);
        text.push_str("\n\n");
        sections.push(Section {
            title: format!("page {}", i + 1),
            page: Some(i as u32 + 1),
            start,
            end: text.len(),
        });
    }
    Ok(Parsed {
        title: String::new(),
        text,
        sections,
    })
}

#[cfg(not(feature = "pdf"))]
fn pdf(_: &[u8]) -> Result<Parsed, RagError> {
    Err(RagError::Parse(
        "PDF support is not built in (cargo feature `pdf` of agentry-specialists)".into(),
    ))
}

/// DOCX: the paragraphs of `word/document.xml`; paragraphs styled `Title` or `HeadingN` are
/// headings.
fn docx(bytes: &[u8]) -> Result<Parsed, RagError> {
    use quick_xml::events::Event;
    let bad = |e: String| RagError::Parse(format!("not a readable DOCX file: {e}"));
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
    let mut xml = String::new();
    zip.by_name("word/document.xml")
        .map_err(|e| bad(format!("word/document.xml: {e}")))?
        .take(64 << 20)
        .read_to_string(&mut xml)
        .map_err(|e| bad(e.to_string()))?;
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut text = String::new();
    let mut headings = Vec::new();
    let mut title = String::new();
    let mut para = String::new();
    let mut style: Option<String> = None;
    let mut in_t = false;
    loop {
        match reader.read_event().map_err(|e| bad(e.to_string()))? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == b"pStyle" => {
                style = e
                    .attributes()
                    .flatten()
                    .find(|a| a.key.local_name().as_ref() == b"val")
                    .map(|a| String::from_utf8_lossy(&a.value).into_owned());
            }
            Event::Start(e) if e.local_name().as_ref() == b"t" => in_t = true,
            Event::End(e) if e.local_name().as_ref() == b"t" => in_t = false,
            Event::Empty(e) if e.local_name().as_ref() == b"tab" => para.push('\t'),
            Event::Empty(e) if e.local_name().as_ref() == b"br" => para.push('\n'),
            Event::Text(t) if in_t => {
                para.push_str(&t.unescape().map_err(|e| bad(e.to_string()))?);
            }
            Event::End(e) if e.local_name().as_ref() == b"p" => {
                let p = std::mem::take(&mut para);
                let level = match style.take().as_deref() {
                    Some("Title") => Some(1),
                    // Word's levels are 1-9; a larger number is no heading (and `n + 1`
                    // must not overflow on a crafted file).
                    Some(s) if s.to_ascii_lowercase().starts_with("heading") => s[7..]
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=9).contains(n))
                        .map(|n| n + 1),
                    _ => None,
                };
                if p.trim().is_empty() {
                    continue;
                }
                if let Some(level) = level {
                    if title.is_empty() {
                        title = p.trim().to_owned();
                    }
                    headings.push((text.len(), level, p.trim().to_owned()));
                }
                text.push_str(p.trim_end());
                text.push_str("\n\n");
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(Parsed {
        title,
        sections: sections_from(&text, &headings),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_act_heading_may_stand_above_or_beside_its_first_scene_and_a_song_is_inside_it() {
        let t = "THE TEMPEST\n\nACT 1\nSCENE 1\n[On a ship at sea]\n\nMASTER.\nBoatswain!\n\nACT 2\n\nSCENE 1\n\nGONZALO.\nBeseech you, sir.\n\nSONG\n\nJUNO.\nHonour, riches.\n\nAct III.\nScene I.--Athens. A Hall\n\nPOET.\nGood day, sir.\n\nACT IV. SCENE I. CAESAR'S Camp.\n\nCAESAR.\nHe calls me boy.\n";
        let p = plain(t);
        let titles: Vec<&str> = p.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "ACT 1 > SCENE 1",
                "ACT 2 > SCENE 1",
                "ACT 2 > SCENE 1 > SONG",
                "Act III > Scene I.--Athens. A Hall",
                "ACT IV > SCENE I. CAESAR'S Camp"
            ]
        );
        // A speaker's tag in capitals above a speech is not a heading.
        assert!(!titles.iter().any(|t| t.contains("MASTER")));
    }

    #[test]
    fn poems_numbered_in_roman_numerals_are_parts_under_the_first_lines_title() {
        let t = "THE SONNETS\nby William Shakespeare\n\n\nI\n\nFrom fairest creatures we desire increase,\n\n\
                 II\n\nWhen forty winters shall besiege thy brow,\n\nXVIII\n\nShall I compare thee?\n";
        let p = plain(t);
        assert_eq!(p.title, "THE SONNETS");
        let titles: Vec<&str> = p.sections.iter().map(|s| s.title.as_str()).collect();
        // The title and byline before the first poem are a section of their own, untitled.
        assert_eq!(titles, ["", "I", "II", "XVIII"]);
    }

    #[test]
    fn plays_get_acts_and_scenes() {
        let t = "HAMLET, PRINCE OF DENMARK\n\nby William Shakespeare\n\n\nACT I.\n\nScene I. Elsinore.\n\nBer.\nWho's there?\n\nFran.\nNay, answer me.\n\nScene II. A room.\n\nKing.\nThough yet.\n\nACT II.\n\nScene I. A house.\n\nPol.\nGive him this money.\n";
        let p = plain(t);
        assert_eq!(p.title, "HAMLET, PRINCE OF DENMARK");
        let titles: Vec<_> = p.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "HAMLET, PRINCE OF DENMARK",
                "ACT I > Scene I. Elsinore",
                "ACT I > Scene II. A room",
                "ACT II > Scene I. A house"
            ]
        );
        // Speaker tags are not headings, and sections hold their text.
        let s = &p.sections[1];
        assert!(t[s.start..s.end].contains("Who's there?"));
        assert!(t[p.sections[3].start..].contains("Give him this money"));
    }

    #[test]
    fn a_long_scene_heading_may_wrap() {
        let t = "ACT V.\n\nScene II. Friar Lawrence's Cell.\n\nFriar.\nHoly Franciscan friar!\n\n\
                 Scene III. A churchyard; in it a Monument belonging to the\nCapulets.\n\n\
                 Paris.\nGive me thy torch, boy.\n\nScene IV. A street.\nRomeo.\nBanished.\n";
        let p = plain(t);
        let titles: Vec<_> = p.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "ACT V > Scene II. Friar Lawrence's Cell",
                "ACT V > Scene III. A churchyard; in it a Monument belonging to the Capulets",
            ]
        );
        let s = &p.sections[1];
        assert!(t[s.start..s.end].contains("Give me thy torch"));
        // A short heading with a speech right under it is no wrapped heading.
        assert!(t[s.start..s.end].contains("Scene IV. A street."));
    }

    #[test]
    fn markdown_headings_nest_and_skip_code() {
        let t =
            "# Guide\n\nIntro.\n\n## Install\n\n```sh\n# not a heading\n```\n\n## Use\n\nRun it.\n";
        let p = markdown(t);
        assert_eq!(p.title, "Guide");
        let titles: Vec<_> = p.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["Guide", "Guide > Install", "Guide > Use"]);
    }

    #[test]
    fn html_text_sections_and_entities() {
        let h = "<html><head><title>Plays &amp; Poems</title><style>p{}</style></head><body>\
                 <h1>Hamlet</h1><p>The Prince&nbsp;of <b>Denmark</b>.</p><script>var x=1;</script>\
                 <h2>Plot</h2><p>Revenge &#8212; and doubt.</p></body></html>";
        let p = html(h);
        assert_eq!(p.title, "Plays & Poems");
        assert!(p.text.contains("The Prince of Denmark."), "{:?}", p.text);
        assert!(p.text.contains("Revenge — and doubt."));
        assert!(!p.text.contains("var x"));
        let titles: Vec<_> = p.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["Hamlet", "Hamlet > Plot"]);
    }

    /// An `&` that starts no entity, with a multibyte character where an entity's `;` could
    /// be: ingesting such a page used to panic (a slice inside `語`).
    #[test]
    fn a_bare_ampersand_before_multibyte_text() {
        assert_eq!(html("<p>AT&T: 日本語</p>").text, "AT&T: 日本語\n");
        assert_eq!(decode_entities("&amp;日本語 &#x65E5;"), "&日本語 日");
    }

    #[test]
    fn broken_docx_is_a_clear_error() {
        let e = parse(b"PK\x03\x04 nonsense", Format::Docx, "x.docx").unwrap_err();
        assert!(e.to_string().contains("DOCX"), "{e}");
    }
}
