//! The `system-prompt/assemble` waterfall.

use dsh_kernel::Waterfall;

use crate::assembly::PromptAssembly;

/// `system-prompt/assemble`: around-middleware over a freshly built assembly. Dispatched with
/// the assembly's scope tag as carrier, so an agent-scoped listener rewrites only its own
/// agent's prompt. The outermost return is authoritative, except that a registered complete
/// section is restored afterwards (listeners cannot replace a dedicated prompt).
pub struct PromptAssemble;

impl Waterfall for PromptAssemble {
    const NAME: &'static str = "system-prompt/assemble";
    type Payload = PromptAssembly;
    type Output = PromptAssembly;
}
