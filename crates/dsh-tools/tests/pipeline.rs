//! Phase order and policy of the guarded pipeline (INV-PIPE-1, INV-PIPE-2, INV-PIPE-3, INV-PIPE-5).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use common::{
    Recorder, agent_with_tag, entries, exec, fn_tool, log, observe_phases, push, runtime,
};
use dsh_session::ToolErrorInfo;
use dsh_tools::{
    PreExecute, Prepared, TOOL_PANICKED, ToolError, ToolsExecute, ToolsPostExecute,
    ToolsPreExecute, ToolsResult, UNKNOWN_TOOL,
};
use futures::FutureExt;
use serde_json::json;

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
    let child = agent_with_tag(&root, "child", child_tag);
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
