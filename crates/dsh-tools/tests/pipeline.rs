//! The guarded pipeline (INV-PIPE-1..6, INV-PIPE-12).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use common::{Log, Recorder, entries, exec, fn_tool, log, push, runtime};
use dsh_kernel::Context;
use dsh_session::{ContentBlock, Message, ToolErrorInfo};
use dsh_tools::{
    PostExecute, PreExecute, Prepared, TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, TOOL_PANICKED,
    ToolCallResult, ToolError, ToolOutput, ToolsExecute, ToolsPostExecute, ToolsPreExecute,
    ToolsResult, UNKNOWN_TOOL,
};
use futures::FutureExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Registers listeners on every phase that log their names.
fn observe_phases(ctx: &Context, log: &Log) {
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            push(&l, format!("pre:{}", exec.call_id));
            next.run(exec)
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(move |call, next| {
            let l = l.clone();
            async move {
                push(&l, "execute:enter");
                let out = next.run(call).await;
                push(&l, "execute:leave");
                out
            }
            .boxed()
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            push(&l, format!("post:{}", input.result().text()));
            next.run(input)
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on::<ToolsResult>(move |n| push(&l, format!("result:{}", n.result.text())))
        .unwrap();
}

#[tokio::test]
async fn phases_run_in_order_around_the_body() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("echo", &out)).unwrap();
    observe_phases(&ctx, &out);
    let l = out.clone();
    let _ = rt
        .guard(&ctx, move |_| {
            push(&l, "guard");
            None
        })
        .unwrap();

    let result = rt.run(&exec("echo", r#"{"x":1}"#, None)).await;
    assert!(!result.is_error);
    assert_eq!(result.text(), "echo ok");
    assert_eq!(result.meta, Some(json!({"x": 1})));
    assert_eq!(
        entries(&out),
        [
            "pre:c1",
            "guard",
            "execute:enter",
            "body:echo:c1",
            "execute:leave",
            "post:echo ok",
            "result:echo ok"
        ]
    );
}

#[tokio::test]
async fn every_phase_sees_the_same_arguments() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("echo", &out)).unwrap();
    let e = exec("echo", r#"{"a":[1,2]}"#, None);
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s = seen.clone();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            s.lock().push(exec.arguments.clone());
            next.run(exec)
        })
        .unwrap();
    let s = seen.clone();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            s.lock().push(input.exec().arguments.clone());
            next.run(input)
        })
        .unwrap();
    let s = seen.clone();
    let _ = ctx
        .on::<ToolsResult>(move |n| s.lock().push(n.exec.arguments.clone()))
        .unwrap();
    let _ = rt.run(&e).await;
    let seen = seen.lock();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|a| Arc::ptr_eq(a, &e.arguments)));
}

#[tokio::test]
async fn a_guard_denial_cannot_be_turned_into_allow_by_any_listener() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("rm", &out)).unwrap();
    // One listener short-circuits with Allow, another overrides an inner Deny with Allow.
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|exec, next| {
            async move {
                let _ = next.run(exec).await?;
                Ok(PreExecute::Allow)
            }
            .boxed()
        })
        .unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|_, _| futures::future::ok(PreExecute::Allow).boxed())
        .unwrap();
    let _ = rt
        .guard(&ctx, |e| {
            (e.name == "rm").then(|| "blocked by policy".to_owned())
        })
        .unwrap();
    let l = out.clone();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            push(&l, format!("post:{}", input.result().text()));
            next.run(input)
        })
        .unwrap();

    let result = rt.run(&exec("rm", "{}", None)).await;
    assert!(result.is_error);
    assert_eq!(result.text(), "Error: blocked by policy");
    assert_eq!(result.error, None);
    // The body never ran; the denied call still went through post-execute.
    assert_eq!(entries(&out), ["post:Error: blocked by policy"]);
}

#[tokio::test]
async fn guards_run_global_first_then_the_scope_chain_farthest_first() {
    let (root, rt) = runtime();
    let out = log();
    let _ = rt.register(&root, Recorder::new("t", &out)).unwrap();
    let parent_tag = dsh_kernel::ScopeTag::new("parent");
    let child_tag = dsh_kernel::ScopeTag::child_of(&parent_tag, "child");
    let parent = root.tagged_child("parent", parent_tag).unwrap();
    let child = common::agent_with_tag(&root, "child", child_tag);
    for (ctx, label) in [
        (&child.ctx, "child"),
        (&parent, "parent"),
        (&root, "global"),
    ] {
        let l = out.clone();
        let label = label.to_owned();
        let _ = rt
            .guard(ctx, move |_| {
                push(&l, label.clone());
                (label != "global").then(|| format!("denied by {label}"))
            })
            .unwrap();
    }
    let result = rt.run(&exec("t", "{}", Some(&child))).await;
    assert_eq!(result.text(), "Error: denied by parent");
    assert_eq!(entries(&out), ["global", "parent"]);
}

#[tokio::test]
async fn a_pre_execute_deny_is_an_ordered_result_that_still_reaches_post_execute() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|_, _| {
            futures::future::ok(PreExecute::Deny {
                reason: "not today".into(),
            })
            .boxed()
        })
        .unwrap();
    observe_phases(&ctx, &out);
    let e = exec("t", "{}", None);
    let prepared = rt.prepare(&e).await;
    let Prepared::Settled(outcome) = prepared else {
        panic!("a denied call must not dispatch");
    };
    assert!(outcome.needs_post_execute());
    let result = rt.finish(&e, outcome).await;
    assert_eq!(result.text(), "Error: not today");
    assert_eq!(
        entries(&out),
        ["post:Error: not today", "result:Error: not today"]
    );
}

#[tokio::test]
async fn a_failing_pre_execute_listener_is_a_final_error_that_skips_post_execute() {
    for panics in [false, true] {
        let (ctx, rt) = runtime();
        let out = log();
        let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
        let _ = ctx
            .on_waterfall::<ToolsPreExecute, _>(move |_, _| {
                if panics {
                    panic!("pre exploded");
                }
                futures::future::err("pre exploded".into()).boxed()
            })
            .unwrap();
        observe_phases(&ctx, &out);
        let result = rt.run(&exec("t", "{}", None)).await;
        assert!(result.is_error);
        assert!(result.text().starts_with("Error: "), "{}", result.text());
        if !panics {
            assert_eq!(result.text(), "Error: pre exploded");
        }
        let log = entries(&out);
        assert!(
            log.iter()
                .all(|e| !e.starts_with("post:") && !e.starts_with("body:")),
            "{log:?}"
        );
        assert_eq!(log.last().unwrap(), &format!("result:{}", result.text()));
    }
}

#[tokio::test]
async fn a_coded_listener_error_keeps_its_code() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|_, _| {
            futures::future::err(ToolError::coded("PolicyError", "POLICY", "no").into()).boxed()
        })
        .unwrap();
    let result = rt.run(&exec("t", "{}", None)).await;
    assert_eq!(
        result.error,
        Some(ToolErrorInfo {
            name: "PolicyError".into(),
            code: "POLICY".into()
        })
    );
}

fn deferring_tool() -> Arc<dyn dsh_tools::Tool> {
    fn_tool("defer", |_, call| {
        call.defer_context(Message::plugin_text("t", "deferred"));
        call.conclude_turn();
        Ok(ToolOutput::text("done"))
    })
}

fn context_texts(result: &ToolCallResult) -> Vec<String> {
    result
        .additional_contexts
        .iter()
        .map(Message::text)
        .collect()
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

#[tokio::test]
async fn a_call_cancelled_before_prepare_skips_every_phase() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    observe_phases(&ctx, &out);
    let e = exec("t", "{}", None);
    e.cancel.cancel();
    let result = rt.run(&e).await;
    assert_eq!(result.text(), "Error: tool call aborted before dispatch");
    assert_eq!(
        result.error,
        Some(ToolErrorInfo {
            name: "AbortError".into(),
            code: TOOL_ABORTED_BEFORE_DISPATCH.into()
        })
    );
    // Only the final notification: no policy, no body.
    assert_eq!(
        entries(&out),
        ["result:Error: tool call aborted before dispatch"]
    );
    assert_eq!(result, ToolCallResult::aborted_before_dispatch());
}

#[tokio::test]
async fn cancellation_during_pre_execute_prevents_the_body() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let token = CancellationToken::new();
    let t = token.clone();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            t.cancel();
            next.run(exec)
        })
        .unwrap();
    let mut e = exec("t", "{}", None);
    e.cancel = token;
    let result = rt.run(&e).await;
    assert_eq!(result.code(), Some(TOOL_ABORTED_BEFORE_DISPATCH));
    assert!(entries(&out).is_empty(), "the body must not run");
}

#[tokio::test]
async fn a_started_body_is_awaited_to_completion_after_cancel() {
    let (ctx, rt) = runtime();
    let started = Arc::new(tokio::sync::Notify::new());
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let release_rx = Arc::new(parking_lot::Mutex::new(Some(release_rx)));
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    struct Held {
        started: Arc<tokio::sync::Notify>,
        release: Arc<parking_lot::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>>,
        finished: Arc<std::sync::atomic::AtomicBool>,
    }
    #[async_trait::async_trait]
    impl dsh_tools::Tool for Held {
        fn name(&self) -> &str {
            "held"
        }
        fn description(&self) -> &str {
            "waits for release"
        }
        fn parameters(&self) -> serde_json::Value {
            json!({"type": "object"})
        }
        async fn execute(
            &self,
            _args: serde_json::Value,
            call: &dsh_tools::ToolCallContext,
        ) -> Result<ToolOutput, ToolError> {
            self.started.notify_one();
            call.cancel().cancelled().await;
            let rx = self.release.lock().take().unwrap();
            rx.await.unwrap();
            call.defer_context(Message::plugin_text("t", "kept"));
            self.finished
                .store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(ToolOutput::text("late success"))
        }
    }
    let _ = rt
        .register(
            &ctx,
            Arc::new(Held {
                started: started.clone(),
                release: release_rx,
                finished: finished.clone(),
            }),
        )
        .unwrap();
    let e = exec("held", "{}", None);
    let run = rt.run(&e);
    tokio::pin!(run);
    // Drive the call until the body is running.
    tokio::select! {
        _ = &mut run => panic!("the body cannot finish before release"),
        () = started.notified() => {}
    }
    e.cancel.cancel();
    // Cancellation alone does not settle the call: the body is still held.
    for _ in 0..10 {
        assert!(futures::poll!(&mut run).is_pending());
        tokio::task::yield_now().await;
    }
    assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
    release_tx.send(()).unwrap();
    let result = run.await;
    assert!(finished.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(result.text(), "Error: tool call aborted");
    assert_eq!(
        result.error,
        Some(ToolErrorInfo {
            name: "AbortError".into(),
            code: TOOL_ABORTED.into()
        })
    );
    assert_eq!(context_texts(&result), ["kept"]);
}

#[tokio::test]
async fn a_tools_own_failure_after_cancel_is_kept() {
    let (ctx, rt) = runtime();
    let _ = rt
        .register(
            &ctx,
            fn_tool("fails", |_, _| {
                Err(ToolError::coded("TimeoutError", "TIMEOUT", "took too long"))
            }),
        )
        .unwrap();
    let _ = rt
        .register(
            &ctx,
            fn_tool("reports", |_, _| {
                Ok(ToolOutput::error_text("exit status 1"))
            }),
        )
        .unwrap();
    // The caller cancels while the body is settling.
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(|call, next| {
            let caller = call.exec().cancel.clone();
            async move {
                let out = next.run(call).await;
                caller.cancel();
                out
            }
            .boxed()
        })
        .unwrap();
    let result = rt.run(&exec("fails", "{}", None)).await;
    assert_eq!(result.code(), Some("TIMEOUT"));
    assert_eq!(result.text(), "Error: took too long");

    // A tool-reported error (an answer, not a failure) is kept as well.
    let result = rt.run(&exec("reports", "{}", None)).await;
    assert!(result.is_error);
    assert_eq!(result.text(), "exit status 1");
    assert_eq!(result.error, None);
}

#[tokio::test]
async fn unknown_tools_and_panicking_bodies_become_error_results() {
    let (ctx, rt) = runtime();
    let out = log();
    observe_phases(&ctx, &out);
    let result = rt.run(&exec("nope", "{}", None)).await;
    assert_eq!(result.text(), "Error: unknown tool `nope`");
    assert_eq!(
        result.error,
        Some(ToolErrorInfo {
            name: "ToolNotFoundError".into(),
            code: UNKNOWN_TOOL.into()
        })
    );
    // An unknown tool is a dispatch outcome: post-execute still sees it.
    assert!(entries(&out).contains(&"post:Error: unknown tool `nope`".to_owned()));

    let _ = rt
        .register(&ctx, fn_tool("boom", |_, _| panic!("tool exploded")))
        .unwrap();
    let result = rt.run(&exec("boom", "{}", None)).await;
    assert_eq!(result.code(), Some(TOOL_PANICKED));
    assert_eq!(result.text(), "Error: tool `boom` panicked");
}

#[tokio::test]
async fn invalid_json_arguments_reach_the_tool_as_the_raw_string() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let result = rt.run(&exec("t", "{not json", None)).await;
    assert_eq!(result.meta, Some(json!("{not json")));
    let result = rt.run(&exec("t", "", None)).await;
    assert_eq!(result.meta, Some(json!({})));
}

#[tokio::test]
async fn an_execute_wrapper_may_replace_the_token_but_not_detach_the_caller() {
    let (ctx, rt) = runtime();
    let started = Arc::new(tokio::sync::Notify::new());
    struct Wait(Arc<tokio::sync::Notify>);
    #[async_trait::async_trait]
    impl dsh_tools::Tool for Wait {
        fn name(&self) -> &str {
            "wait"
        }
        fn description(&self) -> &str {
            "waits for cancellation"
        }
        fn parameters(&self) -> serde_json::Value {
            json!({"type": "object"})
        }
        async fn execute(
            &self,
            _: serde_json::Value,
            call: &dsh_tools::ToolCallContext,
        ) -> Result<ToolOutput, ToolError> {
            self.0.notify_one();
            call.cancel().cancelled().await;
            Ok(ToolOutput::text("saw cancel"))
        }
    }
    let _ = rt.register(&ctx, Arc::new(Wait(started.clone()))).unwrap();
    // The wrapper hands the body a fresh, never-cancelled token.
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(|call, next| {
            next.run(call.with_cancel(CancellationToken::new()))
        })
        .unwrap();
    let e = exec("wait", "{}", None);
    let run = rt.run(&e);
    tokio::pin!(run);
    tokio::select! {
        _ = &mut run => panic!("must wait"),
        () = started.notified() => {}
    }
    e.cancel.cancel();
    let result = run.await;
    assert_eq!(result.code(), Some(TOOL_ABORTED));

    // And a wrapper's own token reaches the body as well.
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(|call, next| {
            let mine = CancellationToken::new();
            mine.cancel();
            next.run(call.with_cancel(mine))
        })
        .unwrap();
    let result = rt.run(&exec("wait", "{}", None)).await;
    assert_eq!(result.code(), Some(TOOL_ABORTED_BEFORE_DISPATCH));
}

#[tokio::test]
async fn a_failing_execute_wrapper_is_final_and_skips_post_execute() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(|_, _| {
            futures::future::err("wrapper failed".into()).boxed()
        })
        .unwrap();
    observe_phases(&ctx, &out);
    let e = exec("t", "{}", None);
    assert!(matches!(rt.prepare(&e).await, Prepared::Dispatch));
    let outcome = rt.dispatch(&e).await;
    assert!(!outcome.needs_post_execute());
    assert!(!outcome.body_invoked());
    let result = rt.finish(&e, outcome).await;
    assert_eq!(result.text(), "Error: wrapper failed");
    assert!(entries(&out).iter().all(|e| !e.starts_with("post:")));
}

#[tokio::test]
async fn result_observers_see_the_final_result_and_their_failures_are_contained() {
    let (ctx, rt) = runtime();
    let out = log();
    let _ = rt.register(&ctx, Recorder::new("t", &out)).unwrap();
    let _ = ctx
        .on::<ToolsResult>(|_| panic!("observer exploded"))
        .unwrap();
    let l = out.clone();
    let _ = ctx
        .on::<ToolsResult>(move |n| push(&l, format!("{}={}", n.exec.call_id, n.result.text())))
        .unwrap();
    let result = rt.run(&exec("t", "{}", None)).await;
    assert_eq!(result.text(), "t ok");
    assert_eq!(entries(&out), ["body:t:c1", "c1=t ok"]);
}
