//! Sharing one failure with every waiter of a barrier.

use std::io;

use dsh_session::PersistenceError;

/// A copy of `e` for another waiter of the same flush barrier: every caller that shared the
/// barrier learns the same failure. (`io::Error` is not `Clone`; its kind and message are.)
pub(crate) fn duplicate(e: &PersistenceError) -> PersistenceError {
    use PersistenceError as E;
    match e {
        E::NotFound { id } => E::NotFound { id: id.clone() },
        E::Corrupt { path, line, reason } => E::Corrupt {
            path: path.clone(),
            line: *line,
            reason: reason.clone(),
        },
        E::Unsupported { path, reason } => E::Unsupported {
            path: path.clone(),
            reason: reason.clone(),
        },
        E::Live { id } => E::Live { id: id.clone() },
        E::AlreadyExists { id } => E::AlreadyExists { id: id.clone() },
        E::Ambiguous { id, paths } => E::Ambiguous {
            id: id.clone(),
            paths: paths.clone(),
        },
        E::InvalidId { id, reason } => E::InvalidId {
            id: id.clone(),
            reason: reason.clone(),
        },
        E::NotSupported { operation } => E::NotSupported {
            operation: operation.to_owned(),
        },
        E::Io { context, source } => E::Io {
            context: context.clone(),
            source: io::Error::new(source.kind(), source.to_string()),
        },
        other => E::Io {
            context: other.to_string(),
            source: io::Error::other(
                std::error::Error::source(other).map_or_else(String::new, ToString::to_string),
            ),
        },
    }
}
