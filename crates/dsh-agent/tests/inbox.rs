//! Inbox invariants (INV-INBOX, G1).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::events::{ClaimNotice, InboxClaimed, InboxDiscarded, InboxInserted, InboxNotice};
use dsh_agent::*;
use dsh_session::*;
use parking_lot::Mutex;
use serde_json::json;

fn msg(id: &str, text: &str) -> Message {
    let mut m = Message::user_text(text);
    m.id = MessageId::new(id);
    m
}

fn ids(list: &[Arc<Message>]) -> Vec<String> {
    list.iter().map(|m| m.id.to_string()).collect()
}

type Log = Arc<Mutex<Vec<String>>>;

fn listen(w: &World) -> Log {
    let log: Log = Arc::default();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<InboxInserted>(move |n: &InboxNotice| {
            l.lock().push(format!("inserted:{}", n.message.id))
        })
        .unwrap();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<InboxDiscarded>(move |n: &InboxNotice| {
            l.lock().push(format!("discarded:{}", n.message.id))
        })
        .unwrap();
    let l = log.clone();
    let _ = w
        .ctx
        .on::<InboxClaimed>(move |n: &ClaimNotice| {
            l.lock()
                .push(format!("claimed:{}@{}", n.message.id, n.turn))
        })
        .unwrap();
    log
}

#[test]
fn replace_locates_by_id_across_both_lists_and_pairs_discard_with_insert() {
    let w = world();
    let log = listen(&w);
    let a = w.published("a");
    a.inbox()
        .append(InboxTarget::NextTurn, msg("t1", "turn"))
        .unwrap();
    a.inbox()
        .append(InboxTarget::NextStep, msg("s1", "step"))
        .unwrap();
    assert!(
        a.inbox()
            .replace(&"s1".into(), msg("s2", "edited"))
            .unwrap()
    );
    assert!(!a.inbox().replace(&"nope".into(), msg("x", "x")).unwrap());
    assert_eq!(ids(&a.inbox().next_step()), ["s2"]);
    assert_eq!(
        *log.lock(),
        ["inserted:t1", "inserted:s1", "discarded:s1", "inserted:s2"]
    );
}

#[test]
fn duplicate_pending_ids_are_refused_before_anything_is_logged() {
    let w = world();
    let a = w.published("a");
    a.inbox()
        .append(InboxTarget::NextTurn, msg("m", "one"))
        .unwrap();
    let before = a.session().len();
    let err = a
        .inbox()
        .append(InboxTarget::NextStep, msg("m", "two"))
        .unwrap_err();
    assert_eq!(err.to_string(), "message \"m\" is already pending");
    assert_eq!(a.session().len(), before);
}

#[test]
fn splice_coordinates_normalize_like_array_splice() {
    let w = world();
    let a = w.published("a");
    for i in 0..4 {
        a.inbox()
            .append(InboxTarget::NextTurn, msg(&format!("m{i}"), "x"))
            .unwrap();
    }
    let removed = a
        .inbox()
        .splice(InboxTarget::NextTurn, -2, 1, vec![])
        .unwrap();
    assert_eq!(ids(&removed), ["m2"]);
    let removed = a
        .inbox()
        .splice(InboxTarget::NextTurn, 99, 5, vec![msg("end", "x")])
        .unwrap();
    assert!(removed.is_empty());
    let removed = a
        .inbox()
        .splice(InboxTarget::NextTurn, -99, 1, vec![])
        .unwrap();
    assert_eq!(ids(&removed), ["m0"]);
    assert_eq!(ids(&a.inbox().next_turn()), ["m1", "m3", "end"]);
    let before = a.session().len();
    assert!(
        a.inbox()
            .splice(InboxTarget::NextStep, 0, 3, vec![])
            .unwrap()
            .is_empty()
    );
    assert_eq!(a.session().len(), before, "an empty splice logs nothing");
}

#[test]
fn clear_logs_two_canceled_splices_step_first_and_is_idempotent() {
    let w = world();
    let log = listen(&w);
    let a = w.published("a");
    a.inbox()
        .append(InboxTarget::NextTurn, msg("t", "x"))
        .unwrap();
    a.inbox()
        .append(InboxTarget::NextStep, msg("s", "x"))
        .unwrap();
    let before = a.session().len();
    a.inbox().clear().unwrap();
    a.inbox().clear().unwrap();
    let splices: Vec<(InboxTarget, Option<SpliceOutcome>)> = a
        .session()
        .events_from(before)
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::InboxSpliced(s) => Some((s.target, s.outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(
        splices,
        [
            (InboxTarget::NextStep, Some(SpliceOutcome::Canceled)),
            (InboxTarget::NextTurn, Some(SpliceOutcome::Canceled))
        ]
    );
    assert!(
        log.lock()
            .ends_with(&["discarded:s".to_owned(), "discarded:t".to_owned()])
    );
}

#[test]
fn claim_takes_all_steps_then_one_prompt_and_never_returns_them() {
    let w = world();
    let log = listen(&w);
    let a = w.published("a");
    a.inbox()
        .append(InboxTarget::NextTurn, msg("p1", "x"))
        .unwrap();
    a.inbox()
        .append(InboxTarget::NextTurn, msg("p2", "x"))
        .unwrap();
    a.inbox()
        .append(InboxTarget::NextStep, msg("s1", "x"))
        .unwrap();
    log.lock().clear();
    let batch = a.inbox().claim(InboxTarget::NextTurn, 7).unwrap();
    assert_eq!(ids(&batch), ["s1", "p1"]);
    assert_eq!(*log.lock(), ["claimed:s1@7", "claimed:p1@7"]);
    assert_eq!(ids(&a.inbox().next_turn()), ["p2"]);
    let later = a.inbox().claim(InboxTarget::NextStep, 7).unwrap();
    assert!(
        later.is_empty(),
        "a later boundary claims only next-step input"
    );
    // Claims are pure deletions: no cancellation outcome.
    let outcomes: Vec<Option<SpliceOutcome>> = a
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::InboxSpliced(s) if s.removed_count.is_some() => Some(s.outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, [None, None]);
}

#[test]
fn a_failed_durable_append_leaves_the_inbox_unchanged() {
    let w = world();
    let a = w.published("a");
    a.session().add_validator(Arc::new(|_, e| {
        if e.type_name() == "agent/inbox/spliced" {
            Err("disk on fire".into())
        } else {
            Ok(())
        }
    }));
    assert!(a.followup(msg("m", "x")).is_err());
    assert!(!a.inbox().has_pending());
}

#[test]
fn a_non_json_message_is_refused_before_any_event_is_logged() {
    let w = world();
    let a = w.published("a");
    let mut m = Message::plugin_text("p", "x");
    if let MessageSource::Plugin { extra, .. } = &mut m.source {
        extra.insert("bad".into(), json!(-0.0));
    }
    let before = a.session().len();
    let err = a.inject(m).unwrap_err();
    assert!(err.to_string().contains("non-JSON-serializable"), "{err}");
    assert_eq!(a.session().len(), before);
    assert!(!a.inbox().has_pending());
}

#[test]
fn restore_replays_splices_and_a_fork_child_inherits_no_pending_work() {
    let w = world();
    let a = w.published("a");
    a.inbox()
        .append(InboxTarget::NextStep, msg("ctx", "pending context"))
        .unwrap();
    a.inbox()
        .append(InboxTarget::NextTurn, msg("p", "prompt"))
        .unwrap();
    a.inbox().claim(InboxTarget::NextTurn, 1).unwrap();
    a.inbox()
        .append(InboxTarget::NextStep, msg("late", "x"))
        .unwrap();
    let seed: Vec<SessionEvent> = a.session().events().iter().map(|e| (**e).clone()).collect();

    let resumed = Session::new(a.session().header().clone(), Some(seed.clone())).unwrap();
    let inbox = Inbox::restore(resumed).unwrap();
    assert_eq!(ids(&inbox.next_step()), ["late"]);

    let meta = SessionMeta {
        seed_length: Some(seed.len() as u64),
        ..SessionMeta::default()
    };
    let child = Session::new(SessionHeader::new("child".into(), 0, meta), Some(seed)).unwrap();
    assert!(!Inbox::restore(child).unwrap().has_pending());
}

#[test]
fn an_invalid_persisted_splice_is_refused_with_its_seq() {
    let header = SessionHeader::new("s".into(), 0, SessionMeta::default());
    let bad = SessionEvent {
        seq: 0,
        time: 0,
        kind: EventKind::InboxSpliced(InboxSplice {
            target: InboxTarget::NextTurn,
            start: 0,
            removed_count: Some(1),
            inserted: vec![],
            outcome: None,
        }),
        ignorable: false,
        source_event_seqs: None,
        surface_op: None,
    };
    let session = Session::new(header, Some(vec![bad])).unwrap();
    let err = Inbox::restore(session).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("invalid persisted inbox splice at session seq 0"),
        "{err}"
    );
}

/// G1: a persisted splice whose coordinates overflow is refused like any other invalid
/// splice, instead of panicking while the inbox is rebuilt (a hand-edited or corrupt session
/// file must not crash `resume`).
#[test]
fn an_overflowing_persisted_splice_is_refused_not_a_panic() {
    let header = SessionHeader::new("s".into(), 0, SessionMeta::default());
    let splice = |seq: u64, start: u64, removed_count: Option<u64>, inserted: Vec<Arc<Message>>| {
        SessionEvent {
            seq,
            time: 0,
            kind: EventKind::InboxSpliced(InboxSplice {
                target: InboxTarget::NextTurn,
                start,
                removed_count,
                inserted,
                outcome: None,
            }),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        }
    };
    let seed = vec![
        splice(0, 0, None, vec![Arc::new(msg("p", "prompt"))]),
        splice(1, 1, Some(u64::MAX), vec![]),
    ];
    let session = Session::new(header, Some(seed)).unwrap();
    let err = Inbox::restore(session).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("invalid persisted inbox splice at session seq 1"),
        "{err}"
    );
}
