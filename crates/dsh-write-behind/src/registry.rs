//! The live writers of one store, by session: what both stores keep beside their storage so
//! that a load can refuse a session this process is writing, a disposal drains the right
//! writer, and closing the store drains them all.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_session::{PersistenceError, Session, SessionId};
use parking_lot::Mutex;
use tokio::runtime::Handle;

use crate::WriteBehind;

/// A store's writer: its [`WriteBehind`] controller plus whatever the store's sink needs.
pub trait Registered: Send + Sync + 'static {
    /// The controller.
    fn core(&self) -> &WriteBehind;
}

/// One store's live writers, the runtime their tasks run on, and whether the store accepts
/// events (between its plugin's mount and [`Registry::close`]).
pub struct Registry<W> {
    /// Names the store in the error for an unmounted plugin (`JSONL`, `PostgreSQL`).
    store: &'static str,
    writers: Mutex<HashMap<SessionId, Arc<W>>>,
    runtime: Mutex<Option<Handle>>,
    accepting: AtomicBool,
}

impl<W: Registered> Registry<W> {
    /// An empty registry of the store named `store`, not yet accepting.
    pub fn new(store: &'static str) -> Self {
        Self {
            store,
            writers: Mutex::default(),
            runtime: Mutex::new(None),
            accepting: AtomicBool::new(false),
        }
    }

    /// Starts accepting events, spawning writers on `runtime` (the plugin mounted).
    pub fn open(&self, runtime: Handle) {
        *self.runtime.lock() = Some(runtime);
        self.accepting.store(true, Ordering::Release);
    }

    /// Whether a writer is active for `id`.
    pub fn is_live(&self, id: &SessionId) -> bool {
        self.writers
            .lock()
            .get(id)
            .is_some_and(|w| !w.core().is_closing())
    }

    /// Whether any writer, active or closing, is registered for `id`.
    pub fn contains(&self, id: &SessionId) -> bool {
        self.writers.lock().contains_key(id)
    }

    /// The writer of this very `session` object, active or closing.
    pub fn of(&self, session: &Arc<Session>) -> Option<Arc<W>> {
        self.writers
            .lock()
            .get(session.id())
            .filter(|w| Arc::ptr_eq(w.core().session(), session))
            .cloned()
    }

    /// The active writer of `session`, or a new one made by `spawn`, which gets the runtime and
    /// the closing predecessor (if any) and runs under the registry's lock, so two callers
    /// never both start a writer. Another live session with the same id is refused
    /// ([`PersistenceError::Live`]): writing either would corrupt the other's log.
    pub fn writer_for(
        &self,
        session: &Arc<Session>,
        spawn: impl FnOnce(&Handle, Option<Arc<W>>) -> Result<Arc<W>, PersistenceError>,
    ) -> Result<Arc<W>, PersistenceError> {
        let mut writers = self.writers.lock();
        let prev = match writers.get(session.id()) {
            Some(w) if !w.core().is_closing() && Arc::ptr_eq(w.core().session(), session) => {
                return Ok(w.clone());
            }
            Some(w) if !w.core().is_closing() => {
                return Err(PersistenceError::Live {
                    id: session.id().clone(),
                });
            }
            Some(w) => Some(w.clone()),
            None => None,
        };
        let Some(runtime) = self.runtime.lock().clone() else {
            return Err(self.unmounted(session.id()));
        };
        let writer = spawn(&runtime, prev)?;
        writers.insert(session.id().clone(), writer.clone());
        Ok(writer)
    }

    /// The error for an event that arrives while the store's plugin is not mounted.
    pub fn unmounted(&self, id: &SessionId) -> PersistenceError {
        PersistenceError::Io {
            context: format!(
                "cannot persist session \"{id}\": the {} persistence plugin is not mounted",
                self.store
            ),
            source: std::io::Error::other("no runtime"),
        }
    }

    /// Unregisters `writer` if it is still the one registered for its session (its task
    /// exited; a successor may already have taken its place).
    pub fn remove(&self, writer: &Arc<W>) {
        let mut writers = self.writers.lock();
        let id = writer.core().id();
        if writers.get(id).is_some_and(|w| Arc::ptr_eq(w, writer)) {
            writers.remove(id);
        }
    }

    /// A committed event of `session` (from `session/event`): opens its batching window.
    /// Ignored before the plugin mounted and after the store closed.
    pub fn admit(
        &self,
        session: &Arc<Session>,
        spawn: impl FnOnce(&Handle, Option<Arc<W>>) -> Result<Arc<W>, PersistenceError>,
    ) {
        if !self.accepting.load(Ordering::Acquire) {
            return;
        }
        match self.writer_for(session, spawn) {
            Ok(writer) => writer.core().admit(),
            Err(error) => {
                tracing::error!(session = %session.id(), %error, "cannot persist session event");
            }
        }
    }

    /// `session/disposed`: the session's writer drains once more and lets the session go. The
    /// outcome is logged by the writer; nobody awaits a disposal.
    pub fn release(&self, session: &Arc<Session>) {
        if let Some(writer) = self.of(session) {
            drop(writer.core().request_close(false));
        }
    }

    /// The flush barrier for one session: resolves once everything it holds is stored. A
    /// session with events but no writer yet (a resumed session's seed) gets one from `spawn`.
    pub async fn flush(
        &self,
        session: &Arc<Session>,
        spawn: impl FnOnce(&Handle, Option<Arc<W>>) -> Result<Arc<W>, PersistenceError>,
    ) -> Result<(), PersistenceError> {
        let existing = self.of(session).filter(|w| !w.core().is_closing());
        let writer = match existing {
            Some(writer) => writer,
            None if session.is_empty() => return Ok(()),
            None => self.writer_for(session, spawn)?,
        };
        writer.core().flush().await
    }

    /// Stops admission, drains every writer (`retire` as in [`WriteBehind::request_close`])
    /// and waits for them; returns the first failure.
    pub async fn close(&self, retire: bool) -> Result<(), PersistenceError> {
        self.accepting.store(false, Ordering::Release);
        let writers: Vec<_> = self.writers.lock().values().cloned().collect();
        let pending: Vec<_> = writers
            .iter()
            .map(|w| w.core().request_close(retire))
            .collect();
        let mut first = None;
        for rx in pending {
            if let Ok(Err(e)) = rx.await {
                first.get_or_insert(e);
            }
        }
        for w in &writers {
            w.core().wait_done().await;
        }
        first.map_or(Ok(()), Err)
    }

    /// Refuses `id` while its writer is active; waits for a writer that is closing.
    pub async fn settle(&self, id: &SessionId) -> Result<(), PersistenceError> {
        loop {
            let writer = self.writers.lock().get(id).cloned();
            match writer {
                None => return Ok(()),
                Some(w) if w.core().is_closing() => w.core().wait_done().await,
                Some(_) => return Err(PersistenceError::Live { id: id.clone() }),
            }
        }
    }
}
