//! `kill -9` at pseudo-random moments: every flushed event survives, every session loads
//! balanced after repair.
//!
//! The child is this test binary re-executed: the `#[ignore]`d helper [`crash_child`] runs the
//! workload when [`CHILD_ENV`] is set; it is never a test of its own.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;
#[path = "crash/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use dsh_kernel::Context;
use dsh_session::*;
use dsh_store_jsonl::{JsonlOptions, JsonlPersistencePlugin, JsonlStore};
use harness::{
    FlushReport, KillPlan, SeededRng, child_command, report_durable_writes, run_and_kill,
    verify_survivors,
};

const CHILD_ENV: &str = "DSH_STORE_JSONL_CRASH_CHILD";
const CHILD_TEST: &str = "crash_child";
const SESSIONS: usize = 3;
const ROUNDS: u64 = 16;

/// The child process's workload, run only by the crash test through [`child_command`].
#[test]
#[ignore = "helper process: the crash test runs it with its environment"]
fn crash_child() {
    let arg = std::env::var_os(CHILD_ENV)
        .unwrap_or_else(|| panic!("a helper process: run by the crash test with {CHILD_ENV}"));
    let arg = arg.to_string_lossy().into_owned();
    let (root, seed) = arg.split_once('|').unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(child(PathBuf::from(root), seed.parse().unwrap()));
}

/// Resumes every stored session, tops up to [`SESSIONS`], and drives them all concurrently
/// until killed, reporting each successful flush.
async fn child(root: PathBuf, seed: u64) {
    let ctx = Context::new();
    let store = JsonlStore::with_options(
        &root,
        JsonlOptions {
            batch_window: Duration::from_millis(2),
            // Background batches are acknowledged writes too: report them all.
            on_durable: Some(report_durable_writes()),
            ..JsonlOptions::default()
        },
    );
    let _plugin = ctx
        .plugin(JsonlPersistencePlugin::new(store.clone()))
        .await
        .unwrap();
    let sessions = SessionStore::new(&ctx);
    let mut live = Vec::new();
    for header in store.list().await.unwrap() {
        let stored = store.load(&header.id).await.unwrap();
        live.push(
            sessions
                .prepare_loaded(stored.header, stored.events)
                .unwrap(),
        );
    }
    let mut n = 0;
    while live.len() < SESSIONS {
        n += 1;
        let meta = SessionMeta {
            cwd: Some(root.join(format!("project-{}", n % 2))),
            ..SessionMeta::default()
        };
        let id = SessionId::new(format!("crash-{seed}-{n}"));
        live.push(sessions.prepare(Some(id), meta, None).unwrap());
    }
    let mut tasks = Vec::new();
    for (i, s) in live.into_iter().enumerate() {
        let detach = sessions.enter(&s, None).unwrap();
        sessions.announce(&s).unwrap();
        let sessions = sessions.clone();
        let rng = SeededRng::new(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
        tasks.push(tokio::spawn(async move {
            drive(&sessions, &s, rng).await;
            drop(detach);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

async fn checkpoint(sessions: &SessionStore, s: &Arc<Session>) {
    let last = s.event(s.len() - 1).unwrap();
    sessions.flush(s).await.unwrap();
    FlushReport::of(s.id(), &last).emit();
}

/// Turns with tool calls, flushing where the agent loop does: before each tool body, and when
/// the turn ends. Yields at random so background windows interleave with appends.
async fn drive(sessions: &SessionStore, s: &Arc<Session>, mut rng: SeededRng) {
    for _ in 0..10_000 {
        let turn = s.last_turn() + 1;
        open_turn(s, turn, true);
        checkpoint(sessions, s).await;
        for _ in 0..rng.below(3) {
            tokio::task::yield_now().await;
        }
        complete_open_turn(s, turn);
        if rng.below(2) == 0 {
            checkpoint(sessions, s).await;
        }
        for _ in 0..rng.below(4) {
            tokio::task::yield_now().await;
        }
    }
}

/// Finishes the turn [`open_turn`] left running: the result, the second step, the end.
fn complete_open_turn(s: &Session, turn: u64) {
    let call = CallId::new(format!("{}-call-{turn}", s.id()));
    let call_seq = s.len() - 1;
    s.append_draft(
        EventDraft::new(EventKind::ToolResult(ToolResult {
            turn,
            step: 1,
            message: Arc::new(Message::tool_result(
                call,
                vec![ContentBlock::text("x".repeat(300))],
                false,
            )),
            error: None,
            meta: None,
        }))
        .with_sources(vec![call_seq]),
    )
    .unwrap();
    s.append(EventKind::StepEnd(StepBoundary { turn, step: 1 }))
        .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn, step: 2 }))
        .unwrap();
    s.append(EventKind::AssistantMessage(AssistantMessage {
        turn,
        step: 2,
        message: Arc::new(Message::assistant(
            vec![ContentBlock::text("done")],
            "p",
            "m",
        )),
        usage: None,
        interrupted: false,
    }))
    .unwrap();
    s.append(EventKind::StepEnd(StepBoundary { turn, step: 2 }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
}

fn spawn_and_kill(root: &Path, seed: u64, plan: &KillPlan) -> Vec<FlushReport> {
    let cmd = child_command(CHILD_TEST, CHILD_ENV, &format!("{}|{seed}", root.display())).unwrap();
    let run = run_and_kill(cmd, plan).unwrap();
    assert!(
        !run.reports.is_empty(),
        "the child reported nothing; stderr:\n{}",
        run.stderr
    );
    run.reports
}

#[test]
fn flushed_events_survive_sigkill_at_random_moments() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    // Set DSH_CRASH_SEED to reproduce a reported failure.
    let seed = std::env::var("DSH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0d5b_u64);
    let mut rng = SeededRng::new(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut reports = Vec::new();
    let mut repairs = 0;
    for round in 0..ROUNDS {
        let plan = KillPlan {
            after_reports: 1 + rng.below(80) as usize,
            extra_delay: Duration::from_micros(rng.below(4000)),
            deadline: Duration::from_secs(120),
        };
        reports.extend(spawn_and_kill(&root, seed.wrapping_add(round), &plan));
        // Every report ever made must hold, across repairs and resumes.
        let store = JsonlStore::new(&root);
        for header in runtime.block_on(store.list()).unwrap() {
            let summary = runtime.block_on(store.summary(&header.id)).unwrap();
            repairs += usize::from(summary.needs_repair);
        }
        runtime
            .block_on(verify_survivors(&*store, &reports))
            .unwrap_or_else(|e| panic!("seed {seed}, round {round}, {plan:?}: {e}"));
    }
    assert!(reports.len() as u64 >= ROUNDS);
    // The kills really landed inside turns: some sessions needed their turn closed on load.
    assert!(
        repairs > 0,
        "no kill interrupted a turn; the test exercised nothing"
    );
    println!(
        "{ROUNDS} kills, {} flush reports verified, {repairs} interrupted sessions repaired",
        reports.len()
    );
}
