//! A result that is not lossless JSON becomes the call's own error result (INV-PIPE-5), so the
//! loop can always record it as the call's `tool/result`.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use common::{agent, exec, fn_tool, runtime};
use dsh_session::{
    ContentBlock, EventDraft, EventKind, Message, MessageSource, Session, ToolResult,
};
use dsh_tools::{ToolCallResult, ToolOutput};
use serde_json::json;

/// What the loop does with a final result: record it as the call's `tool/result`.
fn record(session: &Session, result: &ToolCallResult) {
    session
        .append_draft(EventDraft::new(EventKind::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            message: Arc::new(result.to_message("c1".into())),
            error: result.error.clone(),
            meta: result.meta.clone(),
        })))
        .unwrap();
}

#[tokio::test]
async fn inv_pipe_5_meta_that_is_not_lossless_json_becomes_the_calls_error() {
    let (ctx, rt) = runtime();
    let caller = agent(&ctx, "a");
    // -0.0 cannot be carried losslessly (a model can send it as an argument, too).
    let tool = fn_tool("neg", |_, _| {
        Ok(ToolOutput::text("fine").with_meta(json!({"delta": -0.0})))
    });
    let _r = rt.register(&ctx, tool).unwrap();
    let result = rt.run(&exec("neg", "{}", Some(&caller))).await;
    assert!(result.is_error, "{result:?}");
    assert_eq!(result.code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(result.meta.is_none());
    record(&caller.session, &result);
}

#[tokio::test]
async fn inv_pipe_5_a_context_that_is_not_lossless_json_becomes_the_calls_error() {
    let (ctx, rt) = runtime();
    let caller = agent(&ctx, "a");
    let tool = fn_tool("ctx", |_, call| {
        let mut extra = serde_json::Map::new();
        extra.insert("weight".into(), json!(-0.0));
        call.defer_context(Message::user(
            vec![ContentBlock::text("note")],
            MessageSource::Plugin {
                plugin: "p".into(),
                extra,
            },
        ));
        Ok(ToolOutput::text("fine"))
    });
    let _r = rt.register(&ctx, tool).unwrap();
    let result = rt.run(&exec("ctx", "{}", Some(&caller))).await;
    assert!(result.is_error, "{result:?}");
    assert_eq!(result.code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(result.additional_contexts.is_empty());
    record(&caller.session, &result);
}
