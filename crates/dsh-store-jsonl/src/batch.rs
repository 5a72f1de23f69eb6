//! Write-behind for one session: a batching window, an awaited flush barrier, and failure that
//! pauses instead of spinning; the controller is `dsh_write_behind` (shared with the PostgreSQL
//! store), the sink here appends to the session's file.
//!
//! Appending to a session must stay cheap and synchronous, so the `session/event` listener only
//! notes that something is pending and wakes this session's writer task. The first pending event
//! opens a fixed window (default 200 ms); events that arrive later join it without extending it;
//! at expiry one durable append writes everything the session holds beyond the file. Events that
//! arrive during a write open the next window, which starts right after the write if it already
//! expired.
//!
//! A flush is a barrier: it cancels the wait and drains everything admitted so far, including
//! events admitted while it runs, and every flush that arrives before the drain completes shares
//! it. A background failure is logged once and keeps the batch (the file is truncated back, the
//! events stay in the session); automatic retry then waits for a new event, while an explicit
//! flush or teardown retries at once and reports a repeated failure to its caller.
//!
//! The writer reads the events to write from the session itself, from the file's next seq on, so
//! events loaded from storage are never appended again and events appended before the session
//! was attached (a resumed session's `session/end-seed`, a fork's seed) are written too.

use std::sync::Arc;
use std::time::Duration;

use dsh_session::{PersistenceError, Session, SessionId};
use dsh_write_behind::{Sink, WriteBehind};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use crate::error::duplicate;
use crate::fsync::FileOps;
use crate::store::DurableObserver;
use crate::writer::SessionFile;

/// Called once when a writer task exits, with whether its file state should be retired.
pub(crate) type OnExit = Box<dyn FnOnce(&Arc<Writer>, bool) + Send>;

/// Everything the writer task needs from its store.
pub(crate) struct TaskEnv {
    pub io: Arc<dyn FileOps>,
    pub on_durable: Option<DurableObserver>,
    /// The session's file lock, shared with loads and forks of the same id.
    pub lock: Arc<Mutex<()>>,
    /// A writer for the same id that must finish first.
    pub prev: Option<Arc<Writer>>,
    /// Called once when the task exits, before its close waiters learn the outcome.
    pub on_exit: OnExit,
    /// The store's bound on writes in progress at once (see [`crate::store::MAX_CONCURRENT_WRITES`]).
    pub writes: Arc<Semaphore>,
}

/// The write-behind controller of one live session and the file it writes.
pub(crate) struct Writer {
    core: WriteBehind,
    file: Arc<Mutex<SessionFile>>,
}

fn task_failure(e: tokio::task::JoinError) -> PersistenceError {
    PersistenceError::Io {
        context: "the session writer thread failed".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Appends the session's tail to its file on the blocking pool, so the runtime never waits
/// for `fdatasync`.
struct FileSink {
    io: Arc<dyn FileOps>,
    writes: Arc<Semaphore>,
    lock: Arc<Mutex<()>>,
    file: Arc<Mutex<SessionFile>>,
    on_durable: Option<DurableObserver>,
}

impl Sink for FileSink {
    async fn write(
        &mut self,
        session: &Arc<Session>,
        durable: u64,
    ) -> Result<u64, PersistenceError> {
        let (io, lock, file, s) = (
            self.io.clone(),
            self.lock.clone(),
            self.file.clone(),
            session.clone(),
        );
        // Waited for before the blocking task exists, so many sessions writing at once (10,000
        // editor sessions publishing their files) queue here instead of growing the blocking
        // pool to a thread each. The store never closes the semaphore.
        let _permit = self
            .writes
            .acquire()
            .await
            .map_err(|e| PersistenceError::Io {
                context: "the session writers' limit was closed".into(),
                source: std::io::Error::other(e),
            })?;
        let next = tokio::task::spawn_blocking(move || {
            let _exclusive = lock.lock();
            let mut file = file.lock();
            file.resolve()?;
            let events = s.events_from(file.next_seq());
            file.persist(&*io, &events)?;
            Ok::<_, PersistenceError>(file.next_seq())
        })
        .await
        .map_err(task_failure)??;
        if next > durable
            && let Some(observer) = &self.on_durable
        {
            observer(session, next);
        }
        Ok(next)
    }

    fn duplicate(&self, error: &PersistenceError) -> PersistenceError {
        duplicate(error)
    }
}

impl dsh_write_behind::Registered for Writer {
    fn core(&self) -> &WriteBehind {
        &self.core
    }
}

impl Writer {
    pub(crate) fn new(
        session: Arc<Session>,
        file: Arc<Mutex<SessionFile>>,
        window: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            core: WriteBehind::new(session, window, "durable"),
            file,
        })
    }

    /// The session this writer persists.
    pub(crate) fn session(&self) -> &Arc<Session> {
        self.core.session()
    }

    /// The session id.
    pub(crate) fn id(&self) -> &SessionId {
        self.core.id()
    }

    /// The file state, shared with a successor writer of the same session.
    pub(crate) fn file(&self) -> &Arc<Mutex<SessionFile>> {
        &self.file
    }

    /// Waits until the writer task has exited.
    pub(crate) async fn wait_done(&self) {
        self.core.wait_done().await;
    }

    /// The writer task: waits for windows, flushes and teardown; on teardown hands the file
    /// state back to the store before the close waiters learn the outcome.
    pub(crate) async fn run(self: Arc<Self>, env: TaskEnv) {
        let TaskEnv {
            io,
            on_durable,
            lock,
            prev,
            on_exit,
            writes,
        } = env;
        if let Some(prev) = prev {
            // The predecessor may still be draining into the same file.
            prev.wait_done().await;
        }
        let durable = self.file.lock().known_durable();
        let mut sink = FileSink {
            io,
            writes,
            lock,
            file: self.file.clone(),
            on_durable,
        };
        let closed = self.core.run(durable, &mut sink).await;
        on_exit(&self, closed.retire);
        self.core.finish(closed, &sink);
    }
}
