#![allow(clippy::unwrap_used)]
//! `dsh sessions rewind | diff | prune` on sessions whose turns changed files with the real
//! tools (`write`, `edit`, `bash`), against the mock server.

mod common;

use common::{World, bash, json_lines, session_id_of, stderr, stdout};
use dsh_testkit::MockResponse;
use serde_json::json;

use dsh_testkit::workspace_tree as tree;

/// `(turn, step, at)` of every `checkpoint/created` in the only stored session.
fn checkpoints(w: &World) -> Vec<(u64, u64, String)> {
    let files = w.session_files();
    let text = std::fs::read_to_string(&files[0]).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "checkpoint/created")
        .map(|v| {
            let d = &v["data"];
            (
                d["turn"].as_u64().unwrap(),
                d["step"].as_u64().unwrap(),
                d["at"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn text_of(messages: &[serde_json::Value]) -> String {
    serde_json::to_string(messages).unwrap()
}

/// A session of two turns: a plain first one, and a second that changes the workspace with
/// `write`, `edit` and `bash` (create, modify, delete, rename, mode change, new directory).
fn session_that_changes_files(w: &World) -> String {
    let dir = w.cwd.path();
    std::fs::write(dir.join("edit.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
    std::fs::write(dir.join("old.txt"), "moving\n").unwrap();
    std::fs::write(dir.join("run.sh"), "echo hi\n").unwrap();
    w.server.push(MockResponse::text("Hello."));
    let first = w.output(&["run", "--output-format", "stream-json", "first prompt"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let id = session_id_of(&json_lines(&first));
    let file = |name: &str| dir.join(name).display().to_string();
    w.server
        .push(MockResponse::tool_call(
            "r1",
            "read",
            &json!({"file_path": file("edit.txt")}).to_string(),
        ))
        .push(MockResponse::tool_calls([
            (
                "w1",
                "write",
                json!({"file_path": file("new/made.txt"), "content": "made\n"})
                    .to_string()
                    .as_str(),
            ),
            (
                "e1",
                "edit",
                json!({"file_path": file("edit.txt"), "old_string": "beta", "new_string": "gamma"})
                    .to_string()
                    .as_str(),
            ),
        ]))
        .push(MockResponse::tool_call(
            "b1",
            "bash",
            &bash("rm gone.txt && mv old.txt renamed.txt && chmod +x run.sh && mkdir -p empty/dir"),
        ))
        .push(MockResponse::text("Changed."));
    let second = w.output(&["run", "-c", "change the files"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    id
}

#[test]
fn a_turn_that_changed_files_by_write_edit_and_bash_is_undone_exactly_and_the_conversation_with_it()
{
    let w = World::new();
    // Not a git repository: checkpoints need none.
    std::fs::remove_dir(w.cwd.path().join(".git")).unwrap();
    let dir = w.cwd.path().to_path_buf();
    std::fs::write(dir.join("untouched.txt"), "same\n").unwrap();
    let before = {
        // The state the second turn starts from is the one after the first (which wrote
        // nothing), so it can be taken now with the files the helper creates.
        std::fs::write(dir.join("edit.txt"), "alpha\nbeta\n").unwrap();
        std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(dir.join("old.txt"), "moving\n").unwrap();
        std::fs::write(dir.join("run.sh"), "echo hi\n").unwrap();
        tree(&dir)
    };
    let id = session_that_changes_files(&w);
    let after = tree(&dir);
    assert_ne!(after, before);
    // Checkpoints: each turn's start, before a step whose calls change files (not the step
    // that only read; and step 2's state equals the turn's start, so it is not recorded
    // twice), and at the end of a turn that changed something.
    let marks: Vec<(u64, u64, String)> = checkpoints(&w);
    let expect = |t: u64, s: u64, at: &str| (t, s, at.to_owned());
    assert_eq!(
        marks,
        [
            expect(1, 0, "turn"),
            expect(2, 0, "turn"),
            expect(2, 3, "step"),
            expect(2, 4, "end")
        ]
    );
    assert!(dir.join("renamed.txt").exists() && dir.join("empty/dir").is_dir());

    let diff = w
        .bare(&["sessions", "diff", &id, "--turn", "2"])
        .output()
        .unwrap();
    assert_eq!(diff.status.code(), Some(0), "{}", stderr(&diff));
    let diff = stdout(&diff);
    for expected in [
        "-beta",
        "+gamma",
        "+made",
        "-bye",
        "a/old.txt",
        "b/renamed.txt",
        "mode 100644 -> 100755",
    ] {
        assert!(diff.contains(expected), "{expected} in:\n{diff}");
    }

    let out = w
        .bare(&["sessions", "rewind", &id, "--to-turn", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("rewound to the start of turn 2"),
        "{}",
        stdout(&out)
    );
    assert_eq!(tree(&dir), before);

    // The next request continues from before turn 2.
    w.server.push(MockResponse::text("Again."));
    let next = w.output(&["run", "-c", "after the rewind"]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
    let last = w.server.requests().pop().unwrap();
    let sent = text_of(last.messages());
    assert!(
        sent.contains("first prompt") && sent.contains("after the rewind"),
        "{sent}"
    );
    assert!(!sent.contains("change the files"), "{sent}");
    assert!(!sent.contains("gamma"), "{sent}");
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
}

#[test]
fn files_changed_by_hand_since_the_last_checkpoint_make_the_rewind_refuse_and_stay() {
    let w = World::new();
    let id = session_that_changes_files(&w);
    let edited = w.cwd.path().join("edit.txt");
    std::fs::write(&edited, "my own words\n").unwrap();
    let out = w
        .bare(&["sessions", "rewind", &id, "--to-turn", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("rewind refused") && err.contains("edit.txt") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "my own words\n");
    assert!(
        w.cwd.path().join("renamed.txt").exists(),
        "nothing was written"
    );
    // The conversation was not rewound either.
    let show = stdout(&w.bare(&["sessions", "show", &id]).output().unwrap());
    assert!(!show.contains("rewound"), "{show}");
    // --conversation-only touches no file, so it needs no --force.
    let out = w
        .bare(&[
            "sessions",
            "rewind",
            &id,
            "--to-turn",
            "2",
            "--conversation-only",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "my own words\n");
}

#[test]
fn prune_deletes_the_checkpoints_of_deleted_sessions_only() {
    let w = World::new();
    let id = session_that_changes_files(&w);
    let checkpoints = w.home.path().join("checkpoints");
    assert_eq!(std::fs::read_dir(&checkpoints).unwrap().count(), 1);
    let out = w.bare(&["sessions", "prune"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&checkpoints).unwrap().count(),
        1,
        "still referenced"
    );
    // The session is deleted by hand; its store is young, so prune keeps it within the grace
    // period, and the rewind still works before that.
    for file in w.session_files() {
        std::fs::remove_file(file).unwrap();
    }
    let out = w.bare(&["sessions", "prune"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("removed 0 checkpoint store(s)"),
        "{}",
        stdout(&out)
    );
    let _ = id;
}
