//! What can go wrong while a harness starts or opens a session.
//!
//! Every variant carries the words a person needs (which file and line, which variable, which
//! session), because front ends print these errors as they are: `dsh: <error>`.

use dsh_agent::AgentError;
use dsh_kernel::BoxError;

/// A configuration problem: what is wrong and where (file:line:column, variable or flag).
///
/// Its own type, not a [`HarnessError`] variant's string, so `dsh config show` and the secrets
/// scan at start-up can tell a broken configuration from everything else that fails later.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Builds a [`ConfigError`] from a format string.
macro_rules! config_error {
    ($($arg:tt)*) => {
        $crate::error::ConfigError(format!($($arg)*))
    };
}

/// Returns a [`ConfigError`] built from a format string.
macro_rules! config_bail {
    ($($arg:tt)*) => {
        return Err($crate::error::config_error!($($arg)*).into())
    };
}

pub(crate) use {config_bail, config_error};

/// Why a harness could not start, or could not open a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The configuration (file, environment or flags) is invalid or incomplete.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The working directory cannot be used.
    #[error("{0}")]
    Workspace(String),
    /// Sessions cannot be stored or read.
    #[error("{message}")]
    Store {
        /// What could not be done, naming the store.
        message: String,
        /// The store's own error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The session store refused an operation (its own words name the session or file).
    #[error(transparent)]
    Persistence(#[from] dsh_session::PersistenceError),
    /// A session reference names no session, or more than one.
    #[error("{0}")]
    Reference(String),
    /// The provider route of a session cannot be used (no key, bad URL, unknown route).
    #[error("{0}")]
    Route(String),
    /// A service or plugin of the composition failed to start.
    #[error("cannot {what}")]
    Start {
        /// What was being started (`start the shell`, `mount hooks`, …).
        what: String,
        /// Why it failed.
        #[source]
        source: BoxError,
    },
    /// Creating or resuming the session's agent failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A checkpoint, rewind, diff or prune failed (a refused rewind says which files).
    #[error(transparent)]
    Checkpoint(#[from] dsh_checkpoint::CheckpointError),
    /// An image a person attached cannot be sent: unreadable, not an image, too large, or the
    /// session's model reads no images. The text names the file.
    #[error("{0}")]
    Image(String),
}

impl HarnessError {
    /// A store failure with its cause.
    pub(crate) fn store(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Store {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A store failure described fully by its message.
    pub(crate) fn store_message(message: impl Into<String>) -> Self {
        Self::Store {
            message: message.into(),
            source: None,
        }
    }

    /// A start-up failure of `what`.
    pub(crate) fn start(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Start {
            what: what.into(),
            source: source.into(),
        }
    }
}
