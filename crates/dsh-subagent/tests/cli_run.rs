//! End to end through the real `dsh` binary: `dsh run` against the mock server delegates to a
//! subagent, and the child's session file lies next to the parent's, linked by
//! `parentSession`.
//!
//! The binary comes from the same target directory as this test (`target/debug/dsh`), built
//! first when absent ([`dsh_testkit::dsh_binary`]); a binary that cannot be built or does not
//! start fails the test.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_testkit::{MockResponse, MockServer, dsh_binary};
use serde_json::{Value, json};

/// Longest time the binary may take; an external process is waited for with a bounded poll.
const DEADLINE: Duration = Duration::from_secs(60);

fn session_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            session_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

fn header(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn dsh_run_writes_the_child_session_next_to_the_parents_linked_by_parent_session() {
    let dsh = dsh_binary();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = MockServer::start();
    let args = json!({"description": "inspect", "prompt": "say what you see"}).to_string();
    server
        .push(MockResponse::tool_call("call_1", "subagent", &args))
        .push(MockResponse::text("the child saw a tree"))
        .push(MockResponse::text("my child says: a tree"));

    let mut child = Command::new(&dsh)
        .arg("run")
        .arg("delegate the inspection")
        .current_dir(work.path())
        .env("DSH_HOME", home.path())
        .env("HOME", home.path())
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "test-key")
        .env_remove("DSH_PROVIDER")
        .env_remove("DSH_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("dsh run did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(status.success(), "dsh run failed: {status}\n{stderr}");
    assert!(stdout.contains("my child says: a tree"), "stdout: {stdout}");
    assert!(server.violations().is_empty(), "{:?}", server.violations());

    // The parent's second request carries the child's report as the tool result.
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "parent, child, parent");
    let last = requests[2].messages();
    assert!(
        last.iter().any(|m| m["role"] == "tool"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("the child saw a tree"))),
        "{last:?}"
    );

    let mut files = Vec::new();
    session_files(&home.path().join("sessions"), &mut files);
    assert_eq!(files.len(), 2, "{files:?}");
    let headers: Vec<Value> = files.iter().map(|f| header(f)).collect();
    let parent = headers
        .iter()
        .position(|h| h.get("parentSession").is_none())
        .expect("a top-level session");
    let child_at = 1 - parent;
    let child_header = &headers[child_at];
    assert_eq!(child_header["parentSession"], headers[parent]["id"]);
    assert_eq!(child_header["origin"], "subagent");
    assert_eq!(child_header["delegationDepth"], 1);
    assert_eq!(
        files[child_at].parent(),
        files[parent].parent(),
        "the child's file lies next to the parent's"
    );
}
