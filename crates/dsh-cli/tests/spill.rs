#![allow(clippy::unwrap_used)]
//! Spill for every tool, end to end: a `grep` whose result outgrows the limit reaches the model
//! as head and tail with a line naming a private file under `$DSH_HOME/scratch` that holds the
//! whole result, which `read` can open.

mod common;

use common::{World, stderr};
use dsh_testkit::MockResponse;
use serde_json::json;

/// What the model read as the result of its call in request `n` (its last tool message).
fn result_in(w: &World, n: usize) -> String {
    let requests = w.server.requests();
    let messages = requests[n].messages();
    let tool = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    tool["content"].as_str().unwrap().to_owned()
}

#[test]
fn an_oversized_grep_result_is_cut_and_the_whole_is_in_a_private_file_read_can_open() {
    let w = World::new();
    let lines: String = (1..=3_000).map(|i| format!("needle {i:04}\n")).collect();
    std::fs::write(w.cwd.path().join("hay.txt"), lines).unwrap();
    w.server.push(MockResponse::tool_call(
        "call_1",
        "grep",
        &json!({"pattern": "needle"}).to_string(),
    ));
    // The model then reads the spill file it was told about: its path is only known once the
    // first result exists, so the second call is answered from that request.
    w.server.respond_with(move |request| {
        let seen = serde_json::to_string(request.messages()).unwrap();
        if seen.contains("call_2") {
            return MockResponse::text("done");
        }
        let said = seen
            .split("The whole result is in ")
            .nth(1)
            .and_then(|rest| rest.split(": read it").next())
            .unwrap_or("missing")
            .to_owned();
        MockResponse::tool_call(
            "call_2",
            "read",
            &json!({"file_path": said, "offset": 1500, "limit": 2}).to_string(),
        )
    });
    let out = w.output(&["run", "find", "the", "needles"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let cut = result_in(&w, 1);
    assert!(cut.len() < 34 * 1024, "{}", cut.len());
    assert!(cut.starts_with("hay.txt:1: needle 0001\n"), "{cut}");
    assert!(
        cut.trim_end().ends_with("hay.txt:3000: needle 3000"),
        "{cut}"
    );
    let path = cut
        .split("The whole result is in ")
        .nth(1)
        .and_then(|rest| rest.split(": read it").next())
        .unwrap();
    let scratch = w.home.path().join("scratch");
    assert!(
        std::path::Path::new(path).starts_with(&scratch),
        "{path} is not under {}",
        scratch.display()
    );
    // `read` opened the whole result (the middle, which the cut text left out).
    let read = result_in(&w, 2);
    assert!(read.contains("hay.txt:1500: needle 1500"), "{read}");
    // The private directory goes with the process.
    assert!(!std::path::Path::new(path).exists());
}
