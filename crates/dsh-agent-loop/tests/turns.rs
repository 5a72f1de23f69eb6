//! Turn and step behaviour (spec/core.md §5, acceptance §10.7–10.8).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::events::{AgentErrorReported, AgentPreStep, AgentTurnStopping, PreStepDecision};
use dsh_agent::*;
use dsh_kernel::BoxError;
use dsh_session::*;
use dsh_testkit::Script;
use futures::FutureExt;
use parking_lot::Mutex;

#[tokio::test]
async fn simple_turn_logs_boundaries_in_order() {
    let h = harness().await;
    h.script(Script::text("hi"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("hello")).unwrap();
    a.when_idle().await;
    assert_eq!(
        boundaries(a),
        [
            "turn/start",
            "step/start",
            "user/message",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(
        types(a)[0],
        "agent/inbox/spliced",
        "the insert is logged first"
    );
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
    let roles: Vec<Role> = a
        .session()
        .derive_messages()
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    let usage = a.session().events().iter().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => m.usage.clone(),
        _ => None,
    });
    assert!(usage.is_some());
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
    assert_balanced(a);
}

#[tokio::test]
async fn every_chunk_is_logged_before_assembly() {
    let h = harness().await;
    h.script(Script::text("abc"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    let chunks = types(a).iter().filter(|t| *t == "assistant/chunk").count();
    assert_eq!(chunks, 7);
    let message = a
        .session()
        .events()
        .into_iter()
        .find_map(|e| match &e.kind {
            EventKind::AssistantMessage(m) => Some((m.message.text(), e.source_event_seqs.clone())),
            _ => None,
        });
    let (text, seqs) = message.unwrap();
    assert_eq!(text, "abc");
    assert_eq!(seqs.unwrap().len(), 7);
}

#[tokio::test]
async fn waking_send_on_an_idle_agent_opens_the_turn_and_claims_before_returning() {
    let h = harness().await;
    let gate = dsh_testkit::Gate::new();
    h.script(
        Script::new()
            .wait_for(&gate)
            .chunks([])
            .then(dsh_testkit::Step::Chunk(StreamChunk::Finish {
                reason: FinishReason::Stop,
                replay_state: None,
            })),
    );
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("p")).unwrap();
    // Synchronously: insert, running, turn/start, claim.
    assert_eq!(a.status(), AgentStatus::Running);
    assert_eq!(
        types(a),
        ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced"]
    );
    assert!(!a.inbox().has_pending());
    gate.release();
    a.when_idle().await;
}

#[tokio::test]
async fn a_burst_of_followups_runs_one_turn_per_message_with_one_status_pair() {
    let h = harness().await;
    for i in 0..4 {
        h.script(Script::text(&format!("r{i}")));
    }
    let handle = h.agent().await;
    let a = handle.agent();
    for i in 0..4 {
        a.followup(Message::user_text(format!("m{i}"))).unwrap();
    }
    a.when_idle().await;
    let turns: Vec<u64> = a
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnStart(t) => Some(t.turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 2, 3, 4]);
    assert_eq!(user_texts(a), ["m0", "m1", "m2", "m3"]);
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
}

#[tokio::test]
async fn tool_round_trip_sends_the_result_in_the_second_request() {
    let h = harness().await;
    h.tool(TestTool::new("echo", &h.log));
    h.script(Script::tool_call("c1", "echo", r#"{"text":"ping"}"#));
    h.script(Script::text("done"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("use the tool")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 2);
    assert_eq!(
        request_texts(&h, 1),
        ["use the tool", "call:c1", "result:c1:echo: ping"]
    );
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
    let steps = types(a).iter().filter(|t| *t == "step/start").count();
    assert_eq!(steps, 2);
    assert!(h.adapter.violations().is_empty());
    assert_balanced(a);
}

#[tokio::test]
async fn idle_inject_only_logs_a_splice_and_enters_the_next_turn() {
    let h = harness().await;
    h.script(Script::text("ok"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.inject(Message::plugin_text("p", "context")).unwrap();
    assert_eq!(types(a), ["agent/inbox/spliced"]);
    assert_eq!(a.status(), AgentStatus::Idle);
    a.followup(Message::user_text("prompt")).unwrap();
    a.when_idle().await;
    // Next-step context precedes the prompt in the first batch.
    assert_eq!(user_texts(a), ["context", "prompt"]);
}

#[tokio::test]
async fn idle_steer_starts_a_turn_and_later_steering_enters_the_next_step() {
    let h = harness().await;
    let gate = dsh_testkit::Gate::new();
    h.script(gated(&gate, Script::text("first")));
    h.script(Script::text("second"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.steer(Message::user_text("s1")).unwrap();
    assert_eq!(a.status(), AgentStatus::Running);
    gate.reached().await;
    a.steer(Message::user_text("s2")).unwrap();
    gate.release();
    a.when_idle().await;
    let turn_starts = types(a).iter().filter(|t| *t == "turn/start").count();
    assert_eq!(turn_starts, 1);
    assert_eq!(h.adapter.requests().len(), 2);
    assert_eq!(request_texts(&h, 1), ["s1", "first", "s2"]);
}

#[tokio::test]
async fn pre_step_rejection_blocks_the_turn_without_a_request() {
    let h = harness().await;
    let _ = h
        .ctx
        .on_waterfall::<AgentPreStep, _>(|_, _| async { Ok(PreStepDecision::Reject) })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("destructive")).unwrap();
    a.when_idle().await;
    assert_eq!(boundaries(a), ["turn/start", "turn/end"]);
    assert_eq!(turn_ends(a), [TurnEndReason::Blocked]);
    assert!(user_texts(a).is_empty());
    assert!(h.adapter.requests().is_empty());
}

#[tokio::test]
async fn empty_first_enter_completes_the_turn_with_no_step() {
    let h = harness().await;
    let _ = h
        .ctx
        .on_waterfall::<AgentPreStep, _>(|_, _| async { Ok(PreStepDecision::Enter(vec![])) })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("x")).unwrap();
    a.when_idle().await;
    assert_eq!(boundaries(a), ["turn/start", "turn/end"]);
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn a_throwing_pre_step_listener_ends_the_turn_error_and_parks_queued_work() {
    let h = harness().await;
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let e = errors.clone();
    let _ = h
        .ctx
        .on::<AgentErrorReported>(move |n| e.lock().push(n.error.message.clone()))
        .unwrap();
    let _ = h
        .ctx
        .on_waterfall::<AgentPreStep, _>(|_, _| async {
            Err::<PreStepDecision, BoxError>("pre-step exploded".into())
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("a")).unwrap();
    a.followup(Message::user_text("b")).unwrap();
    a.when_idle().await;
    let ends = turn_ends(a);
    assert_eq!(ends.len(), 1);
    assert!(
        matches!(&ends[0], TurnEndReason::Error { error } if error.code == FailureCode::Unknown && error.message.contains("pre-step exploded"))
    );
    assert_eq!(*errors.lock(), ["pre-step exploded"]);
    assert_eq!(
        a.inbox().next_turn().len(),
        1,
        "the queued prompt stays parked"
    );
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
    assert_balanced(a);
}

#[tokio::test]
async fn turn_stopping_steering_continues_the_turn_with_another_step() {
    let h = harness().await;
    for t in ["one", "two", "three"] {
        h.script(Script::text(t));
    }
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    let _ = h
        .ctx
        .on_serial::<AgentTurnStopping, _>(move |p| {
            let mut n = c.lock();
            *n += 1;
            if *n < 3 {
                p.agent
                    .steer(Message::user_text(format!("again {n}")))
                    .unwrap();
            }
            async { Ok(()) }
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 3);
    assert_eq!(types(a).iter().filter(|t| *t == "turn/start").count(), 1);
    assert_eq!(types(a).iter().filter(|t| *t == "step/start").count(), 3);
}

#[tokio::test]
async fn a_throwing_turn_stopping_listener_ends_the_turn_error() {
    let h = harness().await;
    h.script(Script::text("x"));
    let _ = h
        .ctx
        .on_serial::<AgentTurnStopping, _>(|_| async {
            Err::<(), BoxError>("stop hook failed".into())
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert!(matches!(&turn_ends(a)[0], TurnEndReason::Error { .. }));
    assert_balanced(a);
}

#[tokio::test]
async fn max_tokens_is_sticky_within_a_turn_and_drops_tool_calls() {
    let h = harness().await;
    h.tool(TestTool::new("echo", &h.log));
    h.script(Script::max_tokens("trunc"));
    h.script(Script::text("next turn"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("one")).unwrap();
    a.when_idle().await;
    a.followup(Message::user_text("two")).unwrap();
    a.when_idle().await;
    assert_eq!(
        turn_ends(a),
        [TurnEndReason::MaxTokens, TurnEndReason::Completed]
    );
}

#[tokio::test]
async fn a_finish_error_ends_the_turn_error_with_the_exact_failure_and_no_message() {
    let h = harness_with(dsh_agent_loop::CoreConfig {
        retry: false,
        ..Default::default()
    })
    .await;
    h.script(Script::error_code(FailureCode::Auth, "bad key"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("x")).unwrap();
    a.when_idle().await;
    let ends = turn_ends(a);
    assert!(
        matches!(&ends[0], TurnEndReason::Error { error } if error.code == FailureCode::Auth && error.message == "bad key")
    );
    assert!(!types(a).contains(&"assistant/message".to_owned()));
    assert_balanced(a);
}

#[tokio::test]
async fn an_agent_without_a_model_fails_the_turn_naming_the_fix() {
    let h = harness().await;
    let handle = h
        .core
        .registry
        .create(&h.ctx, CreateAgentOptions::default())
        .await
        .unwrap();
    let a = handle.agent();
    a.followup(Message::user_text("x")).unwrap();
    a.when_idle().await;
    let ends = turn_ends(a);
    let TurnEndReason::Error { error } = &ends[0] else {
        panic!("{ends:?}")
    };
    assert!(error.message.contains("has no provider/model"));
    assert!(error.message.contains("agent/request"));
}

#[tokio::test]
async fn turn_numbering_continues_in_a_seeded_session() {
    let h = harness().await;
    h.script(Script::text("a"));
    h.script(Script::text("b"));
    let handle = h.agent().await;
    handle.agent().followup(Message::user_text("one")).unwrap();
    handle.agent().when_idle().await;
    let seed: Vec<SessionEvent> = handle
        .agent()
        .session()
        .events()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    let fork = h
        .core
        .registry
        .create(
            &h.ctx,
            CreateAgentOptions {
                session_id: Some("fork".into()),
                seed: Some(seed),
                agent_options: AgentOptions::route("scripted", "m"),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    fork.agent().followup(Message::user_text("two")).unwrap();
    fork.agent().when_idle().await;
    let turns: Vec<u64> = fork
        .agent()
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnStart(t) => Some(t.turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 2]);
    // The fork's first request replays the inherited history.
    assert_eq!(request_texts(&h, 1), ["one", "a", "two"]);
}

#[tokio::test]
async fn agent_status_listener_failure_is_contained() {
    let h = harness().await;
    h.script(Script::text("x"));
    let _ = h
        .ctx
        .on::<dsh_agent::events::AgentStatusChanged>(|_| panic!("status listener explodes"))
        .unwrap();
    let handle = h.agent().await;
    handle.agent().followup(Message::user_text("go")).unwrap();
    handle.agent().when_idle().await;
    assert_eq!(turn_ends(handle.agent()), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn when_idle_is_immediate_on_an_idle_agent() {
    let h = harness().await;
    let handle = h.agent().await;
    handle.agent().when_idle().now_or_never().unwrap();
}

#[tokio::test]
async fn runtime_context_is_materialized_once_and_again_only_when_it_changes() {
    use dsh_prompt::{ContextSection, SectionText};
    let h = harness().await;
    for _ in 0..4 {
        h.script(Script::text("ok"));
    }
    let value = Arc::new(Mutex::new("branch: main".to_owned()));
    let v = value.clone();
    let reg = h
        .core
        .prompt
        .context(
            &h.ctx,
            ContextSection::new("git", 10, SectionText::dynamic(move |_| v.lock().clone())),
        )
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    let snapshots = |a: &AgentRef| -> Vec<String> {
        a.session()
            .events()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::UserMessage(m)
                    if matches!(&m.source, MessageSource::Plugin { plugin, .. } if plugin == "dsh-system-prompt") =>
                {
                    Some(m.text())
                }
                _ => None,
            })
            .collect()
    };
    for (i, change) in [None, None, Some("branch: dev")].into_iter().enumerate() {
        if let Some(c) = change {
            *value.lock() = c.to_owned();
        }
        a.followup(Message::user_text(format!("p{i}"))).unwrap();
        a.when_idle().await;
    }
    reg.dispose().await;
    a.followup(Message::user_text("p3")).unwrap();
    a.when_idle().await;
    let s = snapshots(a);
    assert_eq!(s.len(), 3, "{s:?}");
    assert!(s[0].contains("branch: main"));
    assert!(s[1].contains("branch: dev"));
    assert!(s[2].contains("Current runtime context: none"));
    // The system prompt never carries the runtime context.
    let systems: Vec<_> = h
        .adapter
        .requests()
        .iter()
        .map(|r| r.system.clone())
        .collect();
    assert!(systems.windows(2).all(|w| w[0] == w[1]));
}
