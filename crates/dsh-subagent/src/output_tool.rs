//! The `subagent_output` tool: the result of a background run, behind the owner fence.

use std::time::Duration;

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::background::{SubagentTaskSnapshot, SubagentTaskStatus};
use crate::task_id::SubagentTaskId;
use crate::tool_error::{non_empty, runtime, tool_error};

const DESCRIPTION: &str = "\
Returns the result of a background subagent (started with `subagent` and \
`run_in_background: true`): its final report and `[status: completed]`, or what went wrong, or \
`[status: running]` while it works. You are notified when a background subagent finishes, so \
do not poll; set `wait: true` to block until it ends (at most `timeout_ms`, default 30000).";

/// Default wait of `subagent_output` with `wait: true`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// Longest wait `subagent_output` accepts.
pub const MAX_WAIT: Duration = Duration::from_secs(600);

/// Arguments of `subagent_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SubagentOutputArgs {
    /// The id returned by `subagent` (e.g. `subagent-1`).
    pub task_id: String,
    /// Wait until the subagent finishes (bounded by `timeout_ms`).
    #[serde(default)]
    pub wait: bool,
    /// Longest wait in milliseconds (positive; capped at 600000).
    #[serde(default)]
    pub timeout_ms: Option<f64>,
}

/// The `subagent_output` tool. Parallel-safe: it only reads.
#[derive(Debug, Clone)]
pub struct SubagentOutputTool {
    ctx: Context,
}

impl SubagentOutputTool {
    /// A tool that finds the [`crate::SubagentRuntime`] through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

/// The wait a call asks for, capped at [`MAX_WAIT`]. A value too large for a `Duration`
/// (`1e300`) is the longest wait rather than a panic in `Duration::from_secs_f64`.
fn wait_of(ms: Option<f64>) -> Result<Duration, ToolError> {
    match ms {
        None => Ok(DEFAULT_WAIT),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Duration::try_from_secs_f64(ms / 1000.0)
            .unwrap_or(MAX_WAIT)
            .min(MAX_WAIT)),
        Some(ms) => Err(ToolError::new(format!(
            "invalid timeout_ms: expected a positive number, got {ms}"
        ))),
    }
}

/// The model-facing text of a snapshot, and whether it reports a failure.
pub(crate) fn render_snapshot(snapshot: &SubagentTaskSnapshot) -> ToolOutput {
    match &snapshot.status {
        SubagentTaskStatus::Running => ToolOutput::text(format!(
            "subagent {} ({}) is still working\n[status: running]",
            snapshot.id, snapshot.description
        )),
        SubagentTaskStatus::Finished(outcome) => {
            let text = format!(
                "{}\n\n[status: {}]",
                outcome.render(),
                outcome.status_word()
            );
            if outcome.is_completed() {
                ToolOutput::text(text)
            } else {
                ToolOutput::error_text(text)
            }
        }
    }
}

#[async_trait]
impl TypedTool for SubagentOutputTool {
    type Args = SubagentOutputArgs;

    fn name(&self) -> &str {
        "subagent_output"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &SubagentOutputArgs) -> bool {
        true
    }

    /// Reads the caller's own child's answer.
    fn effects(&self, _args: &SubagentOutputArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: SubagentOutputArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let id = SubagentTaskId::new(non_empty("task_id", &args.task_id)?);
        let timeout = wait_of(args.timeout_ms)?;
        let runtime = runtime(&self.ctx)?;
        let caller = call.caller().map(|c| &c.agent_id);
        let snapshot = if args.wait {
            runtime.wait(&id, caller, call.cancel(), timeout).await
        } else {
            runtime.read(&id, caller)
        }
        .map_err(tool_error)?;
        Ok(render_snapshot(&snapshot))
    }

    fn present_call(&self, args: &SubagentOutputArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Read result of {}", args.task_id),
            kind: ToolKind::Read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_positive_and_capped() {
        assert_eq!(wait_of(None).ok(), Some(DEFAULT_WAIT));
        assert_eq!(
            wait_of(Some(1500.0)).ok(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(wait_of(Some(1e12)).ok(), Some(MAX_WAIT));
        assert_eq!(
            wait_of(Some(1e300)).ok(),
            Some(MAX_WAIT),
            "too large for a Duration"
        );
        assert_eq!(wait_of(Some(f64::MAX)).ok(), Some(MAX_WAIT));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(wait_of(Some(bad)).is_err());
        }
    }
}
