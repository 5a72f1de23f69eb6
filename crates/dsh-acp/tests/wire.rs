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

/// The same bridge over a message transport: every item is one frame (no line framing, so a
/// frame may hold newlines), answers come back as items, and the client going away (the
/// stream ending) is a hangup that tears the sessions down and returns `Ok`.
#[tokio::test]
async fn a_message_transport_carries_whole_frames_and_its_end_is_a_hangup() {
    use futures::StreamExt;

    let h = H::new().await;
    let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
    let (out_tx, mut out_rx) = futures::channel::mpsc::unbounded::<String>();
    let outgoing = futures::SinkExt::sink_map_err(out_tx, |_| {
        std::io::Error::from(std::io::ErrorKind::BrokenPipe)
    });
    let served = tokio::spawn(dsh_acp::serve_frames_until(
        h.ctx.clone(),
        options(),
        in_rx,
        outgoing,
        std::future::pending(),
    ));
    // Pretty-printed: a frame that spans lines is still one frame here.
    let initialize = serde_json::to_string_pretty(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}
    }))
    .unwrap();
    in_tx.unbounded_send(Ok(initialize)).unwrap();
    let answer: Value =
        serde_json::from_str(&dsh_testkit::bounded(out_rx.next()).await.unwrap()).unwrap();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], json!(1), "{answer}");
    let cwd = h.cwd.to_string_lossy().into_owned();
    in_tx
        .unbounded_send(Ok(json!({
            "jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []}
        })
        .to_string()))
        .unwrap();
    let answer: Value =
        serde_json::from_str(&dsh_testkit::bounded(out_rx.next()).await.unwrap()).unwrap();
    let id = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    assert!(h.agent(&id).is_some());
    drop(in_tx);
    dsh_testkit::bounded(served).await.unwrap().unwrap();
    assert!(h.agent(&id).is_none(), "the hangup disposed the session");
}
