//! The delegation depth limit: beyond it, a clear error result and nothing created.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_session::{Message, SessionMeta, SessionOrigin, TurnEndReason};
use dsh_subagent::{SUBAGENT_DEPTH_EXCEEDED, SubagentConfig};
use dsh_testkit::Script;

#[tokio::test]
async fn a_child_at_the_depth_limit_gets_an_error_result_and_nothing_is_created() {
    let h = harness().await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &subagent_args("go deeper"),
    ))
    .script(Script::text("I will do it myself"));
    let handle = h
        .agent_with(
            "deep",
            SessionMeta {
                parent_session: Some("above".into()),
                origin: Some(SessionOrigin::Subagent),
                delegation_depth: 3,
                ..SessionMeta::default()
            },
        )
        .await;
    let agent = handle.agent().clone();
    agent.followup(Message::user_text("task")).unwrap();
    agent.when_idle().await;
    let (text, code) = result_of(&agent, "c1");
    assert_eq!(code.as_deref(), Some(SUBAGENT_DEPTH_EXCEEDED));
    assert!(
        text.contains("delegation depth 3") && text.contains("the limit is 3"),
        "{text}"
    );
    assert_eq!(h.created.lock().len(), 1, "no child was created");
    assert_eq!(
        h.adapter.requests().len(),
        2,
        "only the agent itself asked the model"
    );
    assert_eq!(turn_ends(&agent), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn nested_delegation_stops_at_the_configured_depth() {
    let h = harness_with(SubagentConfig {
        max_depth: 1,
        ..SubagentConfig::default()
    })
    .await;
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
    .script(Script::text("could not delegate, did it myself"))
    .script(Script::text("root done"));
    let handle = h.parent("root").await;
    let root = handle.agent().clone();
    root.followup(Message::user_text("go")).unwrap();
    root.when_idle().await;
    let children = h.children();
    assert_eq!(children.len(), 1, "the depth-1 child could not delegate");
    assert_eq!(children[0].session().header().delegation_depth, 1);
    assert_eq!(
        result_of(&children[0], "k1").1.as_deref(),
        Some(SUBAGENT_DEPTH_EXCEEDED)
    );
    assert_eq!(
        report_of(&root, "r1").0,
        "could not delegate, did it myself"
    );
}

#[tokio::test]
async fn a_zero_depth_limit_forbids_delegation() {
    let h = harness_with(SubagentConfig {
        max_depth: 0,
        ..SubagentConfig::default()
    })
    .await;
    h.script(Script::tool_call("c1", "subagent", &subagent_args("x")))
        .script(Script::text("ok"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    parent.when_idle().await;
    assert_eq!(
        result_of(&parent, "c1").1.as_deref(),
        Some(SUBAGENT_DEPTH_EXCEEDED)
    );
    assert!(h.children().is_empty());
}
