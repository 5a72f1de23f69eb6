//! `dsh mcp list`: the configured servers, started, listed and stopped.

use dsh_harness::config::{NewServer, add_mcp_server, remove_mcp_server};
use dsh_harness::{Overrides, Settings};

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
    let statuses = match runtime.block_on(dsh_harness::mcp::probe(&settings, configs)) {
        Ok(statuses) => statuses,
        Err(e) => {
            eprintln!("dsh: {:#}", anyhow::Error::new(e));
            return 1;
        }
    };
    let (listing, failed) = dsh_harness::mcp::describe(&statuses);
    out.push_str(&listing);
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
    let server = NewServer::from_args(name, url, command).map_err(anyhow::Error::msg)?;
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
