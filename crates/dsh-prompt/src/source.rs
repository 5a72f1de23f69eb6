//! Where tool schemas come from.

use dsh_kernel::ScopeTag;
use dsh_llm::ToolSchema;

/// A provider of model-facing tool schemas (the tool runtime registers itself as one).
///
/// A trait rather than a closure because assembly needs two views: the schemas visible to one
/// scope, and every name that exists at all, so that a `tool_order` entry can be told apart
/// from a typo even when the tool it names is hidden from the scope being assembled.
pub trait ToolSchemaSource: Send + Sync + 'static {
    /// The schemas visible to `tag` (global view for `None`), in any order.
    fn schemas(&self, tag: Option<&ScopeTag>) -> Vec<ToolSchema>;

    /// Every tool name this source knows in any scope; used to validate `tool_order`.
    fn known_names(&self) -> Vec<String>;
}
