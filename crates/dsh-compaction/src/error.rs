//! Why a compaction did not happen.

use dsh_session::{LlmFailure, SessionError};

/// A compaction that changed nothing, and why.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// There is nothing old enough to summarize (the whole history is the retained tail, or
    /// it is a lone earlier checkpoint).
    #[error("nothing to compact: the history is already as short as the retained tail")]
    NothingToCompact,
    /// The agent is running a turn; a manual compaction waits for it to be idle.
    #[error("the agent is busy; compact between turns")]
    Busy,
    /// The request was cancelled; cancellation wins and the history is unchanged.
    #[error("compaction cancelled")]
    Cancelled,
    /// The summary call failed.
    #[error("the summary call failed: {0}")]
    Llm(LlmFailure),
    /// The model's answer was unusable (empty, or no shorter than what it summarized).
    #[error("the summary was rejected: {0}")]
    Rejected(String),
    /// The log refused an event.
    #[error("cannot record the compaction: {0}")]
    Session(#[from] SessionError),
}

impl CompactionError {
    /// The `{code, message}` recorded in `compaction/end`.
    pub fn to_json(&self) -> serde_json::Value {
        let code = match self {
            Self::NothingToCompact => "NOTHING_TO_COMPACT".to_owned(),
            Self::Busy => "BUSY".to_owned(),
            Self::Cancelled => "ABORTED".to_owned(),
            Self::Llm(f) => f.code.to_string(),
            Self::Rejected(_) => "REJECTED".to_owned(),
            Self::Session(_) => "SESSION".to_owned(),
        };
        serde_json::json!({"code": code, "message": self.to_string()})
    }
}
