//! `dsh mcp add` and `dsh mcp remove`: one `[mcp_servers.NAME]` table added to or taken out
//! of `config.toml`, everything else in the file (comments, order, spacing) left as written.
//!
//! The edited text must still load as a config before it replaces the file, so a bad edit
//! never lands; the file is replaced atomically (a flushed sibling renamed over it, its mode
//! kept) so a crash leaves the old file or the new one, never half of either.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use dsh_mcp::ServerConfig;
use toml_edit::{Array, DocumentMut, Item, Table, value};

use crate::error::{ConfigError, config_error};

/// How the added server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewServer {
    /// A local program and its arguments.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The URL.
        url: String,
    },
}

impl NewServer {
    /// The server `dsh mcp add NAME` describes: `--url URL`, or a command after `--`.
    pub fn from_args(
        name: &str,
        url: Option<String>,
        command: Vec<String>,
    ) -> Result<Self, String> {
        match (url, command.split_first()) {
            (Some(url), None) => Ok(NewServer::Http { url }),
            (None, Some((program, args))) => Ok(NewServer::Stdio {
                command: program.clone(),
                args: args.to_vec(),
            }),
            _ => Err(format!(
                "say how to reach the server: dsh mcp add {name} -- COMMAND ARGS…, or dsh mcp \
                 add {name} --url URL"
            )),
        }
    }
}

/// Adds `[mcp_servers.NAME]` for `server` to the config file at `path` (created when
/// missing). A name already configured is refused, as is a name or URL the server config
/// would refuse.
pub fn add_mcp_server(path: &Path, name: &str, server: &NewServer) -> Result<(), ConfigError> {
    let probe = match server {
        NewServer::Stdio { command, args } => ServerConfig::stdio(name, command, args.clone()),
        NewServer::Http { url } => ServerConfig::http(name, url),
    };
    probe.validate().map_err(|e| config_error!("{e}"))?;
    let text = super::read_config(path)?.unwrap_or_default();
    let mut doc = document(path, &text)?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .ok_or_else(|| config_error!("{}: `mcp_servers` is not a table", path.display()))?;
    if servers.contains_key(name) {
        return Err(config_error!(
            "MCP server `{name}` is already configured in {} (dsh mcp remove {name} first)",
            path.display()
        ));
    }
    let mut table = Table::new();
    match server {
        NewServer::Stdio { command, args } => {
            table.insert("command", value(command.as_str()));
            let mut list = Array::new();
            for arg in args {
                list.push(arg.as_str());
            }
            table.insert("args", value(list));
        }
        NewServer::Http { url } => {
            table.insert("url", value(url.as_str()));
        }
    }
    servers.insert(name, Item::Table(table));
    save(path, &doc.to_string())
}

/// Removes `[mcp_servers.NAME]` from the config file at `path`; `false` when it is not there.
pub fn remove_mcp_server(path: &Path, name: &str) -> Result<bool, ConfigError> {
    let Some(text) = super::read_config(path)? else {
        return Ok(false);
    };
    let mut doc = document(path, &text)?;
    let removed = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .and_then(|servers| servers.remove(name))
        .is_some();
    if removed {
        save(path, &doc.to_string())?;
    }
    Ok(removed)
}

fn document(path: &Path, text: &str) -> Result<DocumentMut, ConfigError> {
    text.parse::<DocumentMut>()
        .map_err(|e| config_error!("cannot edit {}: {e}", path.display()))
}

/// Checks `text` loads as a config, then replaces the file with it atomically.
fn save(path: &Path, text: &str) -> Result<(), ConfigError> {
    super::parse_file(path, text)?;
    let failed = |e: std::io::Error| config_error!("cannot write {}: {e}", path.display());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(failed)?;
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let mut temp = tempfile::Builder::new()
        .prefix(".config.toml.")
        .tempfile_in(dir)
        .map_err(failed)?;
    temp.write_all(text.as_bytes()).map_err(failed)?;
    temp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(failed)?;
    temp.as_file().sync_all().map_err(failed)?;
    temp.persist(path).map_err(|e| failed(e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(failed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const WRITTEN: &str = "# my settings\n[sandbox] # mine\nmode = \"read-only\" # strict\n\n\
                           [mcp_servers.old]   # keep me\ncommand = \"old-server\"\n";

    #[test]
    fn adding_and_removing_a_server_keeps_every_comment_and_refuses_a_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, WRITTEN).unwrap();
        add_mcp_server(
            &path,
            "files",
            &NewServer::Stdio {
                command: "npx".to_owned(),
                args: vec![
                    "-y".to_owned(),
                    "@modelcontextprotocol/server-filesystem".to_owned(),
                ],
            },
        )
        .unwrap();
        add_mcp_server(
            &path,
            "docs",
            &NewServer::Http {
                url: "https://example.com/mcp".to_owned(),
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(WRITTEN), "{text}");
        assert!(
            text.contains(
                "[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\"]\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("[mcp_servers.docs]\nurl = \"https://example.com/mcp\"\n"),
            "{text}"
        );
        let twice = add_mcp_server(
            &path,
            "old",
            &NewServer::Http {
                url: "https://h/mcp".to_owned(),
            },
        );
        assert!(
            twice
                .unwrap_err()
                .to_string()
                .contains("already configured")
        );
        assert!(remove_mcp_server(&path, "files").unwrap());
        assert!(remove_mcp_server(&path, "docs").unwrap());
        assert!(!remove_mcp_server(&path, "docs").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), WRITTEN);
    }

    #[test]
    fn a_bad_name_or_url_is_refused_and_the_file_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, WRITTEN).unwrap();
        let bad_name = add_mcp_server(
            &path,
            "a b",
            &NewServer::Stdio {
                command: "x".to_owned(),
                args: Vec::new(),
            },
        );
        assert!(
            bad_name
                .unwrap_err()
                .to_string()
                .contains("the name may contain only")
        );
        let bad_url = add_mcp_server(
            &path,
            "u",
            &NewServer::Http {
                url: "ftp://h".to_owned(),
            },
        );
        assert!(
            bad_url
                .unwrap_err()
                .to_string()
                .contains("http:// or https://")
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), WRITTEN);
    }
}
