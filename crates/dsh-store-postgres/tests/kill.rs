//! `kill -9` of a writer at pseudo-random moments, pointed at PostgreSQL with the JSONL store's
//! harness: every event a flush acknowledged survives, and every session loads balanced after
//! repair (which closes the turn the kill interrupted).
//!
//! The child is this test binary re-executed: the `#[ignore]`d helper [`crash_child`] runs the
//! workload when [`CHILD_ENV`] is set; it is never a test of its own.

#![allow(clippy::unwrap_used)]

mod common;
// Shared with the JSONL store's crash test; this file uses part of it.
#[allow(dead_code)]
#[path = "../../dsh-store-jsonl/tests/crash/harness.rs"]
mod harness;

use std::sync::Arc;
use std::time::Duration;

use common::jsonl::{finish_turn, open_turn};
use dsh_kernel::Context;
use dsh_session::*;
use dsh_store_postgres::{PostgresConfig, PostgresPersistencePlugin, PostgresStore};
use harness::{FlushReport, KillPlan, SeededRng, child_command, run_and_kill, verify_survivors};

const CHILD_ENV: &str = "DSH_STORE_POSTGRES_KILL_CHILD";
const CHILD_TEST: &str = "crash_child";
const ROUNDS: u64 = 4;

/// The child process's workload, run only by the kill test through [`child_command`].
#[test]
#[ignore = "helper process: the kill test runs it with its environment"]
fn crash_child() {
    let arg = std::env::var_os(CHILD_ENV)
        .unwrap_or_else(|| panic!("a helper process: run by the kill test with {CHILD_ENV}"));
    let arg = arg.to_string_lossy().into_owned();
    let (url, seed) = arg.split_once('|').unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(child(url, seed.parse().unwrap()));
}

/// Resumes every stored session (or starts one) and drives them until killed, reporting each
/// acknowledged flush.
async fn child(url: &str, seed: u64) {
    let ctx = Context::new();
    let store = PostgresStore::with_window(
        PostgresConfig::from_url(url).unwrap(),
        Duration::from_millis(2),
    );
    let _plugin = ctx
        .plugin(PostgresPersistencePlugin::new(store.clone()))
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
    while live.len() < 2 {
        let id = SessionId::new(format!("killed-{seed}-{}", live.len()));
        live.push(
            sessions
                .prepare(Some(id), SessionMeta::default(), None)
                .unwrap(),
        );
    }
    let mut tasks = Vec::new();
    for (i, s) in live.into_iter().enumerate() {
        let detach = sessions.enter(&s, None).unwrap();
        sessions.announce(&s).unwrap();
        let sessions = sessions.clone();
        let mut rng = SeededRng::new(seed ^ (i as u64 + 1));
        tasks.push(tokio::spawn(async move {
            for _ in 0..10_000 {
                let turn = s.last_turn() + 1;
                open_turn(&s, turn, true);
                checkpoint(&sessions, &s).await;
                finish_turn(&s, turn, true);
                if rng.below(2) == 0 {
                    checkpoint(&sessions, &s).await;
                }
            }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_loses_nothing_it_flushed() {
    let (db, config) = common::cluster::fresh_db().await;
    let url = common::cluster::cluster().url(&db);
    let seed = std::env::var("DSH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e_5eed_u64);
    let mut rng = SeededRng::new(seed);
    let mut reports = Vec::new();
    let mut repairs = 0;
    for round in 0..ROUNDS {
        let plan = KillPlan {
            after_reports: 1 + rng.below(40) as usize,
            extra_delay: Duration::from_micros(rng.below(4000)),
            deadline: Duration::from_secs(120),
        };
        let cmd = child_command(
            CHILD_TEST,
            CHILD_ENV,
            &format!("{url}|{}", seed.wrapping_add(round)),
        )
        .unwrap();
        let run = tokio::task::spawn_blocking(move || run_and_kill(cmd, &plan))
            .await
            .unwrap()
            .unwrap();
        assert!(
            !run.reports.is_empty(),
            "no reports; stderr:\n{}",
            run.stderr
        );
        reports.extend(run.reports);
        let store = PostgresStore::new(config.clone());
        for header in common::bounded(store.list()).await.unwrap() {
            let summary = common::bounded(store.summary(&header.id)).await.unwrap();
            repairs += usize::from(summary.needs_repair);
        }
        common::bounded(verify_survivors(&*store, &reports))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}, round {round}, {plan:?}: {e}"));
    }
    println!(
        "{ROUNDS} kills, {} flush reports verified, {repairs} interrupted sessions repaired",
        reports.len()
    );
}
