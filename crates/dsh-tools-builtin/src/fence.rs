//! The owner fence of background tasks: the access policy of seed decision 3.
//!
//! The executor stores an opaque owner token per task and never interprets it; the policy
//! lives here, in the consumer. A caller may touch a task when the task has no owner, or when
//! its owner token equals the caller's agent id. "Has an owner" means `Some`, so an empty
//! string is a real owner, and a caller with no agent can never touch an owned task. Task ids
//! are predictable (`bash-1`, `bash-2`, …), so this check — not the id — is the security
//! boundary.

use std::sync::Arc;

use dsh_agent::AgentRegistry;
use dsh_kernel::Context;
use dsh_session::SessionId;
use dsh_shell::{ShellError, ShellExecutor, TaskId};
use dsh_tools::{ToolCaller, ToolError};

/// Code of a call that names a task owned by another session.
pub const FOREIGN_TASK: &str = "FOREIGN_TASK";
/// Code of a call that names a task the executor never started.
pub const UNKNOWN_TASK: &str = "UNKNOWN_TASK";
/// Code of a call made where no shell executor is provided.
pub const SHELL_UNAVAILABLE: &str = "SHELL_UNAVAILABLE";

/// The shell executor for a call: the caller's own route when its front end provides one (an
/// editor running commands in its terminals), else the one provided in `ctx`, else the error
/// result that says there is none. Looked up per call so that a remounted executor is picked
/// up without remounting the tools.
pub(crate) fn executor(
    ctx: &Context,
    caller: Option<&ToolCaller>,
) -> Result<Arc<dyn ShellExecutor>, ToolError> {
    if let Some(routed) = dsh_tools::routed::<dyn ShellExecutor>(caller) {
        return Ok(routed);
    }
    ctx.get::<dyn ShellExecutor>().ok_or_else(|| {
        ToolError::coded(
            "ShellUnavailableError",
            SHELL_UNAVAILABLE,
            "no shell executor is available in this runtime",
        )
    })
}

/// The owner token a call stamps on a task it starts, and compares against on access.
pub(crate) fn token_of(caller: Option<&ToolCaller>) -> Option<String> {
    caller.map(|c| c.agent_id.as_str().to_owned())
}

/// Refuses `caller` when the task has an owner and it is not the caller. Unknown ids pass
/// (the executor reports none as their owner) and fail loudly in the read or kill that
/// follows.
pub(crate) fn check_owner(
    executor: &dyn ShellExecutor,
    id: &TaskId,
    caller: Option<&ToolCaller>,
) -> Result<(), ToolError> {
    let owner = executor.owner_of(id);
    match owner {
        Some(_) if owner != token_of(caller) => Err(ToolError::coded(
            "TaskAccessError",
            FOREIGN_TASK,
            format!("task {id} belongs to another session"),
        )),
        _ => Ok(()),
    }
}

/// The agent `id` was disposed: its background tasks are stopped and forgotten
/// ([`ShellExecutor::release_owner`]), because the fence lets nobody else read or stop them and
/// nothing would announce their end. Skipped when a live agent carries the id again: the
/// session lives on in it, and the tasks stay its own.
pub(crate) fn release_tasks_of(ctx: &Context, id: &SessionId) {
    let live = ctx
        .get::<AgentRegistry>()
        .is_some_and(|registry| registry.get(id).is_some());
    if live {
        return;
    }
    if let Some(executor) = ctx.get::<dyn ShellExecutor>() {
        let stopped = executor.release_owner(id.as_str());
        if stopped > 0 {
            tracing::debug!(agent = %id, stopped, "stopped the background tasks of a disposed agent");
        }
    }
}

/// The error result for a failed task operation.
pub(crate) fn task_error(error: ShellError) -> ToolError {
    match error {
        ShellError::UnknownTask(id) => ToolError::coded(
            "TaskNotFoundError",
            UNKNOWN_TASK,
            format!("unknown task {id}"),
        ),
        other => ToolError::new(other.to_string()),
    }
}
