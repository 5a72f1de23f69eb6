//! The client side of a supervisor zygote: one long-lived supervisor process that forks a
//! supervisor per command (see [`crate::supervise`] for the protocol).
//!
//! Executing the dsh binary again for every command costs more than the command itself
//! (a 20 MB binary loaded, relocated and initialised each time); a zygote pays that once.
//! It is started on first use from the supervisor program with an empty environment, its
//! stdin one end of a Unix socket pair (the *request socket*). It answers with one line (its
//! [`hello`](Zygote::hello): what the kernel lets it do) and then, per job, receives a
//! [`JobRequest`] with the job's four descriptors attached and forks. Only the executor holds
//! the other end of the request socket, so end of file there (dsh exited or died, SIGKILL
//! included) makes the zygote exit, and each supervisor it forked sees end of file on its own
//! control socket and kills its command.
//!
//! A zygote that died (killed from outside) is started again on the next job.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IoSlice, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use parking_lot::Mutex;

use crate::supervise::{JOB_FDS, JobIo, JobRequest};

/// How long a starting zygote may take to say hello before it counts as broken.
const HELLO_PATIENCE: Duration = Duration::from_secs(10);

/// A supervisor zygote, started lazily.
#[derive(Debug)]
pub struct Zygote {
    program: PathBuf,
    args: Vec<OsString>,
    live: Mutex<Option<Live>>,
}

#[derive(Debug)]
struct Live {
    socket: UnixStream,
    child: Child,
    hello: String,
}

impl Zygote {
    /// A zygote started as `program args…` when first needed.
    pub fn new(program: impl Into<PathBuf>, args: Vec<OsString>) -> Self {
        Self {
            program: program.into(),
            args,
            live: Mutex::new(None),
        }
    }

    /// The zygote's hello line (without its line end), starting it if it does not run.
    pub fn hello(&self) -> io::Result<String> {
        let mut live = self.live.lock();
        Ok(self.ensure(&mut live)?.hello.clone())
    }

    /// The running zygote's process id (for measurements: the zygote reaps every supervisor,
    /// so their CPU time adds up in its children's counters).
    pub fn pid(&self) -> Option<u32> {
        self.live.lock().as_ref().map(|live| live.child.id())
    }

    /// Hands one job to the zygote and returns the executor's end of its control socket. The
    /// descriptors in `io` are the command's; this process's copies are closed once sent.
    pub fn start(&self, job: &JobRequest, io: JobIo) -> io::Result<UnixStream> {
        let (ours, theirs) = UnixStream::pair()?;
        let stdin = match io.stdin {
            Some(fd) => fd,
            None => OwnedFd::from(File::open("/dev/null")?),
        };
        let fds: [OwnedFd; JOB_FDS] = [OwnedFd::from(theirs), stdin, io.stdout, io.stderr];
        let body = job.encode();
        let mut live = self.live.lock();
        // One retry: a zygote killed from outside is replaced, once, per job.
        for attempt in 0..2 {
            let current = self.ensure(&mut live)?;
            match send(&current.socket, &body, &fds) {
                Ok(()) => return Ok(ours),
                Err(error) if attempt == 0 => {
                    tracing::debug!(%error, "the supervisor zygote is gone; starting another");
                    if let Some(dead) = live.take() {
                        retire(dead);
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Err(io::Error::other(
            "the supervisor zygote could not be started",
        ))
    }

    fn ensure<'a>(&self, live: &'a mut Option<Live>) -> io::Result<&'a Live> {
        let exited = match live.as_mut() {
            Some(current) => current.child.try_wait()?.is_some(),
            None => true,
        };
        if exited {
            if let Some(dead) = live.take() {
                retire(dead);
            }
            *live = Some(self.spawn()?);
        }
        live.as_ref()
            .ok_or_else(|| io::Error::other("the supervisor zygote is not running"))
    }

    fn spawn(&self) -> io::Result<Live> {
        let (socket, theirs) = UnixStream::pair()?;
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the terminal's foreground group: Ctrl-C is dsh's to handle, not the
            // zygote's.
            .process_group(0)
            .spawn()?;
        let mut hello = String::new();
        socket.set_read_timeout(Some(HELLO_PATIENCE))?;
        let read = BufReader::new(&socket).read_line(&mut hello);
        socket.set_read_timeout(None)?;
        match read {
            Ok(n) if n > 0 && hello.ends_with('\n') => {
                hello.pop();
                Ok(Live {
                    socket,
                    child,
                    hello,
                })
            }
            outcome => {
                let _ = child.kill();
                let _ = child.wait();
                Err(io::Error::other(format!(
                    "the supervisor zygote {} did not start: {}",
                    self.program.display(),
                    match outcome {
                        Err(e) => e.to_string(),
                        Ok(_) => "it exited without a word".to_owned(),
                    }
                )))
            }
        }
    }
}

/// Writes one job: an 8-byte header (body length, descriptor count) carrying the descriptors,
/// then the body.
fn send(socket: &UnixStream, body: &[u8], fds: &[OwnedFd; JOB_FDS]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the job is too large"))?;
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4..].copy_from_slice(&(JOB_FDS as u32).to_le_bytes());
    let raw = fds.each_ref().map(AsRawFd::as_raw_fd);
    let sent = sendmsg::<()>(
        socket.as_raw_fd(),
        &[IoSlice::new(&header)],
        &[ControlMessage::ScmRights(&raw)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(io::Error::from)?;
    let mut writer = socket;
    writer.write_all(&header[sent..])?;
    writer.write_all(body)
}

/// Closes a zygote's request socket (it exits at end of file) and reaps it off this thread.
fn retire(live: Live) {
    let _ = live.socket.shutdown(Shutdown::Both);
    let mut child = live.child;
    let _ = std::thread::Builder::new()
        .name("dsh-zygote-reaper".into())
        .spawn(move || child.wait());
}

impl Drop for Zygote {
    fn drop(&mut self) {
        if let Some(live) = self.live.get_mut().take() {
            retire(live);
        }
    }
}
