//! Project-scoped MCP servers: `<workspace>/.mcp.json` in Claude Code's format, used only
//! once the person trusted the file as it is now (the same trust record as workspace hooks:
//! `$DSH_HOME/trusted.json`, keyed by path and content hash; `dsh mcp trust` records it).
//!
//! A cloned repository must not start programs just because it was opened, so an untrusted
//! (or changed) file starts nothing and each of its servers is reported as not started, with
//! the command that trusts it. The user's own `[mcp_servers.NAME]` win over a project server
//! of the same name.
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
//!             "env": {"LOG": "1"}},
//!   "docs": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Team": "core"}}
//! }}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_fs::{Oversize, Trust, TrustRecord};
use dsh_mcp::{ServerConfig, Transport};
use serde::Deserialize;

/// The file's name in a workspace.
pub const PROJECT_FILE: &str = ".mcp.json";

/// The most of `.mcp.json` that is read.
const LIMIT: u64 = 1 << 20;

/// A workspace's `.mcp.json` as dsh judged it.
#[derive(Debug, Default)]
pub struct ProjectServers {
    /// Where it is.
    pub path: PathBuf,
    /// Its bytes (what `dsh mcp trust` records).
    pub content: Vec<u8>,
    /// Whether the person trusted exactly this content.
    pub trusted: bool,
    /// Its servers (started only when trusted).
    pub configs: Vec<ServerConfig>,
    /// Entries skipped, with why (an SSE server, a bad entry).
    pub problems: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    mcp_servers: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The `.mcp.json` of `workspace` judged against the trust record of `home`; `None` when
/// there is none. A file that cannot be read or parsed is an error naming it.
pub fn project_servers(home: &Path, workspace: &Path) -> Result<Option<ProjectServers>, String> {
    let path = workspace.join(PROJECT_FILE);
    let Some(file) =
        dsh_fs::read_placed(&path, LIMIT, Oversize::Refuse).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let parsed: File = serde_json::from_slice(&file.bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let trusted = TrustRecord::new(home)
        .check(&path, &file.bytes)
        .map_err(|e| e.to_string())?
        == Trust::Trusted;
    let mut out = ProjectServers {
        path: path.clone(),
        content: file.bytes,
        trusted,
        ..ProjectServers::default()
    };
    for (name, entry) in parsed.mcp_servers {
        match config(&name, entry) {
            Ok(config) => out.configs.push(config),
            Err(why) => out
                .problems
                .push(format!("MCP server `{name}` of {}: {why}", path.display())),
        }
    }
    Ok(Some(out))
}

fn config(name: &str, entry: Entry) -> Result<ServerConfig, String> {
    let config = match (entry.kind.as_deref(), entry.command, entry.url) {
        (Some("sse"), _, _) => {
            return Err("not started: dsh does not speak the SSE transport".to_owned());
        }
        (None | Some("stdio"), Some(command), None) => {
            let mut config = ServerConfig::stdio(name, command, entry.args);
            if let Transport::Stdio { env, .. } = &mut config.transport {
                *env = entry.env;
            }
            config
        }
        (None | Some("http"), None, Some(url)) => {
            let mut config = ServerConfig::http(name, url);
            if let Transport::Http { http_headers, .. } = &mut config.transport {
                *http_headers = entry.headers;
            }
            config
        }
        (kind, command, url) => {
            return Err(format!(
                "needs a `command` (stdio) or a `url` (http), not {}{}{}",
                kind.map(|k| format!("type {k:?} ")).unwrap_or_default(),
                if command.is_some() { "command " } else { "" },
                if url.is_some() { "url" } else { "" }
            ));
        }
    };
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// `dsh mcp trust`: records `workspace`'s `.mcp.json`, as it is now, as trusted, so its
/// servers start (until the file changes); what to tell the person.
pub fn trust(home: &Path, workspace: &Path) -> Result<String, String> {
    let Some(project) = project_servers(home, workspace)? else {
        return Ok(format!(
            "nothing to trust: no {PROJECT_FILE} in {}\n",
            workspace.display()
        ));
    };
    TrustRecord::new(home)
        .trust(&project.path, &project.content)
        .map_err(|e| e.to_string())?;
    let names: Vec<&str> = project.configs.iter().map(|c| c.name.as_str()).collect();
    Ok(format!(
        "trusted {} (sha256 {}): its MCP servers ({}) start from now on, until it changes\n",
        project.path.display(),
        dsh_fs::content_hash(&project.content),
        names.join(", ")
    ))
}

/// `configs` (the user's) followed by the project's trusted servers whose names the user's do
/// not take; the notices say what was left out and why (untrusted, shadowed, bad entries).
pub fn with_project(
    configs: &[ServerConfig],
    project: Option<&ProjectServers>,
) -> (Vec<ServerConfig>, Vec<String>) {
    let mut all = configs.to_vec();
    let mut notices = Vec::new();
    let Some(project) = project else {
        return (all, notices);
    };
    notices.extend(project.problems.iter().cloned());
    if !project.trusted && !project.configs.is_empty() {
        let names: Vec<&str> = project.configs.iter().map(|c| c.name.as_str()).collect();
        notices.push(format!(
            "{} configures MCP servers ({}) that were not started: trust it as it is now with \
             `dsh mcp trust` to use them",
            project.path.display(),
            names.join(", ")
        ));
        return (all, notices);
    }
    for config in &project.configs {
        if configs.iter().any(|c| c.name == config.name) {
            notices.push(format!(
                "MCP server `{}` of {} is not started: your config.toml has one of that name",
                config.name,
                project.path.display()
            ));
        } else {
            all.push(config.clone());
        }
    }
    (all, notices)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const FILE: &str = r#"{"mcpServers": {
        "files": {"command": "srv", "args": ["-v"], "env": {"A": "1"}},
        "docs": {"type": "http", "url": "https://example.com/mcp"},
        "old": {"type": "sse", "url": "https://example.com/sse"},
        "mine": {"command": "other"}
    }}"#;

    #[test]
    fn a_project_file_starts_nothing_until_trusted_and_the_users_servers_win() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join(PROJECT_FILE), FILE).unwrap();
        let users = vec![ServerConfig::stdio("mine", "my-srv", Vec::new())];
        let project = project_servers(home.path(), ws.path()).unwrap().unwrap();
        assert!(!project.trusted);
        let (all, notices) = with_project(&users, Some(&project));
        assert_eq!(all, users);
        assert!(notices.iter().any(|n| n.contains("SSE")), "{notices:?}");
        assert!(
            notices
                .iter()
                .any(|n| n.contains("(docs, files, mine)") && n.contains("dsh mcp trust")),
            "{notices:?}"
        );
        TrustRecord::new(home.path())
            .trust(&project.path, &project.content)
            .unwrap();
        let project = project_servers(home.path(), ws.path()).unwrap().unwrap();
        assert!(project.trusted);
        let (all, notices) = with_project(&users, Some(&project));
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["mine", "docs", "files"]);
        assert_eq!(
            all[0].transport, users[0].transport,
            "the user's `mine` wins"
        );
        assert!(
            notices
                .iter()
                .any(|n| n.contains("your config.toml has one"))
        );
        // A change after the trust starts nothing again.
        std::fs::write(ws.path().join(PROJECT_FILE), FILE.replace("-v", "-x")).unwrap();
        let changed = project_servers(home.path(), ws.path()).unwrap().unwrap();
        assert!(!changed.trusted);
    }
}
