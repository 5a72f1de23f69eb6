//! Post-execute decisions and result contexts (INV-PIPE-6).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use common::{context_texts, exec, fn_tool, runtime};
use dsh_session::{ContentBlock, Message};
use dsh_tools::{PostExecute, ToolOutput, ToolsPostExecute};
use futures::FutureExt;

fn deferring_tool() -> Arc<dyn dsh_tools::Tool> {
    fn_tool("defer", |_, call| {
        call.defer_context(Message::plugin_text("t", "deferred"));
        call.conclude_turn();
        Ok(ToolOutput::text("done"))
    })
}

#[tokio::test]
async fn accept_keeps_deferred_contexts_before_decision_contexts() {
    let (ctx, rt) = runtime();
    let _ = rt.register(&ctx, deferring_tool()).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(|input, next| {
            async move {
                let _ = next.run(input).await?;
                Ok(PostExecute::Accept {
                    content: Some(vec![ContentBlock::text("rewritten")]),
                    contexts: vec![Message::plugin_text("p", "decision")],
                })
            }
            .boxed()
        })
        .unwrap();
    let result = rt.run(&exec("defer", "{}", None)).await;
    assert!(!result.is_error);
    assert_eq!(result.text(), "rewritten");
    assert!(result.concludes_turn);
    assert_eq!(context_texts(&result), ["deferred", "decision"]);
}

#[tokio::test]
async fn block_turns_the_result_into_feedback_and_keeps_only_its_own_contexts() {
    let (ctx, rt) = runtime();
    let _ = rt.register(&ctx, deferring_tool()).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(|_, _| {
            futures::future::ok(PostExecute::Block {
                feedback: vec![ContentBlock::text("try again without sudo")],
                contexts: vec![Message::plugin_text("p", "why")],
            })
            .boxed()
        })
        .unwrap();
    let result = rt.run(&exec("defer", "{}", None)).await;
    assert!(result.is_error);
    assert!(!result.concludes_turn);
    assert_eq!(result.text(), "try again without sudo");
    assert_eq!(context_texts(&result), ["why"]);
}

#[tokio::test]
async fn a_failing_post_execute_listener_becomes_an_error_result() {
    let (ctx, rt) = runtime();
    let _ = rt.register(&ctx, deferring_tool()).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(|_, _| {
            futures::future::err("post failed".into()).boxed()
        })
        .unwrap();
    let result = rt.run(&exec("defer", "{}", None)).await;
    assert!(result.is_error);
    assert_eq!(result.text(), "Error: post failed");
    assert!(result.additional_contexts.is_empty());
}
