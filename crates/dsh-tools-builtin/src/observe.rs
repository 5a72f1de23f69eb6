//! The observation record behind the file tools' read-before-write policy.
//!
//! A `write` over an existing file and every `edit` must be based on what the session last
//! saw: the session must have read the file, and the file must not have changed since. That
//! keeps a model from overwriting a file it never looked at, or clobbering a change made
//! meanwhile by the user, another session or a command. The record is per session (keyed by
//! agent id) and lives in a service shared by the tools, so `read` in one tool and `edit` in
//! another agree, and one session's reads never license another session's writes.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use dsh_session::SessionId;
use dsh_tools::ToolError;
use parking_lot::Mutex;

/// Code of a write or edit of a file this session has not read.
pub const FS_NOT_OBSERVED: &str = "FS_NOT_OBSERVED";
/// Code of a write or edit of a file that changed since this session read it.
pub const FS_STALE_VERSION: &str = "FS_STALE_VERSION";

/// A file's stat identity: what "unchanged since it was read" compares.
///
/// Size, modification and change times (to the nanosecond the file system keeps) and the
/// inode: an in-place rewrite moves the times, an atomic replace changes the inode. Two
/// writes of the same length within one timestamp tick of a coarse file system are the
/// blind spot; content hashing would close it at the cost of reading every file twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileVersion {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    dev: u64,
}

impl FileVersion {
    /// The version described by `meta` (of the file itself, symlinks followed).
    pub fn of(meta: &Metadata) -> Self {
        Self {
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// What a session last saw at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// A read found nothing there.
    Absent,
    /// A read saw this version.
    Present(FileVersion),
}

/// Why a write or edit is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// This session never read the file.
    NotObserved,
    /// The file is not what this session read.
    Stale,
}

impl Violation {
    /// The error result naming `display` (the path as the model sees it).
    pub fn into_error(self, display: &str) -> ToolError {
        match self {
            Violation::NotObserved => ToolError::coded(
                "FsObservationError",
                FS_NOT_OBSERVED,
                format!(
                    "{display} has not been read in this session; read the file first, then retry"
                ),
            ),
            Violation::Stale => ToolError::coded(
                "FsObservationError",
                FS_STALE_VERSION,
                format!("{display} changed since it was read; read it again, then retry"),
            ),
        }
    }
}

/// Per-session observations of files, provided as a service by
/// [`BuiltinToolsPlugin`](crate::BuiltinToolsPlugin) and shared by `read`, `write` and `edit`.
///
/// Keys are absolute, lexically normalized paths; `None` as the session is the bucket of
/// agentless calls. A session's record is dropped when its agent is disposed.
#[derive(Debug, Default)]
pub struct FileObservations {
    sessions: Mutex<HashMap<Option<SessionId>, HashMap<PathBuf, Seen>>>,
}

impl FileObservations {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what `session` saw at `path`: `None` when the file did not exist.
    pub fn record(&self, session: Option<&SessionId>, path: &Path, version: Option<FileVersion>) {
        let seen = version.map_or(Seen::Absent, Seen::Present);
        self.sessions
            .lock()
            .entry(session.cloned())
            .or_default()
            .insert(path.to_path_buf(), seen);
    }

    /// Whether `session` may change the file at `path` whose current version is `current`.
    /// Only an existing file is checked; creating a file that does not exist needs no read.
    pub fn check(
        &self,
        session: Option<&SessionId>,
        path: &Path,
        current: FileVersion,
    ) -> Result<(), Violation> {
        let sessions = self.sessions.lock();
        let seen = sessions
            .get(&session.cloned())
            .and_then(|paths| paths.get(path))
            .copied();
        match seen {
            None => Err(Violation::NotObserved),
            Some(Seen::Present(version)) if version == current => Ok(()),
            Some(_) => Err(Violation::Stale),
        }
    }

    /// Forgets everything `session` saw (its agent is gone; a later agent with the same id
    /// starts blind).
    pub fn forget_session(&self, session: &SessionId) {
        self.sessions.lock().remove(&Some(session.clone()));
    }
}
