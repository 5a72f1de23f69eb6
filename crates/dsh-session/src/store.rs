//! The session store: which sessions are live in this process, and their lifecycle events.
//!
//! Publication is split in three so a creator can build everything privately and publish
//! atomically: [`SessionStore::prepare`] builds an unpublished session, [`SessionStore::enter`]
//! makes it live (the authoritative duplicate-id check) and [`SessionStore::announce`] emits
//! `session/created`. The [`SessionDetach`] returned by `enter` is bound to that exact entry, so
//! a stale capability can never remove a later session that reuses the id.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_kernel::{Context, Notification, Parallel, ScopeTag};
use parking_lot::Mutex;

use crate::error::SessionError;
use crate::event::SessionEvent;
use crate::fork::fork_seed;
use crate::header::{SessionHeader, SessionMeta, now_ms};
use crate::ids::SessionId;
use crate::session::Session;

/// `session/created`: a session became live. A synchronous listener failure vetoes the
/// publication (the creator rolls back, pairing it with `session/disposed`).
pub struct SessionCreated;
impl Notification for SessionCreated {
    const NAME: &'static str = "session/created";
    type Payload = Arc<Session>;
}

/// `session/disposed`: an announced session left the store. Listener failures are contained.
pub struct SessionDisposed;
impl Notification for SessionDisposed {
    const NAME: &'static str = "session/disposed";
    type Payload = Arc<Session>;
}

/// One committed event of a live session, delivered synchronously in append order.
#[derive(Clone, Debug)]
pub struct SessionEventNotice {
    /// The session that committed it.
    pub session: Arc<Session>,
    /// The committed event.
    pub event: Arc<SessionEvent>,
}

/// `session/event`: the durable feed. Persistence, front ends and tests all read it.
pub struct SessionEventFired;
impl Notification for SessionEventFired {
    const NAME: &'static str = "session/event";
    type Payload = SessionEventNotice;
}

/// `session/flush`: a barrier; listeners (persistence) make everything admitted so far durable.
pub struct SessionFlush;
impl Parallel for SessionFlush {
    const NAME: &'static str = "session/flush";
    type Payload = Arc<Session>;
}

#[derive(Default)]
struct Flags {
    announced: bool,
    announcing: bool,
    detach_requested: bool,
    detached: bool,
}

struct Entry {
    token: u64,
    session: Arc<Session>,
    carrier: Option<ScopeTag>,
    flags: Mutex<Flags>,
}

/// Live sessions of this process, keyed by id.
pub struct SessionStore {
    ctx: Context,
    entries: Mutex<HashMap<SessionId, Arc<Entry>>>,
    order: Mutex<Vec<SessionId>>,
    next_token: AtomicU64,
}

/// The capability to remove one exact entry from the store. Idempotent.
pub struct SessionDetach {
    store: Arc<SessionStore>,
    entry: Arc<Entry>,
}

impl SessionStore {
    /// A store dispatching its lifecycle events through `ctx`'s bus.
    pub fn new(ctx: &Context) -> Arc<Self> {
        Arc::new(Self {
            ctx: ctx.clone(),
            entries: Mutex::new(HashMap::new()),
            order: Mutex::new(Vec::new()),
            next_token: AtomicU64::new(1),
        })
    }

    /// Builds an unpublished session. Several preparations of one id may coexist; only one can
    /// [`enter`](Self::enter). Fails early if the id is already live.
    pub fn prepare(
        &self,
        id: Option<SessionId>,
        meta: SessionMeta,
        seed: Option<Vec<SessionEvent>>,
    ) -> Result<Arc<Session>, SessionError> {
        let id = id.unwrap_or_else(SessionId::generate);
        if self.entries.lock().contains_key(&id) {
            return Err(SessionError::AlreadyExists { id });
        }
        Session::new(SessionHeader::new(id, now_ms(), meta), seed)
    }

    /// Builds an unpublished session from a persisted header and log (resume).
    pub fn prepare_loaded(
        &self,
        header: SessionHeader,
        events: Vec<SessionEvent>,
    ) -> Result<Arc<Session>, SessionError> {
        if self.entries.lock().contains_key(&header.id) {
            return Err(SessionError::AlreadyExists { id: header.id });
        }
        Session::new(header, Some(events))
    }

    /// Makes a prepared session live without announcing it. `carrier` routes its events (an
    /// agent passes its scope tag so its scoped listeners hear its own session).
    pub fn enter(
        self: &Arc<Self>,
        session: &Arc<Session>,
        carrier: Option<ScopeTag>,
    ) -> Result<SessionDetach, SessionError> {
        let mut entries = self.entries.lock();
        if entries.contains_key(session.id()) {
            return Err(SessionError::AlreadyExists {
                id: session.id().clone(),
            });
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let ctx = self.ctx.clone();
        let weak = Arc::downgrade(session);
        let hook_carrier = carrier.clone();
        session.attach(
            token,
            Arc::new(move |event: &Arc<SessionEvent>| {
                if let Some(session) = weak.upgrade() {
                    ctx.events().emit::<SessionEventFired>(
                        hook_carrier.as_ref(),
                        &SessionEventNotice {
                            session,
                            event: event.clone(),
                        },
                    );
                }
            }),
        )?;
        let entry = Arc::new(Entry {
            token,
            session: session.clone(),
            carrier,
            flags: Mutex::new(Flags::default()),
        });
        entries.insert(session.id().clone(), entry.clone());
        self.order.lock().push(session.id().clone());
        Ok(SessionDetach {
            store: self.clone(),
            entry,
        })
    }

    /// Emits `session/created` exactly once for a live entry. A synchronous listener failure
    /// is returned as [`SessionError::CreatedVetoed`]; the entry stays announced so that the
    /// creator's rollback detach pairs it with `session/disposed`.
    pub fn announce(&self, session: &Arc<Session>) -> Result<(), SessionError> {
        let entry = self.live_entry(session)?;
        {
            let mut flags = entry.flags.lock();
            if flags.announced {
                return Err(SessionError::AlreadyAnnounced {
                    id: session.id().clone(),
                });
            }
            flags.announced = true;
            flags.announcing = true;
        }
        let result = self
            .ctx
            .events()
            .try_emit::<SessionCreated>(entry.carrier.as_ref(), session);
        let deferred_detach = {
            let mut flags = entry.flags.lock();
            flags.announcing = false;
            flags.detach_requested
        };
        if deferred_detach {
            self.finish_detach(&entry);
        }
        result.map_err(|source| SessionError::CreatedVetoed {
            id: session.id().clone(),
            source,
        })
    }

    fn live_entry(&self, session: &Arc<Session>) -> Result<Arc<Entry>, SessionError> {
        self.entries
            .lock()
            .get(session.id())
            .filter(|e| Arc::ptr_eq(&e.session, session))
            .cloned()
            .ok_or_else(|| SessionError::NotLive {
                id: session.id().clone(),
            })
    }

    fn finish_detach(&self, entry: &Arc<Entry>) {
        let announced = {
            let mut flags = entry.flags.lock();
            if flags.detached {
                return;
            }
            flags.detached = true;
            flags.announced
        };
        {
            let mut entries = self.entries.lock();
            let id = entry.session.id();
            if entries.get(id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
                entries.remove(id);
                self.order.lock().retain(|x| x != id);
            }
        }
        entry.session.detach_hook(entry.token);
        if announced {
            self.ctx
                .events()
                .emit::<SessionDisposed>(entry.carrier.as_ref(), &entry.session);
        }
    }

    /// The live session with this id.
    pub fn get(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.entries.lock().get(id).map(|e| e.session.clone())
    }

    /// Live sessions in entry order.
    pub fn list(&self) -> Vec<Arc<Session>> {
        let entries = self.entries.lock();
        self.order
            .lock()
            .iter()
            .filter_map(|id| entries.get(id).map(|e| e.session.clone()))
            .collect()
    }

    /// Runs the `session/flush` barrier for a live session: resolves once every listener (the
    /// persistence backend) made all events admitted so far durable.
    pub async fn flush(&self, session: &Arc<Session>) -> Result<(), SessionError> {
        let entry = self.live_entry(session)?;
        self.ctx
            .events()
            .parallel::<SessionFlush>(entry.carrier.as_ref(), session.clone())
            .await
            .map_err(|source| SessionError::Flush {
                id: session.id().clone(),
                source,
            })
    }

    /// Prepares a fork of `source`: a new unpublished session seeded with the source's events
    /// up to and including `boundary` (default: the last event), which must not fall inside an
    /// open turn. The child records `parentSession` and `seedLength` and inherits the cwd.
    pub fn fork(
        &self,
        source: &Session,
        boundary: Option<u64>,
        child_id: Option<SessionId>,
    ) -> Result<Arc<Session>, SessionError> {
        if let Some(id) = &child_id
            && self.entries.lock().contains_key(id)
        {
            return Err(SessionError::AlreadyExists { id: id.clone() });
        }
        let seed = source.with_events(|events| fork_seed(events, boundary))?;
        let meta = SessionMeta {
            cwd: source.header().cwd.clone(),
            parent_session: Some(source.id().clone()),
            seed_length: Some(seed.len() as u64),
            ..SessionMeta::default()
        };
        self.prepare(child_id, meta, Some(seed))
    }
}

impl SessionDetach {
    /// Removes the entry from the store (if it is still this exact entry), stops publication and
    /// emits `session/disposed` if it was announced. Requested during `session/created`
    /// dispatch or during one of the session's own publications, it takes effect once that
    /// dispatch unwinds.
    pub fn detach(&self) {
        {
            let mut flags = self.entry.flags.lock();
            if flags.detached {
                return;
            }
            if flags.announcing {
                flags.detach_requested = true;
                return;
            }
        }
        let store = self.store.clone();
        let entry = self.entry.clone();
        self.entry
            .session
            .after_publication(Box::new(move || store.finish_detach(&entry)));
    }

    /// The session this capability detaches.
    pub fn session(&self) -> &Arc<Session> {
        &self.entry.session
    }
}
