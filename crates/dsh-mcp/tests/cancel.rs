//! Cancellation, tool timeouts and process discipline against a real server process.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use dsh_agent::{CancelCause, CancelOptions};
use dsh_mcp::MCP_TOOL_TIMEOUT;
use dsh_testkit::Script;
use dsh_tools::TOOL_ABORTED;

#[tokio::test]
async fn a_cancel_during_a_slow_call_returns_at_once_and_the_server_sees_it() {
    let dir = scratch();
    let log = log_path(dir.path());
    let w = world_with(vec![test_server("t", &["--log", log.to_str().unwrap()])]).await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__slow", "{}"))
        .push(Script::text("unused"));
    let handle = w.agent("a").await;
    let agent = handle.agent().clone();
    agent
        .followup(dsh_session::Message::user_text("go"))
        .unwrap();
    until_logged(&log, "slow started").await;
    agent.cancel(CancelCause::User, CancelOptions::default());
    // The slow tool would run for an hour: the turn ending at all proves the call returned.
    tokio::time::timeout(PATIENCE, agent.when_idle())
        .await
        .expect("the cancelled call did not return");
    let results = tool_results(&agent);
    assert_eq!(results[0].3.as_deref(), Some(TOOL_ABORTED));
    until_logged(&log, "cancelled slow").await;
}

#[tokio::test]
async fn a_hanging_server_is_bounded_by_the_tool_timeout_and_told_to_stop() {
    let dir = scratch();
    let log = log_path(dir.path());
    let mut config = test_server("t", &["--log", log.to_str().unwrap()]);
    config.tool_timeout = Duration::from_millis(300);
    let w = world_with(vec![config]).await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__slow", "{}"))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let (_, text, is_error, code) = tool_results(handle.agent()).remove(0);
    assert!(is_error);
    assert_eq!(code.as_deref(), Some(MCP_TOOL_TIMEOUT));
    assert!(text.contains("did not answer within"), "{text}");
    until_logged(&log, "cancelled slow").await;
}

#[tokio::test]
async fn stopping_the_servers_leaves_no_process_of_their_groups() {
    let dir = scratch();
    let log = log_path(dir.path());
    let mut w = world_with(vec![test_server(
        "t",
        &["--log", log.to_str().unwrap(), "--grandchild"],
    )])
    .await;
    w.servers().settled().await;
    let server = logged_pid(&log, "started").await;
    let child = logged_pid(&log, "child").await;
    assert!(alive(server) && alive(child));
    w.stop_servers().await;
    until_gone(server).await;
    until_gone(child).await;
}

#[tokio::test]
async fn a_set_lives_as_long_as_its_scope_and_stops_with_it() {
    let dir = scratch();
    let log = log_path(dir.path());
    let w = world().await;
    let session = w.ctx.child("session").unwrap();
    let set = dsh_mcp::McpServers::start(
        &session,
        vec![test_server("t", &["--log", log.to_str().unwrap()])],
        dsh_mcp::McpOptions::new(std::env::temp_dir()),
    )
    .unwrap();
    set.settled().await;
    let weak = std::sync::Arc::downgrade(&set);
    drop(set);
    let set = weak.upgrade().expect("the scope keeps the set alive");
    assert_eq!(set.statuses()[0].state, dsh_mcp::ServerState::Ready);
    drop(set);
    let server = logged_pid(&log, "started").await;
    tokio::time::timeout(PATIENCE, session.scope().dispose())
        .await
        .unwrap();
    until_gone(server).await;
    assert!(weak.upgrade().is_none(), "disposal released the set");
}

#[tokio::test]
async fn progress_reports_keep_a_call_alive_past_its_tool_timeout() {
    // Twelve reports 100 ms apart: 1.2 s in all, four times the 300 ms timeout, never more
    // than 100 ms of silence. Without the extension the call times out at 300 ms.
    let mut config = test_server("t", &[]);
    config.tool_timeout = Duration::from_millis(300);
    let w = world_with(vec![config]).await;
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__t__progress",
            r#"{"steps":12,"every_ms":100}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(
        tool_results(handle.agent()),
        [("c1".to_owned(), "progressed".to_owned(), false, None)]
    );
}

#[tokio::test]
async fn progress_never_extends_a_call_past_the_hard_maximum() {
    let dir = scratch();
    let log = log_path(dir.path());
    let mut config = test_server("t", &["--log", log.to_str().unwrap()]);
    config.tool_timeout = Duration::from_millis(300);
    config.tool_timeout_max = Duration::from_millis(600);
    let w = world_with(vec![config]).await;
    // Reports every 100 ms for an hour: only the maximum can end it.
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__t__progress",
            r#"{"steps":36000,"every_ms":100}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let (_, text, is_error, code) = tool_results(handle.agent()).remove(0);
    assert!(is_error);
    assert_eq!(code.as_deref(), Some(MCP_TOOL_TIMEOUT));
    assert!(text.contains("tool_timeout_max_sec"), "{text}");
}
