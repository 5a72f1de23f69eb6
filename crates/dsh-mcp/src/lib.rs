//! MCP for dsh: the tools of Model Context Protocol servers as dsh tools.
//!
//! Built on the official Rust SDK, `rmcp`, as a client of two transports: **stdio** (a local
//! program dsh starts: [`Transport::Stdio`]) and **streamable HTTP** (a remote endpoint, with
//! an optional bearer token read from a named variable: [`Transport::Http`]). Front ends
//! describe servers as [`ServerConfig`]s (the CLI reads Codex-shaped `[mcp_servers.NAME]`
//! tables; the ACP bridge takes the editor's `mcpServers`) and start them as a set:
//!
//! - [`McpPlugin`] for process-wide servers, or [`McpServers::start`] on an agent's context for
//!   one session's servers. Servers start concurrently, each bounded by its start-up timeout; a
//!   server that fails is reported and the session goes on without it.
//! - Tools are offered as `mcp__<server>__<tool>` ([`naming`]) with schemas made acceptable to
//!   providers ([`schema`]); results become tool outputs ([`result`]).
//! - The tool list changes only at step boundaries (`system-prompt/assemble`), so the prompt
//!   prefix is stable within a step even when a server announces a new list.
//! - A server's progress reports are shown live and keep its call alive: each one starts the
//!   call's `tool_timeout` again, up to `tool_timeout_max` in all.
//! - A cancelled call returns `ABORTED` at once and sends `notifications/cancelled`; a hanging
//!   server is bounded by the tool timeout.
//! - Approval is the guard's (dsh-guard): an MCP tool asks under the approval policy unless a
//!   rule allows it; [`ServerConfig::approval_rule`] turns a server's `approval = "approve"`
//!   into such a rule.
//! - Stdio servers get an environment built from an allow-list ([`env`]). When the context
//!   provides a [`dsh_shell::Supervision`] (dsh's guard) they run under it like every command:
//!   inside the session's sandbox, and nothing they start (a `setsid` daemon included)
//!   outlives them or dsh. Without one they run in their own process group under the shell's
//!   `sh` supervisor, so none outlives dsh, even on SIGKILL.

mod config;
mod elicit;
pub mod env;
mod error;
mod exit;
mod handler;
pub mod instructions;
mod listing;
pub mod naming;
mod plugin;
mod process;
mod prompts;
mod resources;
pub mod result;
pub mod schema;
mod server;
mod servers;
mod tool;

#[cfg(feature = "test-server")]
pub mod test_server;

pub use config::{
    ApprovalMode, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, DEFAULT_TOOL_TIMEOUT_MAX,
    ServerConfig, Transport,
};
pub use error::McpError;
pub use plugin::McpPlugin;
pub use prompts::{PromptCommand, expand_prompt, prompt_commands};
pub use resources::{LIST_RESOURCES, READ_RESOURCE};
pub use server::{MCP_CALL_FAILED, MCP_TOOL_TIMEOUT, McpServer, OfferedTool};
pub use servers::{
    EnvLookup, FailureReporter, MAX_RESTARTS, McpOptions, McpServers, ServerState, ServerStatus,
};
