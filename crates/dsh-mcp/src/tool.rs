//! One MCP tool as a dsh [`Tool`].

use std::sync::Arc;

use async_trait::async_trait;
use dsh_session::Attachments;
use dsh_tools::{
    Questioner, Tool, ToolCallContext, ToolError, ToolKind, ToolOutput, ToolPresentation,
};

use crate::elicit::Asker;
use serde_json::Value;

use crate::server::{McpServer, OfferedTool};

/// A tool of a connected server. Calls are exclusive (MCP servers often hold shared state and
/// dsh cannot know which of their tools are safe to overlap, as Codex decides too).
pub(crate) struct McpTool {
    pub(crate) offered: OfferedTool,
    pub(crate) server: Arc<McpServer>,
    /// Where images the server returns are stored (the harness provides one).
    pub(crate) attachments: Option<Arc<dyn Attachments>>,
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.offered.name
    }

    fn description(&self) -> &str {
        &self.offered.description
    }

    fn parameters(&self) -> Value {
        self.offered.parameters.clone()
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let asker = call.caller().map(|caller| Asker {
            questioner: caller.ctx.get::<dyn Questioner>(),
            agent_id: caller.agent_id.clone(),
            call_id: call.call_id().clone(),
            cancel: call.cancel().clone(),
        });
        self.server
            .call(
                &self.offered.remote,
                args,
                call.cancel(),
                call.live_publisher(),
                self.attachments.as_deref(),
                asker,
            )
            .await
    }

    fn present_call(&self, _args: &Value) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!(
                "{} ({} MCP server)",
                self.offered.remote,
                self.server.config().name
            ),
            kind: ToolKind::Other,
        })
    }
}
