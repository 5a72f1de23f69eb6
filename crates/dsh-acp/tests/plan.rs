#![allow(clippy::unwrap_used)]
//! Plan mode and questions over ACP with a real client: the `plan` session mode, a plan put
//! to the editor as a form (when it declared forms) or a permission-style request (when not),
//! approval leaving the mode in the same turn, rejection carrying the person's words back to
//! the model, and `ask_user_question`.

mod common;

use agent_client_protocol::v1::schema::{
    ElicitationMode, PermissionOptionKind, SessionUpdate, SetSessionModeRequest, StopReason,
};
use common::*;
use dsh_plan::{PlanMode, PlanPlugin};
use dsh_session::{ContentBlock, EventKind, SessionId};
use dsh_testkit::Script;
use serde_json::json;

const PLAN: &str = "# Plan\n1. Touch the file.";

async fn planning_harness() -> H {
    let h = H::new().await;
    std::mem::forget(h.ctx.plugin(PlanPlugin).await.unwrap());
    h
}

/// The text the model read for every tool call of `session`, in order.
fn results(h: &H, session: &str) -> Vec<String> {
    let agent = h.agent(session).unwrap();
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => match &r.message.content[0] {
                ContentBlock::ToolResult { content, .. } => {
                    Some(content.iter().filter_map(ContentBlock::as_text).collect())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

async fn set_mode(conn: &Conn, id: &str, mode: &str) {
    conn.cx
        .send_request(SetSessionModeRequest::new(id.to_owned(), mode.to_owned()))
        .block_task()
        .await
        .unwrap();
}

/// The modes the editor was told about, in order.
fn modes(updates: &[agent_client_protocol::v1::schema::SessionNotification]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect()
}

fn exit_plan() -> Script {
    Script::tool_call("p1", "exit_plan_mode", &json!({ "plan": PLAN }).to_string())
}

#[tokio::test]
async fn the_plan_mode_refuses_changes_with_a_reason_and_asks_nothing() {
    let h = planning_harness().await;
    let touch = TouchTool::default();
    h.register(touch.clone());
    h.adapter
        .push(Script::tool_call("c1", "touch", "{}"))
        .push(Script::text("planned"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    set_mode(&conn, &id, "plan").await;
    assert!(
        h.ctx
            .get::<PlanMode>()
            .unwrap()
            .is_active(&SessionId::new(id.as_str()))
    );
    assert_eq!(
        conn.prompt_now(&id, "plan it").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(touch.runs(), 0);
    assert!(results(&h, &id)[0].starts_with("Error: plan mode: `touch` would change"));
    assert!(conn.asked.try_recv().is_err(), "a refusal asks nobody");
    assert_eq!(modes(&conn.received()), ["plan"]);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_plan_approved_in_a_form_leaves_plan_mode_and_the_turn_carries_it_out() {
    let h = planning_harness().await;
    let touch = TouchTool::default();
    h.register(touch.clone());
    h.adapter
        .push(exit_plan())
        .push(Script::tool_call("c2", "touch", "{}"))
        .push(Script::text("done"));
    let mut conn = h.connect(options()).await;
    conn.initialize_with_forms().await;
    let id = conn.open().await;
    set_mode(&conn, &id, "plan").await;
    *conn.elicit.lock() = Elicit::Accept(vec![("q1", dsh_plan::APPROVE)]);
    conn.set_answer(Answer::Select("allow-once"));
    assert_eq!(
        conn.prompt_now(&id, "do it").await.unwrap(),
        StopReason::EndTurn
    );
    // The form showed the plan, tied to the call.
    let form = conn.elicited.try_recv().unwrap();
    assert!(form.message.contains(PLAN), "{}", form.message);
    let ElicitationMode::Form(mode) = &form.mode else {
        panic!("not a form: {form:?}")
    };
    let schema = serde_json::to_value(&mode.requested_schema).unwrap();
    assert_eq!(
        schema["properties"]["q1"]["oneOf"][0]["const"],
        dsh_plan::APPROVE,
        "{schema}"
    );
    let texts = results(&h, &id);
    assert!(
        texts[0].starts_with("The user approved the plan"),
        "{texts:?}"
    );
    // Out of plan mode the change runs (asked like any change in the default mode).
    assert_eq!(touch.runs(), 1);
    assert_eq!(modes(&conn.received()), ["plan", "default"]);
    assert!(
        !h.ctx
            .get::<PlanMode>()
            .unwrap()
            .is_active(&SessionId::new(id.as_str()))
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_plan_rejected_in_a_form_keeps_planning_and_the_model_reads_why() {
    let h = planning_harness().await;
    h.adapter.push(exit_plan()).push(Script::text("revising"));
    let mut conn = h.connect(options()).await;
    conn.initialize_with_forms().await;
    let id = conn.open().await;
    set_mode(&conn, &id, "plan").await;
    *conn.elicit.lock() = Elicit::Accept(vec![("q1_text", "touch two files instead")]);
    assert_eq!(
        conn.prompt_now(&id, "do it").await.unwrap(),
        StopReason::EndTurn
    );
    let texts = results(&h, &id);
    assert!(texts[0].contains("did not approve") && texts[0].contains("touch two files instead"));
    assert_eq!(modes(&conn.received()), ["plan"]);
    assert!(
        h.ctx
            .get::<PlanMode>()
            .unwrap()
            .is_active(&SessionId::new(id.as_str()))
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn without_forms_the_plan_is_a_permission_request_whose_options_decide() {
    for (option, approved) in [("option-1", true), ("option-2", false)] {
        let h = planning_harness().await;
        h.adapter.push(exit_plan()).push(Script::text("ok"));
        let mut conn = h.connect(options()).await;
        let id = conn.session().await;
        set_mode(&conn, &id, "plan").await;
        conn.set_answer(Answer::Select(option));
        assert_eq!(
            conn.prompt_now(&id, "do it").await.unwrap(),
            StopReason::EndTurn
        );
        let asked = conn.asked.try_recv().unwrap();
        assert_eq!(&*asked.tool_call.tool_call_id.0, "p1");
        let options: Vec<(&str, PermissionOptionKind)> = asked
            .options
            .iter()
            .map(|o| (o.name.as_str(), o.kind))
            .collect();
        assert_eq!(
            options,
            [
                (dsh_plan::APPROVE, PermissionOptionKind::AllowOnce),
                (dsh_plan::KEEP_PLANNING, PermissionOptionKind::RejectOnce)
            ]
        );
        assert!(format!("{:?}", asked.tool_call.fields.content).contains("Touch the file"));
        let text = &results(&h, &id)[0];
        assert_eq!(
            text.starts_with("The user approved the plan"),
            approved,
            "{text}"
        );
        let planning = h
            .ctx
            .get::<PlanMode>()
            .unwrap()
            .is_active(&SessionId::new(id.as_str()));
        assert_eq!(planning, !approved);
        conn.disconnect().await.unwrap();
    }
}

#[tokio::test]
async fn ask_user_question_is_a_form_or_a_permission_request_and_its_answer_the_result() {
    let question = json!({"questions": [{"question": "Which store?", "options": [
        {"label": "SQLite"}, {"label": "Postgres", "description": "shared"}]}]})
    .to_string();
    // A client with forms: the typed words win over the option.
    let h = planning_harness().await;
    h.adapter
        .push(Script::tool_call("q", "ask_user_question", &question))
        .push(Script::text("ok"));
    let mut conn = h.connect(options()).await;
    conn.initialize_with_forms().await;
    let id = conn.open().await;
    *conn.elicit.lock() = Elicit::Accept(vec![("q1", "SQLite"), ("q1_text", "files on disk")]);
    conn.prompt_now(&id, "store it").await.unwrap();
    assert!(
        conn.elicited
            .try_recv()
            .unwrap()
            .message
            .contains("Which store?")
    );
    assert_eq!(
        results(&h, &id)[0],
        "The user answered:\n1. Which store? → (in their own words) files on disk"
    );
    conn.disconnect().await.unwrap();
    // A client without: the option chosen.
    let h = planning_harness().await;
    h.adapter
        .push(Script::tool_call("q", "ask_user_question", &question))
        .push(Script::text("ok"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    conn.set_answer(Answer::Select("option-2"));
    conn.prompt_now(&id, "store it").await.unwrap();
    assert_eq!(conn.asked.try_recv().unwrap().options[1].name, "Postgres");
    assert_eq!(
        results(&h, &id)[0],
        "The user answered:\n1. Which store? → Postgres"
    );
    // A declined form is a declined question.
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn plan_is_a_mode_and_a_command_and_leaving_it_returns_to_the_mode_chosen() {
    let h = planning_harness().await;
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    set_mode(&conn, &id, "plan").await;
    set_mode(&conn, &id, "auto").await;
    let plan = h.ctx.get::<PlanMode>().unwrap();
    assert!(!plan.is_active(&SessionId::new(id.as_str())));
    assert_eq!(
        conn.prompt_now(&id, "/plan").await.unwrap(),
        StopReason::EndTurn
    );
    assert!(plan.is_active(&SessionId::new(id.as_str())));
    assert_eq!(
        conn.prompt_now(&id, "/plan off").await.unwrap(),
        StopReason::EndTurn
    );
    assert!(!plan.is_active(&SessionId::new(id.as_str())));
    assert_eq!(modes(&conn.received()), ["plan", "auto", "plan", "default"]);
    assert!(
        h.adapter.requests().is_empty(),
        "no model request for a command"
    );
    conn.disconnect().await.unwrap();
}
