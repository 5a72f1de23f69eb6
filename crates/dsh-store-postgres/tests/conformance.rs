//! The conformance suite: the same behaviours, checked against the JSONL store and the
//! PostgreSQL store (a throwaway cluster started for this binary). Each case is written once
//! against [`common::Storage`] and instantiated for both backends by `conformance!`.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::jsonl::{chain, complete_turn, open_turn};
use common::{Storage, arc_lines, bounded, lines};
use dsh_session::*;

/// A live session with a completed plain turn and a completed tool turn, flushed.
async fn two_turns(m: &common::Mounted, id: &str, cwd: &str) -> Arc<Session> {
    let (s, detach) = m.live(id, Some(cwd));
    complete_turn(&s, false);
    complete_turn(&s, true);
    m.flush(&s).await;
    detach.detach();
    s
}

async fn a_stored_session_loads_back_byte_identical(storage: Storage) {
    let a = storage.mount().await;
    let s = two_turns(&a, "round-trip", "/work/p").await;
    bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let stored = bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(&stored.header, s.header());
    assert_eq!(lines(&stored.events), arc_lines(&s.events()));
}

async fn a_crashed_open_turn_is_closed_durably_on_load(storage: Storage) {
    let s = common::jsonl::scratch("crashed", Some("/work/p"));
    complete_turn(&s, false);
    open_turn(&s, 2, true);
    storage.plant(&s).await;

    let a = storage.mount().await;
    let repaired = bounded(a.store().load(s.id())).await.unwrap();
    assert!(
        repaired.events.len() > s.len() as usize,
        "nothing was closed"
    );
    assert!(matches!(
        repaired.events.last().unwrap().kind,
        EventKind::TurnEnd(_)
    ));
    check_balanced(&common::jsonl::arcs(&repaired.events)).unwrap();
    // Durable: another process reads the repaired log without repairing again.
    let b = storage.mount().await;
    let summary = bounded(b.store().summary(s.id())).await.unwrap();
    assert!(!summary.needs_repair, "the repair was not stored");
    let again = bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(lines(&again.events), lines(&repaired.events));
}

async fn a_resumed_session_continues_the_seq_numbering(storage: Storage) {
    let a = storage.mount().await;
    let s = two_turns(&a, "resumed", "/work/p").await;
    bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let (r, detach) = b.resume("resumed").await;
    assert_eq!(r.first_live_seq(), s.len());
    complete_turn(&r, false);
    b.flush(&r).await;
    detach.detach();
    bounded(b.close()).await.unwrap();

    let c = storage.mount().await;
    let stored = bounded(c.store().load(s.id())).await.unwrap();
    let seqs: Vec<u64> = stored.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..r.len()).collect::<Vec<_>>());
    assert_eq!(lines(&stored.events), arc_lines(&r.events()));
}

async fn a_fork_copies_the_seed_and_leaves_the_source_alone(storage: Storage) {
    let a = storage.mount().await;
    let s = two_turns(&a, "source", "/work/p").await;
    bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let child = bounded(b.store().fork(s.id(), None, Some(SessionId::new("child"))))
        .await
        .unwrap();
    assert_eq!(child.parent_session.as_ref(), Some(s.id()));
    assert_eq!(child.seed_length, Some(s.len()));
    assert_eq!(child.cwd, s.header().cwd);
    let forked = bounded(b.store().load(&child.id)).await.unwrap();
    assert_eq!(
        lines(&forked.events[..s.len() as usize]),
        arc_lines(&s.events())
    );
    assert_eq!(
        forked.events.last().unwrap().type_name(),
        "session/end-seed"
    );
    let source = bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(lines(&source.events), arc_lines(&s.events()));
    // A second fork to the same id is refused, not overwritten.
    let again = bounded(b.store().fork(s.id(), None, Some(SessionId::new("child")))).await;
    assert!(
        matches!(again, Err(PersistenceError::AlreadyExists { .. })),
        "{again:?}"
    );
}

async fn listing_shows_stored_sessions_with_their_first_prompt(storage: Storage) {
    let a = storage.mount().await;
    two_turns(&a, "list-a", "/work/a").await;
    two_turns(&a, "list-b", "/work/b").await;
    // A session with no events is not stored, so not listed.
    let (_empty, _detach) = a.live("list-empty", Some("/work/a"));
    bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let listings = bounded(b.store().listings()).await.unwrap();
    let mut ids: Vec<_> = listings
        .iter()
        .map(|l| l.header.id.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["list-a", "list-b"]);
    for l in &listings {
        assert_eq!(l.first_prompt.as_deref(), Some("prompt 1"));
        assert!(l.last_activity > 0);
    }
    let headers = bounded(b.store().list()).await.unwrap();
    assert_eq!(headers.len(), 2);
}

async fn a_session_live_in_another_process_is_refused_with_the_writer_error(storage: Storage) {
    let a = storage.mount().await;
    let (s, detach) = a.live("contended", Some("/work/p"));
    complete_turn(&s, false);
    a.flush(&s).await;

    let b = storage.mount().await;
    let err = bounded(b.store().load(s.id())).await.unwrap_err();
    assert!(
        chain(&err).contains("in use by another writer"),
        "{}",
        chain(&err)
    );
    // The live writer is unharmed and keeps writing.
    complete_turn(&s, false);
    a.flush(&s).await;
    // Closing the session (no store shutdown) gives its writer lease up.
    detach.detach();
    let stored = bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(lines(&stored.events), arc_lines(&s.events()));
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod jsonl {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Storage::jsonl().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Storage::postgres().await).await;
                }
            )*
        }
    };
}

conformance!(
    a_stored_session_loads_back_byte_identical,
    a_crashed_open_turn_is_closed_durably_on_load,
    a_resumed_session_continues_the_seq_numbering,
    a_fork_copies_the_seed_and_leaves_the_source_alone,
    listing_shows_stored_sessions_with_their_first_prompt,
    a_session_live_in_another_process_is_refused_with_the_writer_error,
);
