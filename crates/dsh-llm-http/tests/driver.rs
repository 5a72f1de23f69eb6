//! The streaming driver over real TCP against the mock server, with a minimal wire format of
//! its own (each event's data is text; `END` finishes), so what is pinned here is the driver's
//! share of every adapter: translation order, error statuses, redaction, odd answers.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::time::Duration;

use dsh_llm::{FailureCode, FinishReason, LlmFailure, StreamChunk};
use dsh_llm_http::{
    ApiKeySource, RequestLog, SseRequest, WireTranslator, endpoint_url, http_client, key_header,
    stream_sse,
};
use dsh_testkit::{MockResponse, MockServer, SseFrame, bounded};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-http-test-SECRET-9137";

/// Each event's data is a text delta; `END` finishes; an event `{"error": …}` is an error.
struct Lines;

impl WireTranslator for Lines {
    fn on_event(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamChunk>,
    ) -> Result<bool, LlmFailure> {
        if data.starts_with(r#"{"error""#) {
            return Err(LlmFailure::new(FailureCode::Server, "the format's error"));
        }
        if data == "END" {
            out.push_back(StreamChunk::Finish {
                reason: FinishReason::Stop,
                replay_state: None,
            });
            return Ok(true);
        }
        out.push_back(StreamChunk::TextDelta {
            index: 0,
            text: data.to_owned(),
        });
        Ok(false)
    }

    fn ended_early(&self) -> LlmFailure {
        LlmFailure::new(FailureCode::StreamClosed, "no END")
    }
}

/// One request to `server`, with the test key, classified by a classifier that echoes the key
/// (as careless proxies do) so redaction shows.
fn request(server: &MockServer) -> SseRequest {
    let endpoint = endpoint_url("test", &server.url(), "/chat/completions").unwrap();
    let key = ApiKeySource::value(KEY).resolve().unwrap();
    let body = br#"{"messages":[]}"#.to_vec();
    let log = RequestLog::sent("test", &endpoint, "m", &body, key.as_ref());
    let request = http_client()
        .unwrap()
        .post(&endpoint)
        .header(
            "authorization",
            key_header("Bearer ", key.as_ref().unwrap()).unwrap(),
        )
        .body(body);
    SseRequest {
        request,
        endpoint,
        key,
        idle: Duration::from_secs(30),
        max_bytes: 1 << 20,
        cancel: CancellationToken::new(),
        classify: Box::new(|status, _, body| {
            LlmFailure::new(
                FailureCode::Http(status),
                format!("{} (key {KEY})", String::from_utf8_lossy(body)),
            )
        }),
        log,
    }
}

async fn run(server: &MockServer) -> Vec<Result<StreamChunk, LlmFailure>> {
    bounded(stream_sse(request(server), Lines).collect()).await
}

fn failure(items: &[Result<StreamChunk, LlmFailure>]) -> &LlmFailure {
    match items.last() {
        Some(Err(failure)) => failure,
        other => panic!("the stream did not end in a failure: {other:?}"),
    }
}

#[tokio::test]
async fn events_are_translated_in_order_and_the_finish_ends_the_stream() {
    let server = MockServer::start();
    server.push(MockResponse::sse([
        SseFrame::Data("a".into()),
        SseFrame::Data("b".into()),
        SseFrame::Data("END".into()),
        SseFrame::Data("after the end".into()),
    ]));
    let items = run(&server).await;
    let texts: Vec<_> = items
        .iter()
        .map(|item| match item {
            Ok(StreamChunk::TextDelta { text, .. }) => text.clone(),
            Ok(StreamChunk::Finish { .. }) => "finish".to_owned(),
            other => panic!("unexpected item: {other:?}"),
        })
        .collect();
    assert_eq!(texts, ["a", "b", "finish"]);
    let sent = &server.requests()[0];
    assert_eq!(
        sent.header("authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
}

#[tokio::test]
async fn an_error_status_is_classified_and_the_key_is_redacted_from_it() {
    let server = MockServer::start();
    server.push(MockResponse::error(418, "teapot"));
    let items = run(&server).await;
    assert_eq!(items.len(), 1, "{items:?}");
    let f = failure(&items);
    assert_eq!(f.code, FailureCode::Http(418), "{f}");
    assert!(f.message.contains("teapot (key ***)"), "{f}");
    assert!(!f.message.contains(KEY), "{f}");
}

#[tokio::test]
async fn a_json_document_answering_a_stream_request_says_the_server_did_not_stream() {
    let server = MockServer::start();
    // Declared as JSON.
    server.push(MockResponse::error(200, r#"{"answer":"hi"}"#));
    let f = failure(&run(&server).await).clone();
    assert_eq!(f.code, FailureCode::MalformedResponse, "{f}");
    assert!(f.message.contains("did not stream"), "{f}");
    // Sent without a content type: recognised once the body ends without an event.
    let document = r#"{"answer":"hi"}"#;
    server.push(MockResponse::raw(format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{document}",
        document.len()
    )));
    let f = failure(&run(&server).await).clone();
    assert!(f.message.contains("did not stream"), "{f}");
    // The format's error object is reported as that error.
    server.push(MockResponse::error(200, r#"{"error":"overloaded"}"#));
    let f = failure(&run(&server).await).clone();
    assert_eq!(f.code, FailureCode::Server, "{f}");
}

#[test]
fn a_base_url_with_credentials_a_query_or_another_scheme_is_refused() {
    for (base, why) in [
        ("https://user:sk-secret@example.invalid", "credentials"),
        ("https://example.invalid/?k=v", "query"),
        ("ftp://example.invalid", "http(s)"),
    ] {
        let e = endpoint_url("r", base, "/x").unwrap_err();
        assert!(e.to_string().contains(why), "{base}: {e}");
        assert!(!e.to_string().contains("sk-secret"), "{e}");
    }
    assert_eq!(
        endpoint_url("r", " http://h:1/v1/ ", "/x").unwrap(),
        "http://h:1/v1/x"
    );
}
