//! Every request the loop sends is reconstructable from the log alone, byte for byte.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_agent::events::AgentRequest;
use dsh_agent::*;
use dsh_agent_loop::rebuild_requests;
use dsh_session::*;
use dsh_testkit::Script;

#[tokio::test]
async fn every_request_is_rebuilt_byte_for_byte_from_the_log() {
    let h = harness_with(dsh_agent_loop::CoreConfig {
        retry: false,
        ..Default::default()
    })
    .await;
    // Recover every failure once, in place (the retry plugin's backoff is tested elsewhere).
    let _ = h
        .ctx
        .on_waterfall::<dsh_agent::events::AgentRequestError, _>(|_, _| async {
            Ok(Some(dsh_agent::events::RecoveryAction::Retry))
        })
        .unwrap();
    h.tool(TestTool::new("echo", &h.log).parallel());
    // A route switch mid-conversation, so the header changes between requests.
    let _ = h
        .ctx
        .on_waterfall::<AgentRequest, _>(|mut p, next| async move {
            if p.turn == 2 {
                p.config.model = "other-model".into();
                p.config.temperature = Some(0.5);
            }
            next.run(p).await
        })
        .unwrap();
    h.script(Script::tool_calls([
        ("c1", "echo", r#"{"text":"a"}"#),
        ("c2", "echo", "{}"),
    ]));
    h.script(Script::error_code(FailureCode::Server, "flaky"));
    h.script(Script::reasoning_then_text("hmm", "first answer"));
    h.script(Script::text("second answer"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("one")).unwrap();
    a.when_idle().await;
    a.inject(Message::plugin_text("p", "context")).unwrap();
    a.followup(Message::user_text("two")).unwrap();
    a.when_idle().await;

    let sent = h.adapter.requests();
    let rebuilt = rebuild_requests(&a.session().events());
    assert_eq!(sent.len(), 4);
    assert_eq!(rebuilt.len(), sent.len());
    for (s, r) in sent.iter().zip(&rebuilt) {
        assert_eq!(
            serde_json::to_string(&s.config).unwrap(),
            serde_json::to_string(&r.config).unwrap()
        );
        assert_eq!(s.system, r.system);
        assert_eq!(
            serde_json::to_string(&s.tools).unwrap(),
            serde_json::to_string(&r.tools).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&s.messages).unwrap(),
            serde_json::to_string(&r.messages).unwrap()
        );
    }
    // One initial header, one change for the route switch; retries and history growth log
    // nothing new.
    let reasons: Vec<HeaderReason> = a
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RequestHeader(h) => Some(h.reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, [HeaderReason::Initial, HeaderReason::Change]);
}

#[tokio::test]
async fn a_new_loop_instance_over_a_seeded_log_anchors_with_one_resume_header() {
    let h = harness().await;
    h.script(Script::text("a"));
    h.script(Script::text("b"));
    let first = h.agent().await;
    first.agent().followup(Message::user_text("one")).unwrap();
    first.agent().when_idle().await;
    let seed: Vec<SessionEvent> = first
        .agent()
        .session()
        .events()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    let second = h
        .core
        .registry
        .create(
            &h.ctx,
            CreateAgentOptions {
                session_id: Some("continued".into()),
                seed: Some(seed),
                agent_options: AgentOptions::route("scripted", "test-model"),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    second.agent().followup(Message::user_text("two")).unwrap();
    second.agent().when_idle().await;
    let reasons: Vec<HeaderReason> = second
        .agent()
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RequestHeader(h) => Some(h.reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, [HeaderReason::Initial, HeaderReason::Resume]);
    // The resumed request extends the previous one's prefix (KV-cache alignment).
    let sent = h.adapter.requests();
    let prev = serde_json::to_string(&sent[0].messages).unwrap();
    let next = serde_json::to_string(&sent[1].messages[..sent[0].messages.len()]).unwrap();
    assert_eq!(prev, next);
}

/// No two user-role messages in a row, tool results aside (they answer the assistant's calls).
fn assert_alternating(messages: &[std::sync::Arc<Message>]) {
    let plain_user = |m: &Message| {
        m.role == Role::User
            && !m
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    };
    for pair in messages.windows(2) {
        assert!(
            !(plain_user(&pair[0]) && plain_user(&pair[1])),
            "two user messages in a row: {messages:?}"
        );
    }
}

#[tokio::test]
async fn after_a_turn_without_an_assistant_message_requests_still_alternate_roles() {
    let h = harness_with(dsh_agent_loop::CoreConfig {
        retry: false,
        ..Default::default()
    })
    .await;
    // The first turn fails before any assistant message; the second follows it.
    h.script(Script::error_code(FailureCode::InvalidRequest, "refused"));
    h.script(Script::text("answer"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("one")).unwrap();
    bounded(a.when_idle()).await;
    a.inject(Message::plugin_text("p", "context")).unwrap();
    a.followup(Message::user_text("two")).unwrap();
    bounded(a.when_idle()).await;

    let sent = h.adapter.requests();
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_alternating(&request.messages);
    }
    assert_eq!(request_texts(&h, 1), ["one|context|two"]);
    // The log still says exactly what happened: separate prompts, the first turn an error.
    assert_eq!(user_texts(a), ["one", "context", "two"]);
    // And the requests rebuilt from it are what was sent.
    let rebuilt = rebuild_requests(&a.session().events());
    assert_eq!(rebuilt.len(), sent.len());
    for (s, r) in sent.iter().zip(&rebuilt) {
        assert_eq!(
            serde_json::to_string(&s.messages).unwrap(),
            serde_json::to_string(&r.messages).unwrap()
        );
    }
}
