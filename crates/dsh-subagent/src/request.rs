//! What a delegation asks for, and what the child inherits from its parent.

use dsh_agent::{AgentOptions, AgentRef};
use dsh_session::{SessionId, SessionMeta, SessionOrigin};

/// One delegated task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentRequest {
    /// The task, as a standalone prompt: the child does not see the parent's conversation.
    pub prompt: String,
    /// A 3–5 word label, shown to people and used for a background run's notices.
    pub description: String,
    /// A model id replacing the parent's (same provider route); `None` inherits it.
    pub model: Option<String>,
    /// An earlier child of the same parent to continue (its session id): the prompt becomes
    /// its next message and it keeps its history. `None` starts a fresh child.
    pub resume: Option<SessionId>,
}

impl SubagentRequest {
    /// A request for `prompt` labelled `description`, on the parent's model.
    pub fn new(prompt: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            description: description.into(),
            model: None,
            resume: None,
        }
    }
}

/// The child's route: the parent's provider, model and output cap, with the requested model
/// replacing the parent's. A parent whose route comes from an `agent/request` listener rather
/// than its options contributes the route its last request actually used.
pub(crate) fn child_options(parent: &AgentRef, model: Option<&str>) -> AgentOptions {
    let mut options = parent.options().clone();
    if (options.provider.is_none() || options.model.is_none())
        && let Some(used) = parent.session().request_context()
    {
        options.provider.get_or_insert(used.provider);
        options.model.get_or_insert(used.model);
    }
    if let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) {
        options.model = Some(model.to_owned());
    }
    options
}

/// The child's session metadata: lineage (`parentSession`, origin `subagent`, depth) and the
/// parent's working directory.
pub(crate) fn child_meta(parent: &AgentRef, depth: u32) -> SessionMeta {
    SessionMeta {
        cwd: parent.session().cwd(),
        parent_session: Some(parent.id().clone()),
        origin: Some(SessionOrigin::Subagent),
        delegation_depth: depth,
        ..SessionMeta::default()
    }
}
