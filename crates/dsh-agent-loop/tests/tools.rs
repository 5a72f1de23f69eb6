//! Tool-call scheduling inside a step (spec/core.md §6, acceptance §10.2).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::*;
use dsh_agent_loop::CoreConfig;
use dsh_session::*;
use dsh_testkit::Script;
use dsh_tools::{PostExecute, PreExecute, ToolsPostExecute, ToolsPreExecute};
use parking_lot::Mutex;

fn calls(n: usize, name: &str) -> Script {
    let ids: Vec<String> = (1..=n).map(|i| format!("c{i}")).collect();
    Script::tool_calls(ids.iter().map(|id| (id.as_str(), name, "{}")))
}

#[tokio::test]
async fn parallel_safe_calls_all_start_before_any_completes() {
    let h = harness().await;
    let tool = TestTool::new("r", &h.log).parallel();
    let gates: Vec<_> = (1..=3).map(|i| tool.gate(&format!("c{i}"))).collect();
    h.tool(tool);
    h.script(calls(3, "r"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    for g in &gates {
        g.reached().await;
    }
    assert_eq!(h.log(), ["r-start-c1", "r-start-c2", "r-start-c3"]);
    for g in gates.iter().rev() {
        g.release();
    }
    a.when_idle().await;
    let ids: Vec<String> = tool_results(a).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["c1", "c2", "c3"], "results commit in model order");
    assert_balanced(a);
}

#[tokio::test]
async fn an_exclusive_call_is_a_barrier_between_parallel_groups() {
    let h = harness().await;
    h.tool(TestTool::new("r", &h.log).parallel());
    h.tool(TestTool::new("w", &h.log));
    h.script(Script::tool_calls([
        ("A1", "r", "{}"),
        ("A2", "w", "{}"),
        ("A3", "r", "{}"),
    ]));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    handle.agent().followup(Message::user_text("go")).unwrap();
    handle.agent().when_idle().await;
    assert_eq!(
        h.log(),
        [
            "r-start-A1",
            "r-end-A1",
            "w-start-A2",
            "w-end-A2",
            "r-start-A3",
            "r-end-A3"
        ]
    );
}

#[tokio::test]
async fn the_rolling_pool_never_exceeds_its_cap_and_refills_in_model_order() {
    let h = harness_with(parallel(2)).await;
    let tool = TestTool::new("x", &h.log).parallel();
    let gates: Vec<_> = (1..=4).map(|i| tool.gate(&format!("c{i}"))).collect();
    h.tool(tool);
    h.script(calls(4, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    gates[0].reached().await;
    gates[1].reached().await;
    assert_eq!(h.log(), ["x-start-c1", "x-start-c2"]);
    gates[0].release();
    gates[2].reached().await;
    let order: Vec<String> = a
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall(c) => Some(format!("call {}", c.call_id)),
            EventKind::ToolResult(r) => Some(format!("result {}", r.message.content.len())),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["call c1", "call c2", "result 1", "call c3"]);
    for g in &gates[1..] {
        g.release();
    }
    a.when_idle().await;
    let ids: Vec<String> = tool_results(a).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4"]);
}

#[tokio::test]
async fn a_cap_of_one_is_strictly_serial() {
    let h = harness_with(parallel(1)).await;
    h.tool(TestTool::new("x", &h.log).parallel());
    h.script(calls(3, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    handle.agent().followup(Message::user_text("go")).unwrap();
    handle.agent().when_idle().await;
    assert_eq!(
        h.log(),
        [
            "x-start-c1",
            "x-end-c1",
            "x-start-c2",
            "x-end-c2",
            "x-start-c3",
            "x-end-c3"
        ]
    );
}

#[tokio::test]
async fn a_later_result_waits_for_the_earlier_one_before_committing() {
    let h = harness().await;
    let tool = TestTool::new("x", &h.log).parallel();
    let (g1, g2) = (tool.gate("c1"), tool.gate("c2"));
    h.tool(tool);
    h.script(calls(2, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    g1.reached().await;
    g2.reached().await;
    g2.release();
    // Let the driver run until c2's body has returned (single-threaded runtime: yielding hands
    // it the CPU), then a little more so the scheduler has seen the settlement.
    for _ in 0..1000 {
        if h.log().contains(&"x-end-c2".to_owned()) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(h.log().contains(&"x-end-c2".to_owned()));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // c2 settled first, but nothing is committed until c1 settles.
    assert!(tool_results(a).is_empty());
    g1.release();
    a.when_idle().await;
    let ids: Vec<String> = tool_results(a).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["c1", "c2"]);
    let history: Vec<String> = request_texts(&h, 1);
    assert_eq!(history[2..], ["result:c1:echo: ", "result:c2:echo: "]);
}

#[tokio::test]
async fn pre_and_post_execute_run_in_model_order_despite_reverse_settlement() {
    let h = harness().await;
    let tool = TestTool::new("x", &h.log).parallel();
    let gates: Vec<_> = (1..=3).map(|i| tool.gate(&format!("c{i}"))).collect();
    h.tool(tool);
    let phases: Arc<Mutex<Vec<String>>> = Arc::default();
    let p = phases.clone();
    let _ = h
        .ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            p.lock().push(format!("pre-{}", exec.call_id));
            next.run(exec)
        })
        .unwrap();
    let p = phases.clone();
    let _ = h
        .ctx
        .on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            p.lock().push(format!("post-{}", input.exec().call_id));
            next.run(input)
        })
        .unwrap();
    h.script(calls(3, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    for g in &gates {
        g.reached().await;
    }
    for g in gates.iter().rev() {
        g.release();
    }
    a.when_idle().await;
    assert_eq!(
        *phases.lock(),
        [
            "pre-c1", "pre-c2", "pre-c3", "post-c1", "post-c2", "post-c3"
        ]
    );
}

#[tokio::test]
async fn result_contexts_enter_after_the_last_tool_result_in_model_order() {
    let h = harness().await;
    let mut tool = TestTool::new("x", &h.log).parallel();
    tool.context = Some("ctx".into());
    h.tool(tool);
    h.script(calls(2, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    let tail: Vec<String> = a
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(_) => Some("result".to_owned()),
            EventKind::UserMessage(m) if m.text().starts_with("ctx") => Some(m.text()),
            _ => None,
        })
        .collect();
    assert_eq!(tail, ["result", "result", "ctx-c1", "ctx-c2"]);
}

#[tokio::test]
async fn denied_and_failing_pre_execute_calls_are_ordered_results_without_dispatch() {
    let h = harness().await;
    h.tool(TestTool::new("x", &h.log));
    let _ = h
        .ctx
        .on_waterfall::<ToolsPreExecute, _>(|exec, next| async move {
            match exec.call_id.as_str() {
                "c2" => Ok(PreExecute::Deny {
                    reason: "blocked by policy".into(),
                }),
                "c3" => Err("pre exploded".into()),
                _ => next.run(exec).await,
            }
        })
        .unwrap();
    h.script(calls(3, "x"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.log(), ["x-start-c1", "x-end-c1"]);
    let results = tool_results(a);
    assert!(results[1].1.contains("blocked by policy"));
    assert!(results[2].1.contains("pre exploded"));
    assert_balanced(a);
}

#[tokio::test]
async fn cancel_after_two_of_four_started_commits_them_and_skips_the_rest() {
    let h = harness_with(parallel(2)).await;
    let mut tool = TestTool::new("x", &h.log).parallel();
    tool.context = Some("ctx".into());
    let (g1, g2) = (tool.gate("c1"), tool.gate("c2"));
    h.tool(tool);
    h.script(calls(4, "x"));
    h.script(Script::text("after"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    g1.reached().await;
    g2.reached().await;
    a.cancel(CancelCause::User, CancelOptions { keep_inbox: true });
    g1.release();
    g2.release();
    a.when_idle().await;
    assert_eq!(
        h.log(),
        ["x-start-c1", "x-start-c2", "x-end-c1", "x-end-c2"]
    );
    let results = tool_results(a);
    let codes: Vec<Option<String>> = results.iter().map(|r| r.2.clone()).collect();
    assert_eq!(
        codes,
        [
            Some("ABORTED".into()),
            Some("ABORTED".into()),
            Some("ABORTED_BEFORE_DISPATCH".into()),
            Some("ABORTED_BEFORE_DISPATCH".into())
        ]
    );
    let parked: Vec<String> = a.inbox().next_step().iter().map(|m| m.text()).collect();
    assert_eq!(
        parked,
        ["ctx-c1", "ctx-c2"],
        "contexts of an aborted step stay parked"
    );
    assert_balanced(a);
    a.followup(Message::user_text("wake")).unwrap();
    a.when_idle().await;
    let texts = user_texts(a);
    assert_eq!(texts[texts.len() - 3..], ["ctx-c1", "ctx-c2", "wake"]);
}

#[tokio::test]
async fn an_exclusive_call_after_an_aborted_parallel_group_never_runs() {
    let h = harness().await;
    let tool = TestTool::new("r", &h.log).parallel();
    let g = tool.gate("c1");
    h.tool(tool);
    h.tool(TestTool::new("w", &h.log));
    h.script(Script::tool_calls([("c1", "r", "{}"), ("c2", "w", "{}")]));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    g.reached().await;
    a.cancel(CancelCause::User, CancelOptions::default());
    g.release();
    a.when_idle().await;
    assert_eq!(h.log(), ["r-start-c1", "r-end-c1"]);
    assert_eq!(
        tool_results(a)[1].2.as_deref(),
        Some("ABORTED_BEFORE_DISPATCH")
    );
    assert_balanced(a);
}

#[tokio::test]
async fn an_inject_during_tool_execution_lands_after_the_tool_result() {
    let h = harness().await;
    let tool = TestTool::new("x", &h.log);
    let g = tool.gate("c1");
    h.tool(tool);
    h.script(Script::tool_call("c1", "x", "{}"));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    g.reached().await;
    a.inject(Message::plugin_text("p", "late context")).unwrap();
    g.release();
    a.when_idle().await;
    assert_eq!(
        request_texts(&h, 1),
        ["go", "call:c1", "result:c1:echo: ", "late context"]
    );
}

#[tokio::test]
async fn a_concluding_tool_ends_the_turn_without_another_request() {
    let h = harness().await;
    let mut tool = TestTool::new("finish", &h.log);
    tool.conclude = true;
    h.tool(tool);
    h.script(Script::tool_call("c1", "finish", "{}"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1);
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn invalid_json_arguments_reach_the_tool_as_a_raw_string() {
    let h = harness().await;
    let seen: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let s = seen.clone();
    let _ = h
        .ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            s.lock().push((*exec.arguments).clone());
            next.run(exec)
        })
        .unwrap();
    h.tool(TestTool::new("x", &h.log));
    h.script(Script::tool_calls([
        ("c1", "x", "{not json"),
        ("c2", "x", ""),
    ]));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    handle.agent().followup(Message::user_text("go")).unwrap();
    handle.agent().when_idle().await;
    assert_eq!(
        *seen.lock(),
        [serde_json::json!("{not json"), serde_json::json!({})]
    );
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_result_not_a_crash() {
    let h = harness().await;
    h.script(Script::tool_call("c1", "nope", "{}"));
    h.script(Script::text("ok"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(tool_results(a)[0].2.as_deref(), Some("UNKNOWN_TOOL"));
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn post_execute_block_replaces_the_result_with_feedback() {
    let h = harness().await;
    h.tool(TestTool::new("x", &h.log));
    let _ = h
        .ctx
        .on_waterfall::<ToolsPostExecute, _>(|_, _| async {
            Ok(PostExecute::Block {
                feedback: vec![ContentBlock::text("not allowed here")],
                contexts: vec![],
            })
        })
        .unwrap();
    h.script(Script::tool_call("c1", "x", "{}"));
    h.script(Script::text("ok"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert!(tool_results(a)[0].1.contains("not allowed here"));
}

#[tokio::test]
async fn the_parallel_cap_setting_rejects_zero() {
    let h = harness_with(CoreConfig::default()).await;
    assert!(h.core.agent_loop.set_max_parallel_tool_calls(0).is_err());
    let err = dsh_agent_loop::LoopConfig {
        max_parallel_tool_calls: 0,
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("maxParallelToolCalls must be a positive integer")
    );
}

#[tokio::test]
async fn a_skipped_call_that_cannot_be_logged_still_leaves_every_call_answered() {
    let h = harness().await;
    let tool = TestTool::new("r", &h.log).parallel();
    let g = tool.gate("c1");
    h.tool(tool);
    h.tool(TestTool::new("w", &h.log));
    h.script(Script::tool_calls([
        ("c1", "r", "{}"),
        ("c2", "w", "{}"),
        ("c3", "w", "{}"),
    ]));
    let handle = h.agent().await;
    let a = handle.agent();
    // The synthetic "aborted before dispatch" result of c2 cannot be written.
    a.session()
        .add_validator(std::sync::Arc::new(|_: &Session, e: &SessionEvent| {
            match &e.kind {
                EventKind::ToolResult(r)
                    if r.error.as_ref().is_some_and(|e| e.code == "ABORTED_BEFORE_DISPATCH")
                        && matches!(&r.message.content[0],
                            ContentBlock::ToolResult { tool_call_id, .. } if tool_call_id.as_str() == "c2") =>
                {
                    Err("refused by the test".into())
                }
                _ => Ok(()),
            }
        }));
    a.followup(Message::user_text("go")).unwrap();
    g.reached().await;
    a.cancel(CancelCause::User, CancelOptions::default());
    g.release();
    a.when_idle().await;
    let answered: Vec<String> = tool_results(a).into_iter().map(|r| r.0).collect();
    assert_eq!(answered, ["c1", "c2", "c3"]);
    assert_balanced(a);
}

#[tokio::test]
async fn a_skipped_call_after_an_exclusive_group_that_cannot_be_logged_is_still_answered() {
    let h = harness().await;
    let tool = TestTool::new("w", &h.log);
    let g = tool.gate("c1");
    h.tool(tool);
    // c1 is exclusive: its group aborts alone and c2, c3 take the step's skip path.
    h.script(Script::tool_calls([
        ("c1", "w", "{}"),
        ("c2", "w", "{}"),
        ("c3", "w", "{}"),
    ]));
    let handle = h.agent().await;
    let a = handle.agent();
    // The synthetic "aborted before dispatch" result of c2 cannot be written.
    a.session()
        .add_validator(std::sync::Arc::new(|_: &Session, e: &SessionEvent| {
            match &e.kind {
                EventKind::ToolResult(r)
                    if r.error.as_ref().is_some_and(|e| e.code == "ABORTED_BEFORE_DISPATCH")
                        && matches!(&r.message.content[0],
                            ContentBlock::ToolResult { tool_call_id, .. } if tool_call_id.as_str() == "c2") =>
                {
                    Err("refused by the test".into())
                }
                _ => Ok(()),
            }
        }));
    a.followup(Message::user_text("go")).unwrap();
    bounded(g.reached()).await;
    a.cancel(CancelCause::User, CancelOptions::default());
    g.release();
    bounded(a.when_idle()).await;
    let answered: Vec<String> = tool_results(a).into_iter().map(|r| r.0).collect();
    assert_eq!(answered, ["c1", "c2", "c3"]);
    assert_balanced(a);
}

/// A validator refusing the results of `call` whose error code is not one of `allowed`, at
/// most `times` times.
fn refuse_result_of(
    call: &'static str,
    allowed: &'static [&'static str],
    times: usize,
) -> Validator {
    let left = Arc::new(Mutex::new(times));
    Arc::new(move |_: &Session, e: &SessionEvent| match &e.kind {
        EventKind::ToolResult(r)
            if !r
                .error
                .as_ref()
                .is_some_and(|e| allowed.contains(&e.code.as_str()))
                && matches!(&r.message.content[0],
                    ContentBlock::ToolResult { tool_call_id, .. } if tool_call_id.as_str() == call)
                && *left.lock() > 0 =>
        {
            *left.lock() -= 1;
            Err("refused by the test".into())
        }
        _ => Ok(()),
    })
}

#[tokio::test]
async fn a_call_whose_body_ran_keeps_its_outcome_when_its_result_cannot_be_committed() {
    let h = harness().await;
    h.tool(TestTool::new("r", &h.log).parallel());
    h.script(Script::tool_calls([
        ("c1", "r", r#"{"text":"one"}"#),
        ("c2", "r", r#"{"text":"two"}"#),
    ]));
    let handle = h.agent().await;
    let a = handle.agent();
    // c1's real result cannot be written the first time.
    a.session().add_validator(refuse_result_of("c1", &[], 1));
    a.followup(Message::user_text("go")).unwrap();
    bounded(a.when_idle()).await;
    let results = tool_results(a);
    assert_eq!(
        results,
        [
            ("c1".to_owned(), "echo: one".to_owned(), None),
            ("c2".to_owned(), "echo: two".to_owned(), None),
        ]
    );
    assert_eq!(h.log().len(), 4, "both bodies ran");
    assert_balanced(a);
}

#[tokio::test]
async fn a_call_whose_body_ran_but_whose_outcome_cannot_be_recorded_is_outcome_unknown() {
    let h = harness().await;
    h.tool(TestTool::new("r", &h.log).parallel());
    h.script(Script::tool_calls([("c1", "r", "{}"), ("c2", "r", "{}")]));
    let handle = h.agent().await;
    let a = handle.agent();
    // Only a synthetic "outcome unknown" result of c1 can be written.
    a.session().add_validator(refuse_result_of(
        "c1",
        &["TOOL_OUTCOME_UNKNOWN"],
        usize::MAX,
    ));
    a.followup(Message::user_text("go")).unwrap();
    bounded(a.when_idle()).await;
    let codes: Vec<(String, Option<String>)> =
        tool_results(a).into_iter().map(|r| (r.0, r.2)).collect();
    assert_eq!(
        codes,
        [
            ("c1".to_owned(), Some("TOOL_OUTCOME_UNKNOWN".to_owned())),
            ("c2".to_owned(), None),
        ]
    );
    assert_balanced(a);
}

#[tokio::test]
async fn a_model_without_vision_is_not_offered_tools_that_need_it() {
    let h = harness().await;
    h.tool(TestTool::new("look", &h.log).vision());
    h.tool(TestTool::new("plain", &h.log));
    h.script(Script::text("one"));
    h.script(Script::text("two"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    let mut model = dsh_llm::ModelInfo::new("scripted").with_context_window(128_000);
    model.input_modalities = vec!["text".into(), "image".into()];
    h.adapter.set_model(model);
    a.followup(Message::user_text("again")).unwrap();
    a.when_idle().await;
    let offered: Vec<Vec<String>> = h
        .adapter
        .requests()
        .iter()
        .map(|r| {
            let mut names: Vec<String> = r.tools.iter().map(|t| t.name.clone()).collect();
            names.sort();
            names
        })
        .collect();
    assert_eq!(offered, [vec!["plain"], vec!["look", "plain"]]);
}
