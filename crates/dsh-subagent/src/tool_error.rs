//! How delegation failures reach the model: coded error results, so replay and front ends can
//! tell them apart without parsing prose.

use std::sync::Arc;

use dsh_agent::{AgentRef, agent_of};
use dsh_kernel::Context;
use dsh_tools::{ToolCallContext, ToolError};

use crate::error::SubagentError;
use crate::outcome::SubagentOutcome;
use crate::runtime::SubagentRuntime;

/// Code: the depth limit refused the delegation; nothing was created.
pub const SUBAGENT_DEPTH_EXCEEDED: &str = "SUBAGENT_DEPTH_EXCEEDED";
/// Code: the child could not be created or could not take the task.
pub const SUBAGENT_NOT_STARTED: &str = "SUBAGENT_NOT_STARTED";
/// Code: no subagent runtime is provided, or it is shut down.
pub const SUBAGENT_UNAVAILABLE: &str = "SUBAGENT_UNAVAILABLE";
/// Code: the call has no calling agent to delegate from.
pub const SUBAGENT_NO_CALLER: &str = "SUBAGENT_NO_CALLER";
/// Code: the named run belongs to another session.
pub const FOREIGN_TASK: &str = "FOREIGN_TASK";
/// Code: no run has the named id.
pub const UNKNOWN_TASK: &str = "UNKNOWN_TASK";
/// Code: `resume` named a session that is not the caller's child.
pub const NOT_A_CHILD: &str = "SUBAGENT_NOT_A_CHILD";
/// Code: `resume` named a child that is still running.
pub const SUBAGENT_BUSY: &str = "SUBAGENT_BUSY";

/// The error result for a failed delegation operation.
pub(crate) fn tool_error(error: SubagentError) -> ToolError {
    let (name, code) = match &error {
        SubagentError::DepthExceeded { .. } => ("SubagentDepthError", SUBAGENT_DEPTH_EXCEEDED),
        SubagentError::Create(_) | SubagentError::Prompt(_) | SubagentError::Resume { .. } => {
            ("SubagentStartError", SUBAGENT_NOT_STARTED)
        }
        SubagentError::NotAChild(_) => ("SubagentAccessError", NOT_A_CHILD),
        SubagentError::StillRunning(_) => ("SubagentBusyError", SUBAGENT_BUSY),
        SubagentError::NoCaller => ("SubagentCallerError", SUBAGENT_NO_CALLER),
        SubagentError::Closed | SubagentError::NoTokioRuntime => {
            ("SubagentUnavailableError", SUBAGENT_UNAVAILABLE)
        }
        SubagentError::UnknownTask(_) => ("TaskNotFoundError", UNKNOWN_TASK),
        SubagentError::ForeignTask(_) => ("TaskAccessError", FOREIGN_TASK),
        SubagentError::Kernel(_) => return ToolError::new(error.to_string()),
    };
    ToolError::coded(name, code, error.to_string())
}

/// The error result for a child that did not complete (`None` for a completed run).
pub(crate) fn outcome_error(outcome: &SubagentOutcome) -> Option<ToolError> {
    let code = outcome.code()?;
    Some(ToolError::coded("SubagentError", code, outcome.render()))
}

/// The runtime, looked up per call so a remounted runtime is picked up without remounting the
/// tools.
pub(crate) fn runtime(ctx: &Context) -> Result<Arc<SubagentRuntime>, ToolError> {
    SubagentRuntime::of(ctx).ok_or_else(|| {
        ToolError::coded(
            "SubagentUnavailableError",
            SUBAGENT_UNAVAILABLE,
            "no subagent runtime is available in this runtime",
        )
    })
}

/// The calling agent (`caller.ctx` is its scoped context).
pub(crate) fn calling_agent(call: &ToolCallContext) -> Result<AgentRef, ToolError> {
    call.caller()
        .and_then(|caller| agent_of(&caller.ctx))
        .ok_or_else(|| tool_error(SubagentError::NoCaller))
}

/// A required, non-blank string argument.
pub(crate) fn non_empty<'a>(field: &str, value: &'a str) -> Result<&'a str, ToolError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(ToolError::new(format!("`{field}` must not be empty")));
    }
    Ok(trimmed)
}
