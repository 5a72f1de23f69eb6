//! The persistence seam: where sessions go when the process ends.
//!
//! Backends (the JSONL files under `$DSH_HOME/sessions`, later a shared database) implement
//! [`Persistence`]. The agent factory uses it to resume; front ends use it to list.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::event::SessionEvent;
use crate::header::SessionHeader;
use crate::ids::SessionId;

/// A session as stored: its header and its (repaired, balanced) log.
#[derive(Clone, Debug)]
pub struct StoredSession {
    /// The header.
    pub header: SessionHeader,
    /// Every event, `seq` contiguous from 0.
    pub events: Vec<SessionEvent>,
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
    /// The session is live in this process with an open turn; loading it now would race.
    #[error("cannot load session \"{id}\" while it is live")]
    Live {
        /// The id.
        id: SessionId,
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
#[async_trait]
pub trait Persistence: Send + Sync + 'static {
    /// Loads a stored session for resume. A crashed session is repaired (torn tail dropped,
    /// an open turn closed) and the repair made durable before this returns.
    async fn load(&self, id: &SessionId) -> Result<StoredSession, PersistenceError>;

    /// Headers of stored sessions that have at least one event.
    async fn list(&self) -> Result<Vec<SessionHeader>, PersistenceError>;
}
