//! The group supervisor: a `/bin/sh` that kills its process group when the executor's end of
//! its stdin pipe closes. Why and how it works is described in the crate docs, section "Nothing
//! outlives dsh".
//!
//! Public so that other process owners (MCP servers) follow the same discipline: spawn the
//! supervisor, spawn the program into its group (`process_group(supervisor.child.id())`), hold
//! the lifeline while the program may run, and reap the supervisor last.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

/// The supervisor's shell script: ignore catchable signals, wait for end of file on stdin, then
/// kill the own process group (`0`). Only builtins run, so no ignored disposition is passed on to
/// another program.
pub const SCRIPT: &str = "trap '' HUP INT QUIT TERM USR1 USR2 PIPE ALRM TSTP TTIN TTOU \
     VTALRM PROF XCPU XFSZ WINCH; while read -r _; do :; done; kill -KILL 0";

/// A started supervisor: the child to reap, and the lifeline to hold while the command may run.
#[derive(Debug)]
pub struct Supervisor {
    /// The supervisor itself, the group's leader: its pid is the group id.
    pub child: Child,
    /// Dropping this closes the last write end, and the supervisor kills the group.
    pub lifeline: ChildStdin,
}

/// Starts a supervisor as the leader of a fresh process group.
pub fn spawn() -> io::Result<Supervisor> {
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("dsh-shell-supervisor")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let Some(lifeline) = child.stdin.take() else {
        // Stdio::piped() always yields a handle; stay safe rather than leave a supervisor behind.
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("supervisor started without a stdin pipe"));
    };
    Ok(Supervisor { child, lifeline })
}
