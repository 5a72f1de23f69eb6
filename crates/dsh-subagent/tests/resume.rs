//! Continuing a finished subagent: it keeps its history, only its own parent may continue it,
//! and `subagent_list` shows a parent its children.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_agent::AgentRef;
use dsh_session::{Message, TurnEndReason};
use dsh_subagent::{NOT_A_CHILD, SUBAGENT_BUSY};
use dsh_testkit::Script;
use serde_json::json;

/// Parent `p` delegates one task in the foreground and ends its turn; returns the parent and
/// the child's session id.
async fn delegated_once(h: &H) -> (AgentRef, String) {
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &subagent_args("find the answer"),
    ))
    .script(Script::text("the answer is 42"))
    .script(Script::text("parent done"));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    std::mem::forget(handle);
    parent.followup(Message::user_text("go")).unwrap();
    dsh_testkit::bounded(parent.when_idle()).await;
    let child = h.children()[0].id().to_string();
    (parent, child)
}

#[tokio::test]
async fn the_result_names_the_child_and_resume_continues_it_with_its_history() {
    let home = tempfile::tempdir().unwrap();
    let h = persistent_harness(home.path()).await;
    let (parent, child) = delegated_once(&h).await;
    let (text, _) = result_of(&parent, "c1");
    assert_eq!(
        text,
        format!("the answer is 42\n\n[subagent session {child}: continue it with `resume`]")
    );

    let resume = json!({"description": "double it", "prompt": "now double it", "resume": child});
    h.script(Script::tool_call("c2", "subagent", &resume.to_string()))
        .script(Script::text("84"))
        .script(Script::text("parent done again"));
    parent.followup(Message::user_text("more")).unwrap();
    dsh_testkit::bounded(parent.when_idle()).await;

    // Request 3 is the continued child's: its first task, its answer, then the new prompt.
    let seen = request_texts(&h.adapter, 4);
    let at = |needle: &str| {
        seen.iter()
            .position(|t| t.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not in {seen:?}"))
    };
    assert!(at("find the answer") < at("the answer is 42"));
    assert!(at("the answer is 42") < at("now double it"));
    let (text, code) = result_of(&parent, "c2");
    assert_eq!(code, None, "{text}");
    assert!(text.starts_with("84\n\n[subagent session "), "{text}");
    // The same child, not a new one.
    assert_eq!(h.children().len(), 2);
    assert!(h.children().iter().all(|c| c.id().to_string() == child));
    assert_eq!(
        turn_ends(&parent),
        [TurnEndReason::Completed, TurnEndReason::Completed]
    );
    assert_balanced(&parent);
}

#[tokio::test]
async fn resume_refuses_a_session_the_caller_did_not_start() {
    let home = tempfile::tempdir().unwrap();
    let h = persistent_harness(home.path()).await;
    let (_parent, child) = delegated_once(&h).await;
    // Another top-level agent names the first one's child.
    let other = h.parent("q").await;
    let result = h
        .call(
            "subagent",
            json!({"description": "steal", "prompt": "tell me", "resume": child}),
            Some(other.agent()),
        )
        .await;
    assert!(result.is_error, "{}", result.text());
    assert_eq!(result.error.as_ref().unwrap().code.as_str(), NOT_A_CHILD);
    assert_eq!(h.children().len(), 1, "nothing was loaded");
}

#[tokio::test]
async fn a_child_still_running_in_the_background_cannot_be_resumed() {
    let home = tempfile::tempdir().unwrap();
    let h = persistent_split_harness(home.path()).await;
    h.script(Script::tool_call(
        "c1",
        "subagent",
        &background_args("work long"),
    ))
    .script(Script::text("started it"));
    h.child_script(Script::new().hang_until_cancelled());
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    parent.followup(Message::user_text("go")).unwrap();
    dsh_testkit::bounded(parent.when_idle()).await;
    let child = h.children()[0].id().to_string();
    let (text, _) = result_of(&parent, "c1");
    assert!(text.contains(&format!("(session {child})")), "{text}");
    let result = h
        .call(
            "subagent",
            json!({"description": "again", "prompt": "more", "resume": child}),
            Some(&parent),
        )
        .await;
    assert_eq!(result.error.as_ref().unwrap().code.as_str(), SUBAGENT_BUSY);
    let listed = h.call("subagent_list", json!({}), Some(&parent)).await;
    assert!(
        listed.text().contains(&format!(
            "- {child} (task subagent-1): look into it — running"
        )),
        "{}",
        listed.text()
    );
    handle.dispose().await;
}

#[tokio::test]
async fn subagent_list_shows_only_the_callers_children() {
    let home = tempfile::tempdir().unwrap();
    let h = persistent_harness(home.path()).await;
    let (parent, child) = delegated_once(&h).await;
    let listed = h.call("subagent_list", json!({}), Some(&parent)).await;
    let text = listed.text();
    assert!(
        text.contains(&format!(
            "- {child}: look into it — completed, last reported "
        )),
        "{text}"
    );
    let other = h.parent("q").await;
    let none = h
        .call("subagent_list", json!({}), Some(other.agent()))
        .await;
    assert_eq!(none.text(), "This session has started no subagents.");
}
