#![allow(clippy::unwrap_used)]
//! `dsh sessions list | show | fork` on sessions stored by real runs.

mod common;

use common::{World, bash, json_lines, session_id_of, stderr, stdout};
use dsh_testkit::MockResponse;

/// Two stored sessions: the first with a tool call, the second a plain answer.
fn two_sessions(w: &World) -> (String, String) {
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::text("The first answer."));
    let first = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "list",
        "the",
        "files",
    ]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    w.server.push(MockResponse::text("The second answer."));
    let second = w.output(&["run", "--output-format", "stream-json", "second prompt"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    (
        session_id_of(&json_lines(&first)),
        session_id_of(&json_lines(&second)),
    )
}

#[test]
fn list_shows_every_stored_session_newest_first_with_prompt_and_turns() {
    let w = World::new();
    let (first, second) = two_sessions(&w);
    let out = w.bare(&["sessions", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let header = text.lines().next().unwrap();
    for column in ["ID", "LAST ACTIVITY", "TURNS", "CWD", "FIRST PROMPT"] {
        assert!(header.contains(column), "{header}");
    }
    let row_of = |id: &str| text.lines().position(|l| l.starts_with(id)).unwrap();
    assert!(row_of(&second) < row_of(&first), "newest first:\n{text}");
    let first_row = text.lines().nth(row_of(&first)).unwrap();
    assert!(first_row.contains("list the files"), "{first_row}");
    let cwd = w.cwd.path().canonicalize().unwrap();
    assert!(
        first_row.contains(&cwd.display().to_string()),
        "{first_row}"
    );
    let turns: Vec<&str> = first_row.split_whitespace().collect();
    assert_eq!(turns[3], "1", "one turn: {first_row}");
}

#[test]
fn show_prints_a_readable_transcript() {
    let w = World::new();
    let (first, _) = two_sessions(&w);
    let out = w.bare(&["sessions", "show", &first]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with(&format!("session {first}\n")), "{text}");
    let prompt = text.find("user> list the files").unwrap();
    let tool = text.find("● bash(echo one) → exit 0").unwrap();
    let answer = text.find("The first answer.").unwrap();
    let end = text.find("── turn 1 completed").unwrap();
    assert!(prompt < tool && tool < answer && answer < end, "{text}");
}

#[test]
fn fork_copies_a_session_into_a_new_one_and_prints_its_id() {
    let w = World::new();
    let (first, _) = two_sessions(&w);
    let out = w.bare(&["sessions", "fork", &first]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let child = stdout(&out).trim().to_owned();
    assert!(child.starts_with("session-") && child != first, "{child}");
    assert_eq!(w.session_files().len(), 3);
    let shown = stdout(&w.bare(&["sessions", "show", &child]).output().unwrap());
    assert!(shown.contains(&format!("forked from {first}")), "{shown}");
    assert!(shown.contains("The first answer."), "{shown}");
    // The fork can be resumed like any session.
    w.server.push(MockResponse::text("continued"));
    let resumed = w.output(&["run", "--resume", &child, "go on"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(stdout(&resumed), "continued\n");
}

#[test]
fn fork_inside_an_open_turn_is_refused() {
    let w = World::new();
    let (first, _) = two_sessions(&w);
    let turn_start = w
        .load(&first)
        .iter()
        .find(|e| matches!(e.kind, dsh_session::EventKind::TurnStart(_)))
        .unwrap()
        .seq
        .to_string();
    let out = w
        .bare(&["sessions", "fork", &first, "--at", &turn_start])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("dsh: "), "{}", stderr(&out));
    assert_eq!(w.session_files().len(), 2);
}

#[test]
fn show_of_an_unknown_session_fails_naming_it() {
    let w = World::new();
    let out = w
        .bare(&["sessions", "show", "session-missing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("session-missing"));
}

#[test]
fn show_reads_a_session_another_writer_holds_without_waiting_or_repairing_it() {
    let w = World::new();
    let (first, _) = two_sessions(&w);
    let path = w
        .session_files()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(&format!("{first}.jsonl")))
        .unwrap();
    // As a live writer mid-turn leaves it: the turn's end not yet written, an append torn
    // half-way, and the file's writer lock held.
    let text = std::fs::read_to_string(&path).unwrap();
    let end = text.rfind("{\"type\":\"turn/end\"").unwrap();
    let live = format!("{}{{\"type\":\"assistant/chu", &text[..end]);
    std::fs::write(&path, &live).unwrap();
    let writer = std::fs::File::open(&path).unwrap();
    writer.try_lock().unwrap();

    let out = w.bare(&["sessions", "show", &first]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(shown.contains("The first answer."), "{shown}");
    assert!(!shown.contains("turn 1 completed"), "{shown}");
    assert!(shown.contains("the last turn has not ended"), "{shown}");
    // Nothing was repaired under the writer.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), live);
    drop(writer);
}

#[test]
fn show_into_a_reader_that_stops_early_exits_quietly_instead_of_panicking() {
    // `dsh sessions show ID | head`: the transcript is larger than a pipe holds, and the
    // reader goes away after the first lines.
    let w = World::new();
    let answer = "a long line of the answer that fills the transcript\n".repeat(2_000);
    // One delta: the mock's `text` would split it into tens of thousands of events.
    w.server.push(MockResponse::sse(
        dsh_testkit::sse::ChatStream::new("mock-model")
            .role()
            .delta(serde_json::json!({ "content": answer }), None)
            .finish("stop")
            .done()
            .build(),
    ));
    let run = w.output(&["run", "--output-format", "stream-json", "write a lot"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let id = session_id_of(&json_lines(&run));
    let mut child = w.bare(&["sessions", "show", &id]).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}
