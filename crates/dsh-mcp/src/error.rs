//! Why a server could not be used.

use std::time::Duration;

/// A server that failed to start, or a config that cannot describe one. Never fatal to a
/// session: the failure is reported and the session goes on without the server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The configuration cannot work.
    #[error("MCP server `{server}`: {reason}")]
    InvalidConfig {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// The program could not be started.
    #[error("MCP server `{server}`: cannot start `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The server's sandbox cannot be set up (a confining mode this kernel cannot enforce):
    /// it was not started, never started unconfined.
    #[error("MCP server `{server}`: not started: {source}")]
    Confinement {
        /// The server's name.
        server: String,
        /// Why the sandbox refused.
        source: dsh_kernel::BoxError,
    },
    /// The bearer token variable is not set.
    #[error("MCP server `{server}`: the bearer token variable {var} is not set")]
    MissingToken {
        /// The server's name.
        server: String,
        /// The variable's name (never its value).
        var: String,
    },
    /// The MCP handshake or the tool listing failed.
    #[error("MCP server `{server}`: {stage} failed: {reason}{}{}", stderr_suffix(.stderr), cache_hint(.stderr))]
    Protocol {
        /// The server's name.
        server: String,
        /// `initialize` or `tools/list`.
        stage: &'static str,
        /// The SDK's reason.
        reason: String,
        /// The last lines the server printed on stderr, when it is a local program.
        stderr: String,
    },
    /// A stdio server kept going away and was not started again.
    #[error(
        "MCP server `{server}`: went away again after {restarts} restarts; not started again \
         (its tools are withdrawn)"
    )]
    GoneAway {
        /// The server's name.
        server: String,
        /// How many times it was started again.
        restarts: u32,
    },
    /// Start-up took longer than `startup_timeout_sec`.
    #[error(
        "MCP server `{server}`: did not start within {timeout:?} (raise startup_timeout_sec if it is just slow){}{}",
        stderr_suffix(.stderr),
        cache_hint(.stderr)
    )]
    StartupTimeout {
        /// The server's name.
        server: String,
        /// The limit.
        timeout: Duration,
        /// The last lines the server printed on stderr.
        stderr: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with:\n{}", stderr.trim_end())
    }
}

/// The per-user cache and package directories launchers such as `npx`, `uvx` and `bunx` write
/// before the server even runs.
const CACHES: &[&str] = &[
    "/.npm",
    "/.cache",
    "/.yarn",
    "/.pnpm-store",
    "/.bun",
    "/.local/share",
    "/.deno",
    "/.cargo",
];

/// A hint when the server's stderr says a write to a cache directory was refused: under the
/// sandbox a stdio server may write only the workspace, and npm's own advice for EACCES
/// (`sudo chown`) is wrong here. Names the directory and the setting that grants it.
fn cache_hint(stderr: &str) -> String {
    let refused = [
        "EACCES",
        "EROFS",
        "Permission denied",
        "Read-only file system",
    ];
    if !refused.iter().any(|r| stderr.contains(r)) {
        return String::new();
    }
    let found = stderr
        .split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ','))
        .find_map(|word| {
            let word = word.trim_start_matches("path=");
            CACHES.iter().find_map(|cache| {
                let at = word.find(cache)?;
                word.starts_with('/')
                    .then(|| word[..at + cache.len()].to_owned())
            })
        });
    match found {
        Some(dir) => format!(
            "\nhint: the sandbox refused a write to {dir} (a launcher's cache, not a permission \
             problem to fix with chown): let stdio servers and commands write it with \
             `writable_roots = [\"{dir}\"]` under [sandbox] in config.toml"
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_cache_eacces_names_the_directory_and_writable_roots() {
        // What `npx -y @modelcontextprotocol/server-everything` prints under the sandbox.
        let stderr = "npm error code EACCES\nnpm error syscall mkdir\nnpm error path /home/u/.npm/_cacache\n\
                      npm error errno -13\nnpm error Your cache folder contains root-owned files, \
                      due to a bug in\nnpm error previous versions of npm which has since been \
                      addressed.\nnpm error To permanently fix this problem, please run:\n\
                      npm error   sudo chown -R 1000:1000 \"/home/u/.npm\"";
        let error = McpError::Protocol {
            server: "everything".to_owned(),
            stage: "initialize",
            reason: "connection closed".to_owned(),
            stderr: stderr.to_owned(),
        };
        let shown = error.to_string();
        assert!(
            shown.ends_with(
                "hint: the sandbox refused a write to /home/u/.npm (a launcher's cache, not a \
                 permission problem to fix with chown): let stdio servers and commands write it \
                 with `writable_roots = [\"/home/u/.npm\"]` under [sandbox] in config.toml"
            ),
            "{shown}"
        );
        assert_eq!(
            cache_hint("EACCES: permission denied, open '/srv/data.db'"),
            ""
        );
        assert_eq!(cache_hint("no such file /home/u/.npm/x"), "");
    }
}
