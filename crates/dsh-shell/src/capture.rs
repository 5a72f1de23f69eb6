//! Bounded capture of one output stream: an in-memory tail that readers share, fed by a pump
//! that also keeps the spill file (see [`crate::spill`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::live::LiveOutput;
use crate::result::CapturedOutput;
use crate::spill::Spill;

/// Read size of the pump; also the largest chunk a spill write sees.
const CHUNK: usize = 64 * 1024;

/// The last `max` bytes of a stream plus enough bookkeeping for consuming reads.
///
/// Offsets are absolute byte positions in the stream, so a reader's cursor stays meaningful as
/// the tail slides; a cursor that fell behind the tail start means output was lost from memory.
#[derive(Debug)]
pub(crate) struct StreamTail {
    max: usize,
    state: Mutex<TailState>,
}

#[derive(Debug, Default)]
struct TailState {
    buf: VecDeque<u8>,
    /// Bytes seen in total; `total - buf.len()` is the absolute offset of `buf[0]`.
    total: u64,
    spill: Option<PathBuf>,
    /// The pump saw end of file: no more bytes will come, so nothing is held back.
    closed: bool,
}

/// The result of [`StreamTail::read_from`].
#[derive(Debug, Default)]
pub(crate) struct TailRead {
    pub text: String,
    /// The cursor for the next read.
    pub next: u64,
    /// Bytes between the cursor and the tail start were dropped from memory.
    pub lossy: bool,
    pub spill: Option<PathBuf>,
}

impl StreamTail {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            state: Mutex::new(TailState::default()),
        }
    }

    /// Whether `more` bytes would make the stream outgrow the tail.
    pub(crate) fn would_overflow(&self, more: usize) -> bool {
        self.state.lock().total + more as u64 > self.max as u64
    }

    /// Every byte so far, or `None` once the tail has dropped some.
    pub(crate) fn whole_stream(&self) -> Option<Vec<u8>> {
        let state = self.state.lock();
        (state.total == state.buf.len() as u64).then(|| state.buf.iter().copied().collect())
    }

    pub(crate) fn push(&self, bytes: &[u8]) {
        let mut state = self.state.lock();
        state.total += bytes.len() as u64;
        let keep = &bytes[bytes.len().saturating_sub(self.max)..];
        state.buf.extend(keep);
        let excess = state.buf.len().saturating_sub(self.max);
        state.buf.drain(..excess);
    }

    pub(crate) fn set_spill(&self, path: Option<PathBuf>) {
        self.state.lock().spill = path;
    }

    /// Takes the spill path away, for a caller about to delete the file.
    pub(crate) fn take_spill(&self) -> Option<PathBuf> {
        self.state.lock().spill.take()
    }

    /// Frees the buffered bytes of a closed stream whose reader has consumed all of them.
    ///
    /// Offsets stay valid: the tail simply starts at the end of the stream, so a later read
    /// from the reader's cursor is empty and not lossy. This is what bounds the memory a
    /// finished background task keeps once its final output was delivered.
    pub(crate) fn release(&self) {
        self.state.lock().buf = VecDeque::new();
    }

    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.state.lock().buf.len()
    }

    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
    }

    /// The foreground view: the whole tail.
    pub(crate) fn snapshot(&self) -> CapturedOutput {
        let state = self.state.lock();
        let truncated = state.total > state.buf.len() as u64;
        let bytes: Vec<u8> = state.buf.iter().copied().collect();
        let skip = if truncated {
            partial_char_prefix(&bytes)
        } else {
            0
        };
        CapturedOutput {
            text: String::from_utf8_lossy(&bytes[skip..]).into_owned(),
            truncated,
            spill_path: state.spill.clone(),
        }
    }

    /// Everything after `cursor` that is still in memory.
    ///
    /// While the stream is open, an incomplete trailing UTF-8 sequence is held back for the
    /// next read, so a character split across two pipe reads is not turned into two
    /// replacement characters.
    pub(crate) fn read_from(&self, cursor: u64) -> TailRead {
        let state = self.state.lock();
        let start = state.total - state.buf.len() as u64;
        let lossy = cursor < start;
        let from = cursor.max(start);
        // `from - start <= buf.len()` (a cursor never passes `total`), so it fits a usize.
        let bytes: Vec<u8> = state
            .buf
            .range((from - start) as usize..)
            .copied()
            .collect();
        let skip = if lossy {
            partial_char_prefix(&bytes)
        } else {
            0
        };
        let end = if state.closed {
            bytes.len()
        } else {
            complete_prefix_len(&bytes).max(skip)
        };
        TailRead {
            text: String::from_utf8_lossy(&bytes[skip..end]).into_owned(),
            next: from + end as u64,
            lossy,
            spill: state.spill.clone(),
        }
    }
}

/// Length of the leading UTF-8 continuation bytes: the rest of a character whose start was cut
/// off by the tail boundary.
fn partial_char_prefix(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| is_continuation(**b))
        .count()
}

/// Length of `bytes` without a trailing, still incomplete UTF-8 sequence.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // A sequence is at most 4 bytes, so its lead byte is within the last 4.
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if is_continuation(byte) {
            continue;
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// Copies `reader` into `tail` (and, once the tail overflows, into `spill`; and to `live`, when
/// a front end watches) until end of file.
///
/// The spill is updated before the tail so that a reader who sees truncated output also sees
/// the spill path. A read error ends the stream like end of file: the process is being reaped
/// either way and the error carries nothing the model could use.
pub(crate) async fn pump(
    mut reader: impl AsyncRead + Unpin,
    tail: Arc<StreamTail>,
    mut spill: Spill,
    live: Option<LiveOutput>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::warn!(%err, "reading command output failed; treating it as end of stream");
                break;
            }
        };
        let chunk = &buf[..n];
        spill.accept(&tail, chunk).await;
        tail.push(chunk);
        if let Some(live) = &live {
            live.accept(chunk);
        }
    }
    spill.finish(&tail).await;
    tail.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_only_the_last_bytes() {
        let tail = StreamTail::new(4);
        tail.push(b"ab");
        tail.push(b"cdef");
        let out = tail.snapshot();
        assert_eq!(out.text, "cdef");
        assert!(out.truncated);
        tail.push(b"0123456789");
        assert_eq!(tail.snapshot().text, "6789");
    }

    #[test]
    fn untruncated_tail_is_the_whole_stream() {
        let tail = StreamTail::new(8);
        tail.push(b"abc");
        assert_eq!(tail.whole_stream().as_deref(), Some(&b"abc"[..]));
        assert!(!tail.snapshot().truncated);
        tail.push(b"defghi");
        assert_eq!(tail.whole_stream(), None);
    }

    #[test]
    fn consuming_reads_never_redeliver() {
        let tail = StreamTail::new(64);
        tail.push(b"one\n");
        let first = tail.read_from(0);
        assert_eq!(first.text, "one\n");
        assert!(!first.lossy);
        let again = tail.read_from(first.next);
        assert_eq!(again.text, "");
        tail.push(b"two\n");
        assert_eq!(tail.read_from(again.next).text, "two\n");
    }

    #[test]
    fn read_behind_the_tail_is_lossy() {
        let tail = StreamTail::new(4);
        tail.push(b"abcdefgh");
        let read = tail.read_from(0);
        assert!(read.lossy);
        assert_eq!(read.text, "efgh");
        assert_eq!(read.next, 8);
    }

    #[test]
    fn split_character_is_held_back_until_complete() {
        let tail = StreamTail::new(64);
        let snow = "☃".as_bytes(); // 3 bytes
        tail.push(&snow[..2]);
        let first = tail.read_from(0);
        assert_eq!(first.text, "");
        assert_eq!(first.next, 0);
        tail.push(&snow[2..]);
        assert_eq!(tail.read_from(first.next).text, "☃");
    }

    #[test]
    fn closed_stream_releases_an_incomplete_tail() {
        let tail = StreamTail::new(64);
        tail.push(&"é".as_bytes()[..1]);
        tail.close();
        assert_eq!(tail.read_from(0).text, "\u{FFFD}");
    }

    #[test]
    fn character_cut_by_the_tail_boundary_is_dropped() {
        let tail = StreamTail::new(4);
        tail.push("x☃ab".as_bytes()); // 1 + 3 + 2 bytes; the tail starts inside the snowman
        let out = tail.snapshot();
        assert_eq!(out.text, "ab");
        assert_eq!(tail.read_from(0).text, "ab");
    }

    #[test]
    fn released_tail_keeps_offsets_and_reads_empty_without_loss() {
        let tail = StreamTail::new(64);
        tail.push(b"all of it\n");
        tail.close();
        let read = tail.read_from(0);
        assert_eq!(read.text, "all of it\n");
        tail.release();
        assert_eq!(tail.buffered(), 0);
        let after = tail.read_from(read.next);
        assert_eq!(
            (after.text.as_str(), after.lossy, after.next),
            ("", false, read.next)
        );
    }

    #[test]
    fn complete_prefix_len_only_trims_incomplete_sequences() {
        assert_eq!(complete_prefix_len(b"abc"), 3);
        assert_eq!(complete_prefix_len("a☃".as_bytes()), 4);
        assert_eq!(complete_prefix_len(&"a☃".as_bytes()[..3]), 1);
        assert_eq!(complete_prefix_len(&[0xFF]), 1);
    }
}
