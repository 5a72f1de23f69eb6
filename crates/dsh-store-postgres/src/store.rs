//! [`PostgresStore`]: the PostgreSQL backend of [`Persistence`], and its live writers.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use dsh_session::persistence::{SessionListing, SessionSummary};
use dsh_session::{
    Persistence, PersistenceError, Session, SessionEvent, SessionHeader, SessionId, SessionMeta,
    StoredSession, fork_seed, interrupted_turn_closers, now_ms,
};
use dsh_write_behind::Registry;
use tokio::runtime::Handle;
use tokio_postgres::Client;

use crate::config::PostgresConfig;
use crate::error::db;
use crate::writer::Writer;
use crate::{batch, follow, lease, rows, schema};

/// The default batching window, the same as the JSONL store's: a streamed response coalesces
/// into a few transactions, and a crash without a checkpoint loses little.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(200);

/// Sessions in one PostgreSQL database, shared by every dsh that points at it.
///
/// Like the JSONL store it is both the [`Persistence`] service and the owner of the live
/// sessions' write-behind writers (fed by [`crate::PostgresPersistencePlugin`]), which lets a
/// load refuse a session this process is writing ([`PersistenceError::Live`]). Sessions live in
/// other processes are refused through the writer lease.
pub struct PostgresStore {
    config: PostgresConfig,
    window: Duration,
    this: Weak<PostgresStore>,
    writers: Registry<Writer>,
    migrated: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("config", &self.config)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// A store on the database `config` names, with the default batching window. Nothing
    /// connects until the first operation, which also migrates the schema.
    pub fn new(config: PostgresConfig) -> Arc<Self> {
        Self::with_window(config, DEFAULT_BATCH_WINDOW)
    }

    /// A store with an explicit batching window.
    pub fn with_window(config: PostgresConfig, window: Duration) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            config,
            window,
            this: this.clone(),
            writers: Registry::new("PostgreSQL"),
            migrated: tokio::sync::OnceCell::new(),
        })
    }

    /// A new connection to a migrated database.
    pub(crate) async fn connect(&self) -> Result<Client, PersistenceError> {
        let mut client = lease::connect(&self.config.inner).await?;
        self.migrated
            .get_or_try_init(|| schema::migrate(&mut client))
            .await?;
        Ok(client)
    }

    /// Connects and migrates: a front end checks its store before anything runs, so an
    /// unreachable database fails the start rather than the first turn (after the provider
    /// was already asked).
    pub async fn check(&self) -> Result<(), PersistenceError> {
        self.connect().await.map(drop)
    }

    /// Where the database is (`user@host:port/dbname`, never the password).
    pub fn describe(&self) -> String {
        self.config.describe()
    }

    /// Whether a writer is active for `id` in this store.
    pub fn is_live(&self, id: &SessionId) -> bool {
        self.writers.is_live(id)
    }

    /// Starts the writer of `session` (registered by [`Registry::writer_for`]); the task
    /// unregisters it when it exits.
    fn spawn_writer(
        &self,
        session: &Arc<Session>,
        runtime: &Handle,
        prev: Option<Arc<Writer>>,
    ) -> Result<Arc<Writer>, PersistenceError> {
        let Some(store) = self.this.upgrade() else {
            return Err(self.writers.unmounted(session.id()));
        };
        let writer = Writer::new(session.clone(), self.window);
        let this = self.this.clone();
        let on_exit = Box::new(move |writer: &Arc<Writer>| {
            if let Some(store) = this.upgrade() {
                store.writers.remove(writer);
            }
        });
        runtime.spawn(writer.clone().run(store, prev, on_exit));
        Ok(writer)
    }

    /// The flush barrier for one session: resolves once everything it holds is committed.
    pub async fn flush_session(&self, session: &Arc<Session>) -> Result<(), PersistenceError> {
        self.writers
            .flush(session, |rt, prev| self.spawn_writer(session, rt, prev))
            .await
    }

    /// Stops admission, drains every writer (each gives up its lease) and waits for them;
    /// returns the first failure.
    pub async fn close(&self) -> Result<(), PersistenceError> {
        self.writers.close(false).await
    }

    /// Refuses `id` while its writer here is active; waits for one that is closing.
    async fn settle(&self, id: &SessionId) -> Result<(), PersistenceError> {
        self.writers.settle(id).await
    }

    /// Reads a stored session as committed, without repairing it or taking its lease, for
    /// showing it while it is live elsewhere. An open last turn stays open.
    pub async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        self.settle(id).await?;
        let client = self.connect().await?;
        Ok(rows::read_stored(&client, id).await?.0)
    }

    /// Follows a session from anywhere (`dsh sessions show --follow`): its committed events
    /// from `from_seq` on, then each new batch as another process commits it, until the
    /// receiver is dropped. Reads only; takes no lease.
    pub async fn follow(
        &self,
        id: &SessionId,
        from_seq: u64,
    ) -> Result<tokio::sync::mpsc::Receiver<crate::Followed>, PersistenceError> {
        // A connection first, so the schema exists before the follower queries it.
        drop(self.connect().await?);
        follow::follow(&self.config.inner, id.clone(), from_seq).await
    }

    /// Listing rows filtered by project key (the cwd), and origin (`"subagent"`, or `""` for
    /// top-level sessions): what `dsh sessions list` across machines needs.
    pub async fn listings_where(
        &self,
        cwd: Option<&str>,
        origin: Option<&str>,
    ) -> Result<Vec<SessionListing>, PersistenceError> {
        let client = self.connect().await?;
        let rows = client
            .query(
                "SELECT id, header_text, updated_at, bytes, first_prompt, turns FROM dsh_sessions
                 WHERE event_count > 0
                   AND ($1::text IS NULL OR project_key = $1)
                   AND ($2::text IS NULL OR COALESCE(origin, '') = $2)
                 ORDER BY updated_at DESC, id",
                &[&cwd, &origin],
            )
            .await
            .map_err(db("listing stored sessions"))?;
        rows.iter()
            .map(|r| {
                let id = SessionId::new(r.get::<_, String>(0));
                Ok(SessionListing {
                    header: rows::parse_header(&id, r.get(1))?,
                    last_activity: r.get::<_, i64>(2) as u64,
                    bytes: Some(r.get::<_, i64>(3) as u64),
                    first_prompt: r.get(4),
                    turns: Some(r.get::<_, i64>(5) as u64),
                })
            })
            .collect()
    }

    /// The session as a repairing load would return it, with the lease held on the returned
    /// connection: the caller either commits the repair on it or drops it.
    async fn leased_read(
        &self,
        id: &SessionId,
    ) -> Result<(Client, StoredSession, Vec<SessionEvent>), PersistenceError> {
        let client = self.connect().await?;
        lease::acquire(&client, id).await?;
        let (stored, _) = rows::read_stored(&client, id).await?;
        let closers = interrupted_turn_closers(&stored.events);
        Ok((client, stored, closers))
    }
}

#[async_trait::async_trait]
impl dsh_session::SessionFollow for PostgresStore {
    async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        PostgresStore::read(self, id).await
    }

    async fn follow(
        &self,
        id: &SessionId,
        from_seq: u64,
    ) -> Result<dsh_session::FollowedEvents, PersistenceError> {
        let rx = PostgresStore::follow(self, id, from_seq).await?;
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        })))
    }
}

impl dsh_write_behind::Store for PostgresStore {
    const NAME: &'static str = "PostgreSQL";

    /// Starts accepting events, spawning writers on `runtime`. Called when the plugin mounts.
    fn open(&self, runtime: Handle) {
        self.writers.open(runtime);
    }

    /// A committed event of `session` (from `session/event`).
    fn admit(&self, session: &Arc<Session>) {
        self.writers
            .admit(session, |rt, prev| self.spawn_writer(session, rt, prev));
    }

    /// `session/disposed`: the session's writer drains once more and gives up its lease.
    fn release(&self, session: &Arc<Session>) {
        self.writers.release(session);
    }

    async fn flush_session(&self, session: &Arc<Session>) -> Result<(), PersistenceError> {
        Self::flush_session(self, session).await
    }

    async fn close(&self) -> Result<(), PersistenceError> {
        Self::close(self).await
    }
}

#[async_trait]
impl Persistence for PostgresStore {
    async fn load(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        self.settle(id).await?;
        let (mut client, mut stored, closers) = self.leased_read(id).await?;
        if !closers.is_empty() {
            tracing::warn!(session = %id, closers = closers.len(), "closing the interrupted turn of a stored session");
            let closers: Vec<_> = closers.into_iter().map(Arc::new).collect();
            let from = stored.events.len() as u64;
            batch::commit(&mut client, &stored.header, &closers, from, None).await?;
            stored
                .events
                .extend(closers.into_iter().map(Arc::unwrap_or_clone));
        }
        lease::release(&client, id).await;
        Ok(stored)
    }

    async fn list(&self) -> Result<Vec<SessionHeader>, PersistenceError> {
        Ok(self
            .listings()
            .await?
            .into_iter()
            .map(|l| l.header)
            .collect())
    }

    async fn listings(&self) -> Result<Vec<SessionListing>, PersistenceError> {
        self.listings_where(None, None).await
    }

    async fn summary(&self, id: &SessionId) -> Result<SessionSummary, PersistenceError> {
        let client = self.connect().await?;
        let (stored, row) = rows::read_stored(&client, id).await?;
        Ok(SessionSummary::from_events(
            stored.header,
            &stored.events,
            row.updated_at,
        ))
    }

    async fn fork(
        &self,
        source: &SessionId,
        at_seq: Option<u64>,
        child: Option<SessionId>,
    ) -> Result<SessionHeader, PersistenceError> {
        self.settle(source).await?;
        let child = child.unwrap_or_else(SessionId::generate);
        if self.writers.contains(&child) {
            return Err(PersistenceError::AlreadyExists { id: child });
        }
        let fork_error = |e| PersistenceError::Fork {
            id: source.clone(),
            source: e,
        };
        // A fork never modifies its source: the repair is only applied to the copy.
        let (mut client, stored, closers) = self.leased_read(source).await?;
        lease::release(&client, source).await;
        let events: Vec<_> = stored
            .events
            .into_iter()
            .chain(closers)
            .map(Arc::new)
            .collect();
        let seed = fork_seed(&events, at_seq).map_err(fork_error)?;
        let meta = SessionMeta {
            cwd: stored.header.cwd.clone(),
            parent_session: Some(source.clone()),
            seed_length: Some(seed.len() as u64),
            ..SessionMeta::default()
        };
        let header = SessionHeader::new(child, now_ms(), meta);
        let forked = Session::new(header.clone(), Some(seed)).map_err(fork_error)?;
        batch::commit(&mut client, &header, &forked.events(), 0, None).await?;
        Ok(header)
    }
}
