//! The supervision seam: starting each command under a supervisor that confines and contains
//! it (dsh-guard provides one), and the small wire protocol both sides speak.
//!
//! Without a [`Supervision`] the executor keeps its own `/bin/sh` group supervisor (crate docs,
//! "Nothing outlives dsh"), so the shell stays usable on its own. With one, the executor hands
//! each command to [`Supervision::start`] together with the command's standard streams
//! ([`JobIo`]: the read end of its stdin, the write ends of its output pipes) and gets back one
//! end of a Unix socket pair, the *control socket*:
//!
//! - the executor writes one byte per signal request ([`STOP`], [`CONTINUE`], [`KILL`]);
//! - the supervisor writes its [`Report`] just before it exits, and end of file on the socket
//!   means it has exited (nothing else holds the other end: it is close-on-exec);
//! - end of file the other way (the executor dropped the command, or dsh died, even by SIGKILL)
//!   means: kill everything and exit.
//!
//! The supervisor runs `bash -c <command>` (or, for a long-lived program such as an MCP server,
//! the program itself: [`JobKind::Program`]) in a session of its own and, being a child
//! subreaper (or the init of a PID namespace), kills and reaps every remaining descendant
//! (double forks and `setsid` included) before it reports and exits. The executor never signals
//! the supervisor's processes itself: only the supervisor knows which of them are still its own,
//! so no pid can be recycled under a signal.
//!
//! dsh-guard starts supervisors from a *zygote* ([`crate::zygote`]): one long-lived, single-
//! threaded copy of the supervisor program per executor that forks a supervisor per command,
//! receiving the command as a [`JobRequest`] and its descriptors over a socket. Forking a small
//! process that is already loaded costs a fraction of executing the dsh binary again.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::error::ShellError;

/// Control byte: SIGTERM to the command's process group.
pub const STOP: u8 = b'T';
/// Control byte: SIGCONT to the command's process group (a stopped group can act on SIGTERM).
pub const CONTINUE: u8 = b'C';
/// Control byte: SIGKILL to the command's process group.
pub const KILL: u8 = b'K';

/// What a supervisor tells the executor when it is done, one `key value` pair per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// How `bash` ended.
    pub status: ReportStatus,
    /// How many descendants were still running when `bash` had ended and were killed.
    pub leftovers: u32,
}

/// How `bash` ended, as the supervisor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportStatus {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal number.
    Signal(i32),
}

impl Report {
    /// The wire form: `code N` or `signal N`, then `leftovers N`, each on its own line.
    pub fn encode(&self) -> String {
        let status = match self.status {
            ReportStatus::Code(code) => format!("code {code}"),
            ReportStatus::Signal(signal) => format!("signal {signal}"),
        };
        format!("{status}\nleftovers {}\n", self.leftovers)
    }

    /// Parses [`encode`](Self::encode)'s output; `None` when the status line is missing (the
    /// supervisor died before reporting).
    pub fn decode(text: &str) -> Option<Self> {
        let mut status = None;
        let mut leftovers = 0;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<i64>() else {
                continue;
            };
            match key {
                "code" => status = i32::try_from(value).ok().map(ReportStatus::Code),
                "signal" => status = i32::try_from(value).ok().map(ReportStatus::Signal),
                "leftovers" => leftovers = u32::try_from(value).unwrap_or(u32::MAX),
                _ => {}
            }
        }
        status.map(|status| Self { status, leftovers })
    }
}

/// What a supervisor runs.
#[derive(Debug, Clone, Copy)]
pub enum JobKind<'a> {
    /// `bash -c <script>`: a command of the agent or a hook.
    Bash(&'a str),
    /// A program and its arguments, exec'd directly: a long-lived server (MCP) whose stdin
    /// and stdout are its channel.
    Program(&'a [OsString]),
}

/// One command about to start, as the [`Supervision`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct SuperviseRequest<'a> {
    /// What runs.
    pub job: JobKind<'a>,
    /// Where it runs.
    pub workdir: &'a Path,
    /// Its complete environment (already scrubbed of secrets).
    pub env: &'a [(OsString, OsString)],
    /// The call was approved to run outside the sandbox (an escalation): contain it, do not
    /// confine it.
    pub unconfined: bool,
    /// The session's workspace, when the caller knows it.
    pub workspace: Option<&'a Path>,
    /// The calling session's id, when the caller knows it.
    pub session: Option<&'a str>,
    /// From a source the user has not trusted (a workspace's hooks): sandboxed even in
    /// `danger-full-access`, `workspace-write` at most.
    pub untrusted: bool,
}

/// The standard streams of one supervised command: the ends the *command* uses. The caller
/// keeps the other ends (it writes the stdin pipe and reads the output pipes).
#[derive(Debug)]
pub struct JobIo {
    /// The command's standard input; `None` is `/dev/null`.
    pub stdin: Option<OwnedFd>,
    /// The command's standard output.
    pub stdout: OwnedFd,
    /// The command's standard error.
    pub stderr: OwnedFd,
}

/// Decides how each command is supervised, and starts it. Returning an error refuses the
/// command: a confining mode that cannot be enforced must never run unconfined.
pub trait Supervision: Send + Sync + fmt::Debug {
    /// Starts `request` under a supervisor with `io` as its standard streams and returns the
    /// executor's end of its control socket, or why it may not run.
    fn start(&self, request: &SuperviseRequest<'_>, io: JobIo) -> Result<UnixStream, ShellError>;
}

/// One job as a zygote receives it: the supervisor's arguments (the policy, then `--` and
/// the command), where to run and the environment. The descriptors travel beside it
/// ([`JOB_FDS`], in the order control, stdin, stdout, stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    /// The supervisor's arguments.
    pub args: Vec<OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The environment, in order.
    pub env: Vec<(OsString, OsString)>,
}

/// How many descriptors travel with each [`JobRequest`]: control, stdin, stdout, stderr.
pub const JOB_FDS: usize = 4;

/// Longest encoded [`JobRequest`] a zygote accepts (arguments and environment together are
/// bounded far lower by the kernel's `ARG_MAX` once they reach `exec`).
pub const MAX_JOB_BYTES: usize = 16 << 20;

impl JobRequest {
    /// The wire form: every string as a little-endian `u32` length and its bytes, in the order
    /// cwd, argument count, arguments, variable count, (name, value) pairs.
    pub fn encode(&self) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, bytes: &[u8]) {
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        put(&mut out, self.cwd.as_os_str().as_bytes());
        out.extend_from_slice(&(self.args.len() as u32).to_le_bytes());
        for arg in &self.args {
            put(&mut out, arg.as_bytes());
        }
        out.extend_from_slice(&(self.env.len() as u32).to_le_bytes());
        for (name, value) in &self.env {
            put(&mut out, name.as_bytes());
            put(&mut out, value.as_bytes());
        }
        out
    }

    /// Parses [`encode`](Self::encode)'s output; `None` for anything malformed or truncated.
    pub fn decode(mut bytes: &[u8]) -> Option<Self> {
        fn count(bytes: &mut &[u8]) -> Option<usize> {
            let (head, rest) = bytes.split_first_chunk::<4>()?;
            *bytes = rest;
            usize::try_from(u32::from_le_bytes(*head)).ok()
        }
        fn string(bytes: &mut &[u8]) -> Option<OsString> {
            let len = count(bytes)?;
            if len > bytes.len() {
                return None;
            }
            let (value, rest) = bytes.split_at(len);
            *bytes = rest;
            Some(OsString::from_vec(value.to_vec()))
        }
        let cwd = PathBuf::from(string(&mut bytes)?);
        let args = (0..count(&mut bytes)?)
            .map(|_| string(&mut bytes))
            .collect::<Option<Vec<_>>>()?;
        let env = (0..count(&mut bytes)?)
            .map(|_| Some((string(&mut bytes)?, string(&mut bytes)?)))
            .collect::<Option<Vec<_>>>()?;
        bytes.is_empty().then_some(Self { args, cwd, env })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for status in [ReportStatus::Code(3), ReportStatus::Signal(9)] {
            let report = Report {
                status,
                leftovers: 2,
            };
            assert_eq!(Report::decode(&report.encode()), Some(report));
        }
    }

    #[test]
    fn job_requests_round_trip_and_truncation_is_refused() {
        let job = JobRequest {
            args: vec![
                "--mode".into(),
                "read-only".into(),
                "--".into(),
                "echo é".into(),
            ],
            cwd: "/ws".into(),
            env: vec![("PATH".into(), "/bin".into()), ("EMPTY".into(), "".into())],
        };
        let bytes = job.encode();
        assert_eq!(JobRequest::decode(&bytes), Some(job));
        for cut in 0..bytes.len() {
            assert_eq!(JobRequest::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(JobRequest::decode(&long), None, "trailing bytes");
    }

    #[test]
    fn a_report_without_status_is_none() {
        assert_eq!(Report::decode("leftovers 1\n"), None);
        assert_eq!(Report::decode(""), None);
    }
}
