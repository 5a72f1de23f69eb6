//! The streaming line window behind `read`: a bounded excerpt of a file of any size.
//!
//! The file is read in fixed-size chunks; lines before the window are only counted, lines in
//! it are kept (each cut to [`MAX_LINE_CHARS`]), and after the window only newlines are
//! counted to report the total. Memory stays bounded by the chunk size plus the excerpt
//! itself, whatever the file's size or the length of its longest line.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

/// Longest line shown; the rest of a longer line is replaced by a marker.
pub(crate) const MAX_LINE_CHARS: usize = 2000;
/// Cap on the rendered lines of one excerpt (50 KiB).
pub(crate) const MAX_EXCERPT_BYTES: usize = 50 * 1024;
/// How much of the start of a file is checked for NUL bytes.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Bytes kept of one line: enough for `MAX_LINE_CHARS` characters of up to 4 bytes, plus one
/// more so a cut line is recognisably longer than the limit.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;
const CHUNK: usize = 64 * 1024;

/// Which lines to show: 1-based `offset`, at most `limit` of them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub offset: u64,
    pub limit: u64,
}

/// Lines `first..first + lines.len()` rendered as `N: text`, and how the excerpt ended.
#[derive(Debug, Default)]
pub(crate) struct Excerpt {
    /// Rendered lines, without newlines.
    pub lines: Vec<String>,
    /// Number of the first rendered line.
    pub first: u64,
    /// The 50 KiB cap stopped the excerpt (the total was not counted).
    pub capped: bool,
    /// Total number of lines, when the whole file was scanned.
    pub total: Option<u64>,
}

/// Why an excerpt could not be produced.
#[derive(Debug)]
pub(crate) enum ExcerptError {
    /// NUL bytes near the start: not text.
    Binary,
    /// The window starts after the last line.
    OffsetOutOfRange { total: u64 },
    /// The call was cancelled mid-scan.
    Cancelled,
    /// Reading failed.
    Io(io::Error),
}

impl From<io::Error> for ExcerptError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Whether the first 8 KiB of `file` contain a NUL byte; leaves the cursor at the start.
fn is_binary<F: Read + Seek>(file: &mut F) -> io::Result<bool> {
    let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
    file.by_ref()
        .take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(memchr::memchr(0, &head).is_some())
}

/// `N: text`, the text decoded lossily and cut to [`MAX_LINE_CHARS`].
fn render_line(number: u64, bytes: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.char_indices();
    match chars.nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!(
            "{number}: {}... (line truncated to {MAX_LINE_CHARS} chars)",
            &text[..end]
        ),
        None if cut => format!("{number}: {text}... (line truncated to {MAX_LINE_CHARS} chars)"),
        None => format!("{number}: {text}"),
    }
}

struct Scan {
    window: Window,
    excerpt: Excerpt,
    /// Lines completed so far.
    done: u64,
    /// Bytes of the current line kept so far (only while it is in the window).
    current: Vec<u8>,
    /// The current line is longer than what was kept.
    cut: bool,
    /// Bytes seen of the current line (to know whether a last line without newline exists).
    pending: bool,
    rendered_bytes: usize,
    /// Once the excerpt is full, only newlines are counted.
    counting_only: bool,
}

impl Scan {
    fn in_window(&self) -> bool {
        let number = self.done + 1;
        !self.counting_only
            && number >= self.window.offset
            && number < self.window.offset.saturating_add(self.window.limit)
    }

    fn take(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.pending = true;
        if self.in_window() {
            let room = MAX_LINE_BYTES.saturating_sub(self.current.len());
            if bytes.len() > room {
                self.cut = true;
            }
            self.current
                .extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// Ends the current line; returns false once the excerpt is capped (nothing more to do).
    fn end_line(&mut self) -> bool {
        if self.in_window() {
            let number = self.done + 1;
            let line = render_line(number, &self.current, self.cut);
            if self.rendered_bytes + line.len() + 1 > MAX_EXCERPT_BYTES {
                self.excerpt.capped = true;
                return false;
            }
            if self.excerpt.lines.is_empty() {
                self.excerpt.first = number;
            }
            self.rendered_bytes += line.len() + 1;
            self.excerpt.lines.push(line);
            if number + 1 >= self.window.offset.saturating_add(self.window.limit) {
                self.counting_only = true;
            }
        }
        self.current.clear();
        self.cut = false;
        self.pending = false;
        self.done += 1;
        true
    }
}

/// Scans `file` for `window`. `cancelled` is polled between chunks.
pub(crate) fn excerpt<F: Read + Seek>(
    mut file: F,
    window: Window,
    cancelled: &dyn Fn() -> bool,
) -> Result<Excerpt, ExcerptError> {
    if is_binary(&mut file)? {
        return Err(ExcerptError::Binary);
    }
    let mut reader = BufReader::with_capacity(CHUNK, file);
    let mut scan = Scan {
        window,
        excerpt: Excerpt::default(),
        done: 0,
        current: Vec::new(),
        cut: false,
        pending: false,
        rendered_bytes: 0,
        counting_only: false,
    };
    loop {
        if cancelled() {
            return Err(ExcerptError::Cancelled);
        }
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let len = chunk.len();
        if scan.counting_only {
            let newlines = memchr::memchr_iter(b'\n', chunk).count() as u64;
            scan.done += newlines;
            scan.pending = chunk.last() != Some(&b'\n');
        } else {
            let mut rest = chunk;
            while let Some(at) = memchr::memchr(b'\n', rest) {
                scan.take(&rest[..at]);
                if !scan.end_line() {
                    return Ok(scan.excerpt);
                }
                rest = &rest[at + 1..];
                if scan.counting_only {
                    scan.done += memchr::memchr_iter(b'\n', rest).count() as u64;
                    scan.pending = !rest.is_empty() && rest.last() != Some(&b'\n');
                    rest = &[];
                }
            }
            scan.take(rest);
        }
        reader.consume(len);
    }
    if scan.pending && !scan.end_line() {
        return Ok(scan.excerpt);
    }
    let total = scan.done;
    let empty_file_at_start = total == 0 && window.offset == 1;
    if window.offset > total && !empty_file_at_start {
        return Err(ExcerptError::OffsetOutOfRange { total });
    }
    scan.excerpt.total = Some(total);
    Ok(scan.excerpt)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn run(text: &str, offset: u64, limit: u64) -> Excerpt {
        excerpt(
            Cursor::new(text.as_bytes().to_vec()),
            Window { offset, limit },
            &|| false,
        )
        .unwrap()
    }

    #[test]
    fn lines_are_numbered_from_the_offset_and_the_total_is_counted() {
        let e = run("a\nb\nc\nd\n", 2, 2);
        assert_eq!(e.lines, ["2: b", "3: c"]);
        assert_eq!(e.first, 2);
        assert_eq!(e.total, Some(4));
        assert!(!e.capped);
    }

    #[test]
    fn a_last_line_without_newline_counts() {
        let e = run("a\nb", 1, 10);
        assert_eq!(e.lines, ["1: a", "2: b"]);
        assert_eq!(e.total, Some(2));
        let e = run("a\nb", 1, 1);
        assert_eq!(e.total, Some(2));
    }

    #[test]
    fn an_empty_file_has_no_lines_and_offset_one_is_allowed() {
        let e = run("", 1, 10);
        assert!(e.lines.is_empty());
        assert_eq!(e.total, Some(0));
    }

    #[test]
    fn an_offset_past_the_end_is_out_of_range() {
        let err = excerpt(
            Cursor::new(b"a\nb\n".to_vec()),
            Window {
                offset: 3,
                limit: 1,
            },
            &|| false,
        )
        .unwrap_err();
        assert!(matches!(err, ExcerptError::OffsetOutOfRange { total: 2 }));
    }

    #[test]
    fn long_lines_are_cut_with_a_marker() {
        let long = "x".repeat(MAX_LINE_CHARS + 5);
        let e = run(&format!("{long}\nok\n"), 1, 10);
        assert_eq!(
            e.lines[0],
            format!(
                "1: {}... (line truncated to {MAX_LINE_CHARS} chars)",
                "x".repeat(MAX_LINE_CHARS)
            )
        );
        assert_eq!(e.lines[1], "2: ok");
    }

    #[test]
    fn the_excerpt_is_capped_at_50_kib() {
        let line = "y".repeat(1000);
        let text: String = (0..200).map(|_| format!("{line}\n")).collect();
        let e = run(&text, 1, 2000);
        assert!(e.capped);
        assert_eq!(e.total, None);
        let bytes: usize = e.lines.iter().map(|l| l.len() + 1).sum();
        assert!(bytes <= MAX_EXCERPT_BYTES);
        assert!(
            e.lines.len() > 45 && e.lines.len() < 200,
            "{}",
            e.lines.len()
        );
    }

    #[test]
    fn nul_bytes_near_the_start_mean_binary() {
        let err = excerpt(
            Cursor::new(b"abc\0def".to_vec()),
            Window {
                offset: 1,
                limit: 1,
            },
            &|| false,
        )
        .unwrap_err();
        assert!(matches!(err, ExcerptError::Binary));
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let e = excerpt(
            Cursor::new(b"caf\xe9\n".to_vec()),
            Window {
                offset: 1,
                limit: 1,
            },
            &|| false,
        )
        .unwrap();
        assert_eq!(e.lines, ["1: caf\u{fffd}"]);
    }
}
