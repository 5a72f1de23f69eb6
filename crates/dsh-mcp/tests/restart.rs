//! A stdio server that goes away is started again, a bounded number of times.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_mcp::{MAX_RESTARTS, McpOptions, ServerState};
use dsh_testkit::Script;
use parking_lot::Mutex;

#[tokio::test]
async fn a_server_that_exits_is_started_again_and_serves_the_next_step() {
    let dir = scratch();
    let log = log_path(dir.path());
    let w = world_with(vec![test_server("t", &["--log", log.to_str().unwrap()])]).await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__exit", "{}"))
        .push(Script::tool_call(
            "c2",
            "mcp__t__echo",
            r#"{"text":"back"}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let results = tool_results(handle.agent());
    assert_eq!(
        results[0].3.as_deref(),
        Some(dsh_mcp::MCP_CALL_FAILED),
        "{results:?}"
    );
    assert_eq!(
        results[1],
        ("c2".to_owned(), "back".to_owned(), false, None),
        "the next step's call reaches the restarted server"
    );
    let started: Vec<String> = log_lines(&log)
        .into_iter()
        .filter(|l| l.starts_with("started "))
        .collect();
    assert_eq!(started.len(), 2, "{started:?}");
    assert_ne!(started[0], started[1], "a new process");
    assert_eq!(w.servers().statuses()[0].state, ServerState::Ready);
}

#[tokio::test]
async fn a_server_that_keeps_exiting_is_reported_and_its_tools_withdrawn() {
    let reported: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = reported.clone();
    let mut options = McpOptions::new(std::env::temp_dir());
    options.on_failure = Some(Arc::new(move |e| r.lock().push(e.to_string())));
    let w = world_with_options(vec![test_server("t", &[])], options).await;
    for i in 0..=MAX_RESTARTS {
        w.adapter
            .push(Script::tool_call(&format!("c{i}"), "mcp__t__exit", "{}"));
    }
    w.adapter.push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    // Every exit (the first start's and each restart's) failed its call.
    let results = tool_results(handle.agent());
    assert_eq!(results.len(), MAX_RESTARTS as usize + 1);
    let last = w.adapter.requests().len() - 1;
    assert!(
        offered(&w.adapter, last).is_empty(),
        "the last request offers none of its tools: {:?}",
        offered(&w.adapter, last)
    );
    let reported = reported.lock().clone();
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert!(
        reported[0].contains(&format!("went away again after {MAX_RESTARTS} restarts")),
        "{reported:?}"
    );
    assert!(matches!(
        w.servers().statuses()[0].state,
        ServerState::Failed(_)
    ));
}
