//! The result of one assembly.

use std::collections::BTreeMap;

use dsh_llm::ToolSchema;

/// One section with its text resolved but not yet interpolated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssembledSection {
    /// The contributing section's name.
    pub name: String,
    /// Resolved text; `{{variable}}` references are interpolated by [`crate::render`].
    pub text: String,
    /// Whether the contribution declared itself the complete prompt.
    pub complete: bool,
}

/// One runtime-context contribution with its text resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssembledContext {
    /// The contributing context's name.
    pub name: String,
    /// Resolved text.
    pub text: String,
}

/// Everything the model is told before the history, for one scope at one moment.
///
/// Kept structured (rather than a finished string) so `system-prompt/assemble` listeners can
/// rewrite parts of it and so the loop can log tools and prompt separately in `request/header`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptAssembly {
    /// Sections in render order.
    pub sections: Vec<AssembledSection>,
    /// Runtime-context contributions in order.
    pub contexts: Vec<AssembledContext>,
    /// Tool schemas in canonical model-facing order.
    pub tools: Vec<ToolSchema>,
    /// Variable values for interpolation; `None` = registered but without a value here.
    pub variables: BTreeMap<String, Option<String>>,
}
