//! The scripted adapter, driven through the real `Llm` runtime.

use std::sync::Arc;

use dsh_llm::{
    CallId, ContentBlock, FailureCode, FinishReason, GenerateOptions, Llm, LlmCallConfig,
    LlmStream, Message, StreamChunk,
};
use dsh_testkit::{Gate, Script, ScriptedAdapter};
use futures::StreamExt;

fn setup(scripts: impl IntoIterator<Item = Script>) -> (Llm, Arc<ScriptedAdapter>) {
    let llm = Llm::new();
    let adapter = Arc::new(ScriptedAdapter::with_scripts(scripts));
    adapter.register(&llm).expect("first registration");
    (llm, adapter)
}

fn options() -> GenerateOptions {
    GenerateOptions::new(LlmCallConfig::new(ScriptedAdapter::ROUTE, "m"))
}

async fn collect(stream: LlmStream) -> Vec<StreamChunk> {
    stream.collect().await
}

fn finish_of(chunks: &[StreamChunk]) -> &FinishReason {
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason,
        other => panic!("no finish: {other:?}"),
    }
}

#[tokio::test]
async fn text_script_for_abc_is_seven_chunks_ending_in_stop() {
    let (llm, _) = setup([Script::text("abc")]);
    let chunks = collect(llm.stream(options())).await;
    assert_eq!(chunks.len(), 7);
    assert_eq!(finish_of(&chunks), &FinishReason::Stop);
    assert!(matches!(chunks[5], StreamChunk::Usage { .. }));
}

#[tokio::test]
async fn scripts_are_consumed_in_order_and_requests_recorded() {
    let (llm, adapter) = setup([
        Script::tool_call("c1", "bash", r#"{"cmd":"ls"}"#),
        Script::reasoning_then_text("hm", "done"),
    ]);
    let mut first = options();
    first.system = Some("sys".into());
    let chunks = collect(llm.stream(first)).await;
    assert_eq!(finish_of(&chunks), &FinishReason::ToolCalls);
    let mut second = options();
    second.messages = vec![
        Arc::new(Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new("c1"),
                name: "bash".into(),
                arguments: "{}".into(),
            }],
            "scripted",
            "m",
        )),
        Arc::new(Message::tool_result(
            CallId::new("c1"),
            vec![ContentBlock::text("ok")],
            false,
        )),
    ];
    let chunks = collect(llm.stream(second)).await;
    assert_eq!(finish_of(&chunks), &FinishReason::Stop);
    let requests = adapter.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].system.as_deref(), Some("sys"));
    assert_eq!(requests[1].messages.len(), 2);
    assert!(adapter.violations().is_empty());
}

#[tokio::test]
async fn no_script_left_finishes_with_an_error_that_says_so() {
    let (llm, _) = setup([]);
    let chunks = collect(llm.stream(options())).await;
    assert_eq!(chunks.len(), 1);
    let failure = finish_of(&chunks).failure().unwrap();
    assert!(failure.message.contains("no script left"), "{failure}");
}

#[tokio::test]
async fn an_unanswered_tool_call_is_a_violation_and_fails_the_request() {
    let (llm, adapter) = setup([Script::text("never")]);
    let mut opts = options();
    opts.messages = vec![Arc::new(Message::assistant(
        vec![ContentBlock::ToolCall {
            id: CallId::new("c1"),
            name: "bash".into(),
            arguments: "{}".into(),
        }],
        "scripted",
        "m",
    ))];
    let chunks = collect(llm.stream(opts)).await;
    assert_eq!(
        finish_of(&chunks).failure().unwrap().code,
        FailureCode::InvalidRequest
    );
    assert_eq!(adapter.violations().len(), 1);
    assert_eq!(adapter.scripts_left(), 1);
}

#[tokio::test]
async fn partial_then_hang_waits_for_cancel_and_finishes_aborted() {
    let (llm, adapter) = setup([Script::partial_then_hang("part")]);
    let opts = options();
    let cancel = opts.cancel.clone();
    let mut stream = llm.stream(opts);
    let mut seen = Vec::new();
    // BlockStart plus one delta per character are available before the hang.
    for _ in 0..5 {
        seen.push(stream.next().await.unwrap());
    }
    adapter.wait_for_requests(1).await;
    cancel.cancel();
    let last = stream.next().await.unwrap();
    assert!(matches!(
        last,
        StreamChunk::Finish {
            reason: FinishReason::Aborted { .. },
            ..
        }
    ));
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn a_gate_parks_the_stream_until_released() {
    let gate = Gate::new();
    let script = Script::text("ab").wait_at(2, &gate);
    let (llm, _) = setup([script]);
    let task = tokio::spawn(collect(llm.stream(options())));
    gate.reached().await;
    assert!(!task.is_finished());
    gate.release();
    let chunks = task.await.unwrap();
    assert_eq!(chunks.len(), 6);
    assert!(matches!(chunks[1], StreamChunk::TextDelta { .. }));
    assert_eq!(finish_of(&chunks), &FinishReason::Stop);
}

#[tokio::test]
async fn configured_model_facts_are_what_prepare_call_sees() {
    let (llm, adapter) = setup([]);
    adapter
        .set_context_window(Some(1000))
        .set_default_max_tokens(Some(50));
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new(ScriptedAdapter::ROUTE, "any-id"),
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(prepared.context_window, Some(1000));
    assert_eq!(prepared.config.max_tokens, Some(50));
}
