//! The error type of the LLM seam's fallible setup calls.

use dsh_session::{FailureCode, LlmFailure};

/// A boxed error crossing a plugin boundary (the retry log is written by whoever owns the
/// session, so its errors are opaque here).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure of a setup call (`register_adapter`, `prepare_call`).
///
/// Streaming never returns this: stream failures arrive as a terminal `finish` chunk. Setup
/// calls return it so the caller can decide before any request is made; it wraps the same
/// serializable [`LlmFailure`] so a turn can end with it verbatim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{failure}")]
pub struct LlmError {
    /// The normalized failure.
    pub failure: LlmFailure,
}

impl LlmError {
    /// An error with a code and a message.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            failure: LlmFailure::new(code, message),
        }
    }

    /// The normalized failure code.
    pub fn code(&self) -> &FailureCode {
        &self.failure.code
    }
}

impl From<LlmFailure> for LlmError {
    fn from(failure: LlmFailure) -> Self {
        Self { failure }
    }
}

impl From<LlmError> for LlmFailure {
    fn from(e: LlmError) -> Self {
        e.failure
    }
}
