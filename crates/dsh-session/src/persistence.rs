//! The persistence seam: where sessions go when the process ends.
//!
//! Backends (the JSONL files under `$DSH_HOME/sessions`, later a shared database) implement
//! [`Persistence`]. The agent factory uses it to resume; front ends use it to list, show and
//! fork stored sessions.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::error::SessionError;
use crate::event::{EventKind, SessionEvent};
use crate::header::SessionHeader;
use crate::ids::SessionId;
use crate::message::MessageSource;

/// A session as stored: its header and its (repaired, balanced) log.
#[derive(Clone, Debug)]
pub struct StoredSession {
    /// The header.
    pub header: SessionHeader,
    /// Every event, `seq` contiguous from 0.
    pub events: Vec<SessionEvent>,
}

/// Where a stored session lives, so a front end can tell a person which artifact holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionLocation {
    /// A file on the local disk.
    File(PathBuf),
}

/// One row of a session listing: the header plus facts a backend can read without parsing the
/// log, so listing stays fast however long the conversations are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionListing {
    /// The header.
    pub header: SessionHeader,
    /// Epoch milliseconds of the last durable write (the file's mtime for JSONL).
    pub last_activity: u64,
    /// Size of the stored artifact in bytes, when the backend knows it.
    pub bytes: Option<u64>,
    /// The first prompt a person typed, when it could be read cheaply (best effort).
    pub first_prompt: Option<String>,
    /// The number of turns, when it could be read cheaply (best effort): turn numbers are
    /// consecutive from 1, so the last turn number near the end of the log is the count.
    pub turns: Option<u64>,
}

/// Facts about one stored session that need a full read of its log (`dsh sessions show`).
/// Computing them never modifies the stored artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    /// The header.
    pub header: SessionHeader,
    /// Epoch milliseconds of the last durable write.
    pub last_activity: u64,
    /// Number of readable events.
    pub events: u64,
    /// Number of turns opened.
    pub turns: u64,
    /// The first prompt a person typed.
    pub first_prompt: Option<String>,
    /// Time of the last readable event.
    pub last_event_time: Option<u64>,
    /// Whether the next load will repair the log (torn tail or an open turn to close).
    pub needs_repair: bool,
}

impl SessionSummary {
    /// Summarizes a loaded log; used by backends without a cheaper scan.
    pub fn from_events(header: SessionHeader, events: &[SessionEvent], last_activity: u64) -> Self {
        let mut open = false;
        let mut turns = 0;
        let mut first_prompt = None;
        for e in events {
            match &e.kind {
                EventKind::TurnStart(_) => {
                    turns += 1;
                    open = true;
                }
                EventKind::TurnEnd(_) => open = false,
                EventKind::UserMessage(m)
                    if first_prompt.is_none() && m.source == MessageSource::User =>
                {
                    first_prompt = Some(m.text());
                }
                _ => {}
            }
        }
        Self {
            header,
            last_activity,
            events: events.len() as u64,
            turns,
            first_prompt,
            last_event_time: events.last().map(|e| e.time),
            needs_repair: open,
        }
    }
}

/// Why a persistence operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PersistenceError {
    /// No stored session has this id.
    #[error("session \"{id}\" not found")]
    NotFound {
        /// The id.
        id: SessionId,
    },
    /// The stored artifact is damaged before its last committed turn; it is not touched.
    #[error("session file {path} is corrupt at line {line}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The stored artifact uses a format or event type this version cannot read.
    #[error("session file {path} uses an unsupported format: {reason}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported.
        reason: String,
    },
    /// The session is live in this process (its writer is active); loading, repairing or
    /// forking its stored form now would race with the writer.
    #[error("cannot load session \"{id}\" while it is live")]
    Live {
        /// The id.
        id: SessionId,
    },
    /// A stored session with this id already exists; publishing another would clobber it.
    #[error("session \"{id}\" already exists in storage")]
    AlreadyExists {
        /// The id.
        id: SessionId,
    },
    /// The id is stored more than once (e.g. under two project directories), so which one is
    /// meant cannot be decided.
    #[error("session \"{id}\" is stored more than once: {paths:?}")]
    Ambiguous {
        /// The id.
        id: SessionId,
        /// Every artifact found for it.
        paths: Vec<PathBuf>,
    },
    /// The id cannot name a stored session (e.g. it is empty).
    #[error("invalid session id \"{id}\": {reason}")]
    InvalidId {
        /// The id.
        id: SessionId,
        /// Why.
        reason: String,
    },
    /// A fork was refused (bad boundary, open turn, invalid seed).
    #[error("cannot fork session \"{id}\"")]
    Fork {
        /// The source session.
        id: SessionId,
        /// The session-level reason.
        #[source]
        source: SessionError,
    },
    /// The backend does not implement this operation.
    #[error("this session backend does not support {operation}")]
    NotSupported {
        /// The operation.
        operation: &'static str,
    },
    /// An I/O failure.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A session storage backend.
///
/// Only [`load`](Persistence::load) and [`list`](Persistence::list) are required; the other
/// operations have conservative defaults so a minimal backend (or a test double) stays small.
#[async_trait]
pub trait Persistence: Send + Sync + 'static {
    /// Loads a stored session for resume. A crashed session is repaired (torn tail dropped,
    /// an open turn closed) and the repair made durable before this returns.
    async fn load(&self, id: &SessionId) -> Result<StoredSession, PersistenceError>;

    /// Headers of stored sessions that have at least one event, newest first.
    async fn list(&self) -> Result<Vec<SessionHeader>, PersistenceError>;

    /// Listing rows (header plus cheap facts) of stored sessions that have at least one event,
    /// most recently active first.
    async fn listings(&self) -> Result<Vec<SessionListing>, PersistenceError> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .map(|header| SessionListing {
                last_activity: header.created_at,
                header,
                bytes: None,
                first_prompt: None,
                turns: None,
            })
            .collect())
    }

    /// Facts about one stored session that need a full read of its log.
    async fn summary(&self, id: &SessionId) -> Result<SessionSummary, PersistenceError> {
        let stored = self.load(id).await?;
        let created = stored.header.created_at;
        let last = stored.events.last().map_or(created, |e| e.time);
        Ok(SessionSummary::from_events(
            stored.header,
            &stored.events,
            last,
        ))
    }

    /// Writes a new stored session seeded with `source`'s events up to and including `at_seq`
    /// (default: the last event), which must not fall inside an open turn. The child records
    /// `parentSession` and `seedLength`, keeps the source's cwd, and its log continues with
    /// `session/end-seed`. `child` defaults to a fresh id. Returns the child's header.
    async fn fork(
        &self,
        source: &SessionId,
        at_seq: Option<u64>,
        child: Option<SessionId>,
    ) -> Result<SessionHeader, PersistenceError> {
        let _ = (source, at_seq, child);
        Err(PersistenceError::NotSupported { operation: "fork" })
    }

    /// Where the stored session lives.
    async fn locate(&self, id: &SessionId) -> Result<SessionLocation, PersistenceError> {
        let _ = id;
        Err(PersistenceError::NotSupported {
            operation: "locate",
        })
    }
}
