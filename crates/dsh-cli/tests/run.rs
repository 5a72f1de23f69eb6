#![allow(clippy::unwrap_used)]
//! `dsh run` end to end: the real binary against the mock server.

mod common;

use common::{World, bash, json_lines, session_id_of, stderr, stdout};
use dsh_session::{EventKind, TurnEndReason};
use dsh_testkit::MockResponse;
use serde_json::Value;

#[test]
fn run_prints_the_final_answer_after_two_bash_calls_and_exits_zero() {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::tool_call("call_2", "bash", &bash("echo two")))
        .push(MockResponse::text("All done."));
    let out = w.output(&["run", "print", "two", "words"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "All done.\n");
    assert_eq!(
        stderr(&out),
        "",
        "a successful run writes nothing to stderr"
    );
    let requests = w.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
    // The tool outputs reached the model.
    let last = serde_json::to_string(requests[2].messages()).unwrap();
    assert!(last.contains("one") && last.contains("two"), "{last}");
    assert_eq!(requests[0].body["model"], "deepseek-v4-flash");
    let first_user = &requests[0].messages().last().unwrap()["content"];
    assert!(first_user.to_string().contains("print two words"));
}

#[test]
fn the_compatible_profile_spelling_runs_the_same_contract() {
    let w = World::new();
    w.server.push(MockResponse::text("hello"));
    let out = w.output(&["--profile", "headless", "say", "hello"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "hello\n");
}

#[test]
fn an_error_turn_exits_one_and_names_code_and_message_on_stderr() {
    let w = World::new();
    w.server.push(MockResponse::error_json(
        400,
        "bad field",
        "invalid_request_error",
        None,
    ));
    let out = w.output(&["run", "anything"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "\n",
        "the answer line is printed even when empty"
    );
    let err = stderr(&out);
    assert!(err.contains("dsh: INVALID_REQUEST: "), "{err}");
    assert!(err.contains("bad field"), "{err}");
}

#[test]
fn a_cancelled_turn_exits_one() {
    // --max-turns 1: the second model request is refused by cancelling with a hook cause.
    let w = World::new();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::text("never requested"));
    let out = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "--max-turns",
        "1",
        "go",
    ]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    assert_eq!(w.server.requests().len(), 1);
    let lines = json_lines(&out);
    let result = lines.last().unwrap();
    assert_eq!(result["exitCode"], 1);
    assert_eq!(result["reason"]["kind"], "aborted");
    assert_eq!(result["reason"]["reason"]["kind"], "hook");
    let events = w.load(&session_id_of(&lines));
    dsh_session::check_balanced(&events).unwrap();
}

#[test]
fn stream_json_prints_one_event_object_per_session_event_then_a_result() {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("echo one")))
        .push(MockResponse::text("Finished."));
    let out = w.output(&["run", "--output-format", "stream-json", "do", "it"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let lines = json_lines(&out);
    let (result, events) = lines.split_last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["text"], "Finished.");
    assert_eq!(result["reason"]["kind"], "completed");
    let id = result["sessionId"].as_str().unwrap();
    assert!(id.starts_with("session-"));
    assert!(!events.is_empty());
    for (i, line) in events.iter().enumerate() {
        assert_eq!(line["type"], "event", "{line}");
        assert_eq!(line["sessionId"], id);
        assert_eq!(line["event"]["seq"], i as u64, "seqs are contiguous from 0");
        // Each event object is the session log's own form.
        let _: dsh_session::SessionEvent = serde_json::from_value(line["event"].clone()).unwrap();
    }
    let types: Vec<&str> = events
        .iter()
        .map(|l| l["event"]["type"].as_str().unwrap())
        .collect();
    for expected in ["turn/start", "tool/call", "tool/result", "turn/end"] {
        assert!(types.contains(&expected), "{types:?}");
    }
    // The stream is exactly the stored log.
    let stored = w.load(id);
    assert_eq!(stored.len(), events.len());
}

#[test]
fn resume_continues_the_same_session_file_and_seq() {
    let w = World::new();
    w.server.push(MockResponse::text("first answer"));
    let first = w.output(&["run", "--output-format", "stream-json", "one"]);
    assert_eq!(first.status.code(), Some(0), "stderr: {}", stderr(&first));
    let first_lines = json_lines(&first);
    let id = session_id_of(&first_lines);
    let files = w.session_files();
    assert_eq!(files.len(), 1);
    let stored_before = w.load(&id).len() as u64;

    w.server.push(MockResponse::text("second answer"));
    let second = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "--resume",
        &id,
        "two",
    ]);
    assert_eq!(second.status.code(), Some(0), "stderr: {}", stderr(&second));
    let lines = json_lines(&second);
    assert_eq!(session_id_of(&lines), id);
    assert_eq!(lines.last().unwrap()["text"], "second answer");
    assert_eq!(
        lines[0]["event"]["seq"].as_u64().unwrap(),
        stored_before,
        "the resumed log continues where the stored one ended"
    );
    assert_eq!(w.session_files(), files, "same file, no new one");
    let events = w.load(&id);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
    }
    dsh_session::check_balanced(&events).unwrap();
    let turns = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::TurnStart(_)))
        .count();
    assert_eq!(turns, 2);
    // The model saw the first exchange again.
    let history = serde_json::to_string(w.server.requests()[1].messages()).unwrap();
    assert!(history.contains("first answer"), "{history}");
}

#[test]
fn resume_with_a_cwd_moves_the_session_there_durably_and_a_missing_directory_names_cwd() {
    let w = World::new();
    w.server.push(MockResponse::text("first"));
    let first = w.output(&["run", "--output-format", "stream-json", "one"]);
    let id = session_id_of(&json_lines(&first));
    let elsewhere = tempfile::tempdir().unwrap();
    let there = elsewhere.path().canonicalize().unwrap();
    let there_text = there.to_str().unwrap().to_owned();
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash("pwd")))
        .push(MockResponse::text("second"));
    let out = w.output(&["run", "--resume", &id, "--cwd", &there_text, "two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("works in {there_text} from now on")),
        "{}",
        stderr(&out)
    );
    let seen = serde_json::to_string(w.server.requests()[2].messages()).unwrap();
    assert!(seen.contains(&there_text), "the command ran there: {seen}");
    // Durable: the next resume, without --cwd, works there too, and says nothing.
    w.server
        .push(MockResponse::tool_call("call_2", "bash", &bash("pwd")))
        .push(MockResponse::text("third"));
    let out = w.output(&["run", "--resume", &id, "three"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    let seen = serde_json::to_string(w.server.requests()[4].messages()).unwrap();
    assert!(seen.contains(&there_text), "{seen}");
    let moved: Vec<_> = w
        .load(&id)
        .iter()
        .filter_map(|e| dsh_session::SessionRerooted::of(e))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    // Its directory gone (another machine, a moved checkout): said at once, naming --cwd.
    drop(elsewhere);
    let out = w.output(&["run", "--resume", &id, "four"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a directory here; resume it with --cwd DIR"),
        "{}",
        stderr(&out)
    );
    assert_eq!(w.server.requests().len(), 5, "nothing was sent");
}

#[test]
fn resuming_an_unknown_session_fails_creation_with_exit_one() {
    let w = World::new();
    let out = w.output(&["run", "--resume", "session-nope", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with("dsh: "), "{err}");
    assert!(err.contains("session-nope"), "{err}");
    assert!(w.server.requests().is_empty());
}

#[test]
fn stream_json_ends_with_a_result_line_even_when_no_turn_could_run() {
    let w = World::new();
    let out = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "--resume",
        "session-nope",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let last = lines.last().expect("a result line");
    assert_eq!(last["type"], "result", "{last}");
    assert_eq!(last["sessionId"], "session-nope");
    assert_eq!(last["exitCode"], 1);
    assert!(last["reason"].is_null(), "{last}");
    assert!(stderr(&out).contains("session-nope"));
}

#[test]
fn a_missing_key_names_the_variable_and_sends_no_request() {
    let w = World::new();
    w.server.push(MockResponse::text("unused"));
    let out = w.bare(&["run", "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("DEEPSEEK_API_KEY"), "{err}");
    assert!(w.server.requests().is_empty());
    assert!(w.session_files().is_empty());
}

#[test]
fn an_invalid_config_file_is_named_with_its_line() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        "[defaults]\nprovider = \"deepseek\"\nmax_tokens = \"lots\"\n",
    )
    .unwrap();
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let path = w.home.path().join("config.toml");
    assert!(
        err.contains(&format!("{}:3:", path.display())),
        "names file and line: {err}"
    );
    assert!(err.contains("max_tokens"), "names the field: {err}");
    assert!(w.server.requests().is_empty());
}

#[test]
fn an_empty_task_is_a_usage_error_and_boots_nothing() {
    let w = World::new();
    let out = w.output(&["run", "  ", ""]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("task is empty"));
    assert!(w.server.requests().is_empty());
    assert!(!w.sessions_root().exists());
}

#[test]
fn agents_md_and_the_persona_reach_the_system_prompt() {
    let w = World::new();
    std::fs::write(
        w.cwd.path().join("AGENTS.md"),
        "Always answer in {{braces}} verbatim.",
    )
    .unwrap();
    w.server.push(MockResponse::text("ok"));
    let out = w.output(&["run", "--model", "deepseek-chat", "hi"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let body = &w.server.requests()[0].body;
    assert_eq!(body["model"], "deepseek-chat");
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let cwd = w.cwd.path().canonicalize().unwrap();
    assert!(
        system.contains(&format!(
            "You are a coding agent powered by deepseek-chat, working directory {}.",
            cwd.display()
        )),
        "{system}"
    );
    assert!(
        system.contains("Always answer in {{braces}} verbatim."),
        "{system}"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for tool in ["bash", "read", "write", "edit", "glob", "grep", "subagent"] {
        assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
    }
}

#[test]
fn the_error_reason_is_recorded_in_the_session_log() {
    let w = World::new();
    w.server.push(MockResponse::error_json(
        400,
        "nope",
        "invalid_request_error",
        None,
    ));
    let out = w.output(&["run", "--output-format", "stream-json", "x"]);
    let lines = json_lines(&out);
    let id = session_id_of(&lines);
    let events = w.load(&id);
    let last = events.last().unwrap();
    match &last.kind {
        EventKind::TurnEnd(t) => {
            assert!(matches!(t.reason, TurnEndReason::Error { .. }));
        }
        other => panic!("last event is {other:?}"),
    }
    assert_eq!(
        lines.last().unwrap()["reason"]["kind"],
        Value::from("error")
    );
}

#[test]
fn a_key_under_any_variable_name_is_hidden_from_the_commands_the_agent_runs() {
    // The shell hides names that look like credentials; a provider's `api_key_env` is hidden
    // whatever it is called, so a key kept as MOCK_AUTH never reaches a command.
    let w = World::new();
    let config = w.home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.mock]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\n\
             models = [\"m\"]\napi_key_env = \"MOCK_AUTH\"\n",
            w.server.url()
        ),
    )
    .unwrap();
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &bash("echo \"auth=[$MOCK_AUTH]\""),
        ))
        .push(MockResponse::text("done"));
    let out = w
        .dsh(&["run", "--provider", "mock", "show the auth"])
        .env("MOCK_AUTH", "sk-hidden-from-bash")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    assert_eq!(requests.len(), 2);
    let seen = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(seen.contains("auth=[]"), "{seen}");
    assert!(!seen.contains("sk-hidden-from-bash"), "{seen}");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-hidden-from-bash")
    );
}

#[test]
fn a_zero_limit_in_the_config_file_is_named_at_its_own_line_not_a_comment() {
    // As when the README's example (with `# max_tokens = 32000` commented out) is edited.
    let w = World::new();
    let config = w.home.path().join("config.toml");
    std::fs::write(
        &config,
        "[defaults]\n# max_tokens = 32000             # default: the model's own cap\n\
         # max_parallel_tool_calls = 10\nmax_parallel_tool_calls = 0\nmax_tokens = 0\n",
    )
    .unwrap();
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:4:", config.display())), "{err}");
    assert!(err.contains("defaults.max_parallel_tool_calls"), "{err}");
    std::fs::write(
        &config,
        "[defaults]\n# max_tokens = 32000             # default: the model's own cap\n\
         max_tokens = 0\n",
    )
    .unwrap();
    let out = w.output(&["run", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:3:", config.display())), "{err}");
    assert!(err.contains("defaults.max_tokens"), "{err}");
    assert!(w.server.requests().is_empty());
}

#[test]
fn an_invalid_dsh_log_filter_is_named_and_the_run_goes_on() {
    let w = World::new();
    w.server.push(MockResponse::text("fine"));
    let out = w
        .dsh(&["run", "hello"])
        .env("DSH_LOG", "dsh=notalevel")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "fine\n");
    assert!(
        stderr(&out).contains("ignoring DSH_LOG"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_answer_that_cannot_be_written_to_stdout_exits_one_and_the_session_is_saved() {
    for format in ["text", "stream-json"] {
        let w = World::new();
        w.server.push(MockResponse::text("the answer"));
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = w
            .dsh(&["run", "--output-format", format, "task"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("dsh: cannot write to stdout: "),
            "{format}: {}",
            stderr(&out)
        );
        let events = w.load(&w.only_session_id());
        assert!(
            events.iter().any(|e| matches!(
                &e.kind,
                EventKind::TurnEnd(t) if t.reason == TurnEndReason::Completed
            )),
            "{format}: the session holds the completed turn"
        );
    }
}

#[test]
fn a_reader_that_closed_the_pipe_is_not_a_failure() {
    let w = World::new();
    let (held, hold) = MockResponse::text("nobody reads this").hold_after(2);
    w.server.push(held);
    let mut child = w.spawn(&["run", "task"]);
    common::block_on(dsh_testkit::bounded(hold.reached()));
    // The reader goes away before the answer is written.
    drop(child.stdout.take());
    hold.release();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("cannot write"), "{}", stderr(&out));
}

#[test]
fn a_resumed_session_goes_to_its_own_provider_and_model() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    w.with_local_provider(&local);
    // The first turn fails (a 400 the run does not retry): no assistant message is logged.
    local.push(MockResponse::error(400, "refused"));
    let first = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "--provider",
        "mock",
        "one",
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let id = session_id_of(&json_lines(&first));

    local.push(MockResponse::text("from the local model"));
    let second = w.output(&["run", "--resume", &id, "two"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(stdout(&second), "from the local model\n");
    assert!(
        w.server.requests().is_empty(),
        "nothing went to the default provider"
    );
    assert!(
        !stderr(&second).contains("resuming with"),
        "{}",
        stderr(&second)
    );
    let requests = local.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["model"], "local-model");
    // A strict chat template accepts the resumed history: roles alternate although the first
    // turn ended without an assistant message.
    let roles: Vec<&str> = requests[1]
        .messages()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system")
        .collect();
    assert!(
        roles.windows(2).all(|p| p[0] != p[1]),
        "roles must alternate: {roles:?}"
    );
}

#[test]
fn a_session_resumed_on_its_own_route_needs_no_key_for_the_default_one() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    let id = w.session_on_local_provider(&local);
    local.push(MockResponse::text("again"));
    // No DEEPSEEK_API_KEY: the default route is not the session's.
    let out = w.bare(&["run", "--resume", &id, "two"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "again\n");
    assert!(w.server.requests().is_empty());
    // A new session still needs the default route's key, named before anything starts.
    let fresh = w.bare(&["run", "three"]).output().unwrap();
    assert_eq!(fresh.status.code(), Some(1));
    assert!(
        stderr(&fresh).contains("DEEPSEEK_API_KEY"),
        "{}",
        stderr(&fresh)
    );
}

#[test]
fn resuming_with_flags_naming_another_route_uses_it_and_says_so() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    w.with_local_provider(&local);
    local.push(MockResponse::text("local"));
    let first = w.output(&[
        "run",
        "--output-format",
        "stream-json",
        "--provider",
        "mock",
        "one",
    ]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let id = session_id_of(&json_lines(&first));

    w.server.push(MockResponse::text("remote"));
    let out = w.output(&["run", "--resume", &id, "--provider", "deepseek", "two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "remote\n");
    assert_eq!(w.server.requests().len(), 1);
    let err = stderr(&out);
    assert!(
        err.contains("session used provider `mock` with model `local-model`; resuming with provider `deepseek`"),
        "{err}"
    );
}
