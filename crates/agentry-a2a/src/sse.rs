//! A small incremental parser for `text/event-stream` bodies (what a client reads).

/// Splits a byte stream into the `data` payloads of its events. Comments (keep-alives) and
/// other fields are skipped; multi-line data is joined with `\n`, as the SSE spec says.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; returns the payloads of the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, sep)) = find_event_end(&self.buf) {
            let block: Vec<u8> = self.buf.drain(..end + sep).collect();
            if let Some(data) = parse_block(&block[..end]) {
                out.push(data);
            }
        }
        out
    }

    /// Bytes of an event that has not been terminated yet (a truncated stream leaves some).
    pub fn pending(&self) -> usize {
        self.buf.iter().filter(|b| !b.is_ascii_whitespace()).count()
    }
}

fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, 3));
            }
        }
        i += 1;
    }
    None
}

fn parse_block(block: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(block);
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
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

    #[test]
    fn parses_split_events_comments_and_crlf() {
        let mut p = SseParser::new();
        assert!(p.push(b": keep-alive\n\nda").is_empty());
        assert_eq!(p.push(b"ta: {\"a\":1}\n\n"), vec!["{\"a\":1}"]);
        assert_eq!(p.push(b"data: x\r\ndata: y\r\n\r\n"), vec!["x\ny"]);
        assert_eq!(p.push(b"event: e\ndata:z\n\n"), vec!["z"]);
        assert!(p.push(b"data: trunc").is_empty());
        assert!(p.pending() > 0);
    }
}
