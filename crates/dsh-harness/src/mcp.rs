//! MCP in the composition: the configured servers' options, their sandbox, and mounting them.

use std::sync::Arc;

use dsh_kernel::{Context, PluginHandle};
use dsh_mcp::{McpOptions, McpPlugin, McpServer, McpServers};
use dsh_session::SessionId;
use dsh_shell::Supervision;
use dsh_skills::{Kind, SlashEntry};

use crate::compose::Harness;
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

/// The servers to start in `workspace`: the configured ones, then the trusted project
/// servers of its `.mcp.json` (see [`crate::project_mcp`]), and what to say about the ones
/// left out.
pub fn servers(
    settings: &Settings,
    workspace: &std::path::Path,
) -> (Vec<dsh_mcp::ServerConfig>, Vec<String>) {
    match crate::project_mcp::project_servers(&settings.home.value, workspace) {
        Ok(project) => crate::project_mcp::with_project(&settings.mcp_servers, project.as_ref()),
        Err(error) => (settings.mcp_servers.clone(), vec![error]),
    }
}

/// Starts `configs` outside any session (what `dsh mcp list` shows), waits until each is up
/// or has failed, stops them again, and returns where each stood.
pub async fn probe(
    settings: &Settings,
    configs: Vec<dsh_mcp::ServerConfig>,
) -> Result<Vec<dsh_mcp::ServerStatus>, HarnessError> {
    let ctx = Context::new();
    confine(&ctx, crate::guard::supervision(settings))?;
    let mut options = options(settings)?;
    // Failures are part of the listing; no second report on stderr.
    options.on_failure = None;
    let servers = McpServers::start(&ctx, configs, options)
        .map_err(|e| HarnessError::start("start the MCP servers", e))?;
    servers.settled().await;
    let statuses = servers.statuses();
    servers.shutdown().await;
    Ok(statuses)
}

/// One block per server (its state, then its tools as the model sees them, its resources and
/// its prompts as commands), and whether any enabled server failed.
pub fn describe(statuses: &[dsh_mcp::ServerStatus]) -> (String, bool) {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut failed = false;
    for status in statuses {
        let state = match &status.state {
            dsh_mcp::ServerState::Disabled => "disabled".to_owned(),
            dsh_mcp::ServerState::Starting => "starting".to_owned(),
            dsh_mcp::ServerState::Ready => format!(
                "ready, {} tool(s), {} resource(s), {} prompt(s)",
                status.tools.len(),
                status.resources.len(),
                status.prompts.len()
            ),
            dsh_mcp::ServerState::Failed(reason) => {
                failed = true;
                format!("FAILED: {reason}")
            }
        };
        let _ = writeln!(out, "{}: {state}", status.name);
        for tool in &status.tools {
            let _ = writeln!(out, "  {tool}");
        }
        for resource in &status.resources {
            let _ = writeln!(out, "  resource {resource}");
        }
        for prompt in &status.prompts {
            let _ = writeln!(out, "  prompt {prompt}");
        }
    }
    (out, failed)
}

/// Mounts the configured servers and the trusted project servers (started in the background;
/// the first model request waits for them), or nothing when there are none; either way stdio
/// servers started on `ctx` later (ACP's `mcpServers`) run in the sandbox.
pub(crate) async fn mount(
    ctx: &Context,
    settings: &Settings,
    supervision: Arc<dyn Supervision>,
) -> Result<Option<PluginHandle>, HarnessError> {
    confine(ctx, supervision)?;
    let options = options(settings)?;
    let (configs, notices) = servers(settings, &options.cwd);
    for notice in notices {
        eprintln!("dsh: {notice}");
    }
    if configs.is_empty() {
        return Ok(None);
    }
    let plugin = McpPlugin::new(configs, options);
    Ok(Some(ctx.plugin(plugin).await.map_err(|e| {
        HarnessError::start("start the MCP servers", e)
    })?))
}

impl Harness {
    /// The configured servers' set, when any is configured.
    fn mcp_set(&self) -> Option<Arc<McpServers>> {
        self.mcp.as_ref().and_then(|p| p.ctx().get::<McpServers>())
    }

    /// The configured servers that started (none while they are still starting).
    pub fn mcp_servers(&self) -> Vec<Arc<McpServer>> {
        self.mcp_set().map(|s| s.ready()).unwrap_or_default()
    }

    /// What a person can type as `/name` in `session`: its custom commands and skills, then
    /// the configured MCP servers' prompts (`/mcp__SERVER__PROMPT`) of the servers started
    /// so far.
    pub fn slash_entries(&self, session: &SessionId) -> Vec<SlashEntry> {
        let mut entries = self
            .catalog(session)
            .map(|c| c.slash_entries())
            .unwrap_or_default();
        entries.extend(
            dsh_mcp::prompt_commands(&self.mcp_servers())
                .into_iter()
                .map(|p| SlashEntry {
                    name: p.name,
                    description: p.description,
                    argument_hint: p.argument_hint,
                    kind: Kind::Prompt,
                }),
        );
        entries
    }

    /// The message a person's `/name args` line stands for in `session`: a custom command, a
    /// skill, or an MCP server's prompt (got from the server, after the servers' start-up);
    /// `None` when the line names none of them; an error text says why it could not be had.
    pub async fn expand_line(
        &self,
        session: &SessionId,
        line: &str,
    ) -> Option<Result<String, String>> {
        if let Some(expanded) = self.expand(session, line) {
            return Some(expanded.map(|e| e.prompt).map_err(|p| p.to_string()));
        }
        let set = self.mcp_set()?;
        if !line
            .trim_start()
            .starts_with(&format!("/{}", dsh_mcp::naming::PREFIX))
        {
            return None;
        }
        set.settled().await;
        dsh_mcp::expand_prompt(&set.ready(), line).await
    }
}
