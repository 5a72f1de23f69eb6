#![allow(clippy::unwrap_used)]
//! `session/resume` (ACP v1, behind `sessionCapabilities.resume`): a stored session comes back
//! without its history being sent again, answering with its modes and config options.

mod common;

use agent_client_protocol::ErrorCode;
use agent_client_protocol::v1::schema::{
    ResumeSessionRequest, ResumeSessionResponse, SessionUpdate, StopReason,
};
use common::*;
use dsh_testkit::Script;

async fn resume(
    conn: &Conn,
    id: &str,
) -> Result<ResumeSessionResponse, agent_client_protocol::Error> {
    conn.cx
        .send_request(ResumeSessionRequest::new(id.to_owned(), conn.cwd.clone()))
        .block_task()
        .await
}

#[tokio::test]
async fn initialize_advertises_resume() {
    let h = H::new().await;
    let conn = h.connect(options()).await;
    let init = conn.initialize().await;
    assert!(
        init.agent_capabilities
            .session_capabilities
            .resume
            .is_some()
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn resume_reattaches_a_stored_session_without_replaying_it_and_it_keeps_its_history() {
    let h = H::persistent().await;
    h.adapter
        .push(Script::text("first answer"))
        .push(Script::text("second answer"));
    let first = h.connect(options()).await;
    let id = first.session().await;
    assert_eq!(
        first.prompt_now(&id, "ping").await.unwrap(),
        StopReason::EndTurn
    );
    first.disconnect().await.unwrap();
    assert!(h.agent(&id).is_none());

    let mut second = h.connect(options()).await;
    second.initialize().await;
    let answer = resume(&second, &id).await.unwrap();
    assert_eq!(answer.modes.unwrap().current_mode_id.0.as_ref(), "default");
    // Nothing of the conversation was sent again (the commands the session takes may be).
    let sent: Vec<&'static str> = second
        .received()
        .iter()
        .filter(|n| !matches!(n.update, SessionUpdate::AvailableCommandsUpdate(_)))
        .map(|n| kind_of(&n.update))
        .collect();
    assert!(sent.is_empty(), "no replay after resume: {sent:?}");
    // The agent is back, and its next request carries the earlier turn.
    assert!(h.agent(&id).is_some());
    assert_eq!(
        second.prompt_now(&id, "pong").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(agent_text(&second.received()), "second answer");
    let history = h.adapter.request_texts(1);
    assert!(
        history.iter().any(|m| m.contains("first answer")),
        "the history is kept: {history:?}"
    );
    second.disconnect().await.unwrap();
}

#[tokio::test]
async fn resume_of_a_session_live_in_the_connection_answers_without_replay() {
    let h = H::persistent().await;
    h.adapter.push(Script::text("answer"));
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    conn.prompt_now(&id, "ping").await.unwrap();
    conn.received();
    resume(&conn, &id).await.unwrap();
    let sent: Vec<&'static str> = conn
        .received()
        .iter()
        .filter(|n| !matches!(n.update, SessionUpdate::AvailableCommandsUpdate(_)))
        .map(|n| kind_of(&n.update))
        .collect();
    assert!(sent.is_empty(), "no replay: {sent:?}");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn resume_of_an_unknown_session_is_resource_not_found() {
    let h = H::persistent().await;
    let conn = h.connect(options()).await;
    conn.initialize().await;
    let e = resume(&conn, "no-such-session").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{}", e.message);
    conn.disconnect().await.unwrap();
}
