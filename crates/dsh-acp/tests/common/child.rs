//! The real `dsh acp` binary as a child process, driven by an ACP client over its stdio and
//! pointed at the mock OpenAI-compatible server (`DEEPSEEK_BASE_URL`).
//!
//! A library crate cannot name another crate's binary, so the binary is looked up beside the
//! test's own executable (`<target>/<profile>/dsh`, built by `cargo build -p dsh-cli` into the
//! same target directory).

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session::SessionEvent;
use dsh_testkit::MockServer;

use super::Conn;

/// The `dsh` binary of this target directory ([`dsh_testkit::dsh_binary`]: built when
/// absent), checked to have a working `acp` subcommand: a missing or broken binary fails the
/// test, never skips it.
pub fn binary() -> PathBuf {
    let bin = dsh_testkit::dsh_binary();
    let help = std::process::Command::new(&bin)
        .args(["acp", "--help"])
        .env("DSH_HOME", std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        help.status.success(),
        "`{} acp --help` failed ({}): {}",
        bin.display(),
        help.status,
        String::from_utf8_lossy(&help.stderr)
    );
    bin
}

/// A running `dsh acp` child with its own home, workspace and mock provider.
pub struct Child {
    pub process: tokio::process::Child,
    pub home: tempfile::TempDir,
    pub stderr: PathBuf,
    pub conn: Option<Conn>,
}

/// How a child is started: its provider key and log filter.
pub struct Launch {
    /// Set `DEEPSEEK_API_KEY` (without it the configuration is incomplete).
    pub api_key: bool,
    /// `DSH_LOG`, unset for `None` (the default filter).
    pub log: Option<&'static str>,
    /// `--sandbox MODE`, the default mode for `None`.
    pub sandbox: Option<&'static str>,
    /// Run over this home (and its workspace) instead of the child's own: a second dsh
    /// beside another one, over the same sessions.
    pub beside: Option<PathBuf>,
}

impl Default for Launch {
    fn default() -> Self {
        Self {
            api_key: true,
            log: Some("debug"),
            sandbox: None,
            beside: None,
        }
    }
}

pub async fn spawn(bin: &Path, server: &MockServer) -> Child {
    spawn_in(bin, server, tempfile::tempdir().unwrap(), Launch::default()).await
}

/// A child whose commands are not confined (`--sandbox danger-full-access`): the only mode
/// in which `bash` may run in the editor's terminals, which dsh cannot confine.
pub async fn spawn_unconfined(bin: &Path, server: &MockServer) -> Child {
    let launch = Launch {
        sandbox: Some("danger-full-access"),
        ..Launch::default()
    };
    spawn_in(bin, server, tempfile::tempdir().unwrap(), launch).await
}

/// A child with `home` as its `DSH_HOME` (reused to restart over the same sessions).
pub async fn spawn_in(
    bin: &Path,
    server: &MockServer,
    home: tempfile::TempDir,
    launch: Launch,
) -> Child {
    let dsh_home = launch
        .beside
        .clone()
        .unwrap_or_else(|| home.path().to_owned());
    let workspace = dsh_home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let stderr = home.path().join("stderr.log");
    let mut command = tokio::process::Command::new(bin);
    command.arg("acp");
    if let Some(mode) = launch.sandbox {
        command.args(["--sandbox", mode]);
    }
    command
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &dsh_home)
        .env("DSH_HOME", &dsh_home)
        .env("DEEPSEEK_BASE_URL", server.url());
    if launch.api_key {
        command.env("DEEPSEEK_API_KEY", "test-key");
    }
    if let Some(log) = launch.log {
        command.env("DSH_LOG", log);
    }
    let mut process = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = process.stdin.take().unwrap();
    let stdout = process.stdout.take().unwrap();
    let conn = Conn::over(stdout, stdin, workspace).await;
    Child {
        process,
        home,
        stderr,
        conn: Some(conn),
    }
}

impl Child {
    pub fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().unwrap()
    }

    /// Closes the client's end (stdin) and waits, polling with a bounded deadline, for the
    /// process to exit; returns its exit code and how long it took.
    pub async fn close_stdin_and_wait(&mut self, deadline: Duration) -> (Option<i32>, Duration) {
        let conn = self.conn.take().unwrap();
        let started = Instant::now();
        conn.begin_disconnect();
        let _ = conn.served().await;
        let status = tokio::time::timeout(deadline, self.process.wait()).await;
        let elapsed = started.elapsed();
        match status {
            Ok(Ok(status)) => {
                if !status.success() {
                    eprintln!(
                        "{}",
                        std::fs::read_to_string(&self.stderr).unwrap_or_default()
                    );
                }
                (status.code(), elapsed)
            }
            _ => {
                let _ = self.process.start_kill();
                eprintln!(
                    "{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
                (None, elapsed)
            }
        }
    }

    /// Every session file under `$DSH_HOME/sessions`, parsed.
    pub fn session_files(&self) -> Vec<(PathBuf, Vec<Arc<SessionEvent>>)> {
        let mut files = Vec::new();
        let mut dirs = vec![self.home.path().join("sessions")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let events = text
                        .lines()
                        .skip(1) // the header
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| Arc::new(serde_json::from_str::<SessionEvent>(l).unwrap()))
                        .collect();
                    files.push((path, events));
                }
            }
        }
        files
    }
}
