#![allow(clippy::unwrap_used)]
//! Every state of a tool card, as a snapshot (ratatui's test backend), with the colours that
//! carry meaning checked cell by cell: a failure is red with its exit code, a refusal reads as
//! a denial naming who refused, a write the sandbox blocked names its path, and an error says
//! `Error:` once.

mod support;

use std::time::Instant;

use dsh_session::{CallId, EventKind, LiveUpdate, ToolErrorInfo};
use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::json;
use support::{Log, app_with, rows, screen};

fn bash(command: &str) -> serde_json::Value {
    json!({"command": command, "description": "test"})
}

/// The colour of the first cell of `text` on screen.
fn colour_of(terminal: &Terminal<TestBackend>, text: &str) -> Color {
    let buffer = terminal.backend().buffer();
    for (y, row) in rows(terminal).iter().enumerate() {
        if let Some(byte) = row.find(text) {
            let x = row[..byte].chars().count() as u16;
            return buffer[(x, y as u16)].fg;
        }
    }
    panic!("`{text}` is not on screen:\n{}", rows(terminal).join("\n"));
}

#[test]
fn a_running_card_shows_the_live_tail_and_a_finished_one_its_exit() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.user("build it");
    log.call("c1", "bash", bash("cargo build"));
    let mut app = app_with(&log.events, now);
    for i in 1..=7 {
        app.transcript.live(
            &LiveUpdate::ToolOutput {
                call_id: CallId::new("c1"),
                text: format!("Compiling crate-{i}\n"),
                skipped: 0,
            },
            false,
        );
    }
    let running = screen(&mut app, 80, 16, now);
    assert_snapshot!("card_running_live_80x16", running.backend());
    assert_eq!(colour_of(&running, "running"), Color::DarkGray);
    // The result replaces what streamed.
    let result = log.result("c1", "Finished dev profile\n", false);
    app.session_event(&result, false, now);
    let done = screen(&mut app, 80, 16, now);
    assert_snapshot!("card_done_80x16", done.backend());
    let shown = rows(&done).join("\n");
    assert!(!shown.contains("Compiling crate-7"), "{shown}");
    assert_eq!(colour_of(&done, "●"), Color::Green);
}

#[test]
fn a_failed_command_is_red_with_its_exit_code() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call("c1", "bash", bash("make test"));
    log.result("c1", "2 tests failed\n[exit code: 3]", false);
    let mut app = app_with(&log.events, now);
    let t = screen(&mut app, 80, 12, now);
    assert_snapshot!("card_failed_80x12", t.backend());
    assert_eq!(colour_of(&t, "exit 3"), Color::Red);
    assert_eq!(colour_of(&t, "●"), Color::Red);
}

#[test]
fn a_write_the_sandbox_blocked_is_a_denial_with_its_path_even_at_exit_0() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call("c1", "bash", bash("echo hi > /etc/motd; echo done"));
    log.push(EventKind::ToolResult(dsh_session::ToolResult {
        turn: 1,
        step: 1,
        message: std::sync::Arc::new(dsh_session::Message::tool_result(
            CallId::new("c1"),
            vec![
                dsh_session::ContentBlock::text(
                    "done\n[stderr]\nbash: /etc/motd: Permission denied",
                ),
                dsh_session::ContentBlock::text(
                    "[sandbox] write to /etc/motd blocked: outside the writable roots (/work). \
                     Write inside the workspace.",
                ),
            ],
            false,
        )),
        error: None,
        meta: None,
    }));
    let mut app = app_with(&log.events, now);
    let t = screen(&mut app, 80, 12, now);
    assert_snapshot!("card_sandbox_blocked_80x12", t.backend());
    let shown = rows(&t).join("\n");
    assert!(
        shown.contains("the sandbox blocked a write to /etc/motd"),
        "{shown}"
    );
    assert!(
        shown.contains("  bash: /etc/motd: Permission denied"),
        "the note starts its own line: {shown}"
    );
    assert_eq!(colour_of(&t, "exit 0"), Color::Red);
}

#[test]
fn refusals_read_as_denials_naming_who_refused_with_one_error_word() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call(
        "c1",
        "write",
        json!({"file_path": "/etc/x", "content": "x\n"}),
    );
    log.push(EventKind::other(
        "approval/decided",
        json!({"callId": "c1", "tool": "write", "verdict": "deny", "by": "mode",
               "reason": "writing outside the workspace (sandbox `workspace-write`, approval policy `never`)"}),
    ));
    log.result(
        "c1",
        "Error: writing outside the workspace (sandbox `workspace-write`, approval policy `never`)",
        true,
    );
    log.call("c2", "bash", bash("rm -rf build"));
    log.push(EventKind::other(
        "approval/decided",
        json!({"callId": "c2", "tool": "bash", "by": "user", "answer": "rejected"}),
    ));
    log.result("c2", "Error: the user rejected tool `bash`", true);
    log.call("c3", "read", json!({"file_path": "missing.txt"}));
    let r = log.result("c3", "Error: missing.txt: no such file", true);
    let _ = r;
    let mut app = app_with(&log.events, now);
    // A coded failure names its code in the header.
    let coded = log.push(EventKind::ToolCall(dsh_session::ToolCall {
        turn: 1,
        step: 1,
        call_id: CallId::new("c4"),
        name: "bash".into(),
        arguments: bash("sleep 100").to_string(),
    }));
    app.session_event(&coded, false, now);
    let result = log.push(EventKind::ToolResult(dsh_session::ToolResult {
        turn: 1,
        step: 1,
        message: std::sync::Arc::new(dsh_session::Message::tool_result(
            CallId::new("c4"),
            vec![dsh_session::ContentBlock::text(
                "Error: the call was cancelled",
            )],
            true,
        )),
        error: Some(ToolErrorInfo {
            name: "AbortError".into(),
            code: "ABORTED".into(),
        }),
        meta: None,
    }));
    app.session_event(&result, false, now);
    let t = screen(&mut app, 80, 20, now);
    assert_snapshot!("card_denied_and_failed_80x20", t.backend());
    let shown = rows(&t).join("\n");
    assert!(
        shown.contains("⊘ write  /etc/x  denied by the sandbox"),
        "{shown}"
    );
    assert!(
        shown.contains("⊘ bash  rm -rf build  denied by you"),
        "{shown}"
    );
    assert!(shown.contains("failed · ABORTED"), "{shown}");
    assert!(!shown.contains("Error: Error"), "{shown}");
    assert!(!shown.contains("error: Error"), "{shown}");
    assert_eq!(
        shown.matches("Error:").count(),
        2,
        "said once per failed call, never for a denial: {shown}"
    );
    assert_eq!(colour_of(&t, "denied by you"), Color::Red);
}

#[test]
fn notices_keep_their_line_breaks() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    app.transcript
        .notice("model deepseek-v4-flash via deepseek\n  ● deepseek-v4-flash\n    deepseek-v4-pro");
    let shown = rows(&screen(&mut app, 80, 12, now));
    assert_eq!(shown[0], "model deepseek-v4-flash via deepseek");
    assert_eq!(shown[1], "  ● deepseek-v4-flash");
    assert_eq!(shown[2], "    deepseek-v4-pro");
}

#[test]
fn progress_and_a_subagents_running_command_show_on_their_cards() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call("m1", "mcp__docs__index", json!({"path": "docs"}));
    log.call("s1", "subagent", json!({"prompt": "find the flaky test"}));
    let mut app = app_with(&log.events, now);
    app.transcript.live(
        &LiveUpdate::ToolProgress {
            call_id: CallId::new("m1"),
            progress: 3.0,
            total: Some(10.0),
            message: Some("indexing guide.md".into()),
        },
        false,
    );
    let mut child = Log::default();
    let call = child.call("k1", "bash", bash("cargo test flaky"));
    app.session_event(&call, true, now);
    app.transcript.live(
        &LiveUpdate::ToolOutput {
            call_id: CallId::new("k1"),
            text: "running 3 tests\ntest flaky ... ok\n".into(),
            skipped: 0,
        },
        true,
    );
    let t = screen(&mut app, 80, 12, now);
    assert_snapshot!("card_progress_and_subagent_80x12", t.backend());
    let shown = rows(&t).join("\n");
    assert!(
        shown.contains("running · 3/10 indexing guide.md"),
        "{shown}"
    );
    assert!(shown.contains("    test flaky ... ok"), "{shown}");
}

#[test]
fn live_output_after_the_result_is_ignored() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call("c1", "bash", bash("echo hi"));
    log.result("c1", "hi\n", false);
    let mut app = app_with(&log.events, now);
    app.transcript.live(
        &LiveUpdate::ToolOutput {
            call_id: CallId::new("c1"),
            text: "late\n".into(),
            skipped: 0,
        },
        false,
    );
    let shown = rows(&screen(&mut app, 80, 12, now)).join("\n");
    assert!(!shown.contains("late"), "{shown}");
}

#[test]
fn a_host_the_network_proxy_blocked_is_shown_under_its_command() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call("c1", "bash", bash("curl -sS https://exfil.example/"));
    let line = "[sandbox] network: blocked exfil.example:443 (not in `[sandbox] allowed_domains`)";
    log.push(EventKind::other(
        "network/blocked",
        json!({"callId": "c1", "host": "exfil.example", "port": 443, "line": line}),
    ));
    log.result(
        "c1",
        "curl: (56) CONNECT tunnel failed, response 403",
        false,
    );
    let mut app = app_with(&log.events, now);
    let t = screen(&mut app, 120, 12, now);
    let shown = rows(&t).join("\n");
    assert!(shown.contains(&format!("⊘ {line}")), "{shown}");
}
