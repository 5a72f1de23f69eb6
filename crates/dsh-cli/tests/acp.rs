#![allow(clippy::unwrap_used)]
//! `dsh acp` end to end: JSON-RPC frames over the binary's stdio, the model at the mock server.

mod common;

use std::process::ExitStatus;
use std::sync::Arc;

use common::acp::{Acp, FRAME_DEADLINE};
use common::{World, block_on};
use dsh_session::{CancelCause, EventKind, SessionEvent, TurnEndReason};
use dsh_testkit::MockResponse;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// Every session file's events exactly as they are on disk (no repair), by session id.
fn stored_sessions(w: &World) -> Vec<(String, Vec<Arc<SessionEvent>>)> {
    w.session_files()
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let mut lines = text.lines();
            let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
            let events = lines
                .map(|l| Arc::new(serde_json::from_str(l).unwrap()))
                .collect();
            (header["id"].as_str().unwrap().to_owned(), events)
        })
        .collect()
}

fn last_turn_end(events: &[Arc<SessionEvent>]) -> Option<TurnEndReason> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnEnd(t) => Some(t.reason.clone()),
        _ => None,
    })
}

#[test]
fn acp_serves_a_prompt_over_stdio_with_only_protocol_frames_on_stdout() {
    let w = World::new();
    std::fs::write(w.cwd.path().join("AGENTS.md"), "Project rule: be brief.").unwrap();
    w.server.push(MockResponse::text("Hello from dsh."));
    let mut acp = Acp::spawn(&w);
    acp.initialize();
    let session_id = acp.new_session(&w);
    let prompt = acp.prompt(&session_id, "hi");
    let done = acp.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let streamed: String = acp
        .seen
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "Hello from dsh.");

    // The session went through the same composition as `dsh run`.
    let system = w.server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("Project rule: be brief."), "{system}");
    assert!(
        system.contains("You are a coding agent powered by"),
        "{system}"
    );

    // Closing stdin ends the connection; the bridge tears its sessions down and dsh exits.
    let (status, _) = acp.hang_up();
    assert_eq!(status.code(), Some(0));
    let events = w.load(&session_id);
    dsh_session::check_balanced(&events).unwrap();
}

/// A signal while one session's answer is still streaming (the editor keeps stdin open):
/// returns the held prompt's answer, the exit status and stderr, and the ids of the session
/// that finished a turn before and of the one that was streaming.
fn signal_while_a_prompt_streams(
    w: &World,
    sig: Signal,
) -> (Value, ExitStatus, String, String, String) {
    w.server.push(MockResponse::text("first answer"));
    let (held, hold) = MockResponse::text("this answer never finishes").hold_after(3);
    w.server.push(held);
    let mut acp = Acp::spawn(w);
    acp.initialize();
    let done = acp.new_session(w);
    let busy = acp.new_session(w);
    let first = acp.prompt(&done, "first");
    assert_eq!(acp.response(first)["result"]["stopReason"], "end_turn");
    let held_prompt = acp.prompt(&busy, "wait for it");
    block_on(hold.reached());
    acp.signal(sig);
    let answer = acp.response(held_prompt);
    let (status, stderr) = acp.exit(FRAME_DEADLINE);
    (answer, status, stderr, done, busy)
}

fn assert_stopped_in_order(w: &World, done: &str, busy: &str) {
    let sessions = stored_sessions(w);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    for (id, events) in &sessions {
        dsh_session::check_balanced(events).unwrap_or_else(|e| panic!("{id}: {e}"));
        let expected = if id == busy {
            TurnEndReason::Aborted {
                reason: CancelCause::User,
            }
        } else {
            assert_eq!(id, done);
            TurnEndReason::Completed
        };
        assert_eq!(last_turn_end(events), Some(expected), "{id}");
    }
}

#[test]
fn sigterm_runs_the_bridge_teardown_answers_the_held_prompt_cancelled_and_exits_143() {
    let w = World::new();
    let (answer, status, stderr, done, busy) = signal_while_a_prompt_streams(&w, Signal::SIGTERM);
    assert_eq!(status.code(), Some(143), "stderr: {stderr}");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_eq!(stderr, "", "a graceful stop logs nothing");
    assert_stopped_in_order(&w, &done, &busy);
}

#[test]
fn sigint_runs_the_bridge_teardown_answers_the_held_prompt_cancelled_and_exits_130() {
    let w = World::new();
    let (answer, status, stderr, done, busy) = signal_while_a_prompt_streams(&w, Signal::SIGINT);
    assert_eq!(status.code(), Some(130), "stderr: {stderr}");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_eq!(stderr, "", "a graceful stop logs nothing");
    assert_stopped_in_order(&w, &done, &busy);
}

/// A fresh `dsh acp` with one session whose prompt `text` ended `end_turn`; its id.
fn answered(w: &World, text: &str) -> (Acp, String) {
    let mut acp = Acp::spawn(w);
    acp.initialize();
    let session_id = acp.new_session(w);
    let prompt = acp.prompt(&session_id, text);
    let done = acp.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    (acp, session_id)
}

#[test]
fn a_todo_write_reaches_the_editor_as_a_plan_update() {
    let w = World::new();
    let todos = json!([
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress"}
    ]);
    w.server
        .push(MockResponse::tool_call(
            "call_todo",
            "todo_write",
            &json!({ "todos": todos }).to_string(),
        ))
        .push(MockResponse::text("on it"));
    let (mut acp, _) = answered(&w, "plan it");
    let plan = acp
        .seen
        .iter()
        .find(|f| f["params"]["update"]["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(
        plan["params"]["update"]["entries"],
        json!([
            {"content": "read the code", "priority": "medium", "status": "completed"},
            {"content": "fix the bug", "priority": "medium", "status": "in_progress"}
        ])
    );
    let (status, _) = acp.hang_up();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn acp_with_a_local_provider_and_no_model_starts_and_asks_the_server() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[defaults]\nprovider = \"local\"\n[providers.local]\nbase_url = \"{}/v1\"\n",
            w.server.url()
        ),
    )
    .unwrap();
    w.server.serve_models(&["local-model"]);
    w.server.push(MockResponse::text("local hello"));
    let (mut acp, _) = answered(&w, "hi");
    let requests = w.server.requests();
    assert_eq!(requests[0].path, "/v1/models");
    assert_eq!(requests[1].body["model"], "local-model");
    let (status, _) = acp.hang_up();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn acp_session_new_starts_the_editors_mcp_servers_asks_before_their_tools_run_and_reports_a_broken_one()
 {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__editor_tools__echo",
            r#"{"text":"via the editor's server"}"#,
        ))
        .push(MockResponse::text("done"));
    let mut acp = Acp::spawn(&w);
    let init = acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let mcp = &init["result"]["agentCapabilities"]["mcpCapabilities"];
    assert_eq!(mcp["http"], true, "{init}");
    assert_eq!(mcp["sse"], false, "{init}");
    let cwd = w.cwd.path().canonicalize().unwrap();
    let server = env!("CARGO_BIN_EXE_dsh-cli-mcp-test-server");
    let created = acp.call(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [
            {"name": "editor tools", "command": server, "args": [], "env": []},
            {"name": "broken", "command": "/nonexistent/mcp-server", "args": [], "env": []}
        ]}),
    );
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = acp.prompt(&session, "use the editor's tool");
    // The default mode asks the editor before an MCP tool runs; allow it once.
    allow_next_permission(&mut acp, "call_1");
    let done = acp.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let requests = w.server.requests();
    let result = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(result.contains("via the editor's server"), "{result}");
    // The broken server was reported in the session, and the session went on without it.
    let said: String = acp
        .seen
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("MCP server `broken`: cannot start `/nonexistent/mcp-server`"),
        "{said}"
    );
    let (status, _) = acp.hang_up();
    assert!(status.success());
}

/// Waits for the next `session/request_permission` (for `call`) and allows it once.
fn allow_next_permission(acp: &mut Acp, call: &str) {
    loop {
        let line = acp.frames.recv_timeout(FRAME_DEADLINE).unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        if frame["method"] == "session/request_permission" {
            assert_eq!(frame["params"]["toolCall"]["toolCallId"], call, "{frame}");
            acp.send(&json!({"jsonrpc": "2.0", "id": frame["id"], "result":
                {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}));
            return;
        }
        acp.seen.push(frame);
    }
}

#[test]
fn acp_session_load_starts_the_mcp_servers_the_editor_sends_with_it() {
    let w = World::new();
    w.server
        .push(MockResponse::text("first"))
        .push(MockResponse::tool_call(
            "call_2",
            "mcp__t__echo",
            r#"{"text":"after load"}"#,
        ))
        .push(MockResponse::text("done"));
    let mut acp = Acp::spawn(&w);
    acp.initialize();
    let session = acp.new_session(&w);
    let first = acp.prompt(&session, "hi");
    assert_eq!(acp.response(first)["result"]["stopReason"], "end_turn");
    let closed = acp.call("session/close", json!({"sessionId": session}));
    assert!(closed.get("error").is_none(), "{closed}");
    let cwd = w.cwd.path().canonicalize().unwrap();
    let server = env!("CARGO_BIN_EXE_dsh-cli-mcp-test-server");
    let loaded = acp.call(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": [
            {"name": "t", "command": server, "args": [], "env": []}
        ]}),
    );
    assert!(loaded.get("error").is_none(), "{loaded}");
    let second = acp.prompt(&session, "use the tool");
    allow_next_permission(&mut acp, "call_2");
    assert_eq!(acp.response(second)["result"]["stopReason"], "end_turn");
    let result = serde_json::to_string(w.server.requests()[2].messages()).unwrap();
    assert!(result.contains("after load"), "{result}");
    let (status, _) = acp.hang_up();
    assert!(status.success());
}

#[test]
fn session_load_continues_a_session_on_the_route_it_was_held_on() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    let id = w.session_on_local_provider(&local);
    local.push(MockResponse::text("the local model again"));
    let mut acp = Acp::spawn(&w);
    acp.initialize();
    let cwd = w.cwd.path().canonicalize().unwrap();
    let loaded = acp.call(
        "session/load",
        json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
    );
    assert!(loaded.get("error").is_none(), "{loaded}");
    // The editor's model choice offers the session's own route.
    let options = loaded["result"]["configOptions"].to_string();
    assert!(options.contains("local-model"), "{options}");
    let prompt = acp.prompt(&id, "and again");
    assert_eq!(acp.response(prompt)["result"]["stopReason"], "end_turn");
    assert!(
        w.server.requests().is_empty(),
        "nothing went to the default provider"
    );
    assert_eq!(local.requests().len(), 2);
    assert_eq!(local.requests()[1].body["model"], "local-model");
    let (status, _) = acp.hang_up();
    assert!(status.success());
}

#[test]
fn an_editors_stdio_server_runs_inside_the_sandbox() {
    let w = World::new();
    let outside = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    let target = outside.path().join("out.txt");
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__write_file",
            &json!({"path": target, "text": "x"}).to_string(),
        ))
        .push(MockResponse::text("done"));
    let mut acp = Acp::spawn(&w);
    acp.initialize();
    let session = acp.new_session_with_test_server(&w);
    let prompt = acp.prompt(&session, "write outside");
    allow_next_permission(&mut acp, "call_1");
    assert_eq!(acp.response(prompt)["result"]["stopReason"], "end_turn");
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(result.contains("Permission denied"), "{result}");
    assert!(!target.exists());
    let (status, _) = acp.hang_up();
    assert!(status.success());
}

/// A session of `dsh acp ARGS` (prepared by `prepare`) calls the test server's echo tool:
/// it must run without a permission request reaching the editor.
fn mcp_tool_runs_unasked(args: &[&str], prepare: impl FnOnce(&mut Acp, &str)) {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__echo",
            r#"{"text":"unasked"}"#,
        ))
        .push(MockResponse::text("done"));
    let mut acp = Acp::spawn_with(&w, args);
    acp.initialize();
    let session = acp.new_session_with_test_server(&w);
    prepare(&mut acp, &session);
    let prompt = acp.prompt(&session, "use the tool");
    // A permission request would never be answered: the turn would not end.
    assert_eq!(acp.response(prompt)["result"]["stopReason"], "end_turn");
    assert!(
        !acp.seen
            .iter()
            .any(|f| f["method"] == "session/request_permission")
    );
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(result.contains("unasked"), "{result}");
    let (status, _) = acp.hang_up();
    assert!(status.success());
}

#[test]
fn auto_approve_runs_mcp_tools_without_asking_the_editor() {
    mcp_tool_runs_unasked(&["--auto-approve"], |_, _| {});
}

#[test]
fn switching_a_session_to_auto_stops_the_guard_asking_about_mcp_tools() {
    mcp_tool_runs_unasked(&[], |acp, session| {
        let switched = acp.call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "auto"}),
        );
        assert!(switched.get("error").is_none(), "{switched}");
    });
}

#[test]
fn an_mcp_servers_progress_updates_the_calls_card_before_its_result() {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "mcp__t__progress",
            r#"{"steps":2,"every_ms":50}"#,
        ))
        .push(MockResponse::text("done"));
    let mut acp = Acp::spawn_with(&w, &["--auto-approve"]);
    acp.initialize();
    let session = acp.new_session_with_test_server(&w);
    let prompt = acp.prompt(&session, "use the tool");
    assert_eq!(acp.response(prompt)["result"]["stopReason"], "end_turn");
    let updates: Vec<&Value> = acp
        .seen
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .filter(|u| u["toolCallId"] == "call_1")
        .collect();
    let progress = updates
        .iter()
        .position(|u| u["content"][0]["content"]["text"] == "step 2 (2/2)")
        .unwrap_or_else(|| panic!("no progress update: {updates:?}"));
    let done = updates
        .iter()
        .position(|u| u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completion: {updates:?}"));
    assert!(progress < done, "{updates:?}");
    let (status, _) = acp.hang_up();
    assert!(status.success());
}
