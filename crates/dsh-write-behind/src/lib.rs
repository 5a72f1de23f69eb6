//! Write-behind for one live session, shared by dsh's session stores (the JSONL files and
//! PostgreSQL): a batching window, an awaited flush barrier, failure that pauses instead of
//! spinning, and teardown. A store supplies only a [`Sink`]: how to make the session's tail
//! durable (append and fdatasync a file; commit a transaction).
//!
//! Appending to a session must stay cheap and synchronous, so the `session/event` listener only
//! notes that something is pending ([`WriteBehind::admit`]) and wakes the session's writer task.
//! The first pending event opens a fixed window; events that arrive later join it without
//! extending it; at expiry one write makes everything the session holds durable. Events that
//! arrive during a write open the next window, which starts right after the write if it already
//! expired.
//!
//! A flush is a barrier: it cancels the wait and drains everything admitted so far, including
//! events admitted while it runs, and every flush that arrives before the drain completes shares
//! it. A background failure is logged once and keeps the batch (the events stay in the session);
//! automatic retry then waits for a new event, while an explicit flush or teardown retries at
//! once and reports a repeated failure to its caller.
//!
//! The sink reads the events to write from the session itself, from the durable count on, so
//! events loaded from storage are never written again and events appended before the writer
//! started (a resumed session's `session/end-seed`, a fork's seed) are written too.

mod mount;
mod registry;

pub use mount::{Store, mount};
pub use registry::{Registered, Registry};

use std::future::Future;
use std::mem;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_session::{PersistenceError, Session, SessionId};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

type Waiter = oneshot::Sender<Result<(), PersistenceError>>;

/// How a store makes a session's tail durable.
pub trait Sink: Send {
    /// Makes every event `session` holds from `durable` on durable (the sink may know better,
    /// e.g. after reading a lost acknowledgement back) and returns the new durable count.
    fn write(
        &mut self,
        session: &Arc<Session>,
        durable: u64,
    ) -> impl Future<Output = Result<u64, PersistenceError>> + Send;

    /// A copy of `error` for each further waiter that shared one failed write.
    fn duplicate(&self, error: &PersistenceError) -> PersistenceError;
}

#[derive(Default)]
struct State {
    /// When the open batching window expires.
    deadline: Option<Instant>,
    flush_waiters: Vec<Waiter>,
    /// Teardown requested: drain once more, then exit.
    closing: bool,
    /// Whether the store should keep the writer's state for a later writer of the session
    /// (store shutdown, not session disposal).
    retire: bool,
    close_waiters: Vec<Waiter>,
    /// A background failure was already logged; the next ones are not, until a success.
    failure_logged: bool,
    /// The task initialized the durable count.
    started: bool,
    /// The task has exited; nothing will resolve new waiters.
    exited: bool,
}

enum Step {
    Idle,
    Wait(Instant),
    Batch,
    Drain,
}

/// The outcome of a writer's final drain, handed to the store (to release the session first)
/// and then back to [`WriteBehind::finish`].
pub struct Closed {
    /// The final drain's outcome.
    pub result: Result<(), PersistenceError>,
    /// Whether teardown asked to keep the writer's state ([`WriteBehind::request_close`]).
    pub retire: bool,
    waiters: Vec<Waiter>,
}

/// The write-behind controller of one live session.
pub struct WriteBehind {
    session: Arc<Session>,
    window: Duration,
    /// What the durable state is called in messages ("durable", "committed").
    durable_word: &'static str,
    state: Mutex<State>,
    wake: Notify,
    /// Every event with a smaller seq is durable.
    persisted: AtomicU64,
    done: watch::Sender<bool>,
}

impl WriteBehind {
    /// A controller for `session` batching over `window`; `durable_word` names what a
    /// successful write achieves, in log messages.
    pub fn new(session: Arc<Session>, window: Duration, durable_word: &'static str) -> Self {
        Self {
            session,
            window,
            durable_word,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            persisted: AtomicU64::new(0),
            done: watch::Sender::new(false),
        }
    }

    /// The session this writer persists.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        self.session.id()
    }

    /// Whether teardown was requested.
    pub fn is_closing(&self) -> bool {
        self.state.lock().closing
    }

    /// Notes a newly committed event: opens the batching window if none is open. Never blocks;
    /// called from the synchronous `session/event` listener.
    pub fn admit(&self) {
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
    pub async fn flush(&self) -> Result<(), PersistenceError> {
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

    /// Requests teardown: a final drain, then the writer releases the session. `retire` asks
    /// the store to keep the writer's state for a later writer of the same session (store
    /// shutdown); several requests retire only if all ask to. The receiver learns the final
    /// drain's outcome.
    pub fn request_close(&self, retire: bool) -> oneshot::Receiver<Result<(), PersistenceError>> {
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

    /// Waits until the writer task has finished ([`WriteBehind::finish`]).
    pub async fn wait_done(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so the channel cannot close while this borrow exists.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// The writer task: waits for windows, flushes and teardown, writing through `sink` with
    /// `durable` events already durable. Returns after the final drain of a teardown; the
    /// caller releases the session and then calls [`WriteBehind::finish`].
    pub async fn run(&self, durable: u64, sink: &mut impl Sink) -> Closed {
        self.persisted.store(durable, Ordering::Release);
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
                    let result = self.write(sink).await;
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
                    if let Some(closed) = self.drain(sink).await {
                        return closed;
                    }
                }
            }
        }
    }

    /// Answers every teardown request with the final drain's outcome and marks the task done.
    pub fn finish(&self, closed: Closed, sink: &impl Sink) {
        let Closed {
            result,
            mut waiters,
            ..
        } = closed;
        // Requests that arrived after the final drain found `exited` set and were answered
        // directly; these are the ones the drain covered.
        waiters.extend(mem::take(&mut self.state.lock().close_waiters));
        for w in waiters {
            let _ = w.send(match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(sink.duplicate(e)),
            });
        }
        self.done.send_replace(true);
    }

    /// One write of everything the session holds beyond the durable count.
    async fn write(&self, sink: &mut impl Sink) -> Result<(), PersistenceError> {
        let durable = self.persisted.load(Ordering::Acquire);
        let next = sink.write(&self.session, durable).await?;
        self.persisted.store(next, Ordering::Release);
        Ok(())
    }

    /// Drains until nothing is pending, then resolves the flush waiters that were covered.
    /// When teardown was requested, marks the writer exited and hands back the drain's outcome
    /// and the teardown waiters instead of resolving them, so the store can release the
    /// session first.
    async fn drain(&self, sink: &mut impl Sink) -> Option<Closed> {
        self.state.lock().deadline = None;
        loop {
            let result = self.write(sink).await;
            let (flushers, closed) = {
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
                let closed = st.closing.then(|| {
                    st.exited = true;
                    (mem::take(&mut st.close_waiters), st.retire)
                });
                (mem::take(&mut st.flush_waiters), closed)
            };
            if let (Err(error), Some(_)) = (&result, &closed) {
                tracing::error!(
                    session = %self.id(),
                    %error,
                    "the final write of a session failed; its last events are not {}",
                    self.durable_word
                );
            }
            for w in flushers {
                let _ = w.send(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(sink.duplicate(e)),
                });
            }
            return closed.map(|(waiters, retire)| Closed {
                result,
                retire,
                waiters,
            });
        }
    }
}
