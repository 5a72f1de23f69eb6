//! Foreground delegation: the parent waits for the child's final report.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use dsh_agent::AgentRef;
use dsh_agent::events::{AgentPreStep, PreStepDecision};
use dsh_session::{FailureCode, Message, SessionOrigin, TurnEndReason};
use dsh_subagent::{
    ChildApprovals, SUBAGENT_DECLINED, SUBAGENT_FAILED, SUBAGENT_MAX_TOKENS, SUBAGENT_SECTION_TEXT,
    SubagentConfig,
};
use dsh_testkit::Script;
use dsh_tools::{
    ApprovalOutcome, ApprovalRequest, Approver, PreExecute, Tool, ToolCallContext, ToolError,
    ToolOutput, ToolsPreExecute,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

async fn delegate_once(h: &H, child: Script) -> AgentRef {
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &subagent_args("find the answer"),
    ))
    .script(child)
    .script(Script::text("parent done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    std::mem::forget(handle);
    parent
}

#[tokio::test]
async fn foreground_delegation_returns_the_childs_answer_to_the_parent() {
    let h = harness().await;
    let parent = delegate_once(&h, Script::text("the answer is 42")).await;
    assert_eq!(turn_ends(&parent), [TurnEndReason::Completed]);
    let (text, code) = report_of(&parent, "c1");
    assert_eq!(text, "the answer is 42");
    assert_eq!(code, None);
    // Request 0 is the parent's, 1 the child's, 2 the parent's again with the child's report.
    assert!(
        request_texts(&h.adapter, 2)
            .iter()
            .any(|t| t.starts_with("result:c1:the answer is 42\n\n[subagent session ")),
        "{:?}",
        request_texts(&h.adapter, 2)
    );
    let child_request = &h.adapter.requests()[1];
    assert!(
        request_texts(&h.adapter, 1).contains(&"find the answer".to_owned()),
        "the child is prompted with the delegated task alone"
    );
    assert!(
        !request_texts(&h.adapter, 1).contains(&"go".to_owned()),
        "the child does not see the parent's conversation"
    );
    assert!(
        child_request
            .system
            .as_deref()
            .is_some_and(|s| s.contains(SUBAGENT_SECTION_TEXT)),
        "the child is told it is a subagent"
    );
    assert!(
        !h.adapter.requests()[0]
            .system
            .as_deref()
            .unwrap_or("")
            .contains(SUBAGENT_SECTION_TEXT),
        "the parent is not"
    );
    assert!(h.adapter.violations().is_empty());
    assert_balanced(&parent);
    assert_balanced(&h.children()[0]);
}

#[tokio::test]
async fn a_finished_delegation_leaves_no_child_agent_or_session_behind() {
    let h = harness().await;
    let parent = delegate_once(&h, Script::text("done")).await;
    let child = h.children()[0].clone();
    assert!(h.core.registry.get(child.id()).is_none());
    assert!(h.core.store.get(child.id()).is_none());
    assert_eq!(
        h.core
            .registry
            .list()
            .iter()
            .map(|a| a.id().to_string())
            .collect::<Vec<_>>(),
        ["p"]
    );
    assert!(h.core.registry.children_of(&parent).is_empty());
}

#[tokio::test]
async fn the_child_session_header_records_parent_origin_and_depth() {
    let h = harness().await;
    let parent = delegate_once(&h, Script::text("done")).await;
    let child = h.children()[0].clone();
    let header = child.session().header();
    assert_eq!(header.parent_session.as_ref(), Some(parent.id()));
    assert_eq!(header.origin, Some(SessionOrigin::Subagent));
    assert_eq!(header.delegation_depth, 1);
    assert_eq!(
        header.cwd,
        Some(cwd()),
        "the child works where its parent works"
    );
    let json = serde_json::to_value(header).unwrap();
    assert_eq!(json["parentSession"], "p");
    assert_eq!(json["origin"], "subagent");
    assert_eq!(json["delegationDepth"], 1);
    assert_ne!(child.id(), parent.id());
}

#[tokio::test]
async fn the_child_inherits_the_parents_route_unless_a_model_is_named() {
    let h = harness().await;
    let args = json!({"description": "d", "prompt": "p1", "model": "other-model"}).to_string();
    h.script(Script::tool_calls([(
        "c1",
        "subagent",
        subagent_args("inherit").as_str(),
    )]))
    .script(Script::text("one"))
    .script(Script::tool_call("c2", "subagent", &args))
    .script(Script::text("two"))
    .script(Script::text("done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    let requests = h.adapter.requests();
    assert_eq!(requests[1].config.provider, "scripted");
    assert_eq!(requests[1].config.model, "test-model");
    assert_eq!(requests[3].config.provider, "scripted");
    assert_eq!(requests[3].config.model, "other-model");
    assert_eq!(
        h.children()[1].options().model.as_deref(),
        Some("other-model")
    );
    assert_eq!(report_of(&parent, "c2").0, "two");
}

#[tokio::test]
async fn a_failing_child_is_an_error_result_for_the_parent_not_a_crash() {
    let h = harness().await;
    let parent = delegate_once(
        &h,
        Script::error_code(FailureCode::Auth, "the key was refused"),
    )
    .await;
    assert_eq!(turn_ends(&parent), [TurnEndReason::Completed]);
    let (text, code) = result_of(&parent, "c1");
    assert_eq!(text, "Error: subagent failed: the key was refused");
    assert_eq!(code.as_deref(), Some(SUBAGENT_FAILED));
    assert!(
        request_texts(&h.adapter, 2)
            .contains(&"result:c1:Error: subagent failed: the key was refused".to_owned())
    );
    assert!(matches!(
        turn_ends(&h.children()[0])[..],
        [TurnEndReason::Error { .. }]
    ));
    assert!(h.core.registry.get(h.children()[0].id()).is_none());
}

#[tokio::test]
async fn a_child_that_hits_its_token_limit_reports_an_error_with_its_partial_text() {
    let h = harness().await;
    let parent = delegate_once(&h, Script::max_tokens("half of it")).await;
    let (text, code) = result_of(&parent, "c1");
    assert_eq!(
        text,
        "Error: subagent hit its token limit before finishing\n\nPartial output:\nhalf of it"
    );
    assert_eq!(code.as_deref(), Some(SUBAGENT_MAX_TOKENS));
}

#[tokio::test]
async fn a_child_whose_step_is_rejected_declined_the_task() {
    let h = harness().await;
    let _ = h
        .ctx
        .on_waterfall::<AgentPreStep, _>(|request, next| async move {
            if request.agent.session().header().origin == Some(SessionOrigin::Subagent) {
                return Ok(PreStepDecision::Reject);
            }
            next.run(request).await
        })
        .unwrap();
    h.script(Script::tool_call("c1", "subagent", &subagent_args("x")))
        .script(Script::text("parent done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    let (text, code) = result_of(&parent, "c1");
    assert_eq!(text, "Error: subagent declined the task");
    assert_eq!(code.as_deref(), Some(SUBAGENT_DECLINED));
}

/// A tool behind an approval policy, and an approver that must never be reached from a child.
struct Guarded;

#[async_trait]
impl Tool for Guarded {
    fn name(&self) -> &str {
        "guarded"
    }
    fn description(&self) -> &str {
        "needs approval"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(
        &self,
        _args: Value,
        _call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("guarded ran"))
    }
}

#[derive(Default)]
struct RecordingApprover {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Approver for RecordingApprover {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        self.asked.lock().push(request.agent_id.to_string());
        // A real front end would wait for a person here, forever for a child's session.
        request.cancel.cancelled().await;
        ApprovalOutcome::Cancelled
    }
}

async fn approval_world(config: SubagentConfig) -> (H, Arc<RecordingApprover>, AgentRef) {
    let h = harness_with(config).await;
    let approver = Arc::new(RecordingApprover::default());
    h.ctx.provide::<dyn Approver>(approver.clone()).unwrap();
    let _ = h.core.tools.register(&h.ctx, Arc::new(Guarded)).unwrap();
    let _ = h
        .ctx
        .on_waterfall::<ToolsPreExecute, _>(|view, next| async move {
            let asks = view.name == "guarded";
            let decision = next.run(view).await?;
            Ok(if asks {
                PreExecute::Ask {
                    reason: Some("it is guarded".into()),
                }
            } else {
                decision
            })
        })
        .unwrap();
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &subagent_args("use it"),
    ))
    .script(Script::tool_call("g1", "guarded", "{}"))
    .script(Script::text("child report"))
    .script(Script::text("parent done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    std::mem::forget(handle);
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    (h, approver, parent)
}

#[tokio::test]
async fn a_child_never_blocks_on_an_approval_nobody_can_answer() {
    let (h, approver, parent) = approval_world(SubagentConfig::default()).await;
    assert!(
        approver.asked.lock().is_empty(),
        "the approver was never asked"
    );
    let child = h.children()[0].clone();
    let (text, _) = result_of(&child, "g1");
    assert!(
        text.starts_with("Error: tool `guarded` needs a person's approval (it is guarded)"),
        "{text}"
    );
    assert_eq!(report_of(&parent, "c1").0, "child report");
}

#[tokio::test]
async fn an_allow_policy_runs_the_childs_guarded_tool_without_asking() {
    let config = SubagentConfig {
        approvals: ChildApprovals::Allow,
        ..SubagentConfig::default()
    };
    let (h, approver, _parent) = approval_world(config).await;
    assert!(approver.asked.lock().is_empty());
    assert_eq!(result_of(&h.children()[0], "g1").0, "guarded ran");
}

#[tokio::test]
async fn the_answer_is_the_last_non_empty_assistant_text_of_the_run() {
    let h = harness().await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &subagent_args("look around"),
    ))
    .script(Script::text_then_tool_call(
        "let me check first",
        "t1",
        "subagent_output",
        r#"{"task_id": "subagent-7"}"#,
    ))
    .script(Script::text("final report: nothing there"))
    .script(Script::text("parent done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    assert_eq!(report_of(&parent, "c1").0, "final report: nothing there");
    let child = h.children()[0].clone();
    assert_eq!(
        result_of(&child, "t1").0,
        "Error: unknown subagent task subagent-7"
    );
}
