#![allow(clippy::unwrap_used)]
//! What the slash commands and the new keys do to the app, without a terminal.

mod support;

use std::time::Instant;

use crossterm::event::KeyCode;
use dsh_session::TurnEndReason;
use dsh_tui::app::{App, Effect, Overlay};
use dsh_tui::{ModelChoice, ModelEntry, SessionEntry};
use support::{Log, app_with, ctrl, key, rows, running_app, screen};

fn submit(app: &mut App, line: &str, now: Instant) -> Vec<Effect> {
    for c in line.chars() {
        key(app, KeyCode::Char(c), now);
    }
    key(app, KeyCode::Enter, now)
}

fn shown(app: &mut App, now: Instant) -> String {
    rows(&screen(app, 100, 30, now)).join("\n")
}

#[test]
fn an_exact_command_name_wins_over_a_longer_one() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    assert!(submit(&mut app, "/mode", now).is_empty());
    assert!(app.overlay.is_none(), "not the model picker");
    assert!(shown(&mut app, now).contains("mode: workspace-write · ask · network off"));
    // A prefix runs the first match, an exact name first.
    submit(&mut app, "/mod", now);
    assert!(matches!(app.overlay, Some(Overlay::Models(_))));
}

#[test]
fn mode_switches_only_to_known_policies() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    assert_eq!(
        submit(&mut app, "/mode auto", now),
        [Effect::SetApproval(Some("auto".into()))]
    );
    assert_eq!(
        submit(&mut app, "/mode default", now),
        [Effect::SetApproval(None)]
    );
    assert!(submit(&mut app, "/mode sometimes", now).is_empty());
    assert!(shown(&mut app, now).contains("unknown approval policy `sometimes`"));
}

#[test]
fn the_model_picker_switches_to_the_chosen_provider_and_model() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    app.info.models.push(ModelEntry {
        id: "local-model".into(),
        provider: "mock".into(),
        context_window: None,
        prices: None,
    });
    submit(&mut app, "/model", now);
    let screen = shown(&mut app, now);
    assert!(screen.contains("Switch model"), "{screen}");
    assert!(screen.contains("128k window"), "{screen}");
    assert!(screen.contains("$0.28 in"), "prices are listed: {screen}");
    for c in "local".chars() {
        key(&mut app, KeyCode::Char(c), now);
    }
    assert_eq!(
        key(&mut app, KeyCode::Enter, now),
        [Effect::SwitchModel(ModelChoice {
            provider: Some("mock".into()),
            model: Some("local-model".into()),
        })]
    );
    // By id alone: the catalogue says which provider serves it.
    assert_eq!(
        submit(&mut app, "/model local-model", now),
        [Effect::SwitchModel(ModelChoice {
            provider: Some("mock".into()),
            model: Some("local-model".into()),
        })]
    );
}

#[test]
fn compact_waits_for_the_turn_keeps_drafts_while_it_runs_and_esc_stops_it() {
    let now = Instant::now();
    let mut app = running_app(now);
    assert!(submit(&mut app, "/compact keep the tests", now).is_empty());
    assert!(app.take_due().is_empty());
    assert!(shown(&mut app, now).contains("⇥ after the turn: /compact keep the tests"));
    let mut log = Log::default();
    let end = log.end(1, TurnEndReason::Completed);
    app.session_event(&end, false, now);
    assert_eq!(
        app.take_due(),
        [Effect::Compact(Some("keep the tests".into()))]
    );
    assert!(shown(&mut app, now).contains("Compacting"));
    // Nothing starts under it: the draft stays.
    assert!(submit(&mut app, "next question", now).is_empty());
    assert_eq!(app.composer.text(), "next question");
    assert_eq!(key(&mut app, KeyCode::Esc, now), [Effect::CancelBusy]);
    app.compacted(Ok("not compacted: stopped".into()));
    assert!(app.busy.is_none());
    assert_eq!(
        key(&mut app, KeyCode::Enter, now),
        [Effect::Send("next question".into())]
    );
}

#[test]
fn cancelling_the_turn_drops_the_commands_that_waited_for_it() {
    let now = Instant::now();
    let mut app = running_app(now);
    submit(&mut app, "/compact", now);
    assert_eq!(key(&mut app, KeyCode::Esc, now), [Effect::Cancel]);
    assert!(app.deferred.is_empty());
    assert!(shown(&mut app, now).contains("/compact not run: the turn was cancelled"));
}

#[test]
fn resume_with_words_that_name_no_session_closes_the_picker_with_one_error() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    assert_eq!(
        submit(&mut app, "/resume zebra", now),
        [Effect::Resume("zebra".into())]
    );
    // The runner opens the picker filtered when the reference names no session.
    app.overlay = Some(Overlay::Picker(dsh_tui::app::Picker {
        filter: "zebra".into(),
        unresolved: Some("no session matches `zebra`".into()),
        ..Default::default()
    }));
    app.sessions(vec![SessionEntry {
        id: "s-1".into(),
        first_prompt: Some("remember the zebra".into()),
        last_activity: 0,
        turns: Some(1),
    }]);
    assert!(
        matches!(&app.overlay, Some(Overlay::Picker(p)) if p.filtered().len() == 1),
        "words of a first prompt keep the picker open"
    );
    app.overlay = Some(Overlay::Picker(dsh_tui::app::Picker {
        filter: "qqqq".into(),
        unresolved: Some("no session matches `qqqq`".into()),
        ..Default::default()
    }));
    app.sessions(Vec::new());
    assert!(app.overlay.is_none());
    let screen = shown(&mut app, now);
    assert_eq!(screen.matches("✗").count(), 1, "{screen}");
    assert!(screen.contains("no session matches `qqqq`"), "{screen}");
}

#[test]
fn ctrl_z_suspends_and_ctrl_c_always_says_how_to_exit() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    assert_eq!(ctrl(&mut app, 'z', now), [Effect::Suspend]);
    submit(&mut app, "/help", now);
    assert!(matches!(app.overlay, Some(Overlay::Help(0))));
    assert!(ctrl(&mut app, 'c', now).is_empty());
    assert!(app.overlay.is_none());
    assert!(shown(&mut app, now).contains("ctrl+c again to exit"));
    assert_eq!(ctrl(&mut app, 'c', now), [Effect::Exit]);
}

#[test]
fn export_writes_the_transcript_as_markdown_from_its_sources() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.user("list the files");
    log.call(
        "c1",
        "bash",
        serde_json::json!({"command": "ls", "description": "list"}),
    );
    log.result("c1", "a.txt\nb.txt\n", false);
    log.answer("Two files: `a.txt` and `b.txt`.");
    log.end(1, TurnEndReason::Completed);
    let mut app = app_with(&log.events, now);
    assert_eq!(submit(&mut app, "/export", now), [Effect::Export(None)]);
    let md = app.transcript.markdown();
    assert!(md.starts_with("## You\n\nlist the files\n"), "{md}");
    assert!(md.contains("**bash** `ls` · exit 0"), "{md}");
    assert!(md.contains("```text\na.txt\nb.txt\n```"), "{md}");
    assert!(md.contains("Two files: `a.txt` and `b.txt`."), "{md}");
}

#[test]
fn a_terminal_below_the_minimum_says_so_in_full() {
    let now = Instant::now();
    let mut app = App::new(support::info(), Vec::new());
    let text = rows(&screen(&mut app, 30, 8, now)).join(" ");
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        words.join(" "),
        "terminal too small (30×8): need 40×10",
        "the message is not cut off"
    );
}
