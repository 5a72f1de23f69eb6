//! `mcpServers` of `session/new` and `session/load`: the editor's MCP servers, for that session
//! only.
//!
//! The servers start with the session's agent (in the background; its first model request
//! waits for them), their tools are registered through the agent's own context so no other
//! session sees them, and they stop when the agent is disposed. Calls go through the guard's
//! rules and approval policy like a configured server's, and through the session's mode like
//! any mutating tool (dsh cannot tell what an MCP tool does): `default` asks the editor (one
//! question, whichever of the two asks), `auto` adds no question of its own, `read-only`
//! refuses them. Stdio servers run in the sandbox the composition provides. A server that
//! fails to start is said in the session as an agent message, and the session goes on
//! without it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, McpServer, SessionUpdate};
use dsh_agent::Setup;
use dsh_kernel::Context;
use dsh_mcp::{McpOptions, McpServers, ServerConfig, Transport};
use futures::FutureExt;

use crate::errors::invalid;
use crate::record::SessionState;

/// The editor's servers dsh will start, and what it says about the ones it skipped.
pub(crate) struct EditorServers {
    configs: Vec<ServerConfig>,
    skipped: Vec<String>,
}

/// The servers of a request as dsh configs. Names are made usable in tool names (`My Server`
/// becomes `My_Server`; repeats get `-2`, `-3`). SSE servers are skipped with a notice said in
/// the session (`initialize` says dsh speaks stdio and streamable HTTP only, but an editor
/// sends its user's whole list, and one old server must not fail the session).
pub(crate) fn configs(servers: &[McpServer]) -> Result<EditorServers, Error> {
    let mut taken = Vec::new();
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for server in servers {
        let config = match server {
            McpServer::Stdio(stdio) => {
                let mut config = ServerConfig::stdio(
                    usable_name(&stdio.name, &mut taken),
                    stdio.command.to_string_lossy().into_owned(),
                    stdio.args.clone(),
                );
                if let Transport::Stdio { env, .. } = &mut config.transport {
                    *env = stdio
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect();
                }
                config
            }
            McpServer::Http(http) => {
                let mut config = ServerConfig::http(usable_name(&http.name, &mut taken), &http.url);
                if let Transport::Http { http_headers, .. } = &mut config.transport {
                    *http_headers = http
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect::<BTreeMap<_, _>>();
                }
                config
            }
            McpServer::Sse(sse) => {
                let notice = format!(
                    "MCP server `{}` not started: dsh does not speak the SSE transport (stdio \
                     and streamable HTTP only)",
                    sse.name
                );
                tracing::warn!("{notice}");
                skipped.push(notice);
                continue;
            }
            _ => return Err(invalid("an MCP server of an unsupported transport")),
        };
        config.validate().map_err(|e| invalid(e.to_string()))?;
        out.push(config);
    }
    Ok(EditorServers {
        configs: out,
        skipped,
    })
}

/// `name` with every character a tool name cannot hold replaced by `_`, no `__` (the tool-name
/// separator), and unique among `taken`.
fn usable_name(name: &str, taken: &mut Vec<String>) -> String {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while clean.contains("__") {
        clean = clean.replace("__", "_");
    }
    let clean = match clean.trim_matches('_') {
        "" => "server".to_owned(),
        trimmed => trimmed.to_owned(),
    };
    let mut unique = clean.clone();
    let mut n = 2;
    while taken.contains(&unique) {
        unique = format!("{clean}-{n}");
        n += 1;
    }
    taken.push(unique.clone());
    unique
}

/// `setup`, then the session's servers started on the agent's context.
pub(crate) fn with_servers(
    setup: Setup,
    servers: EditorServers,
    cwd: PathBuf,
    state: Arc<SessionState>,
) -> Setup {
    let EditorServers { configs, skipped } = servers;
    if configs.is_empty() && skipped.is_empty() {
        return setup;
    }
    Box::new(move |ctx: Context| {
        async move {
            let commit = setup(ctx.clone()).await?;
            for notice in skipped {
                state
                    .updates
                    .update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        ContentBlock::from(format!("{notice}\n")),
                    )));
            }
            if configs.is_empty() {
                return Ok(commit);
            }
            // Approval is the guard's and the session mode's (MCP tools count as mutating);
            // the sandbox is the one the composition provides on the context.
            let mut options = McpOptions::new(cwd);
            options.on_failure = Some(Arc::new(move |error| {
                state
                    .updates
                    .update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        ContentBlock::from(format!("{error}\n")),
                    )));
            }));
            McpServers::start(&ctx, configs, options)?;
            Ok(commit)
        }
        .boxed()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(servers: serde_json::Value) -> Result<Vec<ServerConfig>, Error> {
        configs(&serde_json::from_value::<Vec<McpServer>>(servers).unwrap()).map(|s| s.configs)
    }

    #[test]
    fn stdio_and_http_servers_become_configs_and_sse_is_skipped_with_a_notice() {
        let configs = parse(serde_json::json!([
            {"name": "local", "command": "/bin/srv", "args": ["-v"],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "remote", "url": "https://h/mcp",
             "headers": [{"name": "X-A", "value": "b"}]}
        ]))
        .unwrap();
        let Transport::Stdio {
            command, args, env, ..
        } = &configs[0].transport
        else {
            panic!("{configs:?}")
        };
        assert_eq!(
            (command.as_str(), args.as_slice()),
            ("/bin/srv", ["-v".to_owned()].as_slice())
        );
        assert_eq!(env.get("TOKEN").map(String::as_str), Some("t"));
        let Transport::Http {
            url, http_headers, ..
        } = &configs[1].transport
        else {
            panic!("{configs:?}")
        };
        assert_eq!(url, "https://h/mcp");
        assert_eq!(http_headers.get("X-A").map(String::as_str), Some("b"));
        let sse = super::configs(
            &serde_json::from_value::<Vec<McpServer>>(serde_json::json!([
                {"type": "sse", "name": "old", "url": "https://h/sse", "headers": []},
                {"name": "local", "command": "/bin/srv", "args": [], "env": []}
            ]))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(sse.configs.len(), 1);
        assert_eq!(
            sse.skipped,
            [
                "MCP server `old` not started: dsh does not speak the SSE transport (stdio and \
              streamable HTTP only)"
            ]
        );
    }

    #[test]
    fn editor_names_become_usable_and_unique() {
        let mut taken = Vec::new();
        assert_eq!(usable_name("My Server", &mut taken), "My_Server");
        assert_eq!(usable_name("My  Server", &mut taken), "My_Server-2");
        assert_eq!(usable_name("__", &mut taken), "server");
        assert_eq!(usable_name("gh", &mut taken), "gh");
    }
}
