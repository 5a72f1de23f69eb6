//! The wire under the protocol: newline-delimited JSON-RPC frames in, one line per frame out.
//!
//! The SDK's own byte-stream transport ends the whole connection on the first line that is not
//! valid UTF-8, and buffers a line of any length (echoing a malformed one back whole in its
//! parse error). One bad frame from a client must never take every session down, so the bridge
//! reads frames itself:
//! - bytes that are not UTF-8 are replaced with U+FFFD, so the frame still parses (or gets the
//!   ordinary `-32700` answer) and the request keeps its id;
//! - a frame longer than [`MAX_FRAME_BYTES`] is skipped up to its newline without being
//!   buffered, and the client gets a `-32700` parse error saying so;
//! - blank lines (and a `\r` before the newline) are ignored.

use std::io;

use agent_client_protocol::Lines;
use futures::{Sink, SinkExt, Stream};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio_util::codec::{FramedWrite, LinesCodec, LinesCodecError};

use crate::hangup::{Hangup, WatchedFrames, WatchedInput, WatchedOutput, WatchedSink};

/// The longest frame the bridge accepts: far beyond any prompt a model could take (images and
/// embedded resources are not advertised), small enough that a runaway client cannot make the
/// bridge buffer without bound.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// The client's frames, one `String` per non-blank line. Ends at end of input; an error is
/// only a failed read.
pub(crate) fn incoming<R>(input: R, limit: usize) -> impl Stream<Item = io::Result<String>> + Send
where
    R: AsyncRead + Send + 'static,
{
    futures::stream::unfold(
        Some(BufReader::new(Box::pin(input))),
        move |reader| async move {
            let mut reader = reader?;
            match next_frame(&mut reader, limit).await {
                Ok(Some(frame)) => Some((Ok(frame), Some(reader))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        },
    )
}

/// Our frames, each written as one line.
pub(crate) fn outgoing<W>(output: W) -> impl Sink<String, Error = io::Error> + Send
where
    W: AsyncWrite + Send + 'static,
{
    let lines = FramedWrite::new(Box::pin(output), LinesCodec::new());
    SinkExt::<String>::sink_map_err(lines, |e| match e {
        LinesCodecError::Io(e) => e,
        // Only decoding has a length limit; encoding fails with I/O errors alone.
        other => io::Error::other(other),
    })
}

/// The next non-blank frame, or `None` at end of input.
async fn next_frame<R>(reader: &mut R, limit: usize) -> io::Result<Option<String>>
where
    R: AsyncBufRead + Unpin,
{
    loop {
        let Some(line) = next_line(reader, limit).await? else {
            return Ok(None);
        };
        let frame = match line {
            Line::Complete(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => {
                    tracing::warn!("an ACP frame is not valid UTF-8; invalid bytes replaced");
                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                }
            },
            Line::TooLong(len) => {
                tracing::warn!(len, limit, "an ACP frame is too long; dropped");
                // Not JSON, so the client gets a parse error carrying this explanation.
                format!("<frame of {len} bytes dropped: longer than the {limit}-byte limit>")
            }
        };
        if !frame.trim().is_empty() {
            return Ok(Some(frame));
        }
    }
}

enum Line {
    /// The line's bytes without its `\n` (or `\r\n`).
    Complete(Vec<u8>),
    /// A line longer than the limit (its length), consumed without being kept.
    TooLong(usize),
}

/// Reads one line; `None` at end of input. A last line without a newline still counts.
async fn next_line<R>(reader: &mut R, limit: usize) -> io::Result<Option<Line>>
where
    R: AsyncBufRead + Unpin,
{
    // One byte of slack: a `\r` before the newline is counted now and stripped at the end.
    let keep_limit = limit.saturating_add(1);
    let mut kept = Vec::new();
    let mut len = 0usize;
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if !any {
                return Ok(None);
            }
            break;
        }
        any = true;
        let (part, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        len += part.len();
        if len <= keep_limit {
            kept.extend_from_slice(part);
        } else if !kept.is_empty() {
            // Over the limit: stop keeping anything, just count until the newline.
            kept = Vec::new();
        }
        reader.consume(used);
        if done {
            break;
        }
    }
    if len <= keep_limit && kept.last() == Some(&b'\r') {
        kept.pop();
        len -= 1;
    }
    Ok(Some(if len > limit {
        Line::TooLong(len)
    } else {
        Line::Complete(kept)
    }))
}

/// The transport of one connection: `input` and `output` framed as newline-delimited
/// JSON-RPC, both watched by `hangup` so a client that goes away is told apart from a broken
/// connection.
pub(crate) fn watched<R, W>(
    input: R,
    output: W,
    hangup: Hangup,
) -> Lines<impl Sink<String, Error = io::Error> + Send, impl Stream<Item = io::Result<String>> + Send>
where
    R: AsyncRead + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    Lines::new(
        outgoing(WatchedOutput::new(output, hangup.clone())),
        incoming(WatchedInput::new(input, hangup), MAX_FRAME_BYTES),
    )
}

/// The transport of one connection over a message transport (a WebSocket): each item is one
/// whole frame already, so no line framing applies; both directions are watched by `hangup`.
pub(crate) fn watched_frames<I, O>(
    incoming: I,
    outgoing: O,
    hangup: Hangup,
) -> Lines<impl Sink<String, Error = io::Error> + Send, impl Stream<Item = io::Result<String>> + Send>
where
    I: Stream<Item = io::Result<String>> + Send + 'static,
    O: Sink<String, Error = io::Error> + Send + 'static,
{
    Lines::new(
        WatchedSink::new(outgoing, hangup.clone()),
        WatchedFrames::new(incoming, hangup),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    async fn frames(input: &'static [u8], limit: usize) -> Vec<String> {
        incoming(input, limit)
            .map(|f| f.unwrap())
            .collect::<Vec<_>>()
            .await
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_and_later_frames_still_arrive() {
        let got = frames(b"{\"a\":\"\xff\"}\n{\"b\":1}\n", 1024).await;
        assert_eq!(got, ["{\"a\":\"\u{fffd}\"}", "{\"b\":1}"]);
    }

    #[tokio::test]
    async fn an_overlong_frame_is_dropped_whole_and_the_next_one_is_read() {
        let got = frames(b"0123456789\n{\"b\":1}\r\n\n  \n{\"c\":2}", 8).await;
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].contains("10 bytes dropped"), "{got:?}");
        assert!(serde_json::from_str::<serde_json::Value>(&got[0]).is_err());
        assert_eq!(got[1], "{\"b\":1}");
        assert_eq!(got[2], "{\"c\":2}");
    }

    #[tokio::test]
    async fn a_frame_of_exactly_the_limit_is_kept() {
        assert_eq!(frames(b"12345\r\n", 5).await, ["12345"]);
    }
}
