#![allow(clippy::unwrap_used)]
//! Session lifecycle over ACP: disconnect and close dispose exactly the bridge's sessions,
//! a create racing the close is rolled back, load replays, list lists.

mod common;

use agent_client_protocol::ErrorCode;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    NewSessionRequest, SessionUpdate, StopReason, ToolCallStatus,
};
use common::*;
use dsh_acp::BridgeClosing;
use dsh_agent::{AgentOptions, CancelCause, CreateAgentOptions};
use dsh_session::{SessionCreated, SessionId, TurnEndReason};
use dsh_testkit::{Gate, Script};
use parking_lot::Mutex;

fn aborted_by_user() -> TurnEndReason {
    TurnEndReason::Aborted {
        reason: CancelCause::User,
    }
}

#[tokio::test]
async fn disconnect_leaves_no_agent_and_no_store_entry_of_the_bridge_and_keeps_other_sessions() {
    let h = H::new().await;
    // A session of another front end in the same process.
    let other = h
        .core
        .registry
        .create(
            &h.ctx,
            CreateAgentOptions {
                session_id: Some("other-front-end".into()),
                agent_options: AgentOptions::route("scripted", "test-model"),
                ..CreateAgentOptions::default()
            },
        )
        .await
        .unwrap();
    h.adapter.push(Script::partial_then_hang("work"));
    let conn = h.connect(options()).await;
    let busy = conn.session().await;
    let idle = conn.session().await;
    let prompt = conn.prompt(&busy, "go");
    h.adapter.wait_for_requests(1).await;
    let sessions = [busy.clone(), idle.clone()].map(|id| h.agent(&id).unwrap().session().clone());
    conn.disconnect().await.unwrap();
    // No bridge-owned agent or live session is left.
    assert_torn_down(&h, [&busy, &idle]);
    // The other front end's agent is untouched.
    let alive = h.core.registry.get(&"other-front-end".into()).unwrap();
    assert!(dsh_agent::same_agent(&alive, other.agent()));
    assert!(h.core.store.get(&"other-front-end".into()).is_some());
    // The running turn was stopped by a user cancel and closed durably before the detach.
    assert_eq!(turn_ends(&sessions[0]), vec![aborted_by_user()]);
    assert_balanced(&sessions[0]);
    assert!(turn_ends(&sessions[1]).is_empty());
    // The outstanding prompt could not be answered: the client is gone.
    assert!(prompt.await.unwrap().is_err());
    other.dispose().await;
}

#[tokio::test]
async fn a_stop_tears_every_session_down_while_the_client_still_hears_the_prompt_cancelled() {
    let h = H::new().await;
    h.adapter.push(Script::partial_then_hang("work"));
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let mut conn = h
        .connect_until(options(), async move { stopped.cancelled().await })
        .await;
    let busy = conn.session().await;
    let idle = conn.session().await;
    let prompt = conn.prompt(&busy, "go");
    h.adapter.wait_for_requests(1).await;
    let session = h.agent(&busy).unwrap().session().clone();
    stop.cancel();
    // The client never hung up: the answer came over the open connection.
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    conn.server_returned().await.unwrap();
    assert_torn_down(&h, [&busy, &idle]);
    assert_eq!(turn_ends(&session), vec![aborted_by_user()]);
    assert_balanced(&session);
    // Frames after the stop are not served: the connection is closed.
    let late = conn
        .cx
        .send_request(NewSessionRequest::new(conn.cwd.clone()))
        .block_task()
        .await;
    assert!(late.is_err(), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_new_racing_the_close_is_disposed_and_leaves_nothing_registered() {
    let h = H::new().await;
    // Park the creation right inside its publication (after `session/created`)...
    let (reached_tx, reached_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let reached = Mutex::new(Some(reached_tx));
    let release = Mutex::new(Some(release_rx));
    let _ = h
        .ctx
        .on::<SessionCreated>(move |_| {
            if let Some(tx) = reached.lock().take() {
                let _ = tx.send(());
                // Blocks this worker thread only; the teardown runs on another one.
                if let Some(rx) = release.lock().take() {
                    let _ = rx.recv();
                }
            }
        })
        .unwrap();
    // ...and let it go only once the bridge has closed.
    let release_tx = Mutex::new(Some(release_tx));
    let _ = h
        .ctx
        .on::<BridgeClosing>(move |()| {
            if let Some(tx) = release_tx.lock().take() {
                let _ = tx.send(());
            }
        })
        .unwrap();
    let conn = h.connect(options()).await;
    conn.initialize().await;
    let creating = tokio::spawn(
        conn.cx
            .send_request(NewSessionRequest::new(conn.cwd.clone()))
            .block_task(),
    );
    reached_rx.await.unwrap();
    conn.begin_disconnect();
    conn.served().await.unwrap();
    assert!(
        h.core.registry.list().is_empty(),
        "the racing agent was disposed"
    );
    assert!(
        h.core.store.list().is_empty(),
        "the racing session was detached"
    );
    assert!(creating.await.unwrap().is_err());
}

#[tokio::test]
async fn session_close_disposes_only_that_session() {
    let h = H::new().await;
    h.adapter.push(Script::partial_then_hang("x"));
    let mut conn = h.connect(options()).await;
    let closing = conn.session().await;
    let staying = conn.session().await;
    let prompt = conn.prompt(&closing, "go");
    conn.wait_update(&closing, |u| {
        matches!(u, SessionUpdate::AgentMessageChunk(_))
    })
    .await;
    let session = h.agent(&closing).unwrap().session().clone();
    conn.cx
        .send_request(CloseSessionRequest::new(closing.clone()))
        .block_task()
        .await
        .unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(h.agent(&closing).is_none());
    assert!(
        h.core
            .store
            .get(&SessionId::new(closing.as_str()))
            .is_none()
    );
    assert_eq!(turn_ends(&session), vec![aborted_by_user()]);
    // The other session still works; the closed one is unknown now.
    h.adapter.push(Script::text("still here"));
    assert_eq!(
        conn.prompt_now(&staying, "hi").await.unwrap(),
        StopReason::EndTurn
    );
    let e = conn.prompt_now(&closing, "hi").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn session_load_replays_the_stored_conversation_then_continues_live() {
    let h = H::persistent().await;
    h.adapter
        .push(Script::tool_call("call_1", "echo", r#"{"text":"pong"}"#))
        .push(Script::reasoning_then_text("think", "first answer"));
    let first = h.connect(options()).await;
    let id = first.session().await;
    assert_eq!(
        first.prompt_now(&id, "ping").await.unwrap(),
        StopReason::EndTurn
    );
    first.disconnect().await.unwrap();
    assert!(h.agent(&id).is_none());

    // A new editor connection loads it.
    let mut second = h.connect(options()).await;
    second.initialize().await;
    second
        .cx
        .send_request(LoadSessionRequest::new(id.clone(), second.cwd.clone()))
        .block_task()
        .await
        .unwrap();
    // The whole conversation arrived before the answer.
    let replay = second.received();
    assert!(replay.iter().all(|n| *n.session_id.0 == *id));
    let shape: Vec<String> = replay
        .iter()
        .filter(|n| {
            !matches!(
                n.update,
                SessionUpdate::UsageUpdate(_) | SessionUpdate::AvailableCommandsUpdate(_)
            )
        })
        .map(|n| match chunk_text(&n.update) {
            Some((kind, text)) => format!("{kind}:{text}"),
            None => kind_of(&n.update).to_owned(),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "user:ping",
            "tool_call",
            "tool_call_update",
            "thought:think",
            "agent:first answer"
        ]
    );
    let result = replay.iter().find_map(|n| match &n.update {
        SessionUpdate::ToolCallUpdate(u) => u.fields.status,
        _ => None,
    });
    assert_eq!(result, Some(ToolCallStatus::Completed));
    // Then it continues live, with the history sent to the model.
    h.adapter.push(Script::text("second answer"));
    assert_eq!(
        second.prompt_now(&id, "more").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(agent_text(&second.received()), "second answer");
    let sent = h.adapter.requests().pop().unwrap();
    assert!(sent.messages.iter().any(|m| m.text() == "ping"));
    assert!(sent.messages.iter().any(|m| m.text() == "first answer"));
    // Loading it again while it is loaded replays it again (as codex-acp does), both turns.
    second
        .cx
        .send_request(LoadSessionRequest::new(id.clone(), second.cwd.clone()))
        .block_task()
        .await
        .unwrap();
    let again: Vec<String> = second
        .received()
        .iter()
        .filter_map(|n| chunk_text(&n.update))
        .filter(|(kind, _)| *kind != "thought")
        .map(|(kind, text)| format!("{kind}:{text}"))
        .collect();
    assert_eq!(
        again,
        [
            "user:ping",
            "agent:first answer",
            "user:more",
            "agent:second answer"
        ]
    );
    second.disconnect().await.unwrap();
    // The file is balanced and holds both turns.
    let stored = h.stored(&id).await;
    dsh_session::check_balanced(&stored).unwrap();
    let turns = stored
        .iter()
        .filter(|e| matches!(e.kind, dsh_session::EventKind::TurnEnd(_)))
        .count();
    assert_eq!(turns, 2);
}

#[tokio::test]
async fn session_load_refuses_unknown_sessions_and_another_workspace() {
    let h = H::persistent().await;
    h.adapter.push(Script::text("a"));
    let first = h.connect(options()).await;
    let id = first.session().await;
    first.prompt_now(&id, "x").await.unwrap();
    first.disconnect().await.unwrap();
    let second = h.connect(options()).await;
    second.initialize().await;
    let load = |id: &str, cwd: &str| {
        second
            .cx
            .send_request(LoadSessionRequest::new(id.to_owned(), cwd.to_owned()))
            .block_task()
    };
    let e = load("no-such-session", second.cwd.to_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.message, "unknown session: no-such-session");
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND);
    let elsewhere = tempfile::tempdir().unwrap();
    let e = load(&id, elsewhere.path().to_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("belongs to"), "{}", e.message);
    let e = load(&id, "/no/such/dir/for/dsh").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(
        e.message.contains("not an existing directory"),
        "{}",
        e.message
    );
    // Nothing was built for the mismatch.
    assert!(h.agent(&id).is_none());
    // The same directory spelled through a symlink is the same workspace.
    let link_dir = tempfile::tempdir().unwrap();
    let link = link_dir.path().join("workspace");
    std::os::unix::fs::symlink(&second.cwd, &link).unwrap();
    h.adapter.push(Script::text("again"));
    load(&id, link.to_str().unwrap()).await.unwrap();
    second.disconnect().await.unwrap();
}

/// `session/list` without filters: the response and its session ids in order.
async fn list(conn: &Conn) -> (ListSessionsResponse, Vec<String>) {
    let listed = conn
        .cx
        .send_request(ListSessionsRequest::new())
        .block_task()
        .await
        .unwrap();
    let ids = listed
        .sessions
        .iter()
        .map(|s| s.session_id.0.to_string())
        .collect();
    (listed, ids)
}

#[tokio::test]
async fn session_list_shows_live_and_stored_sessions_newest_first() {
    let h = H::persistent().await;
    h.adapter.push(Script::text("a"));
    let first = h.connect(options()).await;
    let stored = first.session().await;
    first.prompt_now(&stored, "the stored one").await.unwrap();
    first.disconnect().await.unwrap();
    let second = h.connect(options()).await;
    let live = second.session().await;
    let (listed, ids) = list(&second).await;
    assert!(ids.contains(&stored) && ids.contains(&live), "{ids:?}");
    assert!(listed.sessions.iter().all(|s| s.cwd == second.cwd));
    assert!(listed.sessions.iter().all(|s| s.updated_at.is_some()));
    let stored_row = listed
        .sessions
        .iter()
        .find(|s| *s.session_id.0 == *stored)
        .unwrap();
    assert_eq!(stored_row.title.as_deref(), Some("the stored one"));
    let filtered = second
        .cx
        .send_request(ListSessionsRequest::new().cwd(std::path::PathBuf::from("/elsewhere")))
        .block_task()
        .await
        .unwrap();
    assert!(filtered.sessions.is_empty());
    second.disconnect().await.unwrap();
}

#[tokio::test]
async fn session_list_leaves_out_subagent_sessions() {
    let h = H::persistent().await;
    h.adapter
        .push(Script::text("a"))
        .push(Script::text("child"));
    let conn = h.connect(options()).await;
    let parent = conn.session().await;
    conn.prompt_now(&parent, "the parent").await.unwrap();
    // A subagent's session, stored beside its parent's in the same working directory.
    let child = h
        .core
        .registry
        .create(
            &h.ctx,
            dsh_agent::CreateAgentOptions {
                session_id: Some("child-session".into()),
                meta: dsh_session::SessionMeta {
                    cwd: Some(conn.cwd.clone()),
                    parent_session: Some(SessionId::new(parent.as_str())),
                    origin: Some(dsh_session::SessionOrigin::Subagent),
                    ..Default::default()
                },
                agent_options: route(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    child
        .agent()
        .followup(dsh_session::Message::user_text("delegated"))
        .unwrap();
    child.agent().when_idle().await;
    child.dispose().await;
    let (_, ids) = list(&conn).await;
    assert_eq!(
        ids,
        [parent],
        "a subagent's session is not the user's to load"
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_prompt_held_inside_the_model_does_not_hold_up_teardown() {
    let h = H::new().await;
    let gate = Gate::new();
    h.adapter.push(Script::text("never").wait_at(1, &gate));
    let conn = h.connect(options()).await;
    let id = conn.session().await;
    let _prompt = conn.prompt(&id, "go");
    gate.reached().await;
    conn.disconnect().await.unwrap();
    assert!(h.core.registry.list().is_empty());
}

#[tokio::test]
async fn a_client_that_hangs_up_with_frames_in_flight_is_a_clean_disconnect() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let h = H::new().await;
    h.adapter.push(Script::text(&"x".repeat(3000)));
    // A tiny pipe, and a raw client that stops reading once the prompt is sent, so the
    // bridge's frames pile up unwritten when the client goes away.
    let (client_io, server_io) = tokio::io::duplex(1024);
    let (sr, sw) = tokio::io::split(server_io);
    let server = tokio::spawn(dsh_acp::serve(h.ctx.clone(), options(), sr, sw));
    let (cr, mut cw) = tokio::io::split(client_io);
    let mut lines = BufReader::new(cr).lines();
    let cwd = serde_json::to_string(&h.cwd).unwrap();
    let frames = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
            .to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{cwd},"mcpServers":[]}}}}"#
        ),
    ];
    let mut session = String::new();
    for (n, frame) in frames.iter().enumerate() {
        cw.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
        // Each request is answered before the next is sent (initialize must complete first).
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == n + 1 {
                if let Some(id) = answer["result"]["sessionId"].as_str() {
                    session = id.to_owned();
                }
                break;
            }
        }
    }
    cw.write_all(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"go\"}}]}}}}\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    h.adapter.wait_for_requests(1).await;
    // Gone, without reading a single update.
    drop(lines);
    drop(cw);
    server.await.unwrap().unwrap();
    assert!(h.core.registry.list().is_empty());
}

#[tokio::test]
async fn disconnect_leaves_every_stored_session_balanced_with_its_last_turn_aborted() {
    let h = H::persistent().await;
    h.adapter
        .push(Script::text("done"))
        .push(Script::partial_then_hang("half"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "first").await.unwrap(),
        StopReason::EndTurn
    );
    let _held = conn.prompt(&id, "second");
    conn.wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    conn.disconnect().await.unwrap();
    // What is on disk after the editor went away.
    let stored = h.stored(&id).await;
    dsh_session::check_balanced(&stored).unwrap();
    let ends: Vec<_> = stored
        .iter()
        .filter_map(|e| match &e.kind {
            dsh_session::EventKind::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![TurnEndReason::Completed, aborted_by_user()]);
}

/// No agent or live session with any of these ids is left.
fn assert_torn_down<'a>(h: &H, ids: impl IntoIterator<Item = &'a String>) {
    for id in ids {
        let id = SessionId::new(id.as_str());
        assert!(
            h.core.registry.get(&id).is_none(),
            "agent {id} still registered"
        );
        assert!(h.core.store.get(&id).is_none(), "session {id} still live");
    }
}

#[tokio::test]
async fn session_load_of_an_id_that_cannot_name_a_session_is_invalid_params() {
    let h = H::persistent().await;
    let conn = h.connect(options()).await;
    conn.initialize().await;
    let e = conn
        .cx
        .send_request(LoadSessionRequest::new(String::new(), conn.cwd.clone()))
        .block_task()
        .await
        .unwrap_err();
    // The client's mistake, not the agent's failure.
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{}", e.message);
    assert!(e.message.contains("invalid session id"), "{}", e.message);
    conn.disconnect().await.unwrap();
}
