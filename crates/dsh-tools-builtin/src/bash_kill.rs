//! The `bash_kill` tool: stops a background task's whole process group, behind the owner
//! fence.

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_shell::{TaskId, TaskStatus};
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::fence::{check_owner, executor, task_error};
use crate::path::non_empty;
use crate::render::render_status;

const DESCRIPTION: &str = "\
Stops a background task started with `bash` and `run_in_background: true` (SIGTERM to its \
whole process group, then SIGKILL after a grace period). Its remaining output stays readable \
with `bash_output`.";

/// Arguments of `bash_kill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct BashKillArgs {
    /// The id returned by `bash` (e.g. `bash-1`).
    pub task_id: String,
}

/// The `bash_kill` tool. Exclusive: it changes the world other calls may be observing.
#[derive(Debug, Clone)]
pub struct BashKillTool {
    ctx: Context,
}

impl BashKillTool {
    /// A tool that finds the `dyn ShellExecutor` service through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

#[async_trait]
impl TypedTool for BashKillTool {
    type Args = BashKillArgs;

    fn name(&self) -> &str {
        "bash_kill"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// Stops only the caller's own background task (the executor checks the owner).
    fn effects(&self, _args: &BashKillArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: BashKillArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let id = TaskId::new(non_empty("task_id", &args.task_id)?.trim());
        let executor = executor(&self.ctx, call.caller())?;
        check_owner(executor.as_ref(), &id, call.caller())?;
        if executor.kill(&id).map_err(task_error)? {
            return Ok(ToolOutput::text(format!(
                "requested termination of task {id}"
            )));
        }
        // `kill` refused: the task has ended, or a stop is already under way.
        let status = executor
            .list()
            .into_iter()
            .find(|task| task.id == id)
            .map(|task| task.status)
            .ok_or_else(|| task_error(dsh_shell::ShellError::UnknownTask(id.clone())))?;
        let text = match status {
            TaskStatus::Running => {
                format!("termination of task {id} was already requested [status: running]")
            }
            done => format!("task {id} had already finished {}", render_status(&done)),
        };
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &BashKillArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Stop {}", args.task_id),
            kind: ToolKind::Execute,
        })
    }
}
