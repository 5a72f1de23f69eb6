//! Agent-layer errors.

use dsh_kernel::{BoxError, KernelError};
use dsh_session::{MessageId, SessionError, SessionId};

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session refused an event (nothing was logged).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A kernel registration failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A message id is already pending in the inbox.
    #[error("message \"{id}\" is already pending")]
    DuplicatePending {
        /// The duplicated id.
        id: MessageId,
    },
    /// A persisted inbox splice does not apply to the reconstructed inbox.
    #[error("invalid persisted inbox splice at session seq {seq}: {reason}")]
    InvalidPersistedSplice {
        /// Seq of the bad splice.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// An agent with this id is already registered.
    #[error("agent \"{id}\" is already registered")]
    AlreadyRegistered {
        /// The id.
        id: SessionId,
    },
    /// An agent's id differs from its session's id.
    #[error("agent id \"{agent}\" differs from its session id \"{session}\"")]
    IdMismatch {
        /// The agent's id.
        agent: SessionId,
        /// The session's id.
        session: SessionId,
    },
    /// The agent is not the live entry of this registry.
    #[error("agent \"{id}\" is not live in this registry")]
    NotLive {
        /// The id.
        id: SessionId,
    },
    /// `announce` ran twice for one entry.
    #[error("agent \"{id}\" was already announced")]
    AlreadyAnnounced {
        /// The id.
        id: SessionId,
    },
    /// An `agent/created` listener vetoed publication.
    #[error("publishing agent \"{id}\" was vetoed by an agent/created listener")]
    CreatedVetoed {
        /// The id.
        id: SessionId,
        /// The listener's failure.
        #[source]
        source: BoxError,
    },
    /// No factory is registered.
    #[error("no agent factory registered (load an agent-loop plugin)")]
    NoFactory,
    /// A second factory was registered.
    #[error("an agent factory is already registered")]
    FactoryExists,
    /// `require_initiator` outside any initiator boundary.
    #[error("no initiating agent is active")]
    NoInitiator,
    /// The initiator scope is closing or closed.
    #[error("agent initiator scope is disposed")]
    InitiatorDisposed,
    /// Invalid agent options.
    #[error("{0}")]
    InvalidOptions(String),
    /// Creation or resume failed.
    #[error("{message}")]
    Creation {
        /// What failed.
        message: String,
        /// The underlying failure, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// Resume needs a persistence backend.
    #[error("cannot resume: session persistence is not configured")]
    PersistenceNotConfigured,
}

impl AgentError {
    /// A creation failure with a message and an optional cause.
    pub fn creation(message: impl Into<String>, source: Option<BoxError>) -> Self {
        Self::Creation {
            message: message.into(),
            source,
        }
    }
}
