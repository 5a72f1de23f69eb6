//! The final outcome of one call.

use dsh_session::{CallId, ContentBlock, Message, ToolErrorInfo};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ToolError;
use crate::output::ToolOutput;

/// The outcome of one call, as the loop records it in `tool/result`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// Model-facing content (`Error: <message>` text for failures).
    pub content: Vec<ContentBlock>,
    /// Whether the model should read this result as an error.
    #[serde(default)]
    pub is_error: bool,
    /// `{name, code}` of a failure with a known code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorInfo>,
    /// Presentation data recorded as `tool/result.meta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Contexts that enter the agent's next-step inbox after the step's results (deferred by
    /// the tool first, then added by post-execute decisions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_contexts: Vec<Message>,
    /// A successful result that asked to end the turn after this step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub concludes_turn: bool,
}

impl ToolCallResult {
    /// The error result for `error`: text `Error: <message>`, `{name, code}` when coded.
    pub fn from_error(error: &ToolError) -> Self {
        Self {
            content: vec![ContentBlock::text(format!("Error: {}", error.message))],
            is_error: true,
            error: error.code.as_ref().map(|code| ToolErrorInfo {
                name: error.name.clone(),
                code: code.clone(),
            }),
            ..Self::default()
        }
    }

    /// A policy denial: `Error: <reason>`, no code.
    pub fn denied(reason: &str) -> Self {
        Self {
            content: vec![ContentBlock::text(format!("Error: {reason}"))],
            is_error: true,
            ..Self::default()
        }
    }

    /// The result of a call cancelled before its body ran. The scheduler also uses it for
    /// calls of a cancelled step that never started.
    pub fn aborted_before_dispatch() -> Self {
        Self::from_error(&ToolError::aborted_before_dispatch())
    }

    /// The result of a call whose invoked body was superseded by cancellation.
    pub fn aborted() -> Self {
        Self::from_error(&ToolError::aborted())
    }

    pub(crate) fn success(output: ToolOutput, concludes_turn: bool) -> Self {
        Self {
            concludes_turn: concludes_turn && !output.is_error,
            content: output.content,
            is_error: output.is_error,
            error: None,
            meta: output.meta,
            additional_contexts: Vec::new(),
        }
    }

    /// The same result with its contexts replaced.
    pub(crate) fn with_contexts(mut self, contexts: Vec<Message>) -> Self {
        self.additional_contexts = contexts;
        self
    }

    /// The tool-result message answering `call_id` (user role, one `tool-result` block).
    pub fn to_message(&self, call_id: CallId) -> Message {
        Message::tool_result(call_id, self.content.clone(), self.is_error)
    }

    /// The error code, if any.
    pub fn code(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.code.as_str())
    }

    /// All text blocks joined (for logs and tests).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }
}
