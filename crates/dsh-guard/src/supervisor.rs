//! The per-command supervisor: dsh re-executed in a hidden mode (`dsh __supervise …`, or the
//! `dsh-guard-supervisor` binary in tests), speaking dsh-shell's supervision protocol
//! ([`dsh_shell::supervise`]).
//!
//! It makes itself a child subreaper, starts `bash -c <command>` in a process group of its own
//! (confined by Landlock with `no_new_privs` when the mode asks for it, applied in the child
//! before exec so every descendant inherits it), relays the executor's stop/kill requests,
//! and when `bash` has ended (or the executor is gone) kills and reaps every remaining
//! descendant before it reports and exits. The supervisor itself stays outside the command's
//! Landlock domain, so the signal scope keeps the command from killing it.
//!
//! Any failure to confine refuses the command (`SANDBOX_UNAVAILABLE` on its stderr, exit
//! code 126): it never runs unconfined.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};

use landlock::{RulesetCreated, RulesetStatus};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

use dsh_shell::supervise::{CONTINUE, KILL, Report, ReportStatus, STOP};

use crate::mode::SandboxMode;
use crate::sweep::sweep;

/// The argument that selects supervisor mode in the `dsh` binary (dispatched before anything
/// else in `main`).
pub const SUPERVISE_ARG: &str = "__supervise";

/// Exit code of a command the supervisor refused to start (as a shell's "cannot execute").
pub const REFUSED_CODE: i32 = 126;

/// What the executor asked for (see [`crate::SandboxPolicy::supervisor_args`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    mode: SandboxMode,
    network: bool,
    writes: Vec<PathBuf>,
    /// Exec `argv` confined instead of supervising `bash -c` (see [`crate::exec`]).
    exec: bool,
    /// After `--`: the `bash -c` script, or with `--exec` the program and its arguments.
    argv: Vec<OsString>,
}

impl Args {
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut args = args.into_iter();
        let mut mode = None;
        let mut network = true;
        let mut writes = Vec::new();
        let mut exec = false;
        loop {
            let Some(flag) = args.next() else {
                return Err("missing `-- <command>`".into());
            };
            let flag = flag.to_string_lossy().into_owned();
            if flag == "--" {
                break;
            }
            if flag == "--exec" {
                exec = true;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--mode" => {
                    mode = Some(
                        value
                            .to_string_lossy()
                            .parse::<SandboxMode>()
                            .map_err(|e| e.to_string())?,
                    );
                }
                "--network" => network = value == "on",
                "--write" => writes.push(PathBuf::from(value)),
                other => return Err(format!("unknown flag {other}")),
            }
        }
        let argv: Vec<OsString> = args.collect();
        match (exec, argv.len()) {
            (_, 0) => return Err("missing the command".into()),
            (false, 1) | (true, _) => {}
            (false, _) => return Err("expected one command after `--`".into()),
        }
        Ok(Self {
            mode: mode.ok_or("missing --mode")?,
            network,
            writes,
            exec,
            argv,
        })
    }
}

/// Runs the supervisor with `args` (everything after [`SUPERVISE_ARG`]) and returns the
/// process exit code. Its stdin must be the control socket, its stdout/stderr the command's
/// output.
pub fn supervise(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = match Args::parse(args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("dsh supervisor: {e}");
            return 2;
        }
    };
    if args.exec {
        return exec_confined(&args);
    }
    // A close-on-exec duplicate: the command must never inherit the control socket (it could
    // forge a report or stop itself being killed).
    let control = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("dsh supervisor: no control socket on stdin: {e}");
            return 2;
        }
    };
    // Orphans of the command reparent to us instead of init: the heart of containment.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        return refuse(&control, &format!("cannot become a child subreaper: {e}"));
    }
    let (status, leftovers) = match run(&args, &control) {
        Ok(done) => done,
        Err(message) => return refuse(&control, &message),
    };
    let status = match (status.code(), status.signal()) {
        (Some(code), _) => ReportStatus::Code(code),
        (None, Some(signal)) => ReportStatus::Signal(signal),
        (None, None) => ReportStatus::Code(REFUSED_CODE),
    };
    report(&control, status, leftovers);
    0
}

/// Starts `bash`, relays control bytes until it ends, then kills and reaps every remaining
/// descendant; returns its status and how many leftovers were killed.
fn run(args: &Args, control: &UnixStream) -> Result<(ExitStatus, u32), String> {
    // Read-only commands get a private temp dir, removed once every descendant is gone.
    let private_tmp = match args.mode {
        SandboxMode::ReadOnly => Some(
            tempfile::Builder::new()
                .prefix("dsh-ro-")
                .tempdir()
                .map_err(|e| format!("cannot create the private temp dir: {e}"))?,
        ),
        _ => None,
    };
    let mut writes = args.writes.clone();
    let mut bash = Command::new("bash");
    bash.arg("-c")
        .args(&args.argv)
        .stdin(Stdio::null())
        .process_group(0);
    if let Some(dir) = &private_tmp {
        writes.push(dir.path().to_path_buf());
        bash.env("TMPDIR", dir.path());
    }
    if args.mode.confines() {
        let ruleset = crate::landlock::ruleset(&writes, args.network)
            .map_err(|e| format!("cannot build the Landlock ruleset: {e}"))?;
        confine_before_exec(&mut bash, ruleset);
    }
    // SIGCHLD arrives through a signalfd, so one thread waits for both the command's end and
    // the executor's requests (a second thread cost a scheduler wake-up on every exit). The
    // block is not inherited: `Command` clears the child's signal mask.
    let mut sigchld = SigSet::empty();
    sigchld.add(Signal::SIGCHLD);
    sigchld
        .thread_block()
        .map_err(|e| format!("cannot block SIGCHLD: {e}"))?;
    let child_ended =
        SignalFd::with_flags(&sigchld, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .map_err(|e| format!("cannot watch the command: {e}"))?;
    let mut child = bash
        .spawn()
        .map_err(|e| format!("cannot start the confined command: {e}"))?;
    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    relay_until_exit(control, &child_ended, pgid);
    // `bash` has ended but is not reaped, so its pid (the group id) is still ours to signal.
    let _ = killpg(pgid, Signal::SIGKILL);
    let status = child
        .wait()
        .map_err(|e| format!("lost the command's status: {e}"));
    let leftovers = sweep();
    drop(private_tmp);
    Ok((status?, leftovers))
}

/// `--exec`: confines this very process (single-threaded: nothing else runs yet) and replaces
/// it with the program, its stdio untouched; returns only on failure.
fn exec_confined(args: &Args) -> i32 {
    let refuse = |message: String| {
        eprintln!("dsh: SANDBOX_UNAVAILABLE: {message}; the program was not started.");
        REFUSED_CODE
    };
    if args.mode.confines() {
        let status = crate::landlock::ruleset(&args.writes, args.network)
            .and_then(RulesetCreated::restrict_self);
        match status {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced && status.no_new_privs => {}
            Ok(_) => return refuse("Landlock did not enforce the ruleset".into()),
            Err(e) => return refuse(format!("cannot confine the program: {e}")),
        }
    }
    let (program, rest) = args.argv.split_first().unwrap_or_else(|| {
        // `Args::parse` refuses an empty argv; exit as a refused command if it ever is.
        std::process::exit(REFUSED_CODE)
    });
    let error = Command::new(program).args(rest).exec();
    eprintln!("dsh: cannot start {}: {error}", program.to_string_lossy());
    REFUSED_CODE
}

/// Applies the ruleset (and `no_new_privs`) in the forked child just before `exec`.
///
/// The supervisor is single-threaded (it waits with `poll`, see [`relay_until_exit`]),
/// so the child may run ordinary Rust between fork and exec: the landlock crate's calls
/// allocate, which is only unsafe after forking a multi-threaded process. A ruleset the
/// kernel did not enforce at all fails the spawn: never run unconfined.
#[allow(unsafe_code)]
fn confine_before_exec(bash: &mut Command, ruleset: RulesetCreated) {
    let mut ruleset = Some(ruleset);
    // SAFETY: see above; the closure runs once, in a single-threaded child.
    unsafe {
        bash.pre_exec(move || {
            let ruleset = ruleset
                .take()
                .ok_or_else(|| std::io::Error::other("the ruleset was already applied"))?;
            let status = ruleset
                .restrict_self()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
                return Err(std::io::Error::other(
                    "Landlock did not enforce the ruleset",
                ));
            }
            Ok(())
        });
    }
}

/// Turns control bytes into signals to the command's group until `bash` has ended (observed
/// without reaping it); end of file (the executor dropped the command, or dsh died) kills the
/// group, and the loop then waits for `bash` to die of it.
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
        // Drain the signalfd; the `waitid` above decides whether `bash` ended.
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
fn refuse(control: &UnixStream, message: &str) -> i32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_round_trip_from_the_policy() {
        let mut policy = crate::SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/");
        policy.network = false;
        let mut args = policy.supervisor_args(false);
        args.push("echo hi".into());
        let parsed = Args::parse(args).unwrap();
        assert_eq!(parsed.mode, SandboxMode::WorkspaceWrite);
        assert!(!parsed.network);
        assert!(parsed.writes.contains(&PathBuf::from("/")));
        assert_eq!(parsed.argv, ["echo hi"]);
        assert!(!parsed.exec);
    }

    #[test]
    fn malformed_arguments_are_refused() {
        assert!(Args::parse(os(&["--mode", "full", "--", "x"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only", "--"])).is_err());
        assert!(Args::parse(os(&["--mode", "read-only", "--", "a", "b"])).is_err());
        let exec = Args::parse(os(&["--mode", "read-only", "--exec", "--", "a", "b"])).unwrap();
        assert_eq!(exec.argv, ["a", "b"]);
    }
}
