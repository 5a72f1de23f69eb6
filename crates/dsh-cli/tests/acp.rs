#![allow(clippy::unwrap_used)]
//! `dsh acp` end to end: JSON-RPC frames over the binary's stdio, the model at the mock server.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::World;
use dsh_testkit::MockResponse;
use serde_json::{Value, json};

/// Bound on waiting for one frame, so a broken server fails the test instead of hanging it.
const FRAME_DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn acp_serves_a_prompt_over_stdio_with_only_protocol_frames_on_stdout() {
    let w = World::new();
    std::fs::write(w.cwd.path().join("AGENTS.md"), "Project rule: be brief.").unwrap();
    w.server.push(MockResponse::text("Hello from dsh."));
    let mut child = w
        .dsh(&["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, frames) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut seen = Vec::new();
    let response = |id: u64, seen: &mut Vec<Value>| -> Value {
        loop {
            let line = frames.recv_timeout(FRAME_DEADLINE).unwrap();
            let frame: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
            assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
            seen.push(frame);
        }
    };

    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    let init = response(0, &mut seen);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");

    let cwd = w.cwd.path().canonicalize().unwrap();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}}));
    let created = response(1, &mut seen);
    let session_id = created["result"]["sessionId"].as_str().unwrap().to_owned();

    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}}),
    );
    let done = response(2, &mut seen);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let streamed: String = seen
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
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(0));
    let events = w.load(&session_id);
    dsh_session::check_balanced(&events).unwrap();
}
