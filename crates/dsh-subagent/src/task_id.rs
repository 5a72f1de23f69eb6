//! Identity of a background subagent run.

use std::fmt;

/// Identifies one background run within a [`crate::SubagentRuntime`] (`subagent-1`,
/// `subagent-2`, …).
///
/// Ids come from a counter, so they are predictable: knowing one grants nothing. The owner
/// fence (the calling agent's id must equal the run's owner) is the security boundary.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubagentTaskId(String);

impl SubagentTaskId {
    /// Wraps an id given by a caller (for instance the model's `task_id` argument). Any string
    /// is accepted; one the runtime never issued is answered with an unknown-task error.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SubagentTaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SubagentTaskId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}
