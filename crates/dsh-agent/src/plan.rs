//! How a front end learns what an agent it opens should be: the seam between the front ends
//! and the composition root.
//!
//! A front end that creates agents itself (the ACP bridge creates and resumes agents for the
//! editor's sessions) must not pick a provider route or build the per-agent setup on its own:
//! a session resumed there would then drift from the same session resumed in `dsh run` (it
//! did: `session/load` sent a session held with a local model to the default provider). So the
//! composition root provides one [`AgentPlanner`] on the root context, and every front end asks
//! it for the [`AgentPlan`] of a new or a resumed session.

use std::path::Path;

use async_trait::async_trait;
use dsh_session::SessionId;

use crate::agent::AgentOptions;
use crate::error::AgentError;
use crate::factory::Setup;

/// What an agent about to be created or resumed is: its route and its per-agent composition.
pub struct AgentPlan {
    /// The provider route, model and output cap of every request the agent makes.
    pub options: AgentOptions,
    /// The per-agent composition (instructions, reasoning effort, request budget), run before
    /// anything the front end adds for itself.
    pub setup: Option<Setup>,
    /// Something the person should be told about the plan (a resumed session continued on
    /// another route than its own, because they asked for one).
    pub notice: Option<String>,
}

impl AgentPlan {
    /// A plan with exactly these options and nothing else.
    pub fn with_options(options: AgentOptions) -> Self {
        Self {
            options,
            setup: None,
            notice: None,
        }
    }
}

/// The composition root's answer to "what should this agent be?", provided on the root
/// context as `dyn AgentPlanner`.
#[async_trait]
pub trait AgentPlanner: Send + Sync + 'static {
    /// The plan of a fresh session working in `cwd` (absolute).
    async fn plan_new(&self, cwd: &Path) -> Result<AgentPlan, AgentError>;

    /// The plan of stored session `id` about to be resumed: the session keeps the route it
    /// used unless the person named another.
    async fn plan_resume(&self, id: &SessionId) -> Result<AgentPlan, AgentError>;
}
