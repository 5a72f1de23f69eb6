//! Session log invariants (INV-SES, INV-SURF, INV-REL helpers, fork, crash repair).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_session::*;
use serde_json::json;

fn fresh() -> Arc<Session> {
    Session::new(
        SessionHeader::new(SessionId::new("s"), 1, SessionMeta::default()),
        None,
    )
    .unwrap()
}

fn assistant(text: &str) -> Arc<Message> {
    Arc::new(Message::assistant(vec![ContentBlock::text(text)], "p", "m"))
}

fn assistant_calling(id: &str) -> Arc<Message> {
    Arc::new(Message::assistant(
        vec![ContentBlock::ToolCall {
            id: CallId::new(id),
            name: "bash".into(),
            arguments: "{}".into(),
        }],
        "p",
        "m",
    ))
}

fn tool_result(id: &str, text: &str) -> Arc<Message> {
    Arc::new(Message::tool_result(
        CallId::new(id),
        vec![ContentBlock::text(text)],
        false,
    ))
}

fn am(turn: u64, step: u64, message: Arc<Message>) -> EventKind {
    EventKind::AssistantMessage(AssistantMessage {
        turn,
        step,
        message,
        usage: None,
        interrupted: false,
    })
}

fn tr(turn: u64, step: u64, message: Arc<Message>) -> EventKind {
    EventKind::ToolResult(ToolResult {
        turn,
        step,
        message,
        error: None,
        meta: None,
    })
}

#[test]
fn seq_is_contiguous_from_zero() {
    let s = fresh();
    for turn in 1..=3 {
        s.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
        s.append(EventKind::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
        }))
        .unwrap();
    }
    let seqs: Vec<u64> = s.events().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..6).collect::<Vec<_>>());
    assert_eq!(s.last_turn(), 3);
}

#[test]
fn append_carrying_non_json_data_leaves_the_log_unchanged() {
    let s = fresh();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    let err = s
        .append(EventKind::other("x/plugin", json!({"n": -0.0})))
        .unwrap_err();
    assert!(matches!(err, SessionError::NonJson { .. }), "{err}");
    assert!(err.to_string().contains("non-JSON-serializable"), "{err}");
    let mut bad = HashMap::new();
    bad.insert((1u8, 2u8), "tuple keys");
    assert!(matches!(
        s.append_plugin("x/plugin", &bad),
        Err(SessionError::NonJson { .. })
    ));
    assert_eq!(s.len(), 1);
}

#[test]
fn surface_fields_are_only_allowed_on_surface_events() {
    let s = fresh();
    let mut d = EventDraft::new(EventKind::TurnStart(TurnStart { turn: 1 }));
    d.surface_op = Some(SurfaceOp::Append);
    assert!(matches!(
        s.append_draft(d),
        Err(SessionError::InvalidEvent { .. })
    ));
    let mut d = EventDraft::new(EventKind::UserMessage(Arc::new(Message::user_text("hi"))));
    d.surface_op = None;
    assert!(s.append_draft(d).is_err());
    let d = EventDraft::new(EventKind::TurnStart(TurnStart { turn: 1 })).with_sources(vec![]);
    assert!(s.append_draft(d).is_err());
    assert!(s.is_empty());
}

#[test]
fn source_event_seqs_must_be_unique_earlier_and_non_empty_except_on_assistant_messages() {
    let s = fresh();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("a"))))
        .unwrap();
    let msg = || EventKind::UserMessage(Arc::new(Message::user_text("b")));
    assert!(
        s.append_draft(EventDraft::new(msg()).with_sources(vec![0, 0]))
            .is_err()
    );
    assert!(
        s.append_draft(EventDraft::new(msg()).with_sources(vec![1]))
            .is_err()
    );
    assert!(
        s.append_draft(EventDraft::new(msg()).with_sources(vec![]))
            .is_err()
    );
    s.append_draft(EventDraft::new(am(1, 1, assistant("x"))).with_sources(vec![]))
        .unwrap();
    assert_eq!(s.len(), 2);
}

#[test]
fn message_shapes_are_checked() {
    let s = fresh();
    let wrong_role = Arc::new(Message::assistant(vec![], "p", "m"));
    assert!(s.append(EventKind::UserMessage(wrong_role)).is_err());
    let mut mismatched = Message::tool_result(CallId::new("a"), vec![], false);
    mismatched.source = MessageSource::Tool {
        call_id: CallId::new("b"),
    };
    assert!(s.append(tr(1, 1, Arc::new(mismatched))).is_err());
    let header = RequestHeaderEvent {
        header: RequestHeader {
            config: json!({"provider": "", "model": "m"}),
            adapter_defaults: None,
            system: None,
            tools: None,
        },
        reason: HeaderReason::Initial,
    };
    assert!(s.append(EventKind::RequestHeader(header)).is_err());
    assert!(s.is_empty());
}

#[test]
fn legacy_vocabulary_is_rejected() {
    let s = fresh();
    assert!(
        s.append(EventKind::other("request/header-delta", json!({})))
            .is_err()
    );
    assert!(
        serde_json::from_str::<SessionEvent>(
            r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}"#
        )
        .is_err()
    );
}

/// INV-SES-2: what `append` commits must read back as the same event. A plugin-owned event
/// under a core type name would be written as that core type and, on load, either fail to
/// parse (the whole session file becomes unreadable) or change meaning (a `turn/start`).
#[test]
fn inv_ses_2_plugin_events_cannot_take_a_core_type_name() {
    let s = fresh();
    for (name, data) in [
        ("turn/start", json!({"turn": 7})),
        ("user/message", json!({"x": 1})),
        ("session/end-seed", json!([])),
        ("agent/inbox/spliced", json!({})),
    ] {
        let err = s.append_plugin(name, &data).unwrap_err();
        assert!(
            matches!(err, SessionError::InvalidEvent { .. }),
            "{name}: {err}"
        );
        assert!(s.append(EventKind::other(name, data)).is_err(), "{name}");
    }
    assert!(s.is_empty());
    assert_eq!(s.last_turn(), 0);
    // Plugin names stay free.
    let ev = s
        .append_plugin("llm/retry", &json!({"attempt": 1}))
        .unwrap();
    let line = serde_json::to_string(&*ev).unwrap();
    assert_eq!(serde_json::from_str::<SessionEvent>(&line).unwrap(), *ev);
}

/// INV-SES-2: a plugin source's extra fields are flattened beside `kind` and `plugin`; an extra
/// field of either name would be written as a duplicate key, and a log holding that line
/// cannot be read back. Such a message is refused before the log changes.
#[test]
fn inv_ses_2_plugin_source_extras_cannot_shadow_kind_or_plugin() {
    let s = fresh();
    for key in ["kind", "plugin"] {
        let mut extra = serde_json::Map::new();
        extra.insert(key.into(), json!("notice"));
        let m = Arc::new(Message::user(
            vec![ContentBlock::text("x")],
            MessageSource::Plugin {
                plugin: "p".into(),
                extra,
            },
        ));
        assert!(
            s.append(EventKind::UserMessage(m.clone())).is_err(),
            "{key}"
        );
        let splice = EventKind::InboxSpliced(InboxSplice {
            target: InboxTarget::NextStep,
            start: 0,
            removed_count: None,
            inserted: vec![m],
            outcome: None,
        });
        assert!(s.append(splice).is_err(), "{key}");
    }
    assert!(s.is_empty());
    // Other extra fields are kept and read back.
    let mut extra = serde_json::Map::new();
    extra.insert("form".into(), json!("notice"));
    let m = Message::user(
        vec![ContentBlock::text("x")],
        MessageSource::Plugin {
            plugin: "p".into(),
            extra,
        },
    );
    let ev = s.append(EventKind::UserMessage(Arc::new(m))).unwrap();
    let line = serde_json::to_string(&*ev).unwrap();
    assert_eq!(serde_json::from_str::<SessionEvent>(&line).unwrap(), *ev);
}

#[test]
fn derived_history_projects_the_surface_and_skips_empty_assistant_messages() {
    let s = fresh();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("q"))))
        .unwrap();
    s.append(am(1, 1, Arc::new(Message::assistant(vec![], "p", "m"))))
        .unwrap();
    s.append(am(1, 1, assistant_calling("c1"))).unwrap();
    s.append(EventKind::ToolCall(ToolCall {
        turn: 1,
        step: 1,
        call_id: CallId::new("c1"),
        name: "bash".into(),
        arguments: "{}".into(),
    }))
    .unwrap();
    s.append_draft(EventDraft::new(tr(1, 1, tool_result("c1", "out"))).with_sources(vec![3]))
        .unwrap();
    let roles: Vec<Role> = s.derive_messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
}

#[test]
fn replaying_a_log_into_a_new_session_derives_identical_messages() {
    let s = fresh();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("q"))))
        .unwrap();
    s.append(am(1, 1, assistant("a1"))).unwrap();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("q2"))))
        .unwrap();
    s.append_draft(
        EventDraft::new(EventKind::UserMessage(Arc::new(Message::user_text(
            "summary",
        ))))
        .with_sources(vec![0, 1])
        .replacing(0, 1),
    )
    .unwrap();
    let seed: Vec<SessionEvent> = s.events().iter().map(|e| (**e).clone()).collect();
    let replay = Session::new(s.header().clone(), Some(seed)).unwrap();
    assert_eq!(replay.derive_messages(), s.derive_messages());
    let texts: Vec<String> = replay.derive_messages().iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["summary", "q2"]);
    assert!(matches!(
        replay.events().last().unwrap().kind,
        EventKind::SessionEndSeed
    ));
    assert_eq!(replay.first_live_seq(), 4);
}

#[test]
fn replacement_must_cite_every_shadowed_node_and_name_current_nodes() {
    let s = fresh();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("a"))))
        .unwrap();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text("b"))))
        .unwrap();
    let summary = || EventKind::UserMessage(Arc::new(Message::user_text("s")));
    assert!(
        s.append_draft(
            EventDraft::new(summary())
                .with_sources(vec![0])
                .replacing(0, 1)
        )
        .is_err()
    );
    assert!(
        s.append_draft(
            EventDraft::new(summary())
                .with_sources(vec![0, 1])
                .replacing(1, 0)
        )
        .is_err()
    );
    assert!(
        s.append_draft(
            EventDraft::new(summary())
                .with_sources(vec![0, 1])
                .replacing(0, 7)
        )
        .is_err()
    );
    assert_eq!(s.replace_generation(), 0);
    s.append_draft(
        EventDraft::new(summary())
            .with_sources(vec![0, 1])
            .replacing(0, 1),
    )
    .unwrap();
    assert_eq!(s.replace_generation(), 1);
    assert_eq!(s.surface_nodes(), [2]);
}

#[test]
fn tool_result_replacement_may_only_change_the_content_of_one_result() {
    let s = fresh();
    s.append(am(1, 1, assistant_calling("c1"))).unwrap();
    s.append(tr(1, 1, tool_result("c1", "long output")))
        .unwrap();
    let other = EventDraft::new(tr(1, 1, tool_result("c2", "pruned")))
        .with_sources(vec![1])
        .replacing(1, 1);
    assert!(s.append_draft(other).is_err());
    let pruned = EventDraft::new(tr(1, 1, tool_result("c1", "pruned")))
        .with_sources(vec![1])
        .replacing(1, 1);
    s.append_draft(pruned).unwrap();
    assert_eq!(s.derive_messages()[1].content.len(), 1);
}

#[test]
fn seed_events_must_be_contiguous() {
    let header = SessionHeader::new(SessionId::new("s"), 1, SessionMeta::default());
    let gap = vec![SessionEvent {
        seq: 1,
        time: 0,
        kind: EventKind::TurnStart(TurnStart { turn: 1 }),
        ignorable: false,
        source_event_seqs: None,
        surface_op: None,
    }];
    assert!(matches!(
        Session::new(header.clone(), Some(gap)),
        Err(SessionError::InvalidEvent { .. })
    ));
    // An empty seed still gets the end-of-seed marker.
    let s = Session::new(header, Some(vec![])).unwrap();
    assert_eq!(s.len(), 1);
}

#[test]
fn pre_commit_validator_veto_leaves_the_log_unchanged() {
    let s = fresh();
    s.add_validator(Arc::new(|_, e| {
        if e.type_name() == "step/start" {
            Err("no steps today".into())
        } else {
            Ok(())
        }
    }));
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    let err = s
        .append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
        .unwrap_err();
    assert!(matches!(err, SessionError::Vetoed { .. }));
    assert_eq!(s.len(), 1);
}

#[test]
fn fork_seed_rejects_missing_and_open_turn_boundaries() {
    let s = fresh();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: 1,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
    s.append(EventKind::TurnStart(TurnStart { turn: 2 }))
        .unwrap();
    let events = s.events();
    assert_eq!(fork_seed(&events, Some(1)).unwrap().len(), 2);
    assert!(matches!(
        fork_seed(&events, Some(2)),
        Err(SessionError::OpenTurn { turn: 2, .. })
    ));
    assert!(matches!(
        fork_seed(&events, Some(9)),
        Err(SessionError::InvalidBoundary { .. })
    ));
    assert!(fork_seed(&[], None).unwrap().is_empty());
}

#[test]
fn crash_repair_closes_an_open_turn_with_synthetic_results() {
    let s = fresh();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    let two_calls = Arc::new(Message::assistant(
        vec![
            ContentBlock::ToolCall {
                id: CallId::new("ran"),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            ContentBlock::ToolCall {
                id: CallId::new("never"),
                name: "bash".into(),
                arguments: "{}".into(),
            },
        ],
        "p",
        "m",
    ));
    s.append(am(1, 1, two_calls)).unwrap();
    s.append(EventKind::ToolCall(ToolCall {
        turn: 1,
        step: 1,
        call_id: CallId::new("ran"),
        name: "bash".into(),
        arguments: "{}".into(),
    }))
    .unwrap();
    let events: Vec<SessionEvent> = s.events().iter().map(|e| (**e).clone()).collect();
    let closers = interrupted_turn_closers(&events);
    let kinds: Vec<&str> = closers.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        kinds,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    let codes: Vec<String> = closers
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => r.error.as_ref().map(|e| e.code.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]);
    assert_eq!(closers[0].source_event_seqs, Some(vec![3]));
    assert_eq!(closers[0].seq, 4);

    let mut repaired = events.clone();
    repaired.extend(closers);
    let session = Session::new(s.header().clone(), Some(repaired)).unwrap();
    check_balanced(&session.events()).unwrap();
    assert!(
        interrupted_turn_closers(
            &session
                .events()
                .iter()
                .map(|e| (**e).clone())
                .collect::<Vec<_>>()
        )
        .is_empty()
    );
}

/// INV-REL-4: a result pairs with the call of the same id *in the same step*. Providers (and
/// the OpenAI-compatible adapter, for calls sent without an id) reuse ids such as `call_0` in
/// every response, so crash repair and the balance check must not let step 1's answered
/// `call_0` stand for step 2's unanswered one.
#[test]
fn inv_rel_4_crash_repair_pairs_reused_call_ids_per_step() {
    let s = guarded();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    s.append(am(1, 1, assistant_calling("call_0"))).unwrap();
    let call = |step| {
        EventKind::ToolCall(ToolCall {
            turn: 1,
            step,
            call_id: CallId::new("call_0"),
            name: "bash".into(),
            arguments: "{}".into(),
        })
    };
    let first_call = s.append(call(1)).unwrap().seq;
    s.append_draft(
        EventDraft::new(tr(1, 1, tool_result("call_0", "ok"))).with_sources(vec![first_call]),
    )
    .unwrap();
    s.append(EventKind::StepEnd(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 2 }))
        .unwrap();
    s.append(am(1, 2, assistant_calling("call_0"))).unwrap();
    let second_call = s.append(call(2)).unwrap().seq;
    // The process dies while step 2's `call_0` runs.

    let events: Vec<SessionEvent> = s.events().iter().map(|e| (**e).clone()).collect();
    let closers = interrupted_turn_closers(&events);
    let kinds: Vec<&str> = closers.iter().map(|e| e.type_name()).collect();
    assert_eq!(kinds, ["tool/result", "step/end", "turn/end"]);
    let EventKind::ToolResult(r) = &closers[0].kind else {
        unreachable!()
    };
    assert_eq!((r.turn, r.step), (1, 2));
    assert_eq!(r.error.as_ref().unwrap().code, "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(closers[0].source_event_seqs, Some(vec![second_call]));

    let mut repaired = events;
    repaired.extend(closers);
    let session = Session::new(s.header().clone(), Some(repaired)).unwrap();
    check_balanced(&session.events()).unwrap();
}

fn guarded() -> Arc<Session> {
    let s = fresh();
    s.add_validator(relational_validator());
    s
}

#[test]
fn turns_open_only_when_none_is_open_and_number_consecutively() {
    let s = guarded();
    assert!(
        s.append(EventKind::TurnStart(TurnStart { turn: 2 }))
            .is_err()
    );
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    assert!(
        s.append(EventKind::TurnStart(TurnStart { turn: 2 }))
            .is_err()
    );
    assert!(
        s.append(EventKind::TurnEnd(TurnEnd {
            turn: 2,
            reason: TurnEndReason::Completed
        }))
        .is_err()
    );
}

#[test]
fn steps_live_inside_the_open_turn_and_close_before_it() {
    let s = guarded();
    assert!(
        s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
            .is_err()
    );
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    assert!(
        s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 2 }))
            .is_err()
    );
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    assert!(
        s.append(EventKind::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed
        }))
        .is_err()
    );
    assert!(
        s.append(EventKind::StepEnd(StepBoundary { turn: 1, step: 2 }))
            .is_err()
    );
    s.append(EventKind::StepEnd(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: 1,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
}

#[test]
fn step_scoped_events_name_the_open_step_and_results_pair_with_calls() {
    let s = guarded();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    assert!(s.append(am(1, 2, assistant("x"))).is_err());
    s.append(am(1, 1, assistant_calling("c1"))).unwrap();
    assert!(s.append(tr(1, 1, tool_result("c1", "early"))).is_err());
    s.append(EventKind::ToolCall(ToolCall {
        turn: 1,
        step: 1,
        call_id: CallId::new("c1"),
        name: "bash".into(),
        arguments: "{}".into(),
    }))
    .unwrap();
    s.append(tr(1, 1, tool_result("c1", "ok"))).unwrap();
}

#[test]
fn request_header_and_context_only_inside_a_turn() {
    let s = guarded();
    let ctx = || {
        EventKind::RequestContext(RequestContext {
            provider: "p".into(),
            model: "m".into(),
            context_window: None,
        })
    };
    assert!(s.append(ctx()).is_err());
    s.append(EventKind::UserMessage(Arc::new(Message::user_text(
        "between turns is fine",
    ))))
    .unwrap();
    s.append(EventKind::TurnStart(TurnStart { turn: 1 }))
        .unwrap();
    s.append(ctx()).unwrap();
}
