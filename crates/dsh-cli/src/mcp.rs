//! `dsh mcp list`: the configured servers, started, listed and stopped.

use dsh_harness::config::{NewServer, add_mcp_server, remove_mcp_server};
use dsh_harness::{Overrides, Settings};
use dsh_kernel::Context;
use dsh_mcp::{McpServers, ServerState};

/// `dsh mcp list`: starts every configured server, waits for each to come up or fail, prints
/// one block per server (state, then its tools as the model sees them, its resources and its
/// prompts as commands), stops them. Exit status 1 when any enabled server failed.
pub fn list(settings: Settings) -> i32 {
    let runtime = match crate::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dsh: cannot start the runtime: {e}");
            return 1;
        }
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("dsh: cannot read the current directory: {e}");
            return 1;
        }
    };
    let (configs, notices) = dsh_harness::mcp::servers(&settings, &cwd);
    let mut out: String = notices.iter().map(|n| format!("note: {n}\n")).collect();
    if configs.is_empty() {
        out.push_str(&format!(
            "no MCP servers configured (add [mcp_servers.NAME] to {})\n",
            settings.config_path.display()
        ));
        return crate::print_out(&out);
    }
    let statuses = runtime.block_on(async {
        let ctx = Context::new();
        dsh_harness::mcp::confine(&ctx, dsh_harness::guard::supervision(&settings))?;
        let mut options = dsh_harness::mcp::options(&settings)?;
        // Failures are part of the listing; no second report on stderr.
        options.on_failure = None;
        let servers = McpServers::start(&ctx, configs, options)
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
    let mut failed = false;
    for status in &statuses {
        let state = match &status.state {
            ServerState::Disabled => "disabled".to_owned(),
            ServerState::Starting => "starting".to_owned(),
            ServerState::Ready => format!(
                "ready, {} tool(s), {} resource(s), {} prompt(s)",
                status.tools.len(),
                status.resources.len(),
                status.prompts.len()
            ),
            ServerState::Failed(reason) => {
                failed = true;
                format!("FAILED: {reason}")
            }
        };
        out.push_str(&format!("{}: {state}\n", status.name));
        for tool in &status.tools {
            out.push_str(&format!("  {tool}\n"));
        }
        for resource in &status.resources {
            out.push_str(&format!("  resource {resource}\n"));
        }
        for prompt in &status.prompts {
            out.push_str(&format!("  prompt {prompt}\n"));
        }
    }
    match crate::print_out(&out) {
        0 if failed => 1,
        code => code,
    }
}

/// `dsh mcp add NAME -- CMD ARGS…` / `dsh mcp add NAME --url URL`: the server's table added to
/// config.toml, the rest of the file as written.
pub fn add(
    overrides: &Overrides,
    name: &str,
    url: Option<String>,
    command: Vec<String>,
) -> anyhow::Result<String> {
    let server = match (url, command.split_first()) {
        (Some(url), None) => NewServer::Http { url },
        (None, Some((program, args))) => NewServer::Stdio {
            command: program.clone(),
            args: args.to_vec(),
        },
        _ => anyhow::bail!(
            "say how to reach the server: dsh mcp add {name} -- COMMAND ARGS…, or dsh mcp add \
             {name} --url URL"
        ),
    };
    let path = Settings::load(overrides)?.config_path;
    add_mcp_server(&path, name, &server)?;
    Ok(format!(
        "added MCP server `{name}` to {} (check it with dsh mcp list)\n",
        path.display()
    ))
}

/// `dsh mcp remove NAME`: the server's table taken out of config.toml.
pub fn remove(overrides: &Overrides, name: &str) -> anyhow::Result<String> {
    let path = Settings::load(overrides)?.config_path;
    if remove_mcp_server(&path, name)? {
        Ok(format!(
            "removed MCP server `{name}` from {}\n",
            path.display()
        ))
    } else {
        anyhow::bail!("no MCP server `{name}` in {}", path.display())
    }
}

/// `dsh mcp trust`: records this workspace's `.mcp.json`, as it is now, as trusted, so its
/// servers start (until the file changes).
pub fn trust(settings: &Settings, workspace: &std::path::Path) -> anyhow::Result<String> {
    let Some(project) = dsh_harness::project_mcp::project_servers(&settings.home.value, workspace)
        .map_err(|e| anyhow::anyhow!(e))?
    else {
        return Ok(format!(
            "nothing to trust: no {} in {}\n",
            dsh_harness::project_mcp::PROJECT_FILE,
            workspace.display()
        ));
    };
    dsh_fs::TrustRecord::new(&settings.home.value).trust(&project.path, &project.content)?;
    let names: Vec<&str> = project.configs.iter().map(|c| c.name.as_str()).collect();
    Ok(format!(
        "trusted {} (sha256 {}): its MCP servers ({}) start from now on, until it changes\n",
        project.path.display(),
        dsh_fs::content_hash(&project.content),
        names.join(", ")
    ))
}
