//! Session errors.

use dsh_kernel::BoxError;

use crate::ids::SessionId;

/// Why a session operation failed. Every append failure leaves the log unchanged.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The event's payload is not lossless JSON (non-serializable, or `-0`).
    #[error("session event `{type_name}` carries non-JSON-serializable data: {reason}")]
    NonJson {
        /// The event type.
        type_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An append was attempted from inside a `session/event` publication of the same session.
    #[error(
        "session append cannot reenter while session `{id}` is publishing an event; \
         defer the append until the listener returns"
    )]
    Reentrant {
        /// The session.
        id: SessionId,
    },
    /// The event breaks a shape or ordering rule of the log.
    #[error("invalid `{type_name}` event at seq {seq}: {reason}")]
    InvalidEvent {
        /// Where it would have gone.
        seq: u64,
        /// The event type.
        type_name: String,
        /// The rule broken.
        reason: String,
    },
    /// A pre-commit validator refused the event.
    #[error("`{type_name}` event vetoed before commit")]
    Vetoed {
        /// The event type.
        type_name: String,
        /// The validator's reason.
        #[source]
        source: BoxError,
    },
    /// A session with this id is already live in the store.
    #[error("session \"{id}\" already exists")]
    AlreadyExists {
        /// The id.
        id: SessionId,
    },
    /// The session object is already attached to a store.
    #[error("session \"{id}\" is already attached to a store")]
    AlreadyAttached {
        /// The id.
        id: SessionId,
    },
    /// The session is not the live entry of this store.
    #[error("session \"{id}\" is not live in this store")]
    NotLive {
        /// The id.
        id: SessionId,
    },
    /// No session with this id is known.
    #[error("session \"{id}\" not found")]
    NotFound {
        /// The id.
        id: SessionId,
    },
    /// `announce` ran twice for one entry.
    #[error("session \"{id}\" was already announced")]
    AlreadyAnnounced {
        /// The id.
        id: SessionId,
    },
    /// A `session/created` listener vetoed publication.
    #[error("publishing session \"{id}\" was vetoed by a session/created listener")]
    CreatedVetoed {
        /// The id.
        id: SessionId,
        /// The listener's failure.
        #[source]
        source: BoxError,
    },
    /// A fork boundary does not name an event of the source.
    #[error("invalid fork boundary {boundary}: the source has {len} events")]
    InvalidBoundary {
        /// The requested boundary seq.
        boundary: u64,
        /// The source's length.
        len: u64,
    },
    /// A fork boundary falls inside an open turn.
    #[error("cannot fork at seq {boundary}: turn {turn} is open there")]
    OpenTurn {
        /// The requested boundary seq.
        boundary: u64,
        /// The open turn.
        turn: u64,
    },
    /// A `session/flush` listener failed.
    #[error("flushing session \"{id}\" failed")]
    Flush {
        /// The id.
        id: SessionId,
        /// The first listener failure.
        #[source]
        source: BoxError,
    },
}
