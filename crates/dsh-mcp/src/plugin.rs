//! The plugin a front end mounts for its configured servers.

use dsh_kernel::{BoxError, Context, Plugin};

use crate::config::ServerConfig;
use crate::servers::{McpOptions, McpServers};

/// Starts the configured servers when mounted (in the background: mounting does not wait for
/// them) and provides the set as `ctx.get::<McpServers>()`; unmounting unregisters their tools
/// and stops them. Mount it after the tool runtime.
#[derive(Debug)]
pub struct McpPlugin {
    configs: Vec<ServerConfig>,
    options: McpOptions,
}

impl McpPlugin {
    /// A plugin for `configs`, started with `options`.
    pub fn new(configs: Vec<ServerConfig>, options: McpOptions) -> Self {
        Self { configs, options }
    }
}

impl Plugin for McpPlugin {
    fn name(&self) -> &str {
        "mcp"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let set = McpServers::start(ctx, self.configs.clone(), self.options.clone())?;
        ctx.provide::<McpServers>(set)?;
        Ok(())
    }
}
