//! The bridge's own failures and the JSON-RPC errors it answers with.

use agent_client_protocol::{Error, ErrorCode};
use dsh_kernel::KernelError;

/// Why [`crate::serve`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// A required service is missing from the context, or the bridge could not register
    /// itself (the core services must be mounted first).
    #[error("cannot start the ACP bridge")]
    Setup(#[from] KernelError),
    /// The connection failed (an unreadable or unwritable pipe, a malformed frame stream).
    /// Every session was still torn down before this was returned.
    #[error("ACP connection failed: {0}")]
    Transport(#[source] Error),
}

/// `-32602` with the human detail as the message (clients show the message, not the data).
pub(crate) fn invalid(detail: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, detail)
}

/// `-32002` (resource not found) for a session id the bridge does not know, with the id in
/// `data`: ACP defines this code for it and clients act on it (the TypeScript SDK treats
/// closing an unknown session as done, acpx falls back to a new session).
pub(crate) fn unknown_session(id: &dsh_session::SessionId) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("unknown session: {id}"),
    )
    .data(serde_json::json!({ "sessionId": id.as_str() }))
}

/// Whether `error` answers a client's mistake (bad params, unknown session or method) rather
/// than a failure of ours: those are logged at debug level, not as warnings.
pub(crate) fn is_client_error(error: &Error) -> bool {
    [
        ErrorCode::INVALID_PARAMS,
        ErrorCode::INVALID_REQUEST,
        ErrorCode::METHOD_NOT_FOUND,
        ErrorCode::RESOURCE_NOT_FOUND,
        ErrorCode::REQUEST_CANCELLED,
    ]
    .contains(&error.code)
}

/// `-32603` with the human detail as the message.
pub(crate) fn internal(detail: impl Into<String>) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, detail)
}

/// An error and its whole cause chain, for a message that must stand on its own.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut cur = error.source();
    while let Some(e) = cur {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = e.source();
    }
    out
}
