//! The plugin that provides the tool runtime.

use dsh_kernel::{BoxError, Context, Plugin};
use dsh_prompt::SystemPrompt;

use crate::runtime::ToolRuntime;

/// Provides [`ToolRuntime`] and, when a [`SystemPrompt`] is already provided, registers the
/// runtime as its tool-schema source so every assembly lists the caller's visible tools.
/// Mount it after the system-prompt plugin. Unmounting withdraws both.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolsPlugin;

impl Plugin for ToolsPlugin {
    fn name(&self) -> &str {
        "tools"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let runtime = ToolRuntime::new(ctx);
        ctx.provide::<ToolRuntime>(runtime.clone())?;
        if let Some(prompt) = ctx.get::<SystemPrompt>() {
            let _ = prompt.tools(ctx, runtime)?;
        }
        Ok(())
    }
}
