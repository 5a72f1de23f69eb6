//! Nothing a command starts outlives it: `setsid` daemons and double forks are killed when the
//! call ends, when it is cancelled, and when the process holding the executor dies.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{LineFifo, PATIENCE, Proc, config};
use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_shell::{LocalShellExecutor, ShellExecRequest, ShellExecutor};
use tokio_util::sync::CancellationToken;

const SUPERVISOR: &str = env!("CARGO_BIN_EXE_dsh-guard-supervisor");

fn guarded(mode: SandboxMode) -> LocalShellExecutor {
    let program = SupervisorProgram {
        program: PathBuf::from(SUPERVISOR),
        args: Vec::new(),
    };
    let policy = SandboxPolicy::new(mode, std::env::temp_dir());
    LocalShellExecutor::new(config())
        .unwrap()
        .with_supervision(Arc::new(GuardSupervision::new(policy, program)))
}

/// Escapes of every kind, each printing its pid: a `setsid` daemon, a subshell's orphan, a
/// double fork through `bash -c … & exit`.
const ESCAPES: &str = "setsid sleep 37 & echo $!; \
     (setsid sleep 38 & echo $!); \
     bash -c 'sleep 39 & echo $!; exit'";

fn pids(text: &str) -> Vec<Proc> {
    text.lines().map(|l| Proc::observe(Proc::pid(l))).collect()
}

#[tokio::test]
async fn escaped_descendants_are_gone_when_the_call_ends() {
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::DangerFullAccess] {
        let exec = guarded(mode);
        let spec = exec.resolve(ShellExecRequest::new(ESCAPES)).unwrap();
        let result = tokio::time::timeout(PATIENCE, exec.run(spec))
            .await
            .unwrap()
            .unwrap();
        let escaped = pids(&result.stdout.text);
        assert_eq!(escaped.len(), 3, "{}", result.stdout.text);
        assert_eq!(result.leftovers, 3, "every escape is counted ({mode})");
        for proc in escaped {
            assert!(
                !proc.is_running(),
                "pid {} outlived its call ({mode})",
                proc.pid
            );
        }
        exec.dispose().await;
    }
}

#[tokio::test]
async fn escaped_descendants_are_gone_when_the_call_is_cancelled() {
    let exec = guarded(SandboxMode::WorkspaceWrite);
    let mut fifo = LineFifo::new();
    let cancel = CancellationToken::new();
    let req = ShellExecRequest {
        env: vec![fifo.env("FIFO")],
        cancel: Some(cancel.clone()),
        ..ShellExecRequest::new("setsid sleep 36 & echo $! > \"$FIFO\"; sleep 100")
    };
    let spec = exec.resolve(req).unwrap();
    let run = tokio::spawn({
        let exec = Arc::new(exec);
        async move { exec.run(spec).await }
    });
    let daemon = Proc::alive(Proc::pid(&fifo.read_line().await));
    cancel.cancel();
    let result = tokio::time::timeout(PATIENCE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(result.aborted);
    assert!(
        !daemon.is_running(),
        "the setsid daemon outlived the cancelled call"
    );
}

#[test]
fn escaped_descendants_are_gone_when_dsh_dies() {
    // The supervisor sees exactly what a SIGKILL of dsh does: its control socket's other end
    // closes. It must then kill everything and exit.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut supervisor = Command::new(SUPERVISOR)
        .args(["--mode", "workspace-write", "--write", "/tmp", "--"])
        .arg("setsid sleep 35 & echo $!; sleep 100")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(supervisor.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let daemon = Proc::alive(Proc::pid(&line));
    drop(ours);
    let status = supervisor.wait().unwrap();
    assert!(status.success());
    assert!(!daemon.is_running(), "the setsid daemon outlived dsh");
}
