//! Listing, summaries, locate and storage-level fork.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::fs::File;
use std::time::{Duration, SystemTime};

use common::*;
use dsh_session::persistence::SessionLocation;
use dsh_session::*;
use dsh_store_jsonl::JsonlStore;

fn set_mtime(path: &std::path::Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[tokio::test]
async fn listing_skips_empty_sessions_and_sorts_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    for (id, cwd, age) in [
        ("old", "/a", 300),
        ("new", "/b", 10),
        ("mid", "/a", 100),
        (".dot", "/a", 200),
    ] {
        let s = scratch(id, Some(cwd));
        complete_turn(&s, true);
        let path = write_file(dir.path(), &s, &jsonl(&s));
        set_mtime(&path, age);
    }
    // A header without events (e.g. every event was a torn tail) is not a session to list.
    let bare = scratch("bare", None);
    write_file(dir.path(), &bare, &jsonl(&bare));
    // Neither are stray files.
    std::fs::write(dir.path().join("--a--").join(".x.jsonl.1-0.tmp"), b"junk").unwrap();
    std::fs::write(dir.path().join("--a--").join("notes.txt"), b"junk").unwrap();

    let listed = store.listings().await.unwrap();
    let ids: Vec<_> = listed.iter().map(|l| l.header.id.as_str()).collect();
    assert_eq!(ids, ["new", "mid", ".dot", "old"]);
    assert!(listed[0].last_activity > listed[1].last_activity);
    assert_eq!(listed[0].first_prompt.as_deref(), Some("prompt 1"));
    assert_eq!(listed[0].turns, Some(1));
    assert!(listed[0].bytes.unwrap() > 0);
    let headers = store.list().await.unwrap();
    assert_eq!(headers.len(), 4);
    assert_eq!(headers[0].id, "new");
}

#[test]
fn listing_skips_a_fifo_named_like_a_session_instead_of_waiting_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch("real", Some("/a"));
    complete_turn(&s, false);
    let path = write_file(dir.path(), &s, &jsonl(&s));
    let fifo = path.with_file_name("fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening the FIFO would block the listing forever: list on a thread, bounded.
    let root = dir.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let listed = rt.block_on(JsonlStore::new(root).listings());
        let _ = tx.send(listed.map(|l| l.len()));
    });
    let listed = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("listing hung on a FIFO");
    assert_eq!(listed.unwrap(), 1);
}

#[tokio::test]
async fn listing_an_absent_root_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path().join("nothing-here"));
    assert!(store.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_summary_reads_the_whole_log_without_modifying_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("sum", None);
    complete_turn(&s, true);
    complete_turn(&s, false);
    open_turn(&s, 3, true);
    let mut bytes = jsonl(&s);
    bytes.extend_from_slice(b"{\"torn");
    let path = write_file(dir.path(), &s, &bytes);
    let summary = store.summary(s.id()).await.unwrap();
    assert_eq!(summary.events, s.len());
    assert_eq!(summary.turns, 3);
    assert_eq!(summary.first_prompt.as_deref(), Some("prompt 1"));
    assert!(summary.needs_repair);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(
        store.locate(s.id()).await.unwrap(),
        SessionLocation::File(path)
    );
}

#[tokio::test]
async fn fork_writes_a_child_with_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("parent", Some("/proj"));
    complete_turn(&s, true);
    let boundary = s.len() - 1;
    complete_turn(&s, false);
    write_file(dir.path(), &s, &jsonl(&s));

    let child = store
        .fork(s.id(), Some(boundary), Some(SessionId::new("child")))
        .await
        .unwrap();
    assert_eq!(child.id, "child");
    assert_eq!(child.parent_session.as_ref().unwrap(), s.id());
    assert_eq!(child.seed_length, Some(boundary + 1));
    assert_eq!(child.cwd, s.header().cwd);
    assert_eq!(
        store.locate(&child.id).await.unwrap(),
        SessionLocation::File(dir.path().join("--proj--").join("child.jsonl"))
    );

    let stored = store.load(&child.id).await.unwrap();
    assert_eq!(stored.header, child);
    let parent: Vec<SessionEvent> = s.events().iter().map(|e| (**e).clone()).collect();
    assert_eq!(
        &stored.events[..=boundary as usize],
        &parent[..=boundary as usize]
    );
    assert_eq!(stored.events.len() as u64, boundary + 2);
    assert!(matches!(
        stored.events.last().unwrap().kind,
        EventKind::SessionEndSeed
    ));
    check_balanced(&arcs(&stored.events)).unwrap();

    // The same child id cannot be written twice.
    let err = store
        .fork(s.id(), None, Some(SessionId::new("child")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PersistenceError::AlreadyExists { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn fork_refuses_a_boundary_inside_an_open_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("src", None);
    complete_turn(&s, false);
    complete_turn(&s, false);
    write_file(dir.path(), &s, &jsonl(&s));
    let inside = s.len() - 3;
    let err = store.fork(s.id(), Some(inside), None).await.unwrap_err();
    match err {
        PersistenceError::Fork {
            source: SessionError::OpenTurn { .. },
            ..
        } => {}
        other => panic!("expected an open-turn refusal, got {other}"),
    }
    let err = store.fork(s.id(), Some(1000), None).await.unwrap_err();
    assert!(matches!(
        err,
        PersistenceError::Fork {
            source: SessionError::InvalidBoundary { .. },
            ..
        }
    ));
    assert_eq!(store.list().await.unwrap().len(), 1, "no child was written");
}

#[tokio::test]
async fn forking_a_crashed_session_closes_the_turn_in_the_child_and_never_writes_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("crashed", None);
    complete_turn(&s, false);
    open_turn(&s, 2, true);
    let mut bytes = jsonl(&s);
    bytes.extend_from_slice(br#"{"type":"tool/res"#);
    let source = write_file(dir.path(), &s, &bytes);
    let child = store.fork(s.id(), None, None).await.unwrap();
    assert_eq!(
        std::fs::read(&source).unwrap(),
        bytes,
        "a fork does not modify its source, torn tail and all"
    );
    let stored = store.load(&child.id).await.unwrap();
    check_balanced(&arcs(&stored.events)).unwrap();
    assert_eq!(
        child.seed_length,
        Some(s.len() + 3),
        "the closers are part of the seed"
    );
}

#[tokio::test]
async fn a_listing_reads_the_turn_count_from_the_tail_of_a_long_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("long", None);
    for _ in 0..200 {
        complete_turn(&s, true);
    }
    open_turn(&s, 201, true);
    let bytes = jsonl(&s);
    assert!(
        bytes.len() > 64 * 1024,
        "longer than head and tail together"
    );
    write_file(dir.path(), &s, &bytes);
    let listed = store.listings().await.unwrap();
    assert_eq!(listed[0].turns, Some(201));
    assert_eq!(listed[0].first_prompt.as_deref(), Some("prompt 1"));
    assert_eq!(store.summary(s.id()).await.unwrap().turns, 201);
}
