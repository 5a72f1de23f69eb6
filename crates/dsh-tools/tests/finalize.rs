//! `finalize_content` runs once per outcome, from the definition the call started with (INV-PIPE-4).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use common::{exec, runtime};
use dsh_session::ContentBlock;
use dsh_tools::{
    Prepared, Tool, ToolCallContext, ToolCallResult, ToolError, ToolExec, ToolOutput,
    ToolsPreExecute,
};
use futures::FutureExt;
use serde_json::{Value, json};

/// Marks its content `[<label>]` in `finalize_content` and counts the invocations.
struct Finalizing {
    label: &'static str,
    count: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Finalizing {
    fn name(&self) -> &str {
        "fin"
    }
    fn description(&self) -> &str {
        "finalizes its content"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _: Value, _: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("body {}", self.label)))
    }
    fn finalize_content(
        &self,
        _exec: &ToolExec,
        result: &ToolCallResult,
    ) -> Option<Vec<ContentBlock>> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Some(vec![ContentBlock::text(format!(
            "{} [{}]",
            result.text(),
            self.label
        ))])
    }
}

fn finalizing(label: &'static str) -> (Arc<Finalizing>, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    (
        Arc::new(Finalizing {
            label,
            count: count.clone(),
        }),
        count,
    )
}

#[tokio::test]
async fn finalize_content_runs_exactly_once_for_every_outcome() {
    let count_of = |c: &Arc<AtomicUsize>| c.load(Ordering::SeqCst);

    // Success.
    let (ctx, rt) = runtime();
    let (tool, count) = finalizing("A");
    let _ = rt.register(&ctx, tool).unwrap();
    assert_eq!(rt.run(&exec("fin", "{}", None)).await.text(), "body A [A]");
    assert_eq!(count_of(&count), 1);

    // Cancelled before anything ran.
    let e = exec("fin", "{}", None);
    e.cancel.cancel();
    assert_eq!(
        rt.run(&e).await.text(),
        "Error: tool call aborted before dispatch [A]"
    );
    assert_eq!(count_of(&count), 2);

    // A denial (post-execute path).
    let deny = rt.guard(&ctx, |_| Some("no".to_owned())).unwrap();
    assert_eq!(
        rt.run(&exec("fin", "{}", None)).await.text(),
        "Error: no [A]"
    );
    assert_eq!(count_of(&count), 3);
    deny.dispose().await;

    // A pre-execute failure (final path, no post-execute).
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(|_, _| {
            futures::future::err("pre exploded".into()).boxed()
        })
        .unwrap();
    assert_eq!(
        rt.run(&exec("fin", "{}", None)).await.text(),
        "Error: pre exploded [A]"
    );
    assert_eq!(count_of(&count), 4);
}

#[tokio::test]
async fn the_finalizer_is_the_definition_visible_when_the_call_started() {
    let (ctx, rt) = runtime();
    let (a, a_count) = finalizing("A");
    let (b, b_count) = finalizing("B");
    let reg = rt.register(&ctx, a).unwrap();
    let e = exec("fin", "{}", None);
    assert!(matches!(rt.prepare(&e).await, Prepared::Dispatch));
    // An earlier call replaces the tool before this one dispatches.
    reg.dispose().await;
    let _ = rt.register(&ctx, b).unwrap();
    let outcome = rt.dispatch(&e).await;
    let result = rt.finish(&e, outcome).await;
    assert_eq!(result.text(), "body B [A]");
    assert_eq!(a_count.load(Ordering::SeqCst), 1);
    assert_eq!(b_count.load(Ordering::SeqCst), 0);
}
