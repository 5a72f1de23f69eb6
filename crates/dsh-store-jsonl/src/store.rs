//! [`JsonlStore`]: the JSONL backend of [`Persistence`], and the registry of live writers.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use dsh_session::persistence::{SessionListing, SessionLocation, SessionSummary};
use dsh_session::{
    Persistence, PersistenceError, Session, SessionHeader, SessionId, StoredSession,
};
use dsh_write_behind::Registry;
use parking_lot::Mutex;
use tokio::runtime::Handle;

use crate::batch::{TaskEnv, Writer};
use crate::fsync::{FileOps, OsFileOps};
use crate::layout::session_path;
use crate::writer::SessionFile;
use crate::{fork, list, load, locate, summary};

/// The default batching window: long enough to coalesce a streamed response into a few writes,
/// short enough that a crash without a checkpoint loses little.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(200);

/// How many session writes (a file published or appended to, with its syncs) run at once on
/// the blocking pool. Concurrent syncs share the file system's journal commits, so a few at a
/// time publish thousands of new session files several times faster than one by one, while
/// the bound keeps the pool from growing a thread per session when they all come due together.
pub(crate) const MAX_CONCURRENT_WRITES: usize = 4;

/// How many loaded-but-not-yet-resumed sessions the store remembers (see [`JsonlStore`]).
const RESUME_MEMORY: usize = 64;

/// Observes durability: called on a session's writer task after each successful write, with
/// the session and its new durable length (every event with a smaller seq is on disk). Must not
/// block. Used by crash tests to report what was acknowledged, and available for metrics.
pub type DurableObserver = Arc<dyn Fn(&Arc<Session>, u64) + Send + Sync>;

/// Tuning and seams of a [`JsonlStore`].
#[derive(Clone)]
pub struct JsonlOptions {
    /// How long the first pending event of a session waits for company before its batch is
    /// written (default [`DEFAULT_BATCH_WINDOW`]). Flushes do not wait for it.
    pub batch_window: Duration,
    /// The file operations every session write goes through (default [`OsFileOps`]); tests
    /// inject failures or count writes here.
    pub file_ops: Arc<dyn FileOps>,
    /// Called after each successful durable write (default: none).
    pub on_durable: Option<DurableObserver>,
}

impl Default for JsonlOptions {
    fn default() -> Self {
        Self {
            batch_window: DEFAULT_BATCH_WINDOW,
            file_ops: Arc::new(OsFileOps),
            on_durable: None,
        }
    }
}

impl std::fmt::Debug for JsonlOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlOptions")
            .field("batch_window", &self.batch_window)
            .field("on_durable", &self.on_durable.is_some())
            .finish_non_exhaustive()
    }
}

/// A session the store loaded: if a session built from exactly this log goes live, its writer
/// continues the existing file instead of publishing a new one.
struct Resume {
    header: SessionHeader,
    len: u64,
    /// The file's length after the load (and its repair).
    bytes: u64,
    path: PathBuf,
}

/// The file state of a writer that stopped because the store shut down (not because its session
/// was disposed), kept so a remounted plugin continues the same file.
struct Retired {
    session: Weak<Session>,
    file: Arc<Mutex<SessionFile>>,
}

/// Session files under one root, one JSONL file per session (see [`crate::layout`]).
///
/// The store is both the [`Persistence`] service (load with crash repair, listing, summaries,
/// fork) and the owner of the write-behind writers that [`crate::JsonlPersistencePlugin`] feeds
/// from `session/event`. Keeping both in one object is what lets a load refuse a session whose
/// writer is active ([`PersistenceError::Live`]), and lets a resumed session's writer know that
/// the first events of its log are already on disk.
pub struct JsonlStore {
    root: PathBuf,
    options: JsonlOptions,
    this: Weak<JsonlStore>,
    writers: Registry<Writer>,
    retired: Mutex<HashMap<SessionId, Retired>>,
    resumes: Mutex<VecDeque<(SessionId, Resume)>>,
    locks: Mutex<HashMap<SessionId, Arc<Mutex<()>>>>,
    /// Bounds the writes in progress ([`MAX_CONCURRENT_WRITES`]).
    writes: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for JsonlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlStore")
            .field("root", &self.root)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn join_failure(e: tokio::task::JoinError) -> PersistenceError {
    PersistenceError::Io {
        context: "a session storage thread failed".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl JsonlStore {
    /// A store under `root` (usually [`crate::sessions_root_from_env`]) with default options.
    /// Nothing is created on disk until a session has an event to write.
    pub fn new(root: impl Into<PathBuf>) -> Arc<Self> {
        Self::with_options(root, JsonlOptions::default())
    }

    /// A store under `root` with explicit options.
    pub fn with_options(root: impl Into<PathBuf>, options: JsonlOptions) -> Arc<Self> {
        let root = root.into();
        Arc::new_cyclic(|this| Self {
            root,
            options,
            this: this.clone(),
            writers: Registry::new("JSONL"),
            retired: Mutex::default(),
            resumes: Mutex::default(),
            locks: Mutex::default(),
            writes: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_WRITES)),
        })
    }

    /// The sessions root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path a session with this header is (or will be) stored at.
    pub fn path_for(&self, header: &SessionHeader) -> Result<PathBuf, PersistenceError> {
        session_path(&self.root, header)
    }

    /// Whether a writer is active for `id` (the session is live and being persisted here).
    pub fn is_live(&self, id: &SessionId) -> bool {
        self.writers.is_live(id)
    }

    fn lock_for(&self, id: &SessionId) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock();
        if locks.len() > 1024 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(id.clone()).or_default().clone()
    }

    fn take_resume(&self, session: &Session) -> Option<Resume> {
        let mut resumes = self.resumes.lock();
        let pos = resumes.iter().position(|(id, _)| id == session.id())?;
        let (_, resume) = resumes.remove(pos)?;
        (resume.header == *session.header() && resume.len == session.first_live_seq())
            .then_some(resume)
    }

    fn remember_resume(&self, stored: &StoredSession, path: PathBuf, bytes: u64) {
        let mut resumes = self.resumes.lock();
        resumes.retain(|(id, _)| id != &stored.header.id);
        if resumes.len() >= RESUME_MEMORY {
            resumes.pop_front();
        }
        resumes.push_back((
            stored.header.id.clone(),
            Resume {
                header: stored.header.clone(),
                len: stored.events.len() as u64,
                bytes,
                path,
            },
        ));
    }

    /// Where a newly active writer of `session` starts: the predecessor's file state for the
    /// same session object, a retired writer's, the stored log this session was resumed from,
    /// or a file yet to be published.
    fn file_for(
        &self,
        session: &Arc<Session>,
        prev: Option<&Arc<Writer>>,
    ) -> Result<Arc<Mutex<SessionFile>>, PersistenceError> {
        if let Some(prev) = prev.filter(|p| Arc::ptr_eq(p.session(), session)) {
            return Ok(prev.file().clone());
        }
        let retired = self.retired.lock().remove(session.id());
        if let Some(r) = retired.filter(|r| {
            r.session
                .upgrade()
                .is_some_and(|s| Arc::ptr_eq(&s, session))
        }) {
            return Ok(r.file);
        }
        let header = session.header().clone();
        if let Some(resume) = self.take_resume(session) {
            return Ok(Arc::new(Mutex::new(SessionFile::existing(
                resume.path,
                header,
                resume.len,
                resume.bytes,
            ))));
        }
        let path = session_path(&self.root, &header)?;
        let seed = session.first_live_seq();
        Ok(Arc::new(Mutex::new(if seed > 0 {
            SessionFile::adopting(path, header, seed)
        } else {
            SessionFile::unpublished(path, header)
        })))
    }

    /// Starts the writer of `session` (registered by [`Registry::writer_for`], whose lock
    /// this runs under): its file state comes from the predecessor, a retired writer, the
    /// stored log it was resumed from, or a file yet to be published.
    fn spawn_writer(
        &self,
        session: &Arc<Session>,
        runtime: &Handle,
        prev: Option<Arc<Writer>>,
    ) -> Result<Arc<Writer>, PersistenceError> {
        let file = self.file_for(session, prev.as_ref())?;
        let writer = Writer::new(session.clone(), file, self.options.batch_window);
        let this = self.this.clone();
        let env = TaskEnv {
            io: self.options.file_ops.clone(),
            on_durable: self.options.on_durable.clone(),
            lock: self.lock_for(session.id()),
            prev,
            on_exit: Box::new(move |writer: &Arc<Writer>, retire: bool| {
                if let Some(store) = this.upgrade() {
                    store.release_writer(writer, retire);
                }
            }),
            writes: self.writes.clone(),
        };
        runtime.spawn(writer.clone().run(env));
        Ok(writer)
    }

    fn release_writer(&self, writer: &Arc<Writer>, retire: bool) {
        self.writers.remove(writer);
        // The file (and its writer lock) closes now, not when the last reference to the writer
        // goes, so a load right after the session's disposal does not find it locked by this
        // very store.
        writer.file().lock().release_handle();
        if retire {
            let file = writer.file().clone();
            self.retired.lock().insert(
                writer.id().clone(),
                Retired {
                    session: Arc::downgrade(writer.session()),
                    file,
                },
            );
        }
    }

    /// The flush barrier for one session: resolves once everything the session holds is
    /// durable (including a resumed session's `session/end-seed` or a fork's seed, even before
    /// any event was published), or fails with the write error.
    pub async fn flush_session(&self, session: &Arc<Session>) -> Result<(), PersistenceError> {
        self.writers
            .flush(session, |rt, prev| self.spawn_writer(session, rt, prev))
            .await
    }

    /// Stops admission, drains every writer and waits for them; returns the first failure.
    /// The plugin calls this when it unmounts; call it yourself first to learn the outcome.
    /// Writers retire: their file state stays for a later writer of the same session.
    pub async fn close(&self) -> Result<(), PersistenceError> {
        self.writers.close(true).await
    }

    /// Refuses `id` while its writer is active; waits for a writer that is closing.
    async fn settle(&self, id: &SessionId) -> Result<(), PersistenceError> {
        self.writers.settle(id).await
    }

    /// Reads a stored session as it is on disk, without repairing it or taking its writer
    /// lock, for showing it: a session that is live in another dsh process can still be looked
    /// at (a [`load`](Persistence::load) would wait for its writer and then fail). Events this
    /// store holds for the session are flushed first. A torn tail is left out and an open last
    /// turn stays open; resuming (which loads) is what repairs.
    pub async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        self.settle(id).await?;
        let (root, id) = (self.root.clone(), id.clone());
        Self::blocking(move || load::read_file(&locate::find(&root, &id)?, &id)).await
    }

    async fn blocking<T: Send + 'static>(
        f: impl FnOnce() -> Result<T, PersistenceError> + Send + 'static,
    ) -> Result<T, PersistenceError> {
        tokio::task::spawn_blocking(f).await.map_err(join_failure)?
    }
}

impl dsh_write_behind::Store for JsonlStore {
    const NAME: &'static str = "JSONL";

    /// Starts accepting events, spawning writers on `runtime`. Called when the plugin mounts.
    fn open(&self, runtime: Handle) {
        self.writers.open(runtime);
    }

    /// A committed event of `session` (from `session/event`): opens its batching window.
    fn admit(&self, session: &Arc<Session>) {
        self.writers
            .admit(session, |rt, prev| self.spawn_writer(session, rt, prev));
    }

    /// `session/disposed`: the session's writer drains once more and releases it.
    fn release(&self, session: &Arc<Session>) {
        self.writers.release(session);
        let mut retired = self.retired.lock();
        if retired
            .get(session.id())
            .is_some_and(|r| r.session.as_ptr() == Arc::as_ptr(session))
        {
            retired.remove(session.id());
        }
    }

    async fn flush_session(&self, session: &Arc<Session>) -> Result<(), PersistenceError> {
        Self::flush_session(self, session).await
    }

    async fn close(&self) -> Result<(), PersistenceError> {
        Self::close(self).await
    }
}

#[async_trait]
impl dsh_session::SessionFollow for JsonlStore {
    async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        JsonlStore::read(self, id).await
    }

    async fn follow(
        &self,
        id: &SessionId,
        from_seq: u64,
    ) -> Result<dsh_session::FollowedEvents, PersistenceError> {
        let (root, who) = (self.root.clone(), id.clone());
        let path = Self::blocking(move || locate::find(&root, &who)).await?;
        Ok(crate::follow::follow(path, id.clone(), from_seq))
    }
}

#[async_trait]
impl Persistence for JsonlStore {
    async fn load(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        self.settle(id).await?;
        let (root, io, lock, id2) = (
            self.root.clone(),
            self.options.file_ops.clone(),
            self.lock_for(id),
            id.clone(),
        );
        let (stored, path, bytes) = Self::blocking(move || {
            let _exclusive = lock.lock();
            let path = locate::find(&root, &id2)?;
            let (stored, bytes) = load::load_file(&*io, &path, &id2)?;
            Ok((stored, path, bytes))
        })
        .await?;
        self.remember_resume(&stored, path, bytes);
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
        let root = self.root.clone();
        Self::blocking(move || list::list_root(&root)).await
    }

    async fn summary(&self, id: &SessionId) -> Result<SessionSummary, PersistenceError> {
        let (root, lock, id) = (self.root.clone(), self.lock_for(id), id.clone());
        Self::blocking(move || {
            let _exclusive = lock.lock();
            summary::summarize(&locate::find(&root, &id)?, &id)
        })
        .await
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
        let job = fork::ForkJob {
            root: self.root.clone(),
            io: self.options.file_ops.clone(),
            source_lock: self.lock_for(source),
            child_lock: self.lock_for(&child),
            source: source.clone(),
            at_seq,
            child,
        };
        Self::blocking(move || job.run()).await
    }

    async fn locate(&self, id: &SessionId) -> Result<SessionLocation, PersistenceError> {
        let (root, id) = (self.root.clone(), id.clone());
        Self::blocking(move || locate::find(&root, &id).map(SessionLocation::File)).await
    }
}
