//! One writer per session file: a second store (as another dsh process would have) neither
//! repairs a file whose writer is live nor appends to a file that changed since it was loaded.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::io::ErrorKind;

use common::*;
use dsh_session::*;
use dsh_store_jsonl::JsonlStore;

fn kind(e: &PersistenceError) -> Option<ErrorKind> {
    match e {
        PersistenceError::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

#[tokio::test]
async fn a_live_writers_file_is_not_loaded_or_repaired_by_another_store_only_read() {
    let h = Harness::new(Default::default()).await;
    let (s, detach) = h.live("shared", Some("/w"));
    complete_turn(&s, true);
    // The second turn is running: its tool call is logged and durable, its result is not.
    open_turn(&s, 2, true);
    h.sessions.flush(&s).await.unwrap();
    let path = h.path(&s);

    let other = JsonlStore::new(&h.root);
    let err = other.load(s.id()).await.unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::WouldBlock), "{err}");
    assert!(err.to_string().contains("another writer"), "{err}");
    let err = other.fork(s.id(), None, None).await.unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::WouldBlock), "{err}");
    // Nothing was repaired under the live writer: no synthetic closers, no truncation.
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&s));
    // Reading for display needs no lock: the open turn is shown as it stands.
    let seen = other.read(s.id()).await.unwrap();
    assert_eq!(seen.events.len() as u64, s.len());
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&s));

    // The live writer goes on undisturbed, and once it is gone the other store loads it all.
    finish_turn(&s, 2, true);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    detach.detach();
    h.plugin.dispose().await;
    let stored = other.load(s.id()).await.unwrap();
    assert_eq!(stored.events.len() as u64, s.len());
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&s));
}

#[tokio::test]
async fn a_resumed_session_does_not_append_to_a_file_another_writer_changed() {
    let h = Harness::new(Default::default()).await;
    let (s, detach) = h.live("twice", Some("/w"));
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    detach.detach();

    // Two processes resume the same stored session; the second one writes and leaves first.
    let (first, _first_detach) = h.resume("twice").await;
    let h2 = h.sharing_root().await;
    let (second, second_detach) = h2.resume("twice").await;
    complete_turn(&second, true);
    h2.sessions.flush(&second).await.unwrap();
    second_detach.detach();
    h2.plugin.dispose().await;
    let path = h.path(&first);
    let written = std::fs::read(&path).unwrap();
    assert_eq!(written, jsonl(&second));

    // The first one's appends would clash with the second one's seqs: refused, file intact.
    complete_turn(&first, false);
    let err = h.sessions.flush(&first).await.unwrap_err();
    assert!(chain(&err).contains("changed since"), "{}", chain(&err));
    assert_eq!(std::fs::read(&path).unwrap(), written);
    let stored = JsonlStore::new(&h.root)
        .load(&SessionId::new("twice"))
        .await;
    assert!(stored.is_ok(), "{stored:?}");
}
