//! The Anthropic adapter over real TCP against the mock server.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_llm::{
    BlockAssembler, ContentBlock, FailureCode, FinishReason, GenerateOptions, Llm, LlmCallConfig,
    LlmStream, Message, StreamChunk,
};
use dsh_llm_anthropic::{AnthropicAdapter, AnthropicConfig};
use dsh_llm_http::ApiKeySource;
use dsh_testkit::anthropic::MessageStream;
use dsh_testkit::{MockResponse, MockServer};
use futures::StreamExt;

const KEY: &str = "sk-ant-test-SECRET-77";
const DEADLINE: Duration = Duration::from_secs(30);

fn llm(server: &MockServer) -> Llm {
    let llm = Llm::new();
    let config = AnthropicConfig::new(server.url(), ApiKeySource::value(KEY));
    AnthropicAdapter::new(config)
        .unwrap()
        .register(&llm)
        .unwrap();
    llm
}

fn options(messages: Vec<Message>) -> GenerateOptions {
    let mut o = GenerateOptions::new(LlmCallConfig::new("anthropic", "claude-sonnet-4-5"));
    o.messages = messages.into_iter().map(Arc::new).collect();
    o.system = Some("You are terse.".into());
    o
}

async fn collect(stream: LlmStream) -> Vec<StreamChunk> {
    tokio::time::timeout(DEADLINE, stream.collect())
        .await
        .unwrap()
}

fn finish(chunks: &[StreamChunk]) -> FinishReason {
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason.clone(),
        other => panic!("last chunk is not a finish: {other:?}"),
    }
}

fn assemble(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut a = BlockAssembler::new();
    for c in chunks {
        a.push(c);
    }
    a
}

#[tokio::test]
async fn text_streams_with_the_anthropic_headers_and_cache_breakpoints() {
    let server = MockServer::start();
    server.push(MockResponse::anthropic_text("Hello there"));
    let chunks = collect(llm(&server).stream(options(vec![Message::user_text("hi")]))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    let message = assemble(&chunks).message("anthropic", "claude-sonnet-4-5");
    assert_eq!(message.text(), "Hello there");
    let request = &server.requests()[0];
    assert!(request.path.ends_with("/v1/messages"), "{}", request.path);
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert!(request.header("authorization").is_none());
    assert_eq!(request.body["stream"], true);
    assert_eq!(
        request.body["system"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(
        request.body["messages"][0]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
}

#[tokio::test]
async fn parallel_tool_calls_assemble_and_their_results_go_back_as_tool_result_blocks() {
    let server = MockServer::start();
    server.push(MockResponse::anthropic_tool_calls([
        ("toolu_1", "bash", r#"{"command":"ls -la"}"#),
        ("toolu_2", "read", r#"{"path":"README.md"}"#),
    ]));
    server.push(MockResponse::anthropic_text("done"));
    let llm = llm(&server);
    let chunks = collect(llm.stream(options(vec![Message::user_text("look")]))).await;
    assert_eq!(finish(&chunks), FinishReason::ToolCalls);
    let assistant = assemble(&chunks).message("anthropic", "claude-sonnet-4-5");
    let calls: Vec<_> = assistant
        .tool_calls()
        .map(|(id, name, args)| (id.as_str().to_owned(), name.to_owned(), args.to_owned()))
        .collect();
    assert_eq!(calls[0].0, "toolu_1");
    assert_eq!(calls[0].2, r#"{"command":"ls -la"}"#);
    assert_eq!(calls[1].1, "read");
    let results = calls.iter().map(|(id, _, _)| {
        Message::tool_result(
            dsh_llm::CallId::new(id.clone()),
            vec![ContentBlock::text("ok")],
            false,
        )
    });
    let mut history = vec![Message::user_text("look"), assistant];
    history.extend(results);
    let chunks = collect(llm.stream(options(history))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let second = &server.requests()[1].body["messages"];
    assert_eq!(second[2]["role"], "user");
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][1]["tool_use_id"], "toolu_2");
}

#[tokio::test]
async fn thinking_signatures_are_passed_back_on_the_next_request() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        MessageStream::start(10, 0)
            .thinking("I should list files", "SIG-abc")
            .tool_use("toolu_9", "bash", r#"{"command":"ls"}"#, 4)
            .stop("tool_use", 9)
            .build(),
    ));
    server.push(MockResponse::anthropic_text("ok"));
    let llm = llm(&server);
    let mut opts = options(vec![Message::user_text("go")]);
    opts.config.reasoning_effort = Some("low".into());
    let chunks = collect(llm.stream(opts)).await;
    let assistant = assemble(&chunks).message("anthropic", "claude-sonnet-4-5");
    assert_eq!(
        server.requests()[0].body["thinking"]["budget_tokens"],
        2_048
    );
    let history = vec![
        Message::user_text("go"),
        assistant,
        Message::tool_result(
            dsh_llm::CallId::new("toolu_9"),
            vec![ContentBlock::text("a")],
            false,
        ),
    ];
    let mut opts = options(history);
    opts.config.reasoning_effort = Some("low".into());
    collect(llm.stream(opts)).await;
    let replayed = &server.requests()[1].body["messages"][1]["content"];
    assert_eq!(replayed[0]["type"], "thinking");
    assert_eq!(replayed[0]["thinking"], "I should list files");
    assert_eq!(replayed[0]["signature"], "SIG-abc");
    assert_eq!(replayed[1]["type"], "tool_use");
}

#[tokio::test]
async fn error_classes_map_onto_dsh_codes_and_never_leak_the_key() {
    let cases = [
        (
            MockResponse::anthropic_error(529, "overloaded_error", "Overloaded"),
            FailureCode::Server,
        ),
        (
            MockResponse::anthropic_error(429, "rate_limit_error", "slow down")
                .with_retry_after("7"),
            FailureCode::RateLimit,
        ),
        (
            MockResponse::anthropic_error(
                400,
                "invalid_request_error",
                "prompt is too long: 250000 tokens > 200000 maximum",
            ),
            FailureCode::ContextWindowExceeded,
        ),
        (
            MockResponse::anthropic_error(401, "authentication_error", &format!("bad key {KEY}")),
            FailureCode::Auth,
        ),
    ];
    for (response, code) in cases {
        let server = MockServer::start();
        server.push(response);
        let chunks = collect(llm(&server).stream(options(vec![Message::user_text("x")]))).await;
        let FinishReason::Error { failure } = finish(&chunks) else {
            panic!("expected an error finish: {chunks:?}");
        };
        assert_eq!(failure.code, code, "{failure:?}");
        assert!(!failure.message.contains(KEY), "{}", failure.message);
        if code == FailureCode::RateLimit {
            assert_eq!(failure.provider_retry_after_ms, Some(7_000));
        }
    }
}

#[tokio::test]
async fn a_stream_that_ends_before_message_stop_is_stream_closed() {
    let server = MockServer::start();
    let frames = MessageStream::start(1, 0).text("partial").build();
    server.push(MockResponse::sse(frames));
    let chunks = collect(llm(&server).stream(options(vec![Message::user_text("x")]))).await;
    let FinishReason::Error { failure } = finish(&chunks) else {
        panic!("{chunks:?}");
    };
    assert_eq!(failure.code, FailureCode::StreamClosed);
}

#[tokio::test]
async fn a_plain_json_answer_says_the_server_did_not_stream_unless_it_is_an_error() {
    let server = MockServer::start();
    let message =
        r#"{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]}"#;
    server.push(MockResponse::error(200, message));
    let chunks = collect(llm(&server).stream(options(vec![Message::user_text("x")]))).await;
    let FinishReason::Error { failure } = finish(&chunks) else {
        panic!("{chunks:?}");
    };
    assert_eq!(failure.code, FailureCode::MalformedResponse, "{failure}");
    assert!(failure.message.contains("did not stream"), "{failure}");
    server.push(MockResponse::error(
        200,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    let chunks = collect(llm(&server).stream(options(vec![Message::user_text("x")]))).await;
    let FinishReason::Error { failure } = finish(&chunks) else {
        panic!("{chunks:?}");
    };
    assert_eq!(failure.code, FailureCode::Server, "{failure}");
}

#[tokio::test]
async fn cancel_mid_stream_is_aborted_and_the_server_sees_the_disconnect() {
    let server = MockServer::start();
    let (response, hold) = MockResponse::anthropic_text("never finished").hold_after(3);
    server.push(response);
    let llm = llm(&server);
    let opts = options(vec![Message::user_text("x")]);
    let cancel = opts.cancel.clone();
    let mut stream = llm.stream(opts);
    loop {
        match tokio::time::timeout(DEADLINE, stream.next()).await.unwrap() {
            Some(StreamChunk::BlockStart { .. }) => break,
            Some(StreamChunk::Finish { reason, .. }) => panic!("finished early: {reason:?}"),
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    hold.reached().await;
    cancel.cancel();
    let rest: Vec<StreamChunk> = tokio::time::timeout(DEADLINE, stream.collect())
        .await
        .unwrap();
    match finish(&rest) {
        FinishReason::Aborted { failure } => assert_eq!(failure.code, FailureCode::Aborted),
        other => panic!("expected aborted, got {other:?}"),
    }
    tokio::time::timeout(DEADLINE, server.client_disconnected())
        .await
        .expect("the server observed the disconnect");
}
