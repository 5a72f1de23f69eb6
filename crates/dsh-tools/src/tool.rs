//! The tool trait.

use async_trait::async_trait;
use serde_json::Value;

use dsh_session::ContentBlock;

use crate::call_context::ToolCallContext;
use crate::effects::ToolEffects;
use crate::error::ToolError;
use crate::exec::ToolExec;
use crate::output::ToolOutput;
use crate::presentation::ToolPresentation;
use crate::result::ToolCallResult;

/// A tool the model can call.
///
/// Object safe, so the runtime stores `Arc<dyn Tool>`. Most tools implement
/// [`crate::TypedTool`] instead, which derives `parameters` and validates arguments.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;

    /// Whether the tool returns images, so only a model that reads images is offered it.
    fn needs_vision(&self) -> bool {
        false
    }

    /// Whether this particular call may overlap with sibling calls. Decided per call (a
    /// `bash` call might be safe only for read-only commands); anything but `true` — including
    /// a panic — makes the call an exclusive barrier.
    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        false
    }

    /// What this call does to the world (files it writes, a command it runs, hosts it
    /// reaches), decided from the arguments. The guard, the editor's permission requests and the
    /// front ends read this instead of recognising tools by name, so a new tool is checked the
    /// same way as the built-in ones. The default, [`ToolEffects::undeclared`], makes policy
    /// treat every call as possibly doing anything (it asks). Must not panic; a panic counts as
    /// undeclared.
    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::undeclared()
    }

    /// Runs one call. `args` is the parsed argument value (a JSON string holding the raw text
    /// when the model produced invalid JSON). Must observe `call.cancel()` and return only once
    /// the work it started has stopped: the pipeline awaits it to completion, never drops it.
    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError>;

    /// A last-mile rewrite of the model-facing content (e.g. spilling an oversized output to
    /// a file and keeping a preview), applied exactly once to every final outcome of a call —
    /// failures that bypass post-execute included — after all policy ran. `None` keeps the
    /// content. The definition visible when the call started is the one applied. Must not
    /// panic; a panic turns the result into an error.
    fn finalize_content(
        &self,
        _exec: &ToolExec,
        _result: &ToolCallResult,
    ) -> Option<Vec<ContentBlock>> {
        None
    }

    /// How a front end should show the pending call; `None` for a generic card.
    fn present_call(&self, _args: &Value) -> Option<ToolPresentation> {
        None
    }

    /// How a front end should show the completed call; `None` keeps the pending card.
    fn present_result(&self, _args: &Value, _result: &ToolCallResult) -> Option<ToolPresentation> {
        None
    }
}
