//! `dsh mcp list`: the configured servers, started, listed and stopped.

use dsh_harness::Settings;
use dsh_kernel::Context;
use dsh_mcp::{McpServers, ServerState};

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
        dsh_harness::mcp::confine(&ctx, dsh_harness::guard::supervision(&settings))?;
        let mut options = dsh_harness::mcp::options(&settings)?;
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
