//! Compaction end to end over the real loop: long loops under small windows, overflow repair,
//! resume after compaction, crash repair, the cache-friendly summary request, cancellation.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use dsh_agent_loop::rebuild_requests;
use dsh_compaction::events::{END, START, SUMMARY, is_checkpoint};
use dsh_llm::Purpose;
use dsh_session::*;
use dsh_testkit::{Gate, Script};
use tokio_util::sync::CancellationToken;

const LIMIT: Duration = Duration::from_secs(120);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("bounded wait")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_60_step_loop_of_6kb_results_completes_under_a_small_window_with_no_request_over_it() {
    let home = tempfile::tempdir().unwrap();
    let window = 16_000;
    let h = harness(window, home.path()).await;
    loop_model(&h, window, 60);
    let handle = h.agent("long").await;
    let a = handle.agent();
    a.followup(Message::user_text("dump 60 times")).unwrap();
    bounded(a.when_idle()).await;

    let session = a.session();
    assert_eq!(turn_ends(session), vec![TurnEndReason::Completed]);
    assert!(
        h.over_window.lock().is_empty(),
        "{:?}",
        h.over_window.lock()
    );
    assert!(
        h.adapter.violations().is_empty(),
        "{:?}",
        h.adapter.violations()
    );
    let summaries = count(session, SUMMARY);
    assert!(summaries >= 5, "compacted {summaries} times");
    assert_eq!(count(session, START), count(session, END));
    check_balanced(&session.events()).unwrap();
    // Every conversation request is still the log's own (checkpoints included).
    let sent: Vec<_> = h
        .adapter
        .requests()
        .into_iter()
        .filter(|r| r.purpose == Purpose::Conversation)
        .collect();
    let rebuilt = rebuild_requests(&session.events());
    assert_eq!(rebuilt.len(), sent.len());
    for (s, r) in sent.iter().zip(&rebuilt) {
        assert_eq!(s.messages, r.messages);
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_request_replays_the_previous_request_prefix_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let window = 16_000;
    let h = harness(window, home.path()).await;
    loop_model(&h, window, 20);
    let handle = h.agent("prefix").await;
    let a = handle.agent();
    a.followup(Message::user_text("dump 20 times")).unwrap();
    bounded(a.when_idle()).await;

    let requests = h.adapter.requests();
    let mut checked = 0;
    for (i, r) in requests.iter().enumerate() {
        if r.purpose != Purpose::Compaction {
            continue;
        }
        let previous = &requests[i - 1];
        assert_eq!(previous.purpose, Purpose::Conversation);
        let n = r.messages.len() - 1;
        assert!(n <= previous.messages.len());
        let wire = |m: &[std::sync::Arc<Message>]| serde_json::to_string(m).unwrap();
        assert_eq!(wire(&r.messages[..n]), wire(&previous.messages[..n]));
        assert_eq!(r.system, previous.system);
        assert_eq!(
            serde_json::to_string(&r.tools).unwrap(),
            serde_json::to_string(&previous.tools).unwrap()
        );
        assert_eq!(r.config.model, previous.config.model);
        assert_eq!(r.config.reasoning_effort, previous.config.reasoning_effort);
        // The one new message is the instruction; the model is told it continues afterwards.
        assert!(r.messages[n].text().contains("checkpoint"));
        checked += 1;
    }
    assert!(checked >= 1);
    // The checkpoint tells the model it continues from a summary.
    let checkpoint = a
        .session()
        .derive_messages()
        .into_iter()
        .find(is_checkpoint)
        .unwrap();
    assert!(checkpoint.text().contains("<compacted-summary>"));
    assert!(checkpoint.text().contains("continue"));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_error_is_repaired_once_and_the_step_succeeds() {
    let home = tempfile::tempdir().unwrap();
    // The adapter claims a huge window, so only the provider's refusal triggers compaction.
    let h = harness(1_000_000, home.path()).await;
    h.adapter
        .push(Script::tool_call("c0", "dump", r#"{"n":0}"#))
        .push(Script::tool_call("c1", "dump", r#"{"n":1}"#))
        .push(Script::tool_call("c2", "dump", r#"{"n":2}"#))
        .push(Script::error_code(
            FailureCode::ContextWindowExceeded,
            "This model's maximum context length is 4096 tokens",
        ))
        .push(Script::text(SUMMARY_TEXT))
        .push(Script::text("done"));
    let handle = h.agent("overflow").await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    bounded(a.when_idle()).await;

    let session = a.session();
    assert_eq!(turn_ends(session), vec![TurnEndReason::Completed]);
    assert_eq!(count(session, SUMMARY), 1);
    let requests = h.adapter.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(requests[4].purpose, Purpose::Compaction);
    // The retried request starts from the checkpoint and keeps the newest unit verbatim.
    let retried = &requests[5];
    assert!(is_checkpoint(&retried.messages[0]));
    assert!(retried.messages.len() < requests[3].messages.len());
    check_balanced(&session.events()).unwrap();
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_overflow_in_the_same_step_keeps_the_provider_error() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(1_000_000, home.path()).await;
    let overflow = || {
        Script::error_code(
            FailureCode::ContextWindowExceeded,
            "This model's maximum context length is 4096 tokens",
        )
    };
    h.adapter
        .push(Script::tool_call("c0", "dump", r#"{"n":0}"#))
        .push(Script::tool_call("c1", "dump", r#"{"n":1}"#))
        .push(overflow())
        .push(Script::text(SUMMARY_TEXT))
        .push(overflow());
    let handle = h.agent("twice").await;
    let a = handle.agent();
    a.followup(Message::user_text("go")).unwrap();
    bounded(a.when_idle()).await;

    let ends = turn_ends(a.session());
    assert!(
        matches!(&ends[..], [TurnEndReason::Error { error }] if error.code == FailureCode::ContextWindowExceeded),
        "{ends:?}"
    );
    assert_eq!(count(a.session(), START), 1);
    assert_eq!(h.adapter.requests().len(), 5);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_nothing_can_reduce_keeps_the_provider_error_without_a_retry() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(1_000_000, home.path()).await;
    h.adapter.push(Script::error_code(
        FailureCode::ContextWindowExceeded,
        "This model's maximum context length is 10 tokens",
    ));
    let handle = h.agent("tiny").await;
    let a = handle.agent();
    a.followup(Message::user_text("a prompt too long for any model"))
        .unwrap();
    bounded(a.when_idle()).await;
    let ends = turn_ends(a.session());
    assert!(
        matches!(&ends[..], [TurnEndReason::Error { error }] if error.code == FailureCode::ContextWindowExceeded),
        "{ends:?}"
    );
    assert_eq!(h.adapter.requests().len(), 1);
    assert_eq!(a.session().replace_generation(), 0);
    h.shutdown().await;
}

/// Runs `dump` `steps` times in turn 1 under `window`, compacting on the way.
async fn first_turn(h: &H, id: &str, window: u64, steps: usize) -> AgentHandleAlias {
    loop_model(h, window, steps);
    let handle = h.agent(id).await;
    let a = handle.agent().clone();
    a.followup(Message::user_text("dump")).unwrap();
    bounded(a.when_idle()).await;
    handle
}

type AgentHandleAlias = dsh_agent::AgentHandle;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_after_compaction_sends_the_requests_the_original_would_have() {
    let window = 16_000;
    // The original process: both turns in one go.
    let home_a = tempfile::tempdir().unwrap();
    let a = harness(window, home_a.path()).await;
    let handle = first_turn(&a, "same", window, 12).await;
    let agent = handle.agent().clone();
    assert!(count(agent.session(), SUMMARY) >= 1);
    let before = a.adapter.requests().len();
    agent.followup(Message::user_text("again")).unwrap();
    bounded(agent.when_idle()).await;
    let original = a.adapter.requests()[before].clone();
    a.shutdown().await;

    // Another process: turn 1, exit, resume, turn 2.
    let home_b = tempfile::tempdir().unwrap();
    let b = harness(window, home_b.path()).await;
    drop(first_turn(&b, "same", window, 12).await);
    b.shutdown().await;
    let c = harness(window, home_b.path()).await;
    loop_model(&c, window, 0);
    let resumed = c.resume("same").await;
    let agent = resumed.agent().clone();
    agent.followup(Message::user_text("again")).unwrap();
    bounded(agent.when_idle()).await;
    let after_resume = c.adapter.requests()[0].clone();

    let wire = |m: &[std::sync::Arc<Message>]| {
        m.iter()
            .map(|m| serde_json::to_string(&(&m.role, &m.content)).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(wire(&after_resume.messages), wire(&original.messages));
    assert_eq!(after_resume.system, original.system);
    assert_eq!(after_resume.config, original.config);
    // And the resumed log rebuilds exactly what it sent.
    let rebuilt = rebuild_requests(&agent.session().events());
    assert_eq!(rebuilt.last().unwrap().messages, after_resume.messages);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_compaction_leaves_a_loadable_balanced_session() {
    let window = 16_000;
    let home = tempfile::tempdir().unwrap();
    let h = harness(window, home.path()).await;
    drop(first_turn(&h, "crash", window, 8).await);
    h.shutdown().await;
    let file = session_file(home.path(), "crash");
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    let summary = at(&format!("\"type\":\"{SUMMARY}\""));
    let checkpoint = at("\"op\":\"replace\"");
    // Crash points: after start+summary (no checkpoint), mid-way through the checkpoint line,
    // and after the checkpoint (no end).
    let cuts = [
        lines[..=summary].join("\n") + "\n",
        lines[..checkpoint].join("\n") + "\n" + &lines[checkpoint][..lines[checkpoint].len() / 2],
        lines[..=checkpoint].join("\n") + "\n",
    ];
    for (i, cut) in cuts.iter().enumerate() {
        std::fs::write(&file, cut).unwrap();
        let r = harness(window, home.path()).await;
        loop_model(&r, window, 0);
        let resumed = r.resume("crash").await;
        let agent = resumed.agent().clone();
        check_balanced(&agent.session().events()).unwrap();
        let checkpoints = agent
            .session()
            .derive_messages()
            .into_iter()
            .filter(is_checkpoint)
            .count();
        assert_eq!(checkpoints, usize::from(i == 2), "crash point {i}");
        agent.followup(Message::user_text("go on")).unwrap();
        bounded(agent.when_idle()).await;
        assert_eq!(
            turn_ends(agent.session()).last(),
            Some(&TurnEndReason::Completed),
            "crash point {i}"
        );
        drop(resumed);
        r.shutdown().await;
    }
}

fn session_file(home: &std::path::Path, id: &str) -> std::path::PathBuf {
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().unwrap().to_string_lossy().contains(id) {
                return path;
            }
        }
    }
    panic!("no session file for {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_now_replaces_the_oldest_history_and_a_cancelled_one_changes_nothing() {
    let window = 1_000_000;
    let home = tempfile::tempdir().unwrap();
    let h = harness(window, home.path()).await;
    let handle = first_turn(&h, "manual", window, 4).await;
    let agent = handle.agent().clone();
    let service = h.compaction();

    // Cancelled while the model is summarizing: the surface is untouched.
    let nodes = agent.session().surface_nodes();
    let gate = Gate::new();
    h.adapter.push(Script::text(SUMMARY_TEXT).wait_at(0, &gate));
    let cancel = CancellationToken::new();
    // Counted before the summary call can start, so its request cannot be missed.
    let before = h.adapter.requests().len();
    let run = {
        let (service, agent, cancel) = (service.clone(), agent.clone(), cancel.clone());
        tokio::spawn(async move { service.compact_now(&agent, None, &cancel).await })
    };
    bounded(h.adapter.wait_for_requests(before + 1)).await;
    cancel.cancel();
    let result = bounded(run).await.unwrap();
    assert!(
        matches!(result, Err(dsh_compaction::CompactionError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(agent.session().surface_nodes(), nodes);
    assert_eq!(agent.session().replace_generation(), 0);

    // Done for real: one checkpoint in front, the newest unit kept.
    let outcome = service
        .compact_now(&agent, Some("the dump numbers"), &CancellationToken::new())
        .await
        .unwrap();
    assert!(outcome.summarized && outcome.tokens_after < outcome.tokens_before);
    let messages = agent.session().derive_messages();
    assert!(is_checkpoint(&messages[0]));
    assert!(messages.len() < nodes.len());
    let last = h.adapter.requests().pop().unwrap();
    assert!(
        last.messages
            .last()
            .unwrap()
            .text()
            .contains("the dump numbers")
    );
    check_balanced(&agent.session().events()).unwrap();
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_old_oversized_results_relieves_pressure_without_a_model_call() {
    let home = tempfile::tempdir().unwrap();
    let window = 16_000;
    let config = dsh_compaction::CompactionConfig {
        prune_over_chars: 2_000,
        prune_head_chars: 500,
        prune_tail_chars: 200,
        ..dsh_compaction::CompactionConfig::default()
    };
    let h = harness_with(window, home.path(), config).await;
    loop_model(&h, window, 12);
    let handle = h.agent("prune").await;
    let a = handle.agent();
    a.followup(Message::user_text("dump 12 times")).unwrap();
    bounded(a.when_idle()).await;

    let session = a.session();
    assert_eq!(turn_ends(session), vec![TurnEndReason::Completed]);
    assert!(h.over_window.lock().is_empty());
    let ends: Vec<serde_json::Value> = session
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == END => Some(data.clone()),
            _ => None,
        })
        .collect();
    assert!(!ends.is_empty());
    assert!(
        ends.iter()
            .any(|d| d["pruned"].as_u64() > Some(0) && d["summarized"] == false),
        "{ends:?}"
    );
    // No summary call was needed: pruning alone kept the loop under the threshold.
    assert!(
        h.adapter
            .requests()
            .iter()
            .all(|r| r.purpose == Purpose::Conversation)
    );
    let pruned = session
        .derive_messages()
        .iter()
        .filter(|m| {
            m.content.iter().any(|b| {
                matches!(b, ContentBlock::ToolResult { content, .. }
            if content.iter().filter_map(ContentBlock::as_text).any(|t| t.contains("were pruned")))
            })
        })
        .count();
    assert!(pruned >= 1);
    check_balanced(&session.events()).unwrap();
    h.shutdown().await;
}
