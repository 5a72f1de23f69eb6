#![allow(clippy::unwrap_used)]
//! Plan mode, questions and the session's own commands in the UI, without a terminal: what
//! the log's plan events show, what `/plan` and `/name` ask the runner to do, and how the
//! question and plan cards read keys.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use dsh_session::{CallId, EventKind, SessionId};
use dsh_tools::{Question, QuestionOption, QuestionOutcome, QuestionRequest, Questioner, Reply};
use dsh_tui::app::{App, Effect};
use dsh_tui::approval::ARMING;
use dsh_tui::commands::Entry;
use dsh_tui::question::{QuestionAsk, TuiQuestioner};
use parking_lot::Mutex;
use serde_json::json;
use support::{Log, app_with, rows, screen};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

fn key(app: &mut App, code: KeyCode, now: Instant) -> Vec<Effect> {
    app.handle(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)), now)
}

fn type_text(app: &mut App, text: &str, now: Instant) {
    for c in text.chars() {
        key(app, KeyCode::Char(c), now);
    }
}

fn submit(app: &mut App, text: &str, now: Instant) -> Vec<Effect> {
    type_text(app, text, now);
    key(app, KeyCode::Enter, now)
}

fn plan_event(
    log: &mut Log,
    name: &str,
    data: serde_json::Value,
) -> Arc<dsh_session::SessionEvent> {
    log.push(EventKind::Other {
        type_name: name.into(),
        data,
    })
}

fn request(questions: Vec<Question>) -> QuestionRequest {
    QuestionRequest {
        agent_id: SessionId::new("s"),
        call_id: CallId::from("q1".to_owned()),
        questions,
        cancel: CancellationToken::new(),
    }
}

fn card(
    app: &mut App,
    questions: Vec<Question>,
    now: Instant,
) -> oneshot::Receiver<QuestionOutcome> {
    let (reply, outcome) = oneshot::channel();
    app.question(
        QuestionAsk {
            request: request(questions),
            reply,
        },
        now,
    );
    outcome
}

fn store_question() -> Question {
    Question::choice(
        "Which store?",
        vec![
            QuestionOption::new("SQLite"),
            QuestionOption::new("Postgres").described("shared"),
        ],
    )
}

#[test]
fn plan_events_show_in_the_status_line_and_the_plan_is_its_own_cell() {
    let now = Instant::now();
    let mut log = Log::default();
    plan_event(
        &mut log,
        "plan/mode",
        json!({"active": true, "by": "start"}),
    );
    log.turn_start(1);
    log.user("add a cache");
    plan_event(
        &mut log,
        "plan/proposed",
        json!({"callId": "p1", "plan": "# Steps\n1. Add `cache.rs`."}),
    );
    let mut app = app_with(&log.events, now);
    assert!(app.planning());
    let shown = rows(&screen(&mut app, 80, 24, now));
    assert!(shown.last().unwrap().contains("· plan mode ·"), "{shown:?}");
    let text = shown.join("\n");
    assert!(
        text.contains("▌ Plan") && text.contains("1. Add cache.rs."),
        "{text}"
    );
    // Approved: the mode leaves the status line; the decision is in the transcript.
    let decided = plan_event(
        &mut log,
        "plan/decided",
        json!({"callId": "p1", "decision": "approved"}),
    );
    app.session_event(&decided, false, now);
    let left = plan_event(
        &mut log,
        "plan/mode",
        json!({"active": false, "by": "approval"}),
    );
    app.session_event(&left, false, now);
    assert!(!app.planning());
    let shown = rows(&screen(&mut app, 80, 24, now));
    assert!(!shown.last().unwrap().contains("plan mode"), "{shown:?}");
    assert!(shown.join("\n").contains("✓ plan approved"));
}

#[test]
fn slash_plan_switches_from_what_the_log_says_and_plan_text_sends_the_text() {
    let now = Instant::now();
    let mut log = Log::default();
    let mut app = app_with(&log.events, now);
    assert_eq!(
        submit(&mut app, "/plan", now),
        [Effect::Plan {
            on: true,
            then: None
        }]
    );
    let on = plan_event(&mut log, "plan/mode", json!({"active": true, "by": "user"}));
    app.session_event(&on, false, now);
    assert_eq!(
        submit(&mut app, "/plan", now),
        [Effect::Plan {
            on: false,
            then: None
        }]
    );
    assert_eq!(
        submit(&mut app, "/plan on", now),
        [Effect::Plan {
            on: true,
            then: None
        }]
    );
    assert_eq!(
        submit(&mut app, "/plan the cache layer", now),
        [Effect::Plan {
            on: true,
            then: Some("the cache layer".into())
        }]
    );
}

#[test]
fn the_sessions_own_commands_are_offered_in_the_popup_and_help_and_expanded_when_sent() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    app.custom = vec![Entry {
        name: "review".into(),
        args: "FILE".into(),
        what: "Review a file".into(),
    }];
    type_text(&mut app, "/rev", now);
    let names: Vec<String> = app.popup().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["review"]);
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(
        shown.contains("/review FILE") && shown.contains("Review a file"),
        "{shown}"
    );
    // Tab completes the name (it takes arguments), Enter sends the line for expansion.
    key(&mut app, KeyCode::Tab, now);
    assert_eq!(app.composer.text(), "/review ");
    assert_eq!(
        submit(&mut app, "src/lib.rs", now),
        [Effect::Expand {
            line: "/review src/lib.rs".into(),
            queue: false
        }]
    );
    assert!(
        app.help_text()
            .iter()
            .any(|l| l.contains("/review FILE") && l.contains("Review a file"))
    );
    // A name the session does not have is an error, and nothing is sent.
    assert!(submit(&mut app, "/bogus x", now).is_empty());
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(
        shown.contains("unknown command /bogus (try /help)"),
        "{shown}"
    );
}

#[test]
fn a_question_card_takes_a_number_or_typed_words_and_keys_typed_while_it_arms_stay_in_the_draft() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    let followup = Question::choice(
        "How often?",
        vec![QuestionOption::new("hourly"), QuestionOption::new("daily")],
    );
    let mut outcome = card(&mut app, vec![store_question(), followup], now);
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(
        shown.contains("Which store? (1/2)") && shown.contains("2. Postgres — shared"),
        "{shown}"
    );
    // Typing under way when the card appeared lands in the draft.
    type_text(&mut app, "1", now + Duration::from_millis(10));
    assert_eq!(app.composer.text(), "1");
    let armed = now + Duration::from_millis(10) + ARMING;
    key(&mut app, KeyCode::Char('2'), armed);
    type_text(&mut app, "every night", armed);
    assert!(outcome.try_recv().is_err(), "one question left");
    key(&mut app, KeyCode::Enter, armed);
    assert_eq!(
        outcome.try_recv().unwrap(),
        QuestionOutcome::Answered(vec![
            Reply::Chosen("Postgres".into()),
            Reply::Text("every night".into())
        ])
    );
    assert!(app.questions.is_empty());
    assert_eq!(app.composer.text(), "1", "the draft is untouched");
}

#[test]
fn esc_dismisses_a_question_and_cancelling_the_turn_withdraws_it() {
    let now = Instant::now();
    let armed = now + ARMING;
    let mut app = app_with(&[], now);
    let mut outcome = card(&mut app, vec![store_question()], now);
    key(&mut app, KeyCode::Esc, armed);
    assert_eq!(outcome.try_recv().unwrap(), QuestionOutcome::Declined);
    let mut log = Log::default();
    log.turn_start(1);
    log.user("go");
    let mut app = app_with(&log.events, now);
    let mut outcome = card(&mut app, vec![store_question()], now);
    app.handle(
        Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        armed,
    );
    assert_eq!(outcome.try_recv().unwrap(), QuestionOutcome::Cancelled);
}

#[test]
fn a_plan_card_approves_with_y_and_n_asks_what_to_change() {
    let plan = "# Plan\n1. Add the cache.";
    let now = Instant::now();
    let armed = now + ARMING;
    let cases: [(&str, Reply); 3] = [
        ("y", Reply::Chosen(dsh_plan::APPROVE.into())),
        ("nsplit step 1\n", Reply::Text("split step 1".into())),
        ("n\n", Reply::Chosen(dsh_plan::KEEP_PLANNING.into())),
    ];
    for (keys, expected) in cases {
        let mut app = app_with(&[], now);
        let mut outcome = card(&mut app, vec![dsh_plan::review(plan)], now);
        let shown = rows(&screen(&mut app, 80, 24, armed)).join("\n");
        assert!(
            shown.contains("│ 1. Add the cache.") && shown.contains("y approve and start"),
            "{shown}"
        );
        for c in keys.chars() {
            let code = if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            };
            key(&mut app, code, armed);
        }
        assert_eq!(
            outcome.try_recv().unwrap(),
            QuestionOutcome::Answered(vec![expected]),
            "{keys:?}"
        );
    }
}

#[tokio::test]
async fn the_questioner_asks_only_for_the_session_on_screen_and_a_cancelled_turn_withdraws() {
    let shown = Arc::new(Mutex::new(None));
    let (questioner, mut asks) = TuiQuestioner::new(shown.clone());
    let questioner = Arc::new(questioner);
    // Nothing on screen (or another session): nobody can be asked, at once.
    assert_eq!(
        questioner.ask(request(vec![store_question()])).await,
        QuestionOutcome::Unavailable
    );
    *shown.lock() = Some(SessionId::new("s"));
    let pending = {
        let questioner = questioner.clone();
        tokio::spawn(async move { questioner.ask(request(vec![store_question()])).await })
    };
    let ask = asks.recv().await.unwrap();
    ask.reply
        .send(QuestionOutcome::Answered(vec![Reply::Chosen(
            "SQLite".into(),
        )]))
        .unwrap();
    assert_eq!(
        pending.await.unwrap(),
        QuestionOutcome::Answered(vec![Reply::Chosen("SQLite".into())])
    );
    let cancelled = request(vec![store_question()]);
    let cancel = cancelled.cancel.clone();
    let pending = {
        let questioner = questioner.clone();
        tokio::spawn(async move { questioner.ask(cancelled).await })
    };
    let _held = asks.recv().await.unwrap();
    cancel.cancel();
    assert_eq!(pending.await.unwrap(), QuestionOutcome::Cancelled);
}
