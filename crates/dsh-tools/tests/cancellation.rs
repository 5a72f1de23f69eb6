//! Cancellation at every stage; a started body is never abandoned (INV-PIPE-12).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use common::{Recorder, context_texts, entries, exec, fn_tool, log, observe_phases, runtime};
use dsh_session::{Message, ToolErrorInfo};
use dsh_tools::{
    TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, Tool, ToolCallContext, ToolCallResult, ToolError,
    ToolOutput, ToolsExecute, ToolsPreExecute,
};
use futures::FutureExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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
    let finished = Arc::new(AtomicBool::new(false));
    struct Held {
        started: Arc<tokio::sync::Notify>,
        release: Arc<parking_lot::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>>,
        finished: Arc<AtomicBool>,
    }
    #[async_trait]
    impl Tool for Held {
        fn name(&self) -> &str {
            "held"
        }
        fn description(&self) -> &str {
            "waits for release"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        async fn execute(
            &self,
            _args: Value,
            call: &ToolCallContext,
        ) -> Result<ToolOutput, ToolError> {
            self.started.notify_one();
            call.cancel().cancelled().await;
            let rx = self.release.lock().take().unwrap();
            rx.await.unwrap();
            call.defer_context(Message::plugin_text("t", "kept"));
            self.finished.store(true, Ordering::SeqCst);
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
    assert!(!finished.load(Ordering::SeqCst));
    release_tx.send(()).unwrap();
    let result = run.await;
    assert!(finished.load(Ordering::SeqCst));
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
async fn an_execute_wrapper_may_replace_the_token_but_not_detach_the_caller() {
    let (ctx, rt) = runtime();
    let started = Arc::new(tokio::sync::Notify::new());
    struct Wait(Arc<tokio::sync::Notify>);
    #[async_trait]
    impl Tool for Wait {
        fn name(&self) -> &str {
            "wait"
        }
        fn description(&self) -> &str {
            "waits for cancellation"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        async fn execute(&self, _: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
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
