//! Tool failures and registry errors.

use dsh_kernel::{BoxError, KernelError};

/// Code of a call whose body was invoked but whose success was superseded by cancellation.
pub const TOOL_ABORTED: &str = "ABORTED";
/// Code of a call cancelled before its body was invoked (the body never ran).
pub const TOOL_ABORTED_BEFORE_DISPATCH: &str = "ABORTED_BEFORE_DISPATCH";
/// Code of a call naming a tool that is not visible to the caller.
pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
/// Code of a call whose arguments do not match the tool's parameters.
pub const INVALID_ARGUMENTS: &str = "INVALID_ARGUMENTS";
/// Code of a call whose result (presentation meta or contexts) is not lossless JSON.
pub const INVALID_TOOL_OUTPUT: &str = "INVALID_TOOL_OUTPUT";
/// Code of a call whose tool body panicked.
pub const TOOL_PANICKED: &str = "TOOL_PANICKED";

/// Why one tool call failed. A tool returns it from `execute`; the pipeline turns it into an
/// error result whose text is `Error: <message>` and whose `{name, code}` (when a code is set)
/// is recorded in `tool/result`, so retry, replay and UI code can tell failures apart without
/// parsing prose.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// Human-readable message, without the `Error: ` prefix.
    pub message: String,
    /// Machine-readable code (e.g. [`UNKNOWN_TOOL`]), when the failure has a known class.
    pub code: Option<String>,
    /// Error class name (e.g. `AbortError`, `ToolNotFoundError`).
    pub name: String,
}

impl ToolError {
    /// A plain failure with no code.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            name: "Error".to_owned(),
        }
    }

    /// A failure with a class name and code.
    pub fn coded(
        name: impl Into<String>,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            message: message.into(),
            code: Some(code.into()),
            name: name.into(),
        }
    }

    /// The call names a tool the caller cannot see.
    pub fn unknown_tool(tool: &str) -> Self {
        Self::coded(
            "ToolNotFoundError",
            UNKNOWN_TOOL,
            format!("unknown tool `{tool}`"),
        )
    }

    /// The arguments do not fit the tool's parameters; `detail` says how.
    pub fn invalid_arguments(tool: &str, detail: impl std::fmt::Display) -> Self {
        Self::coded(
            "ToolArgsError",
            INVALID_ARGUMENTS,
            format!("invalid arguments for `{tool}`: {detail}"),
        )
    }

    /// Cancellation arrived before the body was invoked.
    pub fn aborted_before_dispatch() -> Self {
        Self::coded(
            "AbortError",
            TOOL_ABORTED_BEFORE_DISPATCH,
            "tool call aborted before dispatch",
        )
    }

    /// Cancellation superseded a body that had been invoked.
    pub fn aborted() -> Self {
        Self::coded("AbortError", TOOL_ABORTED, "tool call aborted")
    }

    /// The tool body panicked; the panic was contained.
    pub fn panicked(tool: &str) -> Self {
        Self::coded(
            "PanicError",
            TOOL_PANICKED,
            format!("tool `{tool}` panicked"),
        )
    }

    /// Classifies an error that crossed the kernel (a listener's or wrapper's): a
    /// [`ToolError`] keeps its class, anything else becomes a plain message.
    pub fn from_box(error: &BoxError) -> Self {
        match error.downcast_ref::<ToolError>() {
            Some(e) => e.clone(),
            None => Self::new(error.to_string()),
        }
    }
}

/// Failures of registry operations (never of calls).
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// The kernel refused the registration (e.g. the scope is disposed).
    #[error(transparent)]
    Kernel(KernelError),
    /// A tool of this name is already registered in the same layer. Register through an
    /// agent's scoped context for a per-agent variant.
    #[error("tool `{name}` is already registered in this scope")]
    DuplicateTool {
        /// The tool name.
        name: String,
    },
    /// The tool name is empty, contains whitespace, or is the `tool_order` rest marker.
    #[error("invalid tool name `{name}`")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
}

impl From<KernelError> for ToolsError {
    fn from(e: KernelError) -> Self {
        match e {
            KernelError::DuplicateName { name } => Self::DuplicateTool { name },
            other => Self::Kernel(other),
        }
    }
}
