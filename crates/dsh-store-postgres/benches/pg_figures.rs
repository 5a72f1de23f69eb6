//! Figures for both session stores under one workload, so they can be set side by side: the
//! PostgreSQL store against a throwaway local cluster (started like the tests') and the JSONL
//! store in a temp directory, each driven through its real persistence plugin.
//!
//! - append: complete tool turns, a flush (the turn-end checkpoint) after each; events/s over
//!   the whole run and the flush latency's p50/p99 (commit, resp. write + fdatasync);
//! - load: the long session (100,000 events) by another store, as another process would;
//! - list: 10,000 sessions of one short turn each;
//! - follow (PostgreSQL): from the start of a flush to a follower on its own connection
//!   holding the batch.
//!
//! Run with `cargo bench -p dsh-store-postgres --bench pg_figures`; `DSH_PG_BENCH_SCALE=10`
//! divides both sizes, `DSH_PG_BENCH_STORE=postgres|jsonl` runs one store only.

#![allow(clippy::unwrap_used)] // A benchmark binary: a panic is the failure report.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Backend, Storage, jsonl};
use dsh_session::*;

/// The `p`-quantile (0..=1) of `samples`.
fn quantile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let at = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[at]
}

async fn append_and_flush(storage: &Storage, target: usize) -> SessionId {
    let m = storage.mount().await;
    let (s, detach) = m.live("long", Some("/work/long"));
    let mut flushes = Vec::new();
    let started = Instant::now();
    while (s.len() as usize) < target {
        jsonl::complete_turn(&s, true);
        let t = Instant::now();
        m.sessions.flush(&s).await.unwrap();
        flushes.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    println!(
        "{:<8} append: {} events, {} turns, one flush per turn: {:.0} events/s; flush latency \
         p50 {:?}, p99 {:?}",
        storage.name(),
        s.len(),
        flushes.len(),
        s.len() as f64 / elapsed.as_secs_f64(),
        quantile(&mut flushes, 0.5),
        quantile(&mut flushes, 0.99),
    );
    detach.detach();
    m.close().await.unwrap();
    s.id().clone()
}

async fn follow(storage: &Storage) {
    let m = storage.mount().await;
    let (f, _detach) = m.live("followed", None);
    jsonl::complete_turn(&f, false);
    m.flush(&f).await;
    let other = storage.mount().await;
    let Backend::Postgres(follower) = &other.backend else {
        return;
    };
    let mut rx = follower.follow(f.id(), 0).await.unwrap();
    let mut got = 0;
    while got < f.len() {
        rx.recv().await.unwrap().unwrap();
        got += 1;
    }
    let mut lags = Vec::new();
    for _ in 0..100 {
        jsonl::complete_turn(&f, true);
        let t = Instant::now();
        m.sessions.flush(&f).await.unwrap();
        while got < f.len() {
            rx.recv().await.unwrap().unwrap();
            got += 1;
        }
        lags.push(t.elapsed());
    }
    println!(
        "{:<8} follow: flush start to follower holding the turn, p50 {:?}, p99 {:?} (100 turns)",
        storage.name(),
        quantile(&mut lags, 0.5),
        quantile(&mut lags, 0.99),
    );
    m.close().await.unwrap();
}

async fn load(storage: &Storage, id: &SessionId) {
    let other = storage.mount().await;
    let t = Instant::now();
    let loaded = other.store().load(id).await.unwrap();
    println!(
        "{:<8} load: {} events in {:?}",
        storage.name(),
        loaded.events.len(),
        t.elapsed()
    );
}

async fn list(storage: &Storage, n: usize) {
    let w = storage.mount().await;
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        let mut live = Vec::new();
        for i in chunk {
            let (s, d) = w.live(&format!("s{i}"), Some(&format!("/work/p{}", i % 10)));
            jsonl::complete_turn(&s, false);
            live.push((s, d));
        }
        // A PostgreSQL writer holds a connection while live: dispose each chunk first.
        for (s, d) in live {
            w.sessions.flush(&s).await.unwrap();
            d.detach();
        }
    }
    w.close().await.unwrap();
    let other = storage.mount().await;
    let t = Instant::now();
    let listed = other.store().listings().await.unwrap();
    println!(
        "{:<8} list: {} sessions in {:?}",
        storage.name(),
        listed.len(),
        t.elapsed()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let scale: usize = std::env::var("DSH_PG_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let only = std::env::var("DSH_PG_BENCH_STORE").ok();
    for kind in ["postgres", "jsonl"] {
        if only.as_deref().is_some_and(|o| o != kind) {
            continue;
        }
        let storage = match kind {
            "postgres" => Storage::postgres().await,
            _ => Storage::jsonl().await,
        };
        let id = append_and_flush(&storage, 100_000 / scale).await;
        load(&storage, &id).await;
        list(&storage, 10_000 / scale).await;
        follow(&storage).await;
        // Keeps the shared machine's disk from holding both stores' data at once.
        drop(storage);
    }
}
