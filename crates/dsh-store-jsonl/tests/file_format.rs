//! The on-disk form: exact bytes, lazy creation, no-clobber publication, isolation, layout.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use common::*;
use dsh_session::*;
use dsh_store_jsonl::JsonlOptions;
use serde_json::json;

#[tokio::test]
async fn stored_bytes_round_trip_byte_for_byte() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (s, _detach) = h.live("rt", Some("/work/proj"));
    complete_turn(&s, true);
    s.append_draft(
        EventDraft::new(EventKind::other(
            "acme/private",
            json!({"z": 1.5, "a": [true, null, "é\n"]}),
        ))
        .ignorable(),
    )
    .unwrap();
    s.append_plugin(
        "todo/write",
        &json!({"todos": [{"content": "x", "status": "pending"}]}),
    )
    .unwrap();
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();

    let path = h.path(&s);
    assert_eq!(
        path,
        h.root.join("--work-proj--").join("rt.jsonl"),
        "one directory per project, one file per session"
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes, jsonl(&s), "header line then one event per line");

    // Re-serializing what was read gives the same bytes.
    let mut lines = bytes.split(|b| *b == b'\n');
    let header: SessionHeader = serde_json::from_slice(lines.next().unwrap()).unwrap();
    let mut again = serde_json::to_vec(&header).unwrap();
    again.push(b'\n');
    for line in lines.filter(|l| !l.is_empty()) {
        let e: SessionEvent = serde_json::from_slice(line).unwrap();
        serde_json::to_writer(&mut again, &e).unwrap();
        again.push(b'\n');
    }
    assert_eq!(again, bytes);
    let first: serde_json::Value =
        serde_json::from_slice(bytes.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["type"], "session");
    assert_eq!(first["id"], "rt");
    assert_eq!(first["delegationDepth"], 0);

    let loaded = h.store.load(&SessionId::new("rt")).await;
    assert!(matches!(loaded, Err(PersistenceError::Live { .. })));
}

#[tokio::test]
async fn a_session_without_events_creates_no_file() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (s, detach) = h.live("empty", None);
    h.sessions.flush(&s).await.unwrap();
    detach.detach();
    h.plugin.dispose().await;
    assert!(
        !h.root.exists(),
        "nothing touches the disk before the first event"
    );
    assert!(h.store.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_first_event_publishes_header_and_batch_together() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (s, _detach) = h.live("first", None);
    s.append(user("hello")).unwrap();
    h.sessions.flush(&s).await.unwrap();
    let path = h.path(&s);
    assert_eq!(path, h.root.join("_no-cwd").join("first.jsonl"));
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&s));
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["first.jsonl"], "no temp file is left behind");
}

#[tokio::test]
async fn publication_does_not_clobber_an_existing_same_id_file() {
    let h = Harness::new(JsonlOptions::default()).await;
    let other = scratch("same", None);
    complete_turn(&other, false);
    let path = write_file(&h.root, &other, &jsonl(&other));
    let before = std::fs::read(&path).unwrap();

    let (s, _detach) = h.live("same", None);
    s.append(user("mine")).unwrap();
    let err = h.store.flush_session(&s).await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::AlreadyExists { ref id } if id == "same"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["same.jsonl"]);
}

#[tokio::test]
async fn publication_refuses_an_id_stored_under_another_project() {
    let h = Harness::new(JsonlOptions::default()).await;
    let other = scratch("twin", Some("/elsewhere"));
    complete_turn(&other, false);
    write_file(&h.root, &other, &jsonl(&other));
    let (s, _detach) = h.live("twin", Some("/here"));
    s.append(user("mine")).unwrap();
    let err = h.store.flush_session(&s).await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::AlreadyExists { .. }),
        "{err}"
    );
    assert!(!h.root.join("--here--").join("twin.jsonl").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_written_concurrently_stay_isolated() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (a, _da) = h.live("a", Some("/p"));
    let (b, _db) = h.live("b", Some("/p"));
    let threads: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|s| {
            std::thread::spawn(move || {
                for _ in 0..20 {
                    complete_turn(&s, true);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (fa, fb) = tokio::join!(h.sessions.flush(&a), h.sessions.flush(&b));
    fa.unwrap();
    fb.unwrap();
    assert_eq!(std::fs::read(h.path(&a)).unwrap(), jsonl(&a));
    assert_eq!(std::fs::read(h.path(&b)).unwrap(), jsonl(&b));
}

#[tokio::test]
async fn ids_cannot_escape_their_project_directory() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (s, _detach) = h.live("../../escape", None);
    s.append(user("x")).unwrap();
    h.sessions.flush(&s).await.unwrap();
    let path = h.path(&s);
    assert_eq!(
        path,
        h.root.join("_no-cwd").join("..~002F..~002Fescape.jsonl")
    );
    assert!(path.exists());
    assert!(!h.dir.path().join("escape.jsonl").exists());
}

#[tokio::test]
async fn loading_an_unknown_id_is_not_found() {
    let h = Harness::new(JsonlOptions::default()).await;
    let err = h.store.load(&SessionId::new("nope")).await.unwrap_err();
    assert!(matches!(err, PersistenceError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn an_id_stored_under_two_projects_is_ambiguous() {
    let h = Harness::new(JsonlOptions::default()).await;
    for cwd in ["/one", "/two"] {
        let s = scratch("dup", Some(cwd));
        complete_turn(&s, false);
        write_file(&h.root, &s, &jsonl(&s));
    }
    let err = h.store.load(&SessionId::new("dup")).await.unwrap_err();
    match err {
        PersistenceError::Ambiguous { paths, .. } => assert_eq!(paths.len(), 2),
        other => panic!("expected ambiguity, got {other}"),
    }
}

#[tokio::test]
async fn a_file_whose_header_names_another_session_is_rejected() {
    let h = Harness::new(JsonlOptions::default()).await;
    let s = scratch("real", None);
    complete_turn(&s, false);
    let path = write_file(&h.root, &s, &jsonl(&s));
    let moved = path.with_file_name("alias.jsonl");
    std::fs::rename(&path, &moved).unwrap();
    let err = h.store.load(&SessionId::new("alias")).await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::Corrupt { line: 1, .. }),
        "{err}"
    );
}
