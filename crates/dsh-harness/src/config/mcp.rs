//! `[mcp_servers.NAME]`: MCP servers in the shape Codex uses, so a table can be copied between
//! the two harnesses.
//!
//! ```toml
//! [mcp_servers.github]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "…" }
//!
//! [mcp_servers.docs]
//! url = "https://example.com/mcp"
//! bearer_token_env_var = "DOCS_TOKEN"
//! ```
//!
//! A table is checked as a whole (a command or a url, not both; keys that belong to the other
//! transport; positive timeouts; a known approval mode; a usable name) and every mistake is
//! reported at the table's `file:line:column`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_guard::Rule;
use dsh_mcp::{
    ApprovalMode, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, DEFAULT_TOOL_TIMEOUT_MAX,
    ServerConfig, Transport,
};
use serde::Deserialize;

use super::located;
use crate::error::{ConfigError, config_error};

/// One `[mcp_servers.NAME]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMcpServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    env: Option<BTreeMap<String, String>>,
    env_vars: Option<Vec<String>>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    bearer_token_env_var: Option<String>,
    http_headers: Option<BTreeMap<String, String>>,
    enabled: Option<bool>,
    startup_timeout_sec: Option<f64>,
    tool_timeout_sec: Option<f64>,
    tool_timeout_max_sec: Option<f64>,
    enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    disabled_tools: Vec<String>,
    default_tools_approval_mode: Option<String>,
}

/// The servers of the file, in name order, or the first mistake at its location.
pub(super) fn resolve(
    path: &Path,
    text: &str,
    servers: BTreeMap<String, toml::Spanned<FileMcpServer>>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    servers
        .into_iter()
        .map(|(name, table)| {
            let at = located(path, text, table.span().start);
            server(&name, table.into_inner()).map_err(|reason| {
                config_error!("invalid config file {at}: mcp_servers.{name}: {reason}")
            })
        })
        .collect()
}

/// The allow rules that servers' `default_tools_approval_mode = "approve"` stands for
/// (`mcp__NAME__*`), so the guard decides their calls like any other (deny and ask rules still
/// win) and `dsh config show` lists them with the table they come from.
pub(super) fn approval_rules(path: &Path, servers: &[ServerConfig]) -> Vec<Rule> {
    servers
        .iter()
        .filter_map(|server| {
            // Server names were checked above (letters, digits, `-`, `_`), so the rule parses;
            // one that did not would only lose its shortcut, never widen anything.
            let mut rule = Rule::parse(&server.approval_rule()?).ok()?;
            rule.origin = Some(format!(
                "{} [mcp_servers.{}] default_tools_approval_mode",
                path.display(),
                server.name
            ));
            Some(rule)
        })
        .collect()
}

fn server(name: &str, file: FileMcpServer) -> Result<ServerConfig, String> {
    let transport = match (file.command, file.url) {
        (Some(_), Some(_)) => return Err("set either `command` or `url`, not both".to_owned()),
        (None, None) => {
            return Err("missing `command` (a local server) or `url` (a remote one)".to_owned());
        }
        (Some(command), None) => {
            if file.bearer_token_env_var.is_some() || file.http_headers.is_some() {
                return Err(
                    "`bearer_token_env_var` and `http_headers` apply to `url` servers only"
                        .to_owned(),
                );
            }
            Transport::Stdio {
                command,
                args: file.args,
                env: file.env.unwrap_or_default(),
                env_vars: file.env_vars.unwrap_or_default(),
                cwd: file.cwd,
            }
        }
        (None, Some(url)) => {
            if !file.args.is_empty()
                || file.env.is_some()
                || file.env_vars.is_some()
                || file.cwd.is_some()
            {
                return Err(
                    "`args`, `env`, `env_vars` and `cwd` apply to `command` servers only"
                        .to_owned(),
                );
            }
            Transport::Http {
                url,
                bearer_token_env_var: file.bearer_token_env_var,
                http_headers: file.http_headers.unwrap_or_default(),
            }
        }
    };
    let approval = match file.default_tools_approval_mode.as_deref() {
        None => ApprovalMode::default(),
        Some(mode) => ApprovalMode::parse(mode).ok_or_else(|| {
            format!("unknown default_tools_approval_mode `{mode}` (\"prompt\" or \"approve\")")
        })?,
    };
    let config = ServerConfig {
        name: name.to_owned(),
        transport,
        enabled: file.enabled.unwrap_or(true),
        startup_timeout: seconds("startup_timeout_sec", file.startup_timeout_sec)?
            .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        tool_timeout: seconds("tool_timeout_sec", file.tool_timeout_sec)?
            .unwrap_or(DEFAULT_TOOL_TIMEOUT),
        tool_timeout_max: seconds("tool_timeout_max_sec", file.tool_timeout_max_sec)?
            .unwrap_or(DEFAULT_TOOL_TIMEOUT_MAX),
        enabled_tools: file.enabled_tools,
        disabled_tools: file.disabled_tools,
        approval,
    };
    // The name and transport rules live with the type; report them here, at the table.
    config.validate().map_err(|e| match e {
        dsh_mcp::McpError::InvalidConfig { reason, .. } => reason,
        other => other.to_string(),
    })?;
    Ok(config)
}

fn seconds(key: &str, value: Option<f64>) -> Result<Option<Duration>, String> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(format!(
            "{key} must be a positive number of seconds, got {s}"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, toml::Spanned<FileMcpServer>>,
        }
        let file: File = toml::from_str(text).unwrap();
        resolve(Path::new("/c.toml"), text, file.mcp_servers)
    }

    #[test]
    fn codex_shaped_tables_become_server_configs() {
        let servers = parse(
            r#"
[mcp_servers.github]
command = "npx"
args = ["-y", "server-github"]
env = { GITHUB_TOKEN = "t" }
tool_timeout_sec = 1.5
tool_timeout_max_sec = 90
enabled_tools = ["a"]
default_tools_approval_mode = "approve"

[mcp_servers.docs]
url = "https://example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"
enabled = false
"#,
        )
        .unwrap();
        assert_eq!(servers[0].name, "docs");
        assert!(!servers[0].enabled);
        assert_eq!(
            servers[0].transport,
            Transport::Http {
                url: "https://example.com/mcp".to_owned(),
                bearer_token_env_var: Some("DOCS_TOKEN".to_owned()),
                http_headers: BTreeMap::new(),
            }
        );
        let github = &servers[1];
        assert_eq!(github.tool_timeout, Duration::from_millis(1500));
        assert_eq!(github.tool_timeout_max, Duration::from_secs(90));
        assert_eq!(servers[0].tool_timeout_max, DEFAULT_TOOL_TIMEOUT_MAX);
        assert_eq!(github.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(github.approval, ApprovalMode::Approve);
        assert_eq!(github.enabled_tools, Some(vec!["a".to_owned()]));
        let rules = approval_rules(Path::new("/c.toml"), &servers);
        assert_eq!(rules.len(), 1, "only the approved server gets a rule");
        assert_eq!(rules[0].text(), "mcp__github__*");
        assert_eq!(
            rules[0].origin.as_deref(),
            Some("/c.toml [mcp_servers.github] default_tools_approval_mode")
        );
    }

    #[test]
    fn mistakes_are_reported_at_the_table() {
        let cases = [
            ("[mcp_servers.x]\nargs = []\n", "missing `command`"),
            (
                "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n",
                "either `command` or `url`",
            ),
            (
                "[mcp_servers.x]\ncommand = \"a\"\nbearer_token_env_var = \"T\"\n",
                "apply to `url` servers only",
            ),
            (
                "[mcp_servers.x]\ncommand = \"a\"\nstartup_timeout_sec = 0\n",
                "startup_timeout_sec must be a positive",
            ),
            (
                "[mcp_servers.x]\ncommand = \"a\"\ntool_timeout_sec = 5\ntool_timeout_max_sec = 2\n",
                "tool_timeout_max_sec (2s) is shorter than tool_timeout_sec (5s)",
            ),
            (
                "[mcp_servers.x]\ncommand = \"a\"\ndefault_tools_approval_mode = \"yolo\"\n",
                "unknown default_tools_approval_mode",
            ),
            (
                "[mcp_servers.\"a b\"]\ncommand = \"a\"\n",
                "the name may contain only",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
            assert!(error.starts_with("invalid config file /c.toml:"), "{error}");
        }
    }
}
