//! Disposing a parent disposes the agents it owns first (child-first teardown).

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_agent::CancelCause;
use dsh_session::{Message, TurnEndReason};
use dsh_testkit::Script;

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry} missing from {log:?}"))
}

#[tokio::test]
async fn disposing_the_parent_tears_a_background_child_down_before_the_parents_session_detaches() {
    let h = split_harness().await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &background_args("work long"),
    ))
    .script(Script::text("started it"));
    h.child_script(Script::partial_then_hang("child working"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    h.child_adapter.wait_for_requests(1).await;
    let child = h.children()[0].clone();
    until(&child, is("assistant/chunk")).await;

    handle.dispose().await;

    let log = h.disposals();
    let child_session = position(&log, &format!("session:{}", child.id()));
    assert!(position(&log, &format!("agent:{}", child.id())) < child_session);
    assert!(child_session < position(&log, "agent:p"), "{log:?}");
    assert!(position(&log, "agent:p") < position(&log, "session:p"));
    assert!(
        h.core.registry.list().is_empty(),
        "no registered agent is left"
    );
    assert!(
        h.core.store.list().is_empty(),
        "no session-store entry is left"
    );
    assert_eq!(
        turn_ends(&child),
        [TurnEndReason::Aborted {
            reason: CancelCause::Parent
        }]
    );
    assert_balanced(&child);
    assert_balanced(&parent);
    assert!(
        user_messages(&parent)
            .iter()
            .all(|m| !m.text().contains("background subagent")),
        "no notice reaches a dying parent"
    );
}

#[tokio::test]
async fn disposing_a_parent_mid_delegation_disposes_the_foreground_child_first() {
    let h = harness().await;
    let (handle, parent, child) = h.delegating_to_a_hanging_child("child working").await;

    handle.dispose().await;

    let log = h.disposals();
    assert!(
        position(&log, &format!("session:{}", child.id())) < position(&log, "session:p"),
        "{log:?}"
    );
    assert!(h.core.registry.list().is_empty());
    assert!(h.core.store.list().is_empty());
    assert_eq!(
        turn_ends(&parent),
        [TurnEndReason::Aborted {
            reason: CancelCause::Disposed
        }]
    );
    assert_eq!(
        turn_ends(&child),
        [TurnEndReason::Aborted {
            reason: CancelCause::Parent
        }]
    );
    assert_balanced(&parent);
    assert_balanced(&child);
}

#[tokio::test]
async fn unmounting_the_plugin_that_provided_the_runtime_stops_its_background_runs() {
    let mut h = split_harness().await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &background_args("work long"),
    ))
    .script(Script::text("started it"));
    h.child_script(Script::partial_then_hang("child working"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    h.child_adapter.wait_for_requests(1).await;
    let child = h.children()[0].clone();

    h.plugin.take().unwrap().dispose().await;

    assert!(
        h.core.registry.get(child.id()).is_none(),
        "the run was stopped and awaited"
    );
    assert_eq!(
        turn_ends(&child),
        [TurnEndReason::Aborted {
            reason: CancelCause::Parent
        }]
    );
    assert!(dsh_subagent::SubagentRuntime::of(&h.ctx).is_none());
    assert_eq!(h.core.registry.list().len(), 1, "the parent lives on");
}
