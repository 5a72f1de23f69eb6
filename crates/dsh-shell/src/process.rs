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
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::capture::{StreamTail, pump};
use crate::error::ShellError;
use crate::spill::{Spill, SpillDir};
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
    pgid: Pid,
    /// False once the reaper has sent the final SIGKILL and is about to reap the supervisor (the
    /// group leader); from then on the id may be recycled, so nothing more is sent.
    open: Mutex<bool>,
}

impl ProcessGroup {
    /// Sends `signal` to every process in the group, unless the group is already closed.
    pub(crate) fn signal(&self, signal: Signal) {
        let open = self.open.lock();
        if *open {
            // ESRCH (nobody left) is the only expected failure and means there is nothing to do.
            let _ = killpg(self.pgid, signal);
        }
    }

    /// The last signal: SIGKILL to whatever is left, then no more.
    fn close(&self) {
        let mut open = self.open.lock();
        if *open {
            let _ = killpg(self.pgid, Signal::SIGKILL);
            *open = false;
        }
    }
}

/// What to run.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub command: &'a str,
    pub workdir: &'a Path,
    pub env: &'a [(OsString, OsString)],
}

/// Where output goes.
#[derive(Debug, Clone)]
pub(crate) struct OutputLimits {
    pub max_output_bytes: usize,
    pub max_spill_bytes: u64,
    pub spill_dir: Arc<SpillDir>,
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
    /// Held, never written: see [`crate::supervisor`].
    pub lifeline: ChildStdin,
}

impl CommandProcess {
    /// Starts the supervisor, then `bash` in its group, then the reaper and the output pumps.
    ///
    /// Must be called inside a tokio runtime (the pumps are tokio tasks).
    pub(crate) fn spawn(launch: &Launch<'_>, limits: &OutputLimits) -> Result<Self, ShellError> {
        let Supervisor {
            child: mut sup,
            lifeline,
        } = supervisor::spawn().map_err(|source| ShellError::Spawn {
            what: "the process-group supervisor",
            source,
        })?;
        let pgid = sup.id();
        let spawned = Command::new("bash")
            .arg("-c")
            .arg(launch.command)
            .current_dir(launch.workdir)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
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
            pgid: Pid::from_raw(pgid as i32),
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
                group.close();
                return Err(ShellError::Spawn {
                    what: "the output pipes",
                    source,
                });
            }
        };
        let stdout = Arc::new(StreamTail::new(limits.max_output_bytes));
        let stderr = Arc::new(StreamTail::new(limits.max_output_bytes));
        let spill = |label| Spill::new(limits.spill_dir.clone(), label, limits.max_spill_bytes);
        let pumps = [
            tokio::spawn(pump(out_pipe, stdout.clone(), spill("stdout"))),
            tokio::spawn(pump(err_pipe, stderr.clone(), spill("stderr"))),
        ];
        Ok(Self {
            group,
            exit,
            stdout,
            stderr,
            pumps,
            lifeline,
        })
    }
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
