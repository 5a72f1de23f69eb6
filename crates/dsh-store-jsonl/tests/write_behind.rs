//! Write-behind: the batching window, the flush barrier, failures, disposal and unmount.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use dsh_session::*;
use dsh_store_jsonl::{JsonlOptions, JsonlPersistencePlugin};
use tokio::time::Instant;

const FOREVER: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn the_batching_window_coalesces_events_into_one_write() {
    let ops = TestOps::new();
    let mut started = ops.watch();
    let h = Harness::with_ops(ops.clone(), Duration::from_millis(200)).await;
    let (s, _detach) = h.live("window", None);
    let t0 = Instant::now();
    for n in 0..20 {
        s.append(title(n)).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.recv().await.unwrap();
    assert_eq!(
        Instant::now() - t0,
        Duration::from_millis(200),
        "one fixed window from the first event; later events do not extend it"
    );
    h.store.flush_session(&s).await.unwrap();
    assert_eq!(ops.writes(), 1, "twenty events, one write");
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test(start_paused = true)]
async fn events_arriving_after_a_write_open_the_next_window() {
    let ops = TestOps::new();
    let mut started = ops.watch();
    let h = Harness::with_ops(ops.clone(), Duration::from_millis(200)).await;
    let (s, _detach) = h.live("next", None);
    s.append(title(0)).unwrap();
    started.recv().await.unwrap();
    h.store.flush_session(&s).await.unwrap();
    let t1 = Instant::now();
    s.append(title(1)).unwrap();
    s.append(title(2)).unwrap();
    started.recv().await.unwrap();
    assert_eq!(Instant::now() - t1, Duration::from_millis(200));
    h.store.flush_session(&s).await.unwrap();
    assert_eq!(ops.writes(), 2);
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test(start_paused = true)]
async fn a_flush_does_not_wait_for_the_window() {
    let ops = TestOps::new();
    let h = Harness::with_ops(ops.clone(), FOREVER).await;
    let (s, _detach) = h.live("now", None);
    complete_turn(&s, true);
    let t0 = Instant::now();
    h.sessions.flush(&s).await.unwrap();
    assert_eq!(Instant::now(), t0);
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_drains_events_admitted_while_it_runs() {
    let ops = TestOps::new();
    let mut started = ops.watch();
    let gate = ops.gate();
    let h = Harness::with_ops(ops.clone(), FOREVER).await;
    let (s, _detach) = h.live("drain", None);
    for n in 0..3 {
        s.append(title(n)).unwrap();
    }
    let flush = tokio::spawn({
        let (store, s) = (h.store.clone(), s.clone());
        async move { store.flush_session(&s).await }
    });
    started.recv().await.unwrap();
    // The first write is in progress; these arrive while the barrier runs.
    for n in 3..5 {
        s.append(title(n)).unwrap();
    }
    gate.send(()).unwrap();
    gate.send(()).unwrap();
    flush.await.unwrap().unwrap();
    assert_eq!(ops.writes(), 2);
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test]
async fn concurrent_flushes_share_one_barrier() {
    let ops = TestOps::new();
    let h = Harness::with_ops(ops.clone(), FOREVER).await;
    let (s, _detach) = h.live("shared", None);
    for n in 0..5 {
        s.append(title(n)).unwrap();
    }
    let (a, b, c) = tokio::join!(
        h.sessions.flush(&s),
        h.sessions.flush(&s),
        h.store.flush_session(&s)
    );
    a.unwrap();
    b.unwrap();
    c.unwrap();
    assert_eq!(ops.writes(), 1);
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test]
async fn a_failed_append_truncates_back_and_keeps_the_batch() {
    let ops = TestOps::new();
    let h = Harness::with_ops(ops.clone(), FOREVER).await;
    let (s, _detach) = h.live("full", None);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    let path = h.path(&s);
    let before = std::fs::read(&path).unwrap();

    complete_turn(&s, true);
    ops.fail_writes.store(1, Ordering::SeqCst);
    let err = h.sessions.flush(&s).await.unwrap_err();
    assert!(chain(&err).contains("No space left"), "{}", chain(&err));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "no partial line is left"
    );

    ops.fail_syncs.store(1, Ordering::SeqCst);
    let err = h.sessions.flush(&s).await.unwrap_err();
    assert!(chain(&err).contains("fdatasync"), "{}", chain(&err));
    assert_eq!(std::fs::read(&path).unwrap(), before);

    h.sessions.flush(&s).await.unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        jsonl(&s),
        "the batch was kept, in order"
    );
}

#[tokio::test]
async fn a_failed_publication_leaves_no_file() {
    let ops = TestOps::new();
    let h = Harness::with_ops(ops.clone(), FOREVER).await;
    let (s, _detach) = h.live("pub", Some("/p"));
    s.append(user("x")).unwrap();
    ops.fail_writes.store(1, Ordering::SeqCst);
    h.sessions.flush(&s).await.unwrap_err();
    let dir = h.root.join("--p--");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "neither the file nor its temp: {names:?}");
    h.sessions.flush(&s).await.unwrap();
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test(start_paused = true)]
async fn a_background_failure_pauses_retry_until_a_new_event() {
    let ops = TestOps::new();
    let mut started = ops.watch();
    ops.fail_writes.store(1, Ordering::SeqCst);
    let h = Harness::with_ops(ops.clone(), Duration::from_millis(200)).await;
    let (s, _detach) = h.live("pause", None);
    s.append(title(0)).unwrap();
    started.recv().await.unwrap();

    // Nothing retries on its own: a long quiet period produces no write.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(ops.writes(), 1);
    assert!(!h.path(&s).exists());

    let t = Instant::now();
    s.append(title(1)).unwrap();
    started.recv().await.unwrap();
    assert_eq!(
        Instant::now() - t,
        Duration::from_millis(200),
        "a fresh window"
    );
    h.store.flush_session(&s).await.unwrap();
    assert_eq!(ops.writes(), 2);
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test(start_paused = true)]
async fn an_explicit_flush_retries_at_once_and_reports_a_repeated_failure() {
    let ops = TestOps::new();
    let mut started = ops.watch();
    ops.fail_writes.store(2, Ordering::SeqCst);
    let h = Harness::with_ops(ops.clone(), Duration::from_millis(200)).await;
    let (s, _detach) = h.live("retry", None);
    complete_turn(&s, false);
    started.recv().await.unwrap();
    let t = Instant::now();
    let err = h.store.flush_session(&s).await.unwrap_err();
    assert!(matches!(err, PersistenceError::Io { .. }), "{err}");
    assert_eq!(Instant::now(), t, "the retry does not wait for a window");
    assert_eq!(ops.writes(), 2);
    h.store.flush_session(&s).await.unwrap();
    assert_eq!(std::fs::read(h.path(&s)).unwrap(), jsonl(&s));
}

#[tokio::test]
async fn disposing_a_session_drains_and_releases_its_writer() {
    let h = Harness::with_ops(TestOps::new(), FOREVER).await;
    let (s, detach) = h.live("bye", None);
    complete_turn(&s, true);
    assert!(h.store.is_live(s.id()));
    detach.detach();
    // The load waits for the closing writer instead of racing it.
    let stored = h.store.load(s.id()).await.unwrap();
    assert_eq!(stored.events.len() as u64, s.len());
    assert!(!h.store.is_live(s.id()));
}

#[tokio::test]
async fn a_live_session_cannot_be_loaded_or_forked() {
    let h = Harness::with_ops(TestOps::new(), FOREVER).await;
    let (s, _detach) = h.live("busy", None);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    let err = h.store.load(s.id()).await.unwrap_err();
    assert!(matches!(err, PersistenceError::Live { .. }), "{err}");
    let err = h.store.fork(s.id(), None, None).await.unwrap_err();
    assert!(matches!(err, PersistenceError::Live { .. }), "{err}");
}

#[tokio::test]
async fn unmounting_drains_every_writer_and_remounting_continues_the_files() {
    let h = Harness::with_ops(TestOps::new(), FOREVER).await;
    let (a, _da) = h.live("u1", None);
    let (b, _db) = h.live("u2", Some("/x"));
    complete_turn(&a, false);
    complete_turn(&b, true);
    h.plugin.dispose().await;
    assert_eq!(std::fs::read(h.path(&a)).unwrap(), jsonl(&a));
    assert_eq!(std::fs::read(h.path(&b)).unwrap(), jsonl(&b));

    // Events appended while unmounted stay in the session and are written after a remount.
    complete_turn(&a, false);
    let plugin = h
        .ctx
        .plugin(JsonlPersistencePlugin::new(h.store.clone()))
        .await
        .unwrap();
    complete_turn(&a, true);
    h.sessions.flush(&a).await.unwrap();
    assert_eq!(std::fs::read(h.path(&a)).unwrap(), jsonl(&a));
    plugin.dispose().await;
}

#[tokio::test]
async fn the_store_is_provided_as_the_persistence_service() {
    let h = Harness::new(JsonlOptions::default()).await;
    let service = h.ctx.get::<dyn Persistence>().unwrap();
    let (s, _detach) = h.live("svc", None);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    let listed = service.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    h.plugin.dispose().await;
    assert!(h.ctx.get::<dyn Persistence>().is_none());
}

#[tokio::test]
async fn the_durability_observer_sees_each_write_with_its_durable_length() {
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let record = seen.clone();
    let h = Harness::new(JsonlOptions {
        batch_window: FOREVER,
        on_durable: Some(std::sync::Arc::new(
            move |s: &std::sync::Arc<Session>, len| {
                record.lock().push((s.id().to_string(), len));
            },
        )),
        ..JsonlOptions::default()
    })
    .await;
    let (s, _detach) = h.live("observed", None);
    complete_turn(&s, false);
    h.sessions.flush(&s).await.unwrap();
    let first = s.len();
    complete_turn(&s, true);
    h.sessions.flush(&s).await.unwrap();
    h.sessions.flush(&s).await.unwrap();
    assert_eq!(
        *seen.lock(),
        [
            ("observed".to_owned(), first),
            ("observed".to_owned(), s.len())
        ],
        "one call per write that made events durable"
    );
}
