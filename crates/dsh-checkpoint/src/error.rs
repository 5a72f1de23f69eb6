//! What can go wrong with checkpoints and rewinds.

use std::path::PathBuf;

/// Why a checkpoint, a rewind, a diff or a prune failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The shadow object store could not be used.
    #[error("checkpoint store {}: {message}", path.display())]
    Store {
        /// The store's directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The session has no workspace directory to checkpoint.
    #[error("session {0} has no working directory")]
    NoWorkspace(String),
    /// A rewind or diff named a turn that has no checkpoint.
    #[error("turn {turn} has no checkpoint: {reason}")]
    NoCheckpoint {
        /// The turn.
        turn: u64,
        /// Why (never recorded, not in the history).
        reason: String,
    },
    /// The session is in a turn; rewinding under a running agent would race it.
    #[error("session {0} is running a turn; stop it (or wait for it) before rewinding")]
    Busy(String),
    /// Files changed since the session's last checkpoint by someone other than the session:
    /// the rewind wrote nothing.
    #[error("{}", refused_message(.changed_since, .conflicts))]
    Refused {
        /// Files that differ from the last checkpoint now.
        changed_since: Vec<String>,
        /// Files the session changed in the rewound turns that someone else changed too
        /// between those turns.
        conflicts: Vec<String>,
    },
    /// The session log refused the rewind's events.
    #[error("cannot record the rewind in the session: {0}")]
    Session(String),
    /// The workspace has more files than a checkpoint records.
    #[error(
        "the workspace has over {limit} files ({files} seen) that are not ignored; it is not \
         checkpointed (add a .gitignore, or work in a smaller directory)"
    )]
    TooLarge {
        /// Files seen when the walk stopped.
        files: usize,
        /// The limit.
        limit: usize,
    },
    /// A fault injected by a test (the crash seam).
    #[error("injected fault after {0} operations")]
    Fault(usize),
}

fn refused_message(changed: &[String], conflicts: &[String]) -> String {
    let mut out = String::from("rewind refused, nothing was written:");
    if !changed.is_empty() {
        out.push_str(" these files changed since the session's last checkpoint (by you or another program): ");
        out.push_str(&changed.join(", "));
        out.push('.');
    }
    if !conflicts.is_empty() {
        out.push_str(" these files were changed between the rewound turns by someone else too: ");
        out.push_str(&conflicts.join(", "));
        out.push('.');
    }
    out.push_str(" Rewind with --force to overwrite them anyway.");
    out
}

impl CheckpointError {
    /// An I/O error with its context.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// A store error with its message.
    pub(crate) fn store(path: &std::path::Path, message: impl std::fmt::Display) -> Self {
        Self::Store {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}
