//! Why a delegation or a background-run operation failed.
//!
//! These are failures of the *delegation*, reported to the model as error results. A child
//! that ran and failed is not an error here: it is a [`crate::SubagentOutcome`] whose stop
//! reason says how it ended.

use dsh_agent::AgentError;
use dsh_kernel::KernelError;
use dsh_session::SessionId;

use crate::task_id::SubagentTaskId;

/// Why a subagent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// The child would be deeper than the configured limit; nothing was created.
    #[error(
        "subagent depth limit reached: this agent is at delegation depth {depth} and the limit \
         is {limit}, so it cannot delegate; do the task yourself"
    )]
    DepthExceeded {
        /// The calling agent's delegation depth.
        depth: u32,
        /// The configured maximum depth.
        limit: u32,
    },
    /// The factory could not create the child (no factory, invalid options, setup failure, or
    /// the calling turn was cancelled during creation).
    #[error("cannot create the subagent: {}", chain(.0))]
    Create(#[source] AgentError),
    /// The child was created but refused the task (its log would not record the prompt); it
    /// has been disposed.
    #[error("cannot hand the task to the subagent: {}", chain(.0))]
    Prompt(#[source] AgentError),
    /// `resume` named a session this agent's own calls did not start.
    #[error(
        "{0} is not a subagent of this session; resume takes an id from an earlier subagent \
         result or from subagent_list"
    )]
    NotAChild(SessionId),
    /// `resume` named a child that is still running (in the background).
    #[error(
        "subagent {0} is still running; wait for it with subagent_output, or stop it with \
         subagent_kill, before continuing it"
    )]
    StillRunning(SessionId),
    /// The stored child could not be loaded to continue it.
    #[error("cannot continue subagent {id}: {}", chain(.source))]
    Resume {
        /// The child's session.
        id: SessionId,
        /// Why it could not be loaded.
        #[source]
        source: AgentError,
    },
    /// The tool was called without a calling agent to delegate from.
    #[error("subagents can only be started by an agent")]
    NoCaller,
    /// [`crate::SubagentRuntime::provide`] was called outside a tokio runtime.
    #[error("the subagent runtime must be provided inside a tokio runtime")]
    NoTokioRuntime,
    /// The runtime is shutting down; no new run may start.
    #[error("the subagent runtime is shut down")]
    Closed,
    /// No background run has this id.
    #[error("unknown subagent task {0}")]
    UnknownTask(SubagentTaskId),
    /// The run belongs to another session (the owner fence).
    #[error("task {0} belongs to another session")]
    ForeignTask(SubagentTaskId),
    /// A kernel registration failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

/// An error and its sources, joined, without repeating text a wrapper already quoted.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
