//! The plugin that mounts subagents on a runtime.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};
use dsh_tools::{Tool, ToolRuntime};

use crate::config::SubagentConfig;
use crate::kill_tool::SubagentKillTool;
use crate::list_tool::SubagentListTool;
use crate::output_tool::SubagentOutputTool;
use crate::runtime::SubagentRuntime;
use crate::subagent_tool::SubagentTool;

/// Registers `subagent`, `subagent_output` and `subagent_kill` in the [`ToolRuntime`] through
/// the context it is applied with, and provides the [`SubagentRuntime`] (with `config`) unless
/// one is already provided.
///
/// Mount it after the core (`dsh_agent_loop::mount_core`: the agent registry, its factory, the
/// system prompt and the tool runtime). Unmounting removes the tools; a runtime this plugin
/// provided goes with it (its background runs are stopped and awaited). To keep background
/// runs and their owners across an unmount and remount of the tools, provide the runtime from
/// a longer-lived scope first with [`SubagentRuntime::provide`]; the plugin then uses that
/// runtime, and its own `config` is not used.
#[derive(Clone, Debug, Default)]
pub struct SubagentPlugin {
    config: SubagentConfig,
}

impl SubagentPlugin {
    /// A plugin that provides a runtime with `config` when none is provided yet.
    pub fn new(config: SubagentConfig) -> Self {
        Self { config }
    }
}

impl Plugin for SubagentPlugin {
    fn name(&self) -> &str {
        "dsh-subagent"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let tools = ctx.require::<ToolRuntime>()?;
        if SubagentRuntime::of(ctx).is_none() {
            let _ = SubagentRuntime::provide(ctx, self.config.clone())?;
        }
        let list: [Arc<dyn Tool>; 4] = [
            Arc::new(SubagentTool::new(ctx.clone())),
            Arc::new(SubagentOutputTool::new(ctx.clone())),
            Arc::new(SubagentKillTool::new(ctx.clone())),
            Arc::new(SubagentListTool::new(ctx.clone())),
        ];
        for tool in list {
            let _ = tools.register(ctx, tool)?;
        }
        Ok(())
    }
}
