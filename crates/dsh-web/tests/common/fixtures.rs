//! Stored sessions written straight into a JSONL store (the store's own layout), for tests
//! and figures that need many or long sessions without a model request per turn.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::Write as _;
use std::path::Path;

use serde_json::{Value, json};

/// An answer with Markdown and a code block, as models write them.
const ANSWER: &str = "Here is what I found:\n\n- the **parser** keeps its state in `Reader`\n- \
     errors carry the line\n\n```rust\nfn parse(input: &str) -> Result<Ast, Error> {\n    \
     let mut reader = Reader::new(input); // one pass\n    reader.document()\n}\n```\n\nThat \
     should be enough to go on.";

/// Writes a session with `turns` completed turns in `cwd` under `home`'s store; every fourth
/// turn reads a file before answering. Returns its id.
pub fn write_session(
    home: &Path,
    cwd: &Path,
    title: &str,
    turns: usize,
    created_ms: u64,
) -> String {
    let id = format!("session-{}", uuid::Uuid::new_v4());
    let header = json!({
        "type": "session", "version": 0, "id": id, "createdAt": created_ms,
        "cwd": cwd, "delegationDepth": 0
    });
    let parsed: dsh_session::SessionHeader = serde_json::from_value(header.clone()).unwrap();
    let path = dsh_store_jsonl::layout::session_path(&home.join("sessions"), &parsed).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut lines = vec![header];
    let mut seq = 0u64;
    let mut push = |kind: &str, data: Value, surface: bool| {
        let mut event = json!({"type": kind, "seq": seq, "time": created_ms + seq, "data": data});
        if surface {
            event["surfaceOp"] = json!("append");
        }
        lines.push(event);
        seq += 1;
    };
    let source = json!({"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"});
    let usage = json!({"inputTokens": 1200, "outputTokens": 80});
    for turn in 1..=turns {
        let prompt = if turn == 1 {
            title.to_owned()
        } else {
            format!("Follow-up question number {turn}: what does the parser do next?")
        };
        push("turn/start", json!({"turn": turn}), false);
        push("step/start", json!({"turn": turn, "step": 1}), false);
        push(
            "user/message",
            json!({"id": uuid::Uuid::new_v4().to_string(), "role": "user",
                "content": [{"type": "text", "text": prompt}], "source": {"kind": "user"}}),
            true,
        );
        let mut step = 1;
        if turn % 4 == 0 {
            let call = format!("call-{turn}");
            let args = r#"{"file_path":"src/parser.rs"}"#;
            push(
                "assistant/message",
                json!({"turn": turn, "step": step, "message": {"id": uuid::Uuid::new_v4().to_string(),
                    "role": "assistant", "content": [{"type": "tool-call", "id": call,
                    "name": "read", "arguments": args}], "source": source}, "usage": usage}),
                true,
            );
            push(
                "tool/call",
                json!({"turn": turn, "step": step, "callId": call, "name": "read", "arguments": args}),
                false,
            );
            push(
                "tool/result",
                json!({"turn": turn, "step": step, "message": {"id": uuid::Uuid::new_v4().to_string(),
                    "role": "user", "content": [{"type": "tool-result", "toolCallId": call,
                    "content": [{"type": "text", "text": "1: fn parse() {}\n2: // more\n"}]}],
                    "source": {"kind": "tool", "callId": call}}}),
                true,
            );
            push("step/end", json!({"turn": turn, "step": step}), false);
            step += 1;
            push("step/start", json!({"turn": turn, "step": step}), false);
        }
        push(
            "assistant/message",
            json!({"turn": turn, "step": step, "message": {"id": uuid::Uuid::new_v4().to_string(),
                "role": "assistant", "content": [{"type": "text", "text": ANSWER}],
                "source": source}, "usage": usage}),
            true,
        );
        push("step/end", json!({"turn": turn, "step": step}), false);
        push(
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
            false,
        );
    }
    let mut file = std::fs::File::create(&path).unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
    file.sync_all().unwrap();
    id
}
