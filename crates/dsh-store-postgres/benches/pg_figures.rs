//! Figures for the PostgreSQL store against a throwaway local cluster (started like the tests'):
//! append throughput and flush (commit) latency, listing many sessions, loading a long session.
//! Run with `cargo bench -p dsh-store-postgres`; sizes default to the (10,000 sessions,
//! 100,000 events) and shrink with `DSH_PG_BENCH_SCALE=10` (divides both).

#![allow(clippy::unwrap_used)] // A benchmark binary: a panic is the failure report.

#[path = "../tests/common/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "../../dsh-store-jsonl/tests/common/mod.rs"]
mod jsonl;

use std::time::{Duration, Instant};

use dsh_kernel::Context;
use dsh_session::*;
use dsh_store_postgres::{PostgresPersistencePlugin, PostgresStore};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let scale: usize = std::env::var("DSH_PG_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let (_, config) = cluster::fresh_db().await;
    let ctx = Context::new();
    let store = PostgresStore::new(config.clone());
    let _plugin = ctx
        .plugin(PostgresPersistencePlugin::new(store.clone()))
        .await
        .unwrap();
    let sessions = SessionStore::new(&ctx);

    // Append throughput and flush latency: complete tool turns (10 events), a flush after each.
    let s = sessions
        .prepare(Some(SessionId::new("long")), SessionMeta::default(), None)
        .unwrap();
    let _detach = sessions.enter(&s, None).unwrap();
    sessions.announce(&s).unwrap();
    let target = 100_000 / scale;
    let mut flushes = Vec::new();
    let started = Instant::now();
    while (s.len() as usize) < target {
        for _ in 0..10 {
            jsonl::complete_turn(&s, true);
        }
        let t = Instant::now();
        sessions.flush(&s).await.unwrap();
        flushes.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    println!(
        "append: {} events in {} flushed batches, {:.0} events/s; flush (commit) latency median {:?}, max {:?}",
        s.len(),
        flushes.len(),
        s.len() as f64 / elapsed.as_secs_f64(),
        median(flushes.clone()),
        flushes.iter().max().unwrap()
    );

    // Follow latency: from the start of a flush in this "process" to the follower (its own
    // store, as on another machine) holding the batch.
    let f = sessions
        .prepare(
            Some(SessionId::new("followed")),
            SessionMeta::default(),
            None,
        )
        .unwrap();
    let _fd = sessions.enter(&f, None).unwrap();
    sessions.announce(&f).unwrap();
    jsonl::complete_turn(&f, false);
    sessions.flush(&f).await.unwrap();
    let follower = PostgresStore::new(config.clone());
    let mut rx = follower.follow(f.id(), 0).await.unwrap();
    let mut got = 0;
    while got < f.len() {
        rx.recv().await.unwrap().unwrap();
        got += 1;
    }
    let mut lags = Vec::new();
    for _ in 0..50 {
        jsonl::complete_turn(&f, true);
        let t = Instant::now();
        sessions.flush(&f).await.unwrap();
        while got < f.len() {
            rx.recv().await.unwrap().unwrap();
            got += 1;
        }
        lags.push(t.elapsed());
    }
    println!(
        "follow: flush start to follower holding the batch, median {:?}, max {:?} (50 batches)",
        median(lags.clone()),
        lags.iter().max().unwrap()
    );
    store.close().await.unwrap();

    // Loading the long session (a second store, as another machine would).
    let other = PostgresStore::new(config.clone());
    let t = Instant::now();
    let loaded = other.load(s.id()).await.unwrap();
    println!("load: {} events in {:?}", loaded.events.len(), t.elapsed());

    // Listing many sessions: each stored with one short turn.
    let n = 10_000 / scale;
    let writer_ctx = Context::new();
    let writer = PostgresStore::with_window(config.clone(), Duration::from_millis(5));
    let _p = writer_ctx
        .plugin(PostgresPersistencePlugin::new(writer.clone()))
        .await
        .unwrap();
    let many = SessionStore::new(&writer_ctx);
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        let mut live = Vec::new();
        for i in chunk {
            let s = many
                .prepare(
                    Some(SessionId::new(format!("s{i}"))),
                    SessionMeta {
                        cwd: Some(format!("/work/p{}", i % 10).into()),
                        ..SessionMeta::default()
                    },
                    None,
                )
                .unwrap();
            let d = many.enter(&s, None).unwrap();
            many.announce(&s).unwrap();
            jsonl::complete_turn(&s, false);
            live.push((s, d));
        }
        // One connection per live session: dispose each chunk before the next.
        for (s, d) in live {
            many.flush(&s).await.unwrap();
            d.detach();
        }
    }
    writer.close().await.unwrap();
    let t = Instant::now();
    let listed = other.listings().await.unwrap();
    println!("list: {} sessions in {:?}", listed.len(), t.elapsed());
}
