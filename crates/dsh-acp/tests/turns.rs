#![allow(clippy::unwrap_used)]
//! Prompts over a real ACP connection: streaming, tool cards, settlement and stop reasons.

mod common;

use agent_client_protocol::ErrorCode;
use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, NewSessionRequest, PromptRequest, SessionUpdate, StopReason,
    TextContent, ToolCallContent, ToolCallStatus, ToolKind,
};
use common::*;
use dsh_agent::CancelCause;
use dsh_session::{ContentBlock, FailureCode, Message, TurnEndReason};
use dsh_testkit::{Gate, Script};

#[tokio::test]
async fn initialize_advertises_load_list_close_and_text_only_prompts() {
    let h = H::new().await;
    let conn = h.connect(options()).await;
    let init = conn.initialize().await;
    assert_eq!(
        init.protocol_version,
        agent_client_protocol::schema::ProtocolVersion::V1
    );
    let caps = &init.agent_capabilities;
    assert!(caps.load_session);
    assert!(caps.session_capabilities.list.is_some());
    assert!(caps.session_capabilities.close.is_some());
    assert!(!caps.prompt_capabilities.image);
    assert!(!caps.prompt_capabilities.audio);
    assert!(!caps.prompt_capabilities.embedded_context);
    assert!(init.auth_methods.is_empty());
    assert_eq!(init.agent_info.unwrap().name, "dsh");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_prompt_streams_message_chunks_and_ends_end_turn() {
    let h = H::new().await;
    h.adapter.push(Script::reasoning_then_text("hm", "hello"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "hi").await.unwrap(),
        StopReason::EndTurn
    );
    // The answer follows every update of its turn.
    let updates = conn.received();
    assert!(updates.iter().all(|n| *n.session_id.0 == id));
    assert_eq!(agent_text(&updates), "hello");
    let thoughts: String = updates
        .iter()
        .filter_map(|n| chunk_text(&n.update))
        .filter(|(k, _)| *k == "thought")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(thoughts, "hm");
    // One chunk per delta: streaming, not a final dump.
    assert_eq!(
        updates
            .iter()
            .filter(|n| matches!(n.update, SessionUpdate::AgentMessageChunk(_)))
            .count(),
        5
    );
    assert!(
        updates
            .iter()
            .any(|n| matches!(&n.update, SessionUpdate::UsageUpdate(u) if u.size == 128_000)),
        "usage follows the committed message"
    );
    // The ACP session id is the dsh session id.
    let agent = h.agent(&id).unwrap();
    assert_eq!(
        agent.session().header().cwd.as_deref(),
        Some(conn.cwd.as_path())
    );
    assert_eq!(turn_ends(agent.session()), vec![TurnEndReason::Completed]);
    conn.disconnect().await.unwrap();
}

// Also on a multi-threaded runtime: nothing in the bridge needs a `LocalSet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_streams_its_card_and_its_completed_update() {
    let h = H::new().await;
    h.adapter
        .push(Script::tool_call("call_1", "echo", r#"{"text":"pong"}"#))
        .push(Script::text("done"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "ping").await.unwrap(),
        StopReason::EndTurn
    );
    let updates = conn.received();
    let call = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a tool_call card");
    assert_eq!(&*call.tool_call_id.0, "call_1");
    assert_eq!(call.status, ToolCallStatus::Pending);
    assert_eq!(call.title, "echo");
    assert_eq!(call.kind, ToolKind::Other);
    assert_eq!(call.raw_input, Some(serde_json::json!({"text": "pong"})));
    let update = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u)
                if u.fields.status == Some(ToolCallStatus::Completed) =>
            {
                Some(u.clone())
            }
            _ => None,
        })
        .expect("a tool_call_update");
    assert_eq!(&*update.tool_call_id.0, "call_1");
    let content = update.fields.content.unwrap();
    assert!(matches!(
        &content[..],
        [ToolCallContent::Content(c)] if matches!(&c.content, AcpBlock::Text(t) if t.text == "pong")
    ));
    // Card (pending), running, result, then the final answer, in that order.
    let order: Vec<&str> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCall(_) => Some("call"),
            SessionUpdate::ToolCallUpdate(u)
                if u.fields.status == Some(ToolCallStatus::InProgress) =>
            {
                Some("running")
            }
            SessionUpdate::ToolCallUpdate(_) => Some("result"),
            SessionUpdate::AgentMessageChunk(_) => Some("text"),
            _ => None,
        })
        .collect();
    assert_eq!(order[..3], ["call", "running", "result"]);
    assert_eq!(agent_text(&updates), "done");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_failed_tool_call_updates_its_card_as_failed() {
    let h = H::new().await;
    h.adapter
        .push(Script::tool_call("c1", "missing_tool", "{}"))
        .push(Script::text("sorry"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    let failed = conn.received().into_iter().find_map(|n| match n.update {
        SessionUpdate::ToolCallUpdate(u) if u.fields.content.is_some() => Some(u),
        _ => None,
    });
    assert_eq!(failed.unwrap().fields.status, Some(ToolCallStatus::Failed));
    conn.disconnect().await.unwrap();
}

// Also on a multi-threaded runtime: nothing in the bridge needs a `LocalSet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_held_stream_answers_cancelled_with_a_balanced_log() {
    let h = H::new().await;
    h.adapter.push(Script::partial_then_hang("par"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    let prompt = conn.prompt(&id, "go");
    // The partial text is on the client before it cancels.
    for expected in ["p", "a", "r"] {
        let update = conn
            .wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        assert_eq!(chunk_text(&update).unwrap().1, expected);
    }
    conn.cancel(&id);
    let stop = prompt.await.unwrap().unwrap().stop_reason;
    assert_eq!(stop, StopReason::Cancelled);
    let agent = h.agent(&id).unwrap();
    assert_balanced(agent.session());
    assert_eq!(
        turn_ends(agent.session()),
        vec![TurnEndReason::Aborted {
            reason: CancelCause::User
        }]
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn cancel_of_a_queued_prompt_before_it_starts_means_it_never_reaches_the_model() {
    let h = H::new().await;
    let hold = Gate::new();
    h.adapter
        .push(Script::text("autonomous").wait_at(1, &hold))
        .push(Script::text("later answer"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    // Another in-process producer keeps the agent busy (a job notice, a subagent report).
    let agent = h.agent(&id).unwrap();
    agent
        .followup(Message::user_text("background work"))
        .unwrap();
    hold.reached().await;
    // The client's prompt waits behind it in the agent's queue...
    let queued = conn.prompt(&id, "queued prompt");
    conn.cancel(&id);
    // ...and the cancel removes it before it ever starts.
    assert_eq!(
        queued.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    agent.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1);
    assert!(
        h.adapter.requests().iter().all(|r| r
            .messages
            .iter()
            .all(|m| !m.text().contains("queued prompt"))),
        "the cancelled prompt never reached the model"
    );
    assert!(agent.inbox().next_turn().is_empty());
    // A later prompt is an independent turn.
    hold.release();
    assert_eq!(
        conn.prompt_now(&id, "next").await.unwrap(),
        StopReason::EndTurn
    );
    let last = h.adapter.requests().pop().unwrap();
    // Compared block by block: the request merges consecutive user messages (strict role
    // alternation), and the cancelled turn left no assistant message between them.
    let blocks: Vec<&str> = last
        .messages
        .iter()
        .flat_map(|m| m.content.iter().filter_map(ContentBlock::as_text))
        .collect();
    assert!(blocks.contains(&"next"), "{blocks:?}");
    assert!(!blocks.contains(&"queued prompt"), "{blocks:?}");
    assert!(agent_text(&conn.received()).ends_with("later answer"));
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_second_prompt_while_one_is_in_flight_is_rejected_not_queued() {
    let h = H::new().await;
    let gate = Gate::new();
    h.adapter.push(Script::text("first").wait_at(2, &gate));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let first = conn.prompt(&id, "one");
    gate.reached().await;
    let second = conn.prompt_now(&id, "two").await.unwrap_err();
    assert_eq!(second.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        second.message,
        "a prompt is already in flight for this session"
    );
    gate.release();
    assert_eq!(
        first.await.unwrap().unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(h.adapter.requests().len(), 1);
    let inbox = h.agent(&id).unwrap().inbox().next_turn();
    assert!(inbox.is_empty(), "the rejected prompt was not queued");
    conn.disconnect().await.unwrap();
}

// Also on a multi-threaded runtime: nothing in the bridge needs a `LocalSet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_stream_concurrently_and_cancel_independently() {
    let h = H::new().await;
    let b_gate = Gate::new();
    h.adapter
        .push(Script::partial_then_hang("aaa"))
        .push(Script::text("bbb").wait_at(3, &b_gate));
    let mut conn = h.connect(options()).await;
    let a = conn.session().await;
    let b = conn.session().await;
    let pa = conn.prompt(&a, "for a");
    // A's stream is playing its script before B asks for one (the adapter hands scripts out in
    // the order streams start, which two worker threads could otherwise swap).
    let first = conn
        .wait_update(&a, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    let pb = conn.prompt(&b, "for b");
    b_gate.reached().await;
    conn.cancel(&a);
    assert_eq!(
        pa.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    // B is untouched by A's cancel and still streaming.
    assert!(!pb.is_finished());
    b_gate.release();
    assert_eq!(pb.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
    let updates = conn.received();
    let of = |s: &str| -> Vec<_> {
        updates
            .iter()
            .filter(|n| &*n.session_id.0 == s)
            .cloned()
            .collect()
    };
    let (_, first) = chunk_text(&first).unwrap();
    assert_eq!(first + &agent_text(&of(&a)), "aaa");
    assert_eq!(agent_text(&of(&b)), "bbb");
    let (sa, sb) = (h.agent(&a).unwrap(), h.agent(&b).unwrap());
    assert_eq!(
        turn_ends(sa.session()),
        vec![TurnEndReason::Aborted {
            reason: CancelCause::User
        }]
    );
    assert_eq!(turn_ends(sb.session()), vec![TurnEndReason::Completed]);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_cancel_is_answered_within_the_deadline_even_while_a_tool_ignores_it() {
    let h = H::new().await;
    let tool = WaitTool::default();
    h.register(tool.clone());
    h.adapter.push(Script::tool_call("c1", "wait", "{}"));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let prompt = conn.prompt(&id, "go");
    tool.started.notified().await;
    let cancelled_at = std::time::Instant::now();
    conn.cancel(&id);
    let stop = prompt.await.unwrap().unwrap().stop_reason;
    // Measured, not asserted as a race: the answer came while the tool was still running.
    assert!(!tool.release.is_cancelled());
    assert_eq!(stop, StopReason::Cancelled);
    eprintln!("cancelled answer after {:?}", cancelled_at.elapsed());
    // The loop still finishes the call and closes the turn, provider-valid.
    tool.release.cancel();
    let agent = h.agent(&id).unwrap();
    agent.when_idle().await;
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_failed_turn_is_a_json_rpc_error_naming_the_failure() {
    let h = H::new().await;
    // Not retryable: the failure ends the turn at once.
    h.adapter.push(Script::error_code(
        FailureCode::InvalidRequest,
        "upstream exploded",
    ));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let e = conn.prompt_now(&id, "go").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::INTERNAL_ERROR);
    assert_eq!(e.message, "turn failed: upstream exploded");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn max_tokens_ends_the_prompt_max_tokens_with_the_text_kept() {
    let h = H::new().await;
    h.adapter.push(Script::max_tokens("cut"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::MaxTokens
    );
    assert_eq!(agent_text(&conn.received()), "cut");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn resource_links_reach_the_model_as_markers_in_one_text_block() {
    let h = H::new().await;
    h.adapter.push(Script::text("ok"));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let prompt = vec![
        AcpBlock::Text(TextContent::new("see")),
        AcpBlock::ResourceLink(agent_client_protocol::v1::schema::ResourceLink::new(
            "main.rs",
            "file:///w/main.rs",
        )),
    ];
    conn.cx
        .send_request(PromptRequest::new(id.clone(), prompt))
        .block_task()
        .await
        .unwrap();
    let sent = h.adapter.requests()[0].messages.clone();
    assert!(
        sent.iter().any(
            |m| m.text() == "see\n[resource_link name=\"main.rs\" uri=\"file:///w/main.rs\"]\n"
        )
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn invalid_prompts_and_sessions_are_invalid_params_and_unknown_cancel_is_ignored() {
    let h = H::new().await;
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let e = conn.prompt_now("nope", "hi").await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::RESOURCE_NOT_FOUND, "unknown session: nope")
    );
    let e = conn.prompt_now(&id, "   ").await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::INVALID_PARAMS, "empty prompt")
    );
    let e = conn
        .cx
        .send_request(NewSessionRequest::new("relative/dir"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    let e = conn
        .cx
        .send_request(NewSessionRequest::new("/no/such/dir/for/dsh"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(
        e.message.contains("not an existing directory"),
        "{}",
        e.message
    );
    conn.cancel("nope");
    // The connection still works, and the slot was freed by the rejected prompts.
    h.adapter.push(Script::text("fine"));
    assert_eq!(
        conn.prompt_now(&id, "real").await.unwrap(),
        StopReason::EndTurn
    );
    assert!(h.agent(&id).unwrap().inbox().next_turn().is_empty());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_retried_attempt_is_announced_and_the_retry_adopts_the_prompt() {
    let h = H::with_fast_retries().await;
    h.adapter
        .push(
            Script::new()
                .chunks([
                    dsh_session::StreamChunk::BlockStart {
                        index: 0,
                        block_type: dsh_session::BlockType::Text,
                    },
                    dsh_session::StreamChunk::TextDelta {
                        index: 0,
                        text: "lost".into(),
                    },
                ])
                .fail(dsh_session::LlmFailure::new(
                    FailureCode::Server,
                    "overloaded",
                )),
        )
        .push(Script::text("kept"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    let text = agent_text(&conn.received());
    assert!(
        text.starts_with("lost\n[previous attempt discarded; retrying 1/2 in 1ms: overloaded]\n"),
        "{text:?}"
    );
    assert!(text.ends_with("kept"));
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_cancel_request_for_the_prompt_cancels_it_like_session_cancel() {
    let h = H::new().await;
    h.adapter.push(Script::partial_then_hang("p"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    let sent = conn
        .cx
        .send_request(PromptRequest::new(id.clone(), text("go")));
    conn.wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    sent.cancel().unwrap();
    assert_eq!(
        sent.block_task().await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(
        turn_ends(h.agent(&id).unwrap().session()),
        vec![TurnEndReason::Aborted {
            reason: CancelCause::User
        }]
    );
    conn.disconnect().await.unwrap();
}

/// Interrupt and send (what Zed does when the person types while the agent works): the
/// client sends `session/cancel` and, without waiting for the answer, the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_right_after_a_cancel_waits_for_it_to_settle_and_runs() {
    let h = H::new().await;
    h.adapter
        .push(Script::partial_then_hang("par"))
        .push(Script::text("second answer"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    let first = conn.prompt(&id, "go");
    conn.wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    conn.cancel(&id);
    let second = conn.prompt(&id, "instead");
    assert_eq!(
        first.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(
        second.await.unwrap().unwrap().stop_reason,
        StopReason::EndTurn
    );
    let agent = h.agent(&id).unwrap();
    assert_eq!(
        turn_ends(agent.session()),
        vec![
            TurnEndReason::Aborted {
                reason: CancelCause::User
            },
            TurnEndReason::Completed
        ],
        "the second prompt ran as its own turn, after the cancelled one"
    );
    let last = h.adapter.requests().pop().unwrap();
    assert!(last.messages.iter().any(|m| m.text().contains("instead")));
    assert!(agent_text(&conn.received()).ends_with("second answer"));
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_prompt_that_waits_for_a_cancelled_one() {
    let h = H::new().await;
    h.adapter
        .push(Script::partial_then_hang("par"))
        .push(Script::text("must not run"));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let first = conn.prompt(&id, "go");
    let mut conn = conn;
    conn.wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    conn.cancel(&id);
    let second = conn.prompt(&id, "instead");
    conn.cancel(&id);
    assert_eq!(
        first.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(
        second.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    let agent = h.agent(&id).unwrap();
    agent.when_idle().await;
    assert_eq!(h.adapter.requests().len(), 1, "the second prompt never ran");
    assert!(agent.inbox().next_turn().is_empty());
    // The slot is free again: a later prompt runs.
    assert_eq!(
        conn.prompt_now(&id, "next").await.unwrap(),
        StopReason::EndTurn
    );
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}
