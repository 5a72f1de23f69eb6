//! Failures of prompt registration, assembly and rendering.

use dsh_kernel::{BoxError, KernelError};

/// Why a prompt operation failed. Assembly failures are configuration or composition bugs the
/// loop reports by closing the turn without a request (INV-SP-2), so each names its culprit.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The kernel refused the registration (e.g. the scope is disposed).
    #[error(transparent)]
    Kernel(KernelError),
    /// A section, context or variable name is registered twice in one layer.
    #[error("prompt {kind} `{name}` is already registered in this scope")]
    Duplicate {
        /// `section`, `context` or `variable`.
        kind: &'static str,
        /// The duplicated name.
        name: String,
    },
    /// A variable name is not of the form `[a-z][a-z0-9_]*`.
    #[error("invalid prompt variable name `{name}` (must match [a-z][a-z0-9_]*)")]
    InvalidVariableName {
        /// The rejected name.
        name: String,
    },
    /// The configured tool order is malformed.
    #[error("invalid tool_order: {reason}")]
    InvalidToolOrder {
        /// What is wrong with it.
        reason: String,
    },
    /// `tool_order` names tools that no tool source knows.
    #[error("tool_order lists unregistered tool(s) {}; known tools: {}", quoted(.names), list_or_none(.known))]
    UnknownToolInOrder {
        /// The unknown names, in configuration order.
        names: Vec<String>,
        /// Every known name, sorted.
        known: Vec<String>,
    },
    /// A tool source returned a schema named like the reserved rest marker.
    #[error("a tool source returned the reserved tool name `{name}`")]
    ReservedToolName {
        /// The reserved name.
        name: String,
    },
    /// Two tool sources returned a schema of the same name.
    #[error("tool `{name}` is provided by more than one tool source")]
    DuplicateTool {
        /// The duplicated tool name.
        name: String,
    },
    /// More than one effective section claims to be the complete prompt.
    #[error("multiple complete prompt sections are active: {}", quoted(.names))]
    MultipleComplete {
        /// Their names, in order.
        names: Vec<String>,
    },
    /// A contributed provider (section text, variable, tool source) panicked during assembly.
    #[error("prompt {kind} `{name}` panicked during assembly")]
    ProviderPanicked {
        /// `section`, `context`, `variable` or `tool source`.
        kind: &'static str,
        /// The contribution's name.
        name: String,
    },
    /// A `system-prompt/assemble` listener failed or panicked.
    #[error("system-prompt/assemble listener failed: {source}")]
    Listener {
        /// The listener's error.
        #[source]
        source: BoxError,
    },
    /// A `{{` group that is not a simple `{{name}}` reference.
    #[error("malformed prompt variable reference `{reference}` in section `{section}`")]
    MalformedReference {
        /// The section being rendered.
        section: String,
        /// The offending text (truncated).
        reference: String,
    },
    /// A reference to a variable nobody registered.
    #[error("unknown prompt variable `{{{{{name}}}}}` in section `{section}`; registered variables: {}", list_or_none(.known))]
    UnknownVariable {
        /// The section being rendered.
        section: String,
        /// The variable name.
        name: String,
        /// Registered variable names.
        known: Vec<String>,
    },
    /// A reference to a variable whose provider returned no value for this assembly.
    #[error(
        "prompt variable `{{{{{name}}}}}` has no value for this assembly (section `{section}`)"
    )]
    MissingValue {
        /// The section being rendered.
        section: String,
        /// The variable name.
        name: String,
    },
}

impl From<KernelError> for PromptError {
    fn from(e: KernelError) -> Self {
        Self::Kernel(e)
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}
