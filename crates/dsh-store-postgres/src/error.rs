//! How database failures surface through the persistence seam.

use dsh_session::{PersistenceError, SessionId};

/// A database failure while doing `context`; the driver's error stays in the source chain.
pub(crate) fn db(
    context: impl Into<String>,
) -> impl FnOnce(tokio_postgres::Error) -> PersistenceError {
    let context = context.into();
    move |e| PersistenceError::Io {
        // The driver's own text for a server error is just "db error"; the server's message
        // ("too many clients", "disk full") is what a person needs.
        context: match e.as_db_error() {
            Some(server) => format!("{context}: {}", server.message()),
            None => context,
        },
        source: std::io::Error::other(e),
    }
}

/// A stored row that cannot be used.
pub(crate) fn bad_row(id: &SessionId, reason: impl Into<String>) -> PersistenceError {
    PersistenceError::Io {
        context: format!("stored session \"{id}\" is damaged in the database"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.into()),
    }
}

/// The failure for a session whose lease another writer holds: the same words as the JSONL
/// store's, so a person hears the same thing whichever store they use.
pub(crate) fn held_elsewhere(id: &SessionId) -> PersistenceError {
    PersistenceError::Io {
        context: format!(
            "session \"{id}\" is in use by another writer (another dsh process, or another \
             store in this one); close the session there first"
        ),
        source: std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "the session's writer lease is held",
        ),
    }
}

/// The stored session moved on without this writer: committing would fork its history.
pub(crate) fn diverged(id: &SessionId, stored: Option<u64>, expected: u64) -> PersistenceError {
    let stored = stored.map_or_else(|| "a different number of".to_owned(), |n| n.to_string());
    PersistenceError::Io {
        context: format!(
            "refusing to write session \"{id}\": the database holds {stored} events where this \
             writer expected {expected} (another writer appended)"
        ),
        source: std::io::Error::other("events out of order"),
    }
}

/// Repeats an error for every waiter that shared one failed write.
pub(crate) fn duplicate(e: &PersistenceError) -> PersistenceError {
    PersistenceError::Io {
        context: e.to_string(),
        source: std::io::Error::other(
            std::error::Error::source(e).map_or_else(String::new, ToString::to_string),
        ),
    }
}
