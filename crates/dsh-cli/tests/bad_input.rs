#![allow(clippy::unwrap_used)]
//! Bad input a user can act on: each gets a specific error naming what to fix, through the
//! real binary against the mock server.

mod common;

use common::{World, stderr, stdout};
use dsh_testkit::MockResponse;
use dsh_testkit::sse::ChatStream;

#[test]
fn an_empty_model_in_the_config_file_is_a_config_error_at_its_line_and_column() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        "[defaults]\nmodel = \"\"\n",
    )
    .unwrap();
    for args in [&["config", "show"][..], &["run", "hello"][..]] {
        let out = w.output(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("config.toml:2:9"), "{args:?}: {err}");
        assert!(err.contains("defaults.model is empty"), "{args:?}: {err}");
    }
    let out = w.output(&["run", "--model", "", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--model is empty"),
        "{}",
        stderr(&out)
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn an_unusable_sessions_directory_is_named_with_its_cause_before_any_request() {
    // A file where the sessions directory belongs (permissions would not stop a root test).
    let w = World::new();
    let sessions = w.home.path().join("sessions");
    std::fs::write(&sessions, "").unwrap();
    w.server.push(MockResponse::text("never asked"));
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot store sessions in {}: File exists",
            sessions.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("set DSH_HOME to a writable directory"),
        "{err}"
    );
    assert!(!err.contains("UNKNOWN"), "{err}");
    assert!(w.server.requests().is_empty());
}

#[test]
fn a_stream_closed_before_any_of_the_answer_is_retried() {
    let w = World::new();
    w.server
        .push(MockResponse::sse(ChatStream::new("m").role().build()))
        .push(MockResponse::text("second time lucky"));
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "second time lucky\n");
    assert_eq!(w.server.requests().len(), 2);
}

#[test]
fn a_server_that_answers_without_streaming_is_named_as_such() {
    let w = World::new();
    w.server.push(MockResponse::error(
        200,
        r#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}"#,
    ));
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("MALFORMED_RESPONSE"), "{err}");
    assert!(err.contains("did not stream; check the base URL"), "{err}");
    assert_eq!(w.server.requests().len(), 1, "not retried");
}
