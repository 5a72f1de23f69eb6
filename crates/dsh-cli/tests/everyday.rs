#![allow(clippy::unwrap_used)]
//! What a developer hits in the first hour, end to end against the mock server: piped input,
//! continuing the newest session, id prefixes, CLAUDE.md and the user-wide AGENTS.md, reasoning
//! effort, the todo list, local servers without a model, and saying what is happening.

mod common;

use std::io::{Read, Write};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{World, json_lines, session_id_of, stderr, stdout};
use dsh_testkit::MockResponse;
use dsh_testkit::sse::ChatStream;
use nix::pty::openpty;
use serde_json::{Value, json};

/// Bound on reading a pseudo-terminal, so a hanging run fails instead of blocking the suite.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `dsh ARGS…` with `input` written to a pipe on stdin (then closed).
fn with_stdin(w: &World, args: &[&str], input: &[u8]) -> Output {
    let mut child = w.dsh(args).stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// The text of the last user message of request `n`.
fn last_user_text(w: &World, n: usize) -> String {
    let requests = w.server.requests();
    let messages = requests[n].messages();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn system_prompt(w: &World, n: usize) -> String {
    w.server.requests()[n].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn write_config(w: &World, text: &str) {
    std::fs::write(w.home.path().join("config.toml"), text).unwrap();
}

#[test]
fn run_dash_sends_the_task_read_from_stdin() {
    let w = World::new();
    w.server.push(MockResponse::text("done"));
    let out = with_stdin(&w, &["run", "-"], b"fix the flaky test\n");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(last_user_text(&w, 0), "fix the flaky test");
}

#[test]
fn a_task_with_piped_input_sends_both() {
    let w = World::new();
    w.server.push(MockResponse::text("looks fine"));
    let out = with_stdin(
        &w,
        &["run", "review", "this"],
        b"diff --git a/x b/x\n+new\n",
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(
        last_user_text(&w, 0),
        "review this\n\n<stdin>\ndiff --git a/x b/x\n+new\n</stdin>"
    );
}

#[test]
fn piped_input_past_one_mib_is_refused_before_any_request() {
    let w = World::new();
    let out = with_stdin(&w, &["run", "summarize"], &vec![b'x'; (1 << 20) + 1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("larger than 1024 KiB"),
        "{}",
        stderr(&out)
    );
    assert!(w.server.requests().is_empty());
    assert!(w.session_files().is_empty());
}

#[test]
fn run_dash_with_nothing_piped_is_a_usage_error() {
    // The harness's stdin is /dev/null: never read, so `-` has nothing to take the task from.
    let w = World::new();
    let out = w.output(&["run", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pipe the task in"),
        "{}",
        stderr(&out)
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn a_terminal_on_stdin_is_never_read() {
    // Nobody types on this terminal: a run that read it would wait forever.
    let w = World::new();
    w.server.push(MockResponse::text("no input needed"));
    let pty = openpty(None, None).unwrap();
    let out = w
        .dsh(&["run", "go"])
        .stdin(Stdio::from(pty.slave))
        .output()
        .unwrap();
    drop(pty.master);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "no input needed\n");
    assert_eq!(last_user_text(&w, 0), "go");
}

#[test]
fn run_continue_appends_a_turn_to_the_newest_session_of_the_directory() {
    let w = World::new();
    w.server
        .push(MockResponse::text("first"))
        .push(MockResponse::text("second"))
        .push(MockResponse::text("continued"));
    let older = json_lines(&w.output(&["run", "--output-format", "stream-json", "one"]));
    let newer = json_lines(&w.output(&["run", "--output-format", "stream-json", "two"]));
    let (older, newer) = (session_id_of(&older), session_id_of(&newer));
    let files = w.session_files();
    assert_eq!(files.len(), 2);

    let out = w.output(&["run", "--output-format", "stream-json", "-c", "and", "more"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(session_id_of(&json_lines(&out)), newer);
    assert_eq!(w.session_files(), files, "no new session file");
    // The continued request carries the newest session's history, not the older one's.
    let history = serde_json::to_string(w.server.requests()[2].messages()).unwrap();
    assert!(
        history.contains("two") && history.contains("second"),
        "{history}"
    );
    assert!(!history.contains("first"), "{history}");
    let turns = w
        .load(&newer)
        .iter()
        .filter(|e| matches!(e.kind, dsh_session::EventKind::TurnStart(_)))
        .count();
    assert_eq!(turns, 2);
    assert_ne!(older, newer);
}

#[test]
fn continue_without_a_session_here_fails_naming_the_directory() {
    let w = World::new();
    let out = w.output(&["run", "-c", "more"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no session to continue"),
        "{}",
        stderr(&out)
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn a_unique_prefix_names_a_session_and_an_ambiguous_one_is_refused() {
    let w = World::new();
    w.server
        .push(MockResponse::text("a"))
        .push(MockResponse::text("b"))
        .push(MockResponse::text("resumed by prefix"));
    let first = session_id_of(&json_lines(&w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "one",
    ])));
    let _ = w.output(&["run", "two"]);
    // `session-` plus the first 8 characters of the uuid.
    let prefix = &first[..16];
    let shown = w.output(&["sessions", "show", prefix]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(stdout(&shown).starts_with(&format!("session {first}\n")));

    let resumed = w.output(&["run", "--resume", prefix, "again"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(stdout(&resumed), "resumed by prefix\n");

    let ambiguous = w.output(&["sessions", "show", "session-"]);
    assert_eq!(ambiguous.status.code(), Some(1));
    assert!(
        stderr(&ambiguous).contains("ambiguous: 2 sessions"),
        "{}",
        stderr(&ambiguous)
    );
    let forked = w.output(&["sessions", "fork", prefix]);
    assert_eq!(forked.status.code(), Some(0), "{}", stderr(&forked));
}

#[test]
fn claude_md_reaches_the_system_prompt_when_there_is_no_agents_md() {
    let w = World::new();
    std::fs::write(w.cwd.path().join("CLAUDE.md"), "Claude rule: use tabs.").unwrap();
    std::fs::write(
        w.home.path().join("AGENTS.md"),
        "My rule: answer in English.",
    )
    .unwrap();
    w.server.push(MockResponse::text("ok"));
    let out = w.output(&["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let system = system_prompt(&w, 0);
    assert!(system.contains("Claude rule: use tabs."), "{system}");
    let (mine, project) = (
        system.find("My rule: answer in English.").unwrap(),
        system.find("Claude rule").unwrap(),
    );
    assert!(mine < project, "the user-wide file comes first: {system}");

    // With an AGENTS.md beside it, CLAUDE.md is not read.
    std::fs::write(w.cwd.path().join("AGENTS.md"), "Agents rule.").unwrap();
    w.server.push(MockResponse::text("ok"));
    let _ = w.output(&["run", "go"]);
    let system = system_prompt(&w, 1);
    assert!(system.contains("Agents rule."), "{system}");
    assert!(!system.contains("Claude rule"), "{system}");
}

#[test]
fn effort_low_reaches_the_request_body_and_config_show() {
    let w = World::new();
    write_config(&w, "[defaults]\nreasoning_effort = \"high\"\n");
    w.server
        .push(MockResponse::text("thought little"))
        .push(MockResponse::text("thought hard"));
    let out = w.output(&["run", "--effort", "low", "go"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let out = w.output(&["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    assert_eq!(requests[0].body["reasoning_effort"], "low");
    assert_eq!(requests[1].body["reasoning_effort"], "high");

    let shown = w.output(&["--effort", "low", "config", "show"]);
    let text = stdout(&shown);
    assert!(text.contains("reasoning_effort = \"low\""), "{text}");
    assert!(text.contains("# flag --effort"), "{text}");
}

#[test]
fn an_effort_the_model_does_not_offer_fails_before_any_request() {
    let w = World::new();
    let out = w.output(&["run", "--effort", "medium", "go"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("medium") && err.contains("off, low, high, max"),
        "{err}"
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn a_blank_reasoning_effort_in_the_file_is_named_at_its_line() {
    let w = World::new();
    write_config(&w, "[providers.deepseek]\nreasoning_effort = \" \"\n");
    let out = w.output(&["config", "show"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("config.toml:2:"), "{}", stderr(&out));
}

fn todo_call(todos: &Value) -> MockResponse {
    MockResponse::tool_call(
        "call_todo",
        "todo_write",
        &json!({ "todos": todos }).to_string(),
    )
}

#[test]
fn the_todo_list_is_logged_and_survives_resume() {
    let w = World::new();
    let todos = json!([
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress"},
        {"content": "run the tests", "status": "pending"}
    ]);
    w.server
        .push(todo_call(&todos))
        .push(MockResponse::text("working on it"))
        .push(MockResponse::text("still here"));
    let out = w.output(&["run", "--output-format", "stream-json", "plan it"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let id = session_id_of(&json_lines(&out));
    // The model read back what it wrote.
    let result = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(result.contains("1/3 completed"), "{result}");

    let out = w.output(&["run", "--resume", &id, "go on"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let list = dsh_session::current_todos(&w.load(&id));
    let got: Vec<(String, &str)> = list
        .iter()
        .map(|t| (t.content.clone(), t.status.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("read the code".to_owned(), "completed"),
            ("fix the bug".to_owned(), "in_progress"),
            ("run the tests".to_owned(), "pending"),
        ]
    );
    let shown = stdout(&w.output(&["sessions", "show", &id]));
    assert!(
        shown.contains("plan (1/3 done):\n  [x] read the code\n  [~] fix the bug"),
        "{shown}"
    );
}

#[test]
fn a_local_server_without_a_model_is_asked_for_its_model() {
    let w = World::new();
    w.server.serve_models(&["qwen3-coder-30b"]);
    w.server.push(MockResponse::text("local answer"));
    let base = format!("{}/v1", w.server.url());
    let out = w.output(&["--provider", "local", "--base-url", &base, "run", "hi"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "local answer\n");
    let requests = w.server.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(requests[1].body["model"], "qwen3-coder-30b");
}

#[test]
fn a_local_server_that_lists_no_models_gets_a_placeholder() {
    let w = World::new();
    w.server.push(MockResponse::text("llama answer"));
    let base = format!("{}/v1", w.server.url());
    let out = w.output(&["--provider", "local", "--base-url", &base, "run", "hi"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    assert_eq!(
        requests.len(),
        2,
        "GET /models (404), then the chat request"
    );
    assert_eq!(requests[1].body["model"], "default");
}

#[test]
fn config_show_never_fails_for_a_missing_model_and_says_what_is_missing() {
    let w = World::new();
    let local = w.output(&["--provider", "local", "config", "show"]);
    assert_eq!(local.status.code(), Some(0), "{}", stderr(&local));
    assert!(
        stdout(&local).contains("# model unset: asked from the server"),
        "{}",
        stdout(&local)
    );

    let openai = w.output(&["--provider", "openai", "config", "show"]);
    assert_eq!(openai.status.code(), Some(0), "{}", stderr(&openai));
    assert!(stdout(&openai).contains("# model unset: NOT SET for provider `openai`"));
    // Running still needs one, and says so before anything is written.
    let run = w
        .bare(&["--provider", "openai", "run", "hi"])
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(stderr(&run).contains("no model chosen"), "{}", stderr(&run));
    assert!(w.session_files().is_empty());
}

#[test]
fn a_base_url_without_a_scheme_is_refused_before_a_session_file_is_written() {
    let w = World::new();
    let out = w.output(&[
        "--provider",
        "local",
        "--base-url",
        "127.0.0.1:8080",
        "run",
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("must start with http:// or https://"), "{err}");
    assert!(err.contains("e.g. http://127.0.0.1:8080"), "{err}");
    assert!(w.session_files().is_empty());
}

#[test]
fn each_retry_is_an_event_line_in_stream_json() {
    let w = World::new();
    w.server
        .push(
            MockResponse::error_json(503, "overloaded", "server_error", None).with_retry_after("0"),
        )
        .push(MockResponse::text("after a retry"));
    let out = w.output(&["run", "--output-format", "stream-json", "go"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let lines = json_lines(&out);
    let retry = lines
        .iter()
        .find(|l| l["event"]["type"] == "llm/retry")
        .expect("an llm/retry event line");
    assert_eq!(retry["event"]["data"]["retry"], 1);
    assert_eq!(retry["event"]["data"]["maxRetries"], 5);
}

#[test]
fn a_max_tokens_stop_says_why_on_a_stderr_that_is_not_a_terminal() {
    let w = World::new();
    w.server.push(MockResponse::sse(
        ChatStream::new("m")
            .role()
            .text("cut off mid")
            .finish("length")
            .usage(10, 10)
            .done()
            .build(),
    ));
    let out = w.output(&["run", "go"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("output-token limit"),
        "{}",
        stderr(&out)
    );
}

/// Runs `dsh ARGS…` with stdout and stderr on one pseudo-terminal; returns what it showed.
fn on_one_terminal(w: &World, args: &[&str]) -> (Option<i32>, String) {
    let pty = openpty(None, None).unwrap();
    let mut child = w
        .dsh(args)
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // Ends with EIO once the child (the last holder of the slave) is gone.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(seen);
    });
    let seen = rx.recv_timeout(DEADLINE).expect("the run ended");
    let status = child.wait().unwrap();
    (status.code(), String::from_utf8_lossy(&seen).into_owned())
}

#[test]
fn on_one_terminal_the_answer_is_shown_once_and_each_retry_is_announced() {
    let w = World::new();
    w.server
        .push(
            MockResponse::error_json(503, "overloaded", "server_error", None).with_retry_after("0"),
        )
        .push(MockResponse::text("the unique answer"));
    let (code, screen) = on_one_terminal(&w, &["run", "go"]);
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(screen.matches("the unique answer").count(), 1, "{screen}");
    assert!(screen.contains("retrying 1/5 in "), "{screen}");
    assert!(screen.contains("HTTP 503: overloaded"), "{screen}");
}

#[test]
fn debug_logs_each_model_request_without_colour_or_keys() {
    let w = World::new();
    w.server.push(MockResponse::text("logged"));
    let out = w
        .dsh(&["run", "go"])
        .env("DSH_LOG", "dsh_llm_http=trace")
        .env("DEEPSEEK_API_KEY", "sk-very-secret-key")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let log = stderr(&out);
    assert!(log.contains("model request"), "{log}");
    assert!(
        log.contains(&format!("url={}/chat/completions", w.server.url())),
        "{log}"
    );
    assert!(log.contains("status=200"), "{log}");
    assert!(
        log.contains("model response done") && log.contains("output_tokens="),
        "{log}"
    );
    assert!(
        log.contains("model request body"),
        "trace shows bodies: {log}"
    );
    assert!(!log.contains("sk-very-secret-key"), "{log}");
    assert!(
        !log.contains('\x1b'),
        "no ANSI colour when stderr is not a terminal: {log}"
    );
}

#[test]
fn debug_logs_anthropic_requests_the_same_way() {
    let w = World::new();
    write_config(
        &w,
        &format!(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
             api_key_env = \"CLAUDE_TEST_KEY\"\nmodels = [\"claude-sonnet-4-5\"]\n",
            w.server.url()
        ),
    );
    w.server.push(MockResponse::anthropic_text("logged too"));
    let out = w
        .dsh(&["run", "--provider", "claude", "go"])
        .env("CLAUDE_TEST_KEY", "sk-ant-very-secret")
        .env("DSH_LOG", "debug,dsh_llm_http=trace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let log = stderr(&out);
    assert!(log.contains("provider=claude"), "{log}");
    assert!(
        log.contains("/v1/messages") && log.contains("status=200"),
        "{log}"
    );
    assert!(log.contains("model response done"), "{log}");
    assert!(!log.contains("sk-ant-very-secret"), "{log}");
}
