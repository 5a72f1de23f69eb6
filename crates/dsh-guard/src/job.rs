//! One supervised job: the process a zygote forks for one command (see [`crate::zygote`]).
//!
//! It makes itself a child subreaper (or, with namespaces, forks the init of a new PID
//! namespace that does the rest), builds the command's view of the file system
//! ([`crate::namespace`]), starts `bash -c <command>` (or a program) confined
//! ([`crate::confine`]), relays the executor's stop/kill requests, and when the command has
//! ended (or the executor is gone) kills and reaps every remaining descendant before it
//! reports and exits. The supervisor itself stays outside the command's Landlock domain, so
//! the signal scope keeps the command from killing it.
//!
//! Any failure to confine refuses the command (`SANDBOX_UNAVAILABLE` on its stderr, exit
//! code 126): it never runs unconfined.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use dsh_shell::supervise::{CONTINUE, KILL, Report, ReportStatus, STOP};

use crate::args::Args;
use crate::confine::Confinement;
use crate::mode::SandboxMode;
use crate::namespace::{self, Namespaces, View};
use crate::sweep::sweep;

/// Exit code of a command the supervisor refused to start (as a shell's "cannot execute").
pub const REFUSED_CODE: i32 = 126;

/// Exit code of a program that could not be found or executed (as a shell's).
const NOT_FOUND_CODE: i32 = 127;

/// One job, its standard streams already on descriptors 0, 1 and 2.
#[derive(Debug)]
pub(crate) struct Job {
    pub args: Args,
    pub cwd: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    pub control: UnixStream,
}

/// Runs `job` to its end and returns this process's exit code.
#[allow(unsafe_code)]
pub(crate) fn run(job: Job) -> i32 {
    let kind = if job.args.mode.confines() {
        job.args.namespaces
    } else {
        Namespaces::None
    };
    // Read-only commands get a private temp dir, removed once every descendant is gone; made
    // here, in the original mount namespace (where /tmp is writable, and it can be removed).
    // /tmp itself is not replaced by a fresh one: that would hide a workspace, or files the
    // command should read, under it.
    let private_tmp = if job.args.mode == SandboxMode::ReadOnly {
        match tempfile::Builder::new().prefix("dsh-ro-").tempdir() {
            Ok(dir) => Some(dir),
            Err(e) => {
                return refuse(
                    &job.control,
                    &format!("cannot create the private temp dir: {e}"),
                );
            }
        }
    } else {
        None
    };
    let tmp = private_tmp.as_ref().map(|d| d.path().to_path_buf());
    if kind == Namespaces::None {
        return supervise(job, tmp, false);
    }
    if let Err(e) = namespace::enter_pid(kind) {
        return refuse(
            &job.control,
            &format!("cannot create the command's namespaces: {e}"),
        );
    }
    // SAFETY: the supervisor is single-threaded (forked from the single-threaded zygote).
    match unsafe { fork() } {
        Ok(ForkResult::Child) => std::process::exit(supervise(job, tmp, true)),
        Ok(ForkResult::Parent { child }) => {
            // The init holds the command's streams now; this process lets go of them and
            // waits. It keeps its copy of the control socket until the private temp dir is
            // gone, so the executor's end of file still means "all done".
            let _ = crate::zygote::null_stdio();
            while let Err(Errno::EINTR) = waitpid(child, None) {}
            drop(private_tmp);
            drop(job);
            0
        }
        Err(e) => refuse(
            &job.control,
            &format!("cannot fork the namespace's init: {e}"),
        ),
    }
}

/// The supervisor proper (in a PID namespace, its init).
fn supervise(job: Job, private_tmp: Option<PathBuf>, namespaced: bool) -> i32 {
    let Job {
        args,
        cwd,
        env,
        control,
    } = job;
    // Orphans of the command reparent to us instead of init: the heart of containment (an
    // init gets them anyway).
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        return refuse(&control, &format!("cannot become a child subreaper: {e}"));
    }
    let setup = Setup {
        private_tmp,
        namespaced,
    };
    let (status, leftovers) = match run_command(&args, &cwd, env, &control, &setup) {
        Ok(done) => done,
        Err(Refusal::Sandbox(message)) => return refuse(&control, &message),
        Err(Refusal::NotFound(message)) => {
            eprintln!("dsh: {message}");
            report(&control, ReportStatus::Code(NOT_FOUND_CODE), sweep());
            return 0;
        }
    };
    let status = match (status.code(), status.signal()) {
        (Some(code), _) => ReportStatus::Code(code),
        (None, Some(signal)) => ReportStatus::Signal(signal),
        (None, None) => ReportStatus::Code(REFUSED_CODE),
    };
    report(&control, status, leftovers);
    0
}

/// What the job's first process prepared.
struct Setup {
    /// A read-only command's private temp dir.
    private_tmp: Option<PathBuf>,
    /// The supervisor is the init of a PID namespace and enters a mount namespace.
    namespaced: bool,
}

/// Why the command did not start.
enum Refusal {
    /// The sandbox could not be set up.
    Sandbox(String),
    /// The program does not exist or cannot be executed.
    NotFound(String),
}

/// Builds the view, starts the command, relays control bytes until it ends, then kills and
/// reaps every remaining descendant; returns its status and how many leftovers were killed.
fn run_command(
    args: &Args,
    cwd: &Path,
    mut env: Vec<(OsString, OsString)>,
    control: &UnixStream,
    setup: &Setup,
) -> Result<(ExitStatus, u32), Refusal> {
    let confines = args.mode.confines();
    let read_only = args.mode == SandboxMode::ReadOnly;
    let mut writes = args.writes.clone();
    if let Some(dir) = &setup.private_tmp {
        writes.push(dir.clone());
        env.retain(|(name, _)| name != "TMPDIR");
        env.push(("TMPDIR".into(), dir.as_os_str().to_owned()));
    }
    if setup.namespaced {
        let mut mounted = writes.clone();
        if args.mode == SandboxMode::WorkspaceWrite {
            mounted.push(PathBuf::from("/dev/shm"));
        }
        let view = View {
            writes: &mounted,
            protect: &args.protect,
            private_shm: read_only,
            proc: true,
        };
        namespace::enter_mount()
            .and_then(|()| namespace::build(&view))
            .map_err(|e| {
                Refusal::Sandbox(format!("cannot build the command's view of the files: {e}"))
            })?;
        if read_only {
            // Its own /dev/shm (POSIX semaphores), fresh and private.
            writes.push(PathBuf::from("/dev/shm"));
        }
    }
    let mut confinement = Confinement::default();
    if confines {
        confinement.drop_capabilities = true;
        confinement.seccomp = Some(
            crate::seccomp::filter(args.network, args.proxy_port.is_some())
                .map_err(|e| Refusal::Sandbox(e.to_string()))?,
        );
        confinement.ruleset = Some(
            crate::landlock::ruleset(&writes, args.network, args.proxy_port)
                .map_err(|e| Refusal::Sandbox(format!("cannot build the Landlock ruleset: {e}")))?,
        );
    }
    let mut command = if args.program {
        let (program, rest) = args
            .argv
            .split_first()
            .ok_or_else(|| Refusal::NotFound("no program to start".into()))?;
        let mut command = Command::new(program);
        command.args(rest);
        command
    } else {
        let mut command = Command::new("bash");
        command.arg("-c").args(&args.argv);
        command
    };
    command.current_dir(cwd).env_clear().envs(env);
    confine_before_exec(&mut command, confinement);
    // SIGCHLD arrives through a signalfd, so one thread waits for both the command's end and
    // the executor's requests (a second thread cost a scheduler wake-up on every exit). The
    // block is not inherited: `Command` clears the child's signal mask.
    let mut sigchld = SigSet::empty();
    sigchld.add(Signal::SIGCHLD);
    sigchld
        .thread_block()
        .map_err(|e| Refusal::Sandbox(format!("cannot block SIGCHLD: {e}")))?;
    let child_ended =
        SignalFd::with_flags(&sigchld, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .map_err(|e| Refusal::Sandbox(format!("cannot watch the command: {e}")))?;
    let mut child = command.spawn().map_err(|e| {
        let not_found = matches!(
            e.raw_os_error(),
            Some(libc::ENOENT | libc::EACCES | libc::ENOEXEC | libc::ENOTDIR)
        );
        match (args.program, not_found) {
            (true, true) => Refusal::NotFound(format!(
                "cannot start {}: {e}",
                args.argv
                    .first()
                    .map(|p| p.to_string_lossy())
                    .unwrap_or_default()
            )),
            _ => Refusal::Sandbox(format!("cannot start the confined command: {e}")),
        }
    })?;
    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    relay_until_exit(control, &child_ended, pgid);
    // The command has ended but is not reaped, so its pid (the group id) is still ours to
    // signal.
    let _ = killpg(pgid, Signal::SIGKILL);
    let status = child
        .wait()
        .map_err(|e| Refusal::Sandbox(format!("lost the command's status: {e}")));
    let leftovers = sweep();
    Ok((status?, leftovers))
}

/// Applies `confinement` in the forked child just before `exec`.
///
/// The supervisor is single-threaded (it waits with `poll`, see [`relay_until_exit`]), so the
/// child may run ordinary Rust between fork and exec: the landlock crate's calls allocate,
/// which is only unsafe after forking a multi-threaded process.
#[allow(unsafe_code)]
fn confine_before_exec(command: &mut Command, mut confinement: Confinement) {
    // SAFETY: see above; the closure runs once, in a single-threaded child.
    unsafe {
        command.pre_exec(move || {
            // The standard library passes only an errno to the parent; the reason goes to the
            // command's stderr, where the model reads it.
            confinement
                .apply()
                .inspect_err(|e| eprintln!("dsh: cannot confine the command: {e}"))
        });
    }
}

/// Turns control bytes into signals to the command's process group until the command has
/// ended (observed without reaping it); end of file (the executor dropped the command, or dsh
/// died) kills the group, and the loop then waits for the command to die of it.
fn relay_until_exit(control: &UnixStream, child_ended: &SignalFd, pgid: Pid) {
    let mut control_open = true;
    loop {
        match waitid(
            Id::Pid(pgid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
            // Ended, or not ours to wait for any more: either way nothing is left to relay.
            _ => return,
        }
        let mut fds = vec![PollFd::new(child_ended.as_fd(), PollFlags::POLLIN)];
        if control_open {
            fds.push(PollFd::new(control.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => {
                // Cannot wait for requests any more: stop the command rather than orphan it.
                let _ = killpg(pgid, Signal::SIGKILL);
                control_open = false;
            }
        }
        let control_ready = fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty());
        // Drain the signalfd; the `waitid` above decides whether the command ended.
        while let Ok(Some(_)) = child_ended.read_signal() {}
        if control_ready {
            let mut buf = [0u8; 16];
            match (&*control).read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = killpg(pgid, Signal::SIGKILL);
                    control_open = false;
                }
                Ok(n) => {
                    for byte in &buf[..n] {
                        let signal = match *byte {
                            STOP => Signal::SIGTERM,
                            CONTINUE => Signal::SIGCONT,
                            KILL => Signal::SIGKILL,
                            _ => continue,
                        };
                        let _ = killpg(pgid, signal);
                    }
                }
            }
        }
    }
}

/// Refuses the command: the reason on its stderr (the model reads it), and a report of exit
/// code 126.
pub(crate) fn refuse(control: &UnixStream, message: &str) -> i32 {
    eprintln!(
        "dsh: SANDBOX_UNAVAILABLE: {message}. The command was not run. Rerun dsh with \
         `--sandbox danger-full-access` to run commands without the sandbox."
    );
    report(control, ReportStatus::Code(REFUSED_CODE), sweep());
    0
}

fn report(mut control: &UnixStream, status: ReportStatus, leftovers: u32) {
    let text = Report { status, leftovers }.encode();
    // A failed write means the executor is gone; nobody is left to tell.
    let _ = control.write_all(text.as_bytes());
}
