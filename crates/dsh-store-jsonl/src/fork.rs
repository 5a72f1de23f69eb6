//! Forking at the storage level: a new session file seeded from a stored one.
//!
//! `dsh sessions fork ID` works on stored sessions, not live ones. The source is read as a
//! repairing load would see it (torn tail left out, an interrupted turn closed) but never
//! written: a fork does not modify its source. The seed is cut with [`fork_seed`] (never inside
//! an open turn), and the child is built with [`Session::new`] so it gets exactly the log a live fork
//! would: the seed, then `session/end-seed`. The child is published like any new session, so an
//! existing file with its id is never overwritten.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_session::{
    PersistenceError, Session, SessionHeader, SessionId, SessionMeta, fork_seed, now_ms,
};
use parking_lot::Mutex;

use crate::fsync::FileOps;
use crate::layout::session_path;
use crate::writer::SessionFile;
use crate::{load, locate};

/// One fork, run on the blocking pool.
pub(crate) struct ForkJob {
    pub root: PathBuf,
    pub io: Arc<dyn FileOps>,
    pub source_lock: Arc<Mutex<()>>,
    pub child_lock: Arc<Mutex<()>>,
    pub source: SessionId,
    pub at_seq: Option<u64>,
    pub child: SessionId,
}

impl ForkJob {
    pub(crate) fn run(self) -> Result<SessionHeader, PersistenceError> {
        let fork_error = |source| PersistenceError::Fork {
            id: self.source.clone(),
            source,
        };
        // The two locks are never held together, so concurrent forks cannot deadlock.
        let stored = {
            let _exclusive = self.source_lock.lock();
            let path = locate::find(&self.root, &self.source)?;
            load::read_repaired(&path, &self.source)?
        };
        let events: Vec<_> = stored.events.into_iter().map(Arc::new).collect();
        let seed = fork_seed(&events, self.at_seq).map_err(fork_error)?;
        let meta = SessionMeta {
            cwd: stored.header.cwd.clone(),
            parent_session: Some(self.source.clone()),
            seed_length: Some(seed.len() as u64),
            ..SessionMeta::default()
        };
        let header = SessionHeader::new(self.child.clone(), now_ms(), meta);
        let child = Session::new(header.clone(), Some(seed)).map_err(fork_error)?;
        let _exclusive = self.child_lock.lock();
        let mut file = SessionFile::unpublished(session_path(&self.root, &header)?, header.clone());
        file.persist(&*self.io, &child.events())?;
        Ok(header)
    }
}
