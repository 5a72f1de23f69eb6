//! Subagents for dsh: an agent delegates a task to a child agent and gets its final report.
//!
//! The child is an ordinary agent created through the factory
//! (`AgentRegistry::create(parent.ctx(), …)`): delegation is not an `Agent` method. Because it
//! is created through the parent's scoped context, the registry records the parent as its
//! live owner (`is_owned_by`, `children_of`), and the parent's teardown disposes it first.
//! The child has its own session (persisted like any other when persistence is mounted) whose
//! header records `parentSession`, origin `subagent` and the delegation depth; it inherits the
//! parent's provider, model, output cap and working directory unless the request names a
//! model.
//!
//! - [`SubagentRuntime`]: the service. [`delegate`](SubagentRuntime::delegate) runs a child
//!   in the foreground; [`start`](SubagentRuntime::start) runs one in the background, owned by
//!   the runtime (so ownership survives a remount of the tools) and announced to the parent
//!   when it ends; [`read`](SubagentRuntime::read), [`wait`](SubagentRuntime::wait) and
//!   [`kill`](SubagentRuntime::kill) sit behind the owner fence. It also cascades
//!   cancellation: cancelling an agent cancels every agent it owns with cause `parent`.
//! - The tools `subagent`, `subagent_output` and `subagent_kill`, and [`SubagentPlugin`],
//!   which mounts them (and the runtime when none is provided).
//! - A child never blocks on an approval nobody can answer: `tools/pre-execute` `Ask` is
//!   rewritten for live children by the [`ChildApprovals`] policy (deny by default), by a
//!   global listener the runtime registers (so provide the runtime — mount the plugin —
//!   before any approval policy) and by one in the child's own unpublished setup, which also
//!   adds a prompt section telling the child to end with a final report.
//! - Headless front ends await [`SubagentRuntime::when_quiet`] before reading the final
//!   answer, so background results are not cut off.
//! - [`SubagentOutcome`]: how a child ended, read from its log. A child that fails is an
//!   error result for the parent, never a crash.

mod approval;
mod background;
mod cascade;
mod child_setup;
mod children;
mod config;
mod drive;
mod error;
mod kill_tool;
mod list_tool;
mod notice;
mod outcome;
mod output_tool;
mod plugin;
mod request;
mod runtime;
mod spawn;
mod subagent_tool;
mod task_id;
mod tasks;
mod tool_error;

pub use background::{SubagentTaskSnapshot, SubagentTaskStatus};
pub use child_setup::{SUBAGENT_SECTION, SUBAGENT_SECTION_ORDER, SUBAGENT_SECTION_TEXT};
pub use children::{ChildRecord, children_in_log};
pub use config::{ChildApprovals, SubagentConfig};
pub use error::SubagentError;
pub use kill_tool::{SubagentKillArgs, SubagentKillTool};
pub use list_tool::{SubagentListArgs, SubagentListTool};
pub use notice::NOTICE_PLUGIN;
pub use outcome::{
    SUBAGENT_ABNORMAL, SUBAGENT_CANCELLED, SUBAGENT_DECLINED, SUBAGENT_FAILED, SUBAGENT_MAX_TOKENS,
    SubagentOutcome, SubagentStop, read_outcome,
};
pub use output_tool::{DEFAULT_WAIT, MAX_WAIT, SubagentOutputArgs, SubagentOutputTool};
pub use plugin::SubagentPlugin;
pub use request::SubagentRequest;
pub use runtime::SubagentRuntime;
pub use subagent_tool::{SubagentArgs, SubagentTool};
pub use task_id::SubagentTaskId;
pub use tasks::KillOutcome;
pub use tool_error::{
    FOREIGN_TASK, NOT_A_CHILD, SUBAGENT_BUSY, SUBAGENT_DEPTH_EXCEEDED, SUBAGENT_NO_CALLER,
    SUBAGENT_NOT_STARTED, SUBAGENT_UNAVAILABLE, UNKNOWN_TASK,
};
