//! A stdio server as a supervised process group: nothing it starts outlives dsh.
//!
//! The server follows the shell's discipline (`dsh_shell::supervisor`): a supervisor `sh` leads
//! a fresh process group and blocks on a pipe whose write end (the lifeline) only this process
//! holds; the server is spawned into that group. When dsh closes the lifeline — on shutdown, or
//! because it died, SIGKILL included, and the kernel closed its descriptors — the supervisor
//! kills the whole group: the server and anything the server started (`npx` → `node`, `uvx` →
//! `python`).
//!
//! With a [`Supervision`] on the context (dsh-guard's, in dsh), the server runs under the same
//! supervisor as every command instead: started by the guard's zygote inside the session's
//! sandbox, a child of a subreaper (or the init of its own PID namespace) that kills whatever
//! the server leaves behind (a `setsid` daemon included) when the server stops, is stopped, or
//! dsh dies. dsh talks to it through pipes and the supervisor's control socket; it never
//! learns the server's pid.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin as StdChildStdin, Stdio};
use std::sync::Arc;
use std::time::Duration;

use dsh_shell::supervise::KILL;
use dsh_shell::supervisor::{self, Supervisor};
use dsh_shell::{JobIo, JobKind, ShellError, SuperviseRequest, Supervision};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

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
    running: Running,
    pub(crate) stderr: Arc<StderrTail>,
}

/// How the server was started.
#[derive(Debug)]
enum Running {
    /// By dsh-mcp, in a process group led by dsh-shell's `sh` supervisor (no guard).
    Grouped(Box<Grouped>),
    /// By the context's [`Supervision`]: the executor's end of the supervisor's control
    /// socket (end of file on it kills everything the server started).
    Supervised { control: StdUnixStream },
}

/// A server in a process group led by dsh-shell's `sh` supervisor.
#[derive(Debug)]
struct Grouped {
    child: Child,
    supervisor: std::process::Child,
    /// Held, never written; dropping it makes the supervisor kill the group.
    lifeline: Option<StdChildStdin>,
}

/// The server's standard output (the MCP channel in).
pub(crate) type ServerOut = Box<dyn AsyncRead + Send + Unpin>;
/// The server's standard input (the MCP channel out).
pub(crate) type ServerIn = Box<dyn AsyncWrite + Send + Unpin>;

/// What to start.
pub(crate) struct Launch<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(OsString, OsString)],
    /// The session's supervision, and the workspace its sandbox makes writable.
    pub supervision: Option<(&'a dyn Supervision, &'a Path)>,
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
    /// Starts the server with piped stdin/stdout (the MCP channel) and stderr (kept as a tail
    /// and logged at debug level): under the context's supervision when there is one, else in
    /// a process group led by dsh-shell's supervisor.
    pub(crate) fn spawn(launch: &Launch<'_>) -> Result<(Self, ServerOut, ServerIn), SpawnError> {
        match launch.supervision {
            Some((supervision, workspace)) => {
                Self::spawn_supervised(launch, supervision, workspace)
            }
            None => Self::spawn_grouped(launch),
        }
    }

    fn spawn_supervised(
        launch: &Launch<'_>,
        supervision: &dyn Supervision,
        workspace: &Path,
    ) -> Result<(Self, ServerOut, ServerIn), SpawnError> {
        // Resolved here, as a spawn would: a missing program is reported as such, not as a
        // supervisor that could not exec it.
        let program = find_program(launch.command, launch.cwd, launch.env)?;
        let argv: Vec<OsString> = std::iter::once(program.into_os_string())
            .chain(launch.args.iter().map(OsString::from))
            .collect();
        let (stdin, feed) = std::io::pipe()?;
        let (out, out_w) = std::io::pipe()?;
        let (err, err_w) = std::io::pipe()?;
        let request = SuperviseRequest {
            job: JobKind::Program(&argv),
            workdir: launch.cwd,
            env: launch.env,
            unconfined: false,
            workspace: Some(workspace),
            untrusted: false,
            // A server outlives any one session's narrowing; plan mode refuses its tools at
            // the guard instead.
            session: None,
        };
        let io = JobIo {
            stdin: Some(OwnedFd::from(stdin)),
            stdout: OwnedFd::from(out_w),
            stderr: OwnedFd::from(err_w),
        };
        let control = supervision
            .start(&request, io)
            .map_err(|error| match error {
                ShellError::Refused { .. } => SpawnError::Confinement(Box::new(error)),
                other => SpawnError::Io(std::io::Error::other(other)),
            })?;
        let stdout = pipe::Receiver::from_owned_fd(OwnedFd::from(out))?;
        let stdin = pipe::Sender::from_owned_fd(OwnedFd::from(feed))?;
        let stderr = pipe::Receiver::from_owned_fd(OwnedFd::from(err))?;
        let tail = Arc::new(StderrTail::default());
        tokio::spawn(pump_stderr(launch.server.to_owned(), stderr, tail.clone()));
        let process = Self {
            running: Running::Supervised { control },
            stderr: tail,
        };
        Ok((process, Box::new(stdout), Box::new(stdin)))
    }

    /// Starts the supervisor, then the server in its group.
    fn spawn_grouped(launch: &Launch<'_>) -> Result<(Self, ServerOut, ServerIn), SpawnError> {
        let mut command = Command::new(launch.command);
        command.args(launch.args);
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
        let process = Self {
            running: Running::Grouped(Box::new(Grouped {
                child,
                supervisor: sup,
                lifeline: Some(lifeline),
            })),
            stderr: tail,
        };
        Ok((process, Box::new(stdout), Box::new(stdin)))
    }

    /// The server's process id where dsh knows it (`None` under a supervision: the server
    /// may live in a PID namespace of its own).
    pub(crate) fn id(&self) -> Option<u32> {
        match &self.running {
            Running::Grouped(grouped) => grouped.child.id(),
            Running::Supervised { .. } => None,
        }
    }

    /// Stops the server after its MCP channel was closed: it gets [`EXIT_GRACE`] to exit, then
    /// it is killed with everything it started; all of it is gone when this returns.
    pub(crate) async fn stop(self) {
        match self.running {
            Running::Grouped(grouped) => {
                let Grouped {
                    mut child,
                    supervisor,
                    mut lifeline,
                } = *grouped;
                let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
                // Whatever is left in the group (the server, its children) dies with the
                // lifeline.
                drop(lifeline.take());
                let _ = child.wait().await;
                let mut supervisor = supervisor;
                // The supervisor exits right after its `kill -KILL 0`; reap it off the runtime.
                let _ = tokio::task::spawn_blocking(move || supervisor.wait()).await;
            }
            Running::Supervised { control } => {
                let Ok(control) = control
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::UnixStream::from_std(control))
                else {
                    return;
                };
                let mut control = control;
                let mut report = Vec::new();
                // The supervisor reports, then closes, once the server and every leftover are
                // gone.
                let ended = tokio::time::timeout(EXIT_GRACE, control.read_to_end(&mut report));
                if ended.await.is_err() {
                    let _ = control.write_all(&[KILL]).await;
                    let _ =
                        tokio::time::timeout(KILL_PATIENCE, control.read_to_end(&mut report)).await;
                }
            }
        }
    }
}

/// How long a killed server's supervisor gets to report that everything is gone.
const KILL_PATIENCE: Duration = Duration::from_secs(5);

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

async fn pump_stderr(server: String, stderr: impl AsyncRead + Unpin, tail: Arc<StderrTail>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "mcp stderr: {line}");
        tail.push(line);
    }
}
