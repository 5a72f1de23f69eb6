//! MCP in the binary: mounting the configured servers, and `dsh mcp list`.

use std::sync::Arc;

use anyhow::Context as _;
use dsh_kernel::{Context, PluginHandle};
use dsh_mcp::{CommandConfinement, McpOptions, McpPlugin, McpServers, ServerState};

use crate::config::Settings;

/// The options every front end starts the configured servers with: stdio servers work in the
/// current directory, provider key and bearer token variables are never passed to them by
/// name, tokens come from dsh's secrets, and a server that fails to start is said on stderr
/// (the session goes on without it).
fn options(settings: &Settings) -> anyhow::Result<McpOptions> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
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
    options.lookup = Arc::new(crate::config::process_env);
    Ok(options)
}

/// Puts the session's sandbox on `ctx` for every stdio server started there: the configured
/// ones and the ones an editor sends over ACP.
fn confine(ctx: &Context, settings: &Settings) -> anyhow::Result<()> {
    ctx.provide::<dyn CommandConfinement>(crate::guard::mcp_confinement(settings))
        .context("cannot set up the sandbox of MCP servers")
}

/// Mounts the configured servers (started in the background; the first model request waits
/// for them), or nothing when none is configured; either way stdio servers started on `ctx`
/// later (ACP's `mcpServers`) run in the sandbox.
pub async fn mount(ctx: &Context, settings: &Settings) -> anyhow::Result<Option<PluginHandle>> {
    confine(ctx, settings)?;
    if settings.mcp_servers.is_empty() {
        return Ok(None);
    }
    let options = options(settings)?;
    let plugin = McpPlugin::new(settings.mcp_servers.clone(), options);
    Ok(Some(
        ctx.plugin(plugin)
            .await
            .context("cannot start the MCP servers")?,
    ))
}

/// `dsh mcp list`: starts every configured server, waits for each to come up or fail, prints
/// one block per server (state, then its tools as the model sees them), stops them. Exit
/// status 1 when any enabled server failed.
pub fn list(settings: Settings) -> i32 {
    let runtime = match crate::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh: cannot start the runtime: {e}");
            return 1;
        }
    };
    if settings.mcp_servers.is_empty() {
        return crate::print_out(&format!(
            "no MCP servers configured (add [mcp_servers.NAME] to {})\n",
            settings.config_path.display()
        ));
    }
    let statuses = runtime.block_on(async {
        let ctx = Context::new();
        confine(&ctx, &settings)?;
        let mut options = options(&settings)?;
        // Failures are part of the listing; no second report on stderr.
        options.on_failure = None;
        let servers = McpServers::start(&ctx, settings.mcp_servers.clone(), options)
            .map_err(|e| anyhow::anyhow!("cannot start the MCP servers: {e}"))?;
        servers.settled().await;
        let statuses = servers.statuses();
        servers.shutdown().await;
        anyhow::Ok(statuses)
    });
    let statuses = match statuses {
        Ok(statuses) => statuses,
        Err(e) => {
            eprintln!("dsh: {e:#}");
            return 1;
        }
    };
    let mut out = String::new();
    let mut failed = false;
    for status in &statuses {
        let state = match &status.state {
            ServerState::Disabled => "disabled".to_owned(),
            ServerState::Starting => "starting".to_owned(),
            ServerState::Ready => format!("ready, {} tool(s)", status.tools.len()),
            ServerState::Failed(reason) => {
                failed = true;
                format!("FAILED: {reason}")
            }
        };
        out.push_str(&format!("{}: {state}\n", status.name));
        for tool in &status.tools {
            out.push_str(&format!("  {tool}\n"));
        }
    }
    match crate::print_out(&out) {
        0 if failed => 1,
        code => code,
    }
}
