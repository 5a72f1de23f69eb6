//! Who is calling a tool.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::{Context, ScopeTag};
use dsh_session::{Session, SessionId};

/// The agent on whose behalf a call runs, passed explicitly instead of the agent itself so
/// this crate does not depend on `dsh-agent` (dependencies point one way).
///
/// The caller's `ctx` is the agent's scoped context: its tag selects which scoped tools,
/// guards and listeners apply, and routes every `tools/*` event, so an agent-scoped listener
/// only ever sees its own agent's calls.
#[derive(Clone, Debug)]
pub struct ToolCaller {
    /// The calling agent's id (equal to its session id).
    pub agent_id: SessionId,
    /// The calling agent's session.
    pub session: Arc<Session>,
    /// The agent's scoped context.
    pub ctx: Context,
    /// Working directory for path-relative tools, when known.
    pub cwd: Option<PathBuf>,
}

impl ToolCaller {
    /// The routing tag of the caller's context.
    pub fn tag(&self) -> Option<&ScopeTag> {
        self.ctx.tag()
    }
}
