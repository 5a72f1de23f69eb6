//! The `bash_output` tool: a consuming read of a background task's new output, behind the
//! owner fence.

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_shell::TaskId;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::fence::{check_owner, executor, task_error};
use crate::path::non_empty;
use crate::render::render_task_read;

const DESCRIPTION: &str = "\
Returns the output a background task (started with `bash` and `run_in_background: true`) \
printed since the last read, then its status: `[status: running]`, `[status: completed, exit \
code: N]` or `[status: killed by SIG]`. Each read returns only new output. You are notified \
when a task finishes, so do not poll in a tight loop.";

/// Arguments of `bash_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct BashOutputArgs {
    /// The id returned by `bash` (e.g. `bash-1`).
    pub task_id: String,
}

/// The `bash_output` tool. Parallel-safe: it only reads (each read consumes what it returns,
/// and the executor serializes reads of one task).
#[derive(Debug, Clone)]
pub struct BashOutputTool {
    ctx: Context,
}

impl BashOutputTool {
    /// A tool that finds the `dyn ShellExecutor` service through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

#[async_trait]
impl TypedTool for BashOutputTool {
    type Args = BashOutputArgs;

    fn name(&self) -> &str {
        "bash_output"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &BashOutputArgs) -> bool {
        true
    }

    /// Reads the output of the caller's own background task.
    fn effects(&self, _args: &BashOutputArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: BashOutputArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let id = TaskId::new(non_empty("task_id", &args.task_id)?.trim());
        let executor = executor(&self.ctx, call.caller())?;
        check_owner(executor.as_ref(), &id, call.caller())?;
        let out = executor.read_output(&id).map_err(task_error)?;
        Ok(ToolOutput::text(render_task_read(&out)))
    }

    fn present_call(&self, args: &BashOutputArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Read output of {}", args.task_id),
            kind: ToolKind::Execute,
        })
    }
}
