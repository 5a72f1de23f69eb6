//! Write-behind for one session: a batching window, an awaited flush barrier, and failure that
//! pauses instead of spinning.
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

use std::mem;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_session::{PersistenceError, Session, SessionId};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use crate::error::duplicate;
use crate::fsync::FileOps;
use crate::store::DurableObserver;
use crate::writer::SessionFile;

type Waiter = oneshot::Sender<Result<(), PersistenceError>>;

/// Called once when a writer task exits, with whether its file state should be retired.
pub(crate) type OnExit = Box<dyn FnOnce(&Arc<Writer>, bool) + Send>;

#[derive(Default)]
struct State {
    /// When the open batching window expires.
    deadline: Option<Instant>,
    flush_waiters: Vec<Waiter>,
    /// Teardown requested: drain once more, then exit.
    closing: bool,
    /// Whether the writer's file state should outlive it (store shutdown, not session
    /// disposal), so a remounted plugin continues where this writer stopped.
    retire: bool,
    close_waiters: Vec<Waiter>,
    /// A background failure was already logged; the next ones are not, until a success.
    failure_logged: bool,
    /// The task initialized `persisted`.
    started: bool,
    /// The task has exited; nothing will resolve new waiters.
    exited: bool,
}

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
}

/// The write-behind controller of one live session.
pub(crate) struct Writer {
    session: Arc<Session>,
    file: Arc<Mutex<SessionFile>>,
    window: Duration,
    state: Mutex<State>,
    wake: Notify,
    /// The file's next seq after the last successful write (everything before it is durable).
    persisted: AtomicU64,
    /// Set once when the task starts.
    on_durable: std::sync::OnceLock<DurableObserver>,
    done: watch::Sender<bool>,
}

enum Step {
    Idle,
    Wait(Instant),
    Batch,
    Drain,
}

fn task_failure(e: tokio::task::JoinError) -> PersistenceError {
    PersistenceError::Io {
        context: "the session writer thread failed".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl Writer {
    pub(crate) fn new(
        session: Arc<Session>,
        file: Arc<Mutex<SessionFile>>,
        window: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            session,
            file,
            window,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            persisted: AtomicU64::new(0),
            on_durable: std::sync::OnceLock::new(),
            done: watch::Sender::new(false),
        })
    }

    /// The session this writer persists.
    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The session id.
    pub(crate) fn id(&self) -> &SessionId {
        self.session.id()
    }

    /// The file state, shared with a successor writer of the same session.
    pub(crate) fn file(&self) -> &Arc<Mutex<SessionFile>> {
        &self.file
    }

    /// Whether teardown was requested.
    pub(crate) fn is_closing(&self) -> bool {
        self.state.lock().closing
    }

    /// Notes a newly committed event: opens the batching window if none is open. Never blocks
    /// on I/O; called from the synchronous `session/event` listener.
    pub(crate) fn admit(&self) {
        {
            let mut st = self.state.lock();
            if st.deadline.is_none() {
                st.deadline = Some(Instant::now() + self.window);
            }
        }
        self.wake.notify_one();
    }

    /// The flush barrier: resolves once every event the session held when it was called is
    /// durable, or with the failure of the drain it joined.
    pub(crate) async fn flush(&self) -> Result<(), PersistenceError> {
        let len = self.session.len();
        let rx = {
            let mut st = self.state.lock();
            if (st.started || st.exited) && self.persisted.load(Ordering::Acquire) >= len {
                return Ok(());
            }
            if st.exited {
                return Err(PersistenceError::Io {
                    context: format!("session \"{}\" has no active writer", self.id()),
                    source: std::io::Error::other("writer closed"),
                });
            }
            let (tx, rx) = oneshot::channel();
            st.flush_waiters.push(tx);
            rx
        };
        self.wake.notify_one();
        rx.await.unwrap_or_else(|_| {
            Err(PersistenceError::Io {
                context: format!("the writer of session \"{}\" stopped", self.id()),
                source: std::io::Error::other("writer stopped"),
            })
        })
    }

    /// Requests teardown: a final drain, then the writer releases the session. `retire` keeps
    /// the file state for a later writer of the same session (store shutdown); session disposal
    /// passes `false`. The receiver learns the final drain's outcome.
    pub(crate) fn request_close(
        &self,
        retire: bool,
    ) -> oneshot::Receiver<Result<(), PersistenceError>> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock();
            if st.exited {
                let _ = tx.send(Ok(()));
                return rx;
            }
            st.retire = if st.closing {
                st.retire && retire
            } else {
                retire
            };
            st.closing = true;
            st.close_waiters.push(tx);
        }
        self.wake.notify_one();
        rx
    }

    /// Waits until the writer task has exited.
    pub(crate) async fn wait_done(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so the channel cannot close while this borrow exists.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// The writer task: waits for windows, flushes and teardown, and runs every write on the
    /// blocking pool so the runtime never waits for `fdatasync`.
    pub(crate) async fn run(self: Arc<Self>, env: TaskEnv) {
        let TaskEnv {
            io,
            on_durable,
            lock,
            prev,
            on_exit,
        } = env;
        if let Some(observer) = on_durable {
            let _ = self.on_durable.set(observer);
        }
        if let Some(prev) = prev {
            // The predecessor may still be draining into the same file.
            prev.wait_done().await;
        }
        self.persisted
            .store(self.file.lock().known_durable(), Ordering::Release);
        self.state.lock().started = true;
        loop {
            let step = {
                let st = self.state.lock();
                if st.closing || !st.flush_waiters.is_empty() {
                    Step::Drain
                } else {
                    match st.deadline {
                        None => Step::Idle,
                        Some(d) if d <= Instant::now() => Step::Batch,
                        Some(d) => Step::Wait(d),
                    }
                }
            };
            match step {
                Step::Idle => self.wake.notified().await,
                Step::Wait(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {}
                        () = self.wake.notified() => {}
                    }
                }
                Step::Batch => {
                    self.state.lock().deadline = None;
                    let result = self.write(&io, &lock).await;
                    let mut st = self.state.lock();
                    match result {
                        Ok(()) => st.failure_logged = false,
                        // The batch stays in the session; retry waits for a new event (which
                        // opens a fresh window) or an explicit flush.
                        Err(error) if !st.failure_logged => {
                            st.failure_logged = true;
                            tracing::warn!(
                                session = %self.id(),
                                %error,
                                "background session write failed; retrying at the next event or flush"
                            );
                        }
                        Err(error) => {
                            tracing::debug!(session = %self.id(), %error, "session write failed again");
                        }
                    }
                }
                Step::Drain => {
                    let Some((result, mut closers)) = self.drain(&io, &lock).await else {
                        continue;
                    };
                    // Read first: the store's registry lock must not be taken under the state lock.
                    let retire = self.state.lock().retire;
                    on_exit(&self, retire);
                    // Teardown requests that arrived after the final drain found `exited` set
                    // and were answered directly; these are the ones the drain covered.
                    closers.extend(mem::take(&mut self.state.lock().close_waiters));
                    for w in closers {
                        let _ = w.send(match &result {
                            Ok(()) => Ok(()),
                            Err(e) => Err(duplicate(e)),
                        });
                    }
                    self.done.send_replace(true);
                    return;
                }
            }
        }
    }

    /// One durable write of everything the session holds beyond the file.
    async fn write(
        &self,
        io: &Arc<dyn FileOps>,
        lock: &Arc<Mutex<()>>,
    ) -> Result<(), PersistenceError> {
        let (io, lock, file, session) = (
            io.clone(),
            lock.clone(),
            self.file.clone(),
            self.session.clone(),
        );
        let next = tokio::task::spawn_blocking(move || {
            let _exclusive = lock.lock();
            let mut file = file.lock();
            file.resolve()?;
            let events = session.events_from(file.next_seq());
            file.persist(&*io, &events)?;
            Ok::<_, PersistenceError>(file.next_seq())
        })
        .await
        .map_err(task_failure)??;
        let before = self.persisted.swap(next, Ordering::AcqRel);
        if next > before
            && let Some(observer) = self.on_durable.get()
        {
            observer(&self.session, next);
        }
        Ok(())
    }

    /// Drains until nothing is pending, then resolves the flush waiters that were covered.
    /// When teardown was requested, marks the writer exited and hands back the drain's outcome
    /// and the teardown waiters instead of resolving them, so the caller can release the
    /// session first.
    async fn drain(
        &self,
        io: &Arc<dyn FileOps>,
        lock: &Arc<Mutex<()>>,
    ) -> Option<(Result<(), PersistenceError>, Vec<Waiter>)> {
        self.state.lock().deadline = None;
        loop {
            let result = self.write(io, lock).await;
            let (flushers, closers, closing) = {
                let mut st = self.state.lock();
                match &result {
                    // Checked under the state lock: a flush registers after reading the
                    // session length, so every waiter present now asked for at most this much.
                    Ok(()) if self.session.len() > self.persisted.load(Ordering::Acquire) => {
                        continue;
                    }
                    Ok(()) => st.failure_logged = false,
                    Err(_) => {}
                }
                let closing = st.closing;
                let closers = if closing {
                    st.exited = true;
                    mem::take(&mut st.close_waiters)
                } else {
                    Vec::new()
                };
                (mem::take(&mut st.flush_waiters), closers, closing)
            };
            if let (Err(error), true) = (&result, closing) {
                tracing::error!(
                    session = %self.id(),
                    %error,
                    "the final write of a session failed; its last events are not durable"
                );
            }
            for w in flushers {
                let _ = w.send(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(duplicate(e)),
                });
            }
            return closing.then_some((result, closers));
        }
    }
}
