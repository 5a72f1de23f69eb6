//! The `subagent` tool: delegate a task to a child agent, waiting for its report or in the
//! background.

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_tools::{
    ToolCallContext, ToolCallResult, ToolEffects, ToolError, ToolKind, ToolOutput,
    ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use dsh_session::SessionId;

use crate::request::SubagentRequest;
use crate::tool_error::{calling_agent, non_empty, outcome_error, runtime, tool_error};

const DESCRIPTION: &str = "\
Delegates a task to a subagent: a fresh agent with the same tools, model and working directory \
that works on its own and answers with a final report.

- `prompt` must stand alone: the subagent does not see this conversation, so include every \
fact, path and constraint it needs, and say what its report should contain.
- `description` is a 3-5 word label shown to the user.
- By default the call waits for the subagent and returns its final report. Independent tasks \
can be delegated in parallel by calling this tool several times in one message.
- With `run_in_background: true` the call returns `started background subagent <id>` at once. \
You are told when it finishes; then read its report with `subagent_output(task_id)`. Stop it \
with `subagent_kill(task_id)`.
- `model` runs the subagent on another model of the same provider.
- Every result names the subagent's session. To give a finished subagent a follow-up task \
with everything it already learned, call this tool again with `resume` set to that id (see \
also `subagent_list`); its `prompt` is then the next message to it.
- A subagent cannot ask the user anything, and tools that need approval are refused to it. \
Delegation depth is limited.
- The report is another model's summary: check the claims that matter.";

/// Arguments of `subagent`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SubagentArgs {
    /// A short (3-5 word) label for the task, shown to the user.
    pub description: String,
    /// The complete, standalone task for the subagent (it does not see this conversation).
    pub prompt: String,
    /// A model id for the subagent (same provider); default: this agent's model.
    #[serde(default)]
    pub model: Option<String>,
    /// Start the subagent in the background and return its task id at once.
    #[serde(default)]
    pub run_in_background: bool,
    /// Continue an earlier subagent of yours instead of starting a fresh one: its session id
    /// (from a subagent result or subagent_list). It keeps its history; `prompt` is its next
    /// message.
    #[serde(default)]
    pub resume: Option<String>,
}

/// The `subagent` tool. Parallel-safe: sibling delegations run side by side, each child in its
/// own session.
#[derive(Debug, Clone)]
pub struct SubagentTool {
    ctx: Context,
}

impl SubagentTool {
    /// A tool that finds the [`crate::SubagentRuntime`] through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

#[async_trait]
impl TypedTool for SubagentTool {
    type Args = SubagentArgs;

    fn name(&self) -> &str {
        "subagent"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &SubagentArgs) -> bool {
        true
    }

    /// Starting a child changes nothing by itself: each of the child's calls is guarded on its
    /// own, under its parent's policy.
    fn effects(&self, _args: &SubagentArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: SubagentArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let description = non_empty("description", &args.description)?.to_owned();
        non_empty("prompt", &args.prompt)?;
        let runtime = runtime(&self.ctx)?;
        let parent = calling_agent(call)?;
        let resume = match args.resume.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(id) => Some(SessionId::new(id)),
        };
        let request = SubagentRequest {
            prompt: args.prompt,
            description,
            model: args.model,
            resume,
        };
        if args.run_in_background {
            // Checked before creating anything, so a cancelled call leaves no child behind.
            if call.is_cancelled() {
                return Err(ToolError::aborted());
            }
            let (id, child) = runtime
                .start_run(&parent, request, call.cancel())
                .await
                .map_err(tool_error)?;
            return Ok(ToolOutput::text(format!(
                "started background subagent {id} (session {child})"
            ))
            .with_meta(json!({ "childSession": child.as_str(), "taskId": id.as_str() })));
        }
        let outcome = runtime
            .delegate(&parent, request, call.cancel())
            .await
            .map_err(tool_error)?;
        if let Some(error) = outcome_error(&outcome) {
            return Err(error);
        }
        Ok(ToolOutput::text(format!(
            "{}\n\n[subagent session {}: continue it with `resume`]",
            outcome.render(),
            outcome.child
        ))
        .with_meta(json!({ "childSession": outcome.child.as_str() })))
    }

    fn present_call(&self, args: &SubagentArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Subagent: {}", args.description.trim()),
            kind: ToolKind::Other,
        })
    }

    fn present_result(
        &self,
        args: &SubagentArgs,
        _result: &ToolCallResult,
    ) -> Option<ToolPresentation> {
        self.present_call(args)
    }
}
