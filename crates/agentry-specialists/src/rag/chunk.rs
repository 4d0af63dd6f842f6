//! Chunking that follows document structure: chunks never cross a section, break at paragraph
//! ends where they can, then at line ends, then at sentence or word ends, and keep their byte
//! offsets into the document so a citation can point at them.

use super::parse::Parsed;

/// A piece of a document, the unit of retrieval.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Heading path of the section it comes from.
    pub section: String,
    /// The page, for paged documents.
    pub page: Option<u32>,
    /// Byte range in the document text.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
    /// The chunk's text.
    pub text: String,
}

/// Splits `doc` into chunks of at most `max` bytes (a single word longer than that is cut).
pub fn chunk(doc: &Parsed, max: usize) -> Vec<Chunk> {
    let max = max.max(64);
    let mut out = Vec::new();
    for s in &doc.sections {
        let mut pieces = Vec::new();
        split(&doc.text, s.start, s.end, max, 0, &mut pieces);
        // Greedy packing of consecutive pieces.
        let mut cur: Option<(usize, usize)> = None;
        for (a, b) in pieces {
            cur = match cur {
                Some((ca, _)) if b - ca <= max => Some((ca, b)),
                Some(prev) => {
                    push(&mut out, doc, s, prev);
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some(prev) = cur {
            push(&mut out, doc, s, prev);
        }
    }
    out
}

fn push(out: &mut Vec<Chunk>, doc: &Parsed, s: &super::parse::Section, (a, b): (usize, usize)) {
    let raw = &doc.text[a..b];
    let lead = raw.len() - raw.trim_start().len();
    let text = raw.trim();
    if text.is_empty() {
        return;
    }
    out.push(Chunk {
        section: s.title.clone(),
        page: s.page,
        start: a + lead,
        end: a + lead + text.len(),
        text: text.to_owned(),
    });
}

/// Separators from coarse to fine.
const SEPARATORS: [&str; 5] = ["\n\n", "\n", ". ", "; ", " "];

/// Splits `text[a..b]` into pieces no longer than `max`, at the coarsest separator that works.
fn split(text: &str, a: usize, b: usize, max: usize, level: usize, out: &mut Vec<(usize, usize)>) {
    if b - a <= max {
        out.push((a, b));
        return;
    }
    let Some(sep) = SEPARATORS.get(level) else {
        // No separator left: cut at character boundaries.
        let mut at = a;
        while at < b {
            let mut end = (at + max).min(b);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            out.push((at, end));
            at = end;
        }
        return;
    };
    let mut start = a;
    for (i, _) in text[a..b].match_indices(sep) {
        let end = a + i + sep.len();
        split(text, start, end, max, level + 1, out);
        start = end;
    }
    if start < b {
        split(text, start, b, max, level + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{Format, parse};
    use super::*;

    #[test]
    fn chunks_stay_in_sections_and_point_at_their_text() {
        let mut t = String::from("# A\n\n");
        for i in 0..40 {
            t.push_str(&format!(
                "Paragraph {i} of section A has some words in it.\n\n"
            ));
        }
        t.push_str("# B\n\nShort.\n");
        let doc = parse(t.as_bytes(), Format::Markdown, "x.md").unwrap();
        let chunks = chunk(&doc, 300);
        assert!(chunks.len() > 5);
        for c in &chunks {
            assert!(c.text.len() <= 300);
            assert_eq!(&doc.text[c.start..c.end], c.text);
            // Paragraph boundaries are kept: no chunk starts mid-paragraph.
            assert!(c.text.starts_with("Paragraph") || c.text.starts_with('#'));
        }
        assert_eq!(chunks.last().unwrap().section, "B");
        assert!(
            chunks
                .iter()
                .all(|c| c.section == "A" || !c.text.contains("section A"))
        );
    }

    #[test]
    fn a_long_paragraph_splits_at_sentences_then_words() {
        let t = "word ".repeat(400) + "\n";
        let doc = parse(t.as_bytes(), Format::Text, "x.txt").unwrap();
        let chunks = chunk(&doc, 100);
        assert!(
            chunks
                .iter()
                .all(|c| c.text.len() <= 100 && !c.text.is_empty())
        );
        let joined: usize = chunks
            .iter()
            .map(|c| c.text.split_whitespace().count())
            .sum();
        assert_eq!(joined, 400, "no word lost");
    }
}
