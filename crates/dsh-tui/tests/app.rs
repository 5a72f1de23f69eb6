#![allow(clippy::unwrap_used)]
//! What keys and session events do to the app, without a terminal.

mod support;

use std::time::{Duration, Instant};

use crossterm::event::KeyCode;
use dsh_session::{CancelCause, TurnEndReason};
use dsh_tui::app::{App, Effect};
use dsh_tui::approval::{ARMING, Answer, Card};
use dsh_tui::transcript::Transcript;
use serde_json::json;
use support::{Log, app_with, ctrl, key, rows, running_app, screen, type_text};

#[test]
fn enter_sends_when_idle_and_steers_while_running_and_tab_queues() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    type_text(&mut app, "hello", now);
    assert_eq!(
        key(&mut app, KeyCode::Enter, now),
        [Effect::Send("hello".into())]
    );
    assert!(
        app.pending.is_empty(),
        "an idle send starts a turn, nothing pending"
    );

    let mut app = running_app(now);
    type_text(&mut app, "also this", now);
    assert_eq!(
        key(&mut app, KeyCode::Enter, now),
        [Effect::Send("also this".into())]
    );
    type_text(&mut app, "then that", now);
    assert_eq!(
        key(&mut app, KeyCode::Tab, now),
        [Effect::Queue("then that".into())]
    );
    let strip: Vec<_> = app
        .pending
        .iter()
        .map(|p| (p.steer, p.text.as_str()))
        .collect();
    assert_eq!(strip, [(true, "also this"), (false, "then that")]);
    let screen = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(screen.contains("↳ steer: also this"), "{screen}");
    assert!(screen.contains("⇥ queued: then that"), "{screen}");
}

#[test]
fn a_pending_message_leaves_the_strip_when_its_user_message_is_logged() {
    let now = Instant::now();
    let mut app = running_app(now);
    type_text(&mut app, "steer me", now);
    key(&mut app, KeyCode::Enter, now);
    let mut log = Log::default();
    let logged = log.user("steer me");
    app.session_event(&logged, false, now);
    assert!(app.pending.is_empty());
}

#[test]
fn esc_while_running_cancels_and_pending_messages_return_to_the_draft() {
    let now = Instant::now();
    let mut app = running_app(now);
    type_text(&mut app, "first", now);
    key(&mut app, KeyCode::Enter, now);
    type_text(&mut app, "second", now);
    key(&mut app, KeyCode::Tab, now);
    type_text(&mut app, "draft", now);
    assert_eq!(key(&mut app, KeyCode::Esc, now), [Effect::Cancel]);
    assert_eq!(app.composer.text(), "first\nsecond\ndraft");
    assert!(app.pending.is_empty());
}

#[test]
fn ctrl_c_twice_exits_and_ctrl_d_exits_only_on_an_empty_draft() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    type_text(&mut app, "keep me", now);
    assert!(ctrl(&mut app, 'c', now).is_empty());
    assert!(app.composer.is_empty(), "the draft went to history");
    assert_eq!(app.composer.history(), ["keep me"]);
    assert_eq!(
        ctrl(&mut app, 'c', now + Duration::from_millis(500)),
        [Effect::Exit]
    );

    let mut app = app_with(&[], now);
    assert!(ctrl(&mut app, 'c', now).is_empty());
    assert!(
        ctrl(&mut app, 'c', now + Duration::from_secs(3)).is_empty(),
        "too late: not a double press"
    );

    let mut app = app_with(&[], now);
    type_text(&mut app, "x", now);
    assert!(ctrl(&mut app, 'd', now).is_empty());
    key(&mut app, KeyCode::Backspace, now);
    assert_eq!(ctrl(&mut app, 'd', now), [Effect::Exit]);
}

#[test]
fn ctrl_c_while_running_cancels_the_turn_not_the_program() {
    let now = Instant::now();
    let mut app = running_app(now);
    assert_eq!(ctrl(&mut app, 'c', now), [Effect::Cancel]);
    assert!(!app.exit);
}

fn card(app: &mut App, now: Instant) -> tokio::sync::oneshot::Receiver<Answer> {
    let (ask, answer) = support::ask(json!({"command": "rm -rf target"}), None);
    app.ask(ask, now);
    answer
}

#[test]
fn keys_typed_while_a_card_arms_go_to_the_draft_and_n_with_a_reason_denies() {
    let now = Instant::now();
    let mut app = running_app(now);
    let mut answer = card(&mut app, now);
    // Typing that was under way when the card appeared lands in the draft.
    type_text(&mut app, "any", now + Duration::from_millis(100));
    assert_eq!(app.composer.text(), "any");
    assert!(answer.try_recv().is_err());
    let armed = now + Duration::from_millis(100) + ARMING;
    assert!(key(&mut app, KeyCode::Char('n'), armed).is_empty());
    type_text(&mut app, "use cargo clean", armed);
    assert!(key(&mut app, KeyCode::Enter, armed).is_empty());
    assert_eq!(
        answer.try_recv().unwrap(),
        Answer::Deny(Some("use cargo clean".into()))
    );
    assert!(app.cards.is_empty());
    assert_eq!(app.composer.text(), "any", "the draft is untouched");
}

#[test]
fn y_allows_once_and_a_allows_for_the_session() {
    let now = Instant::now();
    let later = now + ARMING;
    let mut app = running_app(now);
    let mut first = card(&mut app, now);
    let mut second = card(&mut app, now);
    key(&mut app, KeyCode::Char('y'), later);
    assert_eq!(first.try_recv().unwrap(), Answer::Once);
    key(&mut app, KeyCode::Char('a'), later);
    assert_eq!(second.try_recv().unwrap(), Answer::Session);
}

#[test]
fn a_card_never_arms_before_its_delay() {
    let now = Instant::now();
    let (ask, _answer) = support::ask(json!({}), None);
    let c = Card::new(ask, now);
    assert!(!c.armed(now + ARMING - Duration::from_millis(1), None));
    assert!(c.armed(now + ARMING, None));
    assert!(!c.armed(
        now + ARMING * 2,
        Some(now + ARMING * 2 - Duration::from_millis(10))
    ));
}

#[test]
fn scrolled_up_the_view_stays_put_while_rows_arrive_and_end_follows_again() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.user("long");
    let body: String = (1..=60).map(|i| format!("line {i}\n\n")).collect();
    log.delta(&body);
    let mut app = app_with(&log.events, now);
    screen(&mut app, 80, 24, now);
    key(&mut app, KeyCode::PageUp, now);
    let before = rows(&screen(&mut app, 80, 24, now));
    let more = log.delta("more\n\nand more\n\n");
    app.session_event(&more, false, now);
    let after = rows(&screen(&mut app, 80, 24, now));
    assert_eq!(before[..5], after[..5], "the anchor held");
    assert!(after.iter().any(|r| r.contains("new lines")), "{after:?}");
    key(&mut app, KeyCode::End, now);
    let bottom = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(bottom.contains("and more"), "{bottom}");
}

#[test]
fn a_replayed_transcript_renders_exactly_like_the_live_one() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.user("do it");
    log.reasoning("thinking hard");
    log.delta("Running ");
    log.call("c1", "bash", json!({"command": "ls"}));
    log.result("c1", "a\nb\n", false);
    log.answer("Done: **a** and **b**.");
    log.end(
        1,
        TurnEndReason::Aborted {
            reason: CancelCause::User,
        },
    );
    let mut live = app_with(&log.events, now);
    let mut replayed = App::new(support::info(), Vec::new());
    replayed.open("s1".into(), &log.events, now);
    assert_eq!(
        rows(&screen(&mut live, 80, 24, now)),
        rows(&screen(&mut replayed, 80, 24, now))
    );
    let t = Transcript::replay(log.events.iter().map(AsRef::as_ref));
    assert_eq!(t.len(), live.transcript.len());
}

#[test]
fn resizing_rewraps_from_source_without_duplicating_rows() {
    let now = Instant::now();
    let mut log = Log::default();
    log.user("a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z");
    let mut app = app_with(&log.events, now);
    let wide = rows(&screen(&mut app, 120, 40, now));
    let narrow = rows(&screen(&mut app, 60, 20, now));
    let wide_again = rows(&screen(&mut app, 120, 40, now));
    assert_eq!(wide, wide_again);
    assert_eq!(
        narrow.iter().filter(|r| r.starts_with("› a b c")).count(),
        1
    );
}

#[test]
fn ctrl_o_expands_tool_output_beyond_the_tail() {
    let now = Instant::now();
    let mut log = Log::default();
    log.call("c1", "bash", json!({"command": "seq 9"}));
    log.result("c1", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", false);
    let mut app = app_with(&log.events, now);
    let collapsed = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(collapsed.contains("… 4 earlier lines"), "{collapsed}");
    assert!(!collapsed.contains("\n  1\n"), "{collapsed}");
    ctrl(&mut app, 'o', now);
    let expanded = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(expanded.contains("\n  1\n"), "{expanded}");
}

#[test]
fn a_tool_that_prints_escape_sequences_cannot_touch_the_terminal() {
    let now = Instant::now();
    let mut log = Log::default();
    log.call("c1", "bash", json!({"command": "evil"}));
    log.result("c1", "ok\u{1b}[2J\u{1b}[?1049l done", false);
    let mut app = app_with(&log.events, now);
    let buffer = screen(&mut app, 80, 24, now);
    for cell in buffer.backend().buffer().content() {
        assert!(!cell.symbol().contains('\u{1b}'));
    }
    assert!(rows(&buffer).iter().any(|r| r == "  ok done"));
}

#[test]
fn the_card_shows_its_choices_only_once_they_are_armed() {
    let now = Instant::now();
    let mut app = running_app(now);
    let _answer = card(&mut app, now);
    let early = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(early.contains("Allow bash?"), "{early}");
    assert!(!early.contains("y allow once"), "{early}");
    let armed = rows(&screen(&mut app, 80, 24, now + ARMING)).join("\n");
    assert!(armed.contains("y allow once"), "{armed}");
}

#[test]
fn no_color_leaves_no_coloured_cell() {
    let now = Instant::now();
    let mut log = Log::default();
    log.call(
        "c1",
        "edit",
        json!({"file_path": "a", "old_string": "x", "new_string": "y"}),
    );
    log.result("c1", "failed", true);
    let mut app = app_with(&log.events, now);
    app.no_color = true;
    let terminal = screen(&mut app, 80, 24, now);
    for cell in terminal.backend().buffer().content() {
        assert_eq!(cell.fg, ratatui::style::Color::Reset);
        assert_eq!(cell.bg, ratatui::style::Color::Reset);
    }
    app.no_color = false;
    let terminal = screen(&mut app, 80, 24, now);
    assert!(
        terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg == ratatui::style::Color::Red),
        "colours are on by default"
    );
}

#[test]
fn switching_sessions_waits_for_the_turn_to_end_in_the_pending_strip() {
    let now = Instant::now();
    let mut app = running_app(now);
    type_text(&mut app, "/new", now);
    assert!(key(&mut app, KeyCode::Enter, now).is_empty());
    assert!(app.take_due().is_empty(), "nothing runs under the turn");
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(shown.contains("⇥ after the turn: /new"), "{shown}");
    let mut log = Log::default();
    let end = log.end(1, TurnEndReason::Completed);
    app.session_event(&end, false, now);
    assert_eq!(app.take_due(), [Effect::New]);
    assert!(app.deferred.is_empty());
}

#[test]
fn ctrl_r_searches_history_newest_first_and_esc_restores_the_draft() {
    let now = Instant::now();
    let mut app = App::new(
        support::info(),
        vec![
            "run the tests".into(),
            "write docs".into(),
            "run clippy".into(),
        ],
    );
    type_text(&mut app, "draft", now);
    ctrl(&mut app, 'r', now);
    type_text(&mut app, "run", now);
    assert_eq!(app.composer.text(), "run clippy");
    ctrl(&mut app, 'r', now);
    assert_eq!(app.composer.text(), "run the tests");
    ctrl(&mut app, 'r', now);
    assert_eq!(
        app.composer.text(),
        "run the tests",
        "no older match: stays"
    );
    assert!(app.search.as_ref().unwrap().failed);
    key(&mut app, KeyCode::Esc, now);
    assert_eq!(app.composer.text(), "draft");
    ctrl(&mut app, 'r', now);
    type_text(&mut app, "docs", now);
    key(&mut app, KeyCode::Enter, now);
    assert!(app.search.is_none());
    assert_eq!(
        app.composer.text(),
        "write docs",
        "enter keeps the match as the draft"
    );
}

#[test]
fn at_completes_workspace_files_from_a_popup() {
    let now = Instant::now();
    let mut app = app_with(&[], now);
    app.files = Some(vec![
        "README.md".into(),
        "src/main.rs".into(),
        "src/mod_a.rs".into(),
    ]);
    type_text(&mut app, "look at @mai", now);
    assert_eq!(app.file_popup(), ["src/main.rs"]);
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(shown.contains("  @src/main.rs"), "{shown}");
    assert!(key(&mut app, KeyCode::Tab, now).is_empty());
    assert_eq!(app.composer.text(), "look at @src/main.rs ");
    assert!(app.file_popup().is_empty());
    type_text(&mut app, "and @s", now);
    key(&mut app, KeyCode::Down, now);
    key(&mut app, KeyCode::Enter, now);
    assert_eq!(
        app.composer.text(),
        "look at @src/main.rs and @src/mod_a.rs "
    );
    assert_eq!(
        key(&mut app, KeyCode::Enter, now),
        [Effect::Send(
            "look at @src/main.rs and @src/mod_a.rs".into()
        )]
    );
}

#[test]
fn a_running_subagent_card_lists_its_childs_last_actions() {
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.call(
        "s1",
        "subagent",
        json!({"prompt": "look around", "description": "explore"}),
    );
    let mut app = app_with(&log.events, now);
    let mut child = Log::default();
    for (i, cmd) in ["ls", "cat a", "cat b", "wc -l b"].iter().enumerate() {
        let id = format!("k{i}");
        let call = child.call(&id, "bash", json!({"command": cmd}));
        app.session_event(&call, true, now);
        let result = child.result(&id, "x", false);
        app.session_event(&result, true, now);
    }
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(
        shown.contains("● subagent  look around  running"),
        "{shown}"
    );
    assert!(
        !shown.contains("↳ bash(ls)"),
        "only the last three: {shown}"
    );
    assert!(shown.contains("↳ bash(cat a) → ok"), "{shown}");
    assert!(shown.contains("↳ bash(wc -l b) → ok"), "{shown}");
}

#[test]
fn the_status_shows_retries_context_use_tokens_and_cache_share() {
    use dsh_session::{EventKind, RequestContext, TokenUsage};
    let now = Instant::now();
    let mut log = Log::default();
    log.turn_start(1);
    log.push(EventKind::RequestContext(RequestContext {
        provider: "deepseek".into(),
        model: "deepseek-chat".into(),
        context_window: Some(100_000),
    }));
    log.push(EventKind::Other {
        type_name: "llm/retry".into(),
        data: json!({"retryId": "r", "turn": 1, "step": 1, "provider": "deepseek", "mode": "normal",
            "policyKey": "p", "retry": 2, "maxRetries": 5, "delayMs": 4000,
            "failure": {"message": "rate limited", "code": "rate_limit", "status": 429}}),
    });
    let mut app = app_with(&log.events, now);
    let shown = rows(&screen(&mut app, 80, 24, now)).join("\n");
    assert!(
        shown.contains("retrying in 4 s: 429 rate limited (2/5)"),
        "{shown}"
    );
    let mut answer = Log::default();
    let msg = answer.push(EventKind::AssistantMessage(dsh_session::AssistantMessage {
        turn: 1,
        step: 1,
        message: std::sync::Arc::new(dsh_session::Message::assistant(
            vec![dsh_session::ContentBlock::text("ok")],
            "deepseek",
            "deepseek-chat",
        )),
        usage: Some(TokenUsage {
            input_tokens: 10_000,
            output_tokens: 2_000,
            cache_read_tokens: Some(30_000),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }),
        interrupted: false,
    }));
    app.session_event(&msg, false, now);
    let shown = rows(&screen(&mut app, 120, 24, now));
    let status = shown.last().unwrap();
    assert_eq!(
        status,
        "deepseek-chat · workspace-write · ask · network off · ctx 40% · 42k tok · $0.00 · cache 75%"
    );
    // Narrow: the least important fields go first, the mode stays.
    let narrow = rows(&screen(&mut app, 60, 24, now));
    assert_eq!(
        narrow.last().unwrap(),
        "deepseek-chat · workspace-write · ask · network off"
    );
    assert!(
        !shown.join("\n").contains("⠋ retrying"),
        "a streamed answer clears the retry"
    );
}

#[tokio::test]
async fn the_approver_answers_a_deny_as_rejected_and_remembers_allow_for_the_session() {
    use dsh_tools::{ApprovalOutcome, Approver};
    let (approver, mut asks) = dsh_tui::TuiApprover::new(None);
    let approver = std::sync::Arc::new(approver);
    let ask = |approver: std::sync::Arc<dsh_tui::TuiApprover>| {
        tokio::spawn(async move {
            let (ask, _) = support::ask(json!({"command": "ls"}), None);
            approver.request(ask.request).await
        })
    };
    let pending = ask(approver.clone());
    let question = asks.recv().await.unwrap();
    question
        .reply
        .send(Answer::Deny(Some("no".into())))
        .unwrap();
    assert_eq!(pending.await.unwrap(), ApprovalOutcome::Rejected);
    let pending = ask(approver.clone());
    asks.recv()
        .await
        .unwrap()
        .reply
        .send(Answer::Session)
        .unwrap();
    assert_eq!(pending.await.unwrap(), ApprovalOutcome::AllowedForSession);
    // Allowed for the session: no second question.
    assert_eq!(
        ask(approver.clone()).await.unwrap(),
        ApprovalOutcome::AllowedOnce
    );
    assert!(asks.try_recv().is_err());
}

#[test]
fn a_dropped_image_path_becomes_a_mention_and_other_pastes_stay_text() {
    let now = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("My Shots")).unwrap();
    std::fs::write(dir.path().join("My Shots/a b.png"), b"x").unwrap();
    let mut app = app_with(&[], now);
    app.info.cwd = dir.path().to_path_buf();
    let dropped = format!("'{}'", dir.path().join("My Shots/a b.png").display());
    app.handle(crossterm::event::Event::Paste(dropped), now);
    assert_eq!(app.composer.text(), "@\"My Shots/a b.png\" ");
    app.handle(
        crossterm::event::Event::Paste("My Shots/none.png".into()),
        now,
    );
    assert_eq!(
        app.composer.text(),
        "@\"My Shots/a b.png\" My Shots/none.png"
    );
    assert_eq!(
        dsh_tui::attach::image_mentions(app.composer.text(), dir.path()),
        [dir.path().join("My Shots/a b.png")]
    );
}

#[test]
fn ctrl_v_asks_for_the_clipboard_image_which_sends_as_its_mention() {
    let now = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("clip 1.png");
    std::fs::write(&saved, b"x").unwrap();
    let mut app = app_with(&[], now);
    assert_eq!(ctrl(&mut app, 'v', now), [Effect::PasteImage]);
    type_text(&mut app, "what is ", now);
    app.attach_clipboard_image(&saved);
    assert_eq!(app.composer.text(), "what is [Clipboard image]");
    // The placeholder goes as a whole, like a folded paste.
    key(&mut app, KeyCode::Backspace, now);
    assert_eq!(app.composer.text(), "what is ");
    app.attach_clipboard_image(&saved);
    let sent = key(&mut app, KeyCode::Enter, now);
    let mention = format!("what is @\"{}\"", saved.display());
    assert_eq!(sent, [Effect::Send(mention.clone())]);
    assert_eq!(
        dsh_tui::attach::image_mentions(&mention, &app.info.cwd),
        [saved]
    );
}
