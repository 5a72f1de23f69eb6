//! Sandbox modes with real processes: `bash` under the guard's supervisor, confined by
//! Landlock on this kernel.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;
mod guarded;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use common::{PATIENCE, config};
use dsh_guard::{GuardSupervision, SANDBOX_UNAVAILABLE, SandboxMode, UnavailableProbe};
use dsh_shell::{
    JobIo, JobKind, LocalShellExecutor, ShellError, ShellExecRequest, ShellExecutor,
    SuperviseRequest, Supervision,
};
use guarded::{Dirs, denied, guarded, program, q, run};

#[tokio::test]
async fn workspace_write_writes_inside_the_workspace_but_not_outside() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let inside = run(&exec, &format!("echo hi > {}", q(&dirs.ws("in.txt")))).await;
    assert_eq!(inside.exit_code, Some(0), "{}", inside.stderr.text);
    assert!(dirs.ws("in.txt").exists());
    let tmp = run(&exec, "f=$(mktemp) && echo x > \"$f\" && rm \"$f\"").await;
    assert_eq!(tmp.exit_code, Some(0), "{}", tmp.stderr.text);

    let outside = run(&exec, &format!("echo hi > {}", q(&dirs.out("x.txt")))).await;
    assert_ne!(outside.exit_code, Some(0));
    assert!(denied(&outside.stderr.text), "{}", outside.stderr.text);
    assert!(!dirs.out("x.txt").exists());
    exec.dispose().await;
}

#[tokio::test]
async fn a_background_grandchild_inherits_the_confinement() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let script = format!(
        "( (echo hi > {out}) 2> {err} & wait ) & wait",
        out = q(&dirs.out("grandchild.txt")),
        err = q(&dirs.ws("err.txt")),
    );
    let result = run(&exec, &script).await;
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    assert!(!dirs.out("grandchild.txt").exists());
    let err = std::fs::read_to_string(dirs.ws("err.txt")).unwrap();
    assert!(denied(&err), "{err}");
    exec.dispose().await;
}

#[tokio::test]
async fn a_background_task_is_confined_too() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let mut done = exec.subscribe();
    let command = format!("echo hi > {}", q(&dirs.out("task.txt")));
    let spec = exec.resolve(ShellExecRequest::new(command)).unwrap();
    let id = exec.start(spec).await.unwrap();
    let finished = tokio::time::timeout(PATIENCE, done.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(finished.id, id);
    let output = exec.read_output(&id).unwrap();
    assert!(denied(&output.delta), "{}", output.delta);
    assert!(!dirs.out("task.txt").exists());
    exec.dispose().await;
}

#[tokio::test]
async fn read_only_refuses_the_workspace_and_tmp_but_has_a_private_tmpdir() {
    for namespaces in [true, false] {
        let dirs = Dirs::new();
        let mut policy = dirs.policy(SandboxMode::ReadOnly);
        policy.namespaces = namespaces;
        let exec = guarded(policy);
        let ws = run(&exec, &format!("echo hi > {}", q(&dirs.ws("ro.txt")))).await;
        assert_ne!(ws.exit_code, Some(0));
        assert!(!dirs.ws("ro.txt").exists());
        let tmp_file = format!("/tmp/dsh-guard-ro-{}", std::process::id());
        let tmp = run(&exec, &format!("echo hi > {tmp_file}")).await;
        assert_ne!(tmp.exit_code, Some(0));
        assert!(!Path::new(&tmp_file).exists(), "namespaces {namespaces}");

        let private = run(
            &exec,
            "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && echo \"$TMPDIR\" && \
             echo y > /dev/shm/dsh-ro-$$ && echo shm",
        )
        .await;
        assert_eq!(private.exit_code, Some(0), "{}", private.stderr.text);
        let dir = private.stdout.text.lines().nth(1).unwrap().to_owned();
        assert!(
            !Path::new(&dir).exists(),
            "the private temp dir {dir} was kept (namespaces {namespaces})"
        );
        exec.dispose().await;
    }
}

#[tokio::test]
async fn network_off_refuses_a_tcp_connect_to_a_local_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let dirs = Dirs::new();

    let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
    let on = guarded(policy.clone());
    let allowed = run(&on, &connect).await;
    assert_eq!(
        allowed.stdout.text, "connected\n",
        "{}",
        allowed.stderr.text
    );

    policy.network = false;
    let off = guarded(policy);
    let refused = run(&off, &connect).await;
    assert_ne!(refused.exit_code, Some(0));
    // The seccomp filter refuses the socket before Landlock's TCP rule is reached.
    assert!(
        refused.stderr.text.contains("Operation not permitted"),
        "{}",
        refused.stderr.text
    );
    on.dispose().await;
    off.dispose().await;
}

#[tokio::test]
async fn danger_full_access_allows_writes_anywhere() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::DangerFullAccess));
    let result = run(&exec, &format!("echo hi > {}", q(&dirs.out("danger.txt")))).await;
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    assert!(dirs.out("danger.txt").exists());
    exec.dispose().await;
}

#[tokio::test]
async fn an_escalated_command_runs_outside_the_sandbox() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::ReadOnly));
    let req = ShellExecRequest {
        unconfined: true,
        ..ShellExecRequest::new(format!("echo hi > {}", q(&dirs.out("escalated.txt"))))
    };
    let result = exec.run(exec.resolve(req).unwrap()).await.unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    assert!(dirs.out("escalated.txt").exists());
    exec.dispose().await;
}

#[tokio::test]
async fn a_confining_mode_without_landlock_refuses_and_runs_nothing() {
    let dirs = Dirs::new();
    let supervision = GuardSupervision::with_probe(
        dirs.policy(SandboxMode::WorkspaceWrite),
        program(guarded::User::Me),
        Arc::new(UnavailableProbe("Landlock is not enabled".into())),
    );
    let exec = LocalShellExecutor::new(config())
        .unwrap()
        .with_supervision(Arc::new(supervision));
    let marker = dirs.ws("ran.txt");
    let spec = exec
        .resolve(ShellExecRequest::new(format!("touch {}", q(&marker))))
        .unwrap();
    let err = exec.run(spec).await.unwrap_err();
    match &err {
        ShellError::Refused { code, message } => {
            assert_eq!(*code, SANDBOX_UNAVAILABLE);
            assert!(
                message.contains("--sandbox danger-full-access"),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert!(!marker.exists());
    exec.dispose().await;
}

#[tokio::test]
async fn a_confined_command_cannot_kill_its_supervisor_or_dsh() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let result = run(
        &exec,
        &format!("kill -9 $PPID {} ; echo done", std::process::id()),
    )
    .await;
    assert_eq!(result.stdout.text, "done\n");
    assert!(
        result.stderr.text.contains("Operation not permitted"),
        "{}",
        result.stderr.text
    );
    exec.dispose().await;
}

#[test]
fn a_supervised_program_reads_its_stdin_and_cannot_write_outside() {
    use std::io::{Read as _, Write as _};
    let dirs = Dirs::new();
    let supervision = GuardSupervision::new(
        dirs.policy(SandboxMode::WorkspaceWrite),
        program(guarded::User::Me),
    );
    let script = format!(
        "cat; echo in > {}; echo out > {}",
        q(&dirs.ws("server.txt")),
        q(&dirs.out("server.txt"))
    );
    let argv: Vec<OsString> = vec!["bash".into(), "-c".into(), script.into()];
    let env = vec![("PATH".into(), std::env::var_os("PATH").unwrap())];
    let (stdin, mut feed) = std::io::pipe().unwrap();
    let (mut out, out_w) = std::io::pipe().unwrap();
    let (mut err, err_w) = std::io::pipe().unwrap();
    let request = SuperviseRequest {
        job: JobKind::Program(&argv),
        workdir: dirs.workspace.path(),
        env: &env,
        unconfined: false,
        workspace: None,
        untrusted: false,
        session: None,
    };
    let io = JobIo {
        stdin: Some(stdin.into()),
        stdout: out_w.into(),
        stderr: err_w.into(),
    };
    let mut control = supervision.start(&request, io).unwrap();
    feed.write_all(b"hello\n").unwrap();
    drop(feed);
    let (mut stdout, mut stderr, mut report) = (String::new(), String::new(), String::new());
    out.read_to_string(&mut stdout).unwrap();
    err.read_to_string(&mut stderr).unwrap();
    control.read_to_string(&mut report).unwrap();
    assert_eq!(stdout, "hello\n");
    assert!(denied(&stderr), "{stderr}");
    assert!(report.starts_with("code 1\n"), "{report}");
    assert!(dirs.ws("server.txt").exists());
    assert!(!dirs.out("server.txt").exists());
}

#[tokio::test]
async fn a_command_never_inherits_the_control_socket() {
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    // Whatever the test harness leaks (a jobserver pipe), no socket may reach the command:
    // the supervisor's control socket would let it forge its own report.
    let result = run(
        &exec,
        "for f in /proc/$$/fd/*; do readlink \"$f\"; done; true",
    )
    .await;
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr.text);
    assert!(
        result.stdout.text.contains("pipe:"),
        "{}",
        result.stdout.text
    );
    assert!(
        !result.stdout.text.contains("socket:"),
        "{}",
        result.stdout.text
    );
    exec.dispose().await;
}

#[tokio::test]
async fn a_command_starts_with_no_signal_blocked() {
    // The supervisor blocks SIGCHLD for itself; the command must not inherit that.
    let dirs = Dirs::new();
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let result = run(&exec, "grep SigBlk /proc/$$/status").await;
    assert_eq!(result.stdout.text.trim(), "SigBlk:\t0000000000000000");
    exec.dispose().await;
}
