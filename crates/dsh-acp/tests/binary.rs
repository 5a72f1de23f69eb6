#![allow(clippy::unwrap_used)]
//! The real `dsh acp` binary as a child process, driven by an ACP client over its stdio and
//! pointed at the mock OpenAI-compatible server (`DEEPSEEK_BASE_URL`).
//!
//! A library crate cannot name another crate's binary, so the binary is looked up beside this
//! test's own executable (`<target>/<profile>/dsh`, built by `cargo build -p dsh-cli` into the
//! same target directory). When it is missing, or does not have the `acp` subcommand yet, each
//! test says so on stderr and passes without running: run `cargo build -p dsh-cli` first.
//!
//! Contract with the CLI these tests rely on: `dsh acp` reads the provider from the environment
//! (`DEEPSEEK_BASE_URL`, `DEEPSEEK_API_KEY`), keeps sessions as JSONL files under
//! `$DSH_HOME/sessions`, asks the editor before `bash`, and exits 0 once stdin is closed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason, ToolCallStatus};
use common::child::*;
use common::*;
use dsh_session::{EventKind, SessionEvent, TurnEndReason, check_balanced};
use dsh_testkit::{MockResponse, MockServer};

fn last_turn_end(events: &[Arc<SessionEvent>]) -> Option<TurnEndReason> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnEnd(t) => Some(t.reason.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn a_prompt_with_a_bash_call_streams_chunks_and_tool_updates_and_ends_end_turn() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo from-bash","description":"print a word"}"#,
        ))
        .push(MockResponse::text("all done"));
    let mut child = spawn(&bin, &server).await;
    let id = child.conn().session().await;
    let stop = child.conn().prompt_now(&id, "run it").await.unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    let updates = child.conn().received();
    let call = updates.iter().find_map(|n| match &n.update {
        SessionUpdate::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(call.unwrap().title, "echo from-bash");
    let result = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.fields.content.is_some() => Some(u.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(result.fields.status, Some(ToolCallStatus::Completed));
    assert!(
        format!("{:?}", result.fields.content).contains("from-bash"),
        "the command's output is on the card"
    );
    assert_eq!(agent_text(&updates), "all done");
    // bash is mutating: the editor was asked first.
    assert!(child.conn().asked.try_recv().is_ok());
    assert!(server.violations().is_empty());
    let (code, _) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn cancel_during_a_held_stream_ends_cancelled_with_a_balanced_log() {
    let bin = binary();
    let server = MockServer::start();
    let (held, hold) = MockResponse::text("partial answer that never ends").hold_after(3);
    server.push(held);
    let mut child = spawn(&bin, &server).await;
    let id = child.conn().session().await;
    let prompt = child.conn().prompt(&id, "go");
    child
        .conn()
        .wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    child.conn().cancel(&id);
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    let (code, _) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    assert_eq!(code, Some(0));
    drop(hold);
    let files = child.session_files();
    assert_eq!(files.len(), 1);
    let (path, events) = &files[0];
    check_balanced(events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(matches!(
        last_turn_end(events),
        Some(TurnEndReason::Aborted { .. })
    ));
}

#[tokio::test]
async fn closing_stdin_exits_zero_within_5s_with_every_session_file_balanced() {
    let bin = binary();
    let server = MockServer::start();
    let (held, _hold) = MockResponse::text("still streaming when the editor quits").hold_after(3);
    server.push(held);
    let mut child = spawn(&bin, &server).await;
    let busy = child.conn().session().await;
    let _idle = child.conn().session().await;
    let _prompt = child.conn().prompt(&busy, "go");
    child
        .conn()
        .wait_update(&busy, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    let (code, took) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    eprintln!("dsh acp exited {code:?} {took:?} after stdin closed");
    assert_eq!(code, Some(0), "exit 0 within 5 s");
    let files = child.session_files();
    assert!(!files.is_empty());
    for (path, events) in &files {
        check_balanced(events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let aborted = files
        .iter()
        .filter(|(_, events)| matches!(last_turn_end(events), Some(TurnEndReason::Aborted { .. })))
        .count();
    assert_eq!(aborted, 1, "the busy session's turn ended aborted");
}
