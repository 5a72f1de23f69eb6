//! The `bash` tool against real processes: the exact rendering contract, timeouts, output
//! truncation, cancellation, working directories and the managed environment.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::*;
use dsh_kernel::Context;
use dsh_shell::ShellConfig;
use dsh_tools::{TOOL_ABORTED, ToolRuntime};
use dsh_tools_builtin::BuiltinToolsPlugin;
use nix::sys::stat::Mode;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

fn bash(command: &str) -> Value {
    json!({"command": command, "description": "run a test command"})
}

async fn output(world: &World, args: Value) -> String {
    let caller = world.caller("session-a");
    let result = world.call("bash", args, Some(&caller)).await;
    assert!(!result.is_error, "unexpected error: {}", result.text());
    result.text()
}

#[tokio::test]
async fn stdout_comes_back_verbatim_without_a_marker_on_success() {
    let w = world().await;
    assert_eq!(
        output(&w, bash("echo hello; echo world")).await,
        "hello\nworld\n"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn a_command_that_prints_nothing_reads_no_output() {
    let w = world().await;
    assert_eq!(output(&w, bash("true")).await, "(no output)");
    w.shutdown().await;
}

#[tokio::test]
async fn stderr_follows_stdout_in_its_own_section() {
    let w = world().await;
    assert_eq!(
        output(&w, bash("printf out; echo err >&2")).await,
        "out\n[stderr]\nerr\n"
    );
    assert_eq!(
        output(&w, bash("echo only-err >&2")).await,
        "[stderr]\nonly-err\n"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn non_zero_exit_is_a_last_line_marker_not_an_error_result() {
    let w = world().await;
    let caller = w.caller("session-a");
    let result = w.call("bash", bash("echo x; exit 3"), Some(&caller)).await;
    assert!(!result.is_error);
    assert_eq!(result.error, None);
    assert_eq!(result.text(), "x\n[exit code: 3]");
    assert_eq!(
        output(&w, bash("exit 1")).await,
        "(no output)\n[exit code: 1]"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn a_signal_death_is_reported_as_the_last_marker() {
    let w = world().await;
    assert_eq!(
        output(&w, bash("echo before; kill -KILL $$")).await,
        "before\n[killed by signal: SIGKILL]"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn timeout_marker_precedes_the_signal_marker() {
    let w = world().await;
    let args = json!({"command": "sleep 30", "description": "sleep", "timeout_ms": 200});
    assert_eq!(
        output(&w, args).await,
        "(no output)\n[timed out after 200ms]\n[killed by signal: SIGTERM]"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn a_command_that_traps_sigterm_and_exits_zero_still_reports_the_timeout() {
    let w = world().await;
    // `wait` returns as soon as the trapped TERM arrives; the trap prints and exits 0. The
    // timeout is generous so the trap is surely installed before it fires.
    let args = json!({
        "command": "trap 'echo trapped; exit 0' TERM; echo ready; sleep 30 & wait",
        "description": "trap the timeout",
        "timeout_ms": 1000,
    });
    assert_eq!(
        output(&w, args).await,
        "ready\ntrapped\n[timed out after 1000ms]"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn long_output_keeps_the_tail_and_names_the_full_output_file() {
    let w = world_with(ShellConfig {
        max_output_bytes: 1024,
        ..config()
    })
    .await;
    let text = output(&w, bash("seq 1 5000")).await;
    let (tail, note) = text.rsplit_once('\n').unwrap();
    assert!(tail.ends_with("4999\n5000"), "{tail:?}");
    assert!(tail.len() <= 1024, "the tail is bounded");
    let path = note
        .strip_prefix("[output truncated; full output: ")
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no truncation note in {note:?}"));
    let full = std::fs::read_to_string(path).unwrap();
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
    w.shutdown().await;
}

#[tokio::test]
async fn output_beyond_the_spill_cap_says_the_full_output_is_unavailable() {
    let w = world_with(ShellConfig {
        max_output_bytes: 1024,
        max_spill_bytes: 1024,
        ..config()
    })
    .await;
    let text = output(&w, bash("seq 1 5000; echo gone >&2")).await;
    assert!(
        text.contains("5000\n[output truncated; full output: (unavailable)]\n[stderr]\ngone\n"),
        "{text:?}"
    );
    w.shutdown().await;
}

/// Runs `prefix` and then a long sleep as a foreground `bash` call, cancels the call once the
/// command has got past `prefix` (it says so through a FIFO), and returns the result.
async fn cancel_after(w: &World, prefix: &str) -> dsh_tools::ToolCallResult {
    let dir = tempdir();
    let fifo = dir.path().join("started.fifo");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
    // Read-write, so opening does not wait for the command to open its end.
    let rx = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&fifo)
        .unwrap();
    let mut lines = tokio::io::BufReader::new(rx);
    let caller = w.caller("session-a");
    let cancel = CancellationToken::new();
    let command = format!("{prefix}echo started > '{}'; sleep 30", fifo.display());
    let call = w.call_with("bash", bash(&command), Some(&caller), cancel.clone());
    let waiter = async {
        let mut line = String::new();
        tokio::time::timeout(PATIENCE, lines.read_line(&mut line))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line, "started\n");
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(call, waiter);
    result
}

#[tokio::test]
async fn cancelling_the_call_stops_the_command_and_is_an_aborted_error() {
    let w = world().await;
    let result = cancel_after(&w, "").await;
    assert!(result.is_error);
    assert_eq!(result.code(), Some(TOOL_ABORTED));
    assert_eq!(result.text(), "Error: tool call aborted");
    w.shutdown().await;
}

#[tokio::test]
async fn an_aborted_run_reports_the_output_it_printed_before_the_cancel() {
    let w = world().await;
    let result = cancel_after(&w, "echo 'step 1 done'; echo 'step 2 failing' >&2; ").await;
    assert!(result.is_error);
    assert_eq!(result.code(), Some(TOOL_ABORTED));
    assert_eq!(
        result.text(),
        "Error: tool call aborted\n\noutput before it stopped:\nstep 1 done\n[stderr]\nstep 2 failing\n"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn a_body_invoked_with_a_cancelled_token_runs_nothing_and_is_aborted() {
    let w = world().await;
    let dir = tempdir();
    let marker = dir.path().join("ran");
    let tool = w.runtime.get(None, "bash").unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let call =
        dsh_tools::ToolCallContext::new(dsh_session::CallId::new("c"), "bash", "{}", None, cancel);
    let err = tool
        .execute(bash(&format!("touch '{}'", marker.display())), &call)
        .await
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some(TOOL_ABORTED));
    assert!(!marker.exists(), "the command must not have run");
    w.shutdown().await;
}

#[tokio::test]
async fn workdir_resolves_against_the_session_cwd_and_absolute_wins() {
    let w = world().await;
    let project = tempdir();
    let elsewhere = tempdir();
    std::fs::create_dir(project.path().join("sub")).unwrap();
    let caller = w.caller_in("session-a", Some(project.path()));
    let pwd = |workdir: Option<&str>| {
        let mut args = bash("pwd -P");
        if let Some(dir) = workdir {
            args["workdir"] = json!(dir);
        }
        args
    };
    let run = |args: Value| {
        let (w, caller) = (&w, &caller);
        async move { w.call("bash", args, Some(caller)).await.text() }
    };
    assert_eq!(
        run(pwd(None)).await,
        format!("{}\n", canonical(project.path()).display())
    );
    assert_eq!(
        run(pwd(Some("sub"))).await,
        format!("{}\n", canonical(&project.path().join("sub")).display())
    );
    let absolute = elsewhere.path().to_str().unwrap();
    assert_eq!(
        run(pwd(Some(absolute))).await,
        format!("{}\n", canonical(elsewhere.path()).display())
    );
    // Another session with another cwd sees its own directory for the same relative path.
    std::fs::create_dir(elsewhere.path().join("sub")).unwrap();
    let other = w.caller_in("session-b", Some(elsewhere.path()));
    let text = w.call("bash", pwd(Some("sub")), Some(&other)).await.text();
    assert_eq!(
        text,
        format!("{}\n", canonical(&elsewhere.path().join("sub")).display())
    );
    w.shutdown().await;
}

#[tokio::test]
async fn a_missing_workdir_is_an_error_result_naming_it() {
    let w = world().await;
    let project = tempdir();
    let caller = w.caller_in("session-a", Some(project.path()));
    let mut args = bash("true");
    args["workdir"] = json!("no-such-dir");
    let result = w.call("bash", args, Some(&caller)).await;
    assert!(result.is_error);
    assert!(result.text().contains("no-such-dir"), "{}", result.text());
    w.shutdown().await;
}

#[tokio::test]
async fn the_command_sees_its_session_id_and_dsh_shell() {
    let w = world().await;
    assert_eq!(
        output(&w, bash(r#"printf '%s|%s' "$DSH_SESSION_ID" "$DSH_SHELL""#)).await,
        "session-a|1"
    );
    // An agentless call has no session id to pass.
    let result = w
        .call(
            "bash",
            bash(r#"printf '%s' "${DSH_SESSION_ID-unset}""#),
            None,
        )
        .await;
    assert_eq!(result.text(), "unset");
    w.shutdown().await;
}

/// Runs only inside the child process spawned by the test below, whose environment carries
/// a credential-looking variable and stale `DSH_*` values.
#[tokio::test]
#[ignore = "helper process: run by inherited_secrets_and_stale_dsh_variables_never_reach_the_command"]
async fn env_scrub_helper() {
    assert!(
        std::env::var_os("BUILTIN_SCRUB_HELPER").is_some(),
        "a helper process: run by inherited_secrets_and_stale_dsh_variables_never_reach_the_command"
    );
    let w = world().await;
    let command = r#"printf '%s\n' "${HELPER_API_TOKEN-absent}" "${DSH_SESSION_ID-absent}" "${DSH_HOME-absent}" "${HELPER_PLAIN-absent}""#;
    let caller = w.caller("helper-session");
    let text = w.call("bash", bash(command), Some(&caller)).await.text();
    assert_eq!(text, "absent\nhelper-session\nabsent\nvisible\n");
    w.shutdown().await;
}

#[test]
fn inherited_secrets_and_stale_dsh_variables_never_reach_the_command() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "env_scrub_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BUILTIN_SCRUB_HELPER", "1")
        .env("HELPER_API_TOKEN", "hunter2")
        .env("DSH_SESSION_ID", "outer-session")
        .env("DSH_HOME", "/outer/dsh")
        .env("HELPER_PLAIN", "visible")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the helper did not run:\n{stdout}"
    );
}

#[tokio::test]
async fn invalid_arguments_are_specific_error_results() {
    let w = world().await;
    let caller = w.caller("session-a");
    let cases = [
        (
            bash("  "),
            "Error: invalid command: expected a non-empty string",
        ),
        (
            json!({"command": "true", "description": ""}),
            "Error: invalid description: expected a non-empty string",
        ),
        (
            json!({"command": "true", "description": "d", "timeout_ms": -5}),
            "Error: invalid timeout_ms: expected a positive number, got -5",
        ),
        (
            json!({"command": "true", "description": "d", "timeout_ms": 0}),
            "Error: invalid timeout_ms: expected a positive number, got 0",
        ),
    ];
    for (args, want) in cases {
        let result = w.call("bash", args, Some(&caller)).await;
        assert!(result.is_error);
        assert_eq!(result.text(), want);
    }
    let missing = w
        .call("bash", json!({"command": "true"}), Some(&caller))
        .await;
    assert!(missing.is_error);
    assert!(missing.text().contains("description"), "{}", missing.text());
    w.shutdown().await;
}

#[tokio::test]
async fn extra_model_supplied_keys_are_ignored() {
    let w = world().await;
    let args = json!({
        "command": r#"printf '%s' "${INJECTED-unset}""#,
        "description": "try to smuggle an env var",
        "env": {"INJECTED": "yes"},
        "stdin": "data",
    });
    assert_eq!(output(&w, args).await, "unset");
    w.shutdown().await;
}

#[tokio::test]
async fn without_a_shell_executor_bash_fails_clearly() {
    let ctx = Context::new();
    let runtime = ToolRuntime::new(&ctx);
    ctx.provide::<ToolRuntime>(runtime.clone()).unwrap();
    let _plugin = ctx.plugin(BuiltinToolsPlugin).await.unwrap();
    let exec = dsh_tools::ToolExec::new(
        dsh_session::CallId::new("c"),
        "bash",
        bash("true").to_string(),
        None,
        CancellationToken::new(),
    );
    let result = runtime.run(&exec).await;
    assert!(result.is_error);
    assert_eq!(
        result.text(),
        "Error: no shell executor is available in this runtime"
    );
}

#[tokio::test]
async fn a_commands_output_is_published_live_while_it_runs_and_before_its_result() {
    use dsh_session::{LiveUpdate, SessionLiveFired};
    use dsh_tools::{ToolResultNotice, ToolsResult};

    let w = world().await;
    let dir = tempdir();
    let gate = dir.path().join("gate.fifo");
    nix::unistd::mkfifo(&gate, Mode::from_bits_truncate(0o600)).unwrap();
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    let live_tx = tx.clone();
    let _live = w
        .ctx
        .on_global::<SessionLiveFired>(move |n| {
            if let LiveUpdate::ToolOutput { text, call_id, .. } = &n.update {
                assert_eq!(call_id.as_str(), "call-1");
                let _ = live_tx.send(format!("live:{text}"));
            }
        })
        .unwrap();
    let _result = w
        .ctx
        .on_global::<ToolsResult>(move |_n: &ToolResultNotice| {
            let _ = tx.send("result".to_owned());
        })
        .unwrap();
    let caller = w.caller("session-a");
    let command = format!(
        "echo tick-1; read -r _ < {}; echo tick-2",
        gate.to_str().unwrap()
    );
    let call = {
        let runtime = w.runtime.clone();
        let exec = dsh_tools::ToolExec::new(
            dsh_session::CallId::new("call-1"),
            "bash",
            bash(&command).to_string(),
            Some(caller),
            CancellationToken::new(),
        );
        tokio::spawn(async move { runtime.run(&exec).await })
    };
    let first = tokio::time::timeout(PATIENCE, seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, "live:tick-1\n");
    assert!(!call.is_finished(), "shown while the command still runs");
    tokio::task::spawn_blocking(move || std::fs::write(gate, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let result = tokio::time::timeout(PATIENCE, call).await.unwrap().unwrap();
    assert_eq!(result.text(), "tick-1\ntick-2\n");
    let mut rest = Vec::new();
    while let Ok(item) = seen.try_recv() {
        rest.push(item);
    }
    assert_eq!(
        rest,
        ["live:tick-2\n", "result"],
        "every live update precedes the result"
    );
    w.shutdown().await;
}
