//! The store under faults of the real server: restarted mid-session, down during a flush, a
//! writer cut off long enough for another to take its session over (a partition: its lease
//! died with its connection), and a full disk. In every case no acknowledged event is lost or
//! duplicated, and a flush that cannot commit says so instead of succeeding.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::cluster::{self, Cluster};
use common::{Storage, bounded, jsonl};
use dsh_session::{Session, SessionId};

/// Storage on a database of `c`.
async fn storage_on(c: &Cluster) -> Storage {
    let (db, config) = cluster::fresh_db_on(c).await;
    Storage::Postgres {
        db,
        config: Box::new(config),
    }
}

/// What a new process loading `s` finds, as serialized lines.
async fn stored_lines(storage: &Storage, id: &SessionId) -> Vec<String> {
    let m = storage.mount().await;
    let stored = bounded(m.store().load(id)).await.unwrap();
    common::lines(&stored.events)
}

async fn flush_error(m: &common::Mounted, s: &Arc<Session>) -> String {
    jsonl::chain(&bounded(m.sessions.flush(s)).await.unwrap_err())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_mid_session_loses_and_duplicates_nothing() {
    let own = tokio::task::spawn_blocking(cluster::start).await.unwrap();
    let storage = storage_on(&own).await;
    let a = storage.mount().await;
    let (s, detach) = a.live("restarted", Some("/work/p"));
    jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    // Events admitted but not yet flushed when the server goes away.
    jsonl::open_turn(&s, 2, true);
    // pg_ctl blocks until the server is back; off the runtime's workers.
    tokio::task::block_in_place(|| own.restart());
    jsonl::finish_turn(&s, 2, true);
    a.flush(&s).await;
    detach.detach();
    bounded(a.close()).await.unwrap();
    assert_eq!(
        stored_lines(&storage, s.id()).await,
        common::arc_lines(&s.events())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_while_the_server_is_down_fails_closed_and_commits_once_it_is_back() {
    let own = tokio::task::spawn_blocking(cluster::start).await.unwrap();
    let storage = storage_on(&own).await;
    let a = storage.mount().await;
    let (s, detach) = a.live("down", Some("/work/p"));
    jsonl::complete_turn(&s, false);
    a.flush(&s).await;
    tokio::task::block_in_place(|| own.stop());
    jsonl::complete_turn(&s, true);
    let err = flush_error(&a, &s).await;
    assert!(err.contains("connecting to the session database"), "{err}");
    tokio::task::block_in_place(|| own.restart());
    // The failed flush committed nothing, so the retry commits every event exactly once.
    a.flush(&s).await;
    detach.detach();
    bounded(a.close()).await.unwrap();
    assert_eq!(
        stored_lines(&storage, s.id()).await,
        common::arc_lines(&s.events())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_cut_off_past_its_lease_never_overwrites_the_writer_that_took_over() {
    let storage = Storage::postgres().await;
    let Storage::Postgres { db, .. } = &storage else {
        unreachable!()
    };
    let a = storage.mount().await;
    let (s, _detach_a) = a.live("split", Some("/work/p"));
    jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    // The partition: the server drops the writer's connection (as TCP keepalive does when a
    // machine vanishes), and the lease with it.
    let cut = cluster::cut_connections(db).await;
    assert!(cut >= 1, "the writer had no connection to cut");
    // Another machine resumes the session meanwhile and writes a turn.
    let b = storage.mount().await;
    let (sb, detach_b) = b.resume("split").await;
    jsonl::complete_turn(&sb, true);
    b.flush(&sb).await;
    // The cut-off writer comes back with a turn of the same length: while the other writer
    // holds the lease it is refused...
    jsonl::complete_turn(&s, true);
    while s.len() < sb.len() {
        s.append(jsonl::title(s.len())).unwrap();
    }
    assert_eq!(s.len(), sb.len());
    let err = flush_error(&a, &s).await;
    assert!(err.contains("in use by another writer"), "{err}");
    // ...and once that writer is gone, the log it finds is not its own: refused again, and
    // nothing is overwritten or taken for its own events.
    detach_b.detach();
    bounded(b.close()).await.unwrap();
    let err = flush_error(&a, &s).await;
    assert!(err.contains("another writer appended"), "{err}");
    assert_eq!(
        stored_lines(&storage, s.id()).await,
        common::arc_lines(&sb.events())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_fails_the_flush_clearly_and_commits_no_part_of_the_batch() {
    let storage = Storage::postgres().await;
    let Storage::Postgres { db, .. } = &storage else {
        unreachable!()
    };
    let a = storage.mount().await;
    let (s, detach) = a.live("full", Some("/work/p"));
    jsonl::complete_turn(&s, false);
    a.flush(&s).await;
    let committed = s.len();
    // What PostgreSQL says when the disk is full (SQLSTATE 53100), on every insert of events.
    let admin = cluster::admin_connect(&cluster::cluster().url(db))
        .await
        .unwrap();
    admin
        .batch_execute(
            "CREATE FUNCTION dsh_test_full() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               RAISE EXCEPTION 'could not extend file: No space left on device'
                 USING ERRCODE = 'disk_full';
             END $$;
             CREATE TRIGGER dsh_test_full BEFORE INSERT ON dsh_events
               FOR EACH STATEMENT EXECUTE FUNCTION dsh_test_full();",
        )
        .await
        .unwrap();
    jsonl::complete_turn(&s, true);
    let err = flush_error(&a, &s).await;
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("writing events of session"), "{err}");
    // No part of the turn was committed: neither the events nor the session row's count.
    let row = admin
        .query_one(
            "SELECT event_count, (SELECT count(*) FROM dsh_events WHERE session_id = 'full')
             FROM dsh_sessions WHERE id = 'full'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0) as u64, committed);
    assert_eq!(row.get::<_, i64>(1) as u64, committed);
    // Space freed: the same writer commits the whole turn, once.
    admin
        .batch_execute("DROP TRIGGER dsh_test_full ON dsh_events")
        .await
        .unwrap();
    a.flush(&s).await;
    detach.detach();
    bounded(a.close()).await.unwrap();
    assert_eq!(
        stored_lines(&storage, s.id()).await,
        common::arc_lines(&s.events())
    );
}
