#![allow(clippy::unwrap_used)]
//! ACP conformance, each item over the real `dsh acp` binary (see `common::child`): what real
//! clients (acpx, the TypeScript SDK, Zed) rely on.

mod common;

use std::time::Duration;

use agent_client_protocol::ErrorCode;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, LoadSessionRequest, SessionUpdate, StopReason, ToolCallStatus,
};
use common::child::*;
use common::*;
use dsh_testkit::sse::ChatStream;
use dsh_testkit::{MockResponse, MockServer};

const EXIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn unknown_session_ids_are_resource_not_found_in_load_prompt_and_close() {
    let bin = binary();
    let server = MockServer::start();
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    conn.initialize().await;
    let e = conn.prompt_now("no-such-session", "hi").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{}", e.message);
    let e = conn
        .cx
        .send_request(LoadSessionRequest::new("no-such-session", conn.cwd.clone()))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{}", e.message);
    let e = conn
        .cx
        .send_request(CloseSessionRequest::new("no-such-session"))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{}", e.message);
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_session_never_prompted_can_be_loaded_after_a_restart() {
    let bin = binary();
    let server = MockServer::start();
    let mut first = spawn(&bin, &server).await;
    let id = first.conn().session().await;
    assert_eq!(first.close_stdin_and_wait(EXIT).await.0, Some(0));
    let Child { home, .. } = first;
    let mut second = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = second.conn();
    conn.initialize().await;
    conn.load(&id).await.unwrap();
    // And it is a working session.
    server.push(MockResponse::text("hello again"));
    assert_eq!(
        conn.prompt_now(&id, "hi").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(agent_text(&conn.received()), "hello again");
    assert_eq!(second.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn loading_a_session_live_in_this_connection_replays_its_history() {
    let bin = binary();
    let server = MockServer::start();
    server.push(MockResponse::text("first answer"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    conn.prompt_now(&id, "ping").await.unwrap();
    conn.received();
    conn.load(&id).await.unwrap();
    let replay: Vec<(&str, String)> = conn
        .received()
        .iter()
        .filter_map(|n| chunk_text(&n.update))
        .collect();
    assert_eq!(
        replay,
        [
            ("user", "ping".to_owned()),
            ("agent", "first answer".to_owned())
        ]
    );
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn a_tool_call_is_pending_until_permission_is_granted_then_in_progress() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"true","description":"do nothing"}"#,
        ))
        .push(MockResponse::text("done"));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "go").await.unwrap(),
        StopReason::EndTurn
    );
    let updates = conn.received();
    let card = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(card.status, ToolCallStatus::Pending);
    let statuses: Vec<ToolCallStatus> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) => u.fields.status,
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [ToolCallStatus::InProgress, ToolCallStatus::Completed]
    );
    // The question came after the pending card and before the call ran.
    let arrivals = conn.arrivals.lock().clone();
    let at = |what: &str| arrivals.iter().position(|a| a == what).unwrap();
    assert!(at("tool_call") < at("ask:call_1"), "{arrivals:?}");
    assert!(at("ask:call_1") < at("tool_call_update"), "{arrivals:?}");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn client_errors_are_not_logged_as_warnings_by_default() {
    let bin = binary();
    let server = MockServer::start();
    let launch = Launch {
        log: None,
        ..Launch::default()
    };
    let mut child = spawn_in(&bin, &server, tempfile::tempdir().unwrap(), launch).await;
    let conn = child.conn();
    conn.initialize().await;
    for _ in 0..3 {
        let e = conn.prompt_now("no-such-session", "hi").await.unwrap_err();
        assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND);
    }
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
    let stderr = std::fs::read_to_string(&child.stderr).unwrap();
    assert!(!stderr.contains("WARN"), "{stderr}");
}

#[tokio::test]
async fn a_turn_cut_at_the_output_limit_stops_max_tokens() {
    let bin = binary();
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ChatStream::new("mock-model")
            .role()
            .text("cut sh")
            .finish("length")
            .usage(10, 3)
            .done()
            .build(),
    ));
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "write a lot").await.unwrap(),
        StopReason::MaxTokens
    );
    assert_eq!(agent_text(&conn.received()), "cut sh");
    assert_eq!(child.close_stdin_and_wait(EXIT).await.0, Some(0));
}

#[tokio::test]
async fn an_incomplete_configuration_answers_initialize_and_explains_on_session_new() {
    let bin = binary();
    let server = MockServer::start();
    let launch = Launch {
        api_key: false,
        ..Launch::default()
    };
    let mut child = spawn_in(&bin, &server, tempfile::tempdir().unwrap(), launch).await;
    let conn = child.conn();
    let init = conn.initialize().await;
    assert!(init.agent_info.is_some());
    let e = conn
        .cx
        .send_request(agent_client_protocol::v1::schema::NewSessionRequest::new(
            conn.cwd.clone(),
        ))
        .block_task()
        .await
        .unwrap_err();
    assert!(e.message.contains("DEEPSEEK_API_KEY"), "{}", e.message);
    assert!(
        e.message.starts_with("dsh is not configured"),
        "{}",
        e.message
    );
    // No request reached the provider.
    assert!(server.requests().is_empty());
    let (code, _) = child.close_stdin_and_wait(EXIT).await;
    assert_eq!(code, Some(1));
}
