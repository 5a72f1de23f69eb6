//! Write-behind for one live session: a batching window, a flush barrier that means committed,
//! and the session's writer lease held on the writer's own connection.
//!
//! The `session/event` listener only notes that something is pending; the first pending event
//! opens a fixed window and at its expiry one transaction commits everything the session holds
//! beyond what is committed. A flush cancels the wait and drains everything admitted so far;
//! flushes that arrive during a drain share it. A failed write keeps the events in the session
//! and drops a broken connection; the next attempt reconnects, takes the lease again and reads
//! the committed count back, so an acknowledgement lost with the connection neither loses nor
//! duplicates a batch.

use std::mem;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_session::{PersistenceError, Session, SessionId};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;
use tokio_postgres::Client;

use crate::error::{db, diverged, duplicate};
use crate::store::PostgresStore;
use crate::{batch, lease, rows};

type Waiter = oneshot::Sender<Result<(), PersistenceError>>;

/// Called once when a writer task exits.
pub(crate) type OnExit = Box<dyn FnOnce(&Arc<Writer>) + Send>;

#[derive(Default)]
struct State {
    deadline: Option<Instant>,
    flush_waiters: Vec<Waiter>,
    closing: bool,
    close_waiters: Vec<Waiter>,
    failure_logged: bool,
    exited: bool,
}

/// The write-behind controller of one live session.
pub(crate) struct Writer {
    session: Arc<Session>,
    window: Duration,
    state: Mutex<State>,
    wake: Notify,
    /// Every event with a smaller seq is committed.
    persisted: AtomicU64,
    done: watch::Sender<bool>,
}

enum Step {
    Idle,
    Wait(Instant),
    Batch,
    Drain,
}

impl Writer {
    pub(crate) fn new(session: Arc<Session>, window: Duration) -> Arc<Self> {
        Arc::new(Self {
            session,
            window,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            persisted: AtomicU64::new(0),
            done: watch::Sender::new(false),
        })
    }

    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    pub(crate) fn id(&self) -> &SessionId {
        self.session.id()
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.state.lock().closing
    }

    /// Notes a committed event: opens the batching window if none is open. Never blocks.
    pub(crate) fn admit(&self) {
        {
            let mut st = self.state.lock();
            if st.deadline.is_none() {
                st.deadline = Some(Instant::now() + self.window);
            }
        }
        self.wake.notify_one();
    }

    /// The barrier: resolves once every event the session held at the call is committed.
    pub(crate) async fn flush(&self) -> Result<(), PersistenceError> {
        let rx = {
            let mut st = self.state.lock();
            if st.exited {
                return if self.persisted.load(Ordering::Acquire) >= self.session.len() {
                    Ok(())
                } else {
                    Err(PersistenceError::Io {
                        context: format!("session \"{}\" has no active writer", self.id()),
                        source: std::io::Error::other("writer closed"),
                    })
                };
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

    /// Requests teardown: a final drain, then the lease is released. The receiver learns the
    /// final drain's outcome.
    pub(crate) fn request_close(&self) -> oneshot::Receiver<Result<(), PersistenceError>> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock();
            if st.exited {
                let _ = tx.send(Ok(()));
                return rx;
            }
            st.closing = true;
            st.close_waiters.push(tx);
        }
        self.wake.notify_one();
        rx
    }

    /// Waits until the writer task has exited (and its connection, with the lease, is closed).
    pub(crate) async fn wait_done(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so the channel cannot close while this borrow exists.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// The writer task.
    pub(crate) async fn run(
        self: Arc<Self>,
        store: Arc<PostgresStore>,
        prev: Option<Arc<Writer>>,
        on_exit: OnExit,
    ) {
        if let Some(prev) = prev {
            // The predecessor may still hold the lease on its connection.
            prev.wait_done().await;
        }
        let mut conn: Option<Client> = None;
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
                    let result = self.write(&store, &mut conn).await;
                    let mut st = self.state.lock();
                    match result {
                        Ok(()) => st.failure_logged = false,
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
                    let Some((result, closers)) = self.drain(&store, &mut conn).await else {
                        continue;
                    };
                    if let Some(client) = conn.take() {
                        lease::release(&client, self.id()).await;
                    }
                    on_exit(&self);
                    let mut closers = closers;
                    closers.extend(mem::take(&mut self.state.lock().close_waiters));
                    for w in closers {
                        let _ = w.send(result.as_ref().map_err(duplicate).copied());
                    }
                    self.done.send_replace(true);
                    return;
                }
            }
        }
    }

    /// A connection holding this session's lease, whose committed count is known: the current
    /// one, or a new one (taking the lease and reading the count back).
    async fn leased<'c>(
        &self,
        store: &PostgresStore,
        conn: &'c mut Option<Client>,
    ) -> Result<&'c mut Client, PersistenceError> {
        if conn.as_ref().is_some_and(Client::is_closed) {
            *conn = None;
        }
        if conn.is_none() {
            let client = store.connect().await?;
            lease::acquire(&client, self.id()).await?;
            let row = rows::session_row(&client, self.id()).await?;
            let before = self.persisted.load(Ordering::Acquire);
            let committed = match row {
                None if before == 0 => 0,
                None => return Err(diverged(self.id(), Some(0), before)),
                Some(row) => {
                    let header = serde_json::to_string(self.session.header()).map_err(|e| {
                        PersistenceError::Io {
                            context: format!("encoding the header of session \"{}\"", self.id()),
                            source: std::io::Error::other(e),
                        }
                    })?;
                    if row.header_text != header {
                        return Err(PersistenceError::AlreadyExists {
                            id: self.id().clone(),
                        });
                    }
                    // Between what this writer knows committed and what the session holds:
                    // more means another writer appended; less means committed events vanished.
                    if row.event_count < before || row.event_count > self.session.len() {
                        return Err(diverged(self.id(), Some(row.event_count), before));
                    }
                    if row.event_count > before {
                        self.adopt_committed(&client, before, row.event_count)
                            .await?;
                    }
                    row.event_count
                }
            };
            self.persisted.store(committed, Ordering::Release);
            *conn = Some(client);
        }
        // Set just above when it was empty.
        conn.as_mut().ok_or_else(|| PersistenceError::Io {
            context: "no database connection".into(),
            source: std::io::Error::other("no connection"),
        })
    }

    /// Events committed beyond what this writer knew (`from..to`) are its own batch whose
    /// acknowledgement was lost with the connection only if they are exactly its events. After
    /// a partition another writer may have taken the session over and appended as many events
    /// of its own: counting those as committed would silently drop this writer's, so that is
    /// refused.
    async fn adopt_committed(
        &self,
        client: &Client,
        from: u64,
        to: u64,
    ) -> Result<(), PersistenceError> {
        let id = self.id();
        let stored = client
            .query(
                "SELECT line FROM dsh_events WHERE session_id = $1 AND seq >= $2 AND seq < $3 \
                 ORDER BY seq",
                &[&id.as_str(), &(from as i64), &(to as i64)],
            )
            .await
            .map_err(db(format!("reading back the events of session \"{id}\"")))?;
        let own = self.session.events_from(from);
        let same = stored.len() as u64 == to - from
            && stored.iter().zip(own.iter()).all(|(row, event)| {
                serde_json::to_string(&**event).ok().as_deref() == Some(row.get::<_, &str>(0))
            });
        if same {
            Ok(())
        } else {
            Err(diverged(id, Some(to), from))
        }
    }

    /// One transaction committing everything the session holds beyond the committed count.
    /// A connection found broken (the server restarted, a proxy dropped it) is replaced once
    /// and the batch retried: the count read back on reconnect says whether it had landed, so
    /// the retry neither loses nor duplicates it.
    async fn write(
        &self,
        store: &PostgresStore,
        conn: &mut Option<Client>,
    ) -> Result<(), PersistenceError> {
        let mut retried = false;
        loop {
            let client = self.leased(store, conn).await?;
            let from = self.persisted.load(Ordering::Acquire);
            let events = self.session.events_from(from);
            if events.is_empty() {
                return Ok(());
            }
            match batch::commit(client, self.session.header(), &events, from).await {
                Ok(()) => {
                    self.persisted
                        .store(from + events.len() as u64, Ordering::Release);
                    return Ok(());
                }
                // The server's goodbye (a FATAL after `pg_terminate_backend` or a restart) can
                // fail a statement before the driver marks the client closed: a probe decides.
                Err(e) if client.is_closed() || client.batch_execute("SELECT 1").await.is_err() => {
                    // Dropping the connection gave up the lease too; `leased` takes it again.
                    *conn = None;
                    if retried {
                        return Err(e);
                    }
                    tracing::warn!(session = %self.id(), error = %e, "session database connection lost; reconnecting");
                    retried = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Drains until nothing is pending and resolves the covered flush waiters; on teardown
    /// marks the writer exited and hands back the outcome and the teardown waiters.
    async fn drain(
        &self,
        store: &PostgresStore,
        conn: &mut Option<Client>,
    ) -> Option<(Result<(), PersistenceError>, Vec<Waiter>)> {
        self.state.lock().deadline = None;
        loop {
            let result = self.write(store, conn).await;
            let (flushers, closers, closing) = {
                let mut st = self.state.lock();
                match &result {
                    // Checked under the state lock: a flush registers after the session grew
                    // to what it waits for, so every waiter present asked for at most this.
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
                    "the final write of a session failed; its last events are not committed"
                );
            }
            for w in flushers {
                let _ = w.send(result.as_ref().map_err(duplicate).copied());
            }
            return closing.then_some((result, closers));
        }
    }
}
