//! The mock server over real TCP.

use std::io::{Read, Write};
use std::time::Duration;

use dsh_testkit::sse::ChatStream;
use dsh_testkit::{MockResponse, MockServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw HTTP/1.1 exchange from a plain blocking socket: the server must not depend on the
/// client's runtime (a test may block on a child process while the server serves it).
fn blocking_post(server: &MockServer, path: &str, body: &Value) -> String {
    let mut socket = std::net::TcpStream::connect(server.addr()).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set a read deadline");
    let body = body.to_string();
    write!(
        socket,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut answer = String::new();
    socket.read_to_string(&mut answer).expect("read the answer");
    answer
}

#[test]
fn serves_chat_completions_under_any_prefix_to_a_blocking_client() {
    let server = MockServer::start();
    server.push(MockResponse::text("hi"));
    server.push(MockResponse::text("again"));
    let answer = blocking_post(&server, "/chat/completions", &json!({"messages": []}));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("text/event-stream") && answer.contains("data: [DONE]"));
    let answer = blocking_post(
        &server,
        "/v1/chat/completions?x=1",
        &json!({"messages": []}),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""content":"agai""#));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn unscripted_requests_and_unknown_routes_get_clear_errors() {
    let server = MockServer::start();
    let answer = blocking_post(&server, "/chat/completions", &json!({"messages": []}));
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert!(answer.contains("no scripted response left"));
    let answer = blocking_post(&server, "/embeddings", &json!({}));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

#[test]
fn a_tool_call_without_exactly_one_result_is_rejected_and_recorded() {
    let server = MockServer::start();
    server.push(MockResponse::text("unused"));
    let history = json!({"messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]});
    let answer = blocking_post(&server, "/chat/completions", &history);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(server.violations().len(), 1);
    assert!(server.violations()[0].contains("c2"));
    assert_eq!(server.responses_left(), 1);
}

#[tokio::test]
async fn a_held_stream_observes_the_client_going_away() {
    let server = MockServer::start();
    let frames = ChatStream::new("m")
        .role()
        .text("hello")
        .finish("stop")
        .done()
        .build();
    let (response, hold) = MockResponse::sse(frames).hold_after(2);
    server.push(response);
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = r#"{"messages":[]}"#;
    socket
        .write_all(
            format!(
                "POST /chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    hold.reached().await;
    let mut some = [0u8; 64];
    assert!(socket.read(&mut some).await.unwrap() > 0);
    drop(socket);
    tokio::time::timeout(Duration::from_secs(30), server.client_disconnected())
        .await
        .expect("the server saw the disconnect");
    assert_eq!(server.disconnects(), 1);
}

#[test]
fn tool_call_and_reasoning_conveniences_produce_well_formed_streams() {
    let server = MockServer::start();
    server.push(MockResponse::tool_calls([
        ("call_1", "bash", r#"{"command":"ls -la"}"#),
        ("call_2", "read", r#"{"path":"a"}"#),
    ]));
    server.push(MockResponse::reasoning_then_text("hmm", "ok"));
    let answer = blocking_post(&server, "/chat/completions", &json!({"messages": []}));
    assert!(
        answer.contains(r#""finish_reason":"tool_calls""#),
        "{answer}"
    );
    assert!(answer.contains(r#""index":1,"id":"call_2""#), "{answer}");
    let answer = blocking_post(&server, "/chat/completions", &json!({"messages": []}));
    assert!(answer.contains(r#""reasoning_content":"hmm""#), "{answer}");
    assert!(answer.contains("prompt_cache_hit_tokens"), "{answer}");
}

#[tokio::test]
async fn a_response_held_open_sends_its_bytes_then_neither_ends_nor_closes() {
    let server = MockServer::start();
    let head =
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 1000000\r\n\r\n";
    let (response, hold) = MockResponse::raw(format!("{head}<html>partial")).hold_open();
    server.push(response);
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = r#"{"messages":[]}"#;
    socket
        .write_all(
            format!(
                "POST /chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    hold.reached().await;
    // Everything before the hold has been flushed; the connection is still open.
    let mut received = Vec::new();
    while !received.ends_with(b"<html>partial") {
        let mut some = [0u8; 256];
        let n = socket.read(&mut some).await.unwrap();
        assert!(n > 0, "the server closed a held response");
        received.extend_from_slice(&some[..n]);
    }
    assert_eq!(server.disconnects(), 0);
    drop(socket);
    tokio::time::timeout(Duration::from_secs(30), server.client_disconnected())
        .await
        .expect("the server saw the disconnect");
}
