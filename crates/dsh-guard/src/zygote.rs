//! The zygote: the long-lived supervisor process of one executor (dsh-shell's
//! [`dsh_shell::Zygote`] starts it as `dsh __supervise --zygote`), which forks one
//! supervisor per command.
//!
//! It starts with an empty environment, its stdin the request socket. First it probes, once,
//! what this kernel lets a command's sandbox use (namespaces, the Landlock ABI) and says so in
//! its hello line; then, single-threaded, it receives one job at a time (a header carrying the
//! job's four descriptors, then the encoded [`JobRequest`]) and forks. The fork is the job's
//! supervisor ([`crate::job`]); the zygote closes its copies of the descriptors and waits for
//! the next job, reaping the supervisors that ended before each. End of file on the
//! request socket (dsh exited or died) ends the zygote; each supervisor then sees end of file
//! on its own control socket and kills its command.
//!
//! The zygote never holds a secret: it is a fresh execution of the binary with an empty
//! environment, and each job's environment (already scrubbed by the executor) exists only in
//! the job's own fork.

use std::fs::File;
use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use dsh_shell::supervise::{JOB_FDS, JobRequest, MAX_JOB_BYTES};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork};

use crate::args::Args;
use crate::job::{Job, refuse};
use crate::namespace::Namespaces;

/// The argument (after [`crate::SUPERVISE_ARG`]) that starts a zygote.
pub const ZYGOTE_ARG: &str = "--zygote";

/// What the zygote found out about this kernel, sent as its first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The namespaces jobs can have.
    pub namespaces: Namespaces,
    /// The kernel's Landlock ABI (0: none).
    pub abi: u32,
    /// Why no (or fewer) namespaces, when that is so.
    pub reason: String,
}

impl Hello {
    /// The wire form: `hello ns=<kind> abi=<n> why=<reason to the end of the line>`.
    pub fn encode(&self) -> String {
        let reason = self.reason.replace(['\n', '\r'], " ");
        format!(
            "hello ns={} abi={} why={reason}",
            self.namespaces.as_str(),
            self.abi
        )
    }

    /// Parses [`encode`](Self::encode)'s output (without the line end).
    pub fn decode(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("hello ns=")?;
        let (ns, rest) = rest.split_once(" abi=")?;
        let (abi, reason) = rest.split_once(" why=")?;
        Some(Self {
            namespaces: ns.parse().ok()?,
            abi: abi.parse().ok()?,
            reason: reason.to_owned(),
        })
    }
}

/// Runs the zygote until its request socket closes; returns the process exit code.
#[allow(unsafe_code)]
pub(crate) fn serve() -> i32 {
    let socket = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(_) => return 2,
    };
    // Nothing dsh inherited reaches a job by accident.
    let _ = crate::confine::cloexec_from(3);
    let (namespaces, reason) = crate::namespace::probe();
    let hello = Hello {
        namespaces,
        abi: crate::landlock::kernel_abi(),
        reason,
    };
    if (&socket)
        .write_all(format!("{}\n", hello.encode()).as_bytes())
        .is_err()
    {
        return 2;
    }
    loop {
        // Supervisors that ended are reaped before each job (a few zombies wait while the
        // zygote is idle). Reaped, not ignored: their CPU time then adds up in the zygote's
        // children's counters, where a benchmark can read it.
        while let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
            waitpid(None::<nix::unistd::Pid>, Some(WaitPidFlag::WNOHANG))
        {}
        let received = match receive(&socket) {
            Ok(Some(received)) => received,
            // End of file: dsh is gone.
            Ok(None) => return 0,
            // A broken stream cannot be resynchronised; dsh starts another zygote.
            Err(_) => return 2,
        };
        // SAFETY: the zygote is single-threaded; the child runs the job and exits.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => {
                drop(socket);
                std::process::exit(start_job(received));
            }
            // The job's descriptors close here: the child has its own copies.
            Ok(ForkResult::Parent { .. }) => drop(received),
            Err(e) => {
                // Told without `refuse`, which would sweep (and kill) the zygote's children:
                // every other job.
                let [control, _, _, stderr] = received.fds;
                let _ = writeln!(
                    File::from(stderr),
                    "dsh: SANDBOX_UNAVAILABLE: cannot fork a supervisor: {e}"
                );
                let report = dsh_shell::supervise::Report {
                    status: dsh_shell::supervise::ReportStatus::Code(crate::job::REFUSED_CODE),
                    leftovers: 0,
                };
                let _ = File::from(control).write_all(report.encode().as_bytes());
            }
        }
    }
}

/// One job as received: its descriptors (control, stdin, stdout, stderr) and body.
struct Received {
    fds: [OwnedFd; JOB_FDS],
    body: Vec<u8>,
}

/// Reads one job; `None` at end of file.
#[allow(unsafe_code)]
fn receive(socket: &UnixStream) -> io::Result<Option<Received>> {
    let mut header = [0u8; 8];
    let mut space = nix::cmsg_space!([RawFd; JOB_FDS]);
    let (read, raw) = {
        let mut iov = [IoSliceMut::new(&mut header)];
        let message = recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut raw: Vec<RawFd> = Vec::new();
        for cmsg in message.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                raw.extend(fds);
            }
        }
        (message.bytes, raw)
    };
    // SAFETY: each descriptor was just received with SCM_RIGHTS and is owned by nobody else.
    let owned: Vec<OwnedFd> = raw
        .into_iter()
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if read == 0 {
        return Ok(None);
    }
    (&*socket).read_exact(&mut header[read..])?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let count = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let fds: [OwnedFd; JOB_FDS] = owned
        .try_into()
        .map_err(|_| io::Error::other("a job arrived without its descriptors"))?;
    if count != JOB_FDS || len > MAX_JOB_BYTES {
        return Err(io::Error::other("a malformed job header"));
    }
    let mut body = vec![0u8; len];
    (&*socket).read_exact(&mut body)?;
    Ok(Some(Received { fds, body }))
}

/// In the forked child: the job's streams onto 0, 1 and 2, then the job.
fn start_job(received: Received) -> i32 {
    let [control, stdin, stdout, stderr] = received.fds;
    let control = UnixStream::from(control);
    if nix::unistd::dup2_stdin(&stdin).is_err()
        || nix::unistd::dup2_stdout(&stdout).is_err()
        || nix::unistd::dup2_stderr(&stderr).is_err()
    {
        return refuse(&control, "cannot attach the command's streams");
    }
    drop((stdin, stdout, stderr));
    let Some(request) = JobRequest::decode(&received.body) else {
        return refuse(&control, "the job could not be read");
    };
    let args = match Args::parse(request.args) {
        Ok(args) => args,
        Err(e) => return refuse(&control, &format!("bad supervisor arguments: {e}")),
    };
    crate::job::run(Job {
        args,
        cwd: request.cwd,
        env: request.env,
        control,
    })
}

/// Points descriptors 0, 1 and 2 at `/dev/null` (a process that must stop holding the
/// command's streams).
pub(crate) fn null_stdio() -> io::Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    nix::unistd::dup2_stdout(&null)?;
    nix::unistd::dup2_stderr(&null)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips() {
        let hello = Hello {
            namespaces: Namespaces::User,
            abi: 7,
            reason: "plain: EPERM".into(),
        };
        assert_eq!(Hello::decode(&hello.encode()), Some(hello));
        assert_eq!(Hello::decode("hello"), None);
    }
}
