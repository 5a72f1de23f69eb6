//! The cancel suite (seed 000 decision 1, DESIGN R3/R4, spec/core.md §5.9 and §10.1).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::events::{
    AgentCancelRequested, AgentRequestError, AgentStatusChanged, AgentTurnStopping, RecoveryAction,
};
use dsh_agent::*;
use dsh_session::*;
use dsh_testkit::{Gate, Script};
use parking_lot::Mutex;

fn user() -> CancelCause {
    CancelCause::User
}

fn cancel(a: &AgentRef) {
    a.cancel(user(), CancelOptions::default());
}

fn keep(a: &AgentRef) {
    a.cancel(user(), CancelOptions { keep_inbox: true });
}

fn count(a: &AgentRef, ty: &str) -> usize {
    types(a).iter().filter(|t| *t == ty).count()
}

#[tokio::test]
async fn idle_cancel_with_an_empty_inbox_is_a_no_op_and_the_next_prompt_runs() {
    let h = harness().await;
    h.script(Script::text("ok"));
    let handle = h.agent().await;
    let a = handle.agent();
    let requested: Arc<Mutex<u32>> = Arc::default();
    let r = requested.clone();
    let _ = h
        .ctx
        .on::<AgentCancelRequested>(move |_| *r.lock() += 1)
        .unwrap();
    cancel(a);
    assert!(a.session().is_empty(), "idle cancel writes nothing");
    assert_eq!(*requested.lock(), 0, "idle cancel emits nothing");
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(turn_ends(a), [TurnEndReason::Completed]);
}

#[tokio::test]
async fn cancel_right_after_a_waking_send_closes_the_opened_turn_without_a_step() {
    let h = harness().await;
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("a")).unwrap();
    a.followup(Message::user_text("b")).unwrap();
    cancel(a);
    a.when_idle().await;
    assert_eq!(count(a, "turn/start"), 1);
    assert_eq!(count(a, "step/start"), 0);
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert!(
        user_texts(a).is_empty(),
        "a prompt cancelled before it ran is never logged"
    );
    assert!(
        !a.inbox().has_pending(),
        "the queued prompt was durably cancelled"
    );
    assert!(h.adapter.requests().is_empty());
    assert_eq!(h.statuses_of("s").last(), Some(&AgentStatus::Idle));
}

#[tokio::test]
async fn keep_inbox_cancel_does_not_restore_claimed_work() {
    let h = harness().await;
    h.script(Script::text("later"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("claimed")).unwrap();
    keep(a);
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert!(a.inbox().next_turn().is_empty());
    let canceled = a.session().events().iter().any(|e| {
        matches!(&e.kind, EventKind::InboxSpliced(s) if s.outcome == Some(SpliceOutcome::Canceled))
    });
    assert!(!canceled, "keep_inbox writes no cancellation");
    assert!(h.adapter.requests().is_empty());
    a.followup(Message::user_text("next")).unwrap();
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user()), TurnEndReason::Completed]);
}

#[tokio::test]
async fn keep_inbox_cancel_of_a_hanging_turn_parks_the_queue_for_a_later_wake() {
    let h = harness().await;
    h.script(Script::partial_then_hang("active"));
    h.script(Script::text("preserved"));
    h.script(Script::text("wake"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("active")).unwrap();
    a.followup(Message::user_text("preserved")).unwrap();
    h.adapter.wait_for_requests(1).await;
    keep(a);
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert_eq!(a.inbox().next_turn().len(), 1, "queued item still pending");
    assert_eq!(h.adapter.requests().len(), 1);
    a.followup(Message::user_text("wake")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 3);
    assert_eq!(
        turn_ends(a),
        [
            aborted(user()),
            TurnEndReason::Completed,
            TurnEndReason::Completed
        ]
    );
}

#[tokio::test]
async fn a_wake_landing_after_abort_is_latched_and_runs_as_its_own_turn() {
    let h = harness().await;
    let gate = Gate::new();
    // The first request ignores cancellation until released: the aborted run cannot retire
    // while the second prompt arrives.
    h.script(gated(&gate, Script::text("slow")));
    h.script(Script::text("second"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("first")).unwrap();
    gate.reached().await;
    keep(a);
    a.followup(Message::user_text("second")).unwrap();
    gate.release();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 2);
    assert_eq!(turn_ends(a), [aborted(user()), TurnEndReason::Completed]);
}

#[tokio::test]
async fn a_plain_cancel_drops_a_latched_wake_and_a_later_send_still_runs() {
    let h = harness().await;
    let gate = Gate::new();
    h.script(gated(&gate, Script::text("slow")));
    h.script(Script::text("c"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("a")).unwrap();
    gate.reached().await;
    keep(a);
    a.followup(Message::user_text("b")).unwrap();
    cancel(a);
    gate.release();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1, "b never ran");
    a.followup(Message::user_text("c")).unwrap();
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user()), TurnEndReason::Completed]);
    assert_eq!(user_texts(a), ["a", "c"]);
}

#[tokio::test]
async fn a_latched_steer_removed_before_convergence_replays_nothing() {
    let h = harness().await;
    let gate = Gate::new();
    h.script(gated(&gate, Script::text("slow")));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("a")).unwrap();
    gate.reached().await;
    keep(a);
    let id = a.steer(Message::user_text("latched")).unwrap();
    assert!(a.inbox().remove(&id).unwrap());
    gate.release();
    a.when_idle().await;
    assert_eq!(count(a, "turn/start"), 1);
    assert_eq!(a.status(), AgentStatus::Idle);
}

#[tokio::test]
async fn cancel_from_the_running_status_listener_drops_work_before_turn_start() {
    let h = harness().await;
    h.script(Script::text("b-answer"));
    let fired = Arc::new(Mutex::new(false));
    let f = fired.clone();
    let _ = h
        .ctx
        .on::<AgentStatusChanged>(move |c| {
            let mut fired = f.lock();
            if c.status == AgentStatus::Running && !*fired {
                *fired = true;
                c.agent.cancel(CancelCause::User, CancelOptions::default());
                c.agent.followup(Message::user_text("b")).unwrap();
            }
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("a")).unwrap();
    a.when_idle().await;
    assert_eq!(
        count(a, "turn/start"),
        1,
        "only the replacement opened a turn"
    );
    assert_eq!(user_texts(a), ["b"]);
    assert_eq!(h.adapter.requests().len(), 1);
}

#[tokio::test]
async fn cancel_mid_stream_finalizes_the_visible_prefix_as_interrupted() {
    let h = harness().await;
    let gate = Gate::new();
    h.script(Script::partial_then_hang("partial").then(dsh_testkit::Step::WaitFor(gate.clone())));
    h.script(Script::text("next"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.followup(Message::user_text("queued tail")).unwrap();
    until(a, |e| {
        matches!(&e.kind, EventKind::AssistantChunk(c)
            if matches!(&c.chunk, StreamChunk::TextDelta { text, .. } if text == "l"))
    })
    .await;
    cancel(a);
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert_eq!(count(a, "turn/start"), 1);
    let ev = a.session().events();
    let (pos, msg) = ev
        .iter()
        .enumerate()
        .find_map(|(i, e)| match &e.kind {
            EventKind::AssistantMessage(m) => Some((i, m.clone())),
            _ => None,
        })
        .unwrap();
    assert!(msg.interrupted);
    assert_eq!(msg.message.text(), "partial");
    let chunk_seqs: Vec<u64> = ev
        .iter()
        .filter(|e| e.type_name() == "assistant/chunk")
        .map(|e| e.seq)
        .collect();
    assert_eq!(ev[pos].source_event_seqs.as_ref().unwrap(), &chunk_seqs);
    assert_eq!(ev[pos + 1].type_name(), "step/end");
    assert_eq!(ev[pos + 2].type_name(), "turn/end");
    // The next prompt sees the partial answer.
    a.followup(Message::user_text("again")).unwrap();
    a.when_idle().await;
    assert!(request_texts(&h, 1).contains(&"partial".to_owned()));
    assert_balanced(a);
}

#[tokio::test]
async fn cancel_before_any_visible_content_finalizes_nothing() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(1).await;
    cancel(a);
    a.when_idle().await;
    assert_eq!(count(a, "assistant/message"), 0);
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert_balanced(a);
}

#[tokio::test]
async fn cancel_with_text_and_a_half_streamed_tool_call_keeps_only_the_text() {
    let h = harness().await;
    let gate = Gate::new();
    let script = Script::new()
        .chunks([
            StreamChunk::BlockStart {
                index: 0,
                block_type: BlockType::Text,
            },
            StreamChunk::TextDelta {
                index: 0,
                text: "thinking aloud".into(),
            },
            StreamChunk::BlockEnd {
                index: 0,
                block: ContentBlock::text("thinking aloud"),
            },
            StreamChunk::BlockStart {
                index: 1,
                block_type: BlockType::ToolCall,
            },
            StreamChunk::ToolCallDelta {
                index: 1,
                id: CallId::new("c1"),
                name: Some("echo".into()),
                arguments_delta: "{\"te".into(),
            },
        ])
        .wait_for(&gate)
        .hang_until_cancelled();
    h.script(script);
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    gate.reached().await;
    cancel(a);
    a.when_idle().await;
    let msg = a.session().events().iter().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => Some(m.message.clone()),
        _ => None,
    });
    let msg = msg.unwrap();
    assert_eq!(msg.text(), "thinking aloud");
    assert_eq!(msg.tool_calls().count(), 0);
    assert_eq!(count(a, "tool/call"), 0);
    assert_balanced(a);
}

#[tokio::test]
async fn cancel_from_an_assistant_message_observer_skips_every_tool_call() {
    let h = harness().await;
    h.tool(TestTool::new("echo", &h.log));
    h.script(Script::tool_call("c1", "echo", "{}"));
    h.script(Script::text("after"));
    let handle = h.agent().await;
    let a = handle.agent();
    let armed = Arc::new(Mutex::new(true));
    let (armed2, weak) = (armed.clone(), Arc::downgrade(a));
    let _ = a
        .ctx()
        .on::<SessionEventFired>(move |n| {
            if n.event.type_name() == "assistant/message"
                && std::mem::replace(&mut *armed2.lock(), false)
                && let Some(agent) = weak.upgrade()
            {
                agent.cancel(CancelCause::User, CancelOptions::default());
            }
        })
        .unwrap();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert!(h.log().is_empty(), "the tool body never ran");
    assert_eq!(
        tool_results(a),
        [(
            "c1".into(),
            "Error: tool call aborted before dispatch".into(),
            Some("ABORTED_BEFORE_DISPATCH".into())
        )]
    );
    a.followup(Message::user_text("next")).unwrap();
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(user()), TurnEndReason::Completed]);
    assert!(
        request_texts(&h, 1).contains(&"result:c1:Error: tool call aborted before dispatch".into())
    );
    assert!(h.adapter.violations().is_empty());
    assert_balanced(a);
}

#[tokio::test]
async fn cancel_from_a_step_start_observer_streams_nothing_and_balances_the_step() {
    let h = harness().await;
    let handle = h.agent().await;
    let a = handle.agent();
    let weak = Arc::downgrade(a);
    let _ = a
        .ctx()
        .on::<SessionEventFired>(move |n| {
            if n.event.type_name() == "step/start"
                && let Some(agent) = weak.upgrade()
            {
                agent.cancel(CancelCause::User, CancelOptions::default());
            }
        })
        .unwrap();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert!(h.adapter.requests().is_empty());
    assert_eq!(count(a, "step/start"), count(a, "step/end"));
    assert_eq!(turn_ends(a), [aborted(user())]);
}

#[tokio::test]
async fn cancel_inside_turn_stopping_ends_the_turn_aborted_after_one_step() {
    let h = harness().await;
    h.script(Script::text("x"));
    let _ = h
        .ctx
        .on_serial::<AgentTurnStopping, _>(|p| {
            p.agent.steer(Message::user_text("more")).unwrap();
            p.agent.cancel(CancelCause::User, CancelOptions::default());
            async { Ok(()) }
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(count(a, "step/start"), 1);
    assert_eq!(turn_ends(a), [aborted(user())]);
}

#[tokio::test]
async fn a_send_in_the_same_tick_after_cancel_is_an_independent_turn() {
    let h = harness().await;
    h.script(Script::text("B"));
    h.script(Script::text("C"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("A")).unwrap();
    cancel(a);
    a.followup(Message::user_text("B")).unwrap();
    a.when_idle().await;
    a.followup(Message::user_text("C")).unwrap();
    a.when_idle().await;
    assert_eq!(user_texts(a), ["B", "C"]);
    assert_eq!(turn_ends(a).len(), 3);
    assert_eq!(turn_ends(a)[0], aborted(user()));
}

#[tokio::test]
async fn cancel_clears_steering_so_it_is_never_logged() {
    let h = harness().await;
    let gate = Gate::new();
    h.script(gated(&gate, Script::text("slow")));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    gate.reached().await;
    a.steer(Message::user_text("steering")).unwrap();
    cancel(a);
    gate.release();
    a.when_idle().await;
    assert_eq!(user_texts(a), ["go"]);
    assert_eq!(count(a, "turn/start"), 1);
}

#[tokio::test]
async fn the_first_cause_wins_for_the_active_turn() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(1).await;
    a.cancel(CancelCause::Parent, CancelOptions::default());
    a.cancel(CancelCause::User, CancelOptions::default());
    a.when_idle().await;
    assert_eq!(turn_ends(a), [aborted(CancelCause::Parent)]);
}

#[tokio::test]
async fn a_user_cancel_is_not_overwritten_by_a_racing_disposal() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("go")).unwrap();
    h.adapter.wait_for_requests(1).await;
    cancel(&a);
    handle.dispose().await;
    assert_eq!(turn_ends(&a), [aborted(user())]);
}

#[tokio::test]
async fn cancellation_beats_a_retry_action() {
    let h = harness_with(dsh_agent_loop::CoreConfig {
        retry: false,
        ..Default::default()
    })
    .await;
    h.script(Script::error_code(FailureCode::RateLimit, "slow down"));
    h.script(Script::text("never"));
    let _ = h
        .ctx
        .on_waterfall::<AgentRequestError, _>(|p, _| async move {
            p.agent.cancel(CancelCause::User, CancelOptions::default());
            Ok(Some(RecoveryAction::Retry))
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    a.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1);
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert_eq!(count(a, "assistant/message"), 0);
}

#[tokio::test]
async fn a_tool_body_waiting_on_cancellation_settles_and_the_turn_ends_aborted() {
    let h = harness().await;
    let tool = TestTool::new("wait", &h.log);
    let gate = tool.gate("c1");
    h.tool(tool);
    h.script(Script::tool_call("c1", "wait", "{}"));
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    gate.reached().await;
    cancel(a);
    // The body is still running: the turn cannot have ended.
    assert!(turn_ends(a).is_empty());
    gate.release();
    a.when_idle().await;
    assert_eq!(h.log(), ["wait-start-c1", "wait-end-c1"]);
    assert_eq!(turn_ends(a), [aborted(user())]);
    assert_eq!(tool_results(a)[0].2.as_deref(), Some("ABORTED"));
    assert_balanced(a);
}

#[tokio::test]
async fn when_idle_registered_before_a_cancel_resolves_after_quiescence() {
    let h = harness().await;
    h.script(Script::new().hang_until_cancelled());
    let handle = h.agent().await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    let idle = a.when_idle();
    h.adapter.wait_for_requests(1).await;
    cancel(a);
    idle.await;
    assert_eq!(a.status(), AgentStatus::Idle);
    assert_eq!(turn_ends(a), [aborted(user())]);
}

#[tokio::test]
async fn an_effective_cancel_announces_its_cause_before_clearing() {
    let h = harness().await;
    let seen: Arc<Mutex<Vec<(CancelCause, usize)>>> = Arc::default();
    let s = seen.clone();
    let _ = h
        .ctx
        .on::<AgentCancelRequested>(move |n| {
            s.lock()
                .push((n.cause.clone(), n.agent.inbox().next_turn().len()))
        })
        .unwrap();
    let handle = h.agent().await;
    let a = handle.agent();
    a.inject(Message::plugin_text("p", "parked context"))
        .unwrap();
    a.cancel(
        CancelCause::Hook {
            reason: "policy".into(),
        },
        CancelOptions::default(),
    );
    assert!(!a.inbox().has_pending());
    assert_eq!(seen.lock().len(), 1);
    assert_eq!(
        seen.lock()[0].0,
        CancelCause::Hook {
            reason: "policy".into()
        }
    );
}

#[tokio::test]
async fn a_waking_send_whose_wake_lands_after_a_cancel_is_latched_not_parked() {
    let h = harness().await;
    h.script(Script::partial_then_hang("active"));
    h.script(Script::text("raced"));
    let handle = h.agent().await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("active")).unwrap();
    h.adapter.wait_for_requests(1).await;
    // The cancel lands between the send's check of the run and its wake (here: while the
    // message's insertion is being announced, as another thread's cancel could).
    let target = a.clone();
    let _cancel_on_insert = h
        .ctx
        .on::<dsh_agent::events::InboxInserted>(move |notice| {
            if notice.message.text() == "raced" {
                keep(&target);
            }
        })
        .unwrap();
    a.followup(Message::user_text("raced")).unwrap();
    a.when_idle().await;
    assert_eq!(turn_ends(&a), [aborted(user()), TurnEndReason::Completed]);
    assert_eq!(h.adapter.requests().len(), 2, "the raced prompt ran");
    assert!(!a.inbox().has_pending());
}
