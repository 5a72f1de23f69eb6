//! Streaming answers from the mock server over real TCP.

mod common;

use std::sync::Arc;

use common::*;
use dsh_llm::{
    BlockType, CallId, ContentBlock, FailureCode, FinishReason, Message, SessionId, StreamChunk,
    TokenUsage,
};
use dsh_testkit::sse::{ChatStream, usage_deepseek, usage_openai};
use dsh_testkit::{MockResponse, MockServer, SseFrame};
use serde_json::json;

#[tokio::test]
async fn text_answer_is_one_text_block_then_usage_then_stop() {
    let server = MockServer::start();
    server.push(MockResponse::text("Hello, world"));
    let llm = deepseek(&server);
    let mut opts = options("deepseek-v4-flash");
    opts.session_id = Some(SessionId::new("session-1"));
    opts.messages = vec![Arc::new(Message::user_text("hi"))];
    let chunks = run(&llm, opts).await;

    assert_eq!(
        chunks[0],
        StreamChunk::BlockStart {
            index: 0,
            block_type: BlockType::Text
        }
    );
    let n = chunks.len();
    assert_eq!(
        chunks[n - 3],
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("Hello, world")
        }
    );
    assert_eq!(
        chunks[n - 2],
        StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 10,
                output_tokens: 12,
                ..TokenUsage::default()
            }
        }
    );
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert_eq!(
        assemble(&chunks).blocks(),
        [ContentBlock::text("Hello, world")]
    );

    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(request.header("user-agent").unwrap().starts_with("dsh/"));
    assert_eq!(request.header("x-dsh-session-id"), Some("session-1"));
    assert_eq!(request.body["model"], "deepseek-v4-flash");
    assert_eq!(request.body["stream"], true);
    assert_eq!(
        request.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(
        request.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn base_url_path_prefix_and_trailing_slash_are_respected() {
    let server = MockServer::start();
    server.push(MockResponse::text("ok"));
    let llm = with_config(deepseek_config(&format!("{}/v1/", server.url())));
    let chunks = run(&llm, options("m")).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
}

#[tokio::test]
async fn reasoning_then_text_is_passed_back_on_the_next_request() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ChatStream::new("deepseek-v4-pro")
            .role_with_empty_reasoning()
            .reasoning("Let me think.")
            .text("Answer.")
            .finish_with_usage("stop", usage_deepseek(50, 9, 20, Some(4)))
            .done()
            .build(),
    ));
    server.push(MockResponse::text("second"));
    let llm = deepseek(&server);
    let user = Arc::new(Message::user_text("q"));
    let mut first = options("deepseek-v4-pro");
    first.messages = vec![user.clone()];
    let chunks = run(&llm, first).await;
    let assembled = assemble(&chunks);
    assert_eq!(
        assembled.blocks(),
        [
            ContentBlock::Reasoning {
                text: "Let me think.".into()
            },
            ContentBlock::text("Answer.")
        ]
    );
    assert_eq!(
        assembled.usage(),
        Some(&TokenUsage {
            input_tokens: 30,
            output_tokens: 9,
            cache_read_tokens: Some(20),
            cache_write_tokens: None,
            reasoning_tokens: Some(4)
        })
    );

    let mut second = options("deepseek-v4-pro");
    second.messages = vec![
        user,
        Arc::new(assembled.message("deepseek", "deepseek-v4-pro")),
        Arc::new(Message::user_text("more")),
    ];
    assert_eq!(finish(&run(&llm, second).await), FinishReason::Stop);
    assert_eq!(
        server.requests()[1].messages()[1],
        json!({"role": "assistant", "content": "Answer.", "reasoning_content": "Let me think."})
    );
}

fn interleaved_tool_calls() -> Vec<SseFrame> {
    ChatStream::new("m")
        .role()
        .text("Running.")
        .tool_call_start(0, "call_a", "bash", "{\"cmd\"")
        .tool_call_start(1, "call_b", "read", "")
        .tool_call_args(1, "{\"path\":")
        .tool_call_args(0, ":\"ls")
        .tool_call_args(1, "\"a.txt\"}")
        .tool_call_args(0, " -la\"}")
        .finish("tool_calls")
        .usage(10, 20)
        .done()
        .build()
}

fn call(id: &str, name: &str, arguments: &str) -> ContentBlock {
    ContentBlock::ToolCall {
        id: CallId::new(id),
        name: name.into(),
        arguments: arguments.into(),
    }
}

#[tokio::test]
async fn interleaved_tool_calls_split_over_many_chunks_assemble_by_wire_index() {
    let server = MockServer::start();
    server.push(MockResponse::sse(interleaved_tool_calls()));
    server.push(MockResponse::text("done"));
    let llm = deepseek(&server);
    let chunks = run(&llm, options("m")).await;
    assert_eq!(finish(&chunks), FinishReason::ToolCalls);
    let starts: Vec<(u32, BlockType)> = chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::BlockStart { index, block_type } => Some((*index, *block_type)),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            (0, BlockType::Text),
            (1, BlockType::ToolCall),
            (2, BlockType::ToolCall)
        ]
    );
    let blocks = assemble(&chunks).blocks();
    assert_eq!(
        blocks,
        [
            ContentBlock::text("Running."),
            call("call_a", "bash", r#"{"cmd":"ls -la"}"#),
            call("call_b", "read", r#"{"path":"a.txt"}"#),
        ]
    );

    let mut next = options("m");
    next.messages = vec![
        Arc::new(Message::assistant(blocks, "deepseek", "m")),
        Arc::new(Message::tool_result(
            CallId::new("call_a"),
            vec![ContentBlock::text("file")],
            false,
        )),
        Arc::new(Message::tool_result(CallId::new("call_b"), vec![], true)),
    ];
    assert_eq!(finish(&run(&llm, next).await), FinishReason::Stop);
    assert!(server.violations().is_empty());
    let sent = server.requests()[1].messages().to_vec();
    assert_eq!(
        sent,
        [
            json!({"role": "assistant", "content": "Running.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"ls -la\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "call_a", "content": "file"}),
            json!({"role": "tool", "tool_call_id": "call_b", "content": "(no output)"}),
        ]
    );
}

#[tokio::test]
async fn a_history_with_an_unanswered_tool_call_is_rejected_as_invalid_request() {
    let server = MockServer::start();
    server.push(MockResponse::text("unused"));
    let llm = deepseek(&server);
    let mut opts = options("m");
    opts.messages = vec![Arc::new(Message::assistant(
        vec![call("call_a", "bash", "{}")],
        "deepseek",
        "m",
    ))];
    let failure = error(&run(&llm, opts).await);
    assert_eq!(failure.code, FailureCode::InvalidRequest);
    assert_eq!(failure.status, Some(400));
    assert_eq!(server.violations().len(), 1);
}

#[tokio::test]
async fn usage_is_taken_from_the_finish_chunk_or_a_later_trailing_chunk_whichever_is_last() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ChatStream::new("m")
            .text("a")
            .finish_with_usage("stop", usage_openai(100, 5, Some(40), Some(2)))
            .done()
            .build(),
    ));
    server.push(MockResponse::sse(
        ChatStream::new("m")
            .text("a")
            .finish_with_usage("stop", usage_openai(100, 5, Some(40), Some(2)))
            .usage_value(usage_deepseek(120, 6, 50, None))
            .done()
            .build(),
    ));
    let llm = deepseek(&server);
    for expected in [
        TokenUsage {
            input_tokens: 60,
            output_tokens: 5,
            cache_read_tokens: Some(40),
            cache_write_tokens: None,
            reasoning_tokens: Some(2),
        },
        TokenUsage {
            input_tokens: 70,
            output_tokens: 6,
            cache_read_tokens: Some(50),
            cache_write_tokens: None,
            reasoning_tokens: None,
        },
    ] {
        let chunks = run(&llm, options("m")).await;
        let usages: Vec<&StreamChunk> = chunks
            .iter()
            .filter(|c| matches!(c, StreamChunk::Usage { .. }))
            .collect();
        assert_eq!(usages, [&StreamChunk::Usage { usage: expected }]);
        assert!(matches!(
            chunks[chunks.len() - 2],
            StreamChunk::Usage { .. }
        ));
    }
}

#[tokio::test]
async fn keep_alive_comments_and_crlf_framing_do_not_disturb_the_stream() {
    let server = MockServer::start();
    let chunk = ChatStream::new("m").chunk_value(
        json!([{"index": 0, "delta": {"content": "split"}, "finish_reason": null}]),
        None,
    );
    let data = format!("data: {chunk}\r\n\r\n");
    let (a, b) = data.as_bytes().split_at(17);
    // One event split across two HTTP chunks, CRLF line ends, comments around it.
    server.push(MockResponse::sse(
        ChatStream::new("m")
            .comment("keep-alive")
            .frame(SseFrame::Raw(a.to_vec()))
            .frame(SseFrame::Raw(b.to_vec()))
            .comment("keep-alive")
            .finish("stop")
            .done()
            .build(),
    ));
    let llm = deepseek(&server);
    let chunks = run(&llm, options("m")).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert_eq!(assemble(&chunks).blocks(), [ContentBlock::text("split")]);
}

#[tokio::test]
async fn length_finish_is_max_tokens_and_its_tool_calls_are_dropped() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ChatStream::new("m")
            .text("partial")
            .tool_call_start(0, "call_a", "bash", "{\"cm")
            .finish("length")
            .done()
            .build(),
    ));
    let llm = deepseek(&server);
    let chunks = run(&llm, options("m")).await;
    assert_eq!(finish(&chunks), FinishReason::MaxTokens);
    assert_eq!(assemble(&chunks).blocks(), [ContentBlock::text("partial")]);
}
