//! A small incremental parser for `text/event-stream` bodies (what a client reads).
//!
//! What a peer streams is held only up to one event's limit ([`SseParser::with_max_event`]),
//! and each byte is searched for an event's end once, however the stream is cut into chunks:
//! a peer cannot make a client hold or rescan without bound. Lines may end with CRLF, LF or
//! a lone CR, and a leading byte order mark is skipped, as the SSE spec allows: line ends
//! are made `\n` as bytes arrive, so the rest of the parser sees one kind.

/// The default limit of one event (32 MiB, as the A2A client's answers).
pub const DEFAULT_MAX_EVENT: usize = 32 << 20;

/// Splits a byte stream into the `data` payloads of its events. Comments (keep-alives) and
/// other fields are skipped; multi-line data is joined with `\n`, as the SSE spec says.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// How much of `buf` was searched for an event's end without finding one.
    scanned: usize,
    max_event: usize,
    /// The last chunk ended with a CR (already written as `\n`): an LF starting the next
    /// one is the rest of that CRLF.
    after_cr: bool,
    /// Whether the stream's start was checked for a byte order mark.
    bom_checked: bool,
}

/// UTF-8's byte order mark, which may open a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Default for SseParser {
    fn default() -> Self {
        Self::with_max_event(DEFAULT_MAX_EVENT)
    }
}

/// A stream's event grew past the parser's limit (the stream should be dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an event of the stream is larger than {limit} bytes")]
pub struct EventTooLarge {
    /// The limit, bytes.
    pub limit: usize,
}

impl SseParser {
    /// A parser with nothing buffered, taking events up to [`DEFAULT_MAX_EVENT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser taking events of at most `max_event` bytes.
    pub fn with_max_event(max_event: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            scanned: 0,
            max_event,
            after_cr: false,
            bom_checked: false,
        }
    }

    /// Feeds a chunk; returns the payloads of the events it completed, or an error once the
    /// event being read is larger than the limit (what was buffered is dropped).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        self.append(chunk);
        let mut out = Vec::new();
        if !self.bom_checked {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(out); // Too little to tell yet.
            }
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
            self.bom_checked = true;
        }
        let mut start = 0;
        // A separator cut by the chunk's start began at most one byte before it.
        let mut from = self.scanned.saturating_sub(1);
        while let Some((end, sep)) = find_event_end(&self.buf, from.max(start)) {
            if let Some(data) = parse_block(&self.buf[start..end]) {
                out.push(data);
            }
            start = end + sep;
            from = start;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() > self.max_event {
            self.buf = Vec::new();
            self.scanned = 0;
            return Err(EventTooLarge {
                limit: self.max_event,
            });
        }
        Ok(out)
    }

    /// Appends a chunk with its line ends (CRLF, CR, LF) written as `\n`.
    fn append(&mut self, mut chunk: &[u8]) {
        if chunk.is_empty() {
            // Nothing to add, and a CR that ended the last chunk still waits for its LF (an
            // empty chunk between the two had made them a blank line: an event of nothing).
            return;
        }
        if self.after_cr {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        let mut parts = chunk.split(|&b| b == b'\r');
        if let Some(first) = parts.next() {
            self.buf.extend_from_slice(first);
        }
        for part in parts {
            // Each part after the first followed a CR.
            self.buf.push(b'\n');
            self.buf
                .extend_from_slice(part.strip_prefix(b"\n").unwrap_or(part));
        }
        self.after_cr = chunk.last() == Some(&b'\r');
    }

    /// Bytes of an event that has not been terminated yet (a truncated stream leaves some).
    pub fn pending(&self) -> usize {
        self.buf.iter().filter(|b| !b.is_ascii_whitespace()).count()
    }
}

/// Where the first event at or after `from` ends (its blank line's first `\n`), and the
/// separator's length (line ends are all `\n` by then).
fn find_event_end(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while let Some(n) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        i += n;
        if buf.get(i + 1) == Some(&b'\n') {
            return Some((i, 2));
        }
        i += 1;
    }
    None
}

fn parse_block(block: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(block);
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(p: &mut SseParser, chunk: &[u8]) -> Vec<String> {
        p.push(chunk).expect("within the limit")
    }

    #[test]
    fn parses_split_events_comments_and_crlf() {
        let mut p = SseParser::new();
        assert!(all(&mut p, b": keep-alive\n\nda").is_empty());
        assert_eq!(all(&mut p, b"ta: {\"a\":1}\n\n"), vec!["{\"a\":1}"]);
        assert_eq!(all(&mut p, b"data: x\r\ndata: y\r\n\r\n"), vec!["x\ny"]);
        assert_eq!(all(&mut p, b"event: e\ndata:z\n\n"), vec!["z"]);
        assert!(all(&mut p, b"data: trunc").is_empty());
        assert!(p.pending() > 0);
    }

    /// A separator cut between two chunks, at each of its bytes, still ends its event.
    #[test]
    fn a_separator_cut_by_a_chunk_still_ends_the_event() {
        for stream in [
            &b"data: a\n\ndata: b\n\n"[..],
            b"data: a\r\n\r\ndata: b\r\n\r\n",
        ] {
            for cut in 0..=stream.len() {
                let mut p = SseParser::new();
                let mut got = all(&mut p, &stream[..cut]);
                got.extend(all(&mut p, &stream[cut..]));
                assert_eq!(got, ["a", "b"], "cut at {cut}");
            }
        }
    }

    /// The SSE spec's three line ends, mixed in one stream and cut anywhere, and a byte order
    /// mark at the start (skipped there, kept anywhere else).
    #[test]
    fn lone_cr_line_ends_and_a_leading_bom() {
        let stream = &b"\xEF\xBB\xBFdata: a\rdata: b\r\rdata: c\r\n\ndata: d\n\r: ka\r\rdata: \xEF\xBB\xBFe\n\n"[..];
        for cut in 0..=stream.len() {
            for cut2 in cut..=stream.len() {
                let mut p = SseParser::new();
                let mut got = all(&mut p, &stream[..cut]);
                got.extend(all(&mut p, &stream[cut..cut2]));
                got.extend(all(&mut p, &stream[cut2..]));
                assert_eq!(got, ["a\nb", "c", "d", "\u{feff}e"], "cut at {cut}, {cut2}");
            }
        }
        // A CR then an LF in the next chunk is one line end, not a blank line.
        let mut p = SseParser::new();
        assert!(all(&mut p, b"data: x\r").is_empty());
        assert!(all(&mut p, b"\ndata: y\r").is_empty());
        assert_eq!(all(&mut p, b"\r"), ["x\ny"]);
        // Likewise with an empty chunk between the CR and the LF (found by the property test
        // below, kept in proptest-regressions/sse.txt).
        let mut p = SseParser::new();
        assert!(all(&mut p, b"data: x\r").is_empty());
        assert!(all(&mut p, b"").is_empty());
        assert!(all(&mut p, b"\ndata: y").is_empty());
    }

    /// An event longer than the limit is refused as it grows, whatever the chunks; events
    /// within it pass even when one chunk holds more than the limit.
    #[test]
    fn an_event_past_the_limit_is_refused() {
        let mut p = SseParser::with_max_event(16);
        assert_eq!(
            all(&mut p, b"data: 0123456789\n\ndata: 0123456789\n\n"),
            ["0123456789", "0123456789"]
        );
        assert!(all(&mut p, b"data: 012345").is_empty());
        assert_eq!(p.push(b"6789a"), Err(EventTooLarge { limit: 16 }));
        // Nothing is kept of it.
        assert_eq!(p.pending(), 0);
        let mut p = SseParser::with_max_event(16);
        assert!(p.push(&[b':'; 17]).is_err(), "comments count too");
    }

    proptest! {
        /// However a stream is cut into chunks, the events read are those of the whole.
        #[test]
        fn chunking_does_not_change_the_events(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(&b"\n"[..]), Just(&b"\r\n"[..]), Just(&b"data: "[..]),
                    Just(&b"data:x"[..]), Just(&b": ka"[..]), Just(&b"event: e"[..]),
                    Just(&b"\r"[..]), Just(&b"\xff"[..]), Just(&b"\xEF\xBB\xBF"[..]),
                    Just(&b"\xEF"[..]),
                ],
                0..40,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let stream: Vec<u8> = parts.concat();
            let whole = SseParser::new().push(&stream).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(stream.len())).collect();
            cuts.sort_unstable();
            let mut p = SseParser::new();
            let mut got = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([stream.len()]) {
                got.extend(p.push(&stream[at..c]).unwrap());
                at = c;
            }
            prop_assert_eq!(got, whole);
        }
    }
}
