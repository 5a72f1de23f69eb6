//! `list_mcp_resources` and `read_mcp_resource`: the servers' resources for the model.
//!
//! Offered by a set of servers once one of them lists resources, named without a server part
//! (the server is an argument) as Codex and Claude Code name them. Listing waits (bounded)
//! for an announced `resources/list_changed` to be listed again, so the model never reads a
//! list the server already said is stale. Both only read: the spec makes `resources/read`
//! side-effect free, and a stdio server runs in the session's sandbox whatever it is asked,
//! so their effects are declared as none (the guard lets them run, as it does `read_file`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use dsh_session::Attachments;
use dsh_tools::{Tool, ToolCallContext, ToolEffects, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::result::resource_blocks;
use crate::server::McpServer;
use crate::servers::McpServers;

/// The name of the listing tool.
pub const LIST_RESOURCES: &str = "list_mcp_resources";
/// The name of the reading tool.
pub const READ_RESOURCE: &str = "read_mcp_resource";

/// How long a listing waits for an announced change to be listed again.
const RELIST_WAIT: Duration = Duration::from_secs(5);

/// Lists the resources of every ready server, or of one.
pub(crate) struct ListResources {
    pub(crate) set: Weak<McpServers>,
}

/// Reads one resource of one server.
pub(crate) struct ReadResource {
    pub(crate) set: Weak<McpServers>,
    pub(crate) attachments: Option<Arc<dyn Attachments>>,
}

fn servers(set: &Weak<McpServers>) -> Vec<Arc<McpServer>> {
    set.upgrade().map(|s| s.ready()).unwrap_or_default()
}

fn unknown_server(tool: &str, name: &str, servers: &[Arc<McpServer>]) -> ToolError {
    let names: Vec<&str> = servers.iter().map(|s| s.config().name.as_str()).collect();
    ToolError::invalid_arguments(
        tool,
        format!(
            "no MCP server `{name}` is running (running: {})",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ),
    )
}

#[async_trait]
impl Tool for ListResources {
    fn name(&self) -> &str {
        LIST_RESOURCES
    }

    fn description(&self) -> &str {
        "Lists the resources (files, records, documents) MCP servers offer: for each, its \
         server, uri, name, mimeType and description. Read one with read_mcp_resource."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "Only this server's resources."}
            }
        })
    }

    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        true
    }

    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::none()
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let all = servers(&self.set);
        let wanted = args.get("server").and_then(Value::as_str);
        let chosen: Vec<&Arc<McpServer>> = all
            .iter()
            .filter(|s| wanted.is_none_or(|w| s.config().name == w))
            .collect();
        if let Some(name) = wanted
            && chosen.is_empty()
        {
            return Err(unknown_server(LIST_RESOURCES, name, &all));
        }
        let mut listed = Vec::new();
        for server in chosen {
            let resources = tokio::select! {
                () = call.cancel().cancelled() => return Err(ToolError::aborted()),
                resources = server.resources_up_to_date(RELIST_WAIT) => resources,
            };
            for resource in resources.iter() {
                let mut entry = json!({
                    "server": server.config().name,
                    "uri": resource.uri,
                    "name": resource.name,
                });
                if let Some(mime) = &resource.mime_type {
                    entry["mimeType"] = json!(mime);
                }
                if let Some(description) = &resource.description {
                    entry["description"] = json!(description);
                }
                listed.push(entry);
            }
        }
        Ok(ToolOutput::text(
            serde_json::to_string_pretty(&listed).unwrap_or_default(),
        ))
    }
}

#[async_trait]
impl Tool for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE
    }

    fn description(&self) -> &str {
        "Reads one resource of an MCP server by its uri (from list_mcp_resources): text comes \
         back as text under a line naming its uri and MIME type, images as images."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "The server offering the resource."},
                "uri": {"type": "string", "description": "The resource's uri."}
            },
            "required": ["server", "uri"]
        })
    }

    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        true
    }

    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::none()
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let field = |name: &str| {
            args.get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    ToolError::invalid_arguments(READ_RESOURCE, format!("`{name}` is required"))
                })
        };
        let (name, uri) = (field("server")?, field("uri")?);
        let all = servers(&self.set);
        let server = all
            .iter()
            .find(|s| s.config().name == name)
            .ok_or_else(|| unknown_server(READ_RESOURCE, name, &all))?;
        let contents = server
            .read_resource(uri, call.cancel())
            .await
            .map_err(|why| {
                if call.cancel().is_cancelled() {
                    return ToolError::aborted();
                }
                ToolError::coded(
                    "McpCallError",
                    crate::MCP_CALL_FAILED,
                    format!("MCP server `{name}` could not read `{uri}`: {why}"),
                )
            })?;
        Ok(ToolOutput {
            content: resource_blocks(&contents, self.attachments.as_deref()),
            is_error: false,
            meta: Some(json!({"mcp": {"server": name, "resource": uri}})),
        })
    }
}
