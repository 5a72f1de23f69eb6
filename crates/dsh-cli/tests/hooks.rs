#![allow(clippy::unwrap_used)]
//! Command hooks end to end: `dsh run` with a workspace `.dsh/hooks.json`, against the mock
//! server.

mod common;

use common::{World, bash, stderr, stdout};
use dsh_session::EventKind;
use dsh_testkit::MockResponse;

fn write_hooks(w: &World, json: &str) {
    let dir = w.cwd.path().join(".dsh");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hooks.json"), json).unwrap();
}

#[test]
fn a_workspace_pre_tool_use_hook_blocks_a_command_and_the_run_completes() {
    let w = World::new();
    write_hooks(
        &w,
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
            "command":"if grep -q 'push --force'; then echo 'force pushes are not allowed' >&2; exit 2; fi"}]}]}}"#,
    );
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash("git push --force origin main; touch pushed"),
        ))
        .push(MockResponse::tool_call(
            "call_2",
            "bash",
            &bash("echo fine"),
        ))
        .push(MockResponse::text("Done."));
    let out = w.output(&["run", "push it"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "Done.\n");
    assert!(
        !w.cwd.path().join("pushed").exists(),
        "the blocked command never ran"
    );
    let requests = w.server.requests();
    assert_eq!(requests.len(), 3);
    let seen = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(seen.contains("force pushes are not allowed"), "{seen}");
    let seen = serde_json::to_string(requests[2].messages()).unwrap();
    assert!(seen.contains("fine"), "the unmatched command ran: {seen}");
    // Both runs are in the session log.
    let events = w.load(&w.only_session_id());
    let results: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == "hook/result" => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["exitCode"], 2);
    assert_eq!(results[1]["exitCode"], 0);
    // And `dsh sessions show` shows them.
    let shown = w.output(&["sessions", "show", &w.only_session_id()]);
    assert!(
        stdout(&shown).contains("hook"),
        "sessions show: {}",
        stdout(&shown)
    );
}

#[test]
fn hooks_never_see_the_provider_key() {
    let w = World::new();
    let dump = w.cwd.path().join("hook-env.txt");
    write_hooks(
        &w,
        &format!(
            r#"{{"hooks":{{"PreToolUse":[{{"hooks":[{{"type":"command","command":"env > {}"}}]}}]}}}}"#,
            dump.display()
        ),
    );
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("true")))
        .push(MockResponse::text("ok"));
    let out = w
        .bare(&["run", "go"])
        .env("DEEPSEEK_API_KEY", "sk-planted-hook-probe")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let env = std::fs::read_to_string(&dump).unwrap();
    assert!(env.contains("CLAUDE_PROJECT_DIR="), "{env}");
    assert!(!env.contains("sk-planted-hook-probe"), "{env}");
}

#[test]
fn hooks_list_shows_each_hook_with_its_file() {
    let w = World::new();
    write_hooks(
        &w,
        r#"{"hooks":{"PostToolUse":[{"matcher":"Edit|Write","hooks":[{"type":"command","command":"cargo fmt","timeout":30}]}]}}"#,
    );
    let out = w.output(&["hooks", "list"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("PostToolUse:"), "{text}");
    assert!(
        text.contains("[Edit|Write] cargo fmt  (timeout 30 s"),
        "{text}"
    );
    assert!(text.contains(".dsh/hooks.json"), "{text}");
}

#[test]
fn a_broken_hooks_file_is_named_and_refuses_tool_calls() {
    let w = World::new();
    write_hooks(&w, "{\n  \"hooks\": {,}\n}");
    let out = w.output(&["hooks", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("hooks.json:2:"), "{}", stderr(&out));
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash("touch ran"),
        ))
        .push(MockResponse::text("ok"));
    let out = w.output(&["run", "go"]);
    assert!(!w.cwd.path().join("ran").exists());
    assert!(stderr(&out).contains("hooks.json:2:"), "{}", stderr(&out));
}
