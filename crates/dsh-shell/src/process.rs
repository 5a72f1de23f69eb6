//! One command as a supervised process group: spawning, signalling the group, reaping.
//!
//! Every command runs as `bash -c <command>` with stdin `/dev/null` and piped stdout/stderr,
//! inside a process group led by its supervisor (see [`crate::supervisor`]). A dedicated reaper
//! thread per command waits for `bash`; when it has exited, the reaper SIGKILLs whatever is left
//! in the group (background jobs the command forgot, or that ignored SIGTERM), then reaps the
//! supervisor. So when a command's result arrives, nothing it started is still running, and no
//! lingering grandchild can hold the output pipes open.
//!
//! Signal safety: the group id is the supervisor's pid, and the supervisor is reaped last, by the
//! reaper, after the group has been closed for signals. Until then the pid is a live or zombie
//! child of this process and cannot be recycled, so `killpg` can never hit a stranger's group.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::capture::{StreamTail, pump};
use crate::error::ShellError;
use crate::live::LiveOutput;
use crate::spill::{Spill, SpillDir};
use crate::supervise::{self, JobIo, JobKind, Report, ReportStatus, SuperviseRequest, Supervision};
use crate::supervisor::{self, Supervisor};

/// How a command's `bash` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExitInfo {
    Code(i32),
    /// The signal's name, e.g. `SIGKILL`.
    Signal(String),
    /// The status could not be collected (someone else reaped `bash`).
    Unknown,
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => ExitInfo::Code(code),
            (None, Some(raw)) => ExitInfo::Signal(signal_name(raw)),
            (None, None) => ExitInfo::Unknown,
        }
    }
}

/// `SIGTERM` for 15; real-time signals, which nix does not name, as `SIG<n>`.
pub(crate) fn signal_name(raw: i32) -> String {
    Signal::try_from(raw).map_or_else(|_| format!("SIG{raw}"), |sig| sig.as_str().to_owned())
}

/// The signal side of a command's process group.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    target: GroupTarget,
    /// False once the reaper has sent the final SIGKILL and is about to reap the supervisor (the
    /// group leader); from then on the id may be recycled, so nothing more is sent.
    open: Mutex<bool>,
}

/// Who receives a group signal.
#[derive(Debug)]
enum GroupTarget {
    /// The `/bin/sh` supervisor's group, signalled directly.
    Group(Pid),
    /// A supervisor program (see [`crate::supervise`]), asked through its control socket.
    Supervisor(UnixStream),
}

impl ProcessGroup {
    /// Sends `signal` to every process in the group, unless the group is already closed.
    pub(crate) fn signal(&self, signal: Signal) {
        let open = self.open.lock();
        if !*open {
            return;
        }
        match &self.target {
            // ESRCH (nobody left) is the only expected failure and means there is nothing to do.
            GroupTarget::Group(pgid) => {
                let _ = killpg(*pgid, signal);
            }
            GroupTarget::Supervisor(control) => {
                let byte = match signal {
                    Signal::SIGTERM => supervise::STOP,
                    Signal::SIGCONT => supervise::CONTINUE,
                    _ => supervise::KILL,
                };
                // A closed socket means the supervisor is gone and has swept already.
                let _ = (&*control).write_all(&[byte]);
            }
        }
    }

    /// The last signal: SIGKILL to whatever is left, then no more. A supervisor program sweeps
    /// by itself before it exits, so it gets nothing.
    fn close(&self) {
        let mut open = self.open.lock();
        if *open {
            if let GroupTarget::Group(pgid) = &self.target {
                let _ = killpg(*pgid, Signal::SIGKILL);
            }
            *open = false;
        }
    }
}

/// What keeps a supervisor alive only as long as the command may run.
#[derive(Debug)]
pub(crate) enum Lifeline {
    /// The write end of the `/bin/sh` supervisor's stdin: closing it kills the group.
    Pipe(#[allow(dead_code)] ChildStdin),
    /// The executor's end of a supervisor program's control socket. Dropping it shuts the
    /// socket down (the reaper holds a clone for the report, which alone would keep it open).
    Socket(UnixStream),
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        if let Lifeline::Socket(socket) = self {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// What to run.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub command: &'a str,
    pub workdir: &'a Path,
    pub env: &'a [(OsString, OsString)],
    /// Approved to run outside the sandbox (still contained).
    pub unconfined: bool,
    /// The session's workspace, when known.
    pub workspace: Option<&'a Path>,
    /// The calling session, when known.
    pub session: Option<&'a str>,
    /// What the command reads on its standard input (`/dev/null` when `None`).
    pub stdin: Option<&'a [u8]>,
    /// From a source the user has not trusted: sandboxed whatever the mode.
    pub untrusted: bool,
}

/// Where output goes.
#[derive(Debug, Clone)]
pub(crate) struct OutputLimits {
    pub max_output_bytes: usize,
    pub max_spill_bytes: u64,
    pub spill_dir: Arc<SpillDir>,
    /// Also fed every chunk as it is read (foreground runs that asked for it).
    pub live: Option<LiveOutput>,
}

/// A running command. Dropping it drops the lifeline, so the supervisor kills the group and the
/// reaper thread still reaps everything: an abandoned command cannot leak.
#[derive(Debug)]
pub(crate) struct CommandProcess {
    pub group: Arc<ProcessGroup>,
    pub exit: oneshot::Receiver<ExitInfo>,
    pub stdout: Arc<StreamTail>,
    pub stderr: Arc<StreamTail>,
    pub pumps: [JoinHandle<()>; 2],
    /// Held while the command may run: see [`crate::supervisor`] and [`crate::supervise`].
    pub lifeline: Lifeline,
    /// Leftover processes the supervisor program killed, set before the exit is sent.
    pub leftovers: Arc<AtomicU32>,
}

impl CommandProcess {
    /// Starts the supervisor, then `bash` in its group, then the reaper and the output pumps.
    ///
    /// Must be called inside a tokio runtime (the pumps are tokio tasks).
    pub(crate) fn spawn(
        launch: &Launch<'_>,
        limits: &OutputLimits,
        supervision: Option<&dyn Supervision>,
    ) -> Result<Self, ShellError> {
        if let Some(supervision) = supervision {
            return Self::spawn_supervised(launch, limits, supervision);
        }
        let Supervisor {
            child: mut sup,
            lifeline,
        } = supervisor::spawn().map_err(|source| ShellError::Spawn {
            what: "the process-group supervisor",
            source,
        })?;
        let pgid = sup.id();
        let stdin = match launch.stdin {
            Some(bytes) => Stdio::from(feed(bytes).map_err(|source| ShellError::Spawn {
                what: "the input pipe",
                source,
            })?),
            None => Stdio::null(),
        };
        let spawned = Command::new("bash")
            .arg("-c")
            .arg(launch.command)
            .current_dir(launch.workdir)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(pgid as i32)
            .spawn();
        let mut bash = match spawned {
            Ok(bash) => bash,
            Err(source) => {
                // Nothing joined the group; the supervisor is our unreaped child, so this is safe.
                let _ = sup.kill();
                let _ = sup.wait();
                if source.raw_os_error() == Some(Errno::E2BIG as i32) {
                    return Err(too_long(launch));
                }
                return Err(ShellError::Spawn {
                    what: "`bash -c`",
                    source,
                });
            }
        };
        let group = Arc::new(ProcessGroup {
            target: GroupTarget::Group(Pid::from_raw(pgid as i32)),
            open: Mutex::new(true),
        });
        let (stdout, stderr) = (bash.stdout.take(), bash.stderr.take());
        let (exit_tx, exit) = oneshot::channel();
        let pids = [bash.id(), pgid].map(|pid| Pid::from_raw(pid as i32));
        let reaper = std::thread::Builder::new()
            .name("dsh-shell-reaper".into())
            .spawn({
                let group = group.clone();
                move || reap(&group, bash, sup, exit_tx)
            });
        if let Err(source) = reaper {
            // The closure, children included, was dropped unrun: kill and reap here instead.
            group.close();
            for pid in pids {
                let _ = waitpid(pid, None);
            }
            return Err(ShellError::Spawn {
                what: "the reaper thread",
                source,
            });
        }
        // From here on the reaper owns reaping; any failure just kills the group.
        let (stdout, stderr, pumps) = start_pumps(stdout, stderr, &group, limits)?;
        Ok(Self::assemble(
            group,
            exit,
            (stdout, stderr, pumps),
            Lifeline::Pipe(lifeline),
        ))
    }

    fn assemble(
        group: Arc<ProcessGroup>,
        exit: oneshot::Receiver<ExitInfo>,
        (stdout, stderr, pumps): Pumps,
        lifeline: Lifeline,
    ) -> Self {
        Self {
            group,
            exit,
            stdout,
            stderr,
            pumps,
            lifeline,
            leftovers: Arc::default(),
        }
    }

    /// Starts the command under a supervisor (see [`crate::supervise`]) that runs, confines
    /// and contains it, then the reaper and the output pumps.
    fn spawn_supervised(
        launch: &Launch<'_>,
        limits: &OutputLimits,
        supervision: &dyn Supervision,
    ) -> Result<Self, ShellError> {
        // The supervisor would fail at `exec` with E2BIG; say why here, as the plain path does.
        if launch.command.len() >= MAX_ARG_BYTES {
            return Err(too_long(launch));
        }
        let spawn_error = |what| move |source| ShellError::Spawn { what, source };
        let (out_read, out_write) = io::pipe().map_err(spawn_error("the output pipes"))?;
        let (err_read, err_write) = io::pipe().map_err(spawn_error("the output pipes"))?;
        let stdin = match launch.stdin {
            Some(bytes) => Some(feed(bytes).map_err(spawn_error("the input pipe"))?),
            None => None,
        };
        let request = SuperviseRequest {
            job: JobKind::Bash(launch.command),
            workdir: launch.workdir,
            env: launch.env,
            unconfined: launch.unconfined,
            workspace: launch.workspace,
            session: launch.session,
            untrusted: launch.untrusted,
        };
        let io = JobIo {
            stdin,
            stdout: OwnedFd::from(out_write),
            stderr: OwnedFd::from(err_write),
        };
        let control = supervision.start(&request, io)?;
        let report = control
            .try_clone()
            .map_err(spawn_error("the command supervisor"))?;
        let group = Arc::new(ProcessGroup {
            target: GroupTarget::Supervisor(
                control
                    .try_clone()
                    .map_err(spawn_error("the command supervisor"))?,
            ),
            open: Mutex::new(true),
        });
        let lifeline = Lifeline::Socket(control);
        let (exit_tx, exit) = oneshot::channel();
        let leftovers = Arc::new(AtomicU32::new(0));
        let reaper = std::thread::Builder::new()
            .name("dsh-shell-reaper".into())
            .spawn({
                let group = group.clone();
                let leftovers = leftovers.clone();
                move || reap_supervised(&group, report, &leftovers, exit_tx)
            });
        if let Err(source) = reaper {
            // Dropping the lifeline (and the unrun closure's copy) makes the supervisor sweep
            // and exit.
            return Err(spawn_error("the reaper thread")(source));
        }
        let pumps = start_pipe_pumps(out_read, err_read, &group, limits)?;
        let mut process = Self::assemble(group, exit, pumps, lifeline);
        process.leftovers = leftovers;
        Ok(process)
    }
}

/// The longest single argument `exec` accepts on Linux (`MAX_ARG_STRLEN`, with its NUL).
const MAX_ARG_BYTES: usize = 128 * 1024;

/// A pipe whose read end is returned and whose write end receives `bytes` from a thread of
/// its own (a command that never reads its input must not block the executor), then closes.
fn feed(bytes: &[u8]) -> io::Result<OwnedFd> {
    let (read, mut write) = io::pipe()?;
    let bytes = bytes.to_vec();
    std::thread::Builder::new()
        .name("dsh-shell-stdin".into())
        // A command that exits without reading makes the write fail (EPIPE): nothing to do.
        .spawn(move || write.write_all(&bytes))?;
    Ok(OwnedFd::from(read))
}

/// [`start_pumps`] for plain pipe read ends (a supervised command's output).
fn start_pipe_pumps(
    stdout: io::PipeReader,
    stderr: io::PipeReader,
    group: &ProcessGroup,
    limits: &OutputLimits,
) -> Result<Pumps, ShellError> {
    let pipes =
        tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(stdout)).and_then(|out| {
            Ok((
                out,
                tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(stderr))?,
            ))
        });
    match pipes {
        Ok((out, err)) => Ok(pumps_for(out, err, limits)),
        Err(source) => {
            group.signal(Signal::SIGKILL);
            group.close();
            Err(ShellError::Spawn {
                what: "the output pipes",
                source,
            })
        }
    }
}

/// The stdout and stderr tails and the two tokio tasks that fill them.
type Pumps = (Arc<StreamTail>, Arc<StreamTail>, [JoinHandle<()>; 2]);

/// Starts the output pumps; on failure the group is killed.
fn start_pumps(
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    group: &ProcessGroup,
    limits: &OutputLimits,
) -> Result<Pumps, ShellError> {
    let pipes = stdout
        .zip(stderr)
        .ok_or_else(|| io::Error::other("bash started without output pipes"));
    let pipes = pipes.and_then(|(out, err)| {
        Ok((
            tokio::process::ChildStdout::from_std(out)?,
            tokio::process::ChildStderr::from_std(err)?,
        ))
    });
    let (out_pipe, err_pipe) = match pipes {
        Ok(pipes) => pipes,
        Err(source) => {
            group.signal(Signal::SIGKILL);
            group.close();
            return Err(ShellError::Spawn {
                what: "the output pipes",
                source,
            });
        }
    };
    Ok(pumps_for(out_pipe, err_pipe, limits))
}

/// The tails of both streams and the tasks that fill them from `out` and `err`.
fn pumps_for(
    out: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    err: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    limits: &OutputLimits,
) -> Pumps {
    let stdout = Arc::new(StreamTail::new(limits.max_output_bytes));
    let stderr = Arc::new(StreamTail::new(limits.max_output_bytes));
    let spill = |label| Spill::new(limits.spill_dir.clone(), label, limits.max_spill_bytes);
    let pumps = [
        tokio::spawn(pump(
            out,
            stdout.clone(),
            spill("stdout"),
            limits.live.clone(),
        )),
        tokio::spawn(pump(
            err,
            stderr.clone(),
            spill("stderr"),
            limits.live.clone(),
        )),
    ];
    (stdout, stderr, pumps)
}

/// `E2BIG` from `exec`: almost always a command over the per-argument limit (a model writing a
/// large file through a heredoc), so the error says how long it was and what to do instead.
fn too_long(launch: &Launch<'_>) -> ShellError {
    ShellError::InvalidCommand(format!(
        "the system refused it as too long ({} bytes; one argument may hold at most 128 KiB on \
         Linux, and the environment counts towards the total); write long content to a file \
         first (for instance with the write tool) and run the command on that file",
        launch.command.len()
    ))
}

/// The reaper thread: wait for `bash`, kill the rest of the group, reap the supervisor, report.
fn reap(
    group: &ProcessGroup,
    mut bash: Child,
    mut supervisor: Child,
    exit_tx: oneshot::Sender<ExitInfo>,
) {
    let exit = bash.wait().map_or(ExitInfo::Unknown, ExitInfo::from);
    group.close();
    let _ = supervisor.wait();
    // The receiver is gone only if the command was abandoned; everything is reaped regardless.
    let _ = exit_tx.send(exit);
}

/// The reaper thread of a supervised command: read the supervisor's report until end of file
/// (it has exited, which it does only once every descendant of the command is gone).
fn reap_supervised(
    group: &ProcessGroup,
    mut report: UnixStream,
    leftovers: &AtomicU32,
    exit_tx: oneshot::Sender<ExitInfo>,
) {
    let mut text = String::new();
    // End of file: the supervisor has exited, or the lifeline was dropped (nobody waits then).
    let _ = report.read_to_string(&mut text);
    group.close();
    let exit = match Report::decode(&text) {
        Some(report) => {
            leftovers.store(report.leftovers, Ordering::Release);
            match report.status {
                ReportStatus::Code(code) => ExitInfo::Code(code),
                ReportStatus::Signal(raw) => ExitInfo::Signal(signal_name(raw)),
            }
        }
        // No report: the supervisor itself died.
        None => ExitInfo::Unknown,
    };
    let _ = exit_tx.send(exit);
}
