//! `Ask` decisions and the approval seam: allowed once, rejected, cancelled, unavailable,
//! and failing closed when nobody can be asked.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{Recorder, agent, entries, exec, log, push, runtime};
use dsh_kernel::Context;
use dsh_tools::{
    ApprovalOutcome, ApprovalRequest, Approver, PreExecute, TOOL_ABORTED_BEFORE_DISPATCH,
    ToolRuntime, ToolsPreExecute,
};
use futures::FutureExt;
use parking_lot::Mutex;

struct Scripted {
    answer: ApprovalOutcome,
    asked: Arc<Mutex<Vec<ApprovalRequest>>>,
    cancel_turn: bool,
}

#[async_trait]
impl Approver for Scripted {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if self.cancel_turn {
            request.cancel.cancel();
        }
        self.asked.lock().push(request);
        self.answer
    }
}

struct Exploding;

#[async_trait]
impl Approver for Exploding {
    async fn request(&self, _: ApprovalRequest) -> ApprovalOutcome {
        panic!("approver exploded")
    }
}

fn ask_for_everything(ctx: &Context) {
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|_, _| {
            futures::future::ok(PreExecute::Ask {
                reason: Some("writes files".into()),
            })
            .boxed()
        })
        .unwrap();
}

fn setup(
    answer: Option<ApprovalOutcome>,
    cancel_turn: bool,
) -> (
    Context,
    Arc<ToolRuntime>,
    common::Log,
    Arc<Mutex<Vec<ApprovalRequest>>>,
) {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("write", &out)).unwrap();
    ask_for_everything(&ctx);
    let asked = Arc::new(Mutex::new(Vec::new()));
    if let Some(answer) = answer {
        let approver: Arc<dyn Approver> = Arc::new(Scripted {
            answer,
            asked: asked.clone(),
            cancel_turn,
        });
        ctx.provide::<dyn Approver>(approver).unwrap();
    }
    (ctx, rt, out, asked)
}

#[tokio::test]
async fn allowed_once_runs_the_call() {
    let (ctx, rt, out, asked) = setup(Some(ApprovalOutcome::AllowedOnce), false);
    let a = agent(&ctx, "a");
    let result = rt.run(&exec("write", r#"{"p":1}"#, Some(&a))).await;
    assert_eq!(result.text(), "write ok");
    assert_eq!(entries(&out), ["body:write:c1"]);
    let asked = asked.lock();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].agent_id, "a");
    assert_eq!(asked[0].tool_name, "write");
    assert_eq!(asked[0].reason.as_deref(), Some("writes files"));
    assert_eq!(asked[0].call_id, "c1");
    assert_eq!(*asked[0].arguments, serde_json::json!({"p": 1}));
}

#[tokio::test]
async fn every_other_answer_denies_with_its_own_reason() {
    for (answer, reason) in [
        (ApprovalOutcome::Rejected, "the user rejected tool `write`"),
        (
            ApprovalOutcome::Cancelled,
            "approval for tool `write` was cancelled",
        ),
        (
            ApprovalOutcome::Unavailable,
            "tool `write` requires approval, but no approval channel is available",
        ),
    ] {
        let (ctx, rt, out, _) = setup(Some(answer), false);
        let a = agent(&ctx, "a");
        let result = rt.run(&exec("write", "{}", Some(&a))).await;
        assert!(result.is_error);
        assert_eq!(result.text(), format!("Error: {reason}"));
        assert!(entries(&out).is_empty(), "{answer:?} must not run the body");
    }
}

#[tokio::test]
async fn without_an_approver_or_a_caller_ask_fails_closed() {
    let (ctx, rt, out, _) = setup(None, false);
    let a = agent(&ctx, "a");
    let result = rt.run(&exec("write", "{}", Some(&a))).await;
    assert_eq!(
        result.text(),
        "Error: tool `write` requires approval, but no approval service is available"
    );

    let (_ctx, rt, _, asked) = setup(Some(ApprovalOutcome::AllowedOnce), false);
    let result = rt.run(&exec("write", "{}", None)).await;
    assert_eq!(
        result.text(),
        "Error: tool `write` requires approval, but the call has no agent to route it through"
    );
    assert!(asked.lock().is_empty());
    assert!(entries(&out).is_empty());
}

#[tokio::test]
async fn a_panicking_approver_denies() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("write", &out)).unwrap();
    ask_for_everything(&ctx);
    let approver: Arc<dyn Approver> = Arc::new(Exploding);
    ctx.provide::<dyn Approver>(approver).unwrap();
    let a = agent(&ctx, "a");
    let result = rt.run(&exec("write", "{}", Some(&a))).await;
    assert_eq!(result.text(), "Error: approval for tool `write` failed");
    assert!(entries(&out).is_empty());
}

#[tokio::test]
async fn an_approval_cancelled_with_the_turn_is_aborted_before_dispatch() {
    let (ctx, rt, out, _) = setup(Some(ApprovalOutcome::Cancelled), true);
    let a = agent(&ctx, "a");
    let result = rt.run(&exec("write", "{}", Some(&a))).await;
    assert_eq!(result.code(), Some(TOOL_ABORTED_BEFORE_DISPATCH));
    assert!(entries(&out).is_empty());
}

#[tokio::test]
async fn a_turn_cancelled_while_approval_was_granted_does_not_run_the_body() {
    let (ctx, rt, out, _) = setup(Some(ApprovalOutcome::AllowedOnce), true);
    let a = agent(&ctx, "a");
    let l = out.clone();
    let _ = ctx
        .on_waterfall::<dsh_tools::ToolsPostExecute, _>(move |input, next| {
            push(&l, format!("post:{}", input.result().text()));
            next.run(input)
        })
        .unwrap();
    let result = rt.run(&exec("write", "{}", Some(&a))).await;
    assert_eq!(result.code(), Some(TOOL_ABORTED_BEFORE_DISPATCH));
    assert_eq!(
        entries(&out),
        ["post:Error: tool call aborted before dispatch"]
    );
}
