//! Helpers shared by the integration tests: executors with short timers, FIFOs for real
//! synchronisation with commands, and checks that a process is gone.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]
// Test helpers: a failed setup step should panic right there.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecRequest, ShellExecSpec, ShellExecutor};
use nix::sys::stat::Mode;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;

/// How long a test waits for anything an external process does before failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A grace short enough that tests exercising the SIGKILL step stay quick.
pub const SHORT_GRACE: Duration = Duration::from_millis(300);

pub fn config() -> ShellConfig {
    ShellConfig {
        grace: SHORT_GRACE,
        ..ShellConfig::default()
    }
}

pub fn executor() -> LocalShellExecutor {
    LocalShellExecutor::new(config()).unwrap()
}

pub fn executor_with(adjust: impl FnOnce(&mut ShellConfig)) -> LocalShellExecutor {
    let mut config = config();
    adjust(&mut config);
    LocalShellExecutor::new(config).unwrap()
}

pub fn spec(exec: &impl ShellExecutor, req: ShellExecRequest) -> ShellExecSpec {
    exec.resolve(req).unwrap()
}

pub fn command(exec: &impl ShellExecutor, command: &str) -> ShellExecSpec {
    spec(exec, ShellExecRequest::new(command))
}

/// A named pipe a command writes one line into (`echo ... > "$FIFO"`), giving the test a real
/// synchronisation point instead of a sleep.
pub struct LineFifo {
    _dir: TempDir,
    pub path: PathBuf,
    lines: BufReader<pipe::Receiver>,
}

impl LineFifo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("line.fifo");
        nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).unwrap();
        // Read-write so the open does not wait for a writer and the read never sees a premature
        // end of file between writers.
        let rx = pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&path)
            .unwrap();
        Self {
            _dir: dir,
            path,
            lines: BufReader::new(rx),
        }
    }

    pub fn env(&self, name: &str) -> (String, String) {
        (name.to_owned(), self.path.to_str().unwrap().to_owned())
    }

    pub async fn read_line(&mut self) -> String {
        let mut line = String::new();
        tokio::time::timeout(PATIENCE, self.lines.read_line(&mut line))
            .await
            .expect("command never wrote its line")
            .unwrap();
        line.trim_end().to_owned()
    }
}

/// A named pipe a command blocks on (`read -r _ < "$GATE"`) until the test opens it.
pub struct Gate {
    _dir: TempDir,
    pub path: PathBuf,
    // Kept open until the gate is dropped: closing every end would discard an unread "go".
    tx: pipe::Sender,
}

impl Gate {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate.fifo");
        nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).unwrap();
        let tx = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&path)
            .unwrap();
        Self {
            _dir: dir,
            path,
            tx,
        }
    }

    pub fn env(&self, name: &str) -> (String, String) {
        (name.to_owned(), self.path.to_str().unwrap().to_owned())
    }

    pub async fn open(&mut self) {
        self.tx.write_all(b"go\n").await.unwrap();
    }
}

/// A process identified by pid and start time, so a recycled pid is not mistaken for it.
#[derive(Debug, Clone, Copy)]
pub struct Proc {
    pub pid: i32,
    /// `None` when the process was already gone when observed.
    start: Option<u64>,
}

impl Proc {
    /// Records a process that must be running now.
    pub fn alive(pid: i32) -> Self {
        let proc = Self::observe(pid);
        assert!(proc.is_running(), "process {pid} is not running");
        proc
    }

    /// Records whatever process has this pid now (possibly none, possibly a zombie): for pids a
    /// command printed and that may have died before the test saw them.
    pub fn observe(pid: i32) -> Self {
        Self {
            pid,
            start: stat(pid).map(|(_, start)| start),
        }
    }

    /// Parses a pid printed by a command.
    pub fn pid(text: &str) -> i32 {
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("not a pid: {text:?}"))
    }

    /// Running: not a zombie, and not a recycled pid.
    pub fn is_running(&self) -> bool {
        matches!(
            (stat(self.pid), self.start),
            (Some((state, start)), Some(seen)) if start == seen && !matches!(state, 'Z' | 'X')
        )
    }

    /// Waits (polling, bounded) until the process has died. Zombies count as dead: the
    /// container's init may never reap an orphan.
    pub async fn assert_gone(&self, what: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.is_running() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} (pid {}) is still running",
                self.pid
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// State letter and start time (clock ticks since boot) from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; the fields after it do not.
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        fields.first()?.chars().next()?,
        fields.get(19)?.parse().ok()?,
    ))
}

pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Output of `seq 1 n`, as a command would print it.
pub fn seq(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}
