//! MCP in the composition: the configured servers' options, their sandbox, and mounting them.

use std::sync::Arc;

use dsh_kernel::{Context, PluginHandle};
use dsh_mcp::{McpOptions, McpPlugin};
use dsh_shell::Supervision;

use crate::config::Settings;
use crate::error::HarnessError;

/// The options every front end starts the configured servers with: stdio servers work in the
/// current directory, provider key and bearer token variables are never passed to them by
/// name, tokens come from dsh's secrets, and a server that fails to start is said on stderr
/// (the session goes on without it).
pub fn options(settings: &Settings) -> Result<McpOptions, HarnessError> {
    let cwd = std::env::current_dir()
        .map_err(|e| HarnessError::Workspace(format!("cannot read the current directory: {e}")))?;
    let mut options = McpOptions::new(cwd);
    options.hidden_env = settings
        .providers
        .values()
        .filter_map(|p| p.api_key_env.as_ref().map(|v| v.value.clone()))
        .collect();
    // A bearer token variable is a secret too: never passed to a server by name.
    options.hidden_env.extend(
        settings
            .mcp_servers
            .iter()
            .filter_map(|s| match &s.transport {
                dsh_mcp::Transport::Http {
                    bearer_token_env_var,
                    ..
                } => bearer_token_env_var.clone(),
                dsh_mcp::Transport::Stdio { .. } => None,
            }),
    );
    options.on_failure = Some(Arc::new(|error| eprintln!("dsh: {error}")));
    // Tokens are read from dsh's private copy of its secrets (the environment no longer holds
    // them after start-up), else from the environment.
    options.lookup = Arc::new(crate::env::process_env);
    Ok(options)
}

/// Puts `supervision` on `ctx` for every stdio server started there: the configured ones
/// and the ones an editor sends over ACP run under the same supervisor (and sandbox) as the
/// session's commands.
pub fn confine(ctx: &Context, supervision: Arc<dyn Supervision>) -> Result<(), HarnessError> {
    ctx.provide::<dyn Supervision>(supervision)
        .map_err(|e| HarnessError::start("set up the sandbox of MCP servers", e))
}

/// Mounts the configured servers (started in the background; the first model request waits
/// for them), or nothing when none is configured; either way stdio servers started on `ctx`
/// later (ACP's `mcpServers`) run in the sandbox.
pub(crate) async fn mount(
    ctx: &Context,
    settings: &Settings,
    supervision: Arc<dyn Supervision>,
) -> Result<Option<PluginHandle>, HarnessError> {
    confine(ctx, supervision)?;
    if settings.mcp_servers.is_empty() {
        return Ok(None);
    }
    let options = options(settings)?;
    let plugin = McpPlugin::new(settings.mcp_servers.clone(), options);
    Ok(Some(ctx.plugin(plugin).await.map_err(|e| {
        HarnessError::start("start the MCP servers", e)
    })?))
}
