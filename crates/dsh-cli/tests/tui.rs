#![allow(clippy::unwrap_used)]
//! The full-screen UI end to end: the real `dsh` on a pseudo-terminal against the mock server,
//! its screen read through a `vt100` emulator.

mod common;

use common::pty_ui::Tui;
use common::{World, stdout};
use dsh_testkit::MockResponse;

#[test]
fn a_prompt_streams_its_answer_and_exit_restores_the_terminal() {
    let w = World::new();
    w.server
        .push(MockResponse::text("Hi from the **full-screen** UI."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    assert!(tui.term.screen().alternate_screen());
    tui.type_line("hello there");
    tui.wait_for("Hi from the full-screen UI.");
    tui.wait_for("› hello there");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    tui.assert_restored();
    let printed = String::from_utf8_lossy(&tui.raw);
    assert!(printed.contains("dsh chat --resume"), "{printed}");
    // Nothing asked the terminal anything (a query that is not answered stalls the UI).
    assert!(
        !printed.contains("\x1b[6n"),
        "the UI queried the cursor position"
    );
    let id = w.only_session_id();
    dsh_session::check_balanced(&w.load(&id)).unwrap();
}

#[test]
fn a_two_step_bash_loop_shows_each_commands_output() {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call(
            "c1",
            "bash",
            &common::bash("echo first-output"),
        ))
        .push(MockResponse::tool_call(
            "c2",
            "bash",
            &common::bash("echo second-output; exit 3"),
        ))
        .push(MockResponse::text("Both commands ran."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("run two commands");
    tui.wait_for("Both commands ran.");
    let screen = tui.screen();
    assert!(
        screen.contains("● bash  echo first-output  exit 0"),
        "{screen}"
    );
    assert!(screen.contains("  first-output"), "{screen}");
    assert!(screen.contains("  second-output"), "{screen}");
    assert!(screen.contains("exit 3"), "{screen}");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), Some(0));
    tui.assert_restored();
}

#[test]
fn an_edit_shows_its_diff() {
    let w = World::new();
    let file = w.cwd.path().join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\ngamma\n").unwrap();
    let path = file.display().to_string();
    w.server
        .push(MockResponse::tool_call(
            "r1",
            "read",
            &serde_json::json!({"file_path": path}).to_string(),
        ))
        .push(MockResponse::tool_call(
            "e1",
            "edit",
            &serde_json::json!({"file_path": path, "old_string": "beta", "new_string": "BETA"})
                .to_string(),
        ))
        .push(MockResponse::text("Edited."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("capitalize beta");
    tui.wait_for("Edited.");
    let screen = tui.screen();
    assert!(screen.contains("± edit"), "{screen}");
    assert!(screen.contains("- beta"), "{screen}");
    assert!(screen.contains("+ BETA"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn esc_during_a_held_stream_cancels_and_leaves_a_balanced_session() {
    let w = World::new();
    let (held, hold) = MockResponse::text("partial answer that never ends").hold_after(2);
    w.server.push(held).push(MockResponse::text("Still here."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("long task");
    common::block_on(hold.reached());
    tui.wait_for("esc to cancel");
    tui.keys("\x1b");
    tui.wait_for("⊘ cancelled");
    tui.wait("the spinner to stop", |s| {
        !s.contents().contains("esc to cancel")
    });
    tui.type_line("are you there?");
    tui.wait_for("Still here.");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    tui.assert_restored();
    let id = w.only_session_id();
    let events = w.load(&id);
    dsh_session::check_balanced(&events).unwrap();
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        dsh_session::EventKind::TurnEnd(t) if t.reason
            == (dsh_session::TurnEndReason::Aborted { reason: dsh_session::CancelCause::User })
    )));
}

#[test]
fn resume_picks_a_stored_session_and_replays_it() {
    let w = World::new();
    w.server
        .push(MockResponse::text("Stored answer from before."));
    let out = w.output(&["run", "remember the zebra"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("/resume");
    tui.wait_for("remember the zebra");
    tui.keys("zeb");
    tui.keys("\r");
    tui.wait_for("Stored answer from before.");
    tui.wait_for("› remember the zebra");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn ctrl_c_twice_exits_with_the_terminal_restored() {
    let w = World::new();
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.keys("\x03");
    tui.wait_for("ctrl+c again to exit");
    tui.keys("\x03");
    assert_eq!(tui.exit_code(), Some(0));
    tui.assert_restored();
}

#[test]
fn a_panic_restores_the_terminal_and_shows_its_message() {
    let w = World::new();
    let mut tui = Tui::start(
        &w,
        &[],
        &[("DSH_TUI_TEST_PANIC", "1"), ("RUST_BACKTRACE", "0")],
    );
    let code = tui.exit_code();
    assert_eq!(code, Some(101), "{}", String::from_utf8_lossy(&tui.raw));
    tui.assert_restored();
    assert!(
        tui.screen().contains("DSH_TUI_TEST_PANIC"),
        "{}",
        tui.screen()
    );
}

#[test]
fn plain_keeps_the_line_chat() {
    let w = World::new();
    let mut tui = Tui::start(&w, &["--plain"], &[]);
    tui.wait_for("/help for commands");
    assert!(!tui.term.screen().alternate_screen());
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn an_approval_card_appears_and_a_deny_with_a_reason_reaches_the_model() {
    let w = World::new();
    // A workspace PreToolUse hook that asks before every bash call.
    let dir = w.cwd.path().join(".dsh");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("hooks.json"),
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
            "command":"echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"touches the tree\"}}'"}]}]}}"#,
    )
    .unwrap();
    // Trusted beforehand: this test is about the card the hook's `ask` brings up, not about
    // the question an untrusted workspace's hooks bring up first.
    assert!(w.output(&["hooks", "trust"]).status.success());
    w.server
        .push(MockResponse::tool_call(
            "c1",
            "bash",
            &common::bash("touch created-anyway"),
        ))
        .push(MockResponse::text("Understood, I will not."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("make a file");
    tui.wait_for("Allow bash?");
    tui.wait_for("$ touch created-anyway");
    // The choices show once keys count; only then answer.
    tui.wait_for("y allow once");
    tui.keys("n");
    tui.wait_for("reason for the model");
    tui.type_line("use a dry run");
    tui.wait_for("Understood, I will not.");
    assert!(!w.cwd.path().join("created-anyway").exists());
    let requests = w.server.requests();
    assert_eq!(requests.len(), 2, "one turn, two steps");
    let second = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(second.contains("rejected"), "{second}");
    assert!(second.contains("use a dry run"), "{second}");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    dsh_session::check_balanced(&w.load(&w.only_session_id())).unwrap();
}

#[test]
fn enter_while_the_agent_works_steers_and_tab_queues_a_follow_up_turn() {
    let w = World::new();
    let (held, hold) = MockResponse::text("Working on it.").hold_after(2);
    w.server
        .push(held)
        .push(MockResponse::text("Steered answer."))
        .push(MockResponse::text("Follow-up answer."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("start working");
    common::block_on(hold.reached());
    tui.wait_for("esc to cancel");
    tui.type_line("also mention steering");
    tui.wait_for("↳ steer: also mention steering");
    tui.keys("then write the docs\t");
    tui.wait_for("⇥ queued: then write the docs");
    hold.release();
    tui.wait_for("Follow-up answer.");
    tui.wait("the pending strip to clear", |s| {
        !s.contents().contains("steer:") && !s.contents().contains("queued:")
    });
    let requests = w.server.requests();
    assert_eq!(requests.len(), 3);
    let second = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(second.contains("also mention steering"), "{second}");
    assert!(!second.contains("then write the docs"), "{second}");
    let third = serde_json::to_string(requests[2].messages()).unwrap();
    assert!(third.contains("then write the docs"), "{third}");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let events = w.load(&w.only_session_id());
    let turns = events
        .iter()
        .filter(|e| matches!(e.kind, dsh_session::EventKind::TurnStart(_)))
        .count();
    assert_eq!(
        turns, 2,
        "the steer joined turn 1; the queued message ran as turn 2"
    );
}

#[test]
fn the_uis_resume_continues_a_session_on_the_route_it_was_held_on() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    let id = w.session_on_local_provider(&local);
    local.push(MockResponse::text("the local model again"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    // A unique prefix names the session.
    tui.type_line(&format!("/resume {}", &id[..id.len() - 4]));
    tui.wait_for("from the local model");
    tui.type_line("and again");
    tui.wait_for("the local model again");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    assert!(
        w.server.requests().is_empty(),
        "nothing went to the default provider"
    );
    let requests = local.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["model"], "local-model");
}

#[test]
fn the_line_chats_resume_continues_a_session_on_the_route_it_was_held_on() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    let id = w.session_on_local_provider(&local);
    local.push(MockResponse::text("the local model again"));
    let mut chat = Tui::start(&w, &["--plain"], &[]);
    chat.wait_for("/help for commands");
    chat.type_line(&format!("/resume {}", &id[..id.len() - 4]));
    chat.wait_for("resumed session");
    chat.type_line("and again");
    chat.wait_for("the local model again");
    chat.type_line("/exit");
    assert_eq!(chat.exit_code(), Some(0));
    assert!(
        w.server.requests().is_empty(),
        "nothing went to the default provider"
    );
    assert_eq!(local.requests().len(), 2);
    assert_eq!(local.requests()[1].body["model"], "local-model");
}

#[test]
fn the_ui_in_plan_mode_shows_the_plan_and_y_approves_it_in_the_same_turn() {
    let w = World::new();
    w.server
        .push(MockResponse::tool_call(
            "p1",
            "exit_plan_mode",
            &serde_json::json!({"plan": "# Plan\n1. Add the cache layer."}).to_string(),
        ))
        .push(MockResponse::text("Carrying it out."));
    let mut tui = Tui::start(&w, &["--plan"], &[]);
    tui.ready();
    tui.wait_for("· plan mode ·");
    tui.type_line("add a cache");
    tui.wait_for("▌ Plan");
    tui.wait_for("y approve and start");
    tui.keys("y");
    tui.wait_for("Carrying it out.");
    tui.wait_for("✓ plan approved");
    assert!(
        w.tool_results(1)[0].starts_with("The user approved the plan"),
        "{:?}",
        w.tool_results(1)
    );
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let events = w.load(&w.only_session_id());
    let modes: Vec<bool> = events
        .iter()
        .filter_map(|e| dsh_plan::ModeChange::of(e).map(|m| m.active))
        .collect();
    assert_eq!(modes, [true, false]);
}

#[test]
fn the_ui_offers_custom_commands_and_answers_a_question_card_with_a_number() {
    let w = World::new();
    let dir = w.cwd.path().join(".dsh/commands");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("store.md"),
        "---\ndescription: Pick a store\nargument-hint: WHAT\n---\nChoose a store for $1.\n",
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
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.keys("/sto");
    tui.wait_for("Pick a store");
    tui.keys("\t");
    tui.type_line("sessions");
    tui.wait_for("2. Postgres — shared");
    tui.wait_for("1-9 pick");
    tui.keys("2");
    tui.wait_for("Postgres it is.");
    let sent = serde_json::to_string(w.server.requests()[0].messages()).unwrap();
    assert!(sent.contains("Choose a store for sessions."), "{sent}");
    assert_eq!(
        w.tool_results(1)[0],
        "The user answered:\n1. Which store? → Postgres"
    );
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}
#[test]
fn an_untrusted_workspaces_hooks_are_asked_about_once_and_trusting_records_them() {
    let w = World::new();
    let dir = w.cwd.path().join(".dsh");
    std::fs::create_dir_all(&dir).unwrap();
    let marker = w.cwd.path().join("hook-ran");
    std::fs::write(
        dir.join("hooks.json"),
        format!(
            r#"{{"hooks":{{"UserPromptSubmit":[{{"hooks":[{{"type":"command","command":"echo x >> {}"}}]}}]}}}}"#,
            marker.display()
        ),
    )
    .unwrap();
    w.server
        .push(MockResponse::text("first answer"))
        .push(MockResponse::text("second answer"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("hello");
    tui.wait_for("Allow hooks?");
    tui.wait_for("y allow once");
    tui.keys("y");
    tui.wait_for("first answer");
    tui.type_line("again");
    tui.wait_for("second answer");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    // Asked once: both prompts ran the hook.
    assert_eq!(std::fs::read_to_string(&marker).unwrap().lines().count(), 2);
    let listed = stdout(&w.output(&["hooks", "list"]));
    assert!(listed.contains("read, trusted"), "{listed}");
}

#[test]
fn a_running_commands_output_streams_into_its_card_before_it_ends() {
    let w = World::new();
    let gate = w.cwd.path().join("gate.fifo");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let command = format!("echo tick-1; read -r _ < {}; echo tick-2", gate.display());
    w.server
        .push(MockResponse::tool_call(
            "c1",
            "bash",
            &common::bash(&command),
        ))
        .push(MockResponse::text("Both ticks printed."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("tick twice");
    // The first line is on screen while the command still waits on its gate.
    // (The card's header holds the whole command, `echo tick-2` included: look at output rows.)
    let row = |s: &vt100::Screen, want: &str| s.contents().lines().any(|l| l.trim_end() == want);
    tui.wait("the first tick in a running card", |s| {
        row(s, "  tick-1") && s.contents().contains("running") && !row(s, "  tick-2")
    });
    std::fs::write(&gate, "go\n").unwrap();
    tui.wait_for("Both ticks printed.");
    assert!(row(tui.term.screen(), "  tick-2"), "{}", tui.screen());
    assert!(tui.screen().contains("exit 0"), "{}", tui.screen());
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    // Live output is never logged: the session holds the call and its one result.
    let events = w.load(&w.only_session_id());
    dsh_session::check_balanced(&events).unwrap();
}

#[test]
fn the_status_line_and_mode_say_what_the_session_runs_under() {
    let w = World::new();
    let mut tui = Tui::start(&w, &["--sandbox", "read-only"], &[]);
    tui.ready();
    tui.wait_for("read-only · ask · network");
    tui.type_line("/mode");
    tui.wait_for("mode: read-only · ask · network");
    // A switch shows at once, in the status line too.
    tui.type_line("/mode auto");
    tui.wait_for("mode: read-only · auto · network");
    // The status line is the frame's last row; the answer and it may reach the pty in
    // separate writes, so wait for the row rather than read it once.
    tui.wait("`read-only · auto` in the status line", |s| {
        s.contents()
            .lines()
            .last()
            .is_some_and(|status| status.contains("read-only · auto"))
    });
    tui.type_line("/mode sometimes");
    tui.wait_for("unknown approval policy `sometimes`");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn model_switches_for_the_next_request_and_a_resume_keeps_it() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    w.with_local_provider(&local);
    w.server.push(MockResponse::text("from deepseek"));
    local.push(MockResponse::text("from the local model"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("first");
    tui.wait_for("from deepseek");
    // The catalogue lists windows and prices; deepseek-v4-flash is priced.
    tui.type_line("/model");
    tui.wait_for("Switch model");
    tui.wait_for("local-model");
    tui.keys("\x1b");
    tui.wait("the picker to close", |s| {
        !s.contents().contains("Switch model")
    });
    tui.type_line("/model mock/local-model");
    tui.wait_for("model: local-model via mock from the next request on");
    tui.wait("the status line to name the new model", |s| {
        s.contents()
            .lines()
            .last()
            .unwrap_or("")
            .starts_with("local-model")
    });
    tui.type_line("second");
    tui.wait_for("from the local model");
    tui.type_line("/model nosuch-model");
    tui.wait_for("does not list model `nosuch-model`");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let id = w.only_session_id();
    assert_eq!(w.server.requests().len(), 1);
    assert_eq!(local.requests().len(), 1);
    assert_eq!(local.requests()[0].body["model"], "local-model");

    // Resumed later, the session stays on the model chosen in it.
    local.push(MockResponse::text("still local"));
    let mut tui = Tui::start(&w, &["chat", "--resume", &id], &[]);
    tui.wait_for("from the local model");
    tui.type_line("third");
    tui.wait_for("still local");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    assert_eq!(
        w.server.requests().len(),
        1,
        "nothing went back to deepseek"
    );
}

#[test]
fn a_switch_without_a_request_is_remembered_by_resume() {
    let w = World::new();
    let local = dsh_testkit::MockServer::start();
    w.with_local_provider(&local);
    w.server.push(MockResponse::text("from deepseek"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("first");
    tui.wait_for("from deepseek");
    tui.type_line("/model mock/local-model");
    tui.wait_for("from the next request on");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let id = w.only_session_id();
    local.push(MockResponse::text("local after resume"));
    let out = w.output(&["run", "--resume", &id, "again"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(common::stdout(&out).contains("local after resume"));
    assert_eq!(w.server.requests().len(), 1);
}

#[test]
fn resume_with_a_bad_reference_keeps_the_session_on_screen_with_one_error() {
    let w = World::new();
    w.server.push(MockResponse::text("first answer"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("hello");
    tui.wait_for("first answer");
    tui.type_line("/resume zzzz-no-such-session");
    tui.wait_for("✗");
    let screen = tui.screen();
    assert!(screen.contains("first answer"), "still on screen: {screen}");
    assert!(!screen.contains("resumed"), "{screen}");
    assert_eq!(screen.matches("✗").count(), 1, "one error: {screen}");
    // The session on screen still answers.
    w.server.push(MockResponse::text("still here"));
    tui.type_line("are you there");
    tui.wait_for("still here");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn resume_in_a_fresh_ui_with_a_bad_reference_still_gives_a_session() {
    let w = World::new();
    let mut tui = Tui::start(&w, &["chat", "--resume", "zzzz-missing"], &[]);
    tui.ready();
    tui.wait_for("✗");
    w.server.push(MockResponse::text("a new session answers"));
    tui.type_line("hello");
    tui.wait_for("a new session answers");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn cost_and_context_report_the_sessions_priced_usage_and_what_fills_the_window() {
    let w = World::new();
    w.server.push(MockResponse::text("an answer"));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.type_line("hello");
    tui.wait_for("an answer");
    tui.type_line("/cost");
    tui.wait_for("1 requests");
    let screen = tui.screen();
    assert!(!screen.contains("cost unknown"), "{screen}");
    assert!(screen.contains(" · $0."), "{screen}");
    tui.type_line("/context");
    tui.wait_for("system prompt");
    let screen = tui.screen();
    assert!(screen.contains("conversation"), "{screen}");
    assert!(screen.contains("largest items"), "{screen}");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
}

#[test]
fn compact_summarizes_the_history_and_says_so() {
    let w = World::new();
    // Long answers, so a short summary is worth it.
    let long = |tag: &str| format!("answer {tag}: {}", "a long explanation of it. ".repeat(40));
    w.server
        .push(MockResponse::text(&long("one")))
        .push(MockResponse::text(&long("two")))
        .push(MockResponse::text(&long("three")))
        .push(MockResponse::text("Summary: greetings."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    for (prompt, answer) in [
        ("hello one", "answer one:"),
        ("hello two", "answer two:"),
        ("hello three", "answer three:"),
    ] {
        tui.type_line(prompt);
        tui.wait_for(answer);
    }
    tui.type_line("/compact keep the greetings");
    tui.wait_for("context compacted");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let requests = w.server.requests();
    let last = serde_json::to_string(requests.last().unwrap().messages()).unwrap();
    assert!(last.contains("keep the greetings"), "{last}");
}

#[test]
fn an_image_mentioned_with_an_at_is_sent_to_a_vision_model_and_refused_for_others() {
    let w = World::new();
    std::fs::write(w.cwd.path().join("pic.png"), dsh_testkit::TINY_PNG).unwrap();
    // Without vision: refused, nothing sent.
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    // A space ends the `@path` completion popup, so Enter sends instead of completing.
    tui.keys("what is @pic.png ");
    tui.keys("\r");
    tui.wait_for("does not read images");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    assert!(w.server.requests().is_empty());
    // With vision granted in the config: the file goes with the prompt.
    std::fs::write(
        w.home.path().join("config.toml"),
        "[models.\"deepseek-v4-flash\"]\nvision = true\n",
    )
    .unwrap();
    w.server.push(MockResponse::text("Two pixels."));
    let mut tui = Tui::start(&w, &[], &[]);
    tui.ready();
    tui.keys("what is @pic.png ");
    tui.keys("\r");
    tui.wait_for("Two pixels.");
    tui.type_line("/exit");
    assert_eq!(tui.exit_code(), Some(0));
    let requests = w.server.requests();
    let user = requests[0].messages().last().unwrap().clone();
    assert_eq!(
        user["content"][0]["text"].as_str().unwrap().trim_end(),
        "what is @pic.png"
    );
    let url = user["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );
}
