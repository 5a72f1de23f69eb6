#![allow(clippy::unwrap_used)]
//! The line chat (`--plain`) on a real pseudo-terminal: type a message, see the streamed answer,
//! leave with `/exit`.

mod common;

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::World;
use dsh_testkit::MockResponse;

/// Bound on waiting for the chat to print something, so a broken chat fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(60);

struct Screen {
    bytes: mpsc::Receiver<Vec<u8>>,
    seen: String,
    master: std::fs::File,
}

impl Screen {
    /// Reads the terminal until `needle` has appeared after the first `from` bytes, answering
    /// cursor-position queries like a terminal would. Returns the position just after it.
    fn wait_for(&mut self, needle: &str, from: usize) -> usize {
        let start = Instant::now();
        while !self.seen[from..].contains(needle) {
            let left = DEADLINE.saturating_sub(start.elapsed());
            let chunk = self
                .bytes
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("`{needle}` never appeared; screen:\n{}", self.seen));
            let text = String::from_utf8_lossy(&chunk);
            for _ in 0..text.matches("\x1b[6n").count() {
                self.master.write_all(b"\x1b[1;1R").unwrap();
            }
            self.seen.push_str(&text);
        }
        let found = self.seen[from..].find(needle).unwrap_or_default();
        from + found + needle.len()
    }

    fn type_line(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\r").unwrap();
    }
}

/// Starts `dsh` (no arguments) on a new pseudo-terminal.
fn start_chat(w: &World) -> (std::process::Child, Screen) {
    start_chat_with(w, &["--plain"])
}

/// Starts `dsh ARGS…` on a new pseudo-terminal.
fn start_chat_with(w: &World, args: &[&str]) -> (std::process::Child, Screen) {
    let pty = common::spawn_on_pty(w.dsh(args), 30, 100);
    let screen = Screen {
        bytes: pty.bytes,
        seen: String::new(),
        master: pty.master,
    };
    (pty.child, screen)
}

fn wait_exit(child: &mut std::process::Child, screen: &Screen) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < DEADLINE, "the chat did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0), "screen:\n{}", screen.seen);
}

#[test]
fn the_chat_streams_an_answer_on_a_terminal_and_exits_on_command() {
    let w = World::new();
    w.server.push(MockResponse::text("Hi from the chat."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("/help for commands", 0);
    let at = screen.wait_for("› ", at);
    screen.type_line("hello there");
    let at = screen.wait_for("Hi from the chat.", at);
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    // The conversation was stored like any other.
    let id = w.only_session_id();
    let events = w.load(&id);
    dsh_session::check_balanced(&events).unwrap();
    let request = &w.server.requests()[0];
    assert!(
        request.messages().last().unwrap()["content"]
            .to_string()
            .contains("hello there")
    );
}

#[test]
fn enter_while_the_agent_works_steers_the_running_turn() {
    let w = World::new();
    let (held, hold) = MockResponse::text("Working on it.").hold_after(2);
    w.server
        .push(held)
        .push(MockResponse::text("Steered answer."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("start working");
    common::block_on(hold.reached());
    screen.type_line("also mention steering");
    // The chat confirms the steer once it is queued; only then does the first step finish.
    let at = screen.wait_for("(steering:", at);
    hold.release();
    let at = screen.wait_for("Steered answer.", at);
    let requests = w.server.requests();
    assert_eq!(requests.len(), 2, "one turn, two steps");
    let second = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(second.contains("also mention steering"), "{second}");
    assert!(second.contains("Working on it."), "{second}");
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    let id = w.only_session_id();
    let events = w.load(&id);
    let turns = events
        .iter()
        .filter(|e| matches!(e.kind, dsh_session::EventKind::TurnStart(_)))
        .count();
    assert_eq!(turns, 1, "the steer joined the running turn");
}

#[test]
fn ctrl_c_cancels_the_running_turn_not_the_chat() {
    let w = World::new();
    let (held, hold) = MockResponse::text("never completes").hold_after(2);
    w.server.push(held).push(MockResponse::text("Still here."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("long task");
    common::block_on(hold.reached());
    screen.master.write_all(b"\x03").unwrap();
    let at = screen.wait_for("[turn 1 cancelled]", at);
    screen.type_line("are you there?");
    let at = screen.wait_for("Still here.", at);
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    let id = w.only_session_id();
    dsh_session::check_balanced(&w.load(&id)).unwrap();
}

#[test]
fn chat_continue_opens_the_newest_session_here_and_the_plan_is_shown() {
    let w = World::new();
    let todos =
        serde_json::json!({"todos": [{"content": "write the test", "status": "in_progress"}]});
    w.server
        .push(MockResponse::text("first answer"))
        .push(MockResponse::tool_call(
            "call_t",
            "todo_write",
            &todos.to_string(),
        ))
        .push(MockResponse::text("continued answer"));
    let out = w.output(&["run", "first"]);
    assert_eq!(out.status.code(), Some(0));
    let id = w.only_session_id();
    let (mut child, mut screen) = start_chat_with(&w, &["--plain", "chat", "-c"]);
    let at = screen.wait_for(&format!("resumed session {id} (1 turns)"), 0);
    let at = screen.wait_for("› ", at);
    screen.type_line("go on");
    let at = screen.wait_for("[~] write the test", at);
    let at = screen.wait_for("continued answer", at);
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    assert_eq!(w.session_files().len(), 1, "the same session, no new file");
}

#[test]
fn a_write_outside_the_workspace_asks_on_the_terminal_and_runs_once_allowed() {
    let w = World::new();
    // Outside every writable root (not the workspace, not /tmp).
    let dir = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    let target = dir.path().join("asked.txt");
    let args = serde_json::json!({"file_path": target, "content": "ok"}).to_string();
    w.server
        .push(MockResponse::tool_call("call_1", "write", &args))
        .push(MockResponse::text("Written."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("write it");
    let at = screen.wait_for("[y] allow once", at);
    assert!(!target.exists(), "the write ran before the answer");
    screen.type_line("y");
    let at = screen.wait_for("Written.", at);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ok");
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
}

#[test]
fn in_the_chat_plan_shows_the_plan_y_approves_and_the_turn_goes_on() {
    let w = World::new();
    let plan = "# Plan\n1. Add the cache.";
    w.server
        .push(MockResponse::tool_call(
            "p1",
            "exit_plan_mode",
            &serde_json::json!({ "plan": plan }).to_string(),
        ))
        .push(MockResponse::text("Carrying it out."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("/plan add a cache");
    let at = screen.wait_for("plan mode on", at);
    let at = screen.wait_for("│ 1. Add the cache.", at);
    let at = screen.wait_for("[y] approve and start", at);
    screen.type_line("y");
    let at = screen.wait_for("Carrying it out.", at);
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    assert!(
        w.tool_results(1)[0].starts_with("The user approved the plan"),
        "{:?}",
        w.tool_results(1)
    );
    let first = serde_json::to_string(w.server.requests()[0].messages()).unwrap();
    assert!(first.contains("Plan mode is on"), "{first}");
}

#[test]
fn in_the_chat_a_question_is_answered_by_number_and_a_custom_command_is_sent_expanded() {
    let w = World::new();
    let dir = w.cwd.path().join(".dsh/commands");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("store.md"),
        "---\ndescription: Pick a store\n---\nChoose a store for $ARGUMENTS.\n",
    )
    .unwrap();
    let question = serde_json::json!({"questions": [{"question": "Which store?", "options": [
        {"label": "SQLite"}, {"label": "Postgres", "description": "shared"}]}]})
    .to_string();
    w.server
        .push(MockResponse::tool_call(
            "q1",
            "ask_user_question",
            &question,
        ))
        .push(MockResponse::text("Postgres it is."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("/help");
    let at = screen.wait_for("/store  Pick a store", at);
    screen.type_line("/store the sessions");
    let at = screen.wait_for("? Which store?", at);
    let at = screen.wait_for("2. Postgres — shared", at);
    screen.type_line("2");
    let at = screen.wait_for("Postgres it is.", at);
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    let sent = serde_json::to_string(w.server.requests()[0].messages()).unwrap();
    assert!(sent.contains("Choose a store for the sessions."), "{sent}");
    assert_eq!(
        w.tool_results(1)[0],
        "The user answered:\n1. Which store? → Postgres"
    );
}

#[test]
fn a_blocked_host_is_asked_about_in_the_chat_and_allowed_for_the_session() {
    let w = World::new();
    let port = common::origin_thread();
    // 127.0.0.1 is not listed: the proxy holds the command's request and asks.
    std::fs::write(
        w.home.path().join("config.toml"),
        "[sandbox]\nnetwork = \"allowlist\"\nallowed_domains = [\"localhost\"]\n",
    )
    .unwrap();
    let fetch = common::bash(&format!("curl -sS http://127.0.0.1:{port}/ 2>&1"));
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &fetch))
        .push(MockResponse::tool_call("call_2", "bash", &fetch))
        .push(MockResponse::text("Fetched twice."));
    let (mut child, mut screen) = start_chat(&w);
    let at = screen.wait_for("› ", 0);
    screen.type_line("fetch it");
    let at = screen.wait_for("network access to 127.0.0.1", at);
    let at = screen.wait_for("[a] allow for this session", at);
    screen.type_line("a");
    let answered = at;
    let at = screen.wait_for("Fetched twice.", at);
    assert!(
        !screen.seen[answered..].contains("[y] allow once"),
        "asked again: {}",
        screen.seen
    );
    screen.type_line("/exit");
    screen.wait_for("dsh chat --resume", at);
    wait_exit(&mut child, &screen);
    let results = w.tool_results(2);
    for result in &results {
        assert!(result.contains("hello from origin"), "{results:?}");
        assert!(
            !result.contains("[sandbox] network: blocked"),
            "{results:?}"
        );
    }
}
