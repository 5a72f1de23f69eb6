//! An incremental Server-Sent Events parser: bytes in, events out.
//!
//! Network reads split the stream anywhere (inside a line, between a CR and its LF, inside a
//! multi-byte character), so the parser keeps the unfinished line between calls and yields
//! the same events whatever the split. It follows the WHATWG event-stream rules that matter
//! for chat completions: lines end in CR, LF or CRLF; `:` lines are comments; `data` lines
//! append to the event's data (joined with `\n`); a blank line dispatches; `event`, `id`,
//! `retry` and unknown fields are ignored; a leading UTF-8 BOM is skipped; an unfinished
//! event at end of input is discarded. Garbage never panics; oversized lines or events are
//! reported as an error instead of growing without bound.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The data lines joined with `\n`.
    pub data: String,
}

/// Input the parser refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// A line or an event exceeded the size limit.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { limit } => {
                write!(f, "an SSE line or event exceeded {limit} bytes")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// Incremental parser state.
#[derive(Debug)]
pub struct SseParser {
    /// The unfinished line carried over from the previous input.
    line: Vec<u8>,
    /// Data of the event being built.
    data: String,
    /// Whether the event being built has a `data` field (an empty one counts).
    has_data: bool,
    /// The previous input ended in CR: a leading LF of the next one completes that line end.
    after_cr: bool,
    /// No line has been completed yet (a BOM may lead the first one).
    at_start: bool,
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// The default per-line and per-event limit: 16 MiB.
    pub const DEFAULT_LIMIT: usize = 16 << 20;

    /// A parser with the default limit.
    pub fn new() -> Self {
        Self::with_limit(Self::DEFAULT_LIMIT)
    }

    /// A parser refusing lines or events longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            after_cr: false,
            at_start: true,
            limit,
        }
    }

    /// Feeds bytes, appending every event they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
            bytes = &bytes[1..];
        }
        while !bytes.is_empty() {
            let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                if self.line.len() + bytes.len() > self.limit {
                    return Err(SseError::TooLarge { limit: self.limit });
                }
                self.line.extend_from_slice(bytes);
                return Ok(());
            };
            if self.line.is_empty() {
                self.line_done(&bytes[..end], out)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..end]);
                let result = self.line_done(&line, out);
                line.clear();
                self.line = line;
                result?;
            }
            let crlf = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if crlf {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        Ok(())
    }

    /// Parses bytes in one go (for tests and tools): the events a stream holding exactly
    /// `bytes` yields.
    pub fn parse_all(bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        Self::new().feed(bytes, &mut out)?;
        Ok(out)
    }

    fn line_done(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if std::mem::take(&mut self.at_start) && line.starts_with(BOM) {
            line = &line[BOM.len()..];
        }
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                out.push(SseEvent {
                    data: std::mem::take(&mut self.data),
                });
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.limit {
                return Err(SseError::TooLarge { limit: self.limit });
            }
            if std::mem::replace(&mut self.has_data, true) {
                self.data.push('\n');
            }
            match std::str::from_utf8(value) {
                Ok(text) => self.data.push_str(text),
                Err(_) => self.data.push_str(&String::from_utf8_lossy(value)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn comments_fields_and_multi_line_data_follow_the_event_stream_rules() {
        let input = b"\xEF\xBB\xBF: keep-alive\nevent: x\nid: 7\ndata: a\ndata:b\ndata\n\nretry: 5\n\ndata: [DONE]\n\n";
        let events = SseParser::parse_all(input).unwrap();
        assert_eq!(data(&events), ["a\nb\n", "[DONE]"]);
    }

    #[test]
    fn cr_lf_and_crlf_all_end_lines_even_when_split_between_reads() {
        let input = b"data: 1\r\rdata: 2\n\ndata: 3\r\n\r\n";
        assert_eq!(data(&SseParser::parse_all(input).unwrap()), ["1", "2", "3"]);
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.feed(b"data: 1\r", &mut out).unwrap();
        p.feed(b"\n", &mut out).unwrap();
        p.feed(b"\r", &mut out).unwrap();
        p.feed(b"\ndata: 2\n\n", &mut out).unwrap();
        assert_eq!(data(&out), ["1", "2"]);
    }

    #[test]
    fn unfinished_event_at_end_of_input_is_not_dispatched() {
        assert!(SseParser::parse_all(b"data: partial\n").unwrap().is_empty());
    }

    #[test]
    fn oversized_lines_are_refused_instead_of_buffered_forever() {
        let mut p = SseParser::with_limit(8);
        let mut out = Vec::new();
        assert!(p.feed(b"data: 0123456789", &mut out).is_err());
    }
}
