//! The Responses route over real TCP against the mock server.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{KEY, assemble, collect, error, finish};
use dsh_llm::{
    CallId, ContentBlock, FailureCode, FinishReason, GenerateOptions, Llm, LlmCallConfig, Message,
    StreamChunk,
};
use dsh_llm_http::SseParser;
use dsh_llm_http::WireTranslator;
use dsh_llm_openai::{ApiKeySource, OpenAiAdapterConfig, ResponsesAdapter, ResponsesTranslator};
use dsh_testkit::responses::ResponseStream;
use dsh_testkit::{MockResponse, MockServer, SseFrame, split_reads};
use futures::StreamExt;
use proptest::prelude::*;

fn llm(server: &MockServer) -> Llm {
    let llm = Llm::new();
    let config = OpenAiAdapterConfig::openai_compatible(server.url(), ApiKeySource::value(KEY))
        .with_route("openai");
    ResponsesAdapter::new(config)
        .unwrap()
        .register(&llm)
        .unwrap();
    llm
}

fn options(messages: Vec<Message>) -> GenerateOptions {
    let mut o = GenerateOptions::new(LlmCallConfig::new("openai", "o4-mini"));
    o.messages = messages.into_iter().map(Arc::new).collect();
    o.system = Some("be brief".into());
    o
}

#[tokio::test]
async fn text_streams_from_the_responses_endpoint_with_store_false() {
    let server = MockServer::start();
    server.push(MockResponse::responses_text("Hello there"));
    let chunks = collect(llm(&server).stream(options(vec![Message::user_text("hi")]))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert_eq!(
        assemble(&chunks).message("openai", "o4-mini").text(),
        "Hello there"
    );
    let request = &server.requests()[0];
    assert!(request.path.ends_with("/responses"), "{}", request.path);
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.body["store"], false);
    assert_eq!(request.body["instructions"], "be brief");
    assert_eq!(request.body["input"][0]["content"][0]["type"], "input_text");
}

#[tokio::test]
async fn parallel_calls_and_reasoning_items_are_passed_back_on_the_next_step() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ResponseStream::start()
            .reasoning("rs_1", "list then read", "ENCRYPTED-1")
            .function_call("call_1", "bash", r#"{"command":"ls"}"#, 5)
            .function_call("call_2", "read", r#"{"path":"a"}"#, 5)
            .completed(50, 40, 9)
            .build(),
    ));
    server.push(MockResponse::responses_text("done"));
    let llm = llm(&server);
    let chunks = collect(llm.stream(options(vec![Message::user_text("go")]))).await;
    assert_eq!(finish(&chunks), FinishReason::ToolCalls);
    let assistant = assemble(&chunks).message("openai", "o4-mini");
    assert_eq!(assistant.tool_calls().count(), 2);
    let usage = chunks.iter().find_map(|c| match c {
        StreamChunk::Usage { usage } => Some(usage.clone()),
        _ => None,
    });
    assert_eq!(usage.unwrap().cache_read_tokens, Some(40));
    let history = vec![
        Message::user_text("go"),
        assistant,
        Message::tool_result(CallId::new("call_1"), vec![ContentBlock::text("a")], false),
        Message::tool_result(CallId::new("call_2"), vec![ContentBlock::text("b")], false),
    ];
    let chunks = collect(llm.stream(options(history))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let input = server.requests()[1].body["input"].clone();
    let kinds: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "ENCRYPTED-1");
}

#[tokio::test]
async fn errors_are_classified_and_never_leak_the_key() {
    let cases = [
        (
            MockResponse::error_json(
                400,
                "Your input exceeds the context window",
                "invalid_request_error",
                Some("context_length_exceeded"),
            ),
            FailureCode::ContextWindowExceeded,
        ),
        (
            MockResponse::error_json(
                429,
                "Rate limit reached",
                "requests",
                Some("rate_limit_exceeded"),
            )
            .with_retry_after("3"),
            FailureCode::RateLimit,
        ),
        (
            MockResponse::error_json(
                401,
                &format!("Incorrect API key {KEY}"),
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
            FailureCode::Auth,
        ),
        (
            MockResponse::error(503, "upstream down"),
            FailureCode::Server,
        ),
    ];
    for (response, code) in cases {
        let server = MockServer::start();
        server.push(response);
        let chunks = collect(llm(&server).stream(options(vec![Message::user_text("x")]))).await;
        let failure = error(&chunks);
        assert_eq!(failure.code, code, "{failure:?}");
        assert!(!failure.message.contains(KEY), "{}", failure.message);
    }
}

#[tokio::test]
async fn cancel_mid_stream_is_aborted_and_disconnects() {
    let server = MockServer::start();
    let (response, hold) = MockResponse::responses_text("never done").hold_after(3);
    server.push(response);
    let llm = llm(&server);
    let opts = options(vec![Message::user_text("x")]);
    let cancel = opts.cancel.clone();
    let mut stream = llm.stream(opts);
    while let Some(chunk) = stream.next().await {
        if matches!(chunk, StreamChunk::TextDelta { .. }) {
            break;
        }
    }
    hold.reached().await;
    cancel.cancel();
    let rest = collect(stream).await;
    match finish(&rest) {
        FinishReason::Aborted { failure } => assert_eq!(failure.code, FailureCode::Aborted),
        other => panic!("expected aborted, got {other:?}"),
    }
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        server.client_disconnected(),
    )
    .await
    .expect("the server observed the disconnect");
}

fn translate(bytes: &[u8], cuts: &[usize]) -> Vec<StreamChunk> {
    let mut parser = SseParser::new();
    let mut translator = ResponsesTranslator::new();
    let (mut events, mut out) = (Vec::new(), std::collections::VecDeque::new());
    for read in split_reads(bytes, cuts) {
        parser.feed(read, &mut events).unwrap();
        for e in events.drain(..) {
            translator.on_event(&e.data, &mut out).unwrap();
        }
    }
    out.into()
}

proptest! {
    #[test]
    fn read_boundaries_do_not_change_the_chunks(cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        let bytes: Vec<u8> = ResponseStream::start()
            .reasoning("rs", "thinking ünïcödé", "E")
            .text("Hello, wörld")
            .function_call("c", "bash", r#"{"command":"echo hi"}"#, 4)
            .completed(1, 0, 1)
            .build()
            .iter()
            .flat_map(SseFrame::to_bytes)
            .collect();
        prop_assert_eq!(translate(&bytes, &cuts), translate(&bytes, &[]));
    }
}
