//! Background delegation: started at once, owned by the runtime, announced on completion, read
//! behind the owner fence.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use dsh_agent::{AgentRef, AgentStatus, CancelCause};
use dsh_session::{Message, MessageSource, TurnEndReason};
use dsh_subagent::{
    FOREIGN_TASK, SubagentConfig, SubagentError, SubagentPlugin, SubagentStop, SubagentTaskId,
    SubagentTaskStatus, UNKNOWN_TASK,
};
use dsh_testkit::{Gate, Script};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn output_args(id: &str) -> String {
    json!({ "task_id": id }).to_string()
}

fn is_notice(m: &Message) -> bool {
    matches!(&m.source, MessageSource::Plugin { plugin, .. } if plugin == "dsh-subagent")
}

/// The parent starts one background subagent whose model is parked at `gate`, then finishes
/// its turn; returns once the parent is idle.
async fn started(h: &H, gate: &Gate) -> AgentRef {
    h.script(Script::tool_call("c1", "subagent", &background_args("dig")))
        .script(Script::text("waiting for it"));
    h.child_script(gated(gate, Script::text("child result")));
    let handle = h.parent("p").await;
    let parent = handle.agent().clone();
    std::mem::forget(handle);
    parent.followup(Message::user_text("go")).unwrap();
    turns_ended(&parent, 1).await;
    parent.when_idle().await;
    parent
}

#[tokio::test]
async fn background_delegation_notifies_the_parent_and_subagent_output_returns_the_result() {
    let h = split_harness().await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    h.script(Script::tool_call(
        "c2",
        "subagent_output",
        &output_args("subagent-1"),
    ))
    .script(Script::text("all done"));
    let child = h.children()[0].clone();
    assert_eq!(
        result_of(&parent, "c1").0,
        format!(
            "started background subagent subagent-1 (session {})",
            child.id()
        )
    );
    assert!(h.core.registry.is_owned_by(child.id(), &parent));

    gate.release();
    // The notice wakes the idle parent: a second turn reads the result.
    turns_ended(&parent, 2).await;
    parent.when_idle().await;

    let notices: Vec<_> = user_messages(&parent)
        .into_iter()
        .filter(|m| is_notice(m))
        .collect();
    assert_eq!(notices.len(), 1);
    assert_eq!(
        notices[0].text(),
        "background subagent subagent-1 (look into it) finished [status: completed]. Read its \
         result with subagent_output."
    );
    assert_eq!(
        result_of(&parent, "c2"),
        ("child result\n\n[status: completed]".to_owned(), None)
    );
    assert_eq!(
        turn_ends(&parent),
        [TurnEndReason::Completed, TurnEndReason::Completed]
    );
    assert!(
        h.core.registry.get(child.id()).is_none(),
        "the child was disposed"
    );
    assert_balanced(&parent);
    assert_balanced(&child);
    assert!(h.adapter.violations().is_empty() && h.child_adapter.violations().is_empty());
}

#[tokio::test]
async fn a_foreign_session_cannot_read_or_kill_a_background_run() {
    let h = split_harness().await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    let other = h.parent("q").await;
    let other = other.agent().clone();
    for tool in ["subagent_output", "subagent_kill"] {
        let result = h
            .call(tool, json!({"task_id": "subagent-1"}), Some(&other))
            .await;
        assert_eq!(
            result.text(),
            "Error: task subagent-1 belongs to another session",
            "{tool}"
        );
        assert_eq!(result.code(), Some(FOREIGN_TASK));
        let agentless = h.call(tool, json!({"task_id": "subagent-1"}), None).await;
        assert_eq!(
            agentless.code(),
            Some(FOREIGN_TASK),
            "{tool} without an agent"
        );
        let unknown = h
            .call(tool, json!({"task_id": "subagent-99"}), Some(&parent))
            .await;
        assert_eq!(unknown.text(), "Error: unknown subagent task subagent-99");
        assert_eq!(unknown.code(), Some(UNKNOWN_TASK));
    }
    let id = SubagentTaskId::new("subagent-1");
    assert!(matches!(
        h.runtime.read(&id, Some(other.id())),
        Err(SubagentError::ForeignTask(_))
    ));
    // The owner reads it; the run is untouched by the refused kill.
    let own = h
        .call(
            "subagent_output",
            json!({"task_id": "subagent-1"}),
            Some(&parent),
        )
        .await;
    assert_eq!(
        own.text(),
        "subagent subagent-1 (look into it) is still working\n[status: running]"
    );
    assert!(!own.is_error);
    gate.release();
}

#[tokio::test]
async fn a_present_waiter_receives_the_result_and_no_notice_is_sent() {
    let h = split_harness().await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    let mut inserts = inbox_inserts(&h, &parent);
    let id = SubagentTaskId::new("subagent-1");
    let never = CancellationToken::new();
    let mut wait =
        Box::pin(
            h.runtime
                .wait(&id, Some(parent.id()), &never, Duration::from_secs(600)),
        );
    // First poll: the waiter is registered before the child may finish.
    assert!(futures::poll!(&mut wait).is_pending());
    gate.release();
    let snapshot = wait.await.unwrap();
    let SubagentTaskStatus::Finished(outcome) = snapshot.status else {
        panic!("finished");
    };
    assert_eq!(outcome.stop, SubagentStop::Completed);
    assert_eq!(outcome.text.as_deref(), Some("child result"));
    assert!(inserts.try_recv().is_err(), "no notice");
    assert_eq!(parent.status(), AgentStatus::Idle);
    assert_eq!(turn_ends(&parent).len(), 1, "the parent was not woken");
}

#[tokio::test]
async fn subagent_kill_stops_a_background_child_with_cause_parent_and_sends_no_notice() {
    let h = split_harness().await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    let mut inserts = inbox_inserts(&h, &parent);
    let child = h.children()[0].clone();
    let killed = h
        .call(
            "subagent_kill",
            json!({"task_id": "subagent-1"}),
            Some(&parent),
        )
        .await;
    assert_eq!(
        killed.text(),
        "requested cancellation of subagent subagent-1"
    );
    let id = SubagentTaskId::new("subagent-1");
    let snapshot = h
        .runtime
        .wait(
            &id,
            Some(parent.id()),
            &CancellationToken::new(),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    assert!(matches!(
        snapshot.status,
        SubagentTaskStatus::Finished(ref o) if o.stop == SubagentStop::Cancelled {
            cause: Some(CancelCause::Parent)
        }
    ));
    assert_eq!(
        turn_ends(&child),
        [TurnEndReason::Aborted {
            reason: CancelCause::Parent
        }]
    );
    let again = h
        .call(
            "subagent_kill",
            json!({"task_id": "subagent-1"}),
            Some(&parent),
        )
        .await;
    assert_eq!(
        again.text(),
        "subagent subagent-1 had already finished [status: cancelled]"
    );
    let read = h
        .call(
            "subagent_output",
            json!({"task_id": "subagent-1"}),
            Some(&parent),
        )
        .await;
    assert!(read.is_error);
    assert_eq!(
        read.text(),
        "subagent run was cancelled\n\n[status: cancelled]"
    );
    assert!(inserts.try_recv().is_err(), "a killed run is not announced");
    assert_eq!(turn_ends(&parent).len(), 1);
}

#[tokio::test]
async fn a_spent_wake_budget_injects_the_notice_without_waking_the_parent() {
    let h = split_harness_with(SubagentConfig {
        max_consecutive_wakes: 0,
        ..SubagentConfig::default()
    })
    .await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    let mut inserts = inbox_inserts(&h, &parent);
    gate.release();
    let notice = inserts.recv().await.unwrap();
    assert!(is_notice(&notice));
    assert_eq!(parent.status(), AgentStatus::Idle);
    assert_eq!(parent.inbox().next_step().len(), 1);
    assert_eq!(turn_ends(&parent).len(), 1, "no turn was opened for it");
}

#[tokio::test]
async fn background_runs_and_their_owners_survive_a_remount_of_the_tools_plugin() {
    let h = rooted_harness().await;
    let tools = h.ctx.plugin(SubagentPlugin::default()).await.unwrap();
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    tools.dispose().await;
    assert!(
        dsh_subagent::SubagentRuntime::of(&h.ctx).is_some(),
        "the plugin did not own the runtime"
    );
    let mut inserts = inbox_inserts(&h, &parent);
    h.script(Script::text("noted"));
    gate.release();
    // The run continued while the tools were gone and was announced.
    let notice = inserts.recv().await.unwrap();
    assert!(is_notice(&notice), "{}", notice.text());
    turns_ended(&parent, 2).await;
    parent.when_idle().await;

    let _tools = h.ctx.plugin(SubagentPlugin::default()).await.unwrap();
    let other = h.parent("q").await;
    let foreign = h
        .call(
            "subagent_output",
            json!({"task_id": "subagent-1"}),
            Some(other.agent()),
        )
        .await;
    assert_eq!(
        foreign.code(),
        Some(FOREIGN_TASK),
        "the owner survived the remount"
    );
    let own = h
        .call(
            "subagent_output",
            json!({"task_id": "subagent-1"}),
            Some(&parent),
        )
        .await;
    assert_eq!(own.text(), "child result\n\n[status: completed]");
}

#[tokio::test]
async fn when_quiet_waits_for_owned_runs_and_the_turns_their_notices_wake() {
    let h = split_harness().await;
    let gate = Gate::new();
    let parent = started(&h, &gate).await;
    h.script(Script::text("the child found it"));
    let listed = h.runtime.list(parent.id());
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, SubagentTaskStatus::Running);
    let mut quiet = Box::pin(h.runtime.when_quiet(&parent));
    assert!(
        futures::poll!(&mut quiet).is_pending(),
        "a run is still live"
    );
    gate.release();
    quiet.await;
    assert_eq!(parent.status(), AgentStatus::Idle);
    assert_eq!(
        turn_ends(&parent),
        [TurnEndReason::Completed, TurnEndReason::Completed],
        "the notice's turn finished before when_quiet resolved"
    );
    assert!(matches!(
        h.runtime.list(parent.id())[0].status,
        SubagentTaskStatus::Finished(_)
    ));
}
