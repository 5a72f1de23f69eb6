//! A stdio server as a supervised process group: nothing it starts outlives dsh.
//!
//! The server follows the shell's discipline (`dsh_shell::supervisor`): a supervisor `sh` leads
//! a fresh process group and blocks on a pipe whose write end (the lifeline) only this process
//! holds; the server is spawned into that group. When dsh closes the lifeline — on shutdown, or
//! because it died, SIGKILL included, and the kernel closed its descriptors — the supervisor
//! kills the whole group: the server and anything the server started (`npx` → `node`, `uvx` →
//! `python`).
//!
//! With a [`CommandConfinement`] the server's command is the one it returns (dsh's
//! supervisor re-executed in its `--exec` mode: it applies Landlock to itself and execs the
//! server, so the pid, the process group and the pipes stay the ones spawned here).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin as StdChildStdin, Stdio};
use std::sync::Arc;
use std::time::Duration;

use dsh_shell::supervisor::{self, Supervisor};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::confine::CommandConfinement;

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
    /// The session's sandbox, and the workspace it makes writable.
    pub confinement: Option<(&'a dyn CommandConfinement, &'a Path)>,
}

/// Why a server's process could not be started.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The sandbox refused to confine it.
    Confinement(dsh_kernel::BoxError),
    /// The operating system refused.
    Io(std::io::Error),
}

impl From<std::io::Error> for SpawnError {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error)
    }
}

impl ServerProcess {
    /// Starts the supervisor, then the server in its group with piped stdin/stdout (the MCP
    /// channel) and stderr (kept as a tail and logged at debug level).
    pub(crate) fn spawn(
        launch: &Launch<'_>,
    ) -> Result<(Self, ChildStdout, ChildStdin), SpawnError> {
        // Confined first: a refusal must leave nothing started.
        let mut command = match launch.confinement {
            Some((confinement, workspace)) => {
                // Resolved here, as the spawn would: a missing program is reported as such,
                // not as a supervisor that could not exec it.
                let program = find_program(launch.command, launch.cwd, launch.env)?;
                Command::from(
                    confinement
                        .confine(workspace, &program.to_string_lossy(), launch.args)
                        .map_err(SpawnError::Confinement)?,
                )
            }
            None => {
                let mut command = Command::new(launch.command);
                command.args(launch.args);
                command
            }
        };
        let Supervisor {
            child: mut sup,
            lifeline,
        } = supervisor::spawn()?;
        let pgid = sup.id();
        let spawned = command
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
                return Err(error.into());
            }
        };
        let pipes = (child.stdout.take(), child.stdin.take(), child.stderr.take());
        let (Some(stdout), Some(stdin), Some(stderr)) = pipes else {
            // `Stdio::piped()` always yields handles; stay safe rather than leak the group.
            drop(lifeline);
            let _ = child.start_kill();
            let _ = sup.wait();
            return Err(std::io::Error::other("the server started without its pipes").into());
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

/// Where `command` is: relative to `cwd` when it names a path, else the first executable file
/// of that name on the server's `PATH` (as `execvp` would find it).
fn find_program(
    command: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let path = cwd.join(command);
        return if runnable(&path) {
            Ok(path)
        } else {
            Err(not_found("no such executable file"))
        };
    }
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| cwd.join(dir).join(command))
        .find(|candidate| runnable(candidate))
        .ok_or_else(|| not_found("no executable of that name on the server's PATH"))
}

fn not_found(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, what)
}

async fn pump_stderr(server: String, stderr: tokio::process::ChildStderr, tail: Arc<StderrTail>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "mcp stderr: {line}");
        tail.push(line);
    }
}
