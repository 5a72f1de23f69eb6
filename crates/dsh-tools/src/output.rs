//! What a tool body returns.

use dsh_session::ContentBlock;
use serde_json::Value;

/// A tool body's successful return.
///
/// `is_error` lets a tool report trouble to the model without failing the call (a command
/// that exited non-zero, a search with a bad pattern): the result is marked as an error for
/// the model, but it is the tool's own answer, so cancellation does not replace it and it
/// carries no failure code. Failures that are not answers are `Err(ToolError)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// Model-facing content.
    pub content: Vec<ContentBlock>,
    /// Whether the model should read this as an error report.
    pub is_error: bool,
    /// Presentation data for front ends, recorded as `tool/result.meta`, never sent to the
    /// model.
    pub meta: Option<Value>,
}

impl ToolOutput {
    /// Content as a successful answer.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self {
            content,
            is_error: false,
            meta: None,
        }
    }

    /// A single text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![ContentBlock::text(text)])
    }

    /// A single text block reported as an error to the model.
    pub fn error_text(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(text)
        }
    }

    /// The same output with presentation data attached.
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }
}
