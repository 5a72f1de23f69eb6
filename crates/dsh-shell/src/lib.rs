//! The shell seam of dsh: the [`ShellExecutor`] service definition and its local provider,
//! [`LocalShellExecutor`].
//!
//! Tools never spawn processes themselves; they go through this seam so that every command gets
//! the same treatment: `bash -c` with stdin `/dev/null`, a scrubbed environment ([`mod@env`]), its
//! own process group with a SIGTERM → grace → SIGKILL ladder on timeout, cancellation, `kill`
//! and disposal, a bounded output tail per stream with the rest spilled to a private file, and
//! a guarantee that nothing it started outlives the process that owns the executor.
//!
//! # Foreground and background
//!
//! [`ShellExecutor::run`] waits for a command under a timeout and returns a
//! [`ShellRunResult`]. [`ShellExecutor::start`] starts a background task (no timeout) and
//! returns a [`TaskId`]; [`read_output`](ShellExecutor::read_output) consumes its output,
//! [`kill`](ShellExecutor::kill) stops it, and [`subscribe`](ShellExecutor::subscribe)
//! announces its end with a [`TaskDone`].
//!
//! # Ownership
//!
//! A background task carries an opaque owner token, given in [`ShellExecRequest::owner`] and
//! stored by the executor with the task. [`ShellExecutor::owner_of`] is the single read path for
//! it: [`TaskInfo`] deliberately has no owner field (seed decision 3). The executor never
//! interprets the token. The bash tools stamp the calling agent's session id at start and, on
//! `bash_output` / `bash_kill`, refuse a caller when the stored owner *is `Some` and differs*
//! from the caller's id (an empty string is a real owner; an unowned task is open to all). That
//! policy lives in the tools, not here. Because the token lives in the executor, which outlives
//! the tools plugin, ownership survives an unload and remount of the tools. When an owner is
//! gone for good, [`ShellExecutor::release_owner`] stops its tasks and forgets them, so nothing
//! keeps running (or is kept) for an owner nobody can act for any more.
//!
//! # A supervisor program instead (the supervision seam)
//!
//! [`LocalShellExecutor::with_supervision`] replaces the `/bin/sh` supervisor described below
//! by a program that confines and contains each command (dsh-guard's: Landlock, a child
//! subreaper that kills every descendant, `setsid` daemons included). The protocol is in
//! [`supervise`]. Without one, everything below holds as written.
//!
//! # Nothing outlives dsh: the group supervisor
//!
//! `PR_SET_PDEATHSIG` is not enough: it reaches only the direct child (`bash`), not what `bash`
//! starts (`bash -c 'sleep 9; echo'` leaves `sleep` behind), and it fires when the spawning
//! *thread* exits, which a tokio runtime does at will. Instead every command gets a supervisor:
//!
//! 1. The executor spawns `/bin/sh` as the leader of a **new process group**
//!    (`process_group(0)`), with its stdin a pipe whose write end (the *lifeline*) only the
//!    executor holds. Rust opens pipes close-on-exec, so no exec'd program (the command, its
//!    children, other commands, the supervisor itself) inherits the write end.
//! 2. The command's `bash -c` is spawned **into the supervisor's group**
//!    (`process_group(supervisor_pid)`); everything it starts stays in that group unless it
//!    deliberately leaves (`setsid`).
//! 3. The supervisor ignores every catchable signal a command might aim at its own group, and
//!    blocks reading its stdin. It reads end of file only when every copy of the write end is
//!    closed: when the executor drops the lifeline, or when the process holding the executor
//!    dies in any way, SIGKILL included, because the kernel closes a dead process's
//!    descriptors. It then runs `kill -KILL 0`, killing its whole group: the command, all its
//!    descendants, and itself.
//!
//! Why the command joins the supervisor's group, rather than having a group of its own that an
//! outside supervisor is told about afterwards: there is no window in which the command runs
//! unsupervised. The supervisor is armed before `bash` exists, and it cannot see end of file
//! before `bash` has joined the group, because the forked child's copy of the (close-on-exec)
//! lifeline lives until its exec, which comes after its `setpgid`. And because the supervisor is
//! the group leader and stays an unreaped child of the executor until the command has been
//! fully reaped, the group id cannot be recycled while the executor may still signal it.
//!
//! The same lifeline makes an abandoned command safe: dropping a command's driver (a runtime
//! shutting down mid-run) drops the lifeline, and the supervisor kills the group. A reaper
//! thread per command waits for `bash`, then SIGKILLs what is left of the group (jobs the
//! command backgrounded and forgot, the supervisor) and reaps the supervisor, so a result is
//! delivered only once the whole group is gone and no zombie is left behind.

pub mod env;
pub mod supervise;

mod background;
mod capture;
mod config;
mod driver;
mod error;
mod executor;
mod live;
mod local;
mod process;
mod result;
mod spec;
mod spill;
mod stop;
pub mod supervisor;
mod task;
pub mod zygote;

pub use config::ShellConfig;
pub use error::ShellError;
pub use executor::ShellExecutor;
pub use live::LiveOutput;
pub use local::LocalShellExecutor;
pub use result::{CapturedOutput, ShellRunResult};
pub use spec::{ShellExecRequest, ShellExecSpec, resolve_request};
pub use supervise::{JobIo, JobKind, JobRequest, SuperviseRequest, Supervision};
pub use task::{TaskDone, TaskId, TaskInfo, TaskOutput, TaskStatus, render_delta};
pub use zygote::Zygote;
