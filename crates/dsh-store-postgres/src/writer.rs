//! Write-behind for one live session in PostgreSQL: the controller is `dsh_write_behind`
//! (shared with the JSONL store: batching window, flush barrier meaning committed, teardown);
//! the sink here commits the session's tail in one transaction on the writer's own connection,
//! which also holds the session's writer lease.
//!
//! A failed write keeps the events in the session and drops a broken connection; the next
//! attempt reconnects, takes the lease again and reads the committed count back, so an
//! acknowledgement lost with the connection neither loses nor duplicates a batch.

use std::sync::Arc;
use std::time::Duration;

use dsh_session::{PersistenceError, Session, SessionId};
use dsh_write_behind::{Sink, WriteBehind};
use tokio_postgres::Client;

use crate::error::{db, diverged, duplicate};
use crate::store::PostgresStore;
use crate::{batch, lease, rows};

/// Called once when a writer task exits.
pub(crate) type OnExit = Box<dyn FnOnce(&Arc<Writer>) + Send>;

/// The write-behind controller of one live session.
pub(crate) struct Writer {
    core: WriteBehind,
}

impl dsh_write_behind::Registered for Writer {
    fn core(&self) -> &WriteBehind {
        &self.core
    }
}

impl Writer {
    pub(crate) fn new(session: Arc<Session>, window: Duration) -> Arc<Self> {
        Arc::new(Self {
            core: WriteBehind::new(session, window, "committed"),
        })
    }

    pub(crate) fn id(&self) -> &SessionId {
        self.core.id()
    }

    /// Waits until the writer task has exited (and its connection, with the lease, is closed).
    pub(crate) async fn wait_done(&self) {
        self.core.wait_done().await;
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
        let mut sink = DbSink {
            store,
            conn: None,
            committed: 0,
        };
        let closed = self.core.run(0, &mut sink).await;
        if let Some(client) = sink.conn.take() {
            lease::release(&client, self.id()).await;
        }
        on_exit(&self);
        self.core.finish(closed, &sink);
    }
}

/// Commits a session's tail on a connection holding its lease.
struct DbSink {
    store: Arc<PostgresStore>,
    /// The connection holding the lease, once connected.
    conn: Option<Client>,
    /// Every event with a smaller seq is committed (as of the last read or commit).
    committed: u64,
}

impl Sink for DbSink {
    async fn write(
        &mut self,
        session: &Arc<Session>,
        _durable: u64,
    ) -> Result<u64, PersistenceError> {
        self.commit_tail(session).await
    }

    fn duplicate(&self, error: &PersistenceError) -> PersistenceError {
        duplicate(error)
    }
}

impl DbSink {
    /// A connection holding this session's lease, whose committed count is known: the current
    /// one, or a new one (taking the lease and reading the count back).
    async fn leased(&mut self, session: &Session) -> Result<(), PersistenceError> {
        if self.conn.as_ref().is_some_and(Client::is_closed) {
            self.conn = None;
        }
        if self.conn.is_some() {
            return Ok(());
        }
        let id = session.id();
        let client = self.store.connect().await?;
        lease::acquire(&client, id).await?;
        let row = rows::session_row(&client, id).await?;
        let before = self.committed;
        let committed = match row {
            None if before == 0 => 0,
            None => return Err(diverged(id, Some(0), before)),
            Some(row) => {
                let header =
                    serde_json::to_string(session.header()).map_err(|e| PersistenceError::Io {
                        context: format!("encoding the header of session \"{id}\""),
                        source: std::io::Error::other(e),
                    })?;
                if row.header_text != header {
                    return Err(PersistenceError::AlreadyExists { id: id.clone() });
                }
                // Between what this writer knows committed and what the session holds:
                // more means another writer appended; less means committed events vanished.
                if row.event_count < before || row.event_count > session.len() {
                    return Err(diverged(id, Some(row.event_count), before));
                }
                // Events the session was loaded with came from this database: only those
                // beyond both them and the known count need checking.
                let from = before.max(session.first_live_seq().min(row.event_count));
                if row.event_count > from {
                    adopt_committed(&client, session, from, row.event_count).await?;
                }
                row.event_count
            }
        };
        self.committed = committed;
        self.conn = Some(client);
        Ok(())
    }

    /// One transaction committing everything the session holds beyond the committed count.
    /// A connection found broken (the server restarted, a proxy dropped it) is replaced once
    /// and the batch retried: the count read back on reconnect says whether it had landed, so
    /// the retry neither loses nor duplicates it.
    async fn commit_tail(&mut self, session: &Session) -> Result<u64, PersistenceError> {
        let mut retried = false;
        loop {
            self.leased(session).await?;
            let from = self.committed;
            let events = session.events_from(from);
            if events.is_empty() {
                return Ok(from);
            }
            let Some(client) = self.conn.as_mut() else {
                // `leased` has just set it.
                return Err(PersistenceError::Io {
                    context: "no database connection".into(),
                    source: std::io::Error::other("no connection"),
                });
            };
            match batch::commit(client, session.header(), &events, from, None).await {
                Ok(()) => {
                    self.committed = from + events.len() as u64;
                    return Ok(self.committed);
                }
                // The server's goodbye (a FATAL after `pg_terminate_backend` or a restart) can
                // fail a statement before the driver marks the client closed: a probe decides.
                Err(e) if client.is_closed() || client.batch_execute("SELECT 1").await.is_err() => {
                    // Dropping the connection gave up the lease too; `leased` takes it again.
                    self.conn = None;
                    if retried {
                        return Err(e);
                    }
                    tracing::warn!(session = %session.id(), error = %e, "session database connection lost; reconnecting");
                    retried = true;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Events committed beyond what this writer knew (`from..to`) are its own batch whose
/// acknowledgement was lost with the connection only if they are exactly its events. After
/// a partition another writer may have taken the session over and appended as many events
/// of its own: counting those as committed would silently drop this writer's, so that is
/// refused.
async fn adopt_committed(
    client: &Client,
    session: &Session,
    from: u64,
    to: u64,
) -> Result<(), PersistenceError> {
    let id = session.id();
    let stored = client
        .query(
            "SELECT line FROM dsh_events WHERE session_id = $1 AND seq >= $2 AND seq < $3 \
             ORDER BY seq",
            &[&id.as_str(), &(from as i64), &(to as i64)],
        )
        .await
        .map_err(db(format!("reading back the events of session \"{id}\"")))?;
    let own = session.events_from(from);
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
