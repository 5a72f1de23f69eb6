//! `session/rewind`: the history goes back to a turn's start; the log stays append-only.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::sync::Arc;

use dsh_session::*;

fn fresh() -> Arc<Session> {
    Session::new(
        SessionHeader::new(SessionId::new("s"), 1, SessionMeta::default()),
        None,
    )
    .unwrap()
}

/// One turn: the prompt and the model's answer.
fn turn(s: &Session, n: u64, prompt: &str) {
    s.append(EventKind::TurnStart(TurnStart { turn: n }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: n, step: 1 }))
        .unwrap();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text(prompt))))
        .unwrap();
    s.append(EventKind::AssistantMessage(AssistantMessage {
        turn: n,
        step: 1,
        message: Arc::new(Message::assistant(
            vec![ContentBlock::text(format!("answer {n}"))],
            "p",
            "m",
        )),
        usage: None,
        interrupted: false,
    }))
    .unwrap();
    s.append(EventKind::StepEnd(StepBoundary { turn: n, step: 1 }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: n,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
}

fn texts(s: &Session) -> Vec<String> {
    s.derive_messages().iter().map(|m| m.text()).collect()
}

fn rewind(to_turn: u64) -> EventKind {
    EventKind::Rewind(Rewind { to_turn })
}

#[test]
fn a_rewind_takes_the_turn_and_everything_after_it_out_of_the_history() {
    let s = fresh();
    for (n, p) in [(1, "one"), (2, "two"), (3, "three")] {
        turn(&s, n, p);
    }
    let before = s.len();
    s.append(rewind(2)).unwrap();
    assert_eq!(texts(&s), ["one", "answer 1"]);
    assert_eq!(s.history_turns(), [1]);
    // Append-only: nothing was removed from the log.
    assert_eq!(s.len(), before + 1);
    // New turns continue the numbering and the shortened history.
    turn(&s, 4, "four");
    assert_eq!(texts(&s), ["one", "answer 1", "four", "answer 4"]);
    assert_eq!(s.history_turns(), [1, 4]);
    assert_eq!(s.last_turn(), 4);
}

#[test]
fn a_rewind_inside_a_turn_or_to_a_turn_outside_the_history_is_refused() {
    let s = fresh();
    turn(&s, 1, "one");
    turn(&s, 2, "two");
    assert!(s.append(rewind(7)).is_err(), "never started");
    s.append(rewind(2)).unwrap();
    assert!(s.append(rewind(2)).is_err(), "rewound already");
    s.append(EventKind::TurnStart(TurnStart { turn: 3 }))
        .unwrap();
    let err = s.append(rewind(1)).unwrap_err();
    assert!(err.to_string().contains("inside turn 3"), "{err}");
}

#[test]
fn a_rewind_past_an_earlier_rewind_and_past_a_replacement_restores_that_turns_surface() {
    let s = fresh();
    turn(&s, 1, "one");
    turn(&s, 2, "two");
    s.append(rewind(2)).unwrap();
    turn(&s, 3, "three");
    // A compaction-like replacement of the first two nodes during turn 4.
    s.append(EventKind::TurnStart(TurnStart { turn: 4 }))
        .unwrap();
    let nodes = s.surface_nodes();
    s.append_draft(
        EventDraft::new(EventKind::UserMessage(Arc::new(Message::user_text(
            "summary",
        ))))
        .with_sources(nodes[..2].to_vec())
        .replacing(nodes[0], nodes[1]),
    )
    .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: 4,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
    assert_eq!(texts(&s), ["summary", "three", "answer 3"]);
    s.append(rewind(4)).unwrap();
    assert_eq!(texts(&s), ["one", "answer 1", "three", "answer 3"]);
    s.append(rewind(3)).unwrap();
    assert_eq!(texts(&s), ["one", "answer 1"]);
}

#[test]
fn a_resumed_or_forked_log_derives_the_same_history_and_earlier_forks_keep_theirs() {
    let s = fresh();
    turn(&s, 1, "one");
    turn(&s, 2, "two");
    let early_fork = fork_seed(&s.events(), None).unwrap();
    s.append(rewind(2)).unwrap();
    turn(&s, 3, "three");
    let reloaded = Session::new(
        s.header().clone(),
        Some(s.events().iter().map(|e| (**e).clone()).collect()),
    )
    .unwrap();
    assert_eq!(texts(&reloaded), texts(&s));
    assert_eq!(reloaded.history_turns(), [1, 3]);
    let fork = Session::new(
        SessionHeader::new(SessionId::new("f"), 1, SessionMeta::default()),
        Some(early_fork),
    )
    .unwrap();
    assert_eq!(texts(&fork), ["one", "answer 1", "two", "answer 2"]);
}

#[test]
fn readers_of_the_raw_log_can_tell_rewound_events_apart() {
    let s = fresh();
    turn(&s, 1, "one");
    turn(&s, 2, "two");
    s.append(rewind(2)).unwrap();
    let events = s.events();
    let ranges = rewound_ranges(&events);
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges[0], 6..12);
    let kept = history_events(&events);
    assert_eq!(kept.len(), events.len() - 6);
    assert!(matches!(kept.last().unwrap().kind, EventKind::Rewind(_)));
}

#[test]
fn the_rewind_event_round_trips_and_the_relation_checker_refuses_it_inside_a_turn() {
    let line = r#"{"type":"session/rewind","seq":4,"time":1,"data":{"toTurn":2}}"#;
    let ev: SessionEvent = serde_json::from_str(line).unwrap();
    assert_eq!(ev.kind, rewind(2));
    assert_eq!(serde_json::to_string(&ev).unwrap(), line);
    let mut checker = RelationChecker::default();
    checker
        .check(&SessionEvent {
            seq: 0,
            time: 0,
            kind: EventKind::TurnStart(TurnStart { turn: 1 }),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
        .unwrap();
    assert!(checker.check(&ev).is_err());
}
