//! The controller on its own, with a sink that records its writes and can be told to fail (the
//! documented seam a store fills in); the stores' suites cover it with their real sinks.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dsh_session::{EventKind, PersistenceError, Session, SessionHeader, SessionId, SessionMeta};
use dsh_write_behind::{Sink, WriteBehind};
use tokio::sync::Notify;

#[derive(Clone, Default)]
struct Recorder {
    fail: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
    wrote: Arc<Notify>,
}

impl Sink for Recorder {
    async fn write(
        &mut self,
        session: &Arc<Session>,
        _durable: u64,
    ) -> Result<u64, PersistenceError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.wrote.notify_one();
        if self.fail.load(Ordering::SeqCst) {
            return Err(PersistenceError::Io {
                context: "the disk is full".into(),
                source: std::io::Error::other("ENOSPC"),
            });
        }
        Ok(session.len())
    }

    fn duplicate(&self, error: &PersistenceError) -> PersistenceError {
        PersistenceError::Io {
            context: error.to_string(),
            source: std::io::Error::other("shared failure"),
        }
    }
}

fn live() -> (Arc<Session>, Arc<WriteBehind>, Recorder) {
    let header = SessionHeader::new(SessionId::new("s"), 0, SessionMeta::default());
    let session = Session::new(header, None).unwrap();
    let wb = Arc::new(WriteBehind::new(
        session.clone(),
        Duration::from_millis(200),
        "durable",
    ));
    let sink = Recorder::default();
    let (task_wb, mut task_sink) = (wb.clone(), sink.clone());
    tokio::spawn(async move {
        let closed = task_wb.run(0, &mut task_sink).await;
        task_wb.finish(closed, &task_sink);
    });
    (session, wb, sink)
}

fn event(s: &Session, n: u64) {
    s.append(EventKind::other(
        "session/title",
        serde_json::json!({ "title": n }),
    ))
    .unwrap();
}

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(start_paused = true)]
async fn an_admitted_event_is_written_when_its_window_expires_without_a_flush() {
    let (s, wb, sink) = live();
    event(&s, 1);
    wb.admit();
    tokio::time::timeout(WAIT, sink.wrote.notified())
        .await
        .unwrap();
    assert_eq!(sink.writes.load(Ordering::SeqCst), 1);
    // Already durable: the barrier needs no write.
    tokio::time::timeout(WAIT, wb.flush())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sink.writes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_drain_fails_every_flush_it_covered_and_the_next_flush_retries() {
    let (s, wb, sink) = live();
    event(&s, 1);
    wb.admit();
    sink.fail.store(true, Ordering::SeqCst);
    let (a, b) = tokio::join!(wb.flush(), wb.flush());
    assert!(a.unwrap_err().to_string().contains("the disk is full"));
    assert!(b.unwrap_err().to_string().contains("the disk is full"));
    sink.fail.store(false, Ordering::SeqCst);
    tokio::time::timeout(WAIT, wb.flush())
        .await
        .unwrap()
        .unwrap();
    // Teardown drains (nothing left), answers, and ends the task.
    let closed = tokio::time::timeout(WAIT, wb.request_close(false))
        .await
        .unwrap()
        .unwrap();
    assert!(closed.is_ok());
    tokio::time::timeout(WAIT, wb.wait_done()).await.unwrap();
    event(&s, 2);
    let late = wb.flush().await.unwrap_err().to_string();
    assert!(late.contains("no active writer"), "{late}");
}
