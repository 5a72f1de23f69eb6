//! MCP tools through the agent loop: a real test-server process, the scripted model.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_mcp::{McpOptions, ServerConfig, ServerState};
use dsh_testkit::Script;
use parking_lot::Mutex;

#[tokio::test]
async fn a_server_tool_is_offered_namespaced_and_answers_through_the_loop() {
    let w = world_with(vec![test_server("t", &[])]).await;
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__t__echo",
            r#"{"text":"hello"}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(
        offered(&w.adapter, 0),
        [
            "mcp__t__add_resource",
            "mcp__t__ask",
            "mcp__t__echo",
            "mcp__t__env",
            "mcp__t__exit",
            "mcp__t__fail",
            "mcp__t__grow",
            "mcp__t__image",
            "mcp__t__log",
            "mcp__t__progress",
            "mcp__t__roots",
            "mcp__t__sample",
            "mcp__t__slow",
            "mcp__t__write_file"
        ]
    );
    let echo = w.adapter.requests()[0]
        .tools
        .iter()
        .find(|t| t.name == "mcp__t__echo")
        .cloned()
        .unwrap();
    assert_eq!(echo.description, "Answers its text.");
    assert_eq!(echo.parameters["type"], "object");
    assert_eq!(
        tool_results(handle.agent()),
        [("c1".to_owned(), "hello".to_owned(), false, None)]
    );
    assert!(w.adapter.violations().is_empty());
}

#[tokio::test]
async fn an_is_error_result_is_an_error_result_and_an_image_reaches_the_model_as_an_image() {
    let w = world_with(vec![test_server("t", &[])]).await;
    w.adapter
        .push(Script::tool_calls([
            ("c1", "mcp__t__fail", "{}"),
            ("c2", "mcp__t__image", "{}"),
        ]))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let results = tool_results(handle.agent());
    assert_eq!(
        results[0],
        ("c1".to_owned(), "it failed".to_owned(), true, None)
    );
    // The server's PNG is stored and the result carries it by reference.
    let image = result_image(handle.agent(), "c2").expect("an image block in the result");
    assert_eq!(image.media_type, "image/png");
    assert_eq!((image.width, image.height), (Some(2), Some(1)));
}

#[tokio::test]
async fn a_list_change_is_applied_at_the_next_step_boundary_only() {
    let w = world_with(vec![test_server("t", &[])]).await;
    // Step 1 grows the list and, in the same step, calls the new tool: the registry must not
    // change mid-step, so that call is unknown. Step 2's request offers it.
    w.adapter
        .push(Script::tool_calls([
            ("c1", "mcp__t__grow", "{}"),
            ("c2", "mcp__t__extra", "{}"),
        ]))
        .push(Script::tool_call("c3", "mcp__t__extra", "{}"))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert!(!offered(&w.adapter, 0).contains(&"mcp__t__extra".to_owned()));
    assert!(offered(&w.adapter, 1).contains(&"mcp__t__extra".to_owned()));
    let results = tool_results(handle.agent());
    assert_eq!(results[0].1, "grown");
    assert_eq!(results[1].3.as_deref(), Some(dsh_tools::UNKNOWN_TOOL));
    assert_eq!(
        results[2],
        ("c3".to_owned(), "extra".to_owned(), false, None)
    );
}

#[tokio::test]
async fn a_server_that_fails_is_reported_and_the_others_still_serve() {
    let reported: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = reported.clone();
    let mut options = McpOptions::new(std::env::temp_dir());
    options.on_failure = Some(Arc::new(move |e| r.lock().push(e.to_string())));
    let broken = ServerConfig::stdio("broken", "/nonexistent/mcp-server", Vec::new());
    let mut slow = test_server("slow", &["--startup-delay-ms", "5000"]);
    slow.startup_timeout = std::time::Duration::from_millis(200);
    let w = world_with_options(vec![broken, slow, test_server("ok", &[])], options).await;
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__ok__echo",
            r#"{"text":"still here"}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(tool_results(handle.agent())[0].1, "still here");
    assert!(
        offered(&w.adapter, 0)
            .iter()
            .all(|n| n.starts_with("mcp__ok__"))
    );
    let reported = reported.lock().clone();
    assert_eq!(reported.len(), 2, "{reported:?}");
    assert!(reported[0].contains("`broken`") && reported[0].contains("cannot start"));
    assert!(reported[1].contains("`slow`") && reported[1].contains("did not start within"));
    let states: Vec<ServerState> = w
        .servers()
        .statuses()
        .into_iter()
        .map(|s| s.state)
        .collect();
    assert!(matches!(states[0], ServerState::Failed(_)));
    assert!(matches!(states[1], ServerState::Failed(_)));
    assert_eq!(states[2], ServerState::Ready);
}

#[tokio::test]
async fn enabled_and_disabled_tools_filter_what_is_offered() {
    let mut only = test_server("only", &[]);
    only.enabled_tools = Some(vec!["echo".to_owned(), "fail".to_owned()]);
    only.disabled_tools = vec!["fail".to_owned()];
    let mut off = test_server("off", &[]);
    off.enabled = false;
    let w = world_with(vec![only, off]).await;
    w.servers().settled().await;
    let statuses = w.servers().statuses();
    assert_eq!(statuses[0].tools, ["mcp__only__echo"]);
    assert_eq!(statuses[1].state, ServerState::Disabled);
}

#[tokio::test]
async fn a_servers_progress_reports_reach_the_live_feed_of_the_call() {
    use dsh_session::{LiveUpdate, SessionLiveFired};
    let w = world_with(vec![test_server("t", &[])]).await;
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let _live = w
        .ctx
        .on_global::<SessionLiveFired>(move |n| {
            let _ = tx.send(n.update.clone());
        })
        .unwrap();
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__t__progress",
            r#"{"steps":3,"every_ms":50}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(
        tool_results(handle.agent()),
        [("c1".to_owned(), "progressed".to_owned(), false, None)]
    );
    let mut reports = Vec::new();
    while reports.len() < 3 {
        let update = tokio::time::timeout(common::PATIENCE, seen.recv())
            .await
            .expect("three progress reports")
            .unwrap();
        if let LiveUpdate::ToolProgress {
            call_id,
            progress,
            total,
            message,
        } = update
        {
            assert_eq!(call_id.as_str(), "c1");
            reports.push((progress, total, message));
        }
    }
    assert_eq!(
        reports,
        [
            (1.0, Some(3.0), Some("step 1".to_owned())),
            (2.0, Some(3.0), Some("step 2".to_owned())),
            (3.0, Some(3.0), Some("step 3".to_owned())),
        ]
    );
}

#[tokio::test]
async fn a_list_change_announced_during_start_up_is_applied_at_once_without_a_stall() {
    // The server announces a change while dsh is still listing its tools at start-up. The
    // first step boundary lists again and offers the new tool; before the fix the announcement
    // was lost, every boundary waited out the 5 s re-list limit, and `extra` never appeared.
    let dir = scratch();
    let log = log_path(dir.path());
    let w = world_with(vec![test_server(
        "t",
        &["--announce-early", "--log", log.to_str().unwrap()],
    )])
    .await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__extra", "{}"))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    // Two step boundaries; a stall at each would take 10 s, over this bound.
    tokio::time::timeout(std::time::Duration::from_secs(4), async {
        handle
            .agent()
            .followup(dsh_session::Message::user_text("go"))
            .unwrap();
        handle.agent().when_idle().await;
    })
    .await
    .expect("a step boundary stalled on a list change announced during start-up");
    assert!(offered(&w.adapter, 0).contains(&"mcp__t__extra".to_owned()));
    assert_eq!(
        tool_results(handle.agent()),
        [("c1".to_owned(), "extra".to_owned(), false, None)]
    );
    assert_eq!(
        log_lines(&log).iter().filter(|l| *l == "listed").count(),
        2,
        "listed once at start-up and once for the announced change"
    );
}

/// A `MakeWriter` that keeps what the fmt layer writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_servers_log_messages_go_to_the_debug_log_naming_the_server() {
    // The test runtime is single-threaded, so the thread's default subscriber sees the
    // handler's events.
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let w = world_with(vec![test_server("t", &[])]).await;
    w.adapter
        .push(Script::tool_call(
            "c1",
            "mcp__t__log",
            r#"{"text":"disk nearly full"}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(tool_results(handle.agent())[0].1, "logged");
    let text = String::from_utf8(captured.0.lock().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("MCP server log: disk nearly full"))
        .unwrap_or_else(|| panic!("no server log line in {text}"));
    assert!(line.contains("DEBUG"), "{line}");
    assert!(
        line.contains("server=t") && line.contains("level=warning"),
        "{line}"
    );
}

#[tokio::test]
async fn a_servers_instructions_close_the_system_prompt_with_the_same_bytes_at_every_step() {
    let w = world_with(vec![
        test_server("plain", &[]),
        test_server(
            "t",
            &["--instructions", "Greet with echo. {{not_a_variable}}"],
        ),
    ])
    .await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__echo", r#"{"text":"hi"}"#))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let requests = w.adapter.requests();
    let first = requests[0].system.clone().unwrap();
    assert!(
        first.ends_with("## MCP server `t`\nGreet with echo. { {not_a_variable}}"),
        "{first}"
    );
    assert!(
        !first.contains("`plain`"),
        "a server without instructions adds nothing"
    );
    assert_eq!(requests[1].system.as_deref(), Some(first.as_str()));
    assert_eq!(tool_results(handle.agent())[0].1, "hi");
}
