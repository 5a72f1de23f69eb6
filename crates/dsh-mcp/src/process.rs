//! A stdio server as a supervised process group: nothing it starts outlives dsh.
//!
//! The server follows the shell's discipline (`dsh_shell::supervisor`): a supervisor `sh` leads
//! a fresh process group and blocks on a pipe whose write end (the lifeline) only this process
//! holds; the server is spawned into that group. When dsh closes the lifeline — on shutdown, or
//! because it died, SIGKILL included, and the kernel closed its descriptors — the supervisor
//! kills the whole group: the server and anything the server started (`npx` → `node`, `uvx` →
//! `python`).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::process::{ChildStdin as StdChildStdin, Stdio};
use std::sync::Arc;
use std::time::Duration;

use dsh_shell::supervisor::{self, Supervisor};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long a server gets to exit by itself once its stdin is closed, before its group is
/// killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How many of a server's last stderr lines are kept for error reports.
const STDERR_LINES: usize = 20;

/// The last lines a server printed on stderr: what a "failed to start" report shows.
#[derive(Debug, Default)]
pub(crate) struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock();
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, joined.
    pub(crate) fn text(&self) -> String {
        let lines = self.0.lock();
        lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

/// A running stdio server.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    supervisor: std::process::Child,
    /// Held, never written; dropping it makes the supervisor kill the group.
    lifeline: Option<StdChildStdin>,
    pub(crate) stderr: Arc<StderrTail>,
}

/// What to start.
pub(crate) struct Launch<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(OsString, OsString)],
}

impl ServerProcess {
    /// Starts the supervisor, then the server in its group with piped stdin/stdout (the MCP
    /// channel) and stderr (kept as a tail and logged at debug level).
    pub(crate) fn spawn(launch: &Launch<'_>) -> std::io::Result<(Self, ChildStdout, ChildStdin)> {
        let Supervisor {
            child: mut sup,
            lifeline,
        } = supervisor::spawn()?;
        let pgid = sup.id();
        let spawned = Command::new(launch.command)
            .args(launch.args)
            .current_dir(launch.cwd)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(pgid as i32)
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(error) => {
                // Nothing joined the group; the supervisor is our unreaped child.
                let _ = sup.kill();
                let _ = sup.wait();
                return Err(error);
            }
        };
        let pipes = (child.stdout.take(), child.stdin.take(), child.stderr.take());
        let (Some(stdout), Some(stdin), Some(stderr)) = pipes else {
            // `Stdio::piped()` always yields handles; stay safe rather than leak the group.
            drop(lifeline);
            let _ = child.start_kill();
            let _ = sup.wait();
            return Err(std::io::Error::other(
                "the server started without its pipes",
            ));
        };
        let tail = Arc::new(StderrTail::default());
        tokio::spawn(pump_stderr(launch.server.to_owned(), stderr, tail.clone()));
        Ok((
            Self {
                child,
                supervisor: sup,
                lifeline: Some(lifeline),
                stderr: tail,
            },
            stdout,
            stdin,
        ))
    }

    /// The server's process id (for tests and `dsh mcp list`).
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the server after its MCP channel was closed: it gets [`EXIT_GRACE`] to exit, then
    /// the supervisor kills the group; both are reaped before this returns.
    pub(crate) async fn stop(mut self) {
        let _ = tokio::time::timeout(EXIT_GRACE, self.child.wait()).await;
        // Whatever is left in the group (the server, its children) dies with the lifeline.
        drop(self.lifeline.take());
        let _ = self.child.wait().await;
        let mut supervisor = self.supervisor;
        // The supervisor exits right after its `kill -KILL 0`; reap it off the runtime.
        let _ = tokio::task::spawn_blocking(move || supervisor.wait()).await;
    }
}

async fn pump_stderr(server: String, stderr: tokio::process::ChildStderr, tail: Arc<StderrTail>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "mcp stderr: {line}");
        tail.push(line);
    }
}
