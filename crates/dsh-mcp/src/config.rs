//! What one MCP server is: how to reach it and how its tools are offered.
//!
//! The shape follows Codex's `[mcp_servers.NAME]` tables so a user can copy a server between the
//! two harnesses; front ends parse their own files into these types.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::McpError;

/// How long a server may take to start and list its tools when its config names no
/// `startup_timeout_sec` (Codex's default).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one tool call may run when its server names no `tool_timeout_sec` (Codex's
/// default): a hanging server must not hang the turn.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one call may run in all, however steadily its server reports progress, when its
/// config names no `tool_timeout_max_sec`: progress extends a call's timeout, and a server
/// that reports forever must still not hold the turn forever.
pub const DEFAULT_TOOL_TIMEOUT_MAX: Duration = Duration::from_secs(30 * 60);

/// How a server is reached. Its `Debug` form names variables and headers but never shows their
/// values: they are where credentials live.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A local program speaking MCP on its stdin and stdout.
    Stdio {
        /// The program (looked up on `PATH` when it has no slash).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of the small inherited base (see [`crate::env`]).
        env: BTreeMap<String, String>,
        /// Further variables passed through from dsh's environment by name.
        env_vars: Vec<String>,
        /// Its working directory; `None` is the session's working directory.
        cwd: Option<PathBuf>,
    },
    /// A remote server speaking MCP's streamable HTTP transport.
    Http {
        /// The endpoint.
        url: String,
        /// The environment variable holding a bearer token (`Authorization: Bearer …`). Only
        /// the name is configured, so the token never sits in a config file or in a log.
        bearer_token_env_var: Option<String>,
        /// Extra headers sent with every request.
        http_headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                env_vars,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("env_vars", env_vars)
                .field("cwd", cwd)
                .finish(),
            Transport::Http {
                url,
                bearer_token_env_var,
                http_headers,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer_token_env_var", bearer_token_env_var)
                .field("http_headers", &http_headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// Whether the user vouched for a server's tools. The guard decides every call; this only
/// adds an allow rule (see [`ServerConfig::approval_rule`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Calls go by the rules and the approval policy (`"prompt"`, the default): dsh cannot
    /// know what a tool of someone else's server does, so with no rule allowing it the policy
    /// asks (`ask`), refuses (`never`, the `dsh run` default) or allows (`auto`).
    #[default]
    Prompt,
    /// Calls run without asking (`"approve"`), as if `allow = ["mcp__NAME__*"]` were
    /// configured: the user vouched for every tool of the server. Deny and ask rules still win.
    Approve,
}

impl ApprovalMode {
    /// The mode named `value` in a config file.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "prompt" | "auto" => Some(Self::Prompt),
            "approve" => Some(Self::Approve),
            _ => None,
        }
    }
}

/// One configured server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name: the middle of its tools' names (`mcp__NAME__tool`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// `false` keeps it configured but never started.
    pub enabled: bool,
    /// How long starting it and listing its tools may take.
    pub startup_timeout: Duration,
    /// How long one call may run without a word from its server: every progress report
    /// starts this again.
    pub tool_timeout: Duration,
    /// How long one call may run in all, progress or not.
    pub tool_timeout_max: Duration,
    /// When set, only these tools are offered.
    pub enabled_tools: Option<Vec<String>>,
    /// Tools never offered (applied after `enabled_tools`).
    pub disabled_tools: Vec<String>,
    /// Whether calls ask first.
    pub approval: ApprovalMode,
}

impl ServerConfig {
    /// A stdio server with every other setting at its default.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self::with_transport(
            name,
            Transport::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                env_vars: Vec::new(),
                cwd: None,
            },
        )
    }

    /// An HTTP server with every other setting at its default.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::with_transport(
            name,
            Transport::Http {
                url: url.into(),
                bearer_token_env_var: None,
                http_headers: BTreeMap::new(),
            },
        )
    }

    fn with_transport(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            enabled: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            tool_timeout_max: DEFAULT_TOOL_TIMEOUT_MAX,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            approval: ApprovalMode::default(),
        }
    }

    /// The allow rule `approval = "approve"` stands for (`mcp__NAME__*`, every tool of this
    /// server), for the front end to add to the guard's rules; `None` otherwise.
    pub fn approval_rule(&self) -> Option<String> {
        (self.approval == ApprovalMode::Approve).then(|| {
            format!(
                "{}{}{}*",
                crate::naming::PREFIX,
                self.name,
                crate::naming::SEPARATOR
            )
        })
    }

    /// Whether the server's tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool));
        enabled && !self.disabled_tools.iter().any(|t| t == tool)
    }

    /// Checks what can be checked before starting anything: a usable name (it becomes part of
    /// tool names a provider must accept), a command or URL, positive timeouts.
    pub fn validate(&self) -> Result<(), McpError> {
        let invalid = |reason: String| {
            Err(McpError::InvalidConfig {
                server: self.name.clone(),
                reason,
            })
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return invalid(
                "the name may contain only ASCII letters, digits, `-` and `_` (it becomes part \
                 of every tool name)"
                    .to_owned(),
            );
        }
        if self.name.contains("__") {
            return invalid("the name may not contain `__` (the tool-name separator)".to_owned());
        }
        if self.startup_timeout.is_zero() {
            return invalid("startup_timeout_sec must be positive".to_owned());
        }
        if self.tool_timeout.is_zero() {
            return invalid("tool_timeout_sec must be positive".to_owned());
        }
        if self.tool_timeout_max < self.tool_timeout {
            return invalid(format!(
                "tool_timeout_max_sec ({:?}) is shorter than tool_timeout_sec ({:?})",
                self.tool_timeout_max, self.tool_timeout
            ));
        }
        match &self.transport {
            Transport::Stdio { command, .. } if command.trim().is_empty() => {
                invalid("`command` is empty".to_owned())
            }
            Transport::Http { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                invalid(format!(
                    "`url` must be an http:// or https:// URL, got `{url}`"
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_env_or_header_values() {
        let mut stdio = ServerConfig::stdio("s", "srv", Vec::new());
        if let Transport::Stdio { env, .. } = &mut stdio.transport {
            env.insert("GITHUB_TOKEN".to_owned(), "ghp_secret".to_owned());
        }
        let mut http = ServerConfig::http("h", "https://h/mcp");
        if let Transport::Http { http_headers, .. } = &mut http.transport {
            http_headers.insert("X-Api-Key".to_owned(), "k_secret".to_owned());
        }
        let shown = format!("{stdio:?} {http:?}");
        assert!(
            shown.contains("GITHUB_TOKEN") && shown.contains("X-Api-Key"),
            "{shown}"
        );
        assert!(!shown.contains("secret"), "{shown}");
    }
}
