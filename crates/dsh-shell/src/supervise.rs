//! The supervision seam: starting each command under a supervisor *program* that confines and
//! contains it (dsh-guard provides one), and the small wire protocol both sides speak.
//!
//! Without a [`Supervision`] the executor keeps its own `/bin/sh` group supervisor (crate docs,
//! "Nothing outlives dsh"), so the shell stays usable on its own. With one, the executor starts
//! `program args… <command>` instead:
//!
//! - as the leader of its own process group, its working directory the command's workdir, its
//!   environment the command's environment, and its stdout/stderr the command's output pipes;
//! - with its stdin one end of a Unix socket pair (the *control socket*). The executor writes
//!   one byte per signal request ([`STOP`], [`CONTINUE`], [`KILL`]) and, once the supervisor has
//!   exited, reads its [`Report`]. End of file on the socket (the executor dropped the command, or
//!   dsh died, even by SIGKILL) means: kill everything and exit.
//!
//! The supervisor runs `bash -c <command>` in a process group of its own and, being a child
//! subreaper, kills and reaps every remaining descendant (double forks and `setsid` included)
//! before it reports and exits. The executor never signals the supervisor's processes itself:
//! only the supervisor knows which of them are still its own, so no pid can be recycled under a
//! signal.

use std::ffi::OsString;
use std::fmt;
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

/// One command about to start, as the [`Supervision`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct SuperviseRequest<'a> {
    /// The `bash -c` script.
    pub command: &'a str,
    /// Where it runs.
    pub workdir: &'a Path,
    /// The call was approved to run outside the sandbox (an escalation): contain it, do not
    /// confine it.
    pub unconfined: bool,
    /// The session's workspace, when the caller knows it.
    pub workspace: Option<&'a Path>,
    /// The calling session's id, when the caller knows it.
    pub session: Option<&'a str>,
}

/// The supervisor to start: `program args…`, to which the executor appends the command as the
/// last argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorLaunch {
    /// The supervisor executable (dsh itself, re-executed in a hidden mode, in production).
    pub program: PathBuf,
    /// Its arguments before the command (the policy).
    pub args: Vec<OsString>,
}

/// Decides how each command is supervised. Returning an error refuses the command before
/// anything is spawned: a confining mode that cannot be enforced must never run unconfined.
pub trait Supervision: Send + Sync + fmt::Debug {
    /// The supervisor for this command, or why it may not run.
    fn supervisor(&self, request: &SuperviseRequest<'_>) -> Result<SupervisorLaunch, ShellError>;
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
    fn a_report_without_status_is_none() {
        assert_eq!(Report::decode("leftovers 1\n"), None);
        assert_eq!(Report::decode(""), None);
    }
}
