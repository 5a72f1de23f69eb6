//! The retry plugin wired to `agent/request-error` (paused time drives the backoff).

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_agent::*;
use dsh_session::*;
use dsh_testkit::Script;

fn retries(a: &AgentRef) -> Vec<(String, u64, u64)> {
    a.session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name.starts_with("llm/retry") => Some((
                type_name.clone(),
                data["turn"].as_u64().unwrap(),
                data["step"].as_u64().unwrap(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn retries_reissue_the_request_inside_the_same_turn_and_step() {
    let h = harness().await;
    h.script(Script::error_code(FailureCode::RateLimit, "slow down"));
    h.script(Script::error_code(FailureCode::Server, "oops"));
    h.script(Script::text("recovered"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 3);
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
    assert_eq!(types(a).iter().filter(|t| *t == "turn/start").count(), 1);
    assert_eq!(types(a).iter().filter(|t| *t == "step/start").count(), 1);
    assert_eq!(
        retries(a),
        [
            ("llm/retry".into(), 1, 1),
            ("llm/retry-started".into(), 1, 1),
            ("llm/retry".into(), 1, 1),
            ("llm/retry-started".into(), 1, 1)
        ]
    );
    // One completion anchor, citing only the successful attempt's chunks.
    let messages: Vec<_> = a
        .session()
        .events()
        .iter()
        .filter(|e| e.type_name() == "assistant/message")
        .cloned()
        .collect();
    assert_eq!(messages.len(), 1);
    let cited = messages[0].source_event_seqs.clone().unwrap();
    let first_ok_chunk = cited[0];
    let failed_chunks = a
        .session()
        .events()
        .iter()
        .filter(|e| e.type_name() == "assistant/chunk" && e.seq < first_ok_chunk)
        .count();
    assert_eq!(
        failed_chunks, 2,
        "failed attempts' chunks stay in the log, uncited"
    );
    assert_eq!(
        h.statuses_of("s"),
        [AgentStatus::Running, AgentStatus::Idle]
    );
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_retry_budget_makes_the_failure_terminal() {
    let h = harness().await;
    for _ in 0..6 {
        h.script(Script::error_code(FailureCode::RateLimit, "slow down"));
    }
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 6);
    assert!(
        matches!(&turn_ends(a)[0], TurnEndReason::Error { error } if error.code == FailureCode::RateLimit)
    );
    assert_balanced(a);
}

#[tokio::test(start_paused = true)]
async fn non_retryable_failures_are_not_retried() {
    let h = harness().await;
    h.script(Script::error_code(FailureCode::Auth, "bad key"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1);
    assert!(retries(a).is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancel_during_backoff_writes_no_retry_started_and_aborts_the_turn() {
    let h = harness().await;
    h.script(Script::error_code(FailureCode::Server, "oops"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    until(a, is("llm/retry")).await;
    a.cancel(CancelCause::User, CancelOptions::default());
    a.when_idle().await;
    assert_eq!(retries(a), [("llm/retry".into(), 1, 1)]);
    assert_eq!(turn_ends(a), [aborted(CancelCause::User)]);
    assert_eq!(h.adapter.requests().len(), 1);
}
