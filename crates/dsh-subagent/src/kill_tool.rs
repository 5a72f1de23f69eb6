//! The `subagent_kill` tool: stop a background run, behind the owner fence.

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::background::SubagentTaskStatus;
use crate::task_id::SubagentTaskId;
use crate::tasks::KillOutcome;
use crate::tool_error::{non_empty, runtime, tool_error};

const DESCRIPTION: &str = "\
Stops a background subagent started with `subagent` and `run_in_background: true`. Whatever it \
wrote before stopping stays readable with `subagent_output`.";

/// Arguments of `subagent_kill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SubagentKillArgs {
    /// The id returned by `subagent` (e.g. `subagent-1`).
    pub task_id: String,
}

/// The `subagent_kill` tool. Exclusive: it changes what other calls may be observing.
#[derive(Debug, Clone)]
pub struct SubagentKillTool {
    ctx: Context,
}

impl SubagentKillTool {
    /// A tool that finds the [`crate::SubagentRuntime`] through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

#[async_trait]
impl TypedTool for SubagentKillTool {
    type Args = SubagentKillArgs;

    fn name(&self) -> &str {
        "subagent_kill"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// Stops only the caller's own child.
    fn effects(&self, _args: &SubagentKillArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: SubagentKillArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let id = SubagentTaskId::new(non_empty("task_id", &args.task_id)?);
        let runtime = runtime(&self.ctx)?;
        let caller = call.caller().map(|c| &c.agent_id);
        let text = match runtime.kill(&id, caller).map_err(tool_error)? {
            KillOutcome::Requested => format!("requested cancellation of subagent {id}"),
            KillOutcome::AlreadyFinished(snapshot) => match snapshot.status {
                SubagentTaskStatus::Finished(outcome) => format!(
                    "subagent {id} had already finished [status: {}]",
                    outcome.status_word()
                ),
                SubagentTaskStatus::Running => format!("subagent {id} is still stopping"),
            },
        };
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &SubagentKillArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Stop {}", args.task_id),
            kind: ToolKind::Other,
        })
    }
}
