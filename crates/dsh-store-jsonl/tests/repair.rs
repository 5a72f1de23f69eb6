//! Cold-load crash repair: torn and NUL-padded tails, corruption in the middle, unsupported
//! types, durable closers, and resume after repair.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use common::*;
use dsh_session::repair::{TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN};
use dsh_session::*;
use dsh_store_jsonl::{JsonlOptions, JsonlStore};
use std::sync::Arc;

/// A session with one complete turn and a second turn left open mid-tool, as a crash leaves it.
fn crashed(id: &str) -> std::sync::Arc<Session> {
    let s = scratch(id, Some("/w"));
    complete_turn(&s, true);
    open_turn(&s, 2, true);
    s
}

async fn load(store: &JsonlStore, id: &str) -> Result<StoredSession, PersistenceError> {
    store.load(&SessionId::new(id)).await
}

fn assert_closed_with_unknown_outcome(stored: &StoredSession, intact: usize) {
    let events = &stored.events;
    assert_eq!(seqs(events), (0..events.len() as u64).collect::<Vec<_>>());
    check_balanced(&arcs(events)).unwrap();
    let closers = &events[intact..];
    let kinds: Vec<_> = closers.iter().map(SessionEvent::type_name).collect();
    assert_eq!(kinds, ["tool/result", "step/end", "turn/end"]);
    let EventKind::ToolResult(r) = &closers[0].kind else {
        unreachable!()
    };
    assert_eq!(r.error.as_ref().unwrap().code, TOOL_OUTCOME_UNKNOWN);
    assert!(matches!(
        &closers[2].kind,
        EventKind::TurnEnd(TurnEnd {
            turn: 2,
            reason: TurnEndReason::Interrupted
        })
    ));
}

#[tokio::test]
async fn a_torn_last_line_is_dropped_and_the_open_turn_closed_durably() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = crashed("torn");
    let intact = jsonl(&s);
    let mut bytes = intact.clone();
    bytes.extend_from_slice(br#"{"type":"tool/result","seq":9,"time":1,"da"#);
    let path = write_file(dir.path(), &s, &bytes);

    let stored = load(&store, "torn").await.unwrap();
    assert_eq!(&stored.events[..s.len() as usize], &*arcs_to_vec(&s));
    assert_closed_with_unknown_outcome(&stored, s.len() as usize);

    // The repair is on disk: the torn bytes are gone, the closers are complete lines, and a
    // second load reads the same log without changing the file.
    let repaired = std::fs::read(&path).unwrap();
    assert!(repaired.starts_with(&intact));
    assert!(repaired.ends_with(b"\n"));
    assert_eq!(
        repaired.split(|b| *b == b'\n').count() - 2,
        stored.events.len()
    );
    let again = load(&store, "torn").await.unwrap();
    assert_eq!(again.events, stored.events);
    assert_eq!(std::fs::read(&path).unwrap(), repaired);
}

fn arcs_to_vec(s: &Session) -> Vec<SessionEvent> {
    s.events().iter().map(|e| (**e).clone()).collect()
}

#[tokio::test]
async fn a_nul_padded_tail_is_treated_as_torn() {
    for tail in [&[0u8; 4096][..], b"\0\0\0\n\0\0\0\0", b"{\"type\":\0\0\0\0"] {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        let s = crashed("nul");
        let intact = jsonl(&s);
        let mut bytes = intact.clone();
        bytes.extend_from_slice(tail);
        let path = write_file(dir.path(), &s, &bytes);
        let stored = load(&store, "nul").await.unwrap();
        assert_closed_with_unknown_outcome(&stored, s.len() as usize);
        let repaired = std::fs::read(&path).unwrap();
        assert!(repaired.starts_with(&intact));
        assert!(!repaired.contains(&0), "the NUL bytes are gone");
    }
}

/// Loads `id` from a file holding `bytes`; the load must fail as corrupt at `line` with a
/// reason containing `needle`, leaving the file byte for byte as it was.
async fn assert_refused_untouched(s: &Session, bytes: &[u8], line: usize, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let path = write_file(dir.path(), s, bytes);
    let err = store.load(s.id()).await.unwrap_err();
    match &err {
        PersistenceError::Corrupt {
            path: p,
            line: l,
            reason,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*l, line, "{err}");
            assert!(reason.contains(needle), "{err}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file is not modified"
    );
}

#[tokio::test]
async fn a_complete_invalid_line_after_the_last_turn_end_is_an_error_not_a_torn_tail() {
    // Only an incomplete last line is a torn write; these lines all end in a line end.
    let s = crashed("tail");
    let next = s.len();
    let mut garbage = jsonl(&s);
    garbage.extend_from_slice(b"garbage\n");
    assert_refused_untouched(&s, &garbage, line_of(next), "invalid event JSON").await;

    let mut gap = jsonl(&s);
    gap.extend_from_slice(
        format!(
            "{{\"type\":\"step/end\",\"seq\":{},\"time\":1,\"data\":{{\"turn\":2,\"step\":1}}}}\n",
            next + 1
        )
        .as_bytes(),
    );
    assert_refused_untouched(&s, &gap, line_of(next), "was expected").await;

    let mut huge_time = jsonl(&s);
    huge_time.extend_from_slice(
        format!(
            "{{\"type\":\"step/end\",\"seq\":{next},\"time\":1e400,\"data\":{{\"turn\":2,\"step\":1}}}}\n"
        )
        .as_bytes(),
    );
    assert_refused_untouched(&s, &huge_time, line_of(next), "invalid event JSON").await;
}

#[tokio::test]
async fn swapped_last_lines_of_a_completed_turn_are_refused_not_reclosed_as_interrupted() {
    let s = scratch("swapped", None);
    complete_turn(&s, false);
    complete_turn(&s, true);
    let good = jsonl(&s);
    let mut lines: Vec<&[u8]> = good.split(|b| *b == b'\n').collect();
    let last = line_of(s.len() - 1) - 1;
    lines.swap(last - 1, last);
    let bytes = lines.join(&b'\n');
    assert_refused_untouched(&s, &bytes, line_of(s.len() - 2), "was expected").await;
}

/// A successful `tool/result` for `call`, filed under `turn` and `step`.
fn result_for(turn: u64, step: u64, call: &str) -> EventKind {
    EventKind::ToolResult(ToolResult {
        turn,
        step,
        message: Arc::new(Message::tool_result(
            CallId::new(call),
            vec![ContentBlock::text("ok")],
            false,
        )),
        error: None,
        meta: None,
    })
}

#[tokio::test]
async fn logs_whose_turn_step_and_call_relations_are_broken_are_refused_at_their_line() {
    // A result for a call nobody made.
    let s = scratch("unknown-call", None);
    complete_turn(&s, false);
    open_turn(&s, 2, false);
    let bad = s.len();
    s.append(result_for(2, 1, "nobody-called-this")).unwrap();
    assert_refused_untouched(&s, &jsonl(&s), line_of(bad), "has no tool/call").await;

    // A result filed under another step than its call.
    let s = scratch("elsewhere", None);
    open_turn(&s, 1, true);
    s.append(EventKind::StepEnd(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn: 1, step: 2 }))
        .unwrap();
    let bad = s.len();
    s.append(result_for(1, 2, "elsewhere-call-1")).unwrap();
    assert_refused_untouched(&s, &jsonl(&s), line_of(bad), "has no tool/call").await;

    // A turn that starts inside another.
    let s = scratch("nested", None);
    complete_turn(&s, false);
    open_turn(&s, 2, false);
    let bad = s.len();
    s.append(EventKind::TurnStart(TurnStart { turn: 3 }))
        .unwrap();
    assert_refused_untouched(&s, &jsonl(&s), line_of(bad), "while turn 2 is open").await;

    // A closed turn whose assistant asked for a call that was never answered.
    let s = scratch("unanswered", None);
    open_turn(&s, 1, true);
    s.append(EventKind::StepEnd(StepBoundary { turn: 1, step: 1 }))
        .unwrap();
    let bad = s.len();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: 1,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
    assert_refused_untouched(&s, &jsonl(&s), line_of(bad), "has no tool/result").await;
}

#[tokio::test]
async fn a_turn_numbered_u64_max_is_refused_instead_of_wrapping_to_turn_zero() {
    let s = scratch("max", None);
    let bad = s.len();
    s.append(EventKind::TurnStart(TurnStart { turn: u64::MAX }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn: u64::MAX,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
    assert_refused_untouched(
        &s,
        &jsonl(&s),
        line_of(bad),
        "does not follow the last turn 0",
    )
    .await;
}

#[tokio::test]
async fn corruption_before_a_committed_turn_end_is_rejected_and_the_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("mid", None);
    complete_turn(&s, true);
    complete_turn(&s, false);
    let good = jsonl(&s);
    let mut lines: Vec<&[u8]> = good.split(|b| *b == b'\n').collect();
    lines[line_of(3) - 1] = b"{\"type\":\"user/mess";
    let bytes = lines.join(&b'\n');
    let path = write_file(dir.path(), &s, &bytes);

    let err = load(&store, "mid").await.unwrap_err();
    match &err {
        PersistenceError::Corrupt { path: p, line, .. } => {
            assert_eq!(p, &path);
            assert_eq!(*line, line_of(3));
        }
        other => panic!("expected corruption, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains(&format!("line {}", line_of(3))),
        "{message}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file is not modified"
    );
}

#[tokio::test]
async fn a_seq_gap_before_a_committed_turn_end_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("gap", None);
    complete_turn(&s, false);
    complete_turn(&s, false);
    let good = jsonl(&s);
    let mut lines: Vec<&[u8]> = good.split(|b| *b == b'\n').collect();
    lines.remove(line_of(2) - 1);
    let bytes = lines.join(&b'\n');
    let path = write_file(dir.path(), &s, &bytes);
    let err = load(&store, "gap").await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::Corrupt { line, ref reason, .. }
            if line == line_of(2) && reason.contains("seq 3 where 2 was expected")),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn nul_bytes_in_the_middle_are_corruption_not_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("hole", None);
    complete_turn(&s, false);
    complete_turn(&s, false);
    let good = jsonl(&s);
    let mut lines: Vec<Vec<u8>> = good.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    let n = lines[line_of(1) - 1].len();
    lines[line_of(1) - 1] = vec![0; n];
    let bytes = lines.join(&b'\n');
    write_file(dir.path(), &s, &bytes);
    let err = load(&store, "hole").await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::Corrupt { line, .. } if line == line_of(1)),
        "{err}"
    );
}

#[tokio::test]
async fn a_bad_header_is_corrupt_and_a_newer_format_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("hdr", None);
    complete_turn(&s, false);
    let good = jsonl(&s);
    let body = &good[good.iter().position(|b| *b == b'\n').unwrap()..];

    let mut bytes = b"{\"type\":\"session\",\"id\":".to_vec();
    bytes.extend_from_slice(body);
    write_file(dir.path(), &s, &bytes);
    let err = load(&store, "hdr").await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::Corrupt { line: 1, .. }),
        "{err}"
    );

    let mut bytes =
        br#"{"type":"session","version":1,"id":"hdr","createdAt":1,"delegationDepth":0}"#.to_vec();
    bytes.extend_from_slice(body);
    write_file(dir.path(), &s, &bytes);
    let err = load(&store, "hdr").await.unwrap_err();
    assert!(matches!(err, PersistenceError::Unsupported { .. }), "{err}");
}

#[tokio::test]
async fn unknown_event_types_load_only_when_ignorable() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("types", None);
    complete_turn(&s, false);
    s.append_draft(EventDraft::new(EventKind::other("acme/x", serde_json::json!({}))).ignorable())
        .unwrap();
    write_file(dir.path(), &s, &jsonl(&s));
    assert_eq!(
        load(&store, "types").await.unwrap().events.len(),
        s.len() as usize
    );

    let s = scratch("strict", None);
    complete_turn(&s, false);
    s.append(EventKind::other("acme/x", serde_json::json!({})))
        .unwrap();
    complete_turn(&s, false);
    let bytes = jsonl(&s);
    let path = write_file(dir.path(), &s, &bytes);
    let err = load(&store, "strict").await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::Unsupported { ref reason, .. } if reason.contains("acme/x")),
        "{err}"
    );
    assert!(err.to_string().contains(&path.display().to_string()));
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn an_unstarted_call_is_closed_as_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let s = scratch("ns", None);
    open_turn(&s, 1, true);
    // Drop the tool/call line: the model asked for the call but it never started.
    let good = jsonl(&s);
    let mut lines: Vec<&[u8]> = good.split(|b| *b == b'\n').collect();
    lines.remove(lines.len() - 2);
    write_file(dir.path(), &s, &lines.join(&b'\n'));
    let stored = load(&store, "ns").await.unwrap();
    let EventKind::ToolResult(r) = &stored.events[s.len() as usize - 1].kind else {
        panic!("expected a synthetic result");
    };
    assert_eq!(r.error.as_ref().unwrap().code, TOOL_NOT_STARTED);
    check_balanced(&arcs(&stored.events)).unwrap();
}

#[tokio::test]
async fn resume_after_repair_continues_seq_numbering() {
    let h = Harness::new(JsonlOptions::default()).await;
    let s = crashed("resume");
    let mut bytes = jsonl(&s);
    bytes.extend_from_slice(b"{\"type\":\"tool/re");
    let path = write_file(&h.root, &s, &bytes);

    let (live, detach) = h.resume("resume").await;
    let repaired_len = s.len() + 3;
    assert_eq!(live.first_live_seq(), repaired_len);
    assert!(matches!(
        live.event(repaired_len).unwrap().kind,
        EventKind::SessionEndSeed
    ));
    complete_turn(&live, true);
    h.sessions.flush(&live).await.unwrap();
    assert!(matches!(
        h.store.load(live.id()).await,
        Err(PersistenceError::Live { .. })
    ));
    detach.detach();

    let stored = h.store.load(live.id()).await.unwrap();
    assert_eq!(seqs(&stored.events), (0..live.len()).collect::<Vec<_>>());
    let expected: Vec<SessionEvent> = live.events().iter().map(|e| (**e).clone()).collect();
    assert_eq!(stored.events, expected, "nothing loaded was appended twice");
    check_balanced(&arcs(&stored.events)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&live));
    assert_eq!(live.last_turn(), 3, "turn numbers continue");
}

#[tokio::test]
async fn resuming_an_untouched_session_does_not_grow_the_log_twice() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (s, detach) = h.live("again", None);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    detach.detach();
    let path = h.path(&s);
    for _ in 0..3 {
        let (live, detach) = h.resume("again").await;
        h.sessions.flush(&live).await.unwrap();
        detach.detach();
    }
    let stored = h.store.load(&SessionId::new("again")).await.unwrap();
    let kinds: Vec<_> = stored.events.iter().map(SessionEvent::type_name).collect();
    assert_eq!(kinds.last(), Some(&"session/end-seed"));
    assert_eq!(
        kinds.iter().filter(|k| **k == "session/end-seed").count(),
        1,
        "re-opening an untouched session adds one marker at most"
    );
    assert_eq!(
        std::fs::read(&path).unwrap().split(|b| *b == b'\n').count(),
        s.len() as usize + 3
    );
}

#[tokio::test]
async fn a_session_resumed_through_another_store_instance_continues_its_file() {
    let h = Harness::new(JsonlOptions::default()).await;
    let s = crashed("elsewhere");
    let path = write_file(&h.root, &s, &jsonl(&s));
    // The resume goes through a second store over the same root (e.g. one the CLI built).
    let other = JsonlStore::new(&h.root);
    let stored = other.load(s.id()).await.unwrap();
    let live = h
        .sessions
        .prepare_loaded(stored.header, stored.events)
        .unwrap();
    let (live, _detach) = h.publish(live);
    complete_turn(&live, false);
    h.sessions.flush(&live).await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&live));
}

#[tokio::test]
async fn a_seeded_session_never_adopts_a_file_that_is_not_its_seed() {
    let h = Harness::new(JsonlOptions::default()).await;
    let stored = crashed("imposter");
    let path = write_file(&h.root, &stored, &jsonl(&stored));
    let before = std::fs::read(&path).unwrap();
    // Same id, different history: its seed is not what the file holds.
    let seed = scratch("imposter", Some("/w"));
    complete_turn(&seed, false);
    let seed: Vec<SessionEvent> = seed.events().iter().map(|e| (**e).clone()).collect();
    let live = h
        .sessions
        .prepare_loaded(stored.header().clone(), seed)
        .unwrap();
    let (live, _detach) = h.publish(live);
    complete_turn(&live, false);
    let err = h.store.flush_session(&live).await.unwrap_err();
    assert!(
        matches!(err, PersistenceError::AlreadyExists { .. }),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[tokio::test]
async fn an_in_memory_fork_is_published_with_its_seed_on_flush() {
    let h = Harness::new(JsonlOptions::default()).await;
    let (source, _d) = h.live("origin", Some("/f"));
    complete_turn(&source, true);
    h.sessions.flush(&source).await.unwrap();
    let child = h
        .sessions
        .fork(&source, None, Some(SessionId::new("offspring")))
        .unwrap();
    let (child, _dc) = h.publish(child);
    h.sessions.flush(&child).await.unwrap();
    let path = h.path(&child);
    assert_eq!(std::fs::read(&path).unwrap(), jsonl(&child));
    let header: SessionHeader = serde_json::from_slice(
        std::fs::read(&path)
            .unwrap()
            .split(|b| *b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header.parent_session.as_ref().unwrap(), source.id());
}
