#![allow(clippy::unwrap_used)]
//! Snapshots of the main screens on ratatui's test backend, at 80×24, 60×20 and 120×40.

mod support;

use std::time::Instant;

use crossterm::event::KeyCode;
use dsh_session::{CancelCause, TurnEndReason};
use dsh_tui::SessionEntry;
use dsh_tui::app::{App, Overlay, Picker};
use dsh_tui::approval::Card;
use insta::assert_snapshot;
use serde_json::json;
use support::{Log, app_with, key, rows, screen};

fn streaming() -> Log {
    let mut log = Log::default();
    log.turn_start(1);
    log.user("fix the failing kill test");
    log.reasoning("The test kills a process group.\nCheck the ladder.\nThen run it.\nDone.");
    log.delta("## Plan\n\nI will:\n\n1. read `kill.rs`\n2. run the **tests**\n\n```rust\nfn kill() {}\n```\n\nStill wri");
    log
}

#[test]
fn a_streaming_answer_shows_markdown_reasoning_tail_and_the_spinner() {
    let now = Instant::now();
    let mut app = app_with(&streaming().events, now);
    assert_snapshot!("streaming_80x24", screen(&mut app, 80, 24, now).backend());
}

fn bash_loop() -> Log {
    let mut log = Log::default();
    log.turn_start(1);
    log.user("run the tests twice");
    log.call(
        "c1",
        "bash",
        json!({"command": "cargo test -p dsh-shell", "description": "test"}),
    );
    let out: String = (1..=9)
        .map(|i| format!("test kill::case_{i} ... ok\n"))
        .collect();
    log.result("c1", &out, false);
    log.call(
        "c2",
        "bash",
        json!({"command": "false", "description": "fail"}),
    );
    log.result("c2", "boom\n[exit code: 1]", true);
    log.answer("Both ran.");
    log.end(1, TurnEndReason::Completed);
    log
}

#[test]
fn a_bash_loop_shows_each_command_with_its_output_tail_and_exit() {
    let now = Instant::now();
    let mut app = app_with(&bash_loop().events, now);
    assert_snapshot!("bash_loop_80x24", screen(&mut app, 80, 24, now).backend());
}

fn edit() -> Log {
    let mut log = Log::default();
    log.turn_start(1);
    log.user("rename the helper");
    log.call(
        "e1",
        "edit",
        json!({"file_path": "src/kill.rs", "old_string": "fn a() {}\nfn helper() {}\nfn b() {}\n", "new_string": "fn a() {}\nfn signal_ladder() {}\nfn b() {}\n"}),
    );
    log.result("e1", "edited src/kill.rs", false);
    log.end(
        1,
        TurnEndReason::Aborted {
            reason: CancelCause::User,
        },
    );
    log
}

#[test]
fn an_edit_shows_a_diff_with_line_numbers_when_wide_and_without_when_narrow() {
    let now = Instant::now();
    let mut app = app_with(&edit().events, now);
    assert_snapshot!("edit_120x40", screen(&mut app, 120, 40, now).backend());
    assert_snapshot!("edit_60x20", screen(&mut app, 60, 20, now).backend());
}

#[test]
fn the_command_popup_filters_as_the_draft_is_typed() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    app.composer.insert("/re");
    assert_snapshot!("popup_80x24", screen(&mut app, 80, 24, now).backend());
}

#[test]
fn help_and_the_resume_picker_are_overlays() {
    let now = Instant::now();
    let mut app = app_with(&bash_loop().events, now);
    app.overlay = Some(Overlay::Help(0));
    assert_snapshot!("help_80x24", screen(&mut app, 80, 24, now).backend());
    // The list is taller than 24 rows: scrolling reaches its last command.
    for _ in 0..40 {
        key(&mut app, KeyCode::Down, now);
    }
    let bottom = rows(&screen(&mut app, 80, 24, now)).join("\n");
    let last = app
        .help_text()
        .last()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(bottom.contains(&last), "{bottom}");
    assert!(!bottom.contains("more rows"), "{bottom}");
    let ms = dsh_session::now_ms();
    app.overlay = Some(Overlay::Picker(Picker {
        entries: Some(vec![
            SessionEntry {
                id: "a".into(),
                first_prompt: Some("fix the failing kill test".into()),
                last_activity: ms - 5 * 60_000,
                turns: Some(3),
            },
            SessionEntry {
                id: "b".into(),
                first_prompt: Some("write the README".into()),
                last_activity: ms - 2 * 86_400_000,
                turns: Some(12),
            },
        ]),
        filter: "kil".into(),
        selected: 0,
        unresolved: None,
    }));
    assert_snapshot!("picker_80x24", screen(&mut app, 80, 24, now).backend());
}

#[test]
fn an_approval_card_shows_the_command_and_the_choices() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.user("clean up");
    log.call(
        "c1",
        "bash",
        json!({"command": "rm -rf target", "description": "clean"}),
    );
    let mut app = app_with(&log.events, now);
    let (ask, _answer) = support::ask(json!({"command": "rm -rf target"}), Some("deletes files"));
    app.cards.push_back(Card::new(ask, now));
    let armed = now + dsh_tui::approval::ARMING;
    assert_snapshot!("approval_80x24", screen(&mut app, 80, 24, armed).backend());
}

#[test]
fn a_terminal_below_the_minimum_says_so() {
    let now = Instant::now();
    let mut app = App::new(support::info(), Vec::new());
    let rows = support::rows(&screen(&mut app, 30, 8, now));
    assert!(rows[0].starts_with("terminal too small"), "{rows:?}");
}
