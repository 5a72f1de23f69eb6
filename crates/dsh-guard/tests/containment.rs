//! Nothing a command starts outlives it: `setsid` daemons and double forks are killed when the
//! call ends, when it is cancelled, and when the process holding the executor dies. Processes
//! are found by a tag in their command line: inside a PID namespace the pids a command prints
//! are its own.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;

use common::{PATIENCE, config};
use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_shell::{
    JobIo, JobKind, LocalShellExecutor, ShellExecRequest, ShellExecutor, SuperviseRequest,
    Supervision,
};
use dsh_testkit::Tag;
use tokio_util::sync::CancellationToken;

fn program() -> SupervisorProgram {
    SupervisorProgram {
        program: PathBuf::from(env!("CARGO_BIN_EXE_dsh-guard-supervisor")),
        args: Vec::new(),
    }
}

fn policy(mode: SandboxMode, namespaces: bool) -> SandboxPolicy {
    let mut policy = SandboxPolicy::new(mode, std::env::temp_dir());
    policy.namespaces = namespaces;
    policy
}

fn guarded(policy: SandboxPolicy) -> LocalShellExecutor {
    LocalShellExecutor::new(config())
        .unwrap()
        .with_supervision(Arc::new(GuardSupervision::new(policy, program())))
}

/// Escapes of every kind: a `setsid` daemon, a subshell's orphan, a double fork through
/// `bash -c … & exit`.
fn escapes(tag: &Tag) -> String {
    let sleep = tag.sleep(3600);
    format!("setsid {sleep} & (setsid {sleep} &); bash -c '{sleep} & exit'; true")
}

/// Every mode, with and without namespaces (Landlock alone, as where the kernel allows none).
fn every_setup() -> Vec<SandboxPolicy> {
    vec![
        policy(SandboxMode::WorkspaceWrite, true),
        policy(SandboxMode::WorkspaceWrite, false),
        policy(SandboxMode::ReadOnly, true),
        policy(SandboxMode::DangerFullAccess, true),
    ]
}

#[tokio::test]
async fn escaped_descendants_are_gone_when_the_call_ends() {
    for policy in every_setup() {
        let what = format!("{} namespaces {}", policy.mode, policy.namespaces);
        let exec = guarded(policy);
        let tag = Tag::new();
        let spec = exec.resolve(ShellExecRequest::new(escapes(&tag))).unwrap();
        let result = tokio::time::timeout(PATIENCE, exec.run(spec))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(result.exit_code, Some(0), "{what}: {}", result.stderr.text);
        assert_eq!(result.leftovers, 3, "every escape is counted ({what})");
        assert_eq!(tag.running(), Vec::<i32>::new(), "{what}");
        exec.dispose().await;
    }
}

// Two workers: the test blocks one while it polls for the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaped_descendants_are_gone_when_the_call_is_cancelled() {
    for policy in every_setup() {
        let what = format!("{} namespaces {}", policy.mode, policy.namespaces);
        let exec = Arc::new(guarded(policy));
        let tag = Tag::new();
        let cancel = CancellationToken::new();
        let req = ShellExecRequest {
            cancel: Some(cancel.clone()),
            ..ShellExecRequest::new(format!("setsid {} & sleep 100", tag.sleep(3600)))
        };
        let spec = exec.resolve(req).unwrap();
        let run = tokio::spawn({
            let exec = exec.clone();
            async move { exec.run(spec).await }
        });
        // A read-only command cannot reach a FIFO of the test: the daemon is found by its tag.
        tag.wait_running(1, &what);
        cancel.cancel();
        let result = tokio::time::timeout(PATIENCE, run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(result.aborted, "{what}");
        assert_eq!(tag.running(), Vec::<i32>::new(), "{what}");
        exec.dispose().await;
    }
}

#[test]
fn escaped_descendants_are_gone_when_dsh_dies() {
    // The supervisors see exactly what a SIGKILL of dsh does: the zygote's request socket and
    // every control socket close. They must then kill everything and exit.
    for policy in every_setup() {
        let what = format!("{} namespaces {}", policy.mode, policy.namespaces);
        let tag = Tag::new();
        let supervision = GuardSupervision::new(policy, program());
        let (mut out, out_w) = std::io::pipe().unwrap();
        let (_err, err_w) = std::io::pipe().unwrap();
        let script = format!("setsid {} & echo started; sleep 100", tag.sleep(3600));
        let env = vec![("PATH".into(), std::env::var_os("PATH").unwrap())];
        let request = SuperviseRequest {
            job: JobKind::Bash(&script),
            workdir: std::path::Path::new("/"),
            env: &env,
            unconfined: false,
            workspace: None,
            untrusted: false,
            session: None,
        };
        let io = JobIo {
            stdin: None,
            stdout: out_w.into(),
            stderr: err_w.into(),
        };
        let control = supervision.start(&request, io).unwrap();
        let mut line = String::new();
        BufReader::new(&mut out).read_line(&mut line).unwrap();
        assert_eq!(line, "started\n", "{what}");
        tag.wait_running(1, &what);
        drop(control);
        drop(supervision);
        tag.wait_gone(&format!("the setsid daemon outlived dsh ({what})"));
    }
}
