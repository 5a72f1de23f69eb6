//! The `subagent_list` tool: the caller's own children, to pick one to continue.

use std::fmt::Write as _;

use async_trait::async_trait;
use dsh_agent::AgentRegistry;
use dsh_kernel::Context;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::background::SubagentTaskStatus;
use crate::children::children_in_log;
use crate::tool_error::{calling_agent, runtime};

const DESCRIPTION: &str = "\
Lists the subagents this session started: session id (for `subagent` with `resume`), \
description, status and when it last reported. Only your own subagents are listed.";

/// Arguments of `subagent_list` (none).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct SubagentListArgs {}

/// The `subagent_list` tool. Read-only and parallel-safe.
#[derive(Debug, Clone)]
pub struct SubagentListTool {
    ctx: Context,
}

impl SubagentListTool {
    /// A tool that reads the caller's log and the [`crate::SubagentRuntime`] through `ctx`.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

/// `HH:MM:SS` UTC of an epoch-millisecond time (enough to order a session's children).
fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02} UTC",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

#[async_trait]
impl TypedTool for SubagentListTool {
    type Args = SubagentListArgs;

    fn name(&self) -> &str {
        "subagent_list"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &SubagentListArgs) -> bool {
        true
    }

    /// Reads the caller's own log.
    fn effects(&self, _args: &SubagentListArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        _args: SubagentListArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let parent = calling_agent(call)?;
        let children = children_in_log(&parent);
        if children.is_empty() {
            return Ok(ToolOutput::text("This session has started no subagents."));
        }
        let background = runtime(&self.ctx)
            .map(|r| r.list(parent.id()))
            .unwrap_or_default();
        let registry = AgentRegistry::of(parent.ctx()).ok();
        let mut out = String::from("Subagents of this session (oldest first):");
        let mut rows = Vec::new();
        for child in &children {
            let run = background.iter().find(|run| run.child == child.session);
            let status = match run.map(|r| &r.status) {
                Some(SubagentTaskStatus::Running) => "running".to_owned(),
                Some(SubagentTaskStatus::Finished(outcome)) => outcome.status_word().to_owned(),
                None if registry
                    .as_ref()
                    .and_then(|r| r.get(&child.session))
                    .is_some() =>
                {
                    "running".to_owned()
                }
                None if child.failed => "failed".to_owned(),
                None => "completed".to_owned(),
            };
            let task = run.map(|r| format!(" (task {})", r.id)).unwrap_or_default();
            let _ = write!(
                out,
                "\n- {}{task}: {} — {status}, last reported {}",
                child.session,
                if child.description.is_empty() {
                    "(no description)"
                } else {
                    &child.description
                },
                clock(child.last_activity)
            );
            rows.push(json!({
                "session": child.session.as_str(),
                "description": child.description,
                "status": status,
                "lastActivity": child.last_activity,
            }));
        }
        Ok(ToolOutput::text(out).with_meta(json!({ "children": rows })))
    }

    fn present_call(&self, _args: &SubagentListArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: "List subagents".to_owned(),
            kind: ToolKind::Read,
        })
    }
}
