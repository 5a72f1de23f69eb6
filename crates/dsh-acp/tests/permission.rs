#![allow(clippy::unwrap_used)]
//! Permission requests: mutating calls wait for the client, and every failure denies.

mod common;

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, SessionUpdate, SetSessionModeRequest, StopReason, ToolCallStatus,
};
use common::*;
use dsh_acp::{AcpOptions, ApprovalPolicy};
use dsh_testkit::Script;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver};

/// `touch` declares that it writes a file, so it is asked about; `echo` declares nothing
/// beyond its answer and runs.
fn touching() -> AcpOptions {
    options()
}

/// The text the model read for each call, in order.
fn results(h: &H, session: &str) -> Vec<String> {
    let agent = h.agent(session).unwrap();
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            dsh_session::EventKind::ToolResult(r) => match &r.message.content[0] {
                dsh_session::ContentBlock::ToolResult { content, .. } => Some(
                    content
                        .iter()
                        .filter_map(dsh_session::ContentBlock::as_text)
                        .collect(),
                ),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The text the model read for the first call.
fn result_text(h: &H, session: &str) -> String {
    results(h, session).remove(0)
}

async fn one_touch(h: &H, answer: Answer) -> (Conn, String) {
    h.adapter
        .push(Script::tool_call("c1", "touch", "{}"))
        .push(Script::text("ok"));
    let conn = h.connect(touching()).await;
    conn.set_answer(answer);
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    (conn, id)
}

#[tokio::test]
async fn allow_once_runs_the_mutating_tool_after_the_client_saw_its_card() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (mut conn, id) = one_touch(&h, Answer::Select("allow-once")).await;
    assert_eq!(tool.runs(), 1);
    let asked = conn.asked.try_recv().unwrap();
    assert_eq!(&*asked.session_id.0, id);
    assert_eq!(&*asked.tool_call.tool_call_id.0, "c1");
    assert_eq!(asked.tool_call.fields.title.as_deref(), Some("touch"));
    let kinds: Vec<_> = asked.options.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::RejectOnce
        ]
    );
    // The card of the call was delivered before the question.
    let arrivals = conn.arrivals.lock().clone();
    let card = arrivals.iter().position(|a| a == "tool_call").unwrap();
    let ask = arrivals.iter().position(|a| a == "ask:c1").unwrap();
    assert!(card < ask, "{arrivals:?}");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn reject_denies_the_call_and_nothing_runs() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (mut conn, id) = one_touch(&h, Answer::Select("reject-once")).await;
    assert_eq!(tool.runs(), 0);
    assert_eq!(
        result_text(&h, &id),
        "Error: the user rejected tool `touch`"
    );
    let failed = conn.received().into_iter().find_map(|n| match n.update {
        SessionUpdate::ToolCallUpdate(u) => u.fields.status,
        _ => None,
    });
    assert_eq!(failed, Some(ToolCallStatus::Failed));
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_client_error_answering_the_question_fails_closed() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (conn, id) = one_touch(&h, Answer::Error).await;
    assert_eq!(tool.runs(), 0);
    assert!(result_text(&h, &id).starts_with("Error: tool `touch` requires approval"));
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn an_unknown_option_id_is_never_a_grant() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (conn, _) = one_touch(&h, Answer::Select("yes-please")).await;
    assert_eq!(tool.runs(), 0);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn allow_always_is_remembered_for_that_session_and_tool_only() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (mut conn, id) = one_touch(&h, Answer::Select("allow-always")).await;
    assert_eq!(conn.asked.try_recv().iter().count(), 1);
    // The next call of the same tool in the same session runs without a question.
    conn.set_answer(Answer::Select("reject-once"));
    h.adapter
        .push(Script::tool_call("c2", "touch", "{}"))
        .push(Script::text("again"));
    assert_eq!(
        conn.prompt_now(&id, "again").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(tool.runs(), 2);
    assert!(conn.asked.try_recv().is_err());
    // Another session still asks.
    let other = conn.session().await;
    h.adapter
        .push(Script::tool_call("c3", "touch", "{}"))
        .push(Script::text("no"));
    assert_eq!(
        conn.prompt_now(&other, "go").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(tool.runs(), 2);
    assert_eq!(&*conn.asked.try_recv().unwrap().session_id.0, other);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn cancel_while_a_question_is_pending_withdraws_it_and_nothing_runs() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    h.adapter.push(Script::tool_call("c1", "touch", "{}"));
    let mut conn = h.connect(touching()).await;
    conn.set_answer(Answer::Hold);
    let id = conn.session().await;
    let prompt = conn.prompt(&id, "go");
    conn.asked.recv().await.unwrap();
    conn.cancel(&id);
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    let agent = h.agent(&id).unwrap();
    agent.when_idle().await;
    assert_eq!(tool.runs(), 0);
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn read_only_mode_refuses_mutating_tools_without_asking() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    h.adapter
        .push(Script::tool_calls([
            ("c1", "touch", "{}"),
            ("c2", "echo", r#"{"text":"x"}"#),
        ]))
        .push(Script::text("ok"));
    let mut conn = h.connect(touching()).await;
    let id = conn.session().await;
    conn.cx
        .send_request(SetSessionModeRequest::new(id.clone(), "read-only"))
        .block_task()
        .await
        .unwrap();
    assert!(matches!(
        conn.wait_update(&id, |u| matches!(u, SessionUpdate::CurrentModeUpdate(_)))
            .await,
        SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "read-only"
    ));
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(tool.runs(), 0);
    assert!(conn.asked.try_recv().is_err());
    let results = results(&h, &id);
    assert!(results[0].contains("read-only mode"), "{results:?}");
    // Non-mutating tools still run.
    assert_eq!(results[1], "x");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn the_never_policy_starts_sessions_in_auto_mode() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    h.adapter
        .push(Script::tool_call("c1", "touch", "{}"))
        .push(Script::text("ok"));
    let mut conn = h
        .connect(touching().with_approval(ApprovalPolicy::Never))
        .await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(tool.runs(), 1);
    assert!(conn.asked.try_recv().is_err());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn the_bridge_approver_answers_unavailable_for_agents_it_does_not_own() {
    let h = H::new().await;
    let conn = h.connect(options()).await;
    conn.session().await;
    let approver = h
        .ctx
        .get::<dyn Approver>()
        .expect("the bridge provides an approver");
    let outcome = approver
        .request(ApprovalRequest {
            agent_id: "someone-else".into(),
            tool_name: "touch".into(),
            reason: None,
            call_id: "c9".into(),
            arguments: std::sync::Arc::new(serde_json::json!({})),
            effects: dsh_tools::ToolEffects::none().writes("touched"),
            cancel: Default::default(),
        })
        .await;
    assert_eq!(outcome, ApprovalOutcome::Unavailable);
    conn.disconnect().await.unwrap();
    // Teardown withdraws the bridge's approver.
    assert!(h.ctx.get::<dyn Approver>().is_none());
}

/// An approver some other front end already provided.
struct CountingApprover(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl Approver for CountingApprover {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalOutcome {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ApprovalOutcome::AllowedOnce
    }
}

#[tokio::test]
async fn an_existing_approver_is_kept_and_bridge_sessions_still_ask_their_client() {
    let h = H::new().await;
    let existing = std::sync::Arc::new(CountingApprover(Default::default()));
    h.ctx.provide::<dyn Approver>(existing.clone()).unwrap();
    let tool = TouchTool::default();
    h.register(tool.clone());
    let (mut conn, _) = one_touch(&h, Answer::Select("reject-once")).await;
    assert_eq!(tool.runs(), 0, "the client's rejection holds");
    assert!(conn.asked.try_recv().is_ok());
    assert_eq!(existing.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    conn.disconnect().await.unwrap();
    // The other front end's approver survives the bridge.
    assert!(h.ctx.get::<dyn Approver>().is_some());
}

/// A child agent (as the subagent runtime builds one) whose routing tag sits under `parent`'s,
/// so the parent's scoped policies hear its calls.
async fn child_of(h: &H, parent: &str, id: &str) -> dsh_agent::AgentHandle {
    let parent = h.agent(parent).unwrap();
    let parent_tag = parent.ctx().tag().cloned().unwrap();
    h.core
        .registry
        .create(
            parent.ctx(),
            dsh_agent::CreateAgentOptions {
                session_id: Some(id.into()),
                agent_options: route(),
                setup: Some(Box::new(move |ctx: dsh_kernel::Context| {
                    Box::pin(async move {
                        ctx.tag().unwrap().bind_parent(&parent_tag)?;
                        Ok(None)
                    })
                })),
                ..dsh_agent::CreateAgentOptions::default()
            },
        )
        .await
        .unwrap()
}

/// Runs a child of session `parent` whose model calls `touch` once, until it is idle.
async fn run_touching_child(h: &H, parent: &str, child: &str) {
    let child = child_of(h, parent, child).await;
    h.adapter
        .push(Script::tool_call("k", "touch", "{}"))
        .push(Script::text("ok"));
    child
        .agent()
        .followup(dsh_session::Message::user_text("work"))
        .unwrap();
    child.agent().when_idle().await;
    child.dispose().await;
}

async fn set_mode(conn: &Conn, id: &str, mode: &str) {
    conn.cx
        .send_request(SetSessionModeRequest::new(id.to_owned(), mode.to_owned()))
        .block_task()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_subagent_of_a_bridge_session_cannot_run_a_mutating_tool_without_consent() {
    let h = H::new().await;
    let tool = TouchTool::default();
    h.register(tool.clone());
    let mut conn = h.connect(touching()).await;
    conn.set_answer(Answer::Select("reject-once"));
    let id = conn.session().await;
    // In the ask mode the child's mutating call needs an approval it cannot get: it is refused
    // (delegation never widens what runs without consent), and no question about it reaches
    // the parent's editor.
    run_touching_child(&h, &id, "child-1").await;
    assert_eq!(tool.runs(), 0, "the child's call ran without consent");
    assert!(conn.asked.try_recv().is_err());
    // In the auto mode the child's call runs.
    set_mode(&conn, &id, "auto").await;
    run_touching_child(&h, &id, "child-auto").await;
    assert_eq!(tool.runs(), 1);
    // A read-only session stays read-only for its children.
    set_mode(&conn, &id, "read-only").await;
    run_touching_child(&h, &id, "child-2").await;
    assert_eq!(tool.runs(), 1);
    conn.disconnect().await.unwrap();
}
