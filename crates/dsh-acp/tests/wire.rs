//! The raw wire: a client that sends a bad frame (bytes that are not UTF-8, a line that is not
//! JSON, a line far too long) gets an answer for it and keeps its connection, and every later
//! request is served as usual.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use common::{H, options};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

/// A client speaking raw newline-delimited JSON-RPC to a served bridge.
struct Raw {
    /// Taken while a test writes from another task.
    write: Option<WriteHalf<DuplexStream>>,
    read: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
}

impl Raw {
    async fn serve(h: &H) -> Raw {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(server_io);
        tokio::spawn(dsh_acp::serve(h.ctx.clone(), options(), sr, sw));
        let (cr, cw) = tokio::io::split(client_io);
        Raw {
            write: Some(cw),
            read: BufReader::new(cr).lines(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        let write = self.write.as_mut().unwrap();
        write.write_all(bytes).await.unwrap();
        write.flush().await.unwrap();
    }

    /// The next frame from the bridge.
    async fn next(&mut self) -> Value {
        let line = self
            .read
            .next_line()
            .await
            .unwrap()
            .expect("the bridge hung up");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends `initialize` with id `id`, the `_meta` note carrying `note` raw.
    async fn initialize(&mut self, id: u64, note: &[u8]) {
        let mut frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":1,"clientCapabilities":{{}},"_meta":{{"note":""#
        )
        .into_bytes();
        frame.extend_from_slice(note);
        frame.extend_from_slice(b"\"}}}\n");
        self.send(&frame).await;
    }

    /// Asserts the next frame answers request `id` with a result.
    async fn expect_result(&mut self, id: u64) {
        let answer = self.next().await;
        assert_eq!(answer["id"], json!(id), "{answer}");
        assert!(answer.get("result").is_some(), "{answer}");
    }

    /// Asserts the next frame is a JSON-RPC parse error; returns its message.
    async fn expect_parse_error(&mut self) -> String {
        let answer = self.next().await;
        assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
        answer["error"].to_string()
    }
}

#[tokio::test]
async fn a_frame_with_invalid_utf8_is_still_answered_and_the_connection_lives_on() {
    let h = H::new().await;
    let mut raw = Raw::serve(&h).await;
    raw.initialize(1, b"caf\xe9 \xff").await;
    raw.expect_result(1).await;
    raw.initialize(2, b"plain").await;
    raw.expect_result(2).await;
}

#[tokio::test]
async fn a_frame_that_is_not_json_gets_a_parse_error_and_the_connection_lives_on() {
    let h = H::new().await;
    let mut raw = Raw::serve(&h).await;
    raw.send(b"{this is not json\n").await;
    raw.expect_parse_error().await;
    // Blank lines and CRLF endings are tolerated, not answered.
    raw.send(b"\n  \r\n").await;
    raw.initialize(3, b"after").await;
    raw.expect_result(3).await;
}

#[tokio::test]
async fn an_overlong_frame_is_dropped_with_a_parse_error_saying_so_and_the_next_is_served() {
    let h = H::new().await;
    let mut raw = Raw::serve(&h).await;
    // The bridge must neither buffer this line nor end the connection over it. The writer runs
    // beside the reader: the bridge answers only after the line's newline.
    let writer = {
        let mut frame = vec![b'x'; dsh_acp::MAX_FRAME_BYTES + 1];
        frame.push(b'\n');
        let mut raw_write = raw.write.take().unwrap();
        tokio::spawn(async move {
            raw_write.write_all(&frame).await.unwrap();
            raw_write
        })
    };
    let error = raw.expect_parse_error().await;
    assert!(error.contains("longer than"), "{error}");
    raw.write = Some(writer.await.unwrap());
    raw.initialize(4, b"next").await;
    raw.expect_result(4).await;
}
