//! Cancelling a parent cancels the agents it owns, with cause `parent`.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use dsh_agent::{AgentStatus, CancelCause, CancelOptions};
use dsh_session::{Message, MessageSource, TurnEndReason};
use dsh_subagent::{SUBAGENT_CANCELLED, SubagentStop, SubagentTaskId, SubagentTaskStatus};
use dsh_testkit::Script;
use tokio_util::sync::CancellationToken;

fn aborted(cause: CancelCause) -> TurnEndReason {
    TurnEndReason::Aborted { reason: cause }
}

#[tokio::test]
async fn parent_cancel_cascades_to_a_foreground_child_with_cause_parent() {
    let h = harness().await;
    let (_handle, parent, child) = h.delegating_to_a_hanging_child("working on").await;
    assert!(h.core.registry.is_owned_by(child.id(), &parent));
    parent.cancel(CancelCause::User, CancelOptions::default());
    parent.when_idle().await;
    assert_eq!(turn_ends(&child), [aborted(CancelCause::Parent)]);
    assert_eq!(turn_ends(&parent), [aborted(CancelCause::User)]);
    assert_balanced(&parent);
    assert_balanced(&child);
    let (text, code) = result_of(&parent, "c1");
    assert_eq!(code.as_deref(), Some(SUBAGENT_CANCELLED));
    assert!(
        text.starts_with("Error: subagent run was cancelled\n\nPartial output:\nworking on"),
        "{text}"
    );
    assert!(
        h.core.registry.get(child.id()).is_none(),
        "the child was disposed"
    );
    assert!(!h.core.registry.is_owned_by(child.id(), &parent));
    assert!(h.adapter.violations().is_empty());
}

#[tokio::test]
async fn parent_cancel_stops_a_background_child_without_waking_the_parent() {
    let h = split_harness().await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &background_args("work long"),
    ))
    .script(Script::partial_then_hang("meanwhile"));
    h.child_script(Script::partial_then_hang("child working"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    let mut inserts = inbox_inserts(&h, &parent);
    parent.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(2).await;
    h.child_adapter.wait_for_requests(1).await;
    let child = h.children()[0].clone();
    until(&child, is("assistant/chunk")).await;
    assert_eq!(h.core.registry.children_of(&parent).len(), 1);
    assert!(h.core.registry.is_owned_by(child.id(), &parent));

    parent.cancel(CancelCause::User, CancelOptions::default());
    parent.when_idle().await;
    // The child's end is announced by a notice: injected, never a wake-up, because its owner
    // was just stopped by a person.
    let notice = loop {
        let m = inserts.recv().await.unwrap();
        if matches!(&m.source, MessageSource::Plugin { plugin, .. } if plugin == "dsh-subagent") {
            break m;
        }
    };
    assert!(
        notice.text().contains("[status: cancelled]"),
        "{}",
        notice.text()
    );
    assert_eq!(turn_ends(&child), [aborted(CancelCause::Parent)]);
    assert_eq!(turn_ends(&parent), [aborted(CancelCause::User)]);
    assert_eq!(
        parent.status(),
        AgentStatus::Idle,
        "the parent was not woken"
    );
    assert_eq!(
        parent.inbox().next_step().len(),
        1,
        "the notice waits for the next turn"
    );
    assert_balanced(&parent);
    assert_balanced(&child);
    let snapshot = h
        .runtime
        .read(&SubagentTaskId::new("subagent-1"), Some(parent.id()))
        .unwrap();
    let SubagentTaskStatus::Finished(outcome) = snapshot.status else {
        panic!("the run is over");
    };
    assert_eq!(
        outcome.stop,
        SubagentStop::Cancelled {
            cause: Some(CancelCause::Parent)
        }
    );
    assert!(h.core.registry.get(child.id()).is_none());
}

#[tokio::test]
async fn is_owned_by_reports_the_live_relation_of_a_background_child() {
    let h = split_harness().await;
    h.script(Script::tool_call("c1", "subagent", &background_args("x")))
        .script(Script::text("started it"));
    h.child_script(Script::partial_then_hang("child"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    let child = h.children()[0].clone();
    assert!(h.core.registry.is_owned_by(child.id(), &parent));
    assert!(
        h.core
            .registry
            .roots()
            .iter()
            .all(|root| root.id() != child.id()),
        "a child is not a root"
    );
    let id = SubagentTaskId::new("subagent-1");
    assert_eq!(h.runtime.owner_of(&id).as_ref(), Some(parent.id()));
    h.runtime.kill(&id, Some(parent.id())).unwrap();
    h.runtime
        .wait(
            &id,
            Some(parent.id()),
            &CancellationToken::new(),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    assert!(!h.core.registry.is_owned_by(child.id(), &parent));
    assert!(h.core.registry.get(child.id()).is_none());
}

#[tokio::test]
async fn the_cascade_reaches_every_generation_below_the_cancelled_agent() {
    let h = harness().await;
    h.script(Script::tool_call(
        "r1",
        "subagent",
        &subagent_args("level one"),
    ))
    .script(Script::tool_call(
        "k1",
        "subagent",
        &subagent_args("level two"),
    ))
    .script(Script::partial_then_hang("grandchild working"));
    let handle = h.parent("root").await;
    let root = handle.agent().clone();
    root.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(3).await;
    let generations = h.children();
    let (child, grandchild) = (generations[0].clone(), generations[1].clone());
    until(&grandchild, is("assistant/chunk")).await;
    assert!(h.core.registry.is_owned_by(grandchild.id(), &child));
    assert!(!h.core.registry.is_owned_by(grandchild.id(), &root));

    root.cancel(CancelCause::User, CancelOptions::default());
    root.when_idle().await;

    assert_eq!(turn_ends(&grandchild), [aborted(CancelCause::Parent)]);
    assert_eq!(turn_ends(&child), [aborted(CancelCause::Parent)]);
    assert_eq!(turn_ends(&root), [aborted(CancelCause::User)]);
    for agent in [&root, &child, &grandchild] {
        assert_balanced(agent);
    }
    assert_eq!(h.core.registry.list().len(), 1, "only the root is left");
}
