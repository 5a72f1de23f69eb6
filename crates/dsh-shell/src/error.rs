//! The one error type of the shell seam.

use std::io;
use std::path::PathBuf;

use crate::task::TaskId;

/// Why the executor refused a request or could not start a process.
///
/// Only infrastructure problems are errors: a command that exits non-zero, times out or is
/// cancelled still resolves to a [`ShellRunResult`](crate::ShellRunResult), because the model
/// needs to see those outcomes as output, not as a failed tool call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The configuration cannot describe a working executor (zero timeouts, a default above the
    /// cap, an empty output tail, ...). Raised by [`ShellConfig::validate`](crate::ShellConfig::validate).
    #[error("invalid shell config: {0}")]
    InvalidConfig(String),

    /// A request asked for a zero timeout, which would kill the command before it ran.
    #[error("invalid timeout: expected a positive duration, got 0")]
    ZeroTimeout,

    /// The command cannot be handed to `bash -c`: it contains a NUL byte, or the system refused
    /// it as too long (one argument may hold at most 128 KiB on Linux). Says which, so the model
    /// can rewrite it rather than suspect a missing `bash`.
    #[error("invalid command: {0}")]
    InvalidCommand(String),

    /// An extra environment variable name cannot be passed to a process (empty, or containing
    /// `=` or a NUL byte).
    #[error("invalid environment variable name {name:?}: {reason}")]
    InvalidEnv {
        /// The offending name, as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The working directory does not exist or is not a directory. Names the path so the model
    /// can correct it.
    #[error("workdir {} is not a usable directory: {source}", path.display())]
    BadWorkdir {
        /// The directory that was asked for.
        path: PathBuf,
        /// What the file system said about it.
        #[source]
        source: io::Error,
    },

    /// No workdir was given, none is configured, and the process has no readable current
    /// directory to fall back to.
    #[error("no workdir given and the current directory is unavailable: {0}")]
    NoDefaultWorkdir(#[source] io::Error),

    /// `bash`, or what keeps it supervised (the group supervisor, the reaper thread, the output
    /// pipes; see [`LocalShellExecutor`](crate::LocalShellExecutor)), could not be started.
    #[error("failed to spawn {what}: {source}")]
    Spawn {
        /// Which process failed to start.
        what: &'static str,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },

    /// The request's cancellation token was already cancelled, so nothing was started.
    #[error("the command was cancelled before it started")]
    Cancelled,

    /// The executor has been disposed; it starts nothing any more.
    #[error("the shell executor has been disposed and starts no new commands")]
    Disposed,

    /// The installed [`Supervision`](crate::Supervision) refused to start the command (for
    /// instance `SANDBOX_UNAVAILABLE`: a confining sandbox mode that this kernel cannot
    /// enforce). Nothing was spawned.
    #[error("{message}")]
    Refused {
        /// A stable machine-readable code, e.g. `SANDBOX_UNAVAILABLE`.
        code: &'static str,
        /// What happened and what to do about it, for the model and the user.
        message: String,
    },

    /// No background task with this id was ever started by this executor.
    #[error("unknown background task {0}")]
    UnknownTask(TaskId),
}
