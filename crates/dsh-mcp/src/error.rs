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
    #[error("MCP server `{server}`: {stage} failed: {reason}{}", stderr_suffix(.stderr))]
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
    /// Start-up took longer than `startup_timeout_sec`.
    #[error(
        "MCP server `{server}`: did not start within {timeout:?} (raise startup_timeout_sec if it is just slow){}",
        stderr_suffix(.stderr)
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
