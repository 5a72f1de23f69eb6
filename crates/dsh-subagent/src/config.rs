//! How far delegation may go and how children treat approvals.

use serde::Deserialize;

/// What a child does when a `tools/pre-execute` policy asks for approval.
///
/// A child has no person watching it: the parent's front end does not route questions for the
/// child's session, so an `Ask` that reached the approval service could block the child (and
/// the parent waiting on it) forever. The child's own setup therefore rewrites `Ask` before the
/// pipeline sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildApprovals {
    /// Refuse the call with a reason the child's model can act on (the reference
    /// implementation's `approval/policy = never`). The safe default: delegation never widens
    /// what runs without a person's consent.
    #[default]
    Deny,
    /// Run the call as if approved. For trusted, sandboxed deployments only.
    Allow,
}

/// Configuration of the [`crate::SubagentRuntime`].
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields, default)]
pub struct SubagentConfig {
    /// Deepest delegation allowed: a top-level agent is at depth 0, its children at 1. A
    /// request that would create a child deeper than this fails and creates nothing; 0 forbids
    /// delegation.
    pub max_depth: u32,
    /// How many completion notices in a row may wake an idle parent before later ones are only
    /// injected (they then join the parent's next turn). Reset whenever the parent claims a
    /// person's message, so two agents cannot wake each other forever.
    pub max_consecutive_wakes: u32,
    /// How a child answers an approval request.
    pub approvals: ChildApprovals,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        Self {
            max_depth: 3,
            max_consecutive_wakes: 3,
            approvals: ChildApprovals::Deny,
        }
    }
}
