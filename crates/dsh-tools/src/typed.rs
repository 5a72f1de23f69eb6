//! Tools with typed, validated arguments.

use async_trait::async_trait;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::call_context::ToolCallContext;
use crate::effects::ToolEffects;
use crate::error::ToolError;
use crate::output::ToolOutput;
use crate::presentation::ToolPresentation;
use crate::result::ToolCallResult;
use crate::tool::Tool;

/// A tool whose arguments are a Rust type: the JSON Schema the model sees is derived from it
/// (so the schema cannot drift from the code), and arguments are validated by deserializing
/// them before [`run`](Self::run) is called. A mismatch becomes an error result with a specific
/// message (``invalid arguments for `bash`: missing field `command` ``), never a panic.
///
/// Every `TypedTool` is a [`Tool`] through a blanket impl.
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments object.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;

    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// See [`Tool::needs_vision`].
    fn needs_vision(&self) -> bool {
        false
    }

    /// Whether this call may overlap with siblings (see [`Tool::is_concurrency_safe`]);
    /// arguments that do not validate are always exclusive.
    fn is_concurrency_safe(&self, _args: &Self::Args) -> bool {
        false
    }

    /// See [`Tool::effects`]. Arguments that do not validate never reach the body, so such a
    /// call does nothing ([`ToolEffects::none`]) and this is not called.
    fn effects(&self, _args: &Self::Args) -> ToolEffects {
        ToolEffects::undeclared()
    }

    /// Runs one call with validated arguments.
    async fn run(&self, args: Self::Args, call: &ToolCallContext) -> Result<ToolOutput, ToolError>;

    /// See [`Tool::present_call`]; not called when the arguments do not validate.
    fn present_call(&self, _args: &Self::Args) -> Option<ToolPresentation> {
        None
    }

    /// See [`Tool::present_result`]; not called when the arguments do not validate.
    fn present_result(
        &self,
        _args: &Self::Args,
        _result: &ToolCallResult,
    ) -> Option<ToolPresentation> {
        None
    }
}

/// The JSON Schema of `T`, self-contained (nested types inlined rather than `$ref`s, which
/// many OpenAI-compatible servers do not resolve) and without the meta keys (`$schema`,
/// `title`) that mean nothing to a model.
fn parameters_of<T: JsonSchema>() -> Value {
    let mut value = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("title");
    }
    value
}

fn parse_args<T: DeserializeOwned>(tool: &str, args: Value, raw: &str) -> Result<T, ToolError> {
    if let Value::String(_) = &args
        && let Err(e) = serde_json::from_str::<Value>(raw)
    {
        return Err(ToolError::invalid_arguments(
            tool,
            format_args!("arguments are not valid JSON ({e})"),
        ));
    }
    serde_json::from_value(args).map_err(|e| ToolError::invalid_arguments(tool, e))
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        TypedTool::name(self)
    }

    fn description(&self) -> &str {
        TypedTool::description(self)
    }

    fn parameters(&self) -> Value {
        parameters_of::<T::Args>()
    }

    fn needs_vision(&self) -> bool {
        TypedTool::needs_vision(self)
    }

    fn is_concurrency_safe(&self, args: &Value) -> bool {
        serde_json::from_value::<T::Args>(args.clone())
            .is_ok_and(|a| TypedTool::is_concurrency_safe(self, &a))
    }

    fn effects(&self, args: &Value) -> ToolEffects {
        match serde_json::from_value::<T::Args>(args.clone()) {
            Ok(args) => TypedTool::effects(self, &args),
            Err(_) => ToolEffects::none(),
        }
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let args = parse_args::<T::Args>(TypedTool::name(self), args, call.raw_arguments())?;
        self.run(args, call).await
    }

    fn present_call(&self, args: &Value) -> Option<ToolPresentation> {
        let args = serde_json::from_value::<T::Args>(args.clone()).ok()?;
        TypedTool::present_call(self, &args)
    }

    fn present_result(&self, args: &Value, result: &ToolCallResult) -> Option<ToolPresentation> {
        let args = serde_json::from_value::<T::Args>(args.clone()).ok()?;
        TypedTool::present_result(self, &args, result)
    }
}
